"""Operator control of the job queue: cancel, priority, archive, drain and
job filter rules.

:class:`JobControl` is a base class of :class:`ganeti.jqueue.queue.JobQueue`
holding the requests that act on jobs from outside (LUXI ``CancelJob``,
``ChangeJobPriority``, ``ArchiveJob``, ``AutoArchiveJobs``, the drain flag)
and the queue's side of job filter rules (doc/jobfilters.md, "In the
queue").  It declares the queue's state and primitives it uses; the queue
defines them (its module docstring describes the locking and write order).
"""

from __future__ import annotations

import functools
import heapq
import logging
import threading
from collections.abc import Callable
from typing import Any, Literal

from ganeti import constants, errors
from ganeti.jqueue import archive as jarchive
from ganeti.jqueue import filters as jfilters
from ganeti.jqueue.callbacks import OpCallbacks
from ganeti.jqueue.job import MSG_CANCELED, QueuedJob, set_op_status
from ganeti.jqueue.storage import JobStorage
from ganeti.jqueue.table import JobTable

__all__ = ["JobControl"]

logger = logging.getLogger(__name__)

#: opcode states of a job that has not begun to run
_NOT_STARTED = frozenset([constants.OP_STATUS_QUEUED, constants.OP_STATUS_WAITING])

# A change applied to a copy of a job before it is written (see JobQueue._commit).
_Change = Callable[[QueuedJob], "bool | None"]


class JobControl:
    """Cancel, priority, archive, drain and filter rules of a job queue."""

    # the queue's state and primitives (defined by ganeti.jqueue.queue.JobQueue)
    storage: JobStorage
    filter_gate: jfilters.FilterGate
    _table: JobTable
    _lock: threading.Lock
    _heap: list[tuple[int, int]]
    _queued: set[int]
    _owned: set[int]
    _repush: set[int]
    _running: dict[int, OpCallbacks]
    _archive_index: jarchive.ArchiveIndex
    _clock: Callable[[], float]
    _mono: Callable[[], float]

    def _push(self, job: QueuedJob) -> None:
        raise NotImplementedError

    def _retire(self, job: QueuedJob) -> None:
        raise NotImplementedError

    def _commit(self, job: QueuedJob, change: _Change, *, retry: bool = True,
                start: bool = False, after: Callable[[QueuedJob], None] | None = None,
                urgent: bool = False) -> bool:
        raise NotImplementedError

    def _finalize(self, job: QueuedJob, change: Callable[[QueuedJob], None]) -> None:
        raise NotImplementedError

    def _cancel_from(self, job: QueuedJob, idx: int, msg: str = MSG_CANCELED) -> None:
        raise NotImplementedError

    # job filter rules (doc/jobfilters.md) ------------------------------------
    @staticmethod
    def _view(job: QueuedJob) -> jfilters.JobView:
        return jfilters.JobView(job.id, [op.input for op in job.ops])

    @staticmethod
    def _unstarted(job: QueuedJob) -> bool:
        """Whether no opcode of ``job`` has begun to run: the filter rules
        apply only to such jobs (a job waiting for a dependency is one)."""
        return all(op.exec_timestamp is None and op.status in _NOT_STARTED for op in job.ops)

    def _filter(self, job: QueuedJob) -> jfilters.FilterRule | Literal[False] | None:
        """(lock held) The filter rules' word on ``job``, about to be taken:
        None (run it), False (held back: a PAUSE or a full RATE_LIMIT) or
        the REJECT rule.  A job that has begun to run is not filtered again;
        an error here lets the job run (a worker must not die of it)."""
        if not self._unstarted(job):
            return None
        try:
            what, rule = self.filter_gate.check(self._view(job))
        except Exception:   # a defect in a rule's matching: say so, hold nothing back
            logger.exception("Job filter rules failed on job %s; it runs", job.id)
            return None
        if what == jfilters.HOLD:
            return False
        return rule if what == jfilters.REJECTED else None

    def _release_slot(self, job_id: int) -> None:
        """(lock held) ``job_id`` ended or waits for a dependency: its
        RATE_LIMIT slot (if any) is free, and as many jobs as there are
        free slots of that rule, the most urgent first, are looked at again."""
        def urgency(held: int) -> tuple[int, int]:
            job = self._table.live(held)
            return (job.priority() if job is not None else 0, held)
        for held in self.filter_gate.release(job_id, urgency):
            job = self._table.live(held)
            if job is not None:
                self._push(job)

    def _reject_at_submission(self, jobs: list[QueuedJob]) -> None:
        """New jobs a REJECT rule applies to are stored canceled, naming it."""
        with self._lock:
            if not self.filter_gate.rejects:
                return
            rejected = [(job, self.filter_gate.rejecting(self._view(job))) for job in jobs]
        now = self._clock()
        for job, rule in rejected:
            if rule is not None:
                job.finalize_ops(0, constants.OP_STATUS_CANCELED,
                                 jfilters.rejection_message(rule), now)

    def set_filter_rules(self, rules: list[jfilters.FilterRule]) -> None:
        """Use ``rules`` from now on (masterd calls this at start and after
        every change of the configuration's filters).

        The RATE_LIMIT slots of the jobs taken by workers or running are
        counted again, held jobs are looked at again, and queued jobs a
        REJECT rule now applies to are canceled, naming the rule, by a
        thread of their own (the caller does not wait for their writes).
        Running jobs go on.
        """
        with self._lock:
            running = [self._view(job) for job in self._table.live_jobs()
                       if job.id in self._owned or not self._unstarted(job)]
            for job_id in self.filter_gate.set_rules(rules, running):
                job = self._table.live(job_id)
                if job is not None:
                    self._push(job)
            doomed = [(job, rule) for job in self._table.live_jobs()
                      if job.id not in self._owned and self._unstarted(job)
                      and (rule := self.filter_gate.rejecting(self._view(job))) is not None]
            for job, _ in doomed:
                self._queued.discard(job.id)
                self._owned.add(job.id)
        if doomed:
            threading.Thread(target=self._reject_jobs, args=(doomed,), daemon=True,
                             name="filter-reject").start()

    def _reject_jobs(self, doomed: list[tuple[QueuedJob, jfilters.FilterRule]]) -> None:
        """Cancel jobs taken by :meth:`set_filter_rules`, each naming its
        REJECT rule; a job whose write did not happen goes back to the queue."""
        for job, rule in doomed:
            try:
                self._finalize(job, functools.partial(
                    self._cancel_from, idx=0, msg=jfilters.rejection_message(rule)))
            except Exception:   # give the job back below, whatever happened
                logger.exception("Cannot cancel job %s for filter rule %s", job.id, rule.uuid)
            finally:
                with self._lock:
                    self._owned.discard(job.id)
                    self._repush.discard(job.id)
                    if self._table.live(job.id) is job:   # not written: back to the queue
                        self._push(job)

    # control -----------------------------------------------------------------
    def cancel_job(self, job_id: Any, kill: bool = False) -> list[Any]:
        """Cancel a queued or waiting job; returns ``[success, message]``.

        A running job is only canceled with ``kill``: its unfinished opcodes
        are marked ``canceling`` and the running opcode is *interrupted*.
        Only interruptible opcodes react (``OP_TEST_DELAY`` with
        ``interruptible`` stops its master-side sleep at once, and a disk
        transfer of an export or import stops at its next poll, see
        :meth:`ganeti.mcpu.Processor.wait_interrupt`); any other opcode runs
        to its end and the job is canceled after it.  The job then ends
        ``canceled`` (unless the running opcode failed on its own first).

        Written before it is shown (:meth:`_commit`); raises
        :class:`errors.JobQueueError` when that is not possible now.
        """
        with self._lock:
            job = self._table.get(job_id, archived=False)
        if job is None:
            return [False, f"Job {job_id} not found"]
        failure = self.storage.write_error
        if failure is not None and not job.is_finalized():
            raise errors.JobQueueError(f"Cannot cancel job {job.id} now: the job queue cannot"
                                       f" write its files ({failure})")
        answer: list[Any] = []
        state: dict[str, bool] = {}

        def cancel(j: QueuedJob) -> bool:
            status = j.status()
            running = status in (constants.JOB_STATUS_RUNNING, constants.JOB_STATUS_CANCELING)
            if running and not kill:
                answer[:] = [False, f"Job {j.id} is {status}, it can no longer be canceled"
                                    " (kill interrupts it)"]
                return False
            state["running"] = running
            state["owned"] = owned = j.id in self._owned
            if owned:
                for op in j.ops:
                    if op.status not in constants.OPS_FINALIZED:
                        set_op_status(op, constants.OP_STATUS_CANCELING)
            else:
                # no worker holds it: the canceler does while it writes
                state["queued"] = j.id in self._queued
                self._queued.discard(j.id)
                self._owned.add(j.id)
                j.finalize_ops(0, constants.OP_STATUS_CANCELED, MSG_CANCELED, self._clock())
            return True

        def shown(j: QueuedJob) -> None:
            if not state["owned"]:
                self._owned.discard(j.id)
                self._repush.discard(j.id)
                self._retire(j)
                answer[:] = [True, f"Job {j.id} canceled"]
                return
            cbs = self._running.get(j.id)
            if state["running"] and cbs is not None:
                cbs.interrupted.set()
            # the worker may have let the job go (waiting) before this was shown
            self._push(j)
            answer[:] = ([True, f"Job {j.id} is running, it was asked to stop"]
                         if state["running"] else [True, f"Job {j.id} will be canceled"])

        try:
            self._commit(job, cancel, retry=False, after=shown)
        except errors.JobQueueError:
            with self._lock:
                if state.get("owned") is False:      # give the job back as it was
                    self._owned.discard(job.id)
                    if state.get("queued") or job.id in self._repush:
                        self._repush.discard(job.id)
                        self._push(job)
            raise
        if not answer:
            with self._lock:
                status = self._table.status_of(job.id)
            return [False, f"Job {job.id} is already finished ({status})"]
        return answer

    def change_job_priority(self, job_id: Any, priority: Any) -> list[Any]:
        """Change the priority of a job's unfinished opcodes; ``[success, message]``
        (written first, :class:`errors.JobQueueError` when that fails)."""
        if (not isinstance(priority, int) or isinstance(priority, bool)
                or not constants.OP_PRIO_HIGHEST <= priority <= constants.OP_PRIO_LOWEST):
            raise errors.ParameterError(
                f"Priority must be an integer in [{constants.OP_PRIO_HIGHEST},"
                f" {constants.OP_PRIO_LOWEST}], got {priority!r}", errors.ECODE_INVAL)
        with self._lock:
            job = self._table.get(job_id, archived=False)
        if job is None:
            return [False, f"Job {job_id} not found"]

        def change(j: QueuedJob) -> bool:
            for op in j.ops:
                if op.status not in constants.OPS_FINALIZED:
                    op.priority = priority
            return True

        def shown(j: QueuedJob) -> None:
            if j.id in self._queued:
                heapq.heappush(self._heap, (j.priority(), j.id))

        if not self._commit(job, change, retry=False, after=shown):
            return [False, f"Job {job.id} is finished"]
        return [True, f"Priority of job {job.id} changed to {priority}"]

    def archive_job(self, job_id: Any) -> bool:
        """Archive one finished job; False when unknown or unfinished."""
        with self._lock:
            return jarchive.archive_job(self._table, self.storage, job_id, self._archive_index)

    def auto_archive_jobs(self, age: Any, timeout: Any) -> list[int]:
        """Archive finished jobs older than ``age`` seconds (-1: all); see
        :func:`ganeti.jqueue.archive.auto_archive`."""
        return jarchive.auto_archive(self._table, self.storage, age, timeout,
                                     now=self._clock(), monotonic=self._mono,
                                     index=self._archive_index)

    # queue flags ---------------------------------------------------------------
    def set_drain_flag(self, flag: bool) -> None:
        self.storage.set_drained(bool(flag))

    def is_drained(self) -> bool:
        """True while new jobs are refused: the operator's drain flag is set,
        or the queue drained itself because it cannot write its files."""
        return self.storage.write_error is not None or self.storage.is_drained()
