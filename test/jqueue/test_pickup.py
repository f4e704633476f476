"""JobQueue.pickup_job (LUXI PickupJob) and reading the archive, on a real queue directory."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from ganeti import constants, errors, opcodes, serializer
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import archive as jarchive
from ganeti.jqueue import storage as st
from ganeti.jqueue.job import (REASON_SRC_PICKUP, QueuedJob, QueuedOpCode, job_for_pickup,
                               job_to_disk, split_time)
from ganeti.pathutils import Paths

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 10.0


class Processor:
    """Runs OP_TEST_DELAY by sleeping; records the opcodes it ran."""

    def __init__(self, ran: list[Any]) -> None:
        self.ran = ran

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        self.ran.append(op)
        cbs.notify_start()
        time.sleep(op.duration)
        return {"slept": op.duration}


class Env:
    def __init__(self, tmp_path: Any) -> None:
        self.paths = Paths(root=str(tmp_path))
        self.ran: list[Any] = []
        self.queue = self._make()

    def _make(self) -> JobQueue:
        storage = JobStorage(self.paths, sync_mode=st.SYNC_NONE)
        storage.open()
        q = JobQueue(storage, lambda: Processor(self.ran), workers=2)
        q.load()
        return q

    def restart(self) -> JobQueue:
        self.queue.shutdown(5)
        self.queue = self._make()
        return self.queue

    def job_path(self, job_id: int) -> str:
        return os.path.join(self.paths.queue_dir, f"job-{job_id}")

    def write_job(self, job_id: int, statuses: list[str] | None = None,
                  ops: list[opcodes.OpCode] | None = None) -> bytes:
        """Write queue/job-<id> in the queue's own format (as another process would)."""
        ops = ops or [opcodes.OpTestDelay(duration=0) for _ in statuses or ["queued"]]
        qops = [QueuedOpCode.from_opcode(op) for op in ops]
        for qop, status in zip(qops, statuses or ["queued"] * len(qops)):
            qop.status = status
            if status in constants.OPS_FINALIZED:
                qop.end_timestamp = [1000, 0]
        job = QueuedJob(id=job_id, ops=qops, received_timestamp=split_time(time.time()))
        if all(q.status in constants.OPS_FINALIZED for q in qops):
            job.end_timestamp = [1000, 0]
        data = serializer.dumps(job_to_disk(job)).encode()
        with open(self.job_path(job_id), "wb") as fh:
            fh.write(data)
        return data

    def read_serial(self) -> int:
        with open(self.paths.queue_serial_file) as fh:
            return int(fh.read())

    def wait_final(self, job_id: int) -> str:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            status = self.queue.query_jobs([job_id], ["status"])[0][0]
            if status in constants.JOBS_FINALIZED:
                return status
            time.sleep(0.01)
        raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture
def env(tmp_path: Any):
    e = Env(tmp_path)
    yield e
    e.queue.shutdown(5)


def _state(env: Env) -> tuple[Any, ...]:
    q = env.queue
    return (q.job_ids(), q.storage.last_id, sorted(os.listdir(env.paths.queue_dir)))


def test_pickup_queued_job_above_serial_runs_and_raises_serial(env: Env) -> None:
    q = env.queue
    q.start()
    first = q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
    assert env.wait_final(first) == "success"
    env.write_job(first + 5)
    assert q.pickup_job(first + 5) is None
    # the serial is durable before the job is registered: ids never repeat
    assert env.read_serial() == first + 5 == q.storage.last_id
    assert env.wait_final(first + 5) == "success"
    assert q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}]) == first + 6
    row = q.query_jobs([first + 5], ["opresult", "ops", "archived"])[0]
    assert row[0] == [{"slept": 0.0}] and row[2] is False
    sources = [r[0] for r in row[1][0]["reason"]]
    assert sources[-1] == REASON_SRC_PICKUP
    on_disk = serializer.loads(open(env.job_path(first + 5), "rb").read())
    assert on_disk["ops"][0]["status"] == "success"
    assert on_disk["ops"][0]["input"]["reason"][-1][0] == REASON_SRC_PICKUP


def test_pickup_survives_restart_and_ids_do_not_repeat(env: Env) -> None:
    env.write_job(7)
    env.queue.pickup_job("7")          # decimal strings are accepted too
    q = env.restart()                  # not started: the job was still queued
    assert q.job_ids() == [7]
    assert q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}]) == 8


def test_pickup_of_id_below_serial_keeps_serial(env: Env) -> None:
    q = env.queue
    ids = q.storage.allocate_ids(3)    # handed out elsewhere, never written by us
    env.write_job(ids[1])
    before = env.read_serial() if os.path.exists(env.paths.queue_serial_file) else None
    q.pickup_job(ids[1])
    assert q.storage.last_id == ids[2]
    after = env.read_serial() if os.path.exists(env.paths.queue_serial_file) else None
    assert after == before
    q.start()
    assert env.wait_final(ids[1]) == "success"


def test_pickup_finished_job_is_only_registered(env: Env) -> None:
    q = env.queue
    q.start()
    data = env.write_job(3, ["success", "error"])
    q.pickup_job(3)
    assert q.job_ids() == [3]
    assert q.query_jobs([3], ["status", "opstatus"])[0] == ["error", ["success", "error"]]
    assert open(env.job_path(3), "rb").read() == data       # not rewritten
    assert env.ran == []                                     # never run
    assert q.archive_job(3) is True


def test_pickup_running_job_fails_it_like_a_restart(env: Env) -> None:
    q = env.queue
    q.start()
    env.write_job(4, ["success", "running", "queued"])
    q.pickup_job(4)
    row = q.query_jobs([4], ["status", "opstatus", "opresult"])[0]
    assert row[0] == "error" and row[1] == ["success", "error", "error"]
    assert "stopped while the job was running" in row[2][1][1][0]
    assert serializer.loads(open(env.job_path(4), "rb").read())["ops"][1]["status"] == "error"
    assert env.ran == []


def test_pickup_waiting_job_with_dependency_waits_then_runs(env: Env) -> None:
    q = env.queue
    q.start()
    blocker = q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0.5}])
    dep = opcodes.OpTestDelay(duration=0, depends=[[blocker, ["success"]]])
    env.write_job(blocker + 1, ["waiting"], ops=[dep])
    q.pickup_job(blocker + 1)
    deadline = time.monotonic() + TIMEOUT
    while q.query_jobs([blocker + 1], ["status"])[0][0] != "waiting":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert q.query_jobs([blocker], ["status"])[0][0] != "success"
    assert env.wait_final(blocker + 1) == "success"
    assert env.wait_final(blocker) == "success"


def test_refusals_change_nothing(env: Env) -> None:
    q = env.queue
    q.start()
    known = q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
    archived = q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
    env.wait_final(known)
    env.wait_final(archived)
    assert q.archive_job(archived)
    env.write_job(archived)            # a second file with an archived id
    with open(env.job_path(20), "w") as fh:
        fh.write("{not json")
    with open(env.job_path(23), "w") as fh:
        bad = job_to_disk(QueuedJob(id=23, ops=[QueuedOpCode(
            input={"OP_ID": "OP_TEST_DELAY", "duration": "long"})]))
        fh.write(serializer.dumps(bad))
    with open(env.job_path(24), "w") as fh:
        fh.write(serializer.dumps({"id": 24, "ops": []}))
    known_data = open(env.job_path(known), "rb").read()
    before = _state(env)
    cases: list[tuple[Any, type[errors.GanetiError], str]] = [
        (known, errors.JobQueueError, "already known"),
        (archived, errors.JobQueueError, "archived"),
        (99, errors.JobLost, "no file"),
        (20, errors.JobFileCorrupted, "JSON"),
        (23, errors.JobFileCorrupted, "opcode 0"),
        (24, errors.JobFileCorrupted, "missing id or ops"),
        ("x", errors.ParameterError, "Invalid job id"),
        (0, errors.ParameterError, "Invalid job id"),
        (True, errors.ParameterError, "Invalid job id"),
        (None, errors.ParameterError, "Invalid job id"),
    ]
    for job_id, exc_class, text in cases:
        with pytest.raises(exc_class, match=text):
            q.pickup_job(job_id)
        assert _state(env) == before, job_id
    assert open(env.job_path(known), "rb").read() == known_data
    assert env.read_serial() == archived
    assert q.query_jobs([archived], ["archived"])[0] == [True]


@pytest.mark.parametrize("make", ["other-id", "symlink", "directory"])
def test_pickup_quarantines_untrusted_entries(env: Env, tmp_path, make: str) -> None:
    """job-22 holding job 21, a symbolic link to a job file outside the queue,
    or a directory: refused, moved to queue/quarantine/, the queue unchanged."""
    q = env.queue
    q.start()
    if make == "other-id":
        env.write_job(21)
        os.rename(env.job_path(21), env.job_path(22))
        text = "holds job 21"
    elif make == "symlink":
        env.write_job(22)
        outside = str(tmp_path / "outside-job")
        os.rename(env.job_path(22), outside)
        os.symlink(outside, env.job_path(22))
        text = "symbolic link"
    else:
        os.mkdir(env.job_path(22))
        text = "directory"
    with pytest.raises(errors.JobFileCorrupted, match=text):
        q.pickup_job(22)
    assert q.job_ids() == [] and env.ran == []
    assert "job-22" not in os.listdir(env.paths.queue_dir)
    assert os.listdir(os.path.join(env.paths.queue_dir, "quarantine")) == ["job-22"]


def test_pickup_refuses_id_being_submitted(env: Env) -> None:
    q = env.queue
    with q.table.lock:                 # a submission between allocation and registration
        reserved = q.table.allocate(1)[0]
    env.write_job(reserved)
    with pytest.raises(errors.JobQueueError, match="already known"):
        q.pickup_job(reserved)
    with q.table.lock:
        q.table.unreserve([reserved])
    q.pickup_job(reserved)
    assert q.job_ids() == [reserved]


def test_concurrent_pickups_of_one_id_adopt_it_once(env: Env) -> None:
    q = env.queue
    env.write_job(30)
    outcomes: list[str] = []

    def pick() -> None:
        try:
            q.pickup_job(30)
            outcomes.append("ok")
        except errors.JobQueueError:
            outcomes.append("refused")

    threads = [threading.Thread(target=pick) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive()
    assert sorted(outcomes) == ["ok"] + ["refused"] * 5
    q.start()
    assert env.wait_final(30) == "success"
    assert len(env.ran) == 1


def test_corrupt_job_at_load_can_be_fixed_and_picked_up(env: Env) -> None:
    with open(env.job_path(5), "w") as fh:
        fh.write("{broken")
    q = env.restart()
    assert q.corrupt_ids == [5]
    env.write_job(5)
    q.pickup_job(5)
    assert q.corrupt_ids == []
    q.start()
    assert env.wait_final(5) == "success"


def test_pickup_refused_while_shutting_down(env: Env) -> None:
    env.write_job(9)
    env.queue.shutdown(5)
    with pytest.raises(errors.JobQueueError):
        env.queue.pickup_job(9)


def test_job_for_pickup_adds_reason_only_to_unfinished_ops() -> None:
    qops = [QueuedOpCode.from_opcode(opcodes.OpTestDelay(duration=0)) for _ in range(2)]
    qops[0].status = constants.OP_STATUS_SUCCESS
    raw = serializer.dumps(job_to_disk(QueuedJob(id=3, ops=qops))).encode()
    job = job_for_pickup(3, raw, 12.5)
    assert job.ops[0].input.get("reason", []) == []
    assert job.ops[1].input["reason"] == [[REASON_SRC_PICKUP, "job=3;index=1", 12500000000]]
    assert job.ops[1].get_op().reason == job.ops[1].input["reason"]


def test_archived_jobs_are_read_only_when_asked(env: Env) -> None:
    q = env.queue
    q.start()
    ids = [q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}]) for _ in range(3)]
    for job_id in ids:
        env.wait_final(job_id)
    assert q.archive_job(ids[0]) and q.archive_job(ids[2])
    assert jarchive.list_archived_ids(q.storage.archive_dir) == [ids[0], ids[2]]
    archived = q.get_archived_jobs()
    assert [j.id for j in archived] == [ids[0], ids[2]]
    assert all(j.archived and j.status() == "success" for j in archived)
    assert [j.id for j in q.get_archived_jobs(exclude={ids[0]})] == [ids[2]]
    assert [j.id for j in q.get_jobs(None)] == [ids[1]]
    # lookups by id see the archive (gnt-job info, QueryJobs)
    assert q.query_jobs([ids[0], ids[1]], ["id", "status", "archived"]) == [
        [ids[0], "success", True], [ids[1], "success", False]]
    # a corrupt archived file is skipped, never changed
    path = q.storage.archived_path(ids[2])
    with open(path, "w") as fh:
        fh.write("{")
    assert [j.id for j in q.get_archived_jobs()] == [ids[0]]
    assert open(path).read() == "{"


def test_list_archived_ids_of_missing_archive(tmp_path: Any) -> None:
    assert jarchive.list_archived_ids(str(tmp_path / "nothing")) == []
