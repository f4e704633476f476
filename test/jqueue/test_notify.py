"""Job events: what the queue publishes on the event bus, in order."""

from __future__ import annotations

import time
from typing import Any

from ganeti import constants, errors, events
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as st
from ganeti.pathutils import Paths

TIMEOUT = 10.0


class _Processor:
    """OP_TEST_JQUEUE: start, log each message, fail if asked."""

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        cbs.notify_start()
        for msg in op.log_messages:
            cbs.feedback(msg)
        if op.fail:
            raise errors.OpExecError("requested failure")
        return True


def _queue(tmp_path: Any, bus: events.EventBus | None) -> JobQueue:
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE)
    storage.open()
    queue = JobQueue(storage, _Processor, workers=2, events=bus)
    queue.load()
    queue.start()
    return queue


def _op(msgs: list[str], fail: bool = False) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_JQUEUE", "log_messages": msgs, "fail": fail}


def _events_until_finished(bus: events.EventBus, job_id: int) -> list[events.Event]:
    seen: list[events.Event] = []
    cursor = 0
    deadline = time.monotonic() + TIMEOUT
    flt = events.EventFilter(job_ids=[job_id])
    while time.monotonic() < deadline:
        cursor, got = bus.wait(cursor, flt, timeout=1.0)
        seen.extend(got)
        if any(e.type == events.EV_JOB_FINISHED for e in got):
            return seen
    raise AssertionError(f"job {job_id} did not finish: {seen}")


def _summary(seen: list[events.Event]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for e in seen:
        if e.type == events.EV_JOB_LOG:
            out.append((e.type, e.data["message"]))
        elif e.type == events.EV_JOB_STATUS:
            out.append((e.type, tuple(e.data["opstatus"])))
        else:
            out.append((e.type, e.data["status"]))
    return out


def test_a_job_publishes_submitted_every_status_and_each_log_line_in_order(tmp_path: Any) -> None:
    bus = events.EventBus(1000)
    queue = _queue(tmp_path, bus)
    try:
        job_id = queue.submit_job([_op(["one", "two"]), _op(["three"])])
        seen = _events_until_finished(bus, job_id)
    finally:
        queue.shutdown(5)
    R, S, Q = constants.OP_STATUS_RUNNING, constants.OP_STATUS_SUCCESS, constants.OP_STATUS_QUEUED
    assert _summary(seen) == [
        (events.EV_JOB_SUBMITTED, constants.JOB_STATUS_QUEUED),
        (events.EV_JOB_STATUS, (R, Q)),
        (events.EV_JOB_LOG, "one"),
        (events.EV_JOB_LOG, "two"),
        (events.EV_JOB_STATUS, (S, Q)),
        (events.EV_JOB_STATUS, (S, R)),
        (events.EV_JOB_LOG, "three"),
        (events.EV_JOB_STATUS, (S, S)),
        (events.EV_JOB_FINISHED, constants.JOB_STATUS_SUCCESS),
    ]
    assert [e.id for e in seen] == sorted(e.id for e in seen)
    logs = [e.data for e in seen if e.type == events.EV_JOB_LOG]
    assert [(d["serial"], d["op_index"]) for d in logs] == [(1, 0), (2, 0), (3, 1)]
    assert seen[0].data["summary"] == ["TEST_JQUEUE(False)"] * 2


def test_a_failed_job_finishes_with_error(tmp_path: Any) -> None:
    bus = events.EventBus(1000)
    queue = _queue(tmp_path, bus)
    try:
        job_id = queue.submit_job([_op([], fail=True), _op([])])
        seen = _events_until_finished(bus, job_id)
    finally:
        queue.shutdown(5)
    assert seen[-1].data["status"] == constants.JOB_STATUS_ERROR
    assert seen[-2].type == events.EV_JOB_STATUS
    assert seen[-2].data["opstatus"] == [constants.OP_STATUS_ERROR] * 2


def test_a_canceled_queued_job_publishes_its_end(tmp_path: Any) -> None:
    bus = events.EventBus(1000)
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE)
    storage.open()
    queue = JobQueue(storage, _Processor, workers=1, events=bus)
    queue.load()                          # no workers: the job stays queued
    try:
        job_id = queue.submit_job([_op([])])
        assert queue.cancel_job(job_id)[0]
    finally:
        queue.shutdown(5)
    types = [(e.type, e.data["status"]) for e in bus.since(0)[1]]
    assert types == [(events.EV_JOB_SUBMITTED, "queued"), (events.EV_JOB_STATUS, "canceled"),
                     (events.EV_JOB_FINISHED, "canceled")]


def test_a_subscriber_that_never_reads_does_not_hold_up_the_queue(tmp_path: Any) -> None:
    bus = events.EventBus(16)
    stuck = bus.subscribe(maxlen=2)        # never taken from
    queue = _queue(tmp_path, bus)
    try:
        ids = [queue.submit_job([_op(["x"] * 3)]) for _ in range(20)]
        deadline = time.monotonic() + TIMEOUT
        while queue.query_jobs(ids, ["status"]) != [["success"]] * len(ids):
            assert time.monotonic() < deadline, "jobs did not finish"
            time.sleep(0.01)
        statuses = queue.query_jobs(ids, ["status"])
    finally:
        queue.shutdown(5)
    assert stuck.pending() == 2 and bus.dropped == 1
    assert all(row == [constants.JOB_STATUS_SUCCESS] for row in statuses)


def test_no_bus_no_events(tmp_path: Any) -> None:
    queue = _queue(tmp_path, None)
    try:
        job_id = queue.submit_job([_op(["x"])])
        deadline = time.monotonic() + TIMEOUT
        while queue.query_jobs([job_id], ["status"])[0] != ["success"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        queue.shutdown(5)
