"""Tests for ganeti.storage: registry, diskless, file and sharedfile."""

from __future__ import annotations

import os

import pytest

from ganeti import constants, errors, pathutils, serializer, storage
from ganeti.storage import base
from ganeti.storage.filestorage import FileStorage, SharedFileStorage, file_logical_id

MIB = 1024 * 1024


def node(tmp_path, name="node1") -> pathutils.Paths:
    return pathutils.Paths(root=str(tmp_path / name))


def disk_for(st: FileStorage, size: int = 4, inst: str = "inst1", uuid: str = "d1",
             idx: int = 0) -> base.DiskSpec:
    return base.DiskSpec(uuid=uuid, size=size, instance_name=inst, index=idx,
                         logical_id=st.make_logical_id(inst, uuid, idx))


def test_registry(tmp_path):
    paths = node(tmp_path)
    assert isinstance(storage.get_storage(constants.DT_FILE, paths), FileStorage)
    assert isinstance(storage.get_storage(constants.DT_SHARED_FILE, paths), SharedFileStorage)
    with pytest.raises(errors.StorageError, match="rbd"):
        storage.get_storage(constants.DT_RBD, paths)


def test_diskless_is_noop(tmp_path):
    st = storage.get_storage(constants.DT_DISKLESS, node(tmp_path))
    d = base.DiskSpec(uuid="x", size=0)
    assert st.create(d) == ""
    assert st.get_size(d) == 0
    assert list(st.export_stream(d)) == []
    st.remove(d)
    with pytest.raises(errors.StorageError):
        st.grow(d, 1)


def test_create_sparse_file(tmp_path):
    paths = node(tmp_path)
    st = storage.get_storage(constants.DT_FILE, paths)
    d = disk_for(st, size=64)
    path = st.create(d)
    assert path == os.path.join(paths.file_storage_dir, "inst1", "d1.file.disk0")
    assert os.path.getsize(path) == 64 * MIB
    assert os.stat(path).st_blocks * 512 < 64 * MIB  # sparse
    assert st.get_size(d) == 64
    assert st.assemble(d) == path
    st.shutdown(d)


def test_create_refuses_existing_and_bad_size(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    st.create(disk_for(st))
    with pytest.raises(errors.StorageError, match="already exists"):
        st.create(disk_for(st))
    with pytest.raises(errors.StorageError, match="Invalid size"):
        st.create(disk_for(st, size=0, uuid="d2"))


def test_grow(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    d = disk_for(st, size=4)
    st.create(d)
    assert st.grow(d, 6) == 10
    assert st.get_size(d) == 10
    with pytest.raises(errors.StorageError, match="Invalid grow"):
        st.grow(d, -1)


def test_remove_is_idempotent_and_cleans_dir(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    d = disk_for(st)
    path = st.create(d)
    st.remove(d)
    assert not os.path.exists(path)
    assert not os.path.exists(os.path.dirname(path))
    assert os.path.isdir(st.storage_dir)
    st.remove(d)
    with pytest.raises(errors.StorageError, match="does not exist"):
        st.assemble(d)


@pytest.mark.parametrize("bad", [
    "/etc/passwd",
    "{storage}/../../../etc/evil",
    "{storage}/inst/../../escape",
    "relative/path",
], ids=["outside", "dotdot", "dotdot-inner", "relative"])
def test_path_allow_list_refusal(tmp_path, bad):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    d = base.DiskSpec(uuid="d1", size=1, logical_id=("loop", bad.format(storage=st.storage_dir)))
    with pytest.raises(errors.StorageError):
        st.create(d)


def test_symlink_escape_refused(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    os.makedirs(st.storage_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, os.path.join(st.storage_dir, "inst1"))
    with pytest.raises(errors.StorageError, match="outside the allowed"):
        st.create(disk_for(st))
    assert list(outside.iterdir()) == []


def test_bad_logical_id(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    with pytest.raises(errors.StorageError, match="Invalid logical id"):
        st.create(base.DiskSpec(uuid="d", size=1, logical_id=("nbd", "/x")))


def test_allowed_paths_file(tmp_path):
    paths = node(tmp_path)
    extra = tmp_path / "extra-store"
    os.makedirs(paths.conf_dir)
    with open(paths.file_storage_paths_file, "w") as fh:
        fh.write(f"# allowed\n{extra}\n")
    st = storage.get_storage(constants.DT_FILE, paths)
    d = base.DiskSpec(uuid="d", size=1, logical_id=file_logical_id(str(extra), "i", "d", 0))
    assert st.create(d).startswith(str(extra))


def test_config_path_rerooted_on_virtual_node(tmp_path):
    paths = node(tmp_path)
    st = storage.get_storage(constants.DT_FILE, paths, storage_dir="/srv/ganeti/file-storage")
    assert st.storage_dir == paths.file_storage_dir
    d = base.DiskSpec(uuid="d", size=1, logical_id=file_logical_id(
        "/srv/ganeti/file-storage", "i", "d", 0))
    assert st.create(d).startswith(str(tmp_path / "node1"))


def test_rename(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    d = disk_for(st)
    old = st.create(d)
    new_id = st.make_logical_id("inst2", "d1", 0)
    assert st.rename(d, new_id) == new_id
    assert not os.path.exists(old)
    moved = base.DiskSpec(uuid="d1", size=4, logical_id=new_id)
    assert st.get_size(moved) == 4


def test_export_import_round_trip(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    src = disk_for(st, size=2, uuid="src")
    dst = disk_for(st, size=2, uuid="dst", inst="inst2")
    path = st.create(src)
    st.create(dst)
    payload = os.urandom(3000)
    with open(path, "r+b") as fh:
        fh.seek(MIB + 17)
        fh.write(payload)
    written = st.import_stream(dst, st.export_stream(src, chunk_size=65536))
    assert written == 2 * MIB
    assert open(st.get_path(dst), "rb").read() == open(path, "rb").read()


def test_import_refuses_oversized_data(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    d = disk_for(st, size=1)
    st.create(d)
    with pytest.raises(errors.StorageError, match="exceeds"):
        st.import_stream(d, [b"x" * MIB, b"y"])
    assert st.get_size(d) == 1


def test_sharedfile_shared_between_nodes(tmp_path):
    shared = str(tmp_path / "shared")
    st1 = storage.get_storage(constants.DT_SHARED_FILE, node(tmp_path, "n1"), storage_dir=shared)
    st2 = storage.get_storage(constants.DT_SHARED_FILE, node(tmp_path, "n2"), storage_dir=shared)
    d = disk_for(st1)
    path = st1.create(d)
    assert path.startswith(shared)
    assert st2.assemble(d) == path


def test_sharedfile_default_dir(tmp_path):
    paths = node(tmp_path)
    st = storage.get_storage(constants.DT_SHARED_FILE, paths)
    assert st.storage_dir == paths.shared_file_storage_dir
    assert st.create(disk_for(st)).startswith(paths.shared_file_storage_dir)


def test_verify(tmp_path):
    st = storage.get_storage(constants.DT_FILE, node(tmp_path))
    assert st.verify() == []
    os.makedirs(os.path.dirname(st.storage_dir))
    open(st.storage_dir, "w").close()
    assert any("not a directory" in p for p in st.verify())


def test_disk_spec_round_trips_through_serializer():
    d = base.DiskSpec(uuid="u", size=3, logical_id=("loop", "/srv/x"), instance_name="i")
    assert serializer.from_data(base.DiskSpec, serializer.loads(serializer.dumps(d))) == d
