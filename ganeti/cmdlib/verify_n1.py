"""``gnt-cluster verify``'s N+1 memory check (doc/storage.md, "N+1 redundancy").

A ``drbd`` instance fails over to its secondary node, so each node must
have the free memory to start, at once, the instances whose secondary it
is and whose primary could fail: for each pair (secondary S, primary P),
the sum of ``minmem`` of P's instances mirrored on S that are marked up
and have ``auto_balance`` set must fit in S's free memory, else
``ENODEN1`` (Ganeti's code and meaning).  :func:`failover_needs` is the
pure part; :func:`check` asks the nodes for their free memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ganeti import constants, parameters
from ganeti.objects import Cluster, Disk, Instance

__all__ = ["failover_needs", "problems", "check"]


def failover_needs(cluster: Cluster, instances: Iterable[Instance],
                   disks_of: Mapping[str, list[Disk]]) -> dict[str, dict[str, int]]:
    """``{secondary uuid: {primary uuid: MiB}}``: the memory each node needs to take
    over the running mirrored instances of each of its peers. Pure."""
    needs: dict[str, dict[str, int]] = {}
    for inst in instances:
        if inst.disk_template not in constants.DTS_INT_MIRROR \
                or inst.admin_state != constants.ADMINST_UP:
            continue
        be = parameters.fill_instance_beparams(cluster, inst)
        if not be.get("auto_balance", True):
            continue
        seconds = {u for d in disks_of.get(inst.uuid, []) if d.dev_type in
                   constants.DTS_INT_MIRROR for u in d.logical_id[:2]} - {inst.primary_node}
        for snode in seconds:
            per = needs.setdefault(snode, {})
            per[inst.primary_node] = per.get(inst.primary_node, 0) + int(be["minmem"])
    return needs


def problems(needs: Mapping[str, Mapping[str, int]], free: Mapping[str, int]
             ) -> list[tuple[str, str, int, int]]:
    """``(secondary, primary, needed, free)`` for each pair whose need does not fit
    (nodes without a figure in ``free`` are left out). Pure."""
    found = []
    for snode, per in sorted(needs.items()):
        if snode not in free:
            continue
        for pnode, need in sorted(per.items()):
            if need > free[snode]:
                found.append((snode, pnode, need, free[snode]))
    return found


def check(lu: Any, report: Any, nodes: list[Any]) -> None:
    """Report ``ENODEN1`` for the online ``nodes`` (of the verified group) that could
    not take over a failed peer's instances; ``report(code, name, msg)``."""
    cfg = lu.cfg
    cluster = cfg.get_cluster_info()
    instances = cfg.get_all_instances_info()
    needs = failover_needs(cluster, instances.values(),
                           {u: cfg.get_instance_disks(u) for u in instances})
    wanted = [n for n in nodes if n.uuid in needs]
    if not wanted or lu.rpc is None:
        return
    hv = cluster.primary_hypervisor
    results = lu.rpc.call_node_info([n.name for n in wanted], storage_units=[],
                                    hv_specs=[[hv, dict(cluster.hvparams.get(hv, {}))]])
    free: dict[str, int] = {}
    for node in wanted:
        res = results.get(node.name)
        data = None if res is None or res.fail_msg else res.payload
        value = data.get("memory_free") if isinstance(data, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            free[node.uuid] = value
    names = {n.uuid: n.name for n in cfg.get_all_nodes_info().values()}
    for snode, pnode, need, avail in problems(needs, free):
        report("ENODEN1", names.get(snode, snode),
               f"not enough memory to accommodate instance failovers should node"
               f" {names.get(pnode, pnode)} fail ({need}MiB needed, {avail}MiB available)")
