"""Instance and node events from configuration changes.

:class:`ConfigEventTracker` is fed by the configuration writer's change
hook (:class:`ganeti.config.ConfigWriter` ``on_change``: after every
durable write, config lock held, in serial order).  It compares a small
digest of every instance (admin state, primary node) and node (role,
flags) with the previous one and publishes the differences on an
:class:`ganeti.events.EventBus`: a start or stop LU shows up as one
``instance.state`` event, ``gnt-node modify -C/-D/-O`` as one
``node.role`` event, whichever LU did it (doc/protocols/events.md,
"Instance and node events").

It reads the committed tree (``cfg.committed()``), which during the hook
is exactly the tree of the write being reported.  Objects of committed
trees are never changed once published (:mod:`ganeti.config.commit`), so
only the instances that are not the same objects as in the previous tree
get a new digest: one start costs one digest, not 10,000, and one create
one digest, not a digest of every instance
(:func:`ganeti.config.commit.changed_keys`, doc/scale.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ganeti import events as ev
from ganeti.config.commit import changed_keys
from ganeti.objects import ConfigData, Instance, Node

__all__ = ["ConfigEventTracker", "node_role_name", "ROLE_MASTER", "ROLE_CANDIDATE",
           "ROLE_DRAINED", "ROLE_OFFLINE", "ROLE_REGULAR"]

#: Node role names, as RAPI's ``/2/nodes/[node]/role``.
ROLE_MASTER = "master"
ROLE_CANDIDATE = "master-candidate"
ROLE_DRAINED = "drained"
ROLE_OFFLINE = "offline"
ROLE_REGULAR = "regular"


def node_role_name(node: Node, master_uuid: str) -> str:
    """The node's role: master, master-candidate, drained, offline or regular."""
    if node.uuid == master_uuid:
        return ROLE_MASTER
    if node.master_candidate:
        return ROLE_CANDIDATE
    if node.drained:
        return ROLE_DRAINED
    if node.offline:
        return ROLE_OFFLINE
    return ROLE_REGULAR


class _InstanceDigest(NamedTuple):
    name: str
    admin_state: str
    admin_state_source: str
    primary_node: str


class _NodeDigest(NamedTuple):
    name: str
    role: str
    master_candidate: bool
    drained: bool
    offline: bool


def _instances(data: ConfigData) -> dict[str, _InstanceDigest]:
    nodes = data.nodes
    return {uuid: _instance_digest(inst, nodes) for uuid, inst in data.instances.items()}


def _instance_digest(inst: Instance, nodes: Mapping[str, Node]) -> _InstanceDigest:
    primary = nodes.get(inst.primary_node)
    return _InstanceDigest(inst.name, inst.admin_state, inst.admin_state_source,
                           primary.name if primary is not None else inst.primary_node)


def _nodes(data: ConfigData) -> dict[str, _NodeDigest]:
    master = data.cluster.master_node
    return {uuid: _NodeDigest(node.name, node_role_name(node, master), node.master_candidate,
                              node.drained, node.offline)
            for uuid, node in data.nodes.items()}


class ConfigEventTracker:
    """Publishes instance and node changes between two configuration writes.

    Construct it with the committed configuration as loaded (nothing is
    published for that), then call :meth:`on_change` with the committed
    tree from the writer's change hook.  The trees must be committed ones
    (never changed in place): an instance that is the same object as in
    the previous tree is taken as unchanged.
    """

    def __init__(self, bus: ev.EventBus, data: ConfigData) -> None:
        self._bus = bus
        self._store: Mapping[str, Instance] = data.instances
        self._instances = _instances(data)
        self._nodes = _nodes(data)

    def on_change(self, data: ConfigData) -> None:
        """Compare ``data`` (the committed tree) with the last call; publish the differences."""
        nodes = _nodes(data)
        # a digest holds the primary node's name: a node renamed, added or
        # removed redoes them all
        same_names = nodes.keys() == self._nodes.keys() and all(
            nodes[uuid].name == digest.name for uuid, digest in self._nodes.items())
        if not same_names:
            instances = _instances(data)
            if instances != self._instances:
                self._instance_events(self._instances, instances)
        else:
            instances = self._instances
            changed, removed = changed_keys(self._store, data.instances)
            if changed or removed:
                instances = dict(instances)
                old = {uuid: instances.pop(uuid) for uuid in removed}
                old.update((uuid, instances[uuid]) for uuid in changed if uuid in instances)
                new = {uuid: _instance_digest(data.instances[uuid], data.nodes)
                       for uuid in changed}
                instances.update(new)
                self._instance_events(old, new)
        if nodes != self._nodes:
            self._node_events(self._nodes, nodes)
        self._store, self._instances, self._nodes = data.instances, instances, nodes

    def _instance_events(self, old: Mapping[str, _InstanceDigest],
                         new: Mapping[str, _InstanceDigest]) -> None:
        publish = self._bus.publish
        for uuid, gone in old.items():
            if uuid not in new:
                publish(ev.EV_INSTANCE_REMOVED, instance=gone.name, node=gone.primary_node,
                        data={"uuid": uuid})
        for uuid, now in new.items():
            before = old.get(uuid)
            if before is None:
                publish(ev.EV_INSTANCE_ADDED, instance=now.name, node=now.primary_node,
                        data={"uuid": uuid, "status": now.admin_state})
            elif (now.admin_state, now.admin_state_source, now.primary_node) != (
                    before.admin_state, before.admin_state_source, before.primary_node):
                publish(ev.EV_INSTANCE_STATE, instance=now.name, node=now.primary_node, data={
                    "uuid": uuid, "status": now.admin_state,
                    "admin_state_source": now.admin_state_source,
                    "previous_status": before.admin_state,
                    "primary_node": now.primary_node,
                    "previous_primary_node": before.primary_node})

    def _node_events(self, old: Mapping[str, _NodeDigest],
                     new: Mapping[str, _NodeDigest]) -> None:
        publish = self._bus.publish
        for uuid, gone in old.items():
            if uuid not in new:
                publish(ev.EV_NODE_REMOVED, node=gone.name, data={"uuid": uuid})
        for uuid, now in new.items():
            node_before = old.get(uuid)
            flags = {"role": now.role, "master_candidate": now.master_candidate,
                     "drained": now.drained, "offline": now.offline}
            if node_before is None:
                publish(ev.EV_NODE_ADDED, node=now.name, data={"uuid": uuid, **flags})
            elif node_before[1:] != now[1:]:
                publish(ev.EV_NODE_ROLE, node=now.name, data={
                    "uuid": uuid, **flags, "previous_role": node_before.role})
