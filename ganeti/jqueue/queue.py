"""The job queue: submission, scheduling, worker threads, waiting, archive.

One :class:`JobQueue` per master.  The jobs it knows are in its
:class:`~ganeti.jqueue.table.JobTable`; all job state, and the scheduling
state here, lives under the table's lock.  ``changed`` (a condition on
that lock) is notified on every change and wakes
:meth:`JobQueue.wait_for_job_change`; ``_work`` wakes idle workers.
The read side is in :mod:`ganeti.jqueue.lookup`, the checks of a submission
in :mod:`ganeti.jqueue.submission`, cancel, priority, archive, drain and job
filter rules in the base class :class:`~ganeti.jqueue.control.JobControl`.

Durability: a state change is never shown before it is on disk.  Each
goes through :meth:`JobQueue._commit` (applied to a copy, written through
:class:`~ganeti.jqueue.storage.JobStorage`, then shown), under the job's
*write lock* (taken before the table lock), so a later write always
carries the newer state; log messages are written lazily, under the same
lock.  A submitted job id is returned only after its file (and the
serial) are durable.  When job files cannot be written, the storage
retries; the queue refuses new jobs meanwhile and carries on by itself
(doc/protocols/jobs.md, "Full disk").

Secrets: every opcode result, error and log message is recorded through
:meth:`JobQueue._clean`, which replaces each secret value the master knows
(its :class:`~ganeti.redact.Redactor`: the config's private values, and
the private values of every unfinished job, held from submission until
the job is final) with the redaction marker, so neither the job files nor
any answer (LUXI, RAPI, ``gnt-job info``) can carry one
(doc/protocols/opcodes.md, "Private parameters").

Finished jobs are kept as summaries (:mod:`ganeti.jqueue.summary`: the
list-query fields, indexed in ``queue/summaries`` so that start-up reads
no file of theirs) and read back from disk on demand, with a small cache
(see the table), so a queue with many finished jobs loads fast and stays
small.  Archived jobs are read from the archive only when asked for
(:meth:`JobQueue.get_archived_jobs`, lookups by id).

:meth:`JobQueue.pickup_job` (LUXI ``PickupJob``) adopts a job file written
into the queue directory by another process.  Job ids handed out but not
yet registered are *reserved* (allocation and pickup both happen under the
queue lock), so a pickup can never take an id a submission is writing.
"""

from __future__ import annotations

import functools
import heapq
import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Literal

from ganeti import constants, errors, opcodes, redact, serializer
from ganeti.jqueue import adopt as jadopt
from ganeti.jqueue import archive as jarchive
from ganeti.jqueue import deps as jdeps
from ganeti.jqueue import filters as jfilters
from ganeti.jqueue import lookup as jlookup
from ganeti.jqueue import notify as jnotify
from ganeti.jqueue import submission as jsubmit
from ganeti.jqueue import summary as jsummary
from ganeti.jqueue.callbacks import OpCallbacks
from ganeti.jqueue.control import JobControl
from ganeti.jqueue.job import (MSG_CANCELED, MSG_MASTER_STOPPED, QueuedJob, copy_job,
                               job_to_disk, jsonable, set_op_status, split_time)
from ganeti.jqueue.storage import JobStorage
from ganeti.jqueue.table import JobTable

if TYPE_CHECKING:
    from ganeti.events import EventBus
    from ganeti.metrics.master import MasterMetrics

__all__ = ["JobQueue", "ProcessorFactory", "MSG_MASTER_STOPPED", "MSG_CANCELED", "MSG_PREV_FAILED"]

logger = logging.getLogger(__name__)

# A processor has execute_opcode(op, callbacks) -> result (see ganeti.mcpu);
# it calls callbacks.notify_start() before the opcode's work, as an opcode
# succeeds only from "running" (ganeti.jqueue.job.OP_TRANSITIONS).
ProcessorFactory = Callable[[], Any]

MSG_PREV_FAILED = "Previous opcode failed"

# A change that makes a job final, applied to a copy before it is written.
_Finalizer = Callable[[QueuedJob], None]
# A change applied to a copy of a job by JobQueue._commit: False means "no change".
_Change = Callable[[QueuedJob], "bool | None"]


class JobQueue(JobControl):
    """Jobs, their scheduling by priority and dependencies, and the workers.

    ``processor_factory()`` gives an object with ``execute_opcode(op, callbacks)``;
    ``clock`` is wall time (job timestamps).  ``size_limits`` is ``(soft, hard)``, in
    unarchived jobs (default: the ``JOB_QUEUE_SIZE_*`` constants; see
    :meth:`submit_job`; ``archive_idle``: the pause that starts archiving past the
    soft limit).  ``events``: the bus job events are published on
    (:mod:`ganeti.jqueue.notify`), or None; ``metrics``: where job start and end
    latencies are observed, or None; ``redactor``: the secret values scrubbed from
    results, errors and log entries (default: a new :class:`~ganeti.redact.Redactor`,
    which still knows the jobs' own private values); ``epoch()``: the master epoch
    recorded in each new job file (None: none recorded).
    """

    def __init__(self, storage: JobStorage, processor_factory: ProcessorFactory, *,
                 workers: int = constants.DEFAULT_JOB_WORKERS,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 size_limits: tuple[int, int] | None = None,
                 events: EventBus | None = None, metrics: MasterMetrics | None = None,
                 redactor: redact.Redactor | None = None,
                 epoch: Callable[[], int | None] = lambda: None,
                 archive_idle: float = jarchive.ARCHIVE_IDLE) -> None:
        self.storage = storage
        self._epoch = epoch
        self.redactor = redactor if redactor is not None else redact.Redactor()
        self._held_secrets: dict[int, list[str]] = {}   # job id -> texts held in redactor
        self.events = events
        self.metrics = metrics
        self._soft_limit, self._hard_limit = size_limits or (
            constants.JOB_QUEUE_SIZE_SOFT_LIMIT, constants.JOB_QUEUE_SIZE_HARD_LIMIT)
        self._factory = processor_factory
        self._nworkers = workers
        self._clock = clock
        self._mono = monotonic
        self._table = JobTable(storage)
        self._archive_index = jarchive.ArchiveIndex()
        self._lock = self._table.lock
        self._changed = self._table.changed
        self._work = threading.Condition(self._lock)
        self.archiver = jarchive.BackgroundArchiver(self._table, storage, self._soft_limit,
                                                    self._archive_index, monotonic, archive_idle)
        self._heap: list[tuple[int, int]] = []
        self._queued: set[int] = set()               # ids in the heap, not taken yet
        self._owned: set[int] = set()                # ids a worker is running
        self._repush: set[int] = set()               # woken while still owned
        self._running: dict[int, OpCallbacks] = {}   # job id -> its running opcode
        self._write_locks: dict[int, threading.Lock] = {}  # live job id -> its write order
        self._pickup_lock = threading.Lock()         # one PickupJob at a time
        self.deps = jdeps.DependencyManager()
        self._cycle_failed: dict[int, str] = {}      # job id -> why it must fail (a cycle)
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._index = jsummary.IndexKeeper(storage.queue_dir, self._table, storage.job_path)
        self._index_stop = threading.Event()
        self.filter_gate = jfilters.FilterGate()      # job filter rules (doc/jobfilters.md)

    @property
    def table(self) -> JobTable:
        """The jobs this queue knows (use under ``table.lock``, see :mod:`ganeti.jqueue.table`)."""
        return self._table

    @property
    def corrupt_ids(self) -> list[int]:
        """Ids of the job files found unreadable (left as they are on disk)."""
        with self._lock:
            return self._table.corrupt_ids()

    # lifecycle -------------------------------------------------------------
    def load(self) -> None:
        """Load the unarchived jobs from disk (before :meth:`start`).

        Running jobs become ``error`` (the master stopped under them),
        waiting ones are queued again, canceling ones canceled; corrupt files
        are logged and left alone (see :func:`ganeti.jqueue.adopt.read_queue_dir`).
        """
        found = jadopt.read_queue_dir(self.storage, self._clock())
        if found.rewrite:
            self.storage.write_jobs([(j.id, self._encode(j)) for j in found.rewrite])
        self._index.loaded(found.index, found.index_stale)
        with self._lock:
            for job_id, stub in found.stubs.items():
                self._table.add_stub(job_id, stub, index=job_id in found.unindexed)
            for job_id in found.corrupt:
                self._table.add_corrupt(job_id)
            for job in found.live:
                self._table.add_live(job)
                self._push(job)
        logger.info("Loaded %d unfinished and %d finished jobs (%d corrupt, %d quarantined)",
                    len(found.live), len(found.stubs), len(found.corrupt),
                    len(found.quarantined))

    def start(self) -> None:
        """Start the worker threads."""
        for i in range(self._nworkers):
            t = threading.Thread(target=self._worker, name=f"jq-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        threading.Thread(target=self._index.run, args=(self._index_stop,),
                         name="jq-summary-index", daemon=True).start()
        self._threads.append(self.archiver.start())

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop taking work; wait up to ``timeout`` for running opcodes.

        Jobs not finished stay on disk as they are and resume on the next
        start.  Returns True when all workers stopped in time.
        """
        with self._lock:
            self._stopping = True
            self._work.notify_all()
            self._changed.notify_all()
            self.archiver.stop()
        if self.storage.write_error is not None:
            # workers wait for writes that may never succeed: end them (one
            # last attempt), the jobs stay as they are on disk
            self.storage.close()
        deadline = self._mono() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - self._mono()))
        ok = not any(t.is_alive() for t in self._threads)
        self._index_stop.set()
        self._index.flush()
        self.storage.close()
        return ok

    # submission --------------------------------------------------------------
    def submit_job(self, ops: Any, *, ignore_drain: bool = False) -> int:
        """Validate and store one job; returns its id once durable.

        Raises :class:`errors.JobQueueDrainError` when drained,
        :class:`errors.OpCodeError`/:class:`errors.ParameterError` for invalid
        opcodes (no job is created), :class:`errors.JobQueueFull` when full.

        Size (doc/protocols/jobs.md, "Queue size"): past the soft limit the
        oldest finished jobs are archived once submissions pause; one that
        would pass the hard limit archives them itself, or is refused.
        """
        self._check_accepting(ignore_drain, 1)
        job_ops = jsubmit.validate_ops(ops, relative_ok=False)
        job_id = self._allocate(1)[0]
        job = jsubmit.build_job(job_id, job_ops, self._clock(), self._epoch())
        self._store_new([job])
        return job_id

    def submit_many_jobs(self, jobs: Any, *, ignore_drain: bool = False) -> list[list[Any]]:
        """Submit several jobs; per job ``[True, id]`` or ``[False, message]``.

        Relative (negative) dependency ids refer to earlier jobs of the same
        call; a job whose relative dependency failed to submit fails too.
        """
        if not isinstance(jobs, list):
            raise errors.ParameterError("SubmitManyJobs expects a list of jobs", errors.ECODE_INVAL)
        jsubmit.check_many_priorities(jobs)
        self._check_accepting(ignore_drain, len(jobs))
        results: list[list[Any]] = []
        validated: list[list[opcodes.OpCode] | None] = []
        for ops in jobs:
            try:
                validated.append(jsubmit.validate_ops(ops, relative_ok=True))
            except errors.GanetiError as exc:
                validated.append(None)
                results.append([False, str(exc)])
                continue
            results.append([True, None])
        ids = self._allocate(sum(1 for v in validated if v is not None))
        reserved = list(ids)
        ids.reverse()
        assigned: list[int | None] = []
        new_jobs: list[QueuedJob] = []
        for idx, job_ops in enumerate(validated):
            if job_ops is None:
                assigned.append(None)
                continue
            job_id = ids.pop()
            try:
                for op in job_ops:
                    op.depends = jsubmit.resolve_relative(op.depends, idx, assigned)
            except errors.GanetiError as exc:
                assigned.append(None)
                results[idx] = [False, str(exc)]
                continue
            assigned.append(job_id)
            new_jobs.append(jsubmit.build_job(job_id, job_ops, self._clock(), self._epoch()))
            results[idx] = [True, job_id]
        try:
            if new_jobs:
                self._store_new(new_jobs)
        finally:
            with self._lock:  # ids of jobs refused after allocation are never used
                self._table.unreserve(reserved)
        return results

    def _check_accepting(self, ignore_drain: bool, count: int) -> None:
        failure = self.storage.write_error
        if failure is not None:
            raise errors.JobQueueDrainError(
                f"Job queue cannot write its files ({failure}), refusing new jobs until"
                " the writes succeed again", errors.ECODE_STATE)
        if not ignore_drain and self.storage.is_drained():
            raise errors.JobQueueDrainError("Job queue is drained, refusing job", errors.ECODE_STATE)
        with self._lock:
            if self._stopping:
                raise errors.JobQueueError("Master daemon is shutting down, refusing job")
            jarchive.make_room(self._table, self.storage, count, self._hard_limit, self._archive_index)
            self.archiver.submitted()       # the archiver waits for the next pause
            size = self._table.size()
            if size + count > self._hard_limit:
                raise errors.JobQueueFull(
                    f"Job queue is full ({size} jobs, {self._table.live_count()} unfinished;"
                    f" limit {self._hard_limit}), refusing job")

    def _allocate(self, count: int) -> list[int]:
        """New job ids, reserved until :meth:`_store_new` registers them."""
        with self._lock:
            return self._table.allocate(count)

    def _store_new(self, jobs: list[QueuedJob]) -> None:
        """Write new jobs (and the serial) and wait for their quorum; then queue them.

        Acknowledged means durable here and on a strict majority of the
        master candidates (doc/design/replication.md, Invariant 1).  When
        the quorum write fails the jobs are not acknowledged: they are
        finished as failed with the error (so no master ever runs them,
        and their ids stay used) and :class:`errors.JobQueueQuorumError`
        is raised.
        """
        self._reject_at_submission(jobs)
        held = {j.id: self.redactor.add(redact.private_values([op.op for op in j.ops]))
                for j in jobs}
        try:
            self.storage.write_jobs([(j.id, self._encode(j)) for j in jobs], serial=True,
                                    quorum=True)
        except (errors.JobQueueQuorumError, errors.JobQueueUnwrittenError) as exc:
            named = type(exc)(f"Job {', '.join(str(j.id) for j in jobs)} not acknowledged: {exc}")
            with self._lock:   # released when the failed jobs retire
                self._held_secrets.update((job_id, texts) for job_id, texts in held.items()
                                          if texts)
            if isinstance(exc, errors.JobQueueUnwrittenError):
                self._withdraw(jobs, named)
            else:
                self._fail_unacknowledged(jobs, named)
            raise named from exc
        except BaseException:
            with self._lock:
                self._table.unreserve(j.id for j in jobs)
            for texts in held.values():
                self.redactor.release(texts)
            raise
        with self._lock:
            self._held_secrets.update((job_id, texts) for job_id, texts in held.items() if texts)
        with self._lock:
            for job in jobs:
                self._table.add_live(job)
                jnotify.job_submitted(self.events, job)
                if job.is_finalized():      # rejected by a filter rule
                    self._retire(job)
                else:
                    self._push(job)
            self._changed.notify_all()
            self.archiver.submitted()

    def _withdraw(self, jobs: list[QueuedJob], exc: errors.JobQueueError) -> None:
        """New jobs whose files went to the candidates but not to this disk: their
        failed state goes there at once; here it is written (retried until the
        disk works again) by a thread of its own, not the submitter's."""
        failed = []
        for job in jobs:
            new = copy_job(job)
            self._fail_from(new, 0, exc)
            failed.append((job.id, self._encode(new)))
        self.storage.replicate_ahead(failed)
        threading.Thread(target=self._fail_unacknowledged, args=(jobs, exc),
                         name="jqueue-withdraw", daemon=True).start()

    def _fail_unacknowledged(self, jobs: list[QueuedJob], exc: errors.JobQueueError) -> None:
        """Finish jobs written locally but not on a quorum as failed with ``exc``.

        Their files exist here (and maybe on a minority of candidates): the
        final state is written and replicated like any other job's, so a
        later master finds them finished, not queued.
        """
        with self._lock:
            for job in jobs:
                self._table.add_live(job)
            self.archiver.submitted()
        for job in jobs:
            self._finalize(job, lambda j: self._fail_from(j, 0, exc))

    # adoption (PickupJob) ------------------------------------------------------
    def pickup_job(self, job_id: Any) -> None:
        """LUXI ``PickupJob``: adopt ``queue/job-<job_id>`` written by another process.

        Refused, changing nothing: an id the queue knows, a missing or
        corrupt file, invalid opcodes (see
        :func:`ganeti.jqueue.adopt.read_for_pickup` for the errors), a bad
        id with :class:`errors.ParameterError`; an unfinished job also as
        :meth:`submit_job` refuses one (shutdown, queue full; not drain).

        An id above the queue serial is accepted and the serial raised to
        it, durably and before the job is registered, so ids never repeat.
        The job is adopted only once its file is durable here and on a
        strict majority of the master candidates, like a new job
        (doc/design/replication.md, Invariant 1); otherwise
        :class:`errors.JobQueueQuorumError` is raised and the job is not
        adopted (its file stays; a later ``PickupJob`` may adopt it).
        A queued or waiting job is then scheduled like one loaded at
        start-up (a running one is failed, a canceling one canceled, see
        :meth:`load`); a finished job is only registered.
        """
        job_id = jadopt.parse_job_id(job_id)
        with self._pickup_lock:
            now = self._clock()
            job, rewrite = jadopt.read_for_pickup(self._table, self.storage, job_id, now)
            if not job.is_finalized():
                self._check_accepting(True, 1)
            with self._lock:
                bump = self._table.reserve_existing(job_id)
            try:
                # adopted means durable here and on a quorum, like a new job
                # (doc/design/replication.md, Invariant 1): the file is
                # written (and replicated) even when unchanged
                self.storage.write_jobs([(job_id, self._encode(job))], serial=bump, quorum=True)
            except errors.JobQueueQuorumError as exc:
                raise errors.JobQueueQuorumError(
                    f"Job {job_id} not picked up: {exc}; its file stays, pick it up"
                    " again") from exc
            finally:
                with self._lock:
                    self._table.unreserve([job_id])
            with self._lock:
                if job.is_finalized():
                    self._table.add_finished(job, now)
                else:
                    self._table.add_live(job)
                    self._push(job)
                jnotify.job_submitted(self.events, job, source="pickup")
                self._changed.notify_all()
                self.archiver.submitted()
        logger.info("Picked up job %s (%s%s)", job_id, job.status(),
                    ", serial raised" if bump else "")

    # scheduling --------------------------------------------------------------
    def _push(self, job: QueuedJob) -> None:
        """Make ``job`` runnable (lock held)."""
        if job.id in self._owned:
            self._repush.add(job.id)
            return
        self.filter_gate.unhold(job.id)
        self._queued.add(job.id)
        heapq.heappush(self._heap, (job.priority(), job.id))
        self._work.notify()

    def _worker(self) -> None:
        while True:
            with self._lock:
                job = None
                rejected: jfilters.FilterRule | Literal[False] | None = None
                while job is None:
                    if self._stopping:
                        return
                    while self._heap:
                        prio, job_id = heapq.heappop(self._heap)
                        cand = self._table.live(job_id)
                        if cand is None or job_id not in self._queued or prio != cand.priority():
                            continue
                        self._queued.discard(job_id)
                        rejected = self._filter(cand)
                        if rejected is False:
                            continue            # held back by a filter rule
                        self._owned.add(job_id)
                        job = cand
                        break
                    if job is None:
                        self._work.wait()
            try:
                if isinstance(rejected, jfilters.FilterRule):
                    self._finalize(job, functools.partial(
                        self._cancel_from, idx=0, msg=jfilters.rejection_message(rejected)))
                else:
                    self._run_job(job)
            except Exception:  # a worker must survive anything
                logger.exception("Unexpected error while running job %s", job.id)
            finally:
                with self._lock:
                    self._owned.discard(job.id)
                    if job.id in self._repush:
                        self._repush.discard(job.id)
                        if self._table.live(job.id) is not None:
                            self._push(job)

    def _encode(self, job: QueuedJob) -> bytes:
        return serializer.dumps_bytes(job_to_disk(job))

    def _write_lock(self, job: QueuedJob) -> threading.Lock:
        """The lock ordering the writes of live job ``job`` (take it before
        the table lock; after taking it, check the job is still live)."""
        with self._lock:
            lock = self._write_locks.get(job.id)
            if lock is None:
                lock = self._write_locks[job.id] = threading.Lock()
            return lock

    def _commit(self, job: QueuedJob, change: _Change, *, retry: bool = True,
                start: bool = False, after: Callable[[QueuedJob], None] | None = None,
                urgent: bool = False) -> bool:
        """Change live job ``job`` durably, then show it; True when written.

        Under the job's write lock: ``change`` is applied to a copy (it
        returns False for "nothing to do", or raises), the copy is written
        (``retry``: see :meth:`JobStorage.write_jobs`; a failure raises
        :class:`errors.JobQueueError`, nothing shown), then its state is
        applied to ``job`` and ``after(job)`` runs, under the table lock.
        ``start`` sets a missing start time (a worker took the job).
        """
        with self._write_lock(job):
            with self._lock:
                if self._table.live(job.id) is not job:
                    self._write_locks.pop(job.id, None)
                    return False          # finished meanwhile: nothing to change
                new = copy_job(job)
                if start and new.start_timestamp is None:
                    new.start_timestamp = split_time(self._clock())
                prios = [op.priority for op in new.ops]
                if change(new) is False:
                    return False
                data = self._encode(new)
            self.storage.write_jobs([(job.id, data)], retry=retry, urgent=urgent)
            with self._lock:
                old_opstatus = [op.status for op in job.ops]
                for live, done, prio in zip(job.ops, new.ops, prios):
                    live.status, live.result = done.status, done.result
                    if done.priority != prio:   # else keep an escalation made meanwhile
                        live.priority = done.priority
                    live.start_timestamp = done.start_timestamp
                    live.exec_timestamp = done.exec_timestamp
                    live.end_timestamp = done.end_timestamp
                if self.metrics is not None and job.start_timestamp is None \
                        and new.start_timestamp is not None:
                    self.metrics.job_started(job.received_timestamp, new.start_timestamp)
                job.start_timestamp, job.end_timestamp = new.start_timestamp, new.end_timestamp
                if after is not None:
                    after(job)
                jnotify.job_changed(self.events, job, old_opstatus)
                self._changed.notify_all()
            return True

    def _run_job(self, job: QueuedJob) -> None:
        """Run the job's opcodes in order until it ends or must wait."""
        for idx, qop in enumerate(job.ops):
            if qop.status == constants.OP_STATUS_SUCCESS:
                continue
            with self._lock:
                if self._stopping:
                    return
                canceling = qop.status == constants.OP_STATUS_CANCELING
            if canceling:
                self._finalize(job, lambda j: self._cancel_from(j, idx))
                return
            outcome = self._check_dependencies(job, idx)
            if outcome is None:     # waiting; woken when the dependency ends
                with self._lock:
                    self._release_slot(job.id)
                return
            if outcome is not True:
                self._finalize(job, outcome)
                return
            # No "waiting" write here: the processor reports a lock wait
            # (notify_waiting) only when its locks are not free at once, so
            # an opcode that gets its locks goes straight from "queued" to
            # "running" in one durable commit.
            if not self._execute(job, idx):
                return

    def _check_dependencies(self, job: QueuedJob, idx: int) -> Literal[True] | _Finalizer | None:
        """Evaluate the opcode's dependencies.

        Returns True to go on, None when the job must wait, or a function
        finalizing the job (canceled or failed).
        """
        qop = job.ops[idx]
        for dep_id, wanted in qop.input.get("depends") or []:
            with self._lock:
                if qop.status == constants.OP_STATUS_CANCELING:
                    # canceled since _run_job looked: never hide that behind "waiting"
                    return lambda j: self._cancel_from(j, idx)
                cycle_msg = self._cycle_failed.pop(job.id, None)
                if cycle_msg is not None:
                    return functools.partial(self._fail_from, idx=idx,
                                             exc=errors.OpExecError(cycle_msg))
                status = self._table.status_of(dep_id)
                result, msg = jdeps.evaluate(job.id, dep_id, wanted, status)
                if result == jdeps.DEP_WAIT:
                    # registered under the lock: a finishing dependency cannot slip by
                    # (it pushes the job again, see _retire and _push)
                    cycle = self.deps.add_waiter_or_cycle(dep_id, job.id, wanted)
                    if cycle is not None:
                        result, msg = jdeps.DEP_ERROR, jdeps.cycle_message(cycle)
                        self._fail_cycle(cycle[1:-1], msg)
            if result == jdeps.DEP_WAIT:
                logger.debug("Job %s: %s", job.id, msg)
                canceled: list[bool] = []

                def wait(j: QueuedJob) -> bool:
                    op = j.ops[idx]
                    if op.status == constants.OP_STATUS_CANCELING:
                        canceled.append(True)     # a cancel came meanwhile: it wins
                        return False
                    if op.status == constants.OP_STATUS_WAITING:
                        return False
                    set_op_status(op, constants.OP_STATUS_WAITING)
                    return True

                self._commit(job, wait, start=True)
                if canceled:
                    return lambda j: self._cancel_from(j, idx)
                return None
            if result == jdeps.DEP_CONTINUE:
                continue
            if result == jdeps.DEP_CANCEL:
                return functools.partial(self._cancel_from, idx=idx, msg=msg)
            return functools.partial(self._fail_from, idx=idx, exc=errors.OpExecError(msg))
        return True

    def _fail_cycle(self, others: list[int], msg: str) -> None:
        """(lock held) Wake the other jobs of a dependency cycle to fail with ``msg``."""
        logger.warning("%s: failing them", msg)
        for other in others:
            self._cycle_failed[other] = msg
            self.deps.remove_job(other)
            wjob = self._table.live(other)
            if wjob is not None:
                self._push(wjob)

    def _clean(self, value: Any) -> Any:
        """``value`` as recorded in a job: JSON data without any secret value.

        The one place every opcode result, error and log message of a job
        passes through before it is kept (in memory, in its file, in answers).
        """
        return self.redactor.scrub_data(jsonable(value))

    def _cancel_from(self, job: QueuedJob, idx: int, msg: str = MSG_CANCELED) -> None:
        job.finalize_ops(idx, constants.OP_STATUS_CANCELED, self._clean(msg), self._clock())

    def _fail_from(self, job: QueuedJob, idx: int, exc: BaseException) -> None:
        now = self._clock()
        job.finalize_ops(idx + 1, constants.OP_STATUS_ERROR,
                         errors.encode_exception(errors.OpExecError(MSG_PREV_FAILED)), now)
        failed = job.ops[idx]
        set_op_status(failed, constants.OP_STATUS_ERROR)
        failed.result = self._clean(errors.encode_exception(exc))
        failed.end_timestamp = split_time(now)

    def _finalize(self, job: QueuedJob, change: _Finalizer) -> None:
        """Make the job final: ``change`` is applied to a copy, written
        durably, and only then shown (so nobody sees an undurable end).

        A failed write is retried until it succeeds; if the storage closes
        first (shutdown), the job stays live as it is on disk."""
        self.redactor.scrub("")   # a new pattern is compiled here, not under the queue lock
        try:
            self._commit(job, change, start=True, after=self._retire)
        except errors.JobQueueError:
            logger.exception("Cannot write the final state of job %s", job.id)

    def _execute(self, job: QueuedJob, idx: int) -> bool:
        """Run opcode ``idx``; True when the job goes on with the next one."""
        qop = job.ops[idx]
        cbs = OpCallbacks(self, job, idx)
        thread = threading.current_thread()
        old_name, thread.name = thread.name, f"job/{job.id}"
        with self._lock:
            self._running[job.id] = cbs
        try:
            op = qop.get_op()
            result = self._factory().execute_opcode(op, cbs)
        except Exception as exc:
            with self._lock:
                canceled = qop.status == constants.OP_STATUS_CANCELING
            if canceled:
                self._finalize(job, lambda j: self._cancel_from(j, idx))
                return False
            if isinstance(exc, errors.GanetiError):
                logger.info("Job %s opcode %s failed: %s", job.id, idx, exc)
            else:
                logger.exception("Job %s opcode %s failed unexpectedly", job.id, idx)
            self._finalize(job, functools.partial(self._fail_from, idx=idx, exc=exc))
            return False
        finally:
            with self._lock:
                self._running.pop(job.id, None)
            thread.name = old_name
        result = self._clean(result)
        last = idx == len(job.ops) - 1

        def succeed(j: QueuedJob) -> None:
            op = j.ops[idx]
            set_op_status(op, constants.OP_STATUS_SUCCESS)
            op.result = result
            op.end_timestamp = split_time(self._clock())
            if op.exec_timestamp is None:
                op.exec_timestamp = op.start_timestamp
            if last:
                j.end_timestamp = op.end_timestamp

        if last:
            self._finalize(job, succeed)
            return False
        self._commit(job, succeed)
        return True

    # processor callbacks (through OpCallbacks) --------------------------------
    def report_op_status(self, job: QueuedJob, idx: int, status: str) -> None:
        """Move opcode ``idx`` of a job being run to ``waiting`` or ``running``,
        durably first.

        The change is written from a copy and only then applied to the job,
        so nobody sees a state that is not on disk.  Raises
        :class:`errors.OpExecError` when the job is being canceled (also
        when the cancel came while the write was in flight),
        :class:`errors.ProgrammerError` for another status.
        """
        if status not in (constants.OP_STATUS_WAITING, constants.OP_STATUS_RUNNING):
            raise errors.ProgrammerError(f"A running opcode cannot report status {status!r}")

        def report(j: QueuedJob) -> None:
            op = j.ops[idx]
            if op.status == constants.OP_STATUS_CANCELING:
                raise errors.OpExecError(MSG_CANCELED)
            now = split_time(self._clock())
            set_op_status(op, status)
            if op.start_timestamp is None:
                op.start_timestamp = now
            if status == constants.OP_STATUS_RUNNING:
                op.exec_timestamp = now

        # the write lock keeps a cancel from coming between the check and the write;
        # a job's first move out of "queued" is replicated at once (not held,
        # doc/design/replication.md, "Held updates"): a later master must not
        # find a started job still queued and run it again
        self._commit(job, report, start=True, urgent=job.start_timestamp is None)

    def add_op_log(self, job: QueuedJob, idx: int, log_type: str, msg: Any) -> None:
        """Append a log entry to opcode ``idx`` of a job being run; written lazily
        (in order with the job's state writes, retried if the write fails)."""
        clean = self._clean(msg)      # outside the locks: it may compile a pattern
        with self._write_lock(job):
            with self._lock:
                entry = job.add_log(self._clock(), log_type, clean, idx)
                jnotify.log_added(self.events, job, idx, entry)
                data = self._encode(job)
                self._changed.notify_all()
            self.storage.write_jobs([(job.id, data)], wait=False)

    def _retire(self, job: QueuedJob) -> None:
        """(lock held) the job is final and durable."""
        self._table.add_finished(job, self._clock())
        if self.metrics is not None:
            self.metrics.job_finished(job.received_timestamp, job.end_timestamp, job.status())
        self._write_locks.pop(job.id, None)   # a late taker finds the job not live
        self.redactor.release(self._held_secrets.pop(job.id, ()))
        self._queued.discard(job.id)
        self._release_slot(job.id)
        self._cycle_failed.pop(job.id, None)
        self.deps.remove_job(job.id)
        for waiter in self.deps.job_finished(job.id):
            wjob = self._table.live(waiter)
            if wjob is not None:
                self._push(wjob)
        self._changed.notify_all()

    # lookups -----------------------------------------------------------------
    def job_ids(self) -> list[int]:
        """Ids of all unarchived jobs, sorted."""
        return jlookup.job_ids(self._table)

    def get_archived_jobs(self, exclude: Collection[int] = ()) -> list[QueuedJob]:
        """Snapshots of all archived jobs but ``exclude``, sorted; reads the whole
        archive (without the queue lock): only for listings asking for them."""
        return jarchive.read_archived_jobs(self.storage, exclude)

    def get_archived_summaries(self, exclude: Collection[int] = ()) -> list[Any]:
        """Summaries of all archived jobs but ``exclude``, sorted, from memory
        (:class:`ganeti.jqueue.archive.ArchiveIndex`; without the queue lock)."""
        return self._archive_index.summaries(self.storage, exclude)

    def get_jobs(self, job_ids: list[int] | None) -> list[QueuedJob | None]:
        """Snapshots of jobs (:func:`ganeti.jqueue.lookup.get_jobs`)."""
        return jlookup.get_jobs(self._table, job_ids)

    def get_summaries(self, job_ids: list[Any] | None) -> list[Any]:
        """Summaries of jobs, from memory (:func:`ganeti.jqueue.lookup.get_summaries`)."""
        return jlookup.get_summaries(self._table, job_ids)

    def query_jobs(self, job_ids: list[Any] | None, fields: list[str]) -> list[list[Any] | None]:
        """LUXI QueryJobs (:func:`ganeti.jqueue.lookup.query_jobs`)."""
        return jlookup.query_jobs(self._table, job_ids, fields)

    def wait_for_job_change(self, job_id: Any, fields: list[str], prev_job_info: Any,
                            prev_log_serial: Any, timeout: float) -> Any:
        """Block until the job's fields or log change, or ``timeout`` passes
        (:func:`ganeti.jqueue.lookup.wait_for_job_change`)."""
        return jlookup.wait_for_job_change(self._table, job_id, fields, prev_job_info,
                                           prev_log_serial, timeout, monotonic=self._mono,
                                           stopping=lambda: self._stopping)

    def get_lock_info(self) -> list[dict[str, Any]]:
        """Lock-monitor provider: dependency waits as pseudo-locks."""
        return self.deps.get_lock_info()
