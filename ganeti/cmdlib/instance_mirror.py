"""Moving the local (``file``) disks of an instance with it: ``migrate --with-disks``.

:class:`DiskCopy` does the disk side of one migration with disks, for
``LUInstanceMigrate`` (which keeps the memory side and the config):

* :meth:`DiskCopy.create_target_disks`: the target node's storage layer
  creates every disk at its size (same logical id: file disks travel in
  canonical form, so the file lands in the target's file storage dir);
* running instance (doc/kvm.md, "Migration with disks"):
  :meth:`DiskCopy.mirror` -- after ``accept_instance`` -- exports the
  incoming instance's disks on the target (``instance_mirror_accept``),
  starts the copies on the source (``instance_mirror_start``) and polls
  ``instance_mirror_status`` until every disk is in sync; after the memory
  migration :meth:`DiskCopy.complete` ends the copies consistently and
  stops the exports, before the target resumes; :meth:`DiskCopy.abort`
  undoes it on failure;
* stopped instance: :meth:`DiskCopy.copy_offline` copies the data through
  the master, as ``gnt-instance move`` does (:func:`copy_disk`);
* :meth:`DiskCopy.remove_target_disks` (failure) or
  :meth:`DiskCopy.remove_source_disks` (success, after the switch-over).

A copy that makes no progress for :data:`STALL_TIMEOUT` seconds fails.
The clock and sleep are parameters, so tests step time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ganeti import constants, errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import disk_wipe
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance import disk_rpc_dicts
from ganeti.objects import Disk, Node

__all__ = ["DiskCopy", "copy_disk", "LOCAL_TEMPLATES", "STALL_TIMEOUT", "POLL", "COPY_CHUNK",
           "NEW_READS_ZERO"]

#: disk templates whose disks exist on the primary node only and can be copied
LOCAL_TEMPLATES = frozenset([constants.DT_FILE])
#: seconds without progress after which a disk copy fails
STALL_TIMEOUT = 300.0
#: seconds between two status polls
POLL = 0.2
#: bytes per read/write RPC of an offline copy
COPY_CHUNK = 4 * 1024 * 1024
#: disk templates whose new disks read as zeros (a new file disk is a sparse file)
NEW_READS_ZERO = frozenset([constants.DT_FILE])
_MIB = 1024 * 1024


def copy_disk(lu: LogicalUnit[Any], src: str, dst: str, disk_data: dict[str, Any],
              size_mib: int, idx: int, instance_name: str) -> None:
    """Copy disk ``idx`` (unused) of ``instance_name`` from node ``src`` to ``dst``.

    Through the master: chunked ``blockdev_read_chunk``/``blockdev_write_chunk``,
    then ``blockdev_checksum`` on both sides; raises
    :class:`errors.OpExecError` on a mismatch.  All-zero chunks travel as
    no data: a new ``file`` disk (a sparse file) reads zeros there already;
    any other new disk (a logical volume gets whatever its extents held)
    has those ranges overwritten with ``blockdev_wipe``, runs of them in
    one call of at most :data:`disk_wipe.WIPE_CHUNK` (doc/storage.md, "The
    plain template (LVM)").  Writes ``disk-copy``
    progress entries, and the copy shows as a block job of the instance
    meanwhile (doc/progress.md).
    """
    rpc = lu.require_rpc()
    total = size_mib * _MIB
    offset = 0
    zeroed = disk_data.get("dev_type") in NEW_READS_ZERO
    hole = offset     # start of the run of zero chunks not yet written on dst

    def fill_hole(end: int) -> None:
        nonlocal hole
        if not zeroed:
            disk_wipe.wipe_range(lu, dst, disk_data, hole, end,
                                 f"Cannot zero disk {idx} of {instance_name} on {dst}")
        hole = end

    with lu.progress_reporter("disk-copy", end=total, instance=instance_name,
                              device=f"disk/{idx}") as rep:
        while offset < total:
            chunk = rpc.call_blockdev_read_chunk(
                src, disk=disk_data, offset=offset, length=min(COPY_CHUNK, total - offset)).one(src)
            if not chunk["length"]:
                break
            if not chunk["zero"]:
                fill_hole(offset)
                rpc.call_blockdev_write_chunk(
                    dst, disk=disk_data, offset=offset, data=chunk["data"]).one(dst)
                hole = offset + chunk["length"]
            offset += chunk["length"]
            if offset - hole >= disk_wipe.WIPE_CHUNK:
                fill_hole(offset)
            rep.update(offset)
            if chunk.get("eof"):
                break
        fill_hole(offset)
        a = rpc.call_blockdev_checksum(src, disk=disk_data).one(src)
        b = rpc.call_blockdev_checksum(dst, disk=disk_data).one(dst)
        if a != b:
            raise errors.OpExecError(f"Checksum mismatch after copying disk to {dst}")


class DiskCopy:
    """The disks of one instance on their way from ``source`` to ``target``.

    ``data`` is the instance dict for node RPC; ``disks`` the instance's
    disks in order.  Every failure raises :class:`errors.OpExecError`;
    the undo methods only warn.
    """

    def __init__(self, lu: LogicalUnit[Any], data: dict[str, Any], disks: list[Disk],
                 source: Node, target: Node, feedback_fn: FeedbackFn, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.lu = lu
        self.data = data
        self.disks = [d for d in disks if d.dev_type != constants.DT_DISKLESS]
        self.source = source
        self.target = target
        self.feedback_fn = feedback_fn
        self.clock = clock
        self.sleep = sleep
        self.created: list[dict[str, Any]] = []
        self.mirroring = False
        self.exported = False
        self.name = str(data.get("name", ""))

    # --- files ---------------------------------------------------------------------------

    def create_target_disks(self) -> None:
        """Create every disk on the target at its size; remembers them for the undo."""
        for idx, disk in enumerate(self.disks):
            ddict = disk_rpc_dicts([disk], self.lu.cfg)[0]
            self.lu.require_rpc().call_blockdev_create(
                self.target.name, disk=ddict, size=disk.size, owner_instance_name=self.name,
                on_primary=True, info=constants.DISK_INFO_PREFIX + self.name, excl_stor=False,
            ).one(self.target.name, f"Could not create disk {idx} on {self.target.name}")
            self.created.append(ddict)

    def remove_target_disks(self) -> None:
        """Remove what :meth:`create_target_disks` created (warnings only)."""
        for ddict in self.created:
            self._remove(self.target.name, ddict)
        self.created = []

    def remove_source_disks(self) -> None:
        """After the switch-over: remove the disks from the old primary (warnings only)."""
        for ddict in disk_rpc_dicts(self.disks, self.lu.cfg):
            self._remove(self.source.name, ddict)

    def _remove(self, node: str, ddict: dict[str, Any]) -> None:
        rpc = self.lu.require_rpc()
        res = rpc.call_blockdev_remove([node], disk=ddict).get(node)
        if res is None or res.failed:
            self.lu.LogWarning(f"Could not remove disk {ddict.get('uuid')} of {self.name}"
                               f" on {node}: {res.fail_msg if res else 'no answer'}")

    # --- offline ---------------------------------------------------------------------------

    def copy_offline(self) -> None:
        """Copy every disk of the stopped instance (after :meth:`create_target_disks`)."""
        for idx, disk in enumerate(self.disks):
            self.feedback_fn(f"* copying disk {idx} ({disk.size} MiB) to {self.target.name}")
            copy_disk(self.lu, self.source.name, self.target.name,
                      disk_rpc_dicts([disk], self.lu.cfg)[0], disk.size, idx, self.name)

    # --- live ----------------------------------------------------------------------------------

    def mirror(self) -> None:
        """Copy the disks of the running instance until they are in sync.

        Needs the incoming instance on the target (``accept_instance``).
        Writes of the guest keep flowing to the target until
        :meth:`complete`.
        """
        src, dst = self.source.name, self.target.name
        exports = self.lu.require_rpc().call_instance_mirror_accept(
            dst, instance=self.data, address=self.target.primary_ip,
        ).one(dst, f"Target node {dst} cannot receive the disks")
        self.exported = True
        total = sum(d.size for d in self.disks)
        self.feedback_fn(f"* copying {len(self.disks)} disk(s), {total} MiB, to {dst}"
                         f" (NBD port {exports.get('port')})")
        self.mirroring = True
        self.lu.require_rpc().call_instance_mirror_start(
            src, instance=self.data, target=exports,
        ).one(src, f"Could not start copying the disks of {self.name}")
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Poll the copy until every disk is in sync; typed ``mirror`` progress entries."""
        best = -1
        last_change = self.clock()
        total = sum(d.size for d in self.disks) * _MIB
        with self.lu.progress_reporter("mirror", end=total, clock=self.clock) as rep:
            while True:
                status = self.lu.require_rpc().call_instance_mirror_status(
                    self.source.name, instance=self.data,
                ).one(self.source.name, f"Could not follow the disk copy of {self.name}")
                state = status.get("status")
                disks = status.get("disks") or []
                done = sum(int(d.get("cur", 0)) for d in disks)
                end = sum(int(d.get("end", 0)) for d in disks) or total
                if state == "ready":
                    rep.finish(cur=done)
                    self.feedback_fn("* disks in sync; the guest's writes are mirrored")
                    return
                if state != "active":
                    raise errors.OpExecError(f"Copying the disks of {self.name} failed:"
                                             f" {status.get('info', state)}")
                rep.update(done, end)
                now = self.clock()
                if done > best:
                    best, last_change = done, now
                elif now - last_change > STALL_TIMEOUT:
                    raise errors.OpExecError(f"Copying the disks of {self.name} made no"
                                             f" progress for {STALL_TIMEOUT:.0f}s")
                self.sleep(POLL)

    def complete(self) -> None:
        """After the memory migration (guest stopped): finish the copies, stop the exports."""
        self.lu.require_rpc().call_instance_mirror_finish(
            self.source.name, instance=self.data, success=True,
        ).one(self.source.name, f"Could not complete the disk copy of {self.name}")
        self.mirroring = False
        self.lu.require_rpc().call_instance_mirror_release(
            self.target.name, instance=self.data,
        ).one(self.target.name, f"Could not stop the disk exports on {self.target.name}")
        self.exported = False

    def cleanup(self, *, target_won: bool, source_runs: bool) -> None:
        """``migrate --cleanup`` of an interrupted copy (warnings only).

        ``target_won``: the target runs the instance now, the source's
        disks go; else the source's mirror jobs (when its qemu runs) are
        cancelled and the target's disk files, complete or not, go.
        """
        if target_won:
            self.feedback_fn(f"* removing the old disks of {self.name} from {self.source.name}")
            self.remove_source_disks()
            return
        self.mirroring = source_runs
        self.abort()
        self.created = disk_rpc_dicts(self.disks, self.lu.cfg)
        self.remove_target_disks()

    def abort(self) -> None:
        """Cancel the copies on the source and the exports on the target (warnings only)."""
        rpc = self.lu.require_rpc()
        if self.mirroring:
            res = rpc.call_instance_mirror_finish(
                [self.source.name], instance=self.data, success=False).get(self.source.name)
            if res is None or res.failed:
                self.lu.LogWarning(f"Could not cancel the disk copy on {self.source.name}:"
                                   f" {res.fail_msg if res else 'no answer'}")
            self.mirroring = False
        if self.exported:
            res = rpc.call_instance_mirror_release(
                [self.target.name], instance=self.data).get(self.target.name)
            if res is None or res.failed:
                self.lu.LogWarning(f"Could not stop the disk exports on {self.target.name}:"
                                   f" {res.fail_msg if res else 'no answer'}")
            self.exported = False
