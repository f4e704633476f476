"""The iallocator input document, version 2 (doc/protocols/iallocator.md, "Input").

:func:`build_input` turns a configuration snapshot plus the nodes' live
figures into the document an allocator reads: cluster keys, ``nodegroups``
(with their filled ipolicy and ``alloc_policy``), ``nodes`` (static keys for
all, live figures for the usable ones), ``instances`` and ``request``.
The ``*_request`` functions build the ``request`` dict of each type, so that
every caller (the LUs, ``gnt-debug iallocator``, the tests) sends the same
keys.  Pure: no RPC, no files; the caller passes the live data in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ganeti import constants, errors, ipolicy, parameters
from ganeti.objects import Cluster, ConfigData, Disk, Instance, Node, NodeGroup

__all__ = ["VERSION", "REQ_ALLOCATE", "REQ_MULTI_ALLOCATE", "REQ_RELOCATE",
           "REQ_NODE_EVACUATE", "REQ_CHANGE_GROUP", "REQ_ALLOCATE_SECONDARY", "REQUEST_TYPES",
           "EVAC_MODES", "build_input", "allocate_request", "multi_allocate_request",
           "relocate_request", "allocate_secondary_request",
           "node_evacuate_request", "change_group_request", "required_nodes",
           "disk_space_total", "group_ipolicy", "check_request", "IpolicyFn"]

VERSION = 2
REQ_ALLOCATE = "allocate"
REQ_MULTI_ALLOCATE = "multi-allocate"
REQ_RELOCATE = "relocate"
REQ_NODE_EVACUATE = "node-evacuate"
REQ_CHANGE_GROUP = "change-group"
#: a secondary node for a ``plain`` instance about to become ``drbd`` (modify -t drbd -I)
REQ_ALLOCATE_SECONDARY = "allocate-secondary"
REQUEST_TYPES = (REQ_ALLOCATE, REQ_MULTI_ALLOCATE, REQ_RELOCATE, REQ_NODE_EVACUATE,
                 REQ_CHANGE_GROUP, REQ_ALLOCATE_SECONDARY)
EVAC_MODES = constants.NODE_EVAC_MODES

#: ``(cluster, group) -> the group's effective ipolicy``
IpolicyFn = Callable[[Cluster, NodeGroup | None], dict[str, Any]]


def group_ipolicy(cluster: Cluster, group: NodeGroup | None) -> dict[str, Any]:
    """The effective ipolicy of ``group`` (the cluster's when None): its own keys
    over the cluster's (:func:`ganeti.ipolicy.fill_ipolicy`, doc/ipolicy.md)."""
    return ipolicy.fill_ipolicy(cluster.ipolicy, group.ipolicy if group is not None else None)


def required_nodes(template: str) -> int:
    """How many nodes an instance of ``template`` needs (2 for DRBD, else 1)."""
    return 2 if template in constants.DTS_INT_MIRROR else 1


def disk_space_total(template: str, disks: Sequence[Mapping[str, Any]]) -> int:
    """MiB the disks use on each of their nodes (DRBD adds 128 MiB of metadata each)."""
    if template == constants.DT_DISKLESS:
        return 0
    if template in constants.DTS_INT_MIRROR:
        return sum(int(d.get("size", 0)) + 128 for d in disks)
    if template in (constants.DT_SHARED_FILE, constants.DT_RBD, constants.DT_EXT,
                    constants.DT_GLUSTER):
        return 0
    return sum(int(d.get("size", 0)) for d in disks)


def allocate_request(*, name: str, disk_template: str, memory: int, vcpus: int,
                     disks: Sequence[Mapping[str, Any]], nics: Sequence[Mapping[str, Any]],
                     os: str = "", tags: list[str] | None = None, spindle_use: int = 1,
                     hypervisor: str = "", group_name: str | None = None,
                     restrict_to_nodes: list[str] | None = None) -> dict[str, Any]:
    """The ``allocate`` request of a new instance."""
    disk_list = [{"size": int(d["size"]), "mode": d.get("mode") or constants.DISK_RDWR,
                  "spindles": d.get("spindles")} for d in disks]
    req: dict[str, Any] = {
        "type": REQ_ALLOCATE, "name": name, "disk_template": disk_template,
        "memory": int(memory), "vcpus": int(vcpus), "spindle_use": int(spindle_use),
        "disks": disk_list, "disk_space_total": disk_space_total(disk_template, disk_list),
        "nics": [dict(n) for n in nics], "os": os, "tags": list(tags or []),
        "hypervisor": hypervisor, "required_nodes": required_nodes(disk_template),
    }
    if group_name is not None:
        req["group_name"] = group_name
    if restrict_to_nodes:
        req["restrict-to-nodes"] = list(restrict_to_nodes)
    return req


def multi_allocate_request(instances: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``multi-allocate`` request: a list of allocate requests (without ``type``)."""
    return {"type": REQ_MULTI_ALLOCATE,
            "instances": [{k: v for k, v in r.items() if k != "type"} for r in instances]}


def relocate_request(name: str, template: str, disks: Sequence[Mapping[str, Any]],
                     relocate_from: list[str], *, with_disks: bool = False) -> dict[str, Any]:
    """The ``relocate`` request: move ``name`` off the nodes ``relocate_from``.

    ``with_disks``: our key ``with-disks``, as for :func:`node_evacuate_request`.
    """
    request: dict[str, Any] = {
        "type": REQ_RELOCATE, "name": name, "relocate_from": list(relocate_from),
        "required_nodes": 1, "disk_space_total": disk_space_total(template, list(disks))}
    if with_disks:
        request["with-disks"] = True
    return request


def allocate_secondary_request(name: str) -> dict[str, Any]:
    """The ``allocate-secondary`` request: a secondary node for ``name`` (a ``plain``
    instance converted to ``drbd``); the answer's result is the node's name."""
    return {"type": REQ_ALLOCATE_SECONDARY, "name": name}


def node_evacuate_request(instances: list[str], evac_mode: str, *,
                          with_disks: bool = False) -> dict[str, Any]:
    """The ``node-evacuate`` request (``evac_mode`` one of :data:`EVAC_MODES`).

    ``with_disks`` adds our key ``with-disks``: instances on local disks
    may move by copying them (doc/protocols/iallocator.md, "Requests").
    """
    if evac_mode not in EVAC_MODES:
        raise errors.ProgrammerError(f"Invalid evacuation mode {evac_mode!r}")
    request: dict[str, Any] = {"type": REQ_NODE_EVACUATE, "instances": list(instances),
                               "evac_mode": evac_mode}
    if with_disks:
        request["with-disks"] = True
    return request


def change_group_request(instances: list[str], target_groups: list[str]) -> dict[str, Any]:
    """The ``change-group`` request (``target_groups``: group UUIDs, empty for any)."""
    return {"type": REQ_CHANGE_GROUP, "instances": list(instances),
            "target_groups": list(target_groups)}


_REQUIRED = {
    REQ_ALLOCATE: ("name", "disk_template", "memory", "vcpus", "disks", "nics",
                   "required_nodes", "disk_space_total"),
    REQ_MULTI_ALLOCATE: ("instances",),
    REQ_RELOCATE: ("name", "relocate_from", "required_nodes", "disk_space_total"),
    REQ_NODE_EVACUATE: ("instances", "evac_mode"),
    REQ_CHANGE_GROUP: ("instances", "target_groups"),
    REQ_ALLOCATE_SECONDARY: ("name",),
}


def check_request(request: Any) -> str:
    """Check the keys of a request dict; returns its type.

    Raises :class:`errors.OpPrereqError` (ECODE_INVAL) naming the missing key.
    """
    if not isinstance(request, dict):
        raise errors.OpPrereqError("The iallocator request must be a dict", errors.ECODE_INVAL)
    rtype = request.get("type")
    if rtype not in _REQUIRED:
        raise errors.OpPrereqError(f"Unknown iallocator request type {rtype!r} (known:"
                                   f" {', '.join(REQUEST_TYPES)})", errors.ECODE_INVAL)
    for key in _REQUIRED[rtype]:
        if key not in request:
            raise errors.OpPrereqError(f"iallocator request {rtype}: key '{key}' missing",
                                       errors.ECODE_INVAL)
    if rtype == REQ_MULTI_ALLOCATE:
        for sub in request["instances"]:
            check_request({**sub, "type": REQ_ALLOCATE})
    return rtype


# --- the document -----------------------------------------------------------------------

def _node_static(node: Node, cluster: Cluster, group: NodeGroup | None) -> dict[str, Any]:
    nd = parameters.fill_ndparams(cluster, group, node)
    return {"tags": list(node.tags), "primary_ip": node.primary_ip,
            "secondary_ip": node.secondary_ip or node.primary_ip,
            "offline": node.offline, "drained": node.drained,
            "master_candidate": node.master_candidate, "master_capable": node.master_capable,
            "vm_capable": node.vm_capable, "group": node.group, "ndparams": nd}


def _storage(live: Mapping[str, Any]) -> tuple[int, int]:
    for unit in live.get("storage") or []:
        if isinstance(unit, dict) and "storage_size" in unit:
            return int(unit.get("storage_size") or 0), int(unit.get("storage_free") or 0)
    return 0, 0


def _node_dynamic(live: Mapping[str, Any], nd: Mapping[str, Any], pri_mem: int,
                  pri_up_mem: int) -> dict[str, Any]:
    total_disk, free_disk = _storage(live)
    spindles = int(nd.get("spindle_count", 1))
    return {"total_memory": int(live.get("memory_total", 0)),
            "reserved_memory": int(live.get("memory_dom0", 0)),
            "free_memory": int(live.get("memory_free", 0)),
            "total_disk": total_disk, "free_disk": free_disk,
            "total_spindles": spindles, "free_spindles": spindles,
            "total_cpus": int(live.get("cpu_total", 1)),
            "reserved_cpus": int(live.get("cpu_dom0", 0)),
            "i_pri_memory": pri_mem, "i_pri_up_memory": pri_up_mem}


def _instance_entry(cluster: Cluster, inst: Instance, disks: list[Disk],
                    node_names: Mapping[str, str]) -> dict[str, Any]:
    be = parameters.fill_instance_beparams(cluster, inst)
    nodes = [inst.primary_node] + [n for d in disks for n in d.nodes if n != inst.primary_node]
    nodes = list(dict.fromkeys(nodes))
    disk_list = [{"dev_type": d.dev_type, "size": d.size, "mode": d.mode,
                  "spindles": d.spindles} for d in disks]
    nics = []
    for nic in inst.nics:
        nicp = parameters.fill_nicparams(cluster, nic.nicparams)
        entry = {"mac": nic.mac, "ip": nic.ip, "mode": nicp.get("mode"),
                 "link": nicp.get("link"), "network": nic.network}
        if nicp.get("mode") == constants.NIC_MODE_BRIDGED:
            entry["bridge"] = nicp.get("link")
        nics.append(entry)
    return {"tags": list(inst.tags), "admin_state": inst.admin_state,
            "admin_state_source": inst.admin_state_source,
            "vcpus": int(be.get("vcpus", 1)), "memory": int(be.get("maxmem", 128)),
            "spindle_use": int(be.get("spindle_use", 1)), "os": inst.os,
            "hypervisor": inst.hypervisor,
            "nodes": [node_names.get(n, n) for n in nodes], "nics": nics,
            "disks": disk_list, "disk_template": inst.disk_template,
            "disks_active": inst.disks_active,
            "disk_space_total": disk_space_total(inst.disk_template, disk_list)}


def build_input(data: ConfigData, live: Mapping[str, Mapping[str, Any]],
                request: dict[str, Any], *,
                ipolicy_fn: IpolicyFn = group_ipolicy) -> dict[str, Any]:
    """The whole input document for ``request``.

    ``data`` is a configuration snapshot, ``live`` the ``node_info``
    answers by node UUID (nodes missing from it, offline or not vm_capable
    get the static keys only; drained nodes have their live figures, as
    upstream sends them, and allocators do not use them).  ``ipolicy_fn(cluster, group)``
    gives a group's effective ipolicy.
    """
    check_request(request)
    cluster = data.cluster
    node_names = {u: n.name for u, n in data.nodes.items()}
    pri_mem: dict[str, int] = {}
    pri_up: dict[str, int] = {}
    instances: dict[str, Any] = {}
    for inst in sorted(data.instances.values(), key=lambda i: i.name):
        disks = [data.disks[d] for d in inst.disks if d in data.disks]
        entry = _instance_entry(cluster, inst, disks, node_names)
        instances[inst.name] = entry
        pri_mem[inst.primary_node] = pri_mem.get(inst.primary_node, 0) + entry["memory"]
        if inst.admin_state == constants.ADMINST_UP:
            pri_up[inst.primary_node] = pri_up.get(inst.primary_node, 0) + entry["memory"]
    groups = {}
    for uuid, group in sorted(data.nodegroups.items()):
        groups[uuid] = {"name": group.name, "alloc_policy": group.alloc_policy,
                        "networks": sorted(group.networks), "tags": list(group.tags),
                        "ipolicy": ipolicy_fn(cluster, group)}
    nodes = {}
    for uuid, node in sorted(data.nodes.items(), key=lambda kv: kv[1].name):
        entry = _node_static(node, cluster, data.nodegroups.get(node.group))
        info = live.get(uuid)
        if info is not None and not node.offline and node.vm_capable:
            entry.update(_node_dynamic(info, entry["ndparams"], pri_mem.get(uuid, 0),
                                       pri_up.get(uuid, 0)))
        nodes[node.name] = entry
    return {"version": VERSION, "cluster_name": cluster.cluster_name,
            "cluster_tags": list(cluster.tags),
            "enabled_hypervisors": list(cluster.enabled_hypervisors),
            "ipolicy": ipolicy_fn(cluster, None), "nodegroups": groups, "nodes": nodes,
            "instances": instances, "request": request}
