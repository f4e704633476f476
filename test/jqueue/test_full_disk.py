"""A full disk: no job state is shown before it is on disk, the queue drains
itself, retries, and carries on (issue 19, item 1).

The job files are written through :class:`fakes.FlakyDisk`, which fails
with ENOSPC on demand; the writer's retry backoff runs on a FakeClock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import pytest
from fakes import FakeClock, FlakyDisk

from ganeti import constants, errors, serializer
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as st
from ganeti.pathutils import Paths

TIMEOUT = 10.0


def delay(comment: str = "", **kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": 0, "comment": comment, **kw}


class GateProcessor:
    """Starts the opcode, then (comment "gate") waits for the test's gate."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        cbs.notify_start()
        if op.comment == "gate":
            assert self.gate.wait(TIMEOUT)
        return "done"


class Env:
    def __init__(self, tmp_path: Any) -> None:
        self.paths = Paths(root=str(tmp_path))
        self.disk = FlakyDisk()
        self.clock = FakeClock()
        self.gate = threading.Event()
        self.storage = JobStorage(self.paths, sync_mode=st.SYNC_NONE, write_files=self.disk,
                                  clock=self.clock, wait=self.clock.wait)
        self.storage.open()
        self.queue = JobQueue(self.storage, lambda: GateProcessor(self.gate), workers=2)
        self.queue.load()

    def on_disk(self, job_id: int) -> list[str]:
        data = serializer.loads(self.storage.read_job(job_id))
        return [op["status"] for op in data["ops"]]

    def shown(self, job_id: int) -> list[str]:
        return self.queue.query_jobs([job_id], ["opstatus"])[0][0]

    def wait_shown(self, job_id: int, wanted: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while self.queue.query_jobs([job_id], ["status"])[0][0] != wanted:
            assert time.monotonic() < deadline, f"job {job_id} never became {wanted}"
            time.sleep(0.01)

    def free_space(self) -> None:
        """Space is back: let the writer's backoff run out."""
        self.disk.full = False
        self.clock.wait_for_waiters(1)
        self.clock.advance(st.RETRY_MAX)


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    e.gate.set()
    e.disk.full = False
    e.queue.shutdown(5)


def test_a_finished_job_is_not_shown_finished_before_its_file_says_so(
        env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="ganeti.jqueue.storage")
    env.queue.start()
    job_id = env.queue.submit_job([delay("gate")])
    env.wait_shown(job_id, "running")
    env.disk.full = True
    env.gate.set()                   # the opcode ends: its "success" cannot be written
    env.disk.wait_failures(1)
    env.clock.wait_for_waiters(1)
    env.clock.advance(st.retry_delay(1))
    env.disk.wait_failures(2)        # a retry, failing too
    assert env.shown(job_id) == ["running"] == env.on_disk(job_id)
    assert env.queue.wait_for_job_change(job_id, ["status"], ["running"], -1, 0.1) == "nochange"
    # the queue drained itself: clear refusals, nothing written
    assert env.queue.is_drained()
    with pytest.raises(errors.JobQueueDrainError, match="No space left"):
        env.queue.submit_job([delay()])
    with pytest.raises(errors.JobQueueDrainError):
        env.queue.submit_many_jobs([[delay()]])
    assert env.storage.list_job_ids() == [job_id]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
    env.free_space()
    env.wait_shown(job_id, "success")
    assert env.on_disk(job_id) == ["success"]
    # carries on without a restart, and no drain flag was left behind
    assert not env.queue.is_drained()
    assert not os.path.exists(env.paths.queue_drain_file)
    new = env.queue.submit_job([delay()])
    env.wait_shown(new, "success")


def test_a_job_whose_start_cannot_be_written_stays_queued_and_runs_later(env: Env) -> None:
    job_id = env.queue.submit_job([delay(), delay()])
    env.disk.full = True
    env.queue.start()                # "running" cannot be written
    env.disk.wait_failures(1)
    assert env.shown(job_id) == ["queued", "queued"] == env.on_disk(job_id)
    # never reported as failed: a resubmitted "failed" job would run twice
    assert env.queue.query_jobs([job_id], ["status"])[0] == ["queued"]
    env.free_space()
    env.wait_shown(job_id, "success")
    assert env.on_disk(job_id) == ["success", "success"]


def test_cancel_and_priority_are_refused_while_the_disk_is_full(env: Env) -> None:
    env.queue.start()
    running = env.queue.submit_job([delay("gate")])
    waiting = env.queue.submit_job([delay(depends=[[running, []]])])
    env.wait_shown(waiting, "waiting")
    env.disk.full = True
    env.gate.set()
    env.disk.wait_failures(1)
    with pytest.raises(errors.JobQueueError, match="cannot write"):
        env.queue.cancel_job(waiting)
    with pytest.raises(errors.JobQueueError):
        env.queue.change_job_priority(waiting, -5)
    assert env.shown(waiting) == ["waiting"] == env.on_disk(waiting)
    assert env.queue.query_jobs([waiting], ["priority"])[0] == [constants.OP_PRIO_DEFAULT]
    env.free_space()
    env.wait_shown(waiting, "success")


def test_an_operators_drain_stays_after_the_queue_undrains_itself(env: Env) -> None:
    env.queue.start()
    job_id = env.queue.submit_job([delay("gate")])
    env.wait_shown(job_id, "running")
    env.queue.set_drain_flag(True)
    env.disk.full = True
    env.gate.set()
    env.disk.wait_failures(1)
    env.free_space()
    env.wait_shown(job_id, "success")
    assert env.queue.is_drained()
    with pytest.raises(errors.JobQueueDrainError, match="drained, refusing"):
        env.queue.submit_job([delay()])
    env.queue.set_drain_flag(False)
    assert env.queue.submit_job([delay()])


def test_a_failed_new_job_leaves_nothing_behind(env: Env) -> None:
    env.disk.full = True
    with pytest.raises(errors.JobQueueError, match="No space left"):
        env.queue.submit_job([delay()])
    assert env.queue.job_ids() == [] and env.storage.list_job_ids() == []
    env.free_space()                 # the writer probes until space is back
    deadline = time.monotonic() + TIMEOUT
    while env.storage.write_error is not None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    job_id = env.queue.submit_job([delay()])
    assert env.storage.list_job_ids() == [job_id]


# the storage alone --------------------------------------------------------------

def test_retry_delay_doubles_and_is_bounded() -> None:
    assert [st.retry_delay(n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 10, 10]
    assert st.retry_delay(10 ** 6) == st.RETRY_MAX


def test_writer_backs_off_on_the_injected_clock(tmp_path) -> None:
    disk, clock = FlakyDisk(), FakeClock()
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE, write_files=disk,
                         clock=clock, wait=clock.wait)
    storage.open()
    disk.full = True
    done = threading.Event()
    t = threading.Thread(target=lambda: (storage.write_jobs([(1, b"one")], retry=True),
                                         done.set()))
    t.start()
    try:
        start = clock.now
        for attempt, waited in enumerate([0.5, 1.0, 2.0, 4.0], start=1):
            disk.wait_failures(attempt)
            clock.wait_for_waiters(1)
            assert clock.deadlines == [clock.now + waited]
            assert not done.is_set()
            clock.advance(waited)
        assert clock.now - start == 7.5
        disk.wait_failures(5)
        disk.full = False
        clock.wait_for_waiters(1)
        assert clock.deadlines == [clock.now + 8.0]
        clock.advance(8.0)
        t.join(TIMEOUT)
        assert done.is_set() and storage.read_job(1) == b"one"
        assert storage.write_error is None
    finally:
        disk.full = False
        storage.close()


def test_pending_writes_of_a_file_keep_their_order_while_failing(tmp_path) -> None:
    disk, clock = FlakyDisk(), FakeClock()
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE, write_files=disk,
                         clock=clock, wait=clock.wait)
    storage.open()
    try:
        disk.full = True
        storage.write_jobs([(1, b"old")], wait=False)
        disk.wait_failures(1)
        storage.write_jobs([(1, b"new"), (2, b"two")], wait=False)
        disk.full = False
        clock.wait_for_waiters(1)
        clock.advance(st.RETRY_MAX)
        deadline = time.monotonic() + TIMEOUT
        while storage.read_job(2) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert storage.read_job(1) == b"new"
        assert all(w.get(storage.job_path(1)) != b"old" for w in disk.writes[1:])
    finally:
        storage.close()


def test_closing_a_failing_storage_ends_the_waiting_writers(tmp_path) -> None:
    disk, clock = FlakyDisk(), FakeClock()
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE, write_files=disk,
                         clock=clock, wait=clock.wait)
    storage.open()
    disk.full = True
    failed: list[BaseException] = []

    def write() -> None:
        try:
            storage.write_jobs([(1, b"x")], retry=True)
        except errors.JobQueueError as exc:
            failed.append(exc)

    t = threading.Thread(target=write)
    t.start()
    disk.wait_failures(1)
    storage.close()
    t.join(TIMEOUT)
    assert len(failed) == 1 and storage.read_job(1) is None
