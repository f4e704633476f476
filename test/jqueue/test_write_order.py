"""The writes of one job are ordered: a later write never carries an older
state (issue 19, item 3: cancel racing the finish).

The race is made deterministic by a wrapper around ``JobStorage.write_jobs``
that holds the cancel's write until the worker's final write went first
(or, once the writes are ordered, until a bounded wait shows it cannot).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ganeti import serializer
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as st
from ganeti.pathutils import Paths

TIMEOUT = 10.0
#: How long the cancel's write waits for the worker's final write to go
#: first (bounded: with ordered writes the worker cannot write meanwhile).
HOLD = 1.0


class FinishOnSignal:
    """Runs the opcode once ``finish`` is set (a plain, uninterruptible one)."""

    def __init__(self, finish: threading.Event) -> None:
        self.finish = finish

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        cbs.notify_start()
        if op.comment == "hold":
            assert self.finish.wait(TIMEOUT)
        return "done"


def _statuses(data: bytes) -> list[str]:
    return [op["status"] for op in serializer.loads(data)["ops"]]


@pytest.fixture
def queue(tmp_path):
    finish = threading.Event()
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE)
    storage.open()
    q = JobQueue(storage, lambda: FinishOnSignal(finish), workers=2)
    q.load()
    q.finish = finish
    yield q
    finish.set()
    q.shutdown(5)


def _wait_status(q: JobQueue, job_id: int, wanted: set[str]) -> str:
    deadline = time.monotonic() + TIMEOUT
    while True:
        status = q.query_jobs([job_id], ["status"])[0][0]
        if status in wanted:
            return status
        assert time.monotonic() < deadline, f"job {job_id} never reached {wanted}"
        time.sleep(0.01)


def test_a_kill_racing_the_end_of_the_opcode_never_leaves_the_file_behind(
        queue: JobQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = queue.storage
    real_write = storage.write_jobs
    final_written = threading.Event()
    canceler_name = "canceler"
    shown_during_cancel_write: list[Any] = []

    def write_jobs(items: Any, **kw: Any) -> None:
        items = list(items)
        statuses = [s for _, data in items for s in _statuses(data)]
        if threading.current_thread().name == canceler_name and "canceling" in statuses:
            job_id = items[0][0]
            shown_during_cancel_write.append(queue.query_jobs([job_id], ["opstatus"])[0][0])
            queue.finish.set()                 # the running opcode ends right now
            final_written.wait(HOLD)           # the worker's final write, if it can, goes first
        real_write(items, **kw)
        if "canceled" in statuses:
            final_written.set()

    monkeypatch.setattr(storage, "write_jobs", write_jobs)
    queue.start()
    job_id = queue.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0, "comment": "hold"},
                               {"OP_ID": "OP_TEST_DELAY", "duration": 0}])
    _wait_status(queue, job_id, {"running"})
    answer: list[Any] = []
    canceler = threading.Thread(target=lambda: answer.append(queue.cancel_job(job_id, kill=True)),
                                name=canceler_name)
    canceler.start()
    canceler.join(TIMEOUT)
    assert answer and answer[0][0], answer
    assert _wait_status(queue, job_id, {"success", "error", "canceled"}) == "canceled"
    shown = queue.query_jobs([job_id], ["opstatus"])[0][0]
    assert shown == ["success", "canceled"]
    assert _statuses(storage.read_job(job_id)) == shown
    # and "canceling" was not shown before it was written
    assert shown_during_cancel_write == [["running", "queued"]]
