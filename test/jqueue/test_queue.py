"""JobQueue behaviour with a scripted processor (no masterd)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from ganeti import constants, errors, serializer
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as st
from ganeti.pathutils import Paths

TIMEOUT = 10.0


def delay(duration: float = 0, **kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, **kw}


def jq_op(fail: bool = False, msgs: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_JQUEUE", "fail": fail, "log_messages": msgs or [], **kw}


class FakeProcessor:
    """Runs TEST_DELAY (sleep, or wait on a gate) and TEST_JQUEUE opcodes."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        self.env.order.append(op)
        if self.env.gate is not None and op.OP_ID == "OP_TEST_DELAY" and op.comment == "gate":
            while not self.env.gate.wait(0.01):
                if cbs.check_cancel():
                    raise errors.OpExecError("canceled")
        cbs.notify_start()
        if op.OP_ID == "OP_TEST_JQUEUE":
            for m in op.log_messages:
                cbs.feedback(m)
            if op.fail:
                raise errors.OpExecError("requested failure")
            return True
        time.sleep(op.duration)
        return {"slept": op.duration}


class Env:
    def __init__(self, tmp_path: Any, workers: int = 4) -> None:
        self.paths = Paths(root=str(tmp_path))
        self.gate: threading.Event | None = None
        self.order: list[Any] = []
        self.workers = workers
        self.queue = self._make()

    def _make(self) -> JobQueue:
        storage = JobStorage(self.paths, sync_mode=st.SYNC_NONE)
        storage.open()
        q = JobQueue(storage, lambda: FakeProcessor(self), workers=self.workers)
        q.load()
        return q

    def restart(self) -> JobQueue:
        self.queue.shutdown(5)
        self.queue = self._make()
        return self.queue

    def wait_final(self, job_id: int) -> str:
        deadline = time.monotonic() + TIMEOUT
        prev = None
        while time.monotonic() < deadline:
            res = self.queue.wait_for_job_change(job_id, ["status"], prev, -1, 1.0)
            if res != "nochange":
                prev = res[0]
                if prev[0] in constants.JOBS_FINALIZED:
                    return prev[0]
        raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    if e.gate is not None:
        e.gate.set()
    e.queue.shutdown(5)


def test_submit_runs_and_records_result(env: Env) -> None:
    env.queue.start()
    job_id = env.queue.submit_job([delay(0), jq_op(msgs=["hello"])])
    assert env.wait_final(job_id) == "success"
    row = env.queue.query_jobs([job_id, 999], ["id", "status", "opresult", "oplog", "opstatus"])
    assert row[1] is None
    assert row[0][:3] == [job_id, "success", [{"slept": 0.0}, True]]
    assert row[0][3][1][0][2:] == ["message", "hello"]
    data = serializer.loads(open(os.path.join(env.paths.queue_dir, f"job-{job_id}")).read())
    assert [op["status"] for op in data["ops"]] == ["success", "success"]


def test_invalid_job_is_not_created(env: Env) -> None:
    with pytest.raises(errors.OpPrereqError):
        env.queue.submit_job([delay(0), {"OP_ID": "OP_TEST_DELAY", "duration": "x"}])
    with pytest.raises(errors.OpCodeError):
        env.queue.submit_job([])
    assert env.queue.job_ids() == []
    assert env.paths and env.queue.storage.list_job_ids() == []


def test_failure_marks_rest_of_job(env: Env) -> None:
    env.queue.start()
    job_id = env.queue.submit_job([jq_op(fail=True), delay(0)])
    assert env.wait_final(job_id) == "error"
    res = env.queue.query_jobs([job_id], ["opstatus", "opresult"])[0]
    assert res[0] == ["error", "error"]
    assert res[1][0] == ["OpExecError", ["requested failure"]]
    assert "Previous opcode failed" in res[1][1][1][0]


def test_relative_dependencies_and_failure_propagation(env: Env) -> None:
    env.queue.start()
    results = env.queue.submit_many_jobs([
        [jq_op(fail=True)],
        [delay(0, depends=[[-1, ["success"]]])],
        [delay(0, depends=[[-2, ["error"]]])],
        [delay(0, depends=[[-5, []]])],
        [{"OP_ID": "OP_BOGUS"}],
        [delay(0, depends=[[-1, []]])],
    ])
    assert [r[0] for r in results] == [True, True, True, False, False, False]
    a, b, c = (r[1] for r in results[:3])
    assert env.wait_final(b) == "error"
    assert env.wait_final(c) == "success"
    msg = env.queue.query_jobs([b], ["opresult"])[0][0][0][1][0]
    assert "status 'error'" in msg and "wanted 'success'" in msg
    ops = env.queue.query_jobs([b], ["ops"])[0][0]
    assert ops[0]["depends"] == [[a, ["success"]]]


def test_waiting_job_wakes_when_dependency_finishes(env: Env) -> None:
    env.gate = threading.Event()
    env.queue.start()
    first = env.queue.submit_job([delay(0, comment="gate")])
    second = env.queue.submit_job([delay(0, depends=[[first, ["success"]]])])
    deadline = time.monotonic() + TIMEOUT
    while env.queue.query_jobs([second], ["status"])[0][0] != "waiting":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    info = env.queue.get_lock_info()
    assert info == [{"name": f"job/{first}", "mode": None, "owner": [],
                     "pending": [["success", [f"job/{second}"]]]}]
    env.gate.set()
    assert env.wait_final(second) == "success"
    assert env.queue.get_lock_info() == []


def test_cancel_queued_and_dependency_cancel(env: Env) -> None:
    env.gate = threading.Event()
    env.queue.start()
    first = env.queue.submit_job([delay(0, comment="gate")])
    res = env.queue.submit_many_jobs([[delay(0, depends=[[first, []]])],
                                      [delay(0, depends=[[-1, ["success"]]])]])
    waiter, chained = res[0][1], res[1][1]
    deadline = time.monotonic() + TIMEOUT
    while env.queue.query_jobs([waiter], ["status"])[0][0] != "waiting":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    ok, msg = env.queue.cancel_job(waiter)
    assert ok, msg
    assert env.wait_final(waiter) == "canceled"
    assert env.wait_final(chained) == "canceled"
    ok, _ = env.queue.cancel_job(waiter)
    assert not ok
    ok, msg = env.queue.cancel_job(first)   # owned, waiting at the gate: cancel is noted
    assert ok and "will be canceled" in msg
    assert env.wait_final(first) == "canceled"


def test_priority_order_with_one_worker(tmp_path) -> None:
    env = Env(tmp_path, workers=1)
    env.gate = threading.Event()
    try:
        env.queue.start()
        blocker = env.queue.submit_job([delay(0, comment="gate")])
        deadline = time.monotonic() + TIMEOUT   # the one worker holds the blocker first
        while not env.order and time.monotonic() < deadline:
            time.sleep(0.005)
        low = env.queue.submit_job([delay(0, priority=10, comment="low")])
        normal = env.queue.submit_job([delay(0, comment="normal")])
        high = env.queue.submit_job([delay(0, priority=-10, comment="high")])
        assert env.queue.change_job_priority(low, -20)[0]
        env.gate.set()
        for j in (blocker, low, normal, high):
            env.wait_final(j)
        assert [op.comment for op in env.order[1:]] == ["low", "high", "normal"]
        assert env.queue.query_jobs([low], ["priority"])[0][0] == -20
    finally:
        env.gate.set()
        env.queue.shutdown(5)


def test_wait_for_job_change_times_out_and_wakes(env: Env) -> None:
    job_id = env.queue.submit_job([delay(0)])
    # workers not started: nothing can change, the server-side timeout answers
    assert env.queue.wait_for_job_change(job_id, ["status"], ["queued"], -1, 0.2) == "nochange"
    result: list[Any] = []
    t = threading.Thread(target=lambda: result.append(
        env.queue.wait_for_job_change(job_id, ["status"], ["queued"], -1, 30)))
    t.start()
    time.sleep(0.1)
    env.queue.start()
    t.join(TIMEOUT)
    assert result and result[0] != "nochange"
    with pytest.raises(errors.JobLost):
        env.queue.wait_for_job_change(12345, ["status"], None, -1, 0)


def test_drain_flag(env: Env) -> None:
    env.queue.set_drain_flag(True)
    with pytest.raises(errors.JobQueueDrainError):
        env.queue.submit_job([delay(0)])
    with pytest.raises(errors.JobQueueDrainError):
        env.queue.submit_many_jobs([[delay(0)]])
    assert env.queue.submit_job([delay(0)], ignore_drain=True) == 1


def test_archive_and_autoarchive(env: Env) -> None:
    env.queue.start()
    ids = [env.queue.submit_job([delay(0)]) for _ in range(3)]
    for j in ids:
        env.wait_final(j)
    assert env.queue.archive_job(ids[0]) is True
    assert env.queue.archive_job(ids[0]) is False
    assert env.queue.query_jobs([ids[0]], ["id", "archived"])[0] == [ids[0], True]
    assert ids[0] not in env.queue.job_ids()
    assert env.queue.auto_archive_jobs(3600, 10) == [0, 0]
    assert env.queue.auto_archive_jobs(-1, 10) == [2, 0]
    assert env.queue.job_ids() == []


def test_restart_recovers_jobs(env: Env, tmp_path) -> None:
    # hand-made job files: one running, one waiting, one corrupt
    job_ids = env.queue.storage.allocate_ids(3)
    env.queue.submit_job([delay(0)])  # job 4, queued (workers not started)
    qd = env.paths.queue_dir

    def write(job_id: int, statuses: list[str]) -> None:
        ops = [{"input": delay(0), "status": s, "result": None, "log": [], "priority": 0,
                "start_timestamp": None, "exec_timestamp": None, "end_timestamp": None}
               for s in statuses]
        data = {"id": job_id, "ops": ops, "received_timestamp": [1, 0],
                "start_timestamp": None, "end_timestamp": None}
        open(os.path.join(qd, f"job-{job_id}"), "w").write(serializer.dumps(data))

    write(job_ids[0], ["success", "running", "queued"])
    write(job_ids[1], ["waiting"])
    open(os.path.join(qd, f"job-{job_ids[2]}"), "w").write("{corrupt")
    q = env.restart()
    assert q.corrupt_ids == [job_ids[2]]
    assert open(os.path.join(qd, f"job-{job_ids[2]}")).read() == "{corrupt"
    row = q.query_jobs([job_ids[0]], ["status", "opstatus", "opresult"])[0]
    assert row[0] == "error" and row[1] == ["success", "error", "error"]
    assert "stopped while the job was running" in row[2][1][1][0]
    q.start()
    assert env.wait_final(job_ids[1]) == "success"
    assert env.wait_final(4) == "success"
    assert q.submit_job([delay(0)]) == 5


def _real_queue(tmp_path: Any) -> JobQueue:
    """A queue running opcodes through the real processor and LUs."""
    from ganeti import locking
    from ganeti.context import MasterContext
    from ganeti.mcpu import Processor
    paths = Paths(root=str(tmp_path))
    ctx = MasterContext(paths=paths, glm=locking.GanetiLockManager([], [], []))
    storage = JobStorage(paths, sync_mode=st.SYNC_NONE)
    storage.open()
    q = JobQueue(storage, lambda: Processor(ctx), workers=2)
    q.load()
    q.start()
    return q


def _wait_status(q: JobQueue, job_id: int, wanted: set[str]) -> str:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        status = q.query_jobs([job_id], ["status"])[0][0]
        if status in wanted:
            return status
        time.sleep(0.01)
    raise AssertionError(f"job {job_id} never reached {wanted}")


def test_kill_interrupts_a_running_plain_delay(tmp_path) -> None:
    q = _real_queue(tmp_path)
    try:
        job_id = q.submit_job([delay(600)])
        _wait_status(q, job_id, {"running"})
        ok, msg = q.cancel_job(job_id, kill=True)
        assert ok, msg
        assert _wait_status(q, job_id, constants.JOBS_FINALIZED) == "canceled"
    finally:
        q.shutdown(10)


def test_kill_interrupts_running_interruptible_delay(tmp_path) -> None:
    q = _real_queue(tmp_path)
    try:
        job_id = q.submit_job([delay(600, interruptible=True), delay(0)])
        _wait_status(q, job_id, {"running"})
        ok, msg = q.cancel_job(job_id)
        assert not ok and "kill" in msg            # plain cancel refuses a running job
        ok, msg = q.cancel_job(job_id, kill=True)
        assert ok, msg
        # ends long before the 600 s delay would have
        assert _wait_status(q, job_id, constants.JOBS_FINALIZED) == "canceled"
        row = q.query_jobs([job_id], ["opstatus"])[0]
        assert row[0] == ["canceled", "canceled"]
        data = serializer.loads(q.storage.read_job(job_id))
        assert [op["status"] for op in data["ops"]] == ["canceled", "canceled"]
    finally:
        q.shutdown(10)


class _UninterruptibleFirst:
    """A processor whose opcodes with comment ``slow`` sleep 1 s, deaf to kills
    (every LU that does not look at ``wait_interrupt``; OP_TEST_DELAY does)."""

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        cbs.notify_start()
        if op.comment == "slow":
            time.sleep(1.0)
        return None


def test_kill_lets_a_plain_opcode_finish_then_cancels_the_rest(tmp_path) -> None:
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE)
    storage.open()
    q = JobQueue(storage, _UninterruptibleFirst, workers=2)
    q.load()
    q.start()
    try:
        job_id = q.submit_job([{**delay(0), "comment": "slow"}, delay(0)])
        _wait_status(q, job_id, {"running"})
        ok, msg = q.cancel_job(job_id, kill=True)
        assert ok, msg
        assert _wait_status(q, job_id, constants.JOBS_FINALIZED) == "canceled"
        assert q.query_jobs([job_id], ["opstatus"])[0][0] == ["success", "canceled"]
    finally:
        q.shutdown(10)


@pytest.mark.parametrize("content", [
    b"", b"{corrupt", b"\xff\xfe\x00binary", b"[]", b"42", b'"text"', b"null",
    b'{"id": 1}', b'{"id": 1, "ops": "x"}', b'{"id": 1, "ops": [5]}',
    b'{"id": 1, "ops": [{"status": "bogus"}]}',
    b'{"id": 1, "ops": [{"status": "queued"}]}',
])
def test_corrupt_job_files_are_skipped_and_left_untouched(tmp_path, content: bytes) -> None:
    paths = Paths(root=str(tmp_path))
    storage = JobStorage(paths, sync_mode=st.SYNC_NONE)
    storage.open()
    path = storage.job_path(1)
    with open(path, "wb") as fh:
        fh.write(content)
    q = JobQueue(storage, lambda: None, workers=1)
    try:
        q.load()                      # must not raise
        assert q.corrupt_ids == [1]
        assert 1 not in q.job_ids()
        new_id = q.submit_job([delay(0)])
        assert new_id == 2            # the corrupt file's id is not reused
        assert q.archive_job(1) is False
        assert q.auto_archive_jobs(-1, 10)[0] == 0
    finally:
        q.shutdown(5)
    with open(path, "rb") as fh:
        assert fh.read() == content


def _finished_job_file(job_id: int) -> bytes:
    op = {"input": delay(0), "status": "success", "result": None, "log": [],
          "priority": 0, "end_timestamp": [1000, 0]}
    return serializer.dumps_bytes({"id": job_id, "ops": [op], "end_timestamp": [1000, 0]})


def test_untrusted_queue_entries_are_quarantined_at_load(tmp_path, caplog) -> None:
    """A symbolic link, a directory and a file of another job, each named job-<id>:
    moved to queue/quarantine/ with one log line each; the queue loads anyway."""
    paths = Paths(root=str(tmp_path))
    storage = JobStorage(paths, sync_mode=st.SYNC_NONE)
    storage.open()
    outside = tmp_path / "outside-job-1"
    outside.write_bytes(serializer.dumps_bytes(
        {"id": 1, "ops": [{"input": delay(0), "status": "queued"}]}))
    os.symlink(outside, storage.job_path(1))       # would be adopted and run
    os.mkdir(storage.job_path(2))                  # IsADirectoryError at load
    with open(storage.job_path(3), "wb") as fh:    # served as job 3
        fh.write(_finished_job_file(4))
    with open(storage.job_path(5), "wb") as fh:    # a good one
        fh.write(_finished_job_file(5))
    q = JobQueue(storage, lambda: None, workers=1)
    try:
        with caplog.at_level("ERROR", logger="ganeti.jqueue.adopt"):
            q.load()
        assert q.job_ids() == [5]
        assert q.query_jobs([1, 2, 3, 5], ["id"]) == [None, None, None, [5]]
        qdir = os.path.join(paths.queue_dir, "quarantine")
        assert sorted(os.listdir(qdir)) == ["job-1", "job-2", "job-3"]
        assert os.path.islink(os.path.join(qdir, "job-1"))   # the link moved, not its target
        assert outside.exists()
        lines = [r.getMessage() for r in caplog.records if "uarantined" in r.getMessage()]
        assert len(lines) == 3, lines
        assert q.submit_job([delay(0)]) == 6           # quarantined ids are not reused
    finally:
        q.shutdown(5)


def test_cancel_just_before_the_dependency_check_is_not_lost(env: Env, monkeypatch) -> None:
    # A worker has taken the job (so cancel_job only marks it "canceling") and
    # is about to evaluate its dependency: the cancel must win over "waiting".
    check = JobQueue._check_dependencies
    answers: list[Any] = []

    def cancel_then_check(self: JobQueue, job: Any, idx: int) -> Any:
        if job.ops[idx].input.get("depends") and not answers:
            answers.append(self.cancel_job(job.id))
        return check(self, job, idx)

    monkeypatch.setattr(JobQueue, "_check_dependencies", cancel_then_check)
    env.gate = threading.Event()
    env.queue.start()
    first = env.queue.submit_job([delay(0, comment="gate")])
    waiter = env.queue.submit_job([delay(0, depends=[[first, []]])])
    assert env.wait_final(waiter) == "canceled"
    assert answers == [[True, f"Job {waiter} will be canceled"]]
    env.gate.set()
    assert env.wait_final(first) == "success"
    assert [op.comment for op in env.order] == ["gate"]


@pytest.mark.parametrize("size", [2, 3])
def test_dependency_cycle_fails_every_job_in_it(env: Env, size: int) -> None:
    # Absolute ids: job n waits for n+1, ..., the last for n (issue 19, item 10).
    env.queue.start()
    probe = env.queue.submit_job([delay(0)])
    first = probe + 1
    ids = [first + i for i in range(size)]
    jobs = [[delay(0, depends=[[ids[(i + 1) % size], []]])] for i in range(size)]
    assert env.queue.submit_many_jobs(jobs) == [[True, j] for j in ids]
    for job_id in ids:
        assert env.wait_final(job_id) == "error"
        msg = env.queue.query_jobs([job_id], ["opresult"])[0][0][0][1][0]
        assert "dependency cycle" in msg and all(str(j) in msg for j in ids)
    assert env.queue.get_lock_info() == []


def test_queue_size_bounds_unarchived_jobs(tmp_path, monkeypatch) -> None:
    # The queue limit counted only unfinished jobs: finished ones piled up
    # without bound (issue 19).  Past the soft limit the oldest finished jobs
    # are archived (in the background, once submissions pause; by the
    # submission itself at the hard limit); past the hard limit with
    # nothing finished to archive a submission is refused.
    monkeypatch.setattr(constants, "JOB_QUEUE_SIZE_SOFT_LIMIT", 4, raising=False)
    monkeypatch.setattr(constants, "JOB_QUEUE_SIZE_HARD_LIMIT", 6)
    env = Env(tmp_path)
    try:
        env.queue.start()
        done = []
        for _ in range(10):
            done.append(env.queue.submit_job([delay(0)]))
            assert env.wait_final(done[-1]) == "success"
            assert len(env.queue.job_ids()) <= 6
        wait_until(lambda: env.queue.job_ids() == done[-4:])
        assert env.queue.storage.list_job_ids() == done[-4:]
        archived = env.queue.query_jobs([done[0]], ["status", "archived"])
        assert archived == [["success", True]]
        env.gate = threading.Event()
        blocked = [env.queue.submit_job([delay(0, comment="gate")]) for _ in range(6)]
        assert env.queue.job_ids() == blocked      # every finished job made room
        with pytest.raises(errors.JobQueueFull, match="6 unfinished"):
            env.queue.submit_job([delay(0)])
        env.gate.set()
        for job_id in blocked:
            assert env.wait_final(job_id) == "success"
        assert env.queue.submit_job([delay(0)]) > blocked[-1]
        wait_until(lambda: len(env.queue.job_ids()) == 4)
    finally:
        if env.gate is not None:
            env.gate.set()
        env.queue.shutdown(5)


def wait_until(predicate: Any) -> None:
    """Poll `predicate` until it holds (at most TIMEOUT seconds)."""
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)


@pytest.mark.parametrize("prio", [-11, -9, -1, 1, 9, 11, 19, -20])
def test_only_submittable_priorities_are_accepted(env: Env, prio: int) -> None:
    with pytest.raises(errors.ParameterError, match=f"priority {prio} is not valid"):
        env.queue.submit_job([delay(0, priority=prio)])
    with pytest.raises(errors.ParameterError, match=f"priority {prio} is not valid"):
        env.queue.submit_many_jobs([[delay(0)], [delay(0), delay(0, priority=prio)]])
    assert env.queue.submit_many_jobs([[delay(0, priority=10)], [delay(0, priority=-10)]])[0][0]
