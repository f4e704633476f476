"""Small input documents for the allocator tests (and upstream's, in test/data/iallocator)."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

from ganeti.objects import default_ipolicy

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "iallocator"


def upstream(name: str) -> dict[str, Any]:
    """One of upstream Ganeti's published iallocator test documents."""
    return json.loads((DATA / f"{name}.json").read_text())


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
            "disk_space_total": 1024 if template in ("file", "plain") else 0,
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
                  **extra: Any) -> dict[str, Any]:
    from ganeti.iallocator import document
    disks = [] if template == "diskless" else [{"size": 1024}]
    req = document.allocate_request(name=name, disk_template=template, memory=memory, vcpus=1,
                                    disks=disks, nics=[{"mac": "auto"}], os="tinyos",
                                    hypervisor="fake")
    req.update(extra)
    return req
