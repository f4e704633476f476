"""Shared helpers of the instance logical units, and the base LU class.

The instance LUs live in topic modules (``instance_create``,
``instance_operation``, ``instance_migration``, ``instance_set_params``,
``instance_query``); this module holds what they share:

* :class:`InstanceLU`: locks the instance (by name, exclusively) and the
  nodes of its disks (by UUID, shared, so that operations on different
  instances of one node run in parallel), expands the name and builds the
  hooks environment (doc/protocols/hooks.md, "Instance operations").
* RPC payloads: :func:`instance_rpc_dict` (the instance with *filled*
  hv/be/os/nic parameters plus ``disks_info``) and :func:`disk_rpc_dicts`.
* :func:`file_logical_id` (the master-side twin of the storage plug-in's
  naming rule; cmdlib may not import storage) and :func:`runtime_status`.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

from ganeti import constants, errors, locking, parameters, serializer
from ganeti.cmdlib import drbd, instance_networks
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.common import find_instance
from ganeti.config import ConfigReader, ConfigWriter
from ganeti.objects import Cluster, Disk, Instance, Node
from ganeti.opcodes.instance import OpInstanceBase
from ganeti.pathutils import Paths
from ganeti.private import Private, reveal

__all__ = [
    "with_secret_osparams",
    "InstanceLU", "expand_instance", "instance_rpc_dict", "disk_rpc_dicts",
    "file_logical_id", "storage_dir_for", "check_node_usable", "runtime_status", "instance_hook_env",
    "check_node_online", "add_instance_lock", "remove_instance_lock",
    "hv_list_and_params", "InstanceOpT", "check_device_names",
]

#: The opcode of an :class:`InstanceLU` (it names the instance).
InstanceOpT = TypeVar("InstanceOpT", bound=OpInstanceBase)

_CANONICAL = Paths(root="/")


def expand_instance(cfg: ConfigWriter, name: str) -> Instance:
    """The instance called ``name`` (or a unique short name of it);
    OpPrereqError ``ECODE_NOENT`` if unknown."""
    inst = find_instance(cfg, name)
    if inst is None:
        raise errors.OpPrereqError(f"Instance '{name}' not known", errors.ECODE_NOENT)
    return inst


def check_node_online(node: Node, what: str = "") -> None:
    """Refuse offline nodes (ECODE_STATE)."""
    if node.offline:
        raise errors.OpPrereqError(f"Can't use offline node {node.name}{what}",
                                   errors.ECODE_STATE)


def check_device_names(kind: str, items: list[tuple[str | None, str | None]]) -> None:
    """Refuse, as Ganeti does, bad names among one instance's disks (or NICs).

    ``items`` is ``(uuid, name)`` per device (uuid None for a new one; name
    None or ``none`` for none).  A name may not be a number (it would read
    as an index), the name of another device or another device's UUID
    (:class:`errors.OpPrereqError`, ``ECODE_INVAL``/``ECODE_NOTUNIQUE``).
    """
    taken = {uuid for uuid, _ in items if uuid}
    for _, given in items:
        name = None if given is None else str(given)   # an API may send a number
        if name is None or name.lower() == "none":
            continue
        try:
            int(name)
        except ValueError:
            pass
        else:
            raise errors.OpPrereqError(f"Invalid {kind} name '{name}': a name may not be a"
                                       " number (it would read as an index)",
                                       errors.ECODE_INVAL)
        if name in taken:
            raise errors.OpPrereqError(f"The {kind} name '{name}' is already used by another"
                                       f" {kind} of the instance", errors.ECODE_NOTUNIQUE)
        taken.add(name)


def check_node_usable(node: Node, what: str = "") -> None:
    """Refuse ``node`` for new instance disks: offline, drained or not vm_capable
    (:class:`errors.OpPrereqError`; ``what`` says its role, as for
    :func:`check_node_online`)."""
    check_node_online(node, what)
    if node.drained:
        raise errors.OpPrereqError(f"Can't use drained node {node.name}", errors.ECODE_STATE)
    if not node.vm_capable:
        raise errors.OpPrereqError(f"Node {node.name} is not vm_capable", errors.ECODE_STATE)


def storage_dir_for(cluster: Cluster, template: str, subdir: str | None = None,
                    master_root: str | None = None) -> str:
    """The (canonical) storage directory of a file based template.

    A node-local ``file`` directory recorded below the master's own root
    (virtual clusters: ``<root>/srv/ganeti/file-storage``) is made canonical
    (``/srv/ganeti/file-storage``) so that every node takes it below its own
    root.  ``sharedfile`` directories are kept as written: one directory
    seen by every node.
    """
    if template == constants.DT_SHARED_FILE:
        base = cluster.shared_file_storage_dir or _CANONICAL.shared_file_storage_dir
    else:
        base = cluster.file_storage_dir or _CANONICAL.file_storage_dir
        if master_root and os.path.realpath(master_root) != os.sep:
            root = os.path.normpath(master_root)
            norm = os.path.normpath(base)
            if norm.startswith(root.rstrip(os.sep) + os.sep):
                base = os.sep + os.path.relpath(norm, root)
    if subdir:
        sub = os.path.normpath(subdir).lstrip(os.sep)
        if sub.startswith(".."):
            raise errors.OpPrereqError(f"Invalid file storage directory '{subdir}'",
                                       errors.ECODE_INVAL)
        base = os.path.join(base, sub)
    return base


def file_logical_id(storage_dir: str, instance_name: str, disk_uuid: str, index: int,
                    driver: str = "loop") -> list[str]:
    """``[driver, "<dir>/<instance>/<uuid>.file.disk<N>"]`` (as storage.filestorage)."""
    return [driver, os.path.join(storage_dir, instance_name, f"{disk_uuid}.file.disk{index}")]


def disk_rpc_dicts(disks: list[Disk], cfg: ConfigReader | None = None) -> list[dict[str, Any]]:
    """Disks as the node procedures take them (a DRBD disk needs ``cfg``:
    :func:`ganeti.cmdlib.drbd.rpc_disk`)."""
    return drbd.rpc_disks(disks, cfg)


def instance_rpc_dict(cfg: ConfigReader, inst: Instance, disks: list[Disk] | None = None, *,
                      beparams: dict[str, Any] | None = None,
                      hvparams: dict[str, Any] | None = None) -> dict[str, Any]:
    """The instance for node RPC: filled hv/be/os/nic parameters + ``disks_info``.

    ``beparams``/``hvparams`` are temporary overrides (startup).
    """
    cluster = cfg.get_cluster_info()
    data = serializer.to_data(inst)
    data["hvparams"] = parameters.fill_dict(parameters.fill_instance_hvparams(cluster, inst),
                                            hvparams)
    data["beparams"] = parameters.fill_dict(parameters.fill_instance_beparams(cluster, inst),
                                            beparams)
    data["osparams"] = parameters.fill_osparams(cluster, inst.os, inst.osparams) if inst.os \
        else dict(inst.osparams)
    for nic in data["nics"]:
        nic["nicparams"] = parameters.fill_nicparams(cluster, nic.get("nicparams"))
    netinfo = instance_networks.netinfo_list(cfg, inst.nics)
    if netinfo is not None:
        data["nics_netinfo"] = netinfo
    if disks is None:
        disks = cfg.get_instance_disks(inst.uuid)
    data["disks_info"] = disk_rpc_dicts(disks, cfg)
    return data


def with_secret_osparams(data: dict[str, Any],
                         secret: dict[str, Private] | None) -> dict[str, Any]:
    """``data`` (an instance RPC dict) with the operation's secret OS parameters
    added to its private ones: the node gives them to the OS scripts and
    scrubs them like private ones; they are never stored (the config keeps
    the instance without them).  Changes and returns ``data``.
    """
    if secret:
        data["osparams_private"] = {**(data.get("osparams_private") or {}), **reveal(secret)}
    return data


def hv_list_and_params(cfg: ConfigReader) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``(enabled hypervisors, {hv: filled cluster hvparams})`` for listing calls."""
    cluster = cfg.get_cluster_info()
    hvs = list(cluster.enabled_hypervisors)
    return hvs, {hv: parameters.fill_hvparams(cluster, hv) for hv in hvs}


def runtime_status(inst: Instance, pnode: Node | None, live: dict[str, Any] | None,
                   node_failed: bool, elsewhere: bool) -> str:
    """The instance status (doc/protocols/query.md, "Instance status").

    ``live`` is the primary node's entry for the instance (None: not
    running there), ``node_failed`` whether the primary did not answer and
    ``elsewhere`` whether another node runs it.
    """
    if pnode is not None and pnode.offline:
        return constants.INSTST_NODEOFFLINE
    if node_failed:
        return constants.INSTST_NODEDOWN
    if live is not None:
        if live.get("state") == 1 or live.get("hv_state") in ("shutdown", "crashed"):
            if live.get("hv_state") == "shutdown":
                return constants.INSTST_USERDOWN
            return constants.INSTST_ERRORDOWN if inst.admin_state == constants.ADMINST_UP \
                else constants.INSTST_ADMINDOWN
        if inst.admin_state == constants.ADMINST_UP:
            return constants.INSTST_RUNNING
        return constants.INSTST_ERRORUP
    if elsewhere:
        return constants.INSTST_WRONGNODE
    if inst.admin_state == constants.ADMINST_UP:
        if inst.admin_state_source == constants.USER_SOURCE:
            return constants.INSTST_USERDOWN
        return constants.INSTST_ERRORDOWN
    if inst.admin_state == constants.ADMINST_OFFLINE:
        return constants.INSTST_ADMINOFFLINE
    return constants.INSTST_ADMINDOWN


def instance_hook_env(cfg: ConfigWriter, inst: Instance, disks: list[Disk] | None = None,
                      override: dict[str, Any] | None = None) -> dict[str, Any]:
    """The INSTANCE_* hooks environment (keys without ``GANETI_``)."""
    cluster = cfg.get_cluster_info()
    if disks is None:
        disks = cfg.get_instance_disks(inst.uuid) if inst.uuid in \
            cfg.get_config_data().instances else []
    pnode = cfg.get_node_info(inst.primary_node)
    snodes = []
    for disk in disks:
        for n in disk.nodes[1:]:
            node = cfg.get_node_info(n)
            if node is not None and node.name not in snodes:
                snodes.append(node.name)
    be = parameters.fill_instance_beparams(cluster, inst)
    hv = parameters.fill_instance_hvparams(cluster, inst)
    env: dict[str, Any] = {
        "INSTANCE_NAME": inst.name,
        "INSTANCE_PRIMARY": pnode.name if pnode else inst.primary_node,
        "INSTANCE_SECONDARY": " ".join(snodes),
        "INSTANCE_OS_TYPE": inst.os,
        "INSTANCE_STATUS": inst.admin_state,
        "INSTANCE_MEMORY": be.get("maxmem"),
        "INSTANCE_MINMEM": be.get("minmem"),
        "INSTANCE_MAXMEM": be.get("maxmem"),
        "INSTANCE_VCPUS": be.get("vcpus"),
        "INSTANCE_DISK_TEMPLATE": inst.disk_template,
        "INSTANCE_HYPERVISOR": inst.hypervisor,
        "INSTANCE_DISK_COUNT": len(disks),
        "INSTANCE_NIC_COUNT": len(inst.nics),
        "INSTANCE_TAGS": " ".join(sorted(inst.tags)),
    }
    for idx, disk in enumerate(disks):
        env[f"INSTANCE_DISK{idx}_SIZE"] = disk.size
        env[f"INSTANCE_DISK{idx}_MODE"] = disk.mode
        env[f"INSTANCE_DISK{idx}_NAME"] = disk.name or ""
        env[f"INSTANCE_DISK{idx}_UUID"] = disk.uuid
    for idx, nic in enumerate(inst.nics):
        nicp = parameters.fill_nicparams(cluster, nic.nicparams)
        env[f"INSTANCE_NIC{idx}_MAC"] = nic.mac
        env[f"INSTANCE_NIC{idx}_IP"] = nic.ip or ""
        env[f"INSTANCE_NIC{idx}_MODE"] = nicp.get("mode")
        env[f"INSTANCE_NIC{idx}_LINK"] = nicp.get("link")
        env[f"INSTANCE_NIC{idx}_NAME"] = nic.name or ""
        env[f"INSTANCE_NIC{idx}_UUID"] = nic.uuid
        env[f"INSTANCE_NIC{idx}_VLAN"] = nicp.get("vlan", "")
        net = cfg.get_network(nic.network) if nic.network else None
        if net is not None:
            env.update(instance_networks.network_env(net, f"INSTANCE_NIC{idx}_"))
        if nicp.get("mode") in (constants.NIC_MODE_BRIDGED, constants.NIC_MODE_OVS):
            env[f"INSTANCE_NIC{idx}_BRIDGE"] = nicp.get("link")
    for key, value in be.items():
        env[f"INSTANCE_BE_{key}"] = value
    for key, value in hv.items():
        env[f"INSTANCE_HV_{key}"] = value
    env.update(override or {})
    return env


def add_instance_lock(lu: LogicalUnit[Any], name: str) -> None:
    """Create the lock of a new instance name (tolerates an existing one)."""
    if lu.glm is None:
        return
    try:
        lu.glm.add(locking.LEVEL_INSTANCE, name)
    except errors.LockError:
        pass  # someone else created it; whoever holds it decides


def remove_instance_lock(lu: LogicalUnit[Any], name: str) -> None:
    """Drop the (held, exclusive) lock of a gone instance name."""
    if lu.glm is None:
        return
    try:
        lu.glm.remove(locking.LEVEL_INSTANCE, name)
    except errors.LockError:
        pass


class InstanceLU(LogicalUnit[InstanceOpT]):
    """Base of LUs acting on one existing instance (``op.instance_name``).

    Locks: the instance exclusively; its nodes (node and node-res levels)
    shared, plus ``self.extra_node_uuids`` (e.g. a migration target).
    Subclasses set ``NODE_LOCKS_EXCLUSIVE`` to take the node locks
    exclusively.  ``self.instance`` is set in CheckPrereq (re-read under
    the locks).
    """

    HTYPE = constants.HTYPE_INSTANCE
    REQ_BGL = False
    NODE_LOCKS_EXCLUSIVE = False
    LOCK_NODES = True

    def ExpandNames(self) -> None:
        inst = expand_instance(self.cfg, self.op.instance_name)
        self.op.instance_name = inst.name
        self.extra_node_uuids: list[str] = []
        self.ExpandExtra()
        self.needed_locks = {locking.LEVEL_INSTANCE: [inst.name]}
        if self.LOCK_NODES:
            self.needed_locks[locking.LEVEL_NODE] = []
            self.needed_locks[locking.LEVEL_NODE_RES] = []
            if not self.NODE_LOCKS_EXCLUSIVE:
                self.share_locks = {locking.LEVEL_NODE: 1, locking.LEVEL_NODE_RES: 1}

    def ExpandExtra(self) -> None:
        """Hook for subclasses: expand more names, fill extra_node_uuids."""

    def DeclareLocks(self, level: int) -> None:
        if level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES) and self.LOCK_NODES:
            inst = expand_instance(self.cfg, self.op.instance_name)
            nodes = list(self.cfg.get_instance_nodes(inst.uuid))
            for uuid in self.extra_node_uuids:
                if uuid not in nodes:
                    nodes.append(uuid)
            self.needed_locks[level] = nodes

    def CheckPrereq(self) -> None:
        self.instance = expand_instance(self.cfg, self.op.instance_name)
        self.disks = self.cfg.get_instance_disks(self.instance.uuid)
        pnode = self.cfg.get_node_info(self.instance.primary_node)
        if pnode is None:
            raise errors.ConfigurationError(f"Primary node {self.instance.primary_node} of instance"
                                             f" {self.instance.name} is not in the configuration")
        self.pnode: Node = pnode
        if self.glm is not None and self.LOCK_NODES:
            held = self.owned_locks(locking.LEVEL_NODE)
            missing = [n for n in self.cfg.get_instance_nodes(self.instance.uuid) if n not in held]
            if missing:
                raise errors.OpPrereqError(
                    f"Instance {self.instance.name}'s nodes changed while waiting for locks;"
                    " retry the operation", errors.ECODE_STATE)
        self.CheckInstance()

    def CheckInstance(self) -> None:
        """Subclass checks, with ``self.instance``/``disks``/``pnode`` set."""

    # hooks ---------------------------------------------------------------------
    def BuildHooksEnv(self) -> dict[str, Any]:
        return instance_hook_env(self.cfg, self.instance, self.disks, self.HookExtra())

    def HookExtra(self) -> dict[str, Any]:
        """Extra hook variables of the subclass."""
        return {}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        master = self.cfg.get_master_node_name() if self.cfg.get_cluster_info().master_node \
            else None
        names = [master] if master else []
        for uuid in self.cfg.get_instance_nodes(self.instance.uuid) \
                if self.instance.uuid in self.cfg.get_config_data().instances else []:
            node = self.cfg.get_node_info(uuid)
            if node is not None and node.name not in names:
                names.append(node.name)
        return names, names

    # helpers ---------------------------------------------------------------------
    def rpc_instance(self, **kwargs: Any) -> dict[str, Any]:
        """The instance dict for node RPC (fresh from the config)."""
        return instance_rpc_dict(self.cfg, self.instance,
                                 self.cfg.get_instance_disks(self.instance.uuid), **kwargs)
