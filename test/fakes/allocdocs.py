"""Input documents for the allocator tests: small builders and named scenarios.

The documents follow the version-2 input format of doc/protocols/iallocator.md.
:data:`SCENARIOS` holds complete documents for the request types and refusals
that the built-in allocator and upstream's ``hail`` (test_hail_compat.py) are
both run on.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from ganeti.iallocator import document
from ganeti.objects import default_ipolicy


def node(group: str = "g1", *, free: int = 30000, total: int = 32768, disk: int = 100000,
         free_disk: int | None = None, cpus: int = 8, offline: bool = False,
         drained: bool = False, vm_capable: bool = True, tags: list[str] | None = None,
         live: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"group": group, "offline": offline, "drained": drained,
                             "vm_capable": vm_capable, "master_candidate": True,
                             "master_capable": True, "tags": tags or [],
                             "primary_ip": "192.0.2.1", "secondary_ip": "192.0.2.1",
                             "ndparams": {"spindle_count": 1, "exclusive_storage": False}}
    if live:
        entry.update({"total_memory": total, "free_memory": free, "reserved_memory": 1024,
                      "total_disk": disk, "free_disk": disk if free_disk is None else free_disk,
                      "total_cpus": cpus, "reserved_cpus": 0, "total_spindles": 1,
                      "free_spindles": 1, "i_pri_memory": 0, "i_pri_up_memory": 0})
    return entry


def instance(nodes: list[str], *, memory: int = 1024, template: str = "sharedfile",
             up: bool = True, tags: list[str] | None = None, vcpus: int = 1) -> dict[str, Any]:
    disks = [] if template == "diskless" else [{"size": 1024, "mode": "rw", "spindles": None}]
    return {"nodes": nodes, "memory": memory, "vcpus": vcpus, "spindle_use": 1,
            "disk_template": template, "disks": disks,
            "disk_space_total": document.disk_space_total(template, disks),
            "admin_state": "up" if up else "down", "tags": tags or [], "os": "tinyos",
            "hypervisor": "fake", "nics": [{"mac": "aa:00:00:00:00:01", "ip": None}]}


def cluster(nodes: dict[str, Any], instances: dict[str, Any] | None = None, *,
            groups: dict[str, str] | None = None, tags: list[str] | None = None,
            request: dict[str, Any] | None = None) -> dict[str, Any]:
    """A document: ``groups`` maps uuid -> alloc_policy (default: g1 preferred)."""
    groups = groups or {"g1": "preferred"}
    return {"version": 2, "cluster_name": "c", "cluster_tags": tags or [],
            "enabled_hypervisors": ["fake"], "ipolicy": default_ipolicy(),
            "nodegroups": {u: {"name": f"group-{u}", "alloc_policy": p, "networks": [],
                               "tags": [], "ipolicy": default_ipolicy()}
                           for u, p in groups.items()},
            "nodes": copy.deepcopy(nodes), "instances": copy.deepcopy(instances or {}),
            "request": request or {}}


def alloc_request(name: str = "new1", *, memory: int = 1024, template: str = "sharedfile",
                  disks: list[int] | None = None, networks: list[str] | None = None,
                  **extra: Any) -> dict[str, Any]:
    """An allocate request; ``disks`` are sizes (default one of 1024 MiB), ``networks``
    one NIC on each of these networks (default one NIC on none)."""
    if disks is None:
        disks = [] if template == "diskless" else [1024]
    nics: list[dict[str, Any]] = [{"mac": "auto", "ip": None, "network": net}
                                  for net in networks or []] or [{"mac": "auto"}]
    req = document.allocate_request(name=name, disk_template=template, memory=memory, vcpus=1,
                                    disks=[{"size": size} for size in disks], nics=nics,
                                    os="tinyos", hypervisor="fake")
    req.update(extra)
    return req


# --- named scenarios ----------------------------------------------------------------------

def settle(doc: dict[str, Any]) -> dict[str, Any]:
    """Make each node's memory figures add up: ``total_memory`` is the free memory, the
    node OS's and that of its running primary instances (``i_pri_*`` filled too)."""
    for name, entry in doc["nodes"].items():
        if "free_memory" not in entry:
            continue
        mine = [i for i in doc["instances"].values() if i["nodes"][:1] == [name]]
        up = sum(i["memory"] for i in mine if i["admin_state"] == "up")
        entry["i_pri_memory"] = sum(i["memory"] for i in mine)
        entry["i_pri_up_memory"] = up
        entry["total_memory"] = entry["free_memory"] + entry["reserved_memory"] + up
    return doc


def _group(doc: dict[str, Any], uuid: str, name: str, *,
           networks: list[str] | None = None) -> None:
    doc["nodegroups"][uuid]["name"] = name
    doc["nodegroups"][uuid]["networks"] = list(networks or [])


def _alloc_mirrored() -> dict[str, Any]:
    # two nodes, DRBD: the one with more free memory is the primary
    nodes = {"node1": node(free=20000), "node2": node(free=28000)}
    return cluster(nodes, request=alloc_request(template="drbd"))


def _alloc_shared() -> dict[str, Any]:
    nodes = {"node1": node(free=12000), "node2": node(free=16000), "node3": node(free=28000)}
    return cluster(nodes, request=alloc_request(template="sharedfile"))


def _alloc_two_disks() -> dict[str, Any]:
    # node2 has the memory, but its disk only holds one of the two disks; node1 has
    # more memory than node3 (node3 is there so that node1 can fail: hail's N+1)
    nodes = {"node1": node(free=12000), "node2": node(free=28000, free_disk=2500),
             "node3": node(free=10000)}
    return cluster(nodes, request=alloc_request(template="plain", disks=[1024, 2048]))


def _reloc_secondary() -> dict[str, Any]:
    # DRBD on node1+node2, node2 leaves: node3 has more room than node4
    nodes = {"node1": node(free=20000), "node2": node(free=20000),
             "node3": node(free=26000, free_disk=90000), "node4": node(free=8000, free_disk=20000)}
    insts = {"inst1": instance(["node1", "node2"], template="drbd")}
    return cluster(nodes, insts, request=document.relocate_request(
        "inst1", "drbd", [{"size": 1024}], ["node2"]))


def _alloc_secondary() -> dict[str, Any]:
    # plain on node1 becomes drbd: node3 has the most room, node4 too little disk
    nodes = {"node1": node(free=20000), "node2": node(free=14000, free_disk=30000),
             "node3": node(free=26000, free_disk=90000), "node4": node(free=28000, free_disk=900)}
    insts = {"inst1": instance(["node1"], template="plain")}
    return cluster(nodes, insts, request=document.allocate_secondary_request("inst1"))


def _node_evacuate() -> dict[str, Any]:
    # node1 is emptied: its running sharedfile instance migrates to node3 (most free memory)
    nodes = {"node1": node(free=20000), "node2": node(free=14000), "node3": node(free=26000)}
    insts = {"inst1": instance(["node1"], memory=2048), "inst2": instance(["node2"])}
    return cluster(nodes, insts, request=document.node_evacuate_request(["inst1"], "primary-only"))


def _change_group() -> dict[str, Any]:
    # a stopped DRBD instance of group A goes to group B, the only other group
    nodes = {"node1": node("ga"), "node2": node("ga"), "node10": node("gb", free=26000),
             "node11": node("gb", free=24000)}
    insts = {"inst1": instance(["node1", "node2"], template="drbd", up=False)}
    doc = cluster(nodes, insts, groups={"ga": "preferred", "gb": "preferred"},
                  request=document.change_group_request(["inst1"], []))
    _group(doc, "ga", "group A")
    _group(doc, "gb", "group B")
    return doc


def _small_disk() -> dict[str, Any]:
    # the policy wants disks of at least 1024 MiB; the second disk has 512
    doc = cluster({"node1": node()}, request=alloc_request(template="plain", disks=[1024, 512]))
    for policy in [doc["ipolicy"], doc["nodegroups"]["g1"]["ipolicy"]]:
        policy["minmax"][0]["min"]["disk-size"] = 1024
    return doc


def _tags_everywhere() -> dict[str, Any]:
    # every node already runs an instance tagged service:web, an exclusion tag
    nodes = {f"node{k}": node() for k in (1, 2, 3)}
    insts = {f"web{k}": instance([f"node{k}"], template="plain", tags=["service:web"])
             for k in (1, 2, 3)}
    return cluster(nodes, insts, tags=["htools:iextags:service"],
                   request=alloc_request(template="plain", tags=["service:web"]))


def _unknown_network() -> dict[str, Any]:
    nodes = {"node1": node("g1"), "node2": node("g2")}
    doc = cluster(nodes, groups={"g1": "preferred", "g2": "preferred"},
                  request=alloc_request(networks=["net-b"]))
    _group(doc, "g1", "Group 1", networks=["net-a"])
    return doc


def _restricted_network() -> dict[str, Any]:
    # the preferred group has room but no link to net-a; the last-resort one has
    nodes = {"node1": node("g1", free=10000), "node2": node("g2", free=28000),
             "node3": node("g1", free=8000)}
    doc = cluster(nodes, groups={"g1": "last_resort", "g2": "preferred"},
                  request=alloc_request(networks=["net-a"]))
    _group(doc, "g1", "Group 1", networks=["net-a"])
    _group(doc, "g2", "Group 2")
    return doc


def _multi_allocate() -> dict[str, Any]:
    nodes = {"node1": node(free=16000), "node2": node(free=28000)}
    reqs = [alloc_request(f"new{k}", template="plain", memory=4096) for k in (1, 2)]
    return cluster(nodes, request=document.multi_allocate_request(reqs))


def _invalid_relocate() -> dict[str, Any]:
    nodes = {"node1": node(), "node2": node()}
    request = document.relocate_request("inst1", "drbd", [{"size": 1024}], ["node2"])
    del request["name"]
    return cluster(nodes, {"inst1": instance(["node1", "node2"], template="drbd")},
                   request=request)


#: name -> builder of a complete document (memory figures settled, see :func:`settle`).
SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "alloc-mirrored": _alloc_mirrored,
    "alloc-shared": _alloc_shared,
    "alloc-two-disks": _alloc_two_disks,
    "reloc-secondary": _reloc_secondary,
    "alloc-secondary": _alloc_secondary,
    "node-evacuate": _node_evacuate,
    "change-group": _change_group,
    "small-disk": _small_disk,
    "tags-everywhere": _tags_everywhere,
    "unknown-network": _unknown_network,
    "restricted-network": _restricted_network,
    "multi-allocate": _multi_allocate,
    "invalid-relocate": _invalid_relocate,
}


def scenario(name: str) -> dict[str, Any]:
    """A fresh copy of the scenario document ``name``."""
    return settle(SCENARIOS[name]())
