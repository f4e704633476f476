"""Tests for ganeti.backend.blockdev (file/sharedfile/diskless disks)."""

from __future__ import annotations

import base64
import os
import subprocess

import pytest

from ganeti import errors, serializer
from ganeti.backend import blockdev
from ganeti.objects import Disk
from ganeti.storage.filestorage import file_logical_id

MIB = 1024 * 1024


def _disk(ctx, uuid="d1", size=4, template="file", inst="inst1.example.com", idx=0) -> dict:
    base = "/srv/ganeti/file-storage" if template == "file" else "/srv/ganeti/shared-file-storage"
    lid = list(file_logical_id(base, inst, uuid, idx)) if template != "diskless" else []
    return serializer.to_data(Disk(uuid=uuid, dev_type=template, size=size, logical_id=lid))


def _create(ctx, disk, size=None) -> dict:
    return blockdev.blockdev_create(ctx, disk, size or disk["size"], "inst1.example.com",
                                    True, "", False)


def test_create_returns_canonical_path_and_makes_sparse_file(ctx) -> None:
    disk = _disk(ctx)
    res = _create(ctx, disk)
    assert res["path"] == "/srv/ganeti/file-storage/inst1.example.com/d1.file.disk0"
    assert res["logical_id"] == disk["logical_id"] and res["size"] == 4
    local = ctx.local_path(res["path"])
    assert os.path.getsize(local) == 4 * MIB


def test_create_refuses_existing_and_exclusive_storage(ctx) -> None:
    disk = _disk(ctx)
    _create(ctx, disk)
    with pytest.raises(errors.StorageError, match="already exists"):
        _create(ctx, disk)
    with pytest.raises(errors.StorageError, match="Exclusive storage"):
        blockdev.blockdev_create(ctx, _disk(ctx, "d2"), 1, "i", True, "", True)


def test_create_refuses_path_outside_allowed_dirs(ctx) -> None:
    disk = _disk(ctx)
    disk["logical_id"] = ["loop", "/etc/evil"]
    with pytest.raises(errors.StorageError, match="outside the allowed"):
        _create(ctx, disk)


def test_bad_disk_dict_is_a_storage_error(ctx) -> None:
    with pytest.raises(errors.StorageError, match="dev_type"):
        blockdev.blockdev_remove(ctx, {"uuid": "x"})
    with pytest.raises(errors.StorageError):
        blockdev.blockdev_remove(ctx, "nope")


def test_assemble_links_and_shutdown_unlinks(ctx) -> None:
    disk = _disk(ctx)
    created = _create(ctx, disk)
    res = blockdev.blockdev_assemble(ctx, disk, "inst1.example.com", True, 0)
    assert res["path"] == created["path"]
    assert res["link"] == "/var/run/ganeti/instance-disks/inst1.example.com:0"
    link = ctx.local_path(res["link"])
    assert os.path.realpath(link) == ctx.local_path(created["path"])
    blockdev.blockdev_shutdown(ctx, disk)
    assert not os.path.lexists(link)
    assert os.path.exists(ctx.local_path(created["path"]))


def test_assemble_missing_disk_fails(ctx) -> None:
    with pytest.raises(errors.StorageError, match="does not exist"):
        blockdev.blockdev_assemble(ctx, _disk(ctx), "inst1.example.com", True, 0)


def test_remove_is_idempotent(ctx) -> None:
    disk = _disk(ctx)
    path = ctx.local_path(_create(ctx, disk)["path"])
    blockdev.blockdev_remove(ctx, disk)
    assert not os.path.exists(path)
    blockdev.blockdev_remove(ctx, disk)


def test_grow_and_dryrun(ctx) -> None:
    disk = _disk(ctx)
    path = ctx.local_path(_create(ctx, disk)["path"])
    assert blockdev.blockdev_grow(ctx, disk, 2, True, False, False) == 6
    assert os.path.getsize(path) == 4 * MIB
    assert blockdev.blockdev_grow(ctx, disk, 2, False, False, False) == 6
    assert os.path.getsize(path) == 6 * MIB
    with pytest.raises(errors.StorageError):
        blockdev.blockdev_grow(ctx, disk, -1, False, False, False)


def test_rename_moves_file(ctx) -> None:
    disk = _disk(ctx)
    old = ctx.local_path(_create(ctx, disk)["path"])
    new_id = list(file_logical_id("/srv/ganeti/file-storage", "new.example.com", "d1", 0))
    assert blockdev.blockdev_rename(ctx, [[disk, new_id]]) == [new_id]
    assert not os.path.exists(old)
    assert os.path.exists(ctx.local_path(new_id[1]))


def test_getdimensions_and_find(ctx) -> None:
    disk, missing = _disk(ctx), _disk(ctx, "d9")
    _create(ctx, disk)
    dims = blockdev.blockdev_getdimensions(ctx, [disk, missing, _disk(ctx, template="diskless")])
    assert dims == [[4 * MIB, None], None, [0, None]]
    found = blockdev.blockdev_find(ctx, disk)
    assert found["size"] == 4 and found["is_degraded"] is False
    assert found["dev_path"].endswith("d1.file.disk0")
    assert blockdev.blockdev_find(ctx, missing) is None


def test_read_write_chunks_round_trip(ctx) -> None:
    src, dst = _disk(ctx, "s"), _disk(ctx, "t")
    _create(ctx, src)
    _create(ctx, dst)
    payload = os.urandom(1000)
    with open(ctx.local_path(src["logical_id"][1]), "r+b") as fh:
        fh.seek(MIB + 5)
        fh.write(payload)
    first = blockdev.blockdev_read_chunk(ctx, src, 0, MIB)
    assert first["zero"] and first["data"] == "" and first["length"] == MIB
    assert first["size"] == 4 * MIB and not first["eof"]
    second = blockdev.blockdev_read_chunk(ctx, src, MIB, MIB)
    assert not second["zero"]
    assert blockdev.blockdev_write_chunk(ctx, dst, MIB, second["data"]) == MIB
    last = blockdev.blockdev_read_chunk(ctx, src, 3 * MIB, 2 * MIB)
    assert last["eof"] and last["length"] == MIB
    assert (blockdev.blockdev_checksum(ctx, src) == blockdev.blockdev_checksum(ctx, dst))


def test_write_chunk_refuses_past_end_and_bad_data(ctx) -> None:
    disk = _disk(ctx, size=1)
    _create(ctx, disk)
    data = base64.b64encode(b"x" * 10).decode()
    with pytest.raises(errors.StorageError, match="exceeds"):
        blockdev.blockdev_write_chunk(ctx, disk, MIB - 5, data)
    with pytest.raises(errors.StorageError, match="base64"):
        blockdev.blockdev_write_chunk(ctx, disk, 0, "***")
    with pytest.raises(errors.StorageError, match="length"):
        blockdev.blockdev_read_chunk(ctx, disk, 0, blockdev.MAX_CHUNK_SIZE + 1)


def test_wipe_zeroes_the_range_allocates_it_and_refuses_past_the_end(ctx) -> None:
    disk = _disk(ctx, "w")
    _create(ctx, disk)
    path = ctx.local_path(disk["logical_id"][1])
    with open(path, "r+b") as fh:
        fh.write(b"\xff" * (4 * MIB))
    assert blockdev.blockdev_wipe(ctx, disk, MIB + 7, 2 * MIB) == 2 * MIB
    with open(path, "rb") as fh:
        data = fh.read()
    assert data[:MIB + 7] == b"\xff" * (MIB + 7)
    assert data[MIB + 7:3 * MIB + 7] == bytes(2 * MIB)
    assert data[3 * MIB + 7:] == b"\xff" * (MIB - 7) and len(data) == 4 * MIB
    with pytest.raises(errors.StorageError, match="exceeds"):
        blockdev.blockdev_wipe(ctx, disk, 3 * MIB, 2 * MIB)
    with pytest.raises(errors.StorageError, match="Invalid wipe range"):
        blockdev.blockdev_wipe(ctx, disk, 0, blockdev.MAX_WIPE_SIZE + 1)


def test_zero_out_leaves_files_and_unaligned_ranges_to_the_caller(tmp_path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\xff" * MIB)
    fd = os.open(path, os.O_RDWR)
    try:
        assert not blockdev._zero_out(fd, 0, MIB)       # a regular file: written by the caller
    finally:
        os.close(fd)
    assert path.read_bytes() == b"\xff" * MIB


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/loop-control"),
                    reason="needs root and loop devices for a real block device")
def test_zero_out_zeroes_a_range_of_a_block_device(tmp_path) -> None:
    backing = tmp_path / "backing"
    backing.write_bytes(b"\xff" * (4 * MIB))
    dev = subprocess.run(["losetup", "--find", "--show", str(backing)], check=True,
                         capture_output=True, text=True).stdout.strip()
    try:
        fd = os.open(dev, os.O_RDWR)
        try:
            assert not blockdev._zero_out(fd, 100, MIB)     # not 512-byte aligned
            assert blockdev._zero_out(fd, MIB, 2 * MIB)
            os.fsync(fd)
            data = os.pread(fd, 4 * MIB, 0)
        finally:
            os.close(fd)
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)
    assert data == b"\xff" * MIB + bytes(2 * MIB) + b"\xff" * MIB
    assert backing.read_bytes() == data


def test_sharedfile_uses_ssconf_dir_as_written(ctx, tmp_path) -> None:
    shared = tmp_path / "shared"
    with open(ctx.paths.ssconf_file("shared_file_storage_dir"), "w") as fh:
        fh.write(str(shared) + "\n")
    disk = serializer.to_data(Disk(uuid="s1", dev_type="sharedfile", size=1, logical_id=list(
        file_logical_id(str(shared), "i1", "s1", 0))))
    res = blockdev.blockdev_create(ctx, disk, 1, "i1", True, "", False)
    assert res["path"] == str(shared / "i1" / "s1.file.disk0")
    assert os.path.getsize(res["path"]) == MIB


def test_diskless_is_a_noop(ctx) -> None:
    disk = _disk(ctx, template="diskless")
    assert blockdev.blockdev_create(ctx, disk, 1, "i", True, "", False)["path"] == ""
    assert blockdev.blockdev_assemble(ctx, disk, "i", True, 0) == {"path": "", "link": None,
                                                                  "uri": None}
    with pytest.raises(errors.StorageError, match="no data"):
        blockdev.blockdev_read_chunk(ctx, disk, 0, 1)


def test_getstatus_reports_size_activity_and_missing_disks(ctx) -> None:
    inst = "inst1.example.com"
    active, idle, gone = _disk(ctx, "d1"), _disk(ctx, "d2", idx=1), _disk(ctx, "d3", idx=2)
    for disk in (active, idle):
        _create(ctx, disk)
    blockdev.blockdev_assemble(ctx, active, inst, True, 0)
    entries = [[active, inst, 0], [idle, inst, 1], [gone, inst, 2],
               [_disk(ctx, "d4", template="diskless"), inst, 3]]
    assert blockdev.blockdev_getstatus(ctx, entries) == [
        [4 * MIB, True], [4 * MIB, False], None, [0, True]]
    # the link of another index, or a truncated file, shows as such
    assert blockdev.blockdev_getstatus(ctx, [[active, inst, 1]]) == [[4 * MIB, False]]
    os.truncate(ctx.local_path(blockdev.blockdev_find(ctx, active)["dev_path"]), MIB)
    blockdev.blockdev_shutdown(ctx, active)
    assert blockdev.blockdev_getstatus(ctx, [[active, inst, 0]]) == [[MIB, False]]


def test_getstatus_refuses_malformed_entries(ctx) -> None:
    with pytest.raises(errors.StorageError, match="expected \\[disk, instance_name, idx\\]"):
        blockdev.blockdev_getstatus(ctx, [[_disk(ctx), "inst1.example.com"]])


def test_convert_copies_a_disk_into_another_of_this_node(ctx) -> None:
    # gnt-instance modify -t sharedfile/file: the data goes to the new disk as it is
    src, dst = _disk(ctx, "c1"), _disk(ctx, "c2", idx=1)
    _create(ctx, src)
    _create(ctx, dst)
    with open(ctx.local_path(src["logical_id"][1]), "r+b") as fh:
        fh.seek(3 * MIB + 5)
        fh.write(b"payload")
    assert blockdev.blockdev_convert(ctx, src, dst) == 4 * MIB
    assert blockdev.blockdev_checksum(ctx, src) == blockdev.blockdev_checksum(ctx, dst)
    small = _disk(ctx, "c3", size=1, idx=2)
    _create(ctx, small)
    with pytest.raises(errors.StorageError, match="smaller"):
        blockdev.blockdev_convert(ctx, src, small)
