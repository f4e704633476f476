"""OP_INSTANCE_RECREATE_DISKS: make the missing volumes of an instance's disks again.

For an instance whose volumes were lost (a replaced disk, a removed LV): the
instance must be stopped; for each selected disk (all by default) the
primary node is asked whether the volume exists (``blockdev_find``), and
the missing ones are created again with the same ``logical_id``, after the
same volume group space check as ``gnt-instance add`` (:mod:`ganeti.cmdlib.lvm`).
As in Ganeti, a selected disk that still exists is refused (before anything
is made): only missing disks are recreated in place; ``[index, {size,
spindles, mode}]`` changes those parameters of the new disk (spindles only
with exclusive storage; not for ``drbd``), written to the config once every
disk is made.  A creation that fails removes the volumes this job made.
``nodes`` naming one other node (every disk selected) makes the disks there
and that node the primary (the way back for an instance whose node is lost;
a ``drbd`` instance takes two, :mod:`instance_recreate_drbd`); or
``iallocator`` picks the node (an ``allocate`` request for the instance,
as Ganeti's; it may be the primary; for ``drbd`` two nodes, and other ones
move the instance as ``nodes`` would).  The data is not restored: reinstall the OS or import.
"""

from __future__ import annotations

import copy
from typing import Any

from ganeti import constants, errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import allocator, disk_wipe, lvm
from ganeti.cmdlib import instance_recreate_drbd as recreate_drbd
from ganeti.cmdlib.common import expand_node
from ganeti.cmdlib.instance import (InstanceLU, check_node_online, check_node_usable,
                                    disk_rpc_dicts)
from ganeti.cmdlib.instance_create import check_disk_specs, check_spindles
from ganeti.objects import Disk, Node
from ganeti.opcodes.instance import OpInstanceRecreateDisks

__all__ = ["LUInstanceRecreateDisks", "selected_disks"]


#: the disk parameters recreate-disks may change (as Ganeti)
CHANGEABLE = frozenset(["size", "spindles", "mode"])


def selected_disks(spec: list[Any], count: int) -> tuple[list[int], dict[int, dict[str, Any]]]:
    """The disk indices of ``spec`` (indices or ``[index, {params}]`` pairs; empty: all)
    and the parameters to change per index (``size`` in MiB, ``spindles``, ``mode``).

    :class:`errors.OpPrereqError` for bad or repeated indices and for other
    or invalid parameters.
    """
    if not spec:
        return list(range(count)), {}
    indices: list[int] = []
    changes: dict[int, dict[str, Any]] = {}
    for entry in spec:
        params: Any = {}
        if isinstance(entry, (list, tuple)) and len(entry) == 2:
            entry, params = entry
        if not isinstance(entry, int) or isinstance(entry, bool) or not 0 <= entry < count:
            raise errors.OpPrereqError(f"Invalid disk index {entry!r} (the instance has"
                                       f" {count} disk(s))", errors.ECODE_INVAL)
        if entry in indices:
            raise errors.OpPrereqError(f"Disk {entry} given twice", errors.ECODE_INVAL)
        if not isinstance(params, dict) or set(params) - CHANGEABLE:
            raise errors.OpPrereqError(f"Disk {entry}: only {', '.join(sorted(CHANGEABLE))}"
                                       f" can be changed while recreating, not {params!r}",
                                       errors.ECODE_INVAL)
        if params:
            changes[entry] = params
        indices.append(entry)
    return sorted(indices), changes


class LUInstanceRecreateDisks(InstanceLU[OpInstanceRecreateDisks]):
    """Recreate missing disk volumes of a stopped instance on its primary node."""

    HPATH = "instance-recreate-disks"

    def CheckInstance(self) -> None:
        inst, op = self.instance, self.op
        if inst.disk_template == constants.DT_DISKLESS or not self.disks:
            raise errors.OpPrereqError(f"Instance {inst.name} has no disks",
                                       errors.ECODE_INVAL)
        self.indices, changes = selected_disks(op.disks, len(self.disks))
        #: a drbd instance's new (primary, secondary) nodes, or None
        self.move_to: tuple[Node, Node] | None = None
        #: the node the disks are made on: the primary, or its replacement (-n NODE)
        self.target: Node = self.pnode
        mirrored = inst.disk_template == constants.DT_DRBD8
        if mirrored and op.nodes:
            nodes = [expand_node(self.cfg, name) for name in op.nodes]
            if [n.uuid for n in nodes] != [inst.primary_node, *(
                    u for u in self.cfg.get_instance_nodes(inst.uuid)
                    if u != inst.primary_node)]:
                self.move_to = recreate_drbd.check_move(self, nodes, self.indices)
        elif op.nodes:
            nodes = [expand_node(self.cfg, name) for name in op.nodes]
            if {n.uuid for n in nodes} != set(self.cfg.get_instance_nodes(inst.uuid)):
                self.target = self._check_target(nodes)
        if op.iallocator:
            chosen = self._ask_allocator()
            if mirrored:
                if [n.uuid for n in chosen] != [inst.primary_node, *(
                        u for u in self.cfg.get_instance_nodes(inst.uuid)
                        if u != inst.primary_node)]:
                    recreate_drbd.check_nothing_left(self)
                    self.move_to = recreate_drbd.check_move(self, chosen, self.indices)
            elif chosen[0].uuid != inst.primary_node:
                self.target = self._check_target(chosen[:1])
        #: the selected disks as they are to be made (with the changed parameters)
        self.wanted = {idx: self._changed(idx, changes.get(idx, {})) for idx in self.indices}
        if self.target is self.pnode and self.move_to is None:
            check_node_online(self.pnode, " as primary node")
        if inst.admin_state == constants.ADMINST_UP:
            raise errors.OpPrereqError(f"Instance {inst.name} is marked to be up; stop it"
                                       " first", errors.ECODE_STATE)
        rpc = self.require_rpc()
        live = None if self.pnode.offline else rpc.call_instance_info(
            self.pnode.name, instance_name=inst.name, hypervisor=inst.hypervisor,
            hvparams={}).one(self.pnode.name)
        if live is not None and live.get("state") == 0:   # as deactivate-disks checks
            raise errors.OpPrereqError(f"Instance {inst.name} is running; stop it first",
                                       errors.ECODE_STATE)
        self.missing: list[tuple[int, Disk]] = []
        if mirrored:
            if self.move_to is None:
                self.missing = recreate_drbd.check_missing(self, self.indices)
            return
        where = self.target.name
        for idx in self.indices:
            disk = self.wanted[idx]
            found = rpc.call_blockdev_find(where, disk=disk_rpc_dicts([disk], self.cfg)[0]).one(
                where, f"Cannot look for disk {idx}")
            if found is not None:     # as Ganeti: only missing disks are recreated
                raise errors.OpPrereqError(
                    f"Disk {idx} of instance {inst.name} exists on node {where};"
                    " recreate-disks makes only missing disks (leave it out with --disk,"
                    " or remove its volume first)", errors.ECODE_STATE)
            self.missing.append((idx, disk))
        lvm.check_vg_free(self, [self.target], lvm.required_vg_sizes(
            (d.logical_id[0], d.size) for _, d in self.missing
            if d.dev_type == constants.DT_PLAIN))

    def _ask_allocator(self) -> list[Node]:
        """The nodes for the disks (primary first; a drbd instance's two), from an
        ``allocate`` request for the instance as it is (as Ganeti asks; the answer may
        be the nodes it has)."""
        inst = self.instance
        request = allocator.allocate_request_for(
            self.cfg.get_cluster_info(), name=inst.name, disk_template=inst.disk_template,
            disks=[{"size": d.size, "mode": d.mode, "spindles": d.spindles} for d in self.disks],
            nics=[{"mac": n.mac, "ip": n.ip, "network": n.network, **n.nicparams}
                  for n in inst.nics],
            beparams=inst.beparams, os_name=inst.os, tags=list(inst.tags),
            hypervisor=inst.hypervisor)
        answer, _ = allocator.ask(self, self.op.iallocator, request)
        answer.require_success(allocator.allocator_name(self, self.op.iallocator)
                               or "ganeti-iallocator")
        nodes = [expand_node(self.cfg, name) for name in answer.nodes]
        self.LogInfo(f"Selected {'nodes' if len(nodes) > 1 else 'node'}"
                     f" {', '.join(n.name for n in nodes)} for the disks via the iallocator")
        return nodes

    def _check_target(self, nodes: list[Node]) -> Node:
        """The one new node of ``-n NODE`` (every disk is made there; as Ganeti)."""
        if len(nodes) != 1:
            raise errors.OpPrereqError(f"A {self.instance.disk_template} instance's disks are"
                                       " recreated on one node: -n NODE", errors.ECODE_INVAL)
        if self.op.disks:
            raise errors.OpPrereqError("Recreating the disks on another node takes all of"
                                       " them (leave out --disk)", errors.ECODE_INVAL)
        check_node_usable(nodes[0], " as new primary node")
        return nodes[0]

    def _changed(self, idx: int, params: dict[str, Any]) -> Disk:
        """Disk ``idx`` with ``params`` applied (a copy; checked as Ganeti checks them)."""
        disk = copy.copy(self.disks[idx])
        if not params:
            return disk
        if self.instance.disk_template == constants.DT_DRBD8:
            raise errors.OpPrereqError("Changing the parameters of a drbd instance's disks"
                                       " while recreating them is not supported",
                                       errors.ECODE_INVAL)
        cluster = self.cfg.get_cluster_info()
        check_spindles([params], lvm.exclusive_storage(
            cluster, self.target, self.cfg.get_nodegroup(self.target.group)), required=False)
        spec = check_disk_specs(self.instance.disk_template, [
            {"size": disk.size, "mode": disk.mode, **params}])[0]
        disk.size, disk.mode = spec["size"], spec["mode"]
        if "spindles" in params:
            disk.spindles = spec.get("spindles")
        return disk

    def HookExtra(self) -> dict[str, Any]:
        return {"RECREATE_DISKS": " ".join(str(i) for i in self.indices)}

    def _remove(self, disks: list[Disk]) -> None:
        for disk in disks:
            res = self.require_rpc().call_blockdev_remove(
                [self.target.name], disk=disk_rpc_dicts([disk], self.cfg)[0]).get(self.target.name)
            if res is None or res.failed:
                self.LogWarning(f"Could not remove disk {disk.iv_name} again")

    def ExpandExtra(self) -> None:
        # the disks may move to other nodes: they are locked too (with an allocator, all)
        if self.op.iallocator and self.op.nodes:
            raise errors.OpPrereqError("Give either nodes or an iallocator, not both",
                                       errors.ECODE_INVAL)
        self.extra_node_uuids = list(self.cfg.get_all_nodes_info()) if self.op.iallocator \
            else [expand_node(self.cfg, name).uuid for name in self.op.nodes]

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst, pname = self.instance, self.target.name
        if self.move_to is not None:
            recreate_drbd.move(self, *self.move_to, feedback_fn)
            return None
        if inst.disk_template == constants.DT_DRBD8 and self.missing:
            recreate_drbd.recreate(self, self.missing, feedback_fn)
            return None
        excl = lvm.exclusive_storage(self.cfg.get_cluster_info(), self.target,
                                     self.cfg.get_nodegroup(self.target.group))
        created: list[Disk] = []
        try:
            for idx, disk in self.missing:
                feedback_fn(f"* recreating disk {idx} ({disk.size} MiB) on {pname}")
                self.require_rpc().call_blockdev_create(
                    pname, disk=disk_rpc_dicts([disk], self.cfg)[0], size=disk.size,
                    owner_instance_name=inst.name, on_primary=True,
                    info=constants.DISK_INFO_PREFIX + inst.name,
                    excl_stor=excl and disk.dev_type == constants.DT_PLAIN,
                ).one(pname, f"Cannot recreate disk {idx} on node {pname}")
                created.append(disk)
            if disk_wipe.wipe_wanted(self):
                disk_wipe.wipe_disks(self, pname, inst.name,
                                     [(i, d, 0) for i, d in self.missing], feedback_fn)
        except BaseException:
            self._remove(created)
            raise
        stored = self.cfg.get_instance_disks(inst.uuid)
        with self.cfg.batch():
            for idx, disk in self.missing:
                if disk != stored[idx] or self.target is not self.pnode:
                    stored[idx].size, stored[idx].mode = disk.size, disk.mode
                    stored[idx].spindles = disk.spindles
                    stored[idx].nodes = [self.target.uuid]
                    self.cfg.update(stored[idx])
            if self.target is not self.pnode:
                feedback_fn(f"* {inst.name}'s primary node is now {pname}")
                inst.primary_node = self.target.uuid
                self.cfg.update(inst)
        return None
