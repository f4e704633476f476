"""``gnt-instance move``: copy every disk's data to the target node (chunked
``blockdev_read_chunk``/``blockdev_write_chunk``, checksums compared), then
switch the config over and remove the source volumes (doc/storage.md).
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import instance_mirror, lvm
from ganeti.cmdlib.instance import check_node_online, disk_rpc_dicts
from ganeti.cmdlib.instance_migration import TargetLU
from ganeti.opcodes.instance import OpInstanceMove

__all__ = ["LUInstanceMove", "MOVABLE_TEMPLATES", "COPIED_TEMPLATES"]

#: templates gnt-instance move handles; the disks of the second set are copied (a
#: sharedfile disk is already on the target, diskless has none)
MOVABLE_TEMPLATES = frozenset([constants.DT_FILE, constants.DT_PLAIN, constants.DT_DISKLESS,
                               constants.DT_SHARED_FILE])
COPIED_TEMPLATES = frozenset([constants.DT_FILE, constants.DT_PLAIN])


class LUInstanceMove(TargetLU[OpInstanceMove]):
    """Copy the disks to the target node, then run the instance there."""

    HPATH = "instance-move"
    NEED_SHARED_STORAGE = False
    USE_ALLOCATOR = False
    MIRROR_TO_SECONDARY = False

    def CheckInstance(self) -> None:
        super().CheckInstance()
        check_node_online(self.pnode, " as primary node")
        if self.instance.disk_template not in MOVABLE_TEMPLATES:
            raise errors.OpPrereqError(f"Disk template {self.instance.disk_template} cannot"
                                       " be moved", errors.ECODE_STATE)
        # plain: the target's volume groups must have room for every volume first
        lvm.check_vg_free(self, [self.target], lvm.required_vg_sizes(
            (d.logical_id[0], d.size) for d in self.disks if d.dev_type == constants.DT_PLAIN))

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        src, dst = self.pnode, self.target
        feedback_fn(f"* shutting down instance {inst.name} on {src.name}")
        self.require_rpc().call_instance_shutdown(
            src.name, instance=self.rpc_instance(), timeout=self.op.shutdown_timeout,
        ).one(src.name, f"Could not shutdown {inst.name}")
        self._shutdown_disks(src.name)
        created = []
        copy = self.instance.disk_template in COPIED_TEMPLATES
        excl = lvm.exclusive_storage(self.cfg.get_cluster_info(), dst,
                                     self.cfg.get_nodegroup(dst.group))
        try:
            for idx, disk in enumerate(self.disks):
                if not copy:
                    continue
                data = disk_rpc_dicts([disk], self.cfg)[0]
                feedback_fn(f"* copying disk {idx} ({disk.size} MiB) to {dst.name}")
                self.require_rpc().call_blockdev_create(
                    dst.name, disk=data, size=disk.size, owner_instance_name=inst.name, on_primary=True,
                    info=constants.DISK_INFO_PREFIX + inst.name,
                    excl_stor=excl and disk.dev_type == constants.DT_PLAIN,
                ).one(dst.name, f"Could not create disk {idx} on {dst.name}")
                created.append(data)
                instance_mirror.copy_disk(self, src.name, dst.name, data, disk.size, idx,
                                          inst.name)
            self._carry_firmware(src, feedback_fn, required=True)
        except errors.GanetiError:
            for data in created:
                self.require_rpc().call_blockdev_remove([dst.name], disk=data)
            raise
        self._switch_primary()
        if copy:
            for data in (disk_rpc_dicts(self.disks, self.cfg)):
                res = self.require_rpc().call_blockdev_remove([src.name], disk=data).get(src.name)
                if res is None or res.failed:
                    self.LogWarning(f"Could not remove the old disk on {src.name}")
        self._start_on_target(feedback_fn)
        self._drop_left(src)
        return None
