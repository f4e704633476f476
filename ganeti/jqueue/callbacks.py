"""What a running opcode may do to its job: the processor's callbacks.

:class:`OpCallbacks` is handed by :class:`~ganeti.jqueue.queue.JobQueue`
to ``processor.execute_opcode(op, callbacks)`` (see :mod:`ganeti.mcpu`):
lock-wait and start notifications, feedback (log) messages, cancel checks,
interruption and priority escalation.  It works on the queue's internals
and is part of the queue, kept apart only for size.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ganeti import constants

if TYPE_CHECKING:
    from ganeti.jqueue.job import QueuedJob
    from ganeti.jqueue.queue import JobQueue

__all__ = ["OpCallbacks"]


class OpCallbacks:
    """What the processor may do while running one opcode of a job."""

    def __init__(self, queue: JobQueue, job: QueuedJob, index: int) -> None:
        self._queue = queue
        self._job = job
        self._index = index
        self.interrupted = threading.Event()

    def notify_waiting(self) -> None:
        """The opcode has to wait for its locks: show (durably) ``waiting``."""
        self._queue._op_waiting(self._job, self._index)

    def notify_start(self) -> None:
        """Locks are held: the opcode is now running (cancel impossible)."""
        self._queue._op_started(self._job, self._index)

    def feedback(self, *args: Any) -> None:
        """Add a log message: ``feedback(msg)`` or ``feedback(type, msg)``."""
        if len(args) == 1:
            log_type, msg = constants.ELOG_MESSAGE, args[0]
        else:
            log_type, msg = args[0], args[1]
        self._queue._add_log(self._job, self._index, log_type, msg)

    def check_cancel(self) -> bool:
        """True when the job was asked to cancel (before it started running)."""
        with self._queue._lock:
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
        with self._queue._lock:
            self._job.ops[self._index].priority = max(constants.OP_PRIO_HIGHEST, priority)
            self._queue._changed.notify_all()

    def submit_many_jobs(self, jobs: list[list[dict[str, Any]]]) -> list[list[Any]]:
        return self._queue.submit_many_jobs(jobs)
