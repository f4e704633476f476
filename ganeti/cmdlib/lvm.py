"""Master side of the ``plain`` (LVM) template: volume names and space checks.

A ``plain`` disk is the logical volume ``<disk uuid>.disk<N>`` in the
cluster's volume group (``gnt-cluster init/modify --vg-name``, a disk may
name another with ``vg=``); its ``logical_id`` is ``[vg, lv_name]``, as in
Ganeti.  The name keeps the disk's UUID, so renaming an instance changes
nothing on disk.  Before any volume is made the LUs check, through the
nodes' ``node_info``, that each volume group exists and has room
(:func:`check_vg_free`): a refusal leaves nothing behind (doc/storage.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ganeti import constants, errors
from ganeti.cmdlib.base import LogicalUnit
from ganeti.objects import Cluster, Node
from ganeti.utils import validation

__all__ = ["lv_logical_id", "disk_vg", "required_vg_sizes", "check_vg_free", "vg_free_of",
           "exclusive_storage", "VolumeProblem", "volume_problems", "size_matches"]


def lv_logical_id(vg: str, disk_uuid: str, index: int) -> list[str]:
    """``[vg, "<uuid>.disk<index>"]``: the logical id of a new ``plain`` disk."""
    return [vg, f"{disk_uuid}.disk{index}"]


def disk_vg(cluster: Cluster, spec: Mapping[str, Any]) -> str:
    """The volume group of a new disk: its ``vg`` or the cluster's one.

    :class:`errors.OpPrereqError` when neither is set or the name is invalid.
    """
    vg = spec.get("vg") or cluster.volume_group_name
    if not vg:
        raise errors.OpPrereqError("The cluster has no volume group for plain disks (set one"
                                   " with gnt-cluster modify --vg-name)", errors.ECODE_STATE)
    return validation.check_vg_name(vg)


def required_vg_sizes(disks: Iterable[tuple[str, int]]) -> dict[str, int]:
    """MiB needed per volume group for ``(vg, size)`` pairs."""
    need: dict[str, int] = {}
    for vg, size in disks:
        need[vg] = need.get(vg, 0) + size
    return need


def vg_free_of(payload: Any, vg: str) -> int | str:
    """The free MiB of ``vg`` in a node_info payload, or the reason there is none."""
    units = payload.get("storage") if isinstance(payload, dict) else None
    for unit in units or []:
        if isinstance(unit, dict) and unit.get("type") == constants.ST_LVM_VG \
                and unit.get("name") == vg:
            if "error" in unit:
                return str(unit["error"])
            free = unit.get("vg_free", unit.get("storage_free"))
            return free if isinstance(free, int) else f"no free space reported for {vg}"
    return f"volume group {vg} not reported"


def check_vg_free(lu: LogicalUnit, nodes: Iterable[Node], need: Mapping[str, int]) -> None:
    """Refuse unless every node has each volume group of ``need`` with that many MiB free.

    Asks the nodes' ``node_info`` (no cache: the figures must be current).
    :class:`errors.OpPrereqError` (``ECODE_NORES``, or ``ECODE_ENVIRON`` when a
    node does not answer or lacks the group) names the node and the group.
    """
    if not need or lu.rpc is None:
        return
    names = [n.name for n in nodes]
    units = [[constants.ST_LVM_VG, vg, {}] for vg in need]
    results = lu.rpc.call_node_info(names, storage_units=units, hv_specs=[])
    for name in names:
        res = results.get(name)
        if res is None or res.failed:
            raise errors.OpPrereqError(
                f"Cannot get the free space of node {name}:"
                f" {res.fail_msg if res is not None else 'no answer'}", errors.ECODE_ENVIRON)
        for vg, size in need.items():
            free = vg_free_of(res.payload, vg)
            if isinstance(free, str):
                raise errors.OpPrereqError(f"Node {name}: {free}", errors.ECODE_ENVIRON)
            if free < size:
                raise errors.OpPrereqError(
                    f"Not enough disk space on target node {name} vg {vg}: required {size}"
                    f" MiB, available {free} MiB", errors.ECODE_NORES)


def exclusive_storage(cluster: Cluster, node: Node, group: Any) -> bool:
    """The node's ``exclusive_storage`` parameter (filled from group and cluster)."""
    from ganeti import parameters
    return bool(parameters.fill_ndparams(cluster, group, node).get("exclusive_storage"))


def size_matches(recorded: int, real: int, extent: Any) -> bool:
    """Whether a volume of ``real`` MiB is right for a disk of ``recorded`` MiB: the
    same, or ``recorded`` rounded up to whole extents of ``extent`` MiB (LVM makes
    every volume a whole number of extents; ``extent`` 0 or not a number: unknown).
    Pure."""
    if real == recorded:
        return True
    if not isinstance(extent, int) or isinstance(extent, bool) or extent <= 0:
        return False
    return real == -(-recorded // extent) * extent


class VolumeProblem(NamedTuple):
    """One finding of :func:`volume_problems`, in cluster verify's terms."""

    code: str          #: EINSTANCEMISSINGDISK, EINSTANCEFAULTYDISK, ENODEORPHANLV
    otype: str         #: "instance" or "node"
    name: str          #: the instance or node named
    message: str
    warning: bool = False


def volume_problems(node: str, vg: str, expected: Mapping[str, tuple[str, int]],
                    found: Mapping[str, Any]) -> list[VolumeProblem]:
    """Compare the volumes of ``vg`` a node has with those the config puts there.

    ``expected``: ``{lv name: (instance name, size MiB)}``; ``found``: the
    node's ``lvlist`` answer ``{lv name: [size MiB, active, extent MiB]}``.  A
    missing volume and a smaller one are errors of the instance, a larger one
    a warning, unless it is the size rounded up to whole extents, as LVM
    makes it (:func:`size_matches`); a volume no instance owns is an error of
    the node (as Ganeti's ``ENODEORPHANLV``).  Pure.
    """
    out = []
    for lv, (inst, size) in sorted(expected.items()):
        have = found.get(lv)
        if have is None:
            out.append(VolumeProblem("EINSTANCEMISSINGDISK", "instance", inst,
                                     f"volume {vg}/{lv} is missing on node {node}"))
            continue
        real = have[0] if isinstance(have, (list, tuple)) and have else None
        extent = have[2] if isinstance(have, (list, tuple)) and len(have) > 2 else 0
        if isinstance(real, int) and not size_matches(size, real, extent):
            out.append(VolumeProblem("EINSTANCEFAULTYDISK", "instance", inst,
                                     f"volume {vg}/{lv} on node {node} has {real} MiB,"
                                     f" the configuration says {size} MiB",
                                     warning=real > size))
    for lv in sorted(set(found) - set(expected)):
        out.append(VolumeProblem("ENODEORPHANLV", "node", node,
                                 f"volume {vg}/{lv} is unknown"))
    return out
