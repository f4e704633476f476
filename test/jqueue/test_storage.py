"""Queue files: group commit, serial, archive, drain flag, replication."""

from __future__ import annotations

import os
import threading
import time

import pytest

from ganeti import errors
from ganeti.jqueue import storage as st
from ganeti.pathutils import Paths


@pytest.fixture(params=[st.SYNC_FSYNC, st.SYNC_SYNCFS])
def storage(tmp_path, request):
    replicated: list[tuple[str, bytes]] = []
    renamed: list[tuple[str, str]] = []
    s = st.JobStorage(Paths(root=str(tmp_path)), sync_mode=request.param,
                      replicate=lambda f, c: replicated.append((f, c)),
                      replicate_renames=renamed.extend)
    s.open()
    s.replicated, s.renamed = replicated, renamed
    yield s
    s.close()


def test_layout_and_serial(storage: st.JobStorage) -> None:
    ids = storage.allocate_ids(3)
    assert ids == [1, 2, 3]
    storage.write_jobs([(i, b"{}") for i in ids], serial=True)
    assert open(storage.paths.queue_serial_file).read().strip() == "3"
    assert open(storage.paths.queue_version_file).read().strip() == "1"
    assert storage.list_job_ids() == [1, 2, 3]
    assert storage.read_job(2) == b"{}"
    assert not [n for n in os.listdir(storage.queue_dir) if ".tmp" in n]


def test_serial_survives_reopen(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    s = st.JobStorage(paths)
    s.open()
    ids = s.allocate_ids(5)
    s.write_jobs([(ids[0], b"x")], serial=True)
    s.close()
    s2 = st.JobStorage(paths)
    s2.open()
    assert s2.allocate_ids(1) == [6]
    s2.close()


def test_concurrent_writers_share_commits(storage: st.JobStorage) -> None:
    ids = storage.allocate_ids(20)

    def writer(job_id: int) -> None:
        for k in range(5):
            storage.write_jobs([(job_id, f"{job_id}-{k}".encode())])

    threads = [threading.Thread(target=writer, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for i in ids:
        assert storage.read_job(i) == f"{i}-4".encode()
    assert any(f.endswith("job-1") for f, _ in storage.replicated)


def test_archive(storage: st.JobStorage) -> None:
    storage.write_jobs([(12345, b"a")])
    assert storage.archive_jobs([12345, 999]) == [12345]
    assert storage.read_job(12345) is None
    assert storage.read_archived_job(12345) == b"a"
    assert os.path.exists(os.path.join(storage.archive_dir, "1", "job-12345"))
    assert storage.renamed and storage.renamed[0][1].endswith("archive/1/job-12345")


def test_archive_replicates_its_moves_in_one_call(tmp_path) -> None:
    calls: list[list[tuple[str, str]]] = []
    s = st.JobStorage(Paths(root=str(tmp_path)), replicate_renames=calls.append)
    s.open()
    try:
        s.write_jobs([(9999, b"a"), (10000, b"b"), (10001, b"c")])
        assert s.archive_jobs([9999, 10000, 424242, 10001]) == [9999, 10000, 10001]
        assert calls == [[(s.job_path(i), s.archived_path(i)) for i in (9999, 10000, 10001)]]
        assert [s.read_archived_job(i) for i in (9999, 10000, 10001)] == [b"a", b"b", b"c"]
        assert s.archive_jobs([424242]) == [] and len(calls) == 1   # nothing moved, nothing sent
    finally:
        s.close()


def test_drain_flag(storage: st.JobStorage) -> None:
    assert not storage.is_drained()
    storage.set_drained(True)
    assert storage.is_drained()
    storage.set_drained(False)
    assert not storage.is_drained()


def test_drain_flag_changes_are_replicated_both_ways(tmp_path) -> None:
    flags: list[bool] = []
    s = st.JobStorage(Paths(root=str(tmp_path)), replicate_drain=flags.append)
    s.open()
    try:
        s.set_drained(True)
        s.set_drained(False)
    finally:
        s.close()
    assert flags == [True, False]


def test_failed_commit_raises(storage: st.JobStorage, monkeypatch) -> None:
    # A full disk while writing: the commit fails, the old file stays intact
    # and no temporary file is left behind.
    import errno
    storage.write_jobs([(1, b"old")])
    path = os.path.join(storage.queue_dir, "job-1")
    real_write = os.write

    def full_disk(fd: int, data) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(st.os, "write", full_disk)
    try:
        with pytest.raises(errors.JobQueueError, match="No space left"):
            storage.write_jobs([(1, b"new")])
    finally:
        monkeypatch.setattr(st.os, "write", real_write)
    with open(path, "rb") as fh:
        assert fh.read() == b"old"
    assert not [n for n in os.listdir(storage.queue_dir) if ".tmp" in n]


def test_crash_after_serial_before_job_file_never_reuses_the_id(tmp_path, monkeypatch) -> None:
    # The process "dies" after the serial reached the disk but before the
    # job file was renamed into place (so the id was never acknowledged):
    # after a restart that id is still not handed out again.
    paths = Paths(root=str(tmp_path))
    s = st.JobStorage(paths)
    s.open()
    first = s.allocate_ids(1)[0]
    s.write_jobs([(first, b"{}")], serial=True)          # acknowledged
    doomed = s.allocate_ids(1)[0]
    real_replace = os.replace

    def crash_on_job_file(src: str, dst: str) -> None:
        if os.path.basename(dst).startswith("job-"):
            raise OSError(5, "simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(st.os, "replace", crash_on_job_file)
    with pytest.raises(errors.JobQueueError):
        s.write_jobs([(doomed, b"{}")], serial=True)
    monkeypatch.setattr(st.os, "replace", real_replace)
    assert open(paths.queue_serial_file).read().strip() == str(doomed)
    assert s.read_job(doomed) is None
    s.close()
    again = st.JobStorage(paths)
    again.open()
    try:
        assert again.allocate_ids(1) == [doomed + 1]
    finally:
        again.close()


@pytest.mark.parametrize("serial_content", [None, b"garbage\n", b"0\n"])
def test_archived_ids_never_come_back(tmp_path, serial_content: bytes | None) -> None:
    # Every job was archived and the serial file is lost, damaged or stale:
    # ids still continue after the highest archived one.
    paths = Paths(root=str(tmp_path))
    s = st.JobStorage(paths)
    s.open()
    ids = s.allocate_ids(3)
    s.write_jobs([(i, b"{}") for i in ids], serial=True)
    s.write_jobs([(20005, b"{}")])                      # a later bucket
    assert s.archive_jobs(ids + [20005]) == ids + [20005]
    s.close()
    if serial_content is None:
        os.unlink(paths.queue_serial_file)
    else:
        with open(paths.queue_serial_file, "wb") as fh:
            fh.write(serial_content)
    again = st.JobStorage(paths)
    again.open()
    try:
        assert again.allocate_ids(1) == [20006]
    finally:
        again.close()


def test_rewrites_recycle_inodes_and_spares_are_never_jobs(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    s = st.JobStorage(paths)
    s.open()
    (job_id,) = s.allocate_ids(1)
    for k in range(3):
        s.write_jobs([(job_id, f"v{k}".encode())], serial=True)
    spares = [n for n in os.listdir(s.queue_dir) if n.startswith(".scratch-")]
    assert spares                                  # replaced inodes are kept, not freed
    assert s.list_job_ids() == [job_id] and s.read_job(job_id) == b"v2"
    s.close()
    s2 = st.JobStorage(paths)
    s2.open()                                      # a new process adopts them
    assert s2._writer._scratch is not None and len(s2._writer._scratch) == len(spares)
    s2.write_jobs([(job_id, b"v3")])
    assert s2.read_job(job_id) == b"v3" and s2.list_job_ids() == [job_id]
    s2.close()


def test_read_job_does_not_follow_a_symlink(storage: st.JobStorage, tmp_path) -> None:
    outside = tmp_path / "elsewhere"
    outside.write_bytes(b'{"id": 3, "ops": []}')
    os.symlink(outside, storage.job_path(3))
    os.makedirs(os.path.dirname(storage.archived_path(4)))
    os.symlink(outside, storage.archived_path(4))
    with pytest.raises(errors.UntrustedFileError, match="job-3 is a symbolic link"):
        storage.read_job(3)
    with pytest.raises(errors.UntrustedFileError, match="job-4 is a symbolic link"):
        storage.read_archived_job(4)
    os.mkdir(storage.job_path(5))
    with pytest.raises(errors.UntrustedFileError, match="job-5 is a directory"):
        storage.read_job(5)


def _record_dir_syncs(monkeypatch) -> list[tuple[str, str, str]]:
    """(kind, path, thread name) of every directory fsync and syncfs, still done."""
    calls: list[tuple[str, str, str]] = []
    real_fsync, real_syncfs = st.uio.fsync_dir, st.uio._syncfs

    def fsync_dir(path: str) -> None:
        calls.append(("fsync", path, threading.current_thread().name))
        real_fsync(path)

    def syncfs(path: str) -> None:
        calls.append(("syncfs", path, threading.current_thread().name))
        real_syncfs(path)

    monkeypatch.setattr(st.uio, "fsync_dir", fsync_dir)
    monkeypatch.setattr(st.uio, "_syncfs", syncfs)
    return calls


def test_archive_moves_are_made_durable_by_the_writers_next_commit(tmp_path,
                                                                  monkeypatch) -> None:
    # doc/protocols/jobs.md, "Queue size": the caller (a submission holding
    # the queue lock) syncs nothing; the writer fsyncs the archive's bucket,
    # then the queue directory, in its next commit
    s = st.JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_FSYNC)
    s.open()
    try:
        s.write_jobs([(7, b"a"), (8, b"b")])
        calls = _record_dir_syncs(monkeypatch)
        assert s.archive_jobs([7, 8]) == [7, 8]
        s.write_jobs([(9, b"c")])          # a commit after the archive's ticket
        bucket = os.path.join(s.archive_dir, "0")
        assert calls and {name for _, _, name in calls} == {"jqueue-writer"}
        paths = [path for _, path, _ in calls]
        assert paths.count(bucket) == 1
        assert s.queue_dir in paths[paths.index(bucket) + 1:]
        assert s.read_archived_job(8) == b"b"
    finally:
        s.close()


def test_archive_moves_are_covered_by_the_syncfs_of_a_commit(tmp_path, monkeypatch) -> None:
    s = st.JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_SYNCFS)
    s.open()
    try:
        s.write_jobs([(7, b"a")])
        calls = _record_dir_syncs(monkeypatch)
        assert s.archive_jobs([7]) == [7]
        s.write_jobs([(9, b"c")])
        assert ("syncfs", s.queue_dir, "jqueue-writer") in calls
        assert {name for _, _, name in calls} == {"jqueue-writer"}
        assert os.path.join(s.archive_dir, "0") not in [path for _, path, _ in calls]
    finally:
        s.close()


@pytest.mark.parametrize("gone", ["closed", "stopping"])
def test_archive_without_a_running_writer_syncs_in_the_caller(tmp_path, monkeypatch,
                                                              gone: str) -> None:
    # closed, or stopping (the writer refuses new tickets): the moves are
    # synced here and the archive still succeeds (its caller forgets the
    # jobs next, so it must not raise once the files moved)
    s = st.JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_FSYNC)
    s.open()
    s.write_jobs([(7, b"a")])
    writer = s._writer
    assert writer is not None
    if gone == "closed":
        s.close()
    else:
        writer.stop()
    try:
        calls = _record_dir_syncs(monkeypatch)
        assert s.archive_jobs([7]) == [7]
        me = threading.current_thread().name
        assert calls == [("fsync", os.path.join(s.archive_dir, "0"), me),
                         ("fsync", s.queue_dir, me)]
    finally:
        s.close()


def test_a_pending_directory_sync_survives_a_later_retried_write(monkeypatch) -> None:
    # a failing writer drops an older retry ticket whose files a newer one
    # replaced, but never one that still has directories to sync
    import errno

    from fakes import FakeClock
    synced: list[list[str]] = []
    monkeypatch.setattr(st.uio, "sync_dirs",
                        lambda dirs, sync, synced_path=None, **kw: synced.append(list(dirs)))
    failing = threading.Event()
    failing.set()
    attempts: list[dict[str, bytes]] = []

    def write_files(batch: dict[str, bytes], **kw) -> None:
        attempts.append(dict(batch))
        if failing.is_set():
            raise OSError(errno.ENOSPC, "No space left on device")

    clock = FakeClock()
    writer = st._GroupWriter(st.SYNC_FSYNC, lambda batch, urgent: None,
                             lambda: ("/q/serial", b"1\n"), write_files=write_files,
                             clock=clock, wait=clock.wait)
    try:
        writer.submit({"/q/job-1": b"old"}, retry=True, waited=False)
        deadline = time.monotonic() + 10
        while writer.error is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert writer.error is not None
        writer.submit({}, retry=True, waited=False, dirs=("/q/archive/0", "/q"))
        last = writer.submit({"/q/job-1": b"new"}, retry=True, waited=True)
        failing.clear()
        clock.advance(st.retry_delay(1))
        assert last.event.wait(10) and last.error is None
        assert synced == [["/q/archive/0", "/q"]]
        assert attempts[-1]["/q/job-1"] == b"new"
    finally:
        writer.stop()
