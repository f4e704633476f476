"""Wiping new disk space with zeros (the cluster's ``prealloc_wipe_disks``).

With ``gnt-cluster modify --prealloc-wipe-disks yes``, ``gnt-instance
add`` overwrites every new disk with zeros before the OS is installed,
and ``gnt-instance grow-disk`` the part it added, as in Ganeti: a new
volume never shows what an earlier one left on the storage, and a file
disk has its blocks allocated up front (on most file systems).  The master sends one
``blockdev_wipe`` per range of at most :data:`WIPE_CHUNK` to the node,
writes ``wipe`` progress entries into the job's log, and the wipe shows
as a block job of the instance meanwhile (doc/storage.md, "Wiping
disks"; doc/progress.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ganeti import constants
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance import disk_rpc_dicts
from ganeti.objects import Disk

__all__ = ["WIPE_CHUNK", "wipe_wanted", "wipe_disks", "wipe_range"]

#: bytes one blockdev_wipe call overwrites at most (one progress step)
WIPE_CHUNK = 256 * 1024 * 1024
_MIB = 1024 * 1024


def wipe_wanted(lu: LogicalUnit[Any]) -> bool:
    """Whether the cluster asks for new disk space to be wiped."""
    return bool(lu.cfg.get_cluster_info().prealloc_wipe_disks)


def wipe_disks(lu: LogicalUnit[Any], node: str, instance: str,
               disks: list[tuple[int, Disk, int]], feedback_fn: FeedbackFn) -> None:
    """Overwrite with zeros, on ``node``, each ``(index, disk, from_mib)`` from
    ``from_mib`` MiB to the disk's end (diskless disks are skipped).

    Raises :class:`errors.OpExecError` when a range cannot be wiped (the
    caller undoes what it created).
    """
    for idx, disk, start_mib in disks:
        if disk.dev_type == constants.DT_DISKLESS or disk.size <= start_mib:
            continue
        offset, end = start_mib * _MIB, disk.size * _MIB
        data = disk_rpc_dicts([disk], lu.cfg)[0]
        feedback_fn(f"* wiping disk {disk.iv_name or f'disk/{idx}'} of {instance} on {node}"
                    f" ({(end - offset) // _MIB} MiB"
                    f"{f' from {start_mib} MiB' if start_mib else ''})")
        with lu.progress_reporter("wipe", end=end - offset, instance=instance,
                                  device=f"disk/{idx}", op_type="wipe") as rep:
            wipe_range(lu, node, data, offset, end,
                       f"Cannot wipe disk {idx} of {instance} on {node}",
                       progress=rep.update)


def wipe_range(lu: LogicalUnit[Any], node: str, data: dict[str, Any], offset: int, end: int,
               error: str, progress: Callable[[int], object] | None = None) -> None:
    """Overwrite bytes ``offset`` to ``end`` of the disk ``data`` (an RPC disk
    dict) on ``node`` with zeros, one ``blockdev_wipe`` per :data:`WIPE_CHUNK`;
    ``progress(bytes done)`` after each.  Raises :class:`errors.OpExecError`
    with ``error`` when a range cannot be wiped."""
    done = 0
    while offset + done < end:
        size = min(WIPE_CHUNK, end - offset - done)
        written = lu.require_rpc().call_blockdev_wipe(
            node, disk=data, offset=offset + done, size=size).one(node, error)
        done += int(written) if isinstance(written, int) and written > 0 else size
        if progress is not None:
            progress(done)
