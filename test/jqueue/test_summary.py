"""Job summaries: list queries from memory, the summary index, start-up without reading files."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from ganeti import constants, serializer
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as st
from ganeti.jqueue import summary as jsummary
from ganeti.pathutils import Paths

TIMEOUT = 10.0
LIST = ["id", "status", "summary", "opstatus", "received_ts", "start_ts", "end_ts",
        "priority", "oppriority"]


class Runner:
    """Runs OP_TEST_DELAY; a ``hold`` comment waits for ``release``."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        cbs.notify_start()
        if op.comment == "hold":
            assert self.release.wait(TIMEOUT)
        return "ok"


def _queue(root: str, runner: Runner | None = None) -> JobQueue:
    storage = JobStorage(Paths(root=root), sync_mode=st.SYNC_NONE)
    storage.open()
    runner = runner or Runner()
    q = JobQueue(storage, lambda: runner, workers=2)
    q.load()
    q.start()
    return q


def _delay(comment: str = "") -> list[dict[str, Any]]:
    return [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "comment": comment}]


def _wait_finished(q: JobQueue, ids: list[int]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while True:
        rows = q.query_jobs(ids, ["status"])
        if all(r is not None and r[0] in constants.JOBS_FINALIZED for r in rows):
            return
        assert time.monotonic() < deadline, rows
        time.sleep(0.01)


def _fill(root: str, count: int) -> tuple[list[int], list[Any]]:
    """``count`` finished jobs; their list rows; the queue shut down (index flushed)."""
    q = _queue(root)
    ids = [int(v) for ok, v in q.submit_many_jobs([_delay() for _ in range(count)])]
    _wait_finished(q, ids)
    rows = q.query_jobs(None, LIST)
    assert q.shutdown(5)
    return ids, rows


def _no_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record every job file read (and fail none of them)."""
    reads: list[int] = []
    orig = JobStorage.read_job

    def read_job(self: JobStorage, job_id: int) -> bytes | None:
        reads.append(job_id)
        return orig(self, job_id)

    monkeypatch.setattr(JobStorage, "read_job", read_job)
    return reads


def test_start_up_reads_no_file_of_an_indexed_finished_job(tmp_path: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ids, rows = _fill(str(tmp_path), 5)
    assert os.path.exists(jsummary.index_path(Paths(root=str(tmp_path)).queue_dir))
    reads = _no_reads(monkeypatch)
    q = _queue(str(tmp_path))
    try:
        assert q.query_jobs(None, LIST) == rows
        assert reads == []                          # loaded and answered from the index
        assert q.query_jobs([ids[0]], ["oplog"]) == [[[[]]]]    # not in a summary: the file
        assert reads == [ids[0]]
    finally:
        q.shutdown(5)


def test_list_queries_read_no_job_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ids, _ = _fill(str(tmp_path), 3)
    q = _queue(str(tmp_path))
    reads = _no_reads(monkeypatch)
    try:
        summaries = q.get_summaries(None)
        assert [s.id for s in summaries] == ids
        assert all(s.get_field("status") == constants.JOB_STATUS_SUCCESS for s in summaries)
        assert reads == []
    finally:
        q.shutdown(5)


def test_a_changed_job_file_is_read_not_taken_from_the_index(tmp_path: Any) -> None:
    ids, rows = _fill(str(tmp_path), 2)
    storage = JobStorage(Paths(root=str(tmp_path)))
    path = storage.job_path(ids[1])
    with open(path, "rb") as fh:
        data = serializer.loads(fh.read())
    data["ops"][0]["status"] = constants.OP_STATUS_ERROR        # replaced behind our back
    with open(path + ".tmp", "wb") as fh:
        fh.write(serializer.dumps(data).encode())
    os.replace(path + ".tmp", path)
    q = _queue(str(tmp_path))
    try:
        assert q.query_jobs(ids, ["status"]) == [[constants.JOB_STATUS_SUCCESS],
                                                 [constants.JOB_STATUS_ERROR]]
    finally:
        q.shutdown(5)
    # and the index was rewritten with what the file holds now
    found, bad = jsummary.read_index(storage.queue_dir)
    assert bad == 0 and found[ids[1]][1].status == constants.JOB_STATUS_ERROR


@pytest.mark.parametrize("damage", [b'[1, 2, 3', b"\x00garbage\n", b"{}\n"],
                         ids=["torn-line", "garbage", "not-an-object"])
def test_a_damaged_index_costs_a_read_never_a_wrong_answer(tmp_path: Any, damage: bytes,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ids, rows = _fill(str(tmp_path), 3)
    index = jsummary.index_path(JobStorage(Paths(root=str(tmp_path))).queue_dir)
    with open(index, "rb") as fh:
        lines = fh.read().splitlines(keepends=True)
    with open(index, "wb") as fh:
        fh.write(lines[0] + damage)                 # two jobs lost their lines
    kept = serializer.loads(lines[0])[0]
    reads = _no_reads(monkeypatch)
    q = _queue(str(tmp_path))
    try:
        assert q.query_jobs(None, LIST) == rows
        assert reads == [i for i in ids if i != kept]
    finally:
        q.shutdown(5)


def test_index_lines_of_archived_jobs_are_dropped_at_start_up(tmp_path: Any) -> None:
    ids, _ = _fill(str(tmp_path), 3)
    q = _queue(str(tmp_path))
    assert q.archive_job(ids[0])
    assert q.shutdown(5)
    q = _queue(str(tmp_path))
    try:
        assert [s.id for s in q.get_summaries(None)] == ids[1:]
    finally:
        q.shutdown(5)
    found, _ = jsummary.read_index(JobStorage(Paths(root=str(tmp_path))).queue_dir)
    assert sorted(found) == ids[1:]


def test_a_live_job_shows_only_what_its_file_has(tmp_path: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """While the final write is held, the summary still shows "running" (the
    file's state); once written, "success", and only then is it indexed."""
    runner = Runner()
    q = _queue(str(tmp_path), runner)
    storage = q.storage
    written = threading.Event()
    go_on = threading.Event()
    orig = storage.write_jobs

    def write_jobs(items: Any, **kw: Any) -> None:
        items = list(items)
        final = any(serializer.loads(d)["ops"][0]["status"] == "success" for _, d in items)
        if final:
            written.set()
            assert go_on.wait(TIMEOUT)
        orig(items, **kw)

    monkeypatch.setattr(storage, "write_jobs", write_jobs)
    try:
        job_id = q.submit_job(_delay("hold"))
        deadline = time.monotonic() + TIMEOUT
        while q.query_jobs([job_id], ["status"])[0] != ["running"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        runner.release.set()
        assert written.wait(TIMEOUT)
        assert q.query_jobs([job_id], ["status", "opstatus"]) == [["running", ["running"]]]
        assert q.get_summaries([job_id])[0].status == "running"
        q._index.flush()
        found, _ = jsummary.read_index(storage.queue_dir)
        assert job_id not in found                  # not final on disk: never indexed
        go_on.set()
        _wait_finished(q, [job_id])
        assert q.query_jobs([job_id], ["status"]) == [["success"]]
        q._index.flush()
        found, _ = jsummary.read_index(storage.queue_dir)
        assert found[job_id][1].status == "success"
    finally:
        go_on.set()
        runner.release.set()
        q.shutdown(5)


def test_the_index_is_compacted_when_archived_lines_pile_up(tmp_path: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsummary.IndexKeeper, "SLACK", 2)
    q = _queue(str(tmp_path))
    try:
        for _ in range(4):
            ids = [int(v) for ok, v in q.submit_many_jobs([_delay() for _ in range(3)])]
            _wait_finished(q, ids)
            q._index.flush()
            assert q.auto_archive_jobs(-1, 10)[0] == 3
        ids = [int(v) for ok, v in q.submit_many_jobs([_delay() for _ in range(2)])]
        _wait_finished(q, ids)
        q._index.flush()
        found, _ = jsummary.read_index(q.storage.queue_dir)
        with open(jsummary.index_path(q.storage.queue_dir), "rb") as fh:
            lines = fh.read().count(b"\n")
        assert sorted(found) == ids and lines <= 2 * len(ids) + 2
    finally:
        q.shutdown(5)


def test_a_compaction_reads_no_file_identity_the_index_already_holds(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rewriting the index takes each kept job's file identity from memory
    (read once, when its line was appended); the rewritten lines still match
    the files, so a restart reads none of them."""
    monkeypatch.setattr(jsummary.IndexKeeper, "SLACK", 2)
    q = _queue(str(tmp_path))
    stats: list[str] = []
    orig = jsummary.stat_job_file

    def stat_job_file(path: str) -> Any:
        stats.append(os.path.basename(path))
        return orig(path)

    monkeypatch.setattr(jsummary, "stat_job_file", stat_job_file)
    try:
        kept = [int(v) for ok, v in q.submit_many_jobs([_delay() for _ in range(2)])]
        _wait_finished(q, kept)
        q._index.flush()
        assert sorted(stats) == sorted(f"job-{i}" for i in kept)
        for _ in range(3):          # archived jobs' lines pile up (14 lines, 2 jobs)
            ids = [int(v) for ok, v in q.submit_many_jobs([_delay() for _ in range(4)])]
            _wait_finished(q, ids)
            q._index.flush()
            assert all(q.archive_job(i) for i in ids)
        stats.clear()
        ids = [int(v) for ok, v in q.submit_many_jobs([_delay() for _ in range(2)])]
        _wait_finished(q, ids)
        q._index.flush()
        kept += ids
        found, bad = jsummary.read_index(q.storage.queue_dir)
        with open(jsummary.index_path(q.storage.queue_dir), "rb") as fh:
            lines = fh.read().count(b"\n")
        assert sorted(found) == sorted(kept) and bad == 0 and lines == len(kept)  # rewritten
        assert sorted(stats) == sorted(f"job-{i}" for i in ids)    # only the new jobs
        rows = q.query_jobs(None, LIST)
    finally:
        q.shutdown(5)
    reads = _no_reads(monkeypatch)
    q = _queue(str(tmp_path))
    try:
        assert q.query_jobs(None, LIST) == rows and reads == []
    finally:
        q.shutdown(5)


def test_record_round_trip_and_refusals() -> None:
    summ = jsummary.JobSummary(4, "success", 50, ["success"], [50], ["TEST_DELAY"],
                               [1, 2], [3, 4], [5, 6])
    fid, back = jsummary.from_record(serializer.loads(serializer.dumps(
        jsummary.to_record(summ, (7, 8, 9)))))
    assert fid == (7, 8, 9)
    assert [back.get_field(f) for f in sorted(jsummary.SUMMARY_FIELDS)] == \
        [summ.get_field(f) for f in sorted(jsummary.SUMMARY_FIELDS)]
    rec = jsummary.to_record(summ, (7, 8, 9))

    def changed(idx: int, value: Any) -> list[Any]:
        return [value if i == idx else v for i, v in enumerate(rec)]

    for bad in (changed(4, "running"), changed(6, []), changed(11, [1]), changed(1, "x"),
                changed(0, True), rec[:11], {"id": 4}):
        with pytest.raises(ValueError):
            jsummary.from_record(bad)
