"""Archived jobs listed from memory (jqueue.archive.ArchiveIndex), and the queue's
batched archiving past its soft limit (doc/protocols/jobs.md, "Queue size",
"Job summaries")."""

from __future__ import annotations

import os
from typing import Any

import pytest
from jqueue.test_queue import Env, delay

from ganeti import constants, serializer

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


def test_past_the_soft_limit_a_batch_is_archived(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(constants, "JOB_QUEUE_SIZE_SOFT_LIMIT", 40, raising=False)
    monkeypatch.setattr(constants, "JOB_QUEUE_SIZE_HARD_LIMIT", 60)
    env = Env(tmp_path)
    try:
        env.queue.start()
        moves: list[list[int]] = []
        real = env.queue.storage.archive_jobs

        def recording(job_ids: Any) -> list[int]:
            moved = real(job_ids)
            moves.append(moved)
            return moved
        monkeypatch.setattr(env.queue.storage, "archive_jobs", recording)
        ids = _finished(env, 40)
        assert moves == []
        ids += _finished(env, 1)
        assert moves == [ids[:2]]          # 5 % of 40: two at once, the oldest
        assert len(env.queue.job_ids()) == 39
        ids += _finished(env, 1)
        assert len(moves) == 1             # the batch made room for this one too
        assert env.queue.job_ids() == ids[2:]
        assert [s.id for s in env.queue.get_archived_summaries()] == ids[:2]
    finally:
        env.queue.shutdown(5)
