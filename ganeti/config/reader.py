"""ConfigReader: the read side of the configuration (getters over one tree).

:class:`ConfigReader` answers every question about one
:class:`~ganeti.objects.ConfigData` tree: objects by UUID or name, lists,
the master, instance nodes, a consistency check.  It changes nothing.
:class:`ganeti.config.writer.ConfigWriter` is a ConfigReader over its
working tree (with its re-entrant config lock) plus the mutators.

The name index and the MAC set are caches built on first use; the writer
drops (``_invalidate``) or extends (``_index_add``) them as it changes the
tree.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager

from ganeti import errors
from ganeti.config import check as configcheck
from ganeti.objects import (Cluster, ConfigData, Disk, Instance, Network, Node, NodeGroup,
                            instance_all_nodes)

__all__ = ["ConfigReader"]


class ConfigReader:
    """Read-only access to the config tree ``data``.

    Every getter runs under ``lock`` (a no-op by default: right for a tree
    nobody changes).  Getters return the stored objects themselves, never
    copies.
    """

    def __init__(self, data: ConfigData, lock: ContextManager[object] | None = None) -> None:
        self._data = data
        self._lock: ContextManager[object] = lock if lock is not None else contextlib.nullcontext()
        # caches, rebuilt lazily; the writer's adds update them, other changes drop them
        self._name_index: dict[str, dict[str, str]] | None = None
        self._mac_cache: set[str] | None = None

    # ------------------------------------------------------------------
    # caches

    def _invalidate(self) -> None:
        self._name_index = None
        self._mac_cache = None

    def _index_add(self, kind: str, name: str, uuid: str) -> None:
        if self._name_index is not None:
            self._name_index[kind][name] = uuid

    def _names(self) -> dict[str, dict[str, str]]:
        if self._name_index is None:
            d = self._data
            self._name_index = {
                "node": {n.name: u for u, n in d.nodes.items()},
                "instance": {i.name: u for u, i in d.instances.items()},
                "nodegroup": {g.name: u for u, g in d.nodegroups.items()},
                "network": {n.name: u for u, n in d.networks.items()},
            }
        return self._name_index

    def _all_macs(self) -> set[str]:
        if self._mac_cache is None:
            self._mac_cache = {nic.mac.lower() for inst in self._data.instances.values()
                               for nic in inst.nics if nic.mac}
        return self._mac_cache

    def is_mac_in_use(self, mac: str) -> bool:
        """Whether a NIC of an instance in this configuration has ``mac`` (any case).

        Answered from a set kept between calls (an add updates it), not by
        a pass over every instance: a create asks it for each of its NICs.
        """
        with self._lock:
            return mac.lower() in self._all_macs()

    # ------------------------------------------------------------------
    # whole config

    def get_config_data(self) -> ConfigData:
        """The root object itself (careful: changes must go through mutators)."""
        with self._lock:
            return self._data

    def get_serial_no(self) -> int:
        """The config's serial number."""
        with self._lock:
            return self._data.serial_no

    def get_filters(self) -> dict[str, dict[str, Any]]:
        """The job filter rules, by UUID (doc/jobfilters.md); stored dicts."""
        with self._lock:
            return self._data.filters

    def get_cluster_info(self) -> Cluster:
        """The Cluster object itself."""
        with self._lock:
            return self._data.cluster

    # ------------------------------------------------------------------
    # nodes

    def get_node_info(self, uuid: str) -> Node | None:
        """The node with ``uuid``, or None."""
        with self._lock:
            return self._data.nodes.get(uuid)

    def get_node_info_by_name(self, name: str) -> Node | None:
        """The node called ``name``, or None."""
        with self._lock:
            uuid = self._names()["node"].get(name)
            return None if uuid is None else self._data.nodes[uuid]

    def get_all_nodes_info(self) -> dict[str, Node]:
        """All nodes, by UUID (a new dict of the stored objects)."""
        with self._lock:
            return dict(self._data.nodes)

    def get_node_list(self) -> list[str]:
        """UUIDs of all nodes, sorted by node name."""
        with self._lock:
            return [n.uuid for n in sorted(self._data.nodes.values(), key=lambda n: n.name)]

    def get_node_names(self) -> list[str]:
        """Names of all nodes, sorted."""
        with self._lock:
            return sorted(n.name for n in self._data.nodes.values())

    def get_online_node_list(self) -> list[str]:
        """UUIDs of the nodes that are not offline, sorted by name."""
        with self._lock:
            return [n.uuid for n in sorted(self._data.nodes.values(), key=lambda n: n.name)
                    if not n.offline]

    def get_master_node(self) -> str:
        """UUID of the master node."""
        with self._lock:
            return self._data.cluster.master_node

    def get_master_node_name(self) -> str:
        """Name of the master node ('' if unknown)."""
        with self._lock:
            node = self._data.nodes.get(self._data.cluster.master_node)
            return node.name if node else ""

    def get_master_candidates(self) -> list[Node]:
        """The master candidate nodes, sorted by name."""
        with self._lock:
            return sorted((n for n in self._data.nodes.values() if n.master_candidate),
                          key=lambda n: n.name)

    def node_instances(self, node_uuid: str) -> tuple[list[str], list[str]]:
        """``(primary, secondary)`` instance UUIDs of a node."""
        with self._lock:
            primary, secondary = [], []
            for inst in self._data.instances.values():
                if inst.primary_node == node_uuid:
                    primary.append(inst.uuid)
                elif node_uuid in self._instance_nodes(inst):
                    secondary.append(inst.uuid)
            return primary, secondary

    # ------------------------------------------------------------------
    # node groups

    def get_nodegroup(self, uuid: str) -> NodeGroup | None:
        """The node group with ``uuid``, or None."""
        with self._lock:
            return self._data.nodegroups.get(uuid)

    def get_nodegroup_by_name(self, name: str) -> NodeGroup | None:
        """The node group called ``name``, or None."""
        with self._lock:
            uuid = self._names()["nodegroup"].get(name)
            return None if uuid is None else self._data.nodegroups[uuid]

    def get_network(self, uuid: str) -> Network | None:
        """The network with ``uuid``, or None."""
        with self._lock:
            return self._data.networks.get(uuid)

    def get_network_by_name(self, name: str) -> Network | None:
        """The network called ``name``, or None."""
        with self._lock:
            uuid = self._names()["network"].get(name)
            return None if uuid is None else self._data.networks[uuid]

    def get_all_networks_info(self) -> dict[str, Network]:
        """All networks, by UUID."""
        with self._lock:
            return self._data.networks

    def get_all_nodegroups_info(self) -> dict[str, NodeGroup]:
        """All node groups, by UUID."""
        with self._lock:
            return dict(self._data.nodegroups)

    def get_default_nodegroup(self) -> str:
        """UUID of the default group: the first one by creation time.

        Raises :class:`errors.ConfigurationError` if there is no group.
        """
        with self._lock:
            if not self._data.nodegroups:
                raise errors.ConfigurationError("The configuration has no node group")
            return min(self._data.nodegroups.values(), key=lambda g: (g.ctime, g.name)).uuid

    # ------------------------------------------------------------------
    # instances and disks

    def get_instance_info(self, uuid: str) -> Instance | None:
        """The instance with ``uuid``, or None."""
        with self._lock:
            return self._data.instances.get(uuid)

    def get_instance_info_by_name(self, name: str) -> Instance | None:
        """The instance called ``name``, or None."""
        with self._lock:
            uuid = self._names()["instance"].get(name)
            return None if uuid is None else self._data.instances[uuid]

    def get_all_instances_info(self) -> dict[str, Instance]:
        """All instances, by UUID."""
        with self._lock:
            return dict(self._data.instances)

    def get_private_values(self) -> list[Any]:
        """Every private value the config holds: the instances' private OS
        parameters and the cluster's private OS parameter defaults (what
        :mod:`ganeti.redact` scrubs from texts)."""
        with self._lock:
            values: list[Any] = [v for inst in self._data.instances.values()
                                 for v in inst.osparams_private.values()]
            values += [v for params in self._data.cluster.osparams_private_cluster.values()
                       for v in params.values()]
            return values

    def get_instance_names(self) -> list[str]:
        """Names of all instances, sorted."""
        with self._lock:
            return sorted(i.name for i in self._data.instances.values())

    def get_instance_disks(self, inst_uuid: str) -> list[Disk]:
        """The Disk objects of an instance, in order.

        Raises :class:`errors.ConfigurationError` for an unknown instance.
        """
        with self._lock:
            inst = self._get_instance(inst_uuid)
            return [self._data.disks[d] for d in inst.disks if d in self._data.disks]

    def get_instance_nodes(self, inst_uuid: str) -> list[str]:
        """UUIDs of all nodes of an instance, the primary first."""
        with self._lock:
            return self._instance_nodes(self._get_instance(inst_uuid))

    def get_instance_secondary_nodes(self, inst_uuid: str) -> list[str]:
        """UUIDs of the non-primary nodes of an instance."""
        with self._lock:
            inst = self._get_instance(inst_uuid)
            return [n for n in self._instance_nodes(inst) if n != inst.primary_node]

    def get_disk_info(self, uuid: str) -> Disk | None:
        """The disk with ``uuid``, or None."""
        with self._lock:
            return self._data.disks.get(uuid)

    def _get_instance(self, uuid: str) -> Instance:
        inst = self._data.instances.get(uuid)
        if inst is None:
            raise errors.ConfigurationError(f"Unknown instance {uuid}")
        return inst

    def _instance_nodes(self, inst: Instance) -> list[str]:
        disks = [self._data.disks[d] for d in inst.disks if d in self._data.disks]
        return instance_all_nodes(inst, disks)

    # ------------------------------------------------------------------
    # verification

    def verify_config(self) -> list[str]:
        """Check the configuration's consistency; returns readable problems."""
        with self._lock:
            return configcheck.check_config(self._data)
