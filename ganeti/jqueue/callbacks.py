"""What a running opcode may do to its job: the processor's callbacks.

:class:`OpCallbacks` is handed by :class:`~ganeti.jqueue.queue.JobQueue`
to ``processor.execute_opcode(op, callbacks)`` (see :mod:`ganeti.mcpu`):
lock-wait and start notifications, feedback (log) messages, cancel checks,
interruption and priority escalation.  It uses only what
:class:`JobRunner` lists (public API of the queue and its
:class:`~ganeti.jqueue.table.JobTable`), so a test can run it against a
small fake.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from ganeti import constants

if TYPE_CHECKING:
    from ganeti.jqueue.job import QueuedJob
    from ganeti.jqueue.table import JobTable

__all__ = ["JobRunner", "OpCallbacks"]


class JobRunner(Protocol):
    """What :class:`OpCallbacks` needs from the queue running the job
    (:class:`~ganeti.jqueue.queue.JobQueue`)."""

    @property
    def table(self) -> JobTable:
        """The job table; its lock guards the job's opcodes."""
        ...

    def report_op_status(self, job: QueuedJob, index: int, status: str) -> None:
        """Opcode ``index`` is now ``waiting`` or ``running`` (durably first)."""
        ...

    def add_op_log(self, job: QueuedJob, index: int, log_type: str, message: Any) -> None:
        """Append a log entry to opcode ``index``."""
        ...

    def submit_many_jobs(self, jobs: Any, *, ignore_drain: bool = False) -> list[list[Any]]:
        """Submit jobs on behalf of the running opcode."""
        ...


class OpCallbacks:
    """What the processor may do while running one opcode of a job."""

    def __init__(self, queue: JobRunner, job: QueuedJob, index: int) -> None:
        self._queue = queue
        self._job = job
        self._index = index
        self.interrupted = threading.Event()

    def notify_waiting(self) -> None:
        """The opcode has to wait for its locks: show (durably) ``waiting``."""
        self._queue.report_op_status(self._job, self._index, constants.OP_STATUS_WAITING)

    def notify_start(self) -> None:
        """Locks are held: the opcode is now running (cancel impossible)."""
        self._queue.report_op_status(self._job, self._index, constants.OP_STATUS_RUNNING)

    def feedback(self, *args: Any) -> None:
        """Add a log message: ``feedback(msg)`` or ``feedback(type, msg)``."""
        if len(args) == 1:
            log_type, msg = constants.ELOG_MESSAGE, args[0]
        else:
            log_type, msg = args[0], args[1]
        self._queue.add_op_log(self._job, self._index, log_type, msg)

    def check_cancel(self) -> bool:
        """True when the job was asked to cancel (before it started running)."""
        with self._queue.table.lock:
            return self._job.ops[self._index].status == constants.OP_STATUS_CANCELING

    def wait_interrupt(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True at once when the running
        opcode is interrupted (``CancelJob`` with ``kill``)."""
        return self.interrupted.wait(max(0.0, timeout))

    def submitted_at(self) -> float | None:
        """Wall-clock seconds at which the job was received."""
        received = self._job.received_timestamp
        return received[0] + received[1] / 1e6 if received else None

    def current_priority(self) -> int:
        return self._job.ops[self._index].priority

    def set_priority(self, priority: int) -> None:
        """Raise the opcode's priority (the processor escalates after lock timeouts)."""
        table = self._queue.table
        with table.lock:
            self._job.ops[self._index].priority = max(constants.OP_PRIO_HIGHEST, priority)
            table.changed.notify_all()

    def submit_many_jobs(self, jobs: list[list[dict[str, Any]]]) -> list[list[Any]]:
        return self._queue.submit_many_jobs(jobs)
