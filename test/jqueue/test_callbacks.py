"""OpCallbacks against a fake runner: what a running opcode may do to its job."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import constants, opcodes
from ganeti.jqueue.callbacks import OpCallbacks
from ganeti.jqueue.job import QueuedJob, QueuedOpCode, set_op_status
from ganeti.jqueue.storage import JobStorage
from ganeti.jqueue.table import JobTable
from ganeti.pathutils import Paths


class FakeRunner:
    """Records the calls OpCallbacks makes (no storage is ever touched)."""

    def __init__(self) -> None:
        self.table = JobTable(JobStorage(Paths(root="/nonexistent")))   # never opened
        self.calls: list[tuple[Any, ...]] = []

    def report_op_status(self, job: QueuedJob, index: int, status: str) -> None:
        self.calls.append(("status", job.id, index, status))

    def add_op_log(self, job: QueuedJob, index: int, log_type: str, message: Any) -> None:
        self.calls.append(("log", job.id, index, log_type, message))

    def submit_many_jobs(self, jobs: Any, *, ignore_drain: bool = False) -> list[list[Any]]:
        self.calls.append(("submit", jobs))
        return [[True, 99]]


@pytest.fixture
def job() -> QueuedJob:
    ops = [QueuedOpCode.from_opcode(opcodes.OpTestDelay(duration=0, priority=p)) for p in (0, 5)]
    return QueuedJob(id=7, ops=ops, received_timestamp=[100, 250000])


def test_notifications_and_feedback_reach_the_runner(job: QueuedJob) -> None:
    runner = FakeRunner()
    cbs = OpCallbacks(runner, job, 1)
    cbs.notify_waiting()
    cbs.notify_start()
    cbs.feedback("hello")
    cbs.feedback(constants.ELOG_REMOTE_IMPORT, {"x": 1})
    assert cbs.submit_many_jobs([[{"OP_ID": "OP_TEST_DELAY"}]]) == [[True, 99]]
    assert runner.calls == [
        ("status", 7, 1, constants.OP_STATUS_WAITING),
        ("status", 7, 1, constants.OP_STATUS_RUNNING),
        ("log", 7, 1, constants.ELOG_MESSAGE, "hello"),
        ("log", 7, 1, constants.ELOG_REMOTE_IMPORT, {"x": 1}),
        ("submit", [[{"OP_ID": "OP_TEST_DELAY"}]]),
    ]


def test_check_cancel_sees_only_its_own_opcode_canceling(job: QueuedJob) -> None:
    runner = FakeRunner()
    first, second = OpCallbacks(runner, job, 0), OpCallbacks(runner, job, 1)
    assert not first.check_cancel()
    set_op_status(job.ops[1], constants.OP_STATUS_CANCELING)
    assert not first.check_cancel() and second.check_cancel()


def test_priority_is_raised_but_never_past_the_highest(job: QueuedJob) -> None:
    cbs = OpCallbacks(FakeRunner(), job, 1)
    assert cbs.current_priority() == 5
    cbs.set_priority(4)
    assert cbs.current_priority() == 4 and job.ops[0].priority == 0
    cbs.set_priority(constants.OP_PRIO_HIGHEST - 3)
    assert cbs.current_priority() == constants.OP_PRIO_HIGHEST


def test_submitted_at_and_interrupt(job: QueuedJob) -> None:
    cbs = OpCallbacks(FakeRunner(), job, 0)
    assert cbs.submitted_at() == 100.25
    assert cbs.wait_interrupt(0) is False
    cbs.interrupted.set()
    assert cbs.wait_interrupt(-1) is True
    job.received_timestamp = None
    assert cbs.submitted_at() is None
