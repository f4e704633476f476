"""What the node loss recovery tests look at on a virtual cluster (doc/ha.md): where an
instance really runs, the recovery's jobs and their failovers."""

from __future__ import annotations

from typing import Any

from instance_helpers import fake_hv

from ganeti import luxi
from ganeti.ha import recovery


def running_on(vc: Any, name: str) -> list[str]:
    """The nodes whose fake hypervisor runs ``name`` (what the machines do, not the config)."""
    found = []
    for node in vc.names:
        info = fake_hv(vc, node).get_all_instances_info().get(name)
        if info is not None and info.get("state") == "running":
            found.append(node)
    return found


def ha_jobs(vc: Any, master: str) -> list[dict[str, Any]]:
    """Every job (asked of ``master``) with an opcode whose reason trail has ``gnt:ha``:
    id, status, ops, log."""
    return ha_jobs_of(luxi.Client(vc.paths(master).master_socket, connect_timeout=5.0,
                                  rw_timeout=30.0))


def ha_jobs_of(client: Any) -> list[dict[str, Any]]:
    """:func:`ha_jobs` through a LUXI ``client`` of the master (a guest cluster's too)."""
    found = []
    for job_id, status, ops, oplog in client.QueryJobs(None, ["id", "status", "ops", "oplog"]):
        if any(entry[0] == recovery.REASON_SOURCE for op in ops for entry in op.get("reason", [])):
            lines = [str(msg[3]) for log in oplog for msg in log]
            found.append({"id": job_id, "status": status, "ops": ops, "log": "\n".join(lines)})
    return sorted(found, key=lambda j: int(j["id"]))


def failovers(jobs: list[dict[str, Any]]) -> list[str]:
    """The instances failed over by ``jobs``, in order."""
    return [op["instance_name"] for job in jobs for op in job["ops"]
            if op["OP_ID"] == "OP_INSTANCE_FAILOVER"]
