"""Block device procedures: create, remove, assemble, grow, rename, query, copy.

A *disk dict* is ``serializer.to_data(objects.Disk)``: the device type is
``dev_type`` (``diskless``, ``file``, ``sharedfile``, ``plain``), the volume
is named by ``logical_id`` (``[driver, path]`` for file based templates,
built by the master with ``storage.filestorage.file_logical_id``;
``[vg, lv_name]`` for ``plain``), ``size`` is MiB and ``children`` are the
disks it is built on.  Create, assemble, shutdown and remove walk the whole
tree (:mod:`ganeti.storage.tree`); the other procedures act on the top disk.
LVM commands run through ``ctx.storage_runner``.

File based disks must lie in an allowed directory of the node (see
:mod:`ganeti.storage.filestorage`).  The storage directory used for each
template is the cluster's, as this node's ssconf says
(``ssconf_file_storage_dir`` / ``ssconf_shared_file_storage_dir``), or the
node's default when ssconf has none.  ``file`` directories are taken below
the node root in a virtual cluster; a ``sharedfile`` directory is used as
written, so every node sees the same files.

Paths in results travel in canonical form (root ``/``) when they lie below
the node root, and as written otherwise (a shared directory).

Data transfer between nodes (``gnt-instance move``): the master pipes the
data, reading :func:`blockdev_read_chunk` on the source and writing
:func:`blockdev_write_chunk` on the target, then compares
:func:`blockdev_checksum` on both.  All-zero chunks are reported as
``zero`` without data, so sparse disks cost little.
"""

from __future__ import annotations

import base64
import dataclasses
import fcntl
import hashlib
import logging
import os
import stat
import struct
from collections.abc import Callable
from typing import Any

from ganeti import constants, errors, objects, serializer, storage
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, SLOW, TMO_1DAY, procedure
from ganeti.storage import drbd, tree
from ganeti.storage.base import MIB, DiskSpec
from ganeti.storage.lvm import LogicalVolume

__all__ = [
    "blockdev_create", "blockdev_remove", "blockdev_assemble", "blockdev_shutdown",
    "blockdev_grow", "blockdev_rename", "blockdev_setinfo", "blockdev_getdimensions",
    "blockdev_getstatus",
    "blockdev_find", "blockdev_snapshot",
    "blockdev_read_chunk", "blockdev_write_chunk", "blockdev_checksum", "blockdev_wipe",
    "blockdev_convert",
]

logger = logging.getLogger(__name__)

#: largest chunk blockdev_read_chunk/blockdev_write_chunk accept (bytes)
MAX_CHUNK_SIZE = 16 * MIB
#: largest range one blockdev_wipe call overwrites (bytes)
MAX_WIPE_SIZE = 1024 * MIB
_SSCONF_STORAGE_KEYS = {
    constants.DT_FILE: "file_storage_dir",
    constants.DT_SHARED_FILE: "shared_file_storage_dir",
}


# --- helpers shared with backend.instance and backend.os ---------------------

def parse_disk(data: Any, instance_name: str = "", index: int = 0) -> tuple[str, DiskSpec]:
    """``(dev_type, DiskSpec)`` of a disk dict, children included;
    raises :class:`errors.StorageError`."""
    if not isinstance(data, dict):
        raise errors.StorageError("Invalid disk description: expected a disk object, got"
                                  f" {type(data).__name__}")
    dynamic = data.get(drbd.DYNAMIC_KEY) or {}
    if not isinstance(dynamic, dict):
        raise errors.StorageError(f"Invalid {drbd.DYNAMIC_KEY}: expected an object")
    try:
        disk = serializer.from_data(objects.Disk, {k: v for k, v in data.items()
                                                   if k != drbd.DYNAMIC_KEY})
    except errors.SerializationError as exc:
        raise errors.StorageError(f"Invalid disk description: {exc}") from exc
    if "dev_type" not in data:
        raise errors.StorageError(f"Disk {disk.uuid or '?'} has no dev_type")
    spec = _spec_of(disk, instance_name, index, depth=0)
    if dynamic:
        spec = dataclasses.replace(spec, dynamic=dynamic)
    return disk.dev_type, spec


#: deepest disk tree accepted (DRBD over LVs is 2 levels)
_MAX_TREE_DEPTH = 4


def _spec_of(disk: objects.Disk, instance_name: str, index: int, depth: int) -> DiskSpec:
    if depth > _MAX_TREE_DEPTH:
        raise errors.StorageError(f"Disk {disk.uuid}: disk tree deeper than {_MAX_TREE_DEPTH}")
    if not isinstance(disk.size, int) or isinstance(disk.size, bool):
        raise errors.StorageError(f"Disk {disk.uuid}: invalid size {disk.size!r}")
    children = tuple(_spec_of(c, instance_name, index, depth + 1) for c in disk.children)
    return DiskSpec(uuid=disk.uuid, size=disk.size, logical_id=tuple(disk.logical_id),
                    instance_name=instance_name, index=index, name=disk.name, mode=disk.mode,
                    dev_type=disk.dev_type, children=children, spindles=disk.spindles)


def _ssconf_value(ctx: NodeContext, key: str) -> str | None:
    try:
        with open(ctx.paths.ssconf_file(key), encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def storage_for(ctx: NodeContext, template: str, *,
                exclusive_storage: bool = False) -> storage.BaseStorage:
    """The device class of ``template`` on this node (see module docstring)."""
    key = _SSCONF_STORAGE_KEYS.get(template)
    storage_dir = _ssconf_value(ctx, key) if key else None
    return storage.get_storage(template, ctx.paths, storage_dir=storage_dir,
                               runner=ctx.storage_runner, exclusive_storage=exclusive_storage,
                               hostname=ctx.hostname)


def factory_for(ctx: NodeContext, *, exclusive_storage: bool = False) -> tree.DeviceFactory:
    """The ``dev_type -> device`` function of this node for the tree walks."""
    return storage.device_factory(
        ctx.paths, storage_dirs={t: _ssconf_value(ctx, k) for t, k in _SSCONF_STORAGE_KEYS.items()},
        runner=ctx.storage_runner, exclusive_storage=exclusive_storage, hostname=ctx.hostname)


def wire_path(ctx: NodeContext, path: str) -> str:
    """``path`` in canonical form if it is below the node root, else as is."""
    if not path:
        return path
    try:
        return ctx.canonical(path)
    except ValueError:
        return path


def _link_name(ctx: NodeContext, instance_name: str, idx: int) -> str:
    return os.path.join(ctx.paths.instance_disks_dir, f"{instance_name}:{idx}")


def _make_link(ctx: NodeContext, instance_name: str, idx: int, target: str) -> str | None:
    """Symlink ``instance-disks/<instance>:<idx>`` -> ``target`` (Ganeti's disk links)."""
    if not instance_name or not target:
        return None
    link = _link_name(ctx, instance_name, idx)
    try:
        os.makedirs(ctx.paths.instance_disks_dir, mode=0o750, exist_ok=True)
        if os.path.islink(link) or os.path.exists(link):
            os.unlink(link)
        os.symlink(target, link)
    except OSError as exc:
        raise errors.StorageError(f"Cannot create disk link {link}: {exc}") from exc
    return link


def _remove_links_to(ctx: NodeContext, target: str) -> None:
    try:
        entries = os.listdir(ctx.paths.instance_disks_dir)
    except OSError:
        return
    for entry in entries:
        link = os.path.join(ctx.paths.instance_disks_dir, entry)
        try:
            if os.path.islink(link) and os.readlink(link) == target:
                os.unlink(link)
        except OSError as exc:
            logger.warning("Cannot remove disk link %s: %s", link, exc)


def assemble_disk(ctx: NodeContext, data: Any, instance_name: str, idx: int,
                  as_primary: bool = True) -> tuple[str, str]:
    """Assemble one disk dict; ``(template, local path)`` (``""`` for diskless).
    ``as_primary``: the instance runs here, a mirror is made primary."""
    template, spec = parse_disk(data, instance_name, idx)
    factory = factory_for(ctx)
    path = tree.assemble_tree(factory, spec)
    if as_primary:
        factory(template).open(spec)
    if path:
        _make_link(ctx, instance_name, idx, path)
    return template, path


# --- procedures --------------------------------------------------------------

@procedure(NORMAL)
def blockdev_create(ctx: NodeContext, disk: dict, size: int, owner_instance_name: str,
                    on_primary: bool, info: str, excl_stor: bool) -> dict[str, Any]:
    """Create the volume (size MiB); drbd: set up and connected, and on the primary made primary
    (the initial sync). -> {path (canonical), logical_id, size}

    Create the volume of ``disk`` with ``size`` MiB.

    Returns ``{"path": wire path ("" for diskless), "logical_id": [...],
    "size": MiB}``.  The children of the disk are created first; a failure
    removes again what this call created.  Refuses an existing volume,
    sizes < 1 and ``excl_stor`` (exclusive storage, an LVM feature) for
    other types than ``plain``.  ``info`` tags a ``plain`` volume (Ganeti's
    ``originstname+<instance>``).  A ``drbd`` disk is set up and connected
    once made, and on the primary (``on_primary``; the master creates it on
    the secondary first) made primary with force: the initial sync starts.
    """
    if excl_stor and disk.get("dev_type") != constants.DT_PLAIN:
        raise errors.StorageError("Exclusive storage is not supported by"
                                  f" disk template {disk.get('dev_type')!r}")
    template, spec = parse_disk(disk, owner_instance_name)
    spec = dataclasses.replace(spec, size=size, instance_name=owner_instance_name, tag=info)
    factory = factory_for(ctx, exclusive_storage=excl_stor)
    path = tree.create_tree(factory, spec)
    try:
        factory(template).activate_new(spec, on_primary)
    except errors.StorageError as exc:
        try:
            tree.remove_tree(factory, spec)
        except errors.StorageError as again:
            raise errors.StorageError(f"{exc}; removing what was created failed too:"
                                      f" {again}") from exc
        raise
    logger.info("Created disk %s of %s (%s, %d MiB, on_primary=%s, info=%r)",
                spec.uuid, owner_instance_name, template, size, on_primary, info)
    return {"path": wire_path(ctx, path), "logical_id": list(spec.logical_id), "size": size}


@procedure(NORMAL)
def blockdev_remove(ctx: NodeContext, disk: dict) -> None:
    """Remove the volume; a missing one is fine. -> None

    Remove the volume of ``disk``; a missing volume is not an error.
    """
    template, spec = parse_disk(disk)
    store = storage_for(ctx, template)
    if template != constants.DT_DISKLESS:
        try:
            _remove_links_to(ctx, store.get_path(spec))
        except errors.StorageError:
            pass
    tree.remove_tree(factory_for(ctx), spec)


@procedure(NORMAL)
def blockdev_assemble(ctx: NodeContext, disk: dict, instance_name: str, as_primary: bool,
                      idx: int) -> dict[str, Any]:
    """Activate the volume as disk idx of the instance (as_primary: the instance runs here, a
    drbd side is made primary). -> {path, link, uri}

    Make ``disk`` usable as disk ``idx`` of ``instance_name``.

    Returns ``{"path": wire path, "link": wire path of the
    instance-disks/<instance>:<idx> symlink or None, "uri": None}``.
    Raises if the volume does not exist.
    """
    _, path = assemble_disk(ctx, disk, instance_name, idx, as_primary)
    link = _link_name(ctx, instance_name, idx) if path and instance_name else None
    logger.info("Assembled disk %d of %s (primary=%s): %s", idx, instance_name, as_primary, path)
    return {"path": wire_path(ctx, path), "link": wire_path(ctx, link) if link else None,
            "uri": None}


@procedure(NORMAL)
def blockdev_shutdown(ctx: NodeContext, disk: dict) -> None:
    """Deactivate the volume (data stays). -> None

    Undo assemble: drop the instance-disks links to the volume (data stays).
    """
    template, spec = parse_disk(disk)
    store = storage_for(ctx, template)
    tree.shutdown_tree(factory_for(ctx), spec)
    if template != constants.DT_DISKLESS:
        _remove_links_to(ctx, store.get_path(spec))


@procedure(NORMAL)
def blockdev_grow(ctx: NodeContext, disk: dict, amount: int, dryrun: bool,
                  backingstore: bool, excl_stor: bool) -> int:
    """Grow the volume by amount MiB (dryrun: only check). -> new size MiB

    Grow ``disk`` by ``amount`` MiB; return the new size in MiB.

    With ``dryrun`` nothing changes (the volume must exist; the size it
    would have is returned).  ``backingstore`` grows the data volume under
    a ``drbd`` disk (each node's own; the master does it on both, then the
    mirror itself without it: ``drbdsetup resize``); it makes no difference
    for the other types.
    """
    if excl_stor and disk.get("dev_type") != constants.DT_PLAIN:
        raise errors.StorageError("Exclusive storage is not supported for this disk template")
    if not isinstance(amount, int) or amount < 0:
        raise errors.StorageError(f"Invalid grow amount {amount!r} MiB")
    template, spec = parse_disk(disk)
    if template == constants.DT_DRBD8 and backingstore:
        # the data volume under the mirror (each node grows its own)
        if not spec.children:
            raise errors.StorageError(f"Disk {spec.uuid}: a DRBD disk has no data volume")
        spec = spec.children[0]
        template = spec.dev_type
    store = storage_for(ctx, template, exclusive_storage=excl_stor)
    if dryrun:
        return store.get_size(spec) + amount if template != constants.DT_DISKLESS else 0
    return store.grow(spec, amount)


@procedure(NORMAL)
def blockdev_snapshot(ctx: NodeContext, disk: dict, snap_size: int) -> list[Any]:
    """Snapshot the volume (snap_size MiB of change room; plain only). -> logical_id of the
    snapshot (remove it with blockdev_remove)

    A point-in-time copy of ``disk`` with ``snap_size`` MiB of change room.

    Returns the snapshot's logical id (``plain``: ``[vg, "<lv>.snap"]``, a
    volume of the disk's type); the caller removes it with
    :func:`blockdev_remove` when done (``gnt-backup export --noshutdown``,
    doc/exports.md).  Types that cannot make snapshots refuse.
    """
    template, spec = parse_disk(disk)
    return list(storage_for(ctx, template).snapshot(spec, snap_size))


@procedure(NORMAL)
def blockdev_rename(ctx: NodeContext, devlist: list) -> list[list[Any]]:
    """Rename volumes [[disk, new_logical_id], ...]. -> [new_logical_id, ...]

    Rename volumes: ``[[disk, new_logical_id], ...]``; return the new ids.

    Stops at the first failure (earlier renames stay done; the error says
    which disk failed).
    """
    result = []
    for entry in devlist:
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise errors.StorageError(f"Invalid rename entry {entry!r}: expected [disk, new_id]")
        template, spec = parse_disk(entry[0])
        if not isinstance(entry[1], (list, tuple)):
            raise errors.StorageError(f"Invalid new logical id {entry[1]!r} for disk {spec.uuid}")
        result.append(list(storage_for(ctx, template).rename(spec, tuple(entry[1]))))
    return result


@procedure(NORMAL)
def blockdev_setinfo(ctx: NodeContext, disk: dict, info: str) -> None:
    """Label the volume with info (plain: its originstname+ tag; other types keep nothing). ->
    None

    Label the volume of ``disk`` with ``info`` (an instance rename:
    ``originstname+<new name>``); types that keep no label do nothing."""
    template, spec = parse_disk(disk)
    storage_for(ctx, template).set_info(spec, info)


StoreOf = Callable[[str], storage.BaseStorage]


def _batch_stores(ctx: NodeContext) -> StoreOf:
    """``template -> device class`` for one call about many disks: each class made once,
    the LV class looking volumes up in one ``lvs`` per volume group."""
    made: dict[str, storage.BaseStorage] = {}

    def store_of(template: str) -> storage.BaseStorage:
        if template not in made:
            store = storage_for(ctx, template)
            if isinstance(store, LogicalVolume):
                store.remember_listings()
            made[template] = store
        return made[template]
    return store_of


def _dimensions(store_of: StoreOf, data: Any) -> list[Any] | None:
    template, spec = parse_disk(data)
    if template == constants.DT_DISKLESS:
        return [0, None]
    store = store_of(template)
    if template not in constants.DTS_FILEBASED:
        found = store.status(spec)
        return None if found is None else [found.size * MIB, found.spindles]
    try:
        path = store.get_path(spec)
        return [os.stat(path).st_size, None]
    except (errors.StorageError, OSError):
        return None


@procedure(FAST)
def blockdev_getdimensions(ctx: NodeContext, disks: list) -> list[list[Any] | None]:
    """[[size_bytes, spindles] or None (missing), ...] per disk dict.

    ``[[size_bytes, spindles], ...]`` per disk; None for a missing volume.

    Spindles are None for file storage; for ``plain`` the number of physical
    volumes the LV lies on.
    """
    store_of = _batch_stores(ctx)
    return [_dimensions(store_of, d) for d in disks]


def _status(ctx: NodeContext, store_of: StoreOf, entry: Any) -> list[Any] | None:
    if not isinstance(entry, (list, tuple)) or len(entry) != 3 \
            or not isinstance(entry[1], str) or not isinstance(entry[2], int):
        raise errors.StorageError(f"Invalid disk status entry {entry!r}:"
                                  " expected [disk, instance_name, idx]")
    data, instance_name, idx = entry
    template, spec = parse_disk(data, instance_name, idx)
    if template == constants.DT_DISKLESS:
        return [0, True]
    usable = True     # an LV must be activated too (it is not after a reboot)
    try:
        store = store_of(template)
        if template in constants.DTS_FILEBASED:
            path = store.get_path(spec)
            size = os.stat(path).st_size if os.path.isfile(path) else None
        else:
            found = store.status(spec)
            path, size = ("", None) if found is None else (found.path, found.size * MIB)
            usable = found is not None and found.active
    except (errors.StorageError, OSError):
        return None
    if size is None:
        return None
    link = _link_name(ctx, instance_name, idx)
    try:
        active = usable and os.path.islink(link) and os.readlink(link) == path
    except OSError:
        active = False
    return [size, active]


@procedure(FAST)
def blockdev_getstatus(ctx: NodeContext, disks: list) -> list[list[Any] | None]:
    """[[size_bytes, active] or None (missing), ...] per [disk, instance_name, idx]; active: the
    instance-disks/<instance>:<idx> link points at the volume.

    ``[[size_bytes, active], ...]`` per ``[disk, instance_name, idx]``; None: missing.

    ``active`` says whether the disk is assembled as disk ``idx`` of the
    instance (the ``instance-disks/<instance>:<idx>`` link that
    :func:`blockdev_assemble` makes points at the volume).  A diskless
    disk gives ``[0, True]``.  Used by the master's verify-disks
    (doc/protocols/opcodes.md, "Verify disks").
    """
    store_of = _batch_stores(ctx)
    return [_status(ctx, store_of, entry) for entry in disks]


@procedure(FAST)
def blockdev_find(ctx: NodeContext, disk: dict) -> dict[str, Any] | None:
    """{dev_path, size, major, minor, sync_percent, estimated_time, is_degraded, ldisk_status}
    or None when the volume does not exist; drbd adds drbd: {cstate, role, peer_role, disk,
    peer_disk, out_of_sync_kib}.

    Status of ``disk`` on this node, or None if its volume does not exist.

    ``{"dev_path": wire path, "size": MiB, "major": None, "minor": None,
    "sync_percent": None, "estimated_time": None, "is_degraded": False,
    "ldisk_status": "ok"}`` (Ganeti's BlockDevStatus fields).  A ``drbd``
    disk fills in its minor, the resync's percent and estimated seconds,
    ``is_degraded`` and ``ldisk_status`` (``ok``/``unknown``/``faulty``)
    from its side's state, and adds ``drbd``: ``{"cstate", "role",
    "peer_role", "disk", "peer_disk", "out_of_sync_kib", "sync_speed_kib"}``.
    """
    template, spec = parse_disk(disk)
    store = storage_for(ctx, template)
    if not store.exists(spec):
        return None
    result: dict[str, Any] = {
        "dev_path": wire_path(ctx, store.get_path(spec)), "size": store.get_size(spec),
        "major": None, "minor": None, "sync_percent": None, "estimated_time": None,
        "is_degraded": False, "ldisk_status": constants.LDS_OKAY}
    if template == constants.DT_DRBD8:
        result.update(drbd_state(store, spec))
    return result


def drbd_state(store: storage.BaseStorage, spec: DiskSpec) -> dict[str, Any]:
    """The mirror fields of :func:`blockdev_find` for this node's side of a DRBD disk."""
    assert isinstance(store, drbd.DrbdDevice)
    minor = store.side(spec).minor
    status = store.mirror_status(spec)
    if status is None:
        return {"major": drbd.DRBD_MAJOR, "minor": minor, "is_degraded": True,
                "ldisk_status": constants.LDS_UNKNOWN, "drbd": {"cstate": "Unconfigured"}}
    return {"major": drbd.DRBD_MAJOR, "minor": minor, "sync_percent": status.sync_percent,
            "estimated_time": status.est_time, "is_degraded": status.is_degraded,
            "ldisk_status": status.ldisk_status,
            "drbd": {"cstate": status.cstate, "role": status.role,
                     "peer_role": status.peer_role, "disk": status.disk,
                     "peer_disk": status.peer_disk, "out_of_sync_kib": status.out_of_sync,
                     "sync_speed_kib": status.speed}}


def _file_path(ctx: NodeContext, disk: dict) -> str:
    template, spec = parse_disk(disk)
    if template == constants.DT_DISKLESS:
        raise errors.StorageError("Diskless disks hold no data to transfer")
    store = storage_for(ctx, template)
    path = store.get_path(spec)
    if template == constants.DT_PLAIN and not _is_block_device(path):
        path = store.assemble(spec)     # an inactive LV (after a reboot): lvchange -ay
    if not (os.path.isfile(path) or _is_block_device(path)):
        raise errors.StorageError(f"Disk {spec.uuid} ({path}) does not exist")
    return path


def _is_block_device(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def _end(fd: int) -> int:
    """The size in bytes of the open file or block device ``fd``."""
    return os.lseek(fd, 0, os.SEEK_END)


#: ioctl number of BLKZEROOUT (linux/fs.h: _IO(0x12, 127)): zero a byte range of a block device
_BLKZEROOUT = 0x127F


def _zero_out(fd: int, offset: int, size: int) -> bool:
    """Zero ``size`` bytes at ``offset`` of block device ``fd`` with ``BLKZEROOUT``.

    The kernel writes the zeros itself, or has the device do it (SCSI
    WRITE SAME, NVMe and virtio write-zeroes, a loop device's fallocate),
    instead of this process sending them.  False, having written nothing,
    when ``fd`` is not a block device, the range is not 512-byte aligned
    or the kernel refuses: the caller writes the zeros.
    """
    if size <= 0 or offset % 512 or size % 512 or not stat.S_ISBLK(os.fstat(fd).st_mode):
        return False
    try:
        fcntl.ioctl(fd, _BLKZEROOUT, struct.pack("=QQ", offset, size))
    except OSError as exc:
        logger.debug("BLKZEROOUT of %d bytes at %d failed (%s): writing zeros", size, offset, exc)
        return False
    return True


def _check_range(offset: int, length: int) -> None:
    if offset < 0:
        raise errors.StorageError(f"Invalid offset {offset}")
    if not 0 <= length <= MAX_CHUNK_SIZE:
        raise errors.StorageError(f"Invalid chunk length {length}: must be 0..{MAX_CHUNK_SIZE}")


@procedure(NORMAL)
def blockdev_read_chunk(ctx: NodeContext, disk: dict, offset: int, length: int) -> dict[str, Any]:
    """Read <= 16 MiB at offset. -> {data base64 ('' if zero), length, zero, size, eof}

    Read up to ``length`` bytes (max :data:`MAX_CHUNK_SIZE`) at ``offset``.

    Returns ``{"data": base64 text, "length": bytes read, "zero": bool,
    "size": volume size in bytes, "eof": bool}``.  When the chunk is all
    zeros ``zero`` is true and ``data`` is empty (``length`` still counts
    the bytes).  ``eof`` is true when ``offset + length`` reached the end.
    """
    _check_range(offset, length)
    path = _file_path(ctx, disk)
    try:
        with open(path, "rb") as fh:
            size = _end(fh.fileno())
            fh.seek(offset)
            chunk = fh.read(length)
    except OSError as exc:
        raise errors.StorageError(f"Cannot read disk file {path}: {exc}") from exc
    zero = chunk == bytes(len(chunk))
    return {"data": "" if zero else base64.b64encode(chunk).decode("ascii"),
            "length": len(chunk), "zero": zero, "size": size,
            "eof": offset + len(chunk) >= size}


@procedure(NORMAL)
def blockdev_write_chunk(ctx: NodeContext, disk: dict, offset: int, data: str) -> int:
    """Write base64 data at offset (not past the end). -> bytes written

    Write base64 ``data`` at ``offset`` of the volume; return bytes written.

    Refuses to write past the end of the volume (grow it first).
    """
    try:
        chunk = base64.b64decode(data.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise errors.StorageError(f"Invalid base64 data: {exc}") from exc
    _check_range(offset, len(chunk))
    path = _file_path(ctx, disk)
    try:
        with open(path, "r+b") as fh:
            size = _end(fh.fileno())
            if offset + len(chunk) > size:
                raise errors.StorageError(
                    f"Write of {len(chunk)} bytes at offset {offset} exceeds the size of"
                    f" disk {path} ({size} bytes)")
            fh.seek(offset)
            fh.write(chunk)
    except OSError as exc:
        raise errors.StorageError(f"Cannot write disk file {path}: {exc}") from exc
    return len(chunk)


@procedure(SLOW)
def blockdev_wipe(ctx: NodeContext, disk: dict, offset: int, size: int) -> int:
    """Overwrite size bytes (<= 1 GiB) at offset with zeros, fsync'ed. -> bytes written

    Overwrite ``size`` bytes at ``offset`` of the volume with zeros, durably.

    At most :data:`MAX_WIPE_SIZE` bytes a call, never past the end of the
    volume (the master wipes a disk range by range, doc/storage.md,
    "Wiping disks").  A block device is zeroed with ``BLKZEROOUT`` where
    the kernel takes it.  Returns the bytes written.
    """
    if offset < 0 or not 0 <= size <= MAX_WIPE_SIZE:
        raise errors.StorageError(f"Invalid wipe range: {size} bytes at offset {offset}"
                                  f" (at most {MAX_WIPE_SIZE} bytes a call)")
    path = _file_path(ctx, disk)
    zeros = bytes(MIB)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            end = _end(fd)
            if offset + size > end:
                raise errors.StorageError(f"Wipe of {size} bytes at offset {offset} exceeds"
                                          f" the size of disk {path} ({end} bytes)")
            done = size if _zero_out(fd, offset, size) else 0
            while done < size:
                step = min(MIB, size - done)
                done += os.pwrite(fd, zeros[:step] if step < MIB else zeros, offset + done)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise errors.StorageError(f"Cannot wipe disk file {path}: {exc}") from exc
    return done


@procedure(SLOW)
def blockdev_checksum(ctx: NodeContext, disk: dict) -> dict[str, Any]:
    """{sha1, size} of the whole volume (to verify a copy).

    ``{"sha1": hex digest of the whole volume, "size": bytes}``.
    """
    path = _file_path(ctx, disk)
    digest = hashlib.sha1()
    size = 0
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(MIB), b""):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise errors.StorageError(f"Cannot read disk file {path}: {exc}") from exc
    return {"sha1": digest.hexdigest(), "size": size}


@procedure(TMO_1DAY)
def blockdev_convert(ctx: NodeContext, src: dict, dst: dict) -> int:
    """Copy the data of disk src into the existing, as large disk dst (both here), fsync'ed
    (modify -t between file-based templates). -> bytes copied

    Copy the data of disk ``src`` into disk ``dst``, both on this node, fsync'ed (a
    disk template conversion, ``gnt-instance modify -t``).  ``dst`` exists already and
    is at least as large.  Returns the bytes copied."""
    src_path, dst_path = _file_path(ctx, src), _file_path(ctx, dst)
    try:
        with open(src_path, "rb") as rfh:
            size = _end(rfh.fileno())
            fd = os.open(dst_path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                if _end(fd) < size:
                    raise errors.StorageError(f"Disk {dst_path} ({_end(fd)} bytes) is smaller"
                                              f" than {src_path} ({size} bytes)")
                done = 0
                while done < size:
                    chunk = os.pread(rfh.fileno(), min(MIB, size - done), done)
                    if not chunk:
                        break
                    view = memoryview(chunk)
                    while view:
                        written = os.pwrite(fd, view, done)
                        done += written
                        view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError as exc:
        raise errors.StorageError(f"Cannot copy disk {src_path} to {dst_path}: {exc}") from exc
    return done
