"""Tests for ganeti.utils.io: atomic writes and bounded reads."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from ganeti import errors
from ganeti.utils import io
from functools import partial

from fakes.clock import FakeClock


def test_write_file_atomic_writes_and_replaces(tmp_path) -> None:
    path = str(tmp_path / "f")
    io.write_file_atomic(path, "one", mode=0o640)
    io.write_file_atomic(path, b"two")
    assert open(path, "rb").read() == b"two"
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)
    assert sorted(os.listdir(tmp_path)) == ["f"]


def test_crash_between_write_and_rename_keeps_old_file(tmp_path) -> None:
    path = str(tmp_path / "config.data")
    io.write_file_atomic(path, b"old content")
    pid = os.fork()
    if pid == 0:   # child: "crash" right before the rename
        try:
            os.replace = lambda *a, **kw: os._exit(7)
            io.write_file_atomic(path, b"new content that never lands")
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7
    assert open(path, "rb").read() == b"old content"
    # the only trace is a hidden temporary file, fully written but never used
    leftovers = [n for n in os.listdir(tmp_path) if n != "config.data"]
    assert leftovers and all(n.startswith(".config.data.tmp") for n in leftovers)
    # a later write still works
    io.write_file_atomic(path, b"newer")
    assert open(path, "rb").read() == b"newer"


def test_readers_never_see_a_partial_file(tmp_path) -> None:
    path = str(tmp_path / "f")
    versions = [bytes([65 + i]) * 200_000 for i in range(3)]
    io.write_file_atomic(path, versions[0], fsync=False)
    stop = threading.Event()
    seen: list[bytes] = []
    bad: list[int] = []

    def reader() -> None:
        while not stop.is_set() and len(seen) < 100_000:
            data = open(path, "rb").read()
            if data not in versions:
                bad.append(len(data))
            seen.append(data[:1])

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(150):
            io.write_file_atomic(path, versions[i % 3], fsync=False)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert not bad, f"reader saw partial files of sizes {bad[:5]}"
    assert seen


def test_enospc_leaves_old_file_and_no_temp(tmp_path, monkeypatch) -> None:
    path = str(tmp_path / "f")
    io.write_file_atomic(path, b"old")

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.os, "fsync", full_disk)
    with pytest.raises(OSError) as info:
        io.write_file_atomic(path, b"new" * 1000)
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSPC
    assert open(path, "rb").read() == b"old"
    assert os.listdir(tmp_path) == ["f"]


def test_read_file_limit(tmp_path) -> None:
    path = str(tmp_path / "f")
    io.write_file_atomic(path, b"x" * 100)
    assert io.read_file(path, max_size=100) == b"x" * 100
    with pytest.raises(errors.GanetiError, match="larger than 99"):
        io.read_file(path, max_size=99)
    with pytest.raises(FileNotFoundError):
        io.read_file(str(tmp_path / "missing"))


def test_remove_file_and_ensure_dirs(tmp_path) -> None:
    path = str(tmp_path / "f")
    assert io.remove_file(path) is False
    io.write_file_atomic(path, b"")
    assert io.remove_file(path) is True
    target = str(tmp_path / "a" / "b")
    io.ensure_dirs([(target, 0o750)])
    assert os.stat(target).st_mode & 0o777 == 0o750


# --- write_files_atomic -------------------------------------------------------------

def test_write_files_atomic_batch(tmp_path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "a").write_bytes(b"old a")
    files = {str(tmp_path / "a"): b"new a", str(sub / "b"): b"b", str(tmp_path / "c"): b""}
    for sync in (io.SYNC_FSYNC, io.SYNC_SYNCFS, io.SYNC_NONE):
        io.write_files_atomic(files, mode=0o600, sync=sync)
        for path, data in files.items():
            with open(path, "rb") as fh:
                assert fh.read() == data
            assert os.stat(path).st_mode & 0o7777 == 0o600
    leftovers = [n for n in os.listdir(tmp_path) + os.listdir(sub) if ".tmp" in n]
    assert leftovers == []


def test_write_files_atomic_failure_replaces_nothing(tmp_path) -> None:
    (tmp_path / "a").write_bytes(b"old a")
    files = {str(tmp_path / "a"): b"new a", str(tmp_path / "missing-dir" / "b"): b"b"}
    with pytest.raises(OSError):
        io.write_files_atomic(files)
    with open(tmp_path / "a", "rb") as fh:
        assert fh.read() == b"old a"        # the write of b failed before any rename
    assert sorted(os.listdir(tmp_path)) == ["a"]   # the temporary file of a is gone


# --- ScratchPool: recycled inodes ----------------------------------------------------

_Clock = partial(FakeClock, 100.0)


def test_scratch_pool_recycles_the_replaced_inode(tmp_path) -> None:
    clock = _Clock()
    pool = io.ScratchPool(str(tmp_path), cooling=1.0, clock=clock)
    target = str(tmp_path / "job-1")
    io.write_files_atomic({target: b"v1"}, scratch=pool)
    first_inode = os.stat(target).st_ino
    with open(target, "rb") as reader:              # a reader of v1 ...
        io.write_files_atomic({target: b"v2"}, scratch=pool)
        assert len(pool) == 1                       # ... v1's inode is now a spare
        assert reader.read() == b"v1"               # ... and still reads v1
    with open(target, "rb") as fh:
        assert fh.read() == b"v2"
    # not cooled yet: the next write takes a fresh inode
    io.write_files_atomic({target: b"v3"}, scratch=pool)
    assert len(pool) == 2
    clock.now += 1.5
    io.write_files_atomic({target: b"v4"}, scratch=pool)
    assert os.stat(target).st_ino == first_inode    # v1's inode came back, holding v4
    with open(target, "rb") as fh:
        assert fh.read() == b"v4"
    assert os.stat(target).st_mode & 0o7777 == 0o640
    names = sorted(os.listdir(tmp_path))
    assert names[-1] == "job-1" and all(n.startswith(".scratch-") for n in names[:-1])


def test_a_recycled_spare_gets_the_mode_asked_for(tmp_path) -> None:
    # a spare that has the mode already is not changed again; one that has
    # another gets the one asked for
    clock = _Clock()
    pool = io.ScratchPool(str(tmp_path), cooling=1.0, clock=clock)
    target = str(tmp_path / "job-1")
    io.write_files_atomic({target: b"v1"}, mode=0o600, scratch=pool)
    io.write_files_atomic({target: b"v2"}, mode=0o600, scratch=pool)   # v1's inode: a spare
    clock.now += 1.5
    spare_inode = os.stat(target).st_ino
    io.write_files_atomic({target: b"v3"}, mode=0o640, scratch=pool)   # takes v1's 0o600 inode
    assert os.stat(target).st_ino != spare_inode
    assert os.stat(target).st_mode & 0o7777 == 0o640
    clock.now += 1.5
    io.write_files_atomic({target: b"v4"}, mode=0o640, scratch=pool)   # v2's inode, 0o600
    assert os.stat(target).st_mode & 0o7777 == 0o640
    clock.now += 1.5
    io.write_files_atomic({target: b"v5"}, mode=0o640, scratch=pool)   # v3's inode, 0o640 already
    assert os.stat(target).st_mode & 0o7777 == 0o640
    with open(target, "rb") as fh:
        assert fh.read() == b"v5"


def test_scratch_pool_limit_and_leftovers(tmp_path) -> None:
    pool = io.ScratchPool(str(tmp_path), limit=1)
    target = str(tmp_path / "f")
    for i in range(4):
        io.write_files_atomic({target: b"%d" % i}, scratch=pool)
    assert len(pool) == 1 and len(os.listdir(tmp_path)) == 2    # extras removed
    fresh = io.ScratchPool(str(tmp_path))
    assert fresh.adopt_leftovers() == 1 and len(fresh) == 1
    assert fresh.take() is not None                 # usable at once


def test_a_spare_with_longer_old_data_is_cut_to_the_new_length(tmp_path) -> None:
    clock = _Clock()
    pool = io.ScratchPool(str(tmp_path), cooling=0.0, clock=clock)
    target = str(tmp_path / "job-1")
    io.write_files_atomic({target: b"x" * 5000}, scratch=pool)
    io.write_files_atomic({target: b"y" * 3000}, scratch=pool)   # the 5000-byte inode is a spare
    io.write_files_atomic({target: b"short"}, scratch=pool)      # written over it
    with open(target, "rb") as fh:
        assert fh.read() == b"short"
    assert os.path.getsize(target) == 5


def test_two_pools_adopting_the_same_leftovers_never_share_one(tmp_path, monkeypatch) -> None:
    for n in range(6):
        (tmp_path / f".scratch-999-{n}").write_bytes(b"old")
    first, second = io.ScratchPool(str(tmp_path)), io.ScratchPool(str(tmp_path))
    # the second lists the directory before the first renames the spares away
    listing = os.listdir(tmp_path)
    assert first.adopt_leftovers() == 6
    monkeypatch.setattr(io.os, "listdir", lambda _path: listing)
    assert second.adopt_leftovers() == 0            # every rename found them gone
    monkeypatch.undo()
    taken = {first.take() for _ in range(6)}
    assert len(taken) == 6 and None not in taken
    assert all(os.path.basename(str(p)).startswith(f".scratch-{os.getpid()}-") for p in taken)


def test_write_files_atomic_without_exchange_support(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(io, "_exchange_works", False)
    pool = io.ScratchPool(str(tmp_path), cooling=0.0)
    target = str(tmp_path / "f")
    for data in (b"a", b"b", b"c"):
        io.write_files_atomic({target: data}, scratch=pool)
        with open(target, "rb") as fh:
            assert fh.read() == data
    assert len(pool) == 0 and os.listdir(tmp_path) == ["f"]     # plain renames


def test_scratch_pool_full_disk_keeps_the_old_file(tmp_path, monkeypatch) -> None:
    clock = _Clock()
    pool = io.ScratchPool(str(tmp_path), cooling=0.0, clock=clock)
    target = str(tmp_path / "job-1")
    io.write_files_atomic({target: b"v1"}, scratch=pool)
    io.write_files_atomic({target: b"v2"}, scratch=pool)        # one spare now
    assert len(pool) == 1
    files_before = sorted(os.listdir(tmp_path))

    def full_disk(fd: int, data) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(io.os, "write", full_disk)
    with pytest.raises(OSError):
        io.write_files_atomic({target: b"v3", str(tmp_path / "job-2"): b"new"}, scratch=pool)
    monkeypatch.undo()
    with open(target, "rb") as fh:
        assert fh.read() == b"v2"                      # untouched
    assert sorted(os.listdir(tmp_path)) == files_before   # no new file left behind
    assert len(pool) == 1                               # the spare went back to the pool


def test_read_regular_file_never_follows_a_symlink(tmp_path) -> None:
    secret = tmp_path / "outside"
    secret.write_bytes(b"not for you")
    (tmp_path / "plain").write_bytes(b"data")
    os.symlink(secret, tmp_path / "link")
    os.mkdir(tmp_path / "dir")
    os.mkfifo(tmp_path / "fifo")      # O_NONBLOCK: never blocks the reader
    assert io.read_regular_file(str(tmp_path / "plain")) == b"data"
    assert io.read_regular_file(str(tmp_path / "missing")) is None
    for name, why in (("link", "is a symbolic link"), ("dir", "is a directory"),
                      ("fifo", "is not a regular file")):
        with pytest.raises(errors.UntrustedFileError) as info:
            io.read_regular_file(str(tmp_path / name))
        assert str(info.value.args[0]) == f"{name} {why}"
        assert info.value.args[1] == str(tmp_path / name)


def test_write_files_atomic_never_writes_through_a_link_at_its_temporary_name(tmp_path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    seq = next(io._batch_seq) + 1           # the name the next batch uses
    planted = tmp_path / f".f.tmp{os.getpid()}.{seq}"
    planted.symlink_to(target)
    io.write_files_atomic({str(tmp_path / "f"): b"new\n"}, sync=io.SYNC_NONE)
    assert (tmp_path / "f").read_bytes() == b"new\n"
    assert target.read_text() == "keep me\n"
    assert not os.path.lexists(planted)


def _record_syncs(monkeypatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(io, "fsync_dir", lambda path: calls.append(("fsync", path)))
    monkeypatch.setattr(io, "_syncfs", lambda path: calls.append(("syncfs", path)))
    return calls


def test_sync_dirs_fsyncs_every_directory_in_order(tmp_path, monkeypatch) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    os.mkdir(a)
    os.mkdir(b)
    calls = _record_syncs(monkeypatch)
    io.sync_dirs([a, b], io.SYNC_FSYNC, synced=a)   # ``synced`` means nothing here
    assert calls == [("fsync", a), ("fsync", b)]


def test_sync_dirs_syncs_each_filesystem_once_unless_synced_already(tmp_path,
                                                                     monkeypatch) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    os.mkdir(a)
    os.mkdir(b)
    calls = _record_syncs(monkeypatch)
    io.sync_dirs([a, b], io.SYNC_SYNCFS)
    assert calls == [("syncfs", a)]                 # one filesystem
    calls.clear()
    io.sync_dirs([a, b], io.SYNC_SYNCFS, synced=str(tmp_path))
    assert calls == []                              # its syncfs came after the renames
    io.sync_dirs([a, "/proc"], io.SYNC_SYNCFS, synced=str(tmp_path))
    assert calls == [("syncfs", "/proc")]           # another filesystem


def test_sync_dirs_does_nothing_without_durability(tmp_path, monkeypatch) -> None:
    calls = _record_syncs(monkeypatch)
    io.sync_dirs([str(tmp_path)], io.SYNC_NONE)
    assert calls == []
