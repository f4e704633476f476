"""Archived jobs listed from memory (jqueue.archive.ArchiveIndex), and the queue's
archiving past its soft limit: in the background once submissions pause, by a
submission itself at the hard limit (doc/protocols/jobs.md, "Queue size",
"Job summaries")."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
from jqueue.test_queue import Env, FakeProcessor, delay, wait_until

from ganeti import serializer
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import archive as jarchive
from ganeti.jqueue import storage as st

FIELDS = ["id", "status", "priority", "opstatus", "oppriority", "summary", "received_ts",
          "start_ts", "end_ts", "archived"]


def _rows(jobs: list[Any]) -> list[list[Any]]:
    return [[job.get_field(f) if hasattr(job, "get_field") else None for f in FIELDS]
            for job in jobs]


def _finished(env: Env, count: int) -> list[int]:
    ids = [env.queue.submit_job([delay(0, comment=f"job {i}")]) for i in range(count)]
    for job_id in ids:
        assert env.wait_final(job_id) == "success"
    return ids


def _count_reads(env: Env, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real = env.queue.storage.read_archived_job

    def counting(job_id: int) -> Any:
        reads.append(job_id)
        return real(job_id)
    monkeypatch.setattr(env.queue.storage, "read_archived_job", counting)
    return reads


def _summary_rows(env: Env) -> list[list[Any]]:
    return [[s.get_field(f) for f in FIELDS] for s in env.queue.get_archived_summaries()]


def _file_rows(env: Env) -> list[list[Any]]:
    rows = []
    for job in env.queue.get_archived_jobs():
        rows.append([job.id, job.status(), job.priority(), [op.status for op in job.ops],
                     [op.priority for op in job.ops], [op.summary() for op in job.ops],
                     job.received_timestamp, job.start_timestamp, job.end_timestamp,
                     job.archived])
    return rows


def test_archived_summaries_equal_the_files_and_read_none(tmp_path, monkeypatch) -> None:
    env = Env(tmp_path)
    try:
        env.queue.start()
        ids = _finished(env, 6)
        assert env.queue.auto_archive_jobs(-1, 10) == [6, 0]
        reads = _count_reads(env, monkeypatch)
        from_memory = _summary_rows(env)
        assert reads == []                 # archived since start-up: kept as archived
        assert [row[0] for row in from_memory] == ids
        assert all(row[-1] is True for row in from_memory)
        assert from_memory == _file_rows(env)
        assert [s.id for s in env.queue.get_archived_summaries(exclude={ids[0]})] == ids[1:]
    finally:
        env.queue.shutdown(5)


def test_after_a_restart_the_archive_is_read_once(tmp_path, monkeypatch) -> None:
    env = Env(tmp_path)
    try:
        env.queue.start()
        ids = _finished(env, 4)
        env.queue.auto_archive_jobs(-1, 10)
        before = _file_rows(env)
        env.restart()
        env.queue.start()
        reads = _count_reads(env, monkeypatch)
        assert _summary_rows(env) == before
        assert sorted(reads) == ids
        reads.clear()
        assert _summary_rows(env) == before
        assert reads == []                 # the second listing reads no file
    finally:
        env.queue.shutdown(5)


def test_files_added_or_removed_behind_its_back(tmp_path, monkeypatch) -> None:
    env = Env(tmp_path)
    try:
        env.queue.start()
        ids = _finished(env, 3)
        env.queue.auto_archive_jobs(-1, 10)
        storage = env.queue.storage
        gone = storage.archived_path(ids[0])
        os.unlink(gone)                    # e.g. a cleaner removed an old archived job
        other = ids[2] + 10                # archived by someone else (another master)
        with open(storage.archived_path(ids[2]), "rb") as fh:
            data = serializer.loads(fh.read())
        data["id"] = other
        with open(storage.archived_path(other), "w") as fh:
            fh.write(serializer.dumps(data))
        reads = _count_reads(env, monkeypatch)
        assert [s.id for s in env.queue.get_archived_summaries()] == [ids[1], ids[2], other]
        assert reads == [other]            # only the file it had no summary of
    finally:
        env.queue.shutdown(5)


class _Jumps:
    """A monotonic clock that the test moves forward at once (time still flows)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


class _LimitedEnv(Env):
    """A queue with soft/hard limits 40/60 that archives after 60 s of no
    submission, by a clock the test moves forward."""

    def __init__(self, tmp_path: Any) -> None:
        self.clock = _Jumps()
        super().__init__(tmp_path)

    def _make(self) -> JobQueue:
        storage = JobStorage(self.paths, sync_mode=st.SYNC_NONE)
        storage.open()
        q = JobQueue(storage, lambda: FakeProcessor(self), workers=self.workers,
                     size_limits=(40, 60), monotonic=self.clock, archive_idle=60.0)
        q.load()
        return q


def test_past_the_soft_limit_the_queue_archives_once_submissions_pause(
        tmp_path, monkeypatch) -> None:
    env = _LimitedEnv(tmp_path)
    try:
        env.queue.start()
        moves: list[list[int]] = []
        real = env.queue.storage.archive_jobs

        def recording(job_ids: Any) -> list[int]:
            moved = real(job_ids)
            moves.append(moved)
            return moved
        monkeypatch.setattr(env.queue.storage, "archive_jobs", recording)
        ids = _finished(env, 41)
        assert moves == []                 # past the soft limit: nothing on the submissions' path
        time.sleep(0.2)
        assert moves == []                 # ...nor within 60 s of the last one
        env.clock.offset += 61             # a pause: the archiver brings it back to 40
        wait_until(lambda: len(moves) == 1)
        assert moves == [ids[:1]]
        assert env.queue.job_ids() == ids[1:]
        # a burst up to the hard limit is taken without archiving
        ids += _finished(env, 20)
        assert len(env.queue.job_ids()) == 60 and len(moves) == 1
        # the submission that finds the queue full archives a batch itself
        # (5 % of 60, the oldest), at once
        ids += _finished(env, 1)
        assert moves[1:] == [ids[1:4]]
        assert len(env.queue.job_ids()) == 58
        env.clock.offset += 61
        wait_until(lambda: len(moves) == 3)
        assert moves[2] == ids[4:22]
        assert env.queue.job_ids() == ids[22:]
        assert [s.id for s in env.queue.get_archived_summaries()] == ids[:22]
    finally:
        env.queue.shutdown(5)


class _Blocker:
    """Says 'no archiving' while ``blocking``; counts how often it was asked."""

    def __init__(self) -> None:
        self.blocking = True
        self.asked = 0

    def ask(self) -> bool:
        self.asked += 1
        return self.blocking


def _block(env: Env, how: str, blocker: _Blocker, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = env.queue.storage
    if how == "write error":      # a full disk (doc/protocols/jobs.md, "Full disk")
        monkeypatch.setattr(JobStorage, "write_error", property(
            lambda self: "No space left on device" if blocker.ask() else None))
    elif how == "drained":        # gnt-cluster queue drain
        monkeypatch.setattr(storage, "is_drained", blocker.ask)
    else:                         # the master daemon's guard: fenced, or a failover's drain
        env.queue.archiver.may_archive = lambda: not blocker.ask()


@pytest.mark.parametrize("how", ["write error", "drained", "not allowed"])
def test_no_background_archiving_while_the_queue_cannot_write_is_drained_or_may_not(
        tmp_path, monkeypatch, how) -> None:
    env = _LimitedEnv(tmp_path)
    try:
        env.queue.start()
        ids = _finished(env, 45)
        blocker = _Blocker()
        _block(env, how, blocker, monkeypatch)
        asked = blocker.asked
        env.clock.offset += 61
        wait_until(lambda: blocker.asked > asked + 1)   # asked at least once after the pause
        time.sleep(0.2)
        assert env.queue.job_ids() == ids
        blocker.blocking = False
        wait_until(lambda: env.queue.job_ids() == ids[5:])
    finally:
        env.queue.shutdown(5)


def test_a_job_whose_move_fails_is_passed_over(tmp_path, caplog) -> None:
    """The oldest job's file is gone (another master's queue copy archived it):
    the archiver archives the next ones instead, trying it once."""
    env = _LimitedEnv(tmp_path)
    try:
        env.queue.start()
        ids = _finished(env, 45)
        os.unlink(env.queue.storage.job_path(ids[0]))
        env.clock.offset += 61
        wait_until(lambda: len(env.queue.job_ids()) == 40)
        assert env.queue.job_ids() == ids[:1] + ids[6:]
        time.sleep(0.3)
        failures = [r.getMessage() for r in caplog.records
                    if r.getMessage().startswith("Cannot archive job")]
        assert len(failures) == 1 and failures[0].startswith(f"Cannot archive job {ids[0]}:")
    finally:
        env.queue.shutdown(5)


def test_after_failing_moves_the_archiver_goes_on_past_a_job_that_keeps_failing(
        tmp_path, monkeypatch) -> None:
    """Every move fails for a while (a read-only file system), and the oldest
    job's file is gone for good: once moves work again the others are
    archived, the gone one is not retried on and on in their place."""
    monkeypatch.setattr(jarchive, "_RETRY", 0.05)
    env = _LimitedEnv(tmp_path)
    try:
        env.queue.start()
        ids = _finished(env, 45)
        os.unlink(env.queue.storage.job_path(ids[0]))
        real = env.queue.storage.archive_jobs
        broken = {"on": True, "tries": 0}

        def archive_jobs(job_ids: Any) -> list[int]:
            broken["tries"] += 1
            return [] if broken["on"] else real(job_ids)
        monkeypatch.setattr(env.queue.storage, "archive_jobs", archive_jobs)
        env.clock.offset += 61
        wait_until(lambda: broken["tries"] >= 3)
        assert env.queue.job_ids() == ids
        broken["on"] = False
        wait_until(lambda: len(env.queue.job_ids()) == 40)
        assert ids[0] in env.queue.job_ids()
    finally:
        env.queue.shutdown(5)


def test_a_queue_loaded_past_its_soft_limit_is_archived_after_the_first_pause(
        tmp_path) -> None:
    env = _LimitedEnv(tmp_path)
    try:
        env.queue.start()
        ids = _finished(env, 45)
        env.restart()
        env.queue.start()
        time.sleep(0.3)
        assert env.queue.job_ids() == ids       # not amid the start-up
        env.clock.offset += 61
        wait_until(lambda: env.queue.job_ids() == ids[5:])
    finally:
        env.queue.shutdown(5)


def test_the_archiver_ends_with_the_queue(tmp_path) -> None:
    env = _LimitedEnv(tmp_path)
    before = set(threading.enumerate())
    env.queue.start()
    ours = [t for t in threading.enumerate() if t.name == "jq-archiver" and t not in before]
    assert len(ours) == 1
    _finished(env, 45)              # the archiver waits for a pause
    assert env.queue.shutdown(5) is True
    assert not ours[0].is_alive()


@pytest.mark.parametrize(("size", "last", "now", "due"), [
    (40, 0.0, 100.0, None),      # within the soft limit: nothing to do
    (41, 99.8, 100.0, 0.3),      # past it, a submission 0.2 s ago: 0.3 s more
    (41, 99.5, 100.0, 0.0),      # half a second without one: now
    (41, -float("inf"), 0.0, 0.0),   # none since start-up (a queue loaded past it)
])
def test_the_archiver_is_due_after_a_pause_past_the_soft_limit(size, last, now, due) -> None:
    from ganeti.jqueue import archive
    got = archive.archive_due(size, 40, last, now, 0.5)
    assert got == (None if due is None else pytest.approx(due))
