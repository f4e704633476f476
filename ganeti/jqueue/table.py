"""The job table: every job a queue knows, by id, under one lock.

:class:`JobTable` holds

* *live* jobs: submitted, loaded or adopted and not finished yet (a job
  stays live while its final state is being written);
* *finished*, unarchived jobs as :class:`~ganeti.jqueue.summary.JobSummary`
  (status, end time and the other list-query fields), with a small cache
  of whole jobs; a finished job not in the cache is read back from
  ``queue/job-<id>`` on demand;
* *reserved* ids: allocated, or found on disk by ``PickupJob``, whose job is
  not registered yet (so no other job can take them meanwhile);
* *corrupt* ids: job files found unreadable (left alone on disk).

Archived jobs are not in the table; lookups asked to may read them from
the archive.

**Locking.**  :attr:`JobTable.lock` guards the table, and also the
scheduling state of :class:`~ganeti.jqueue.queue.JobQueue`, which must
change together with it.  Every method expects the caller to hold it and
never takes it, so that a caller can make several steps in one hold.
:attr:`JobTable.changed` (a condition on that lock) is notified by whoever
changed a job, after the change; waiters of ``WaitForJobChange`` sleep on
it.

**Memory only.**  The table never writes: making a change durable is the
caller's step, taken before the change is registered here (a job is
written before :meth:`JobTable.add_live`, its final state before
:meth:`JobTable.add_finished`).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterable
from typing import Any

from ganeti import errors, serializer
from ganeti.jqueue.job import JobStub, QueuedJob, job_from_disk
from ganeti.jqueue.storage import JobStorage
from ganeti.jqueue.summary import JobSummary, summarize

__all__ = ["JobTable", "CACHE_SIZE"]

logger = logging.getLogger(__name__)

#: How many finished jobs are kept whole in memory (least recently used first out).
CACHE_SIZE = 512


class JobTable:
    """The live, finished, reserved and corrupt job ids of one queue.

    ``storage`` is only read (finished and archived job files) and asked
    for new ids; see the module docstring for locking.
    """

    def __init__(self, storage: JobStorage, cache_size: int = CACHE_SIZE) -> None:
        self.lock: threading.Lock = threading.Lock()
        self.changed: threading.Condition = threading.Condition(self.lock)
        self._storage = storage
        self._cache_size = cache_size
        self._live: dict[int, QueuedJob] = {}
        self._stubs: dict[int, JobStub | JobSummary] = {}
        self._unindexed: list[int] = []   # finished, summary not in the index file yet
        self._cache: collections.OrderedDict[int, QueuedJob] = collections.OrderedDict()
        self._reserved: set[int] = set()
        self._corrupt: list[int] = []

    # lookups -----------------------------------------------------------------
    def live(self, job_id: int) -> QueuedJob | None:
        """The live (unfinished) job ``job_id``, or None."""
        return self._live.get(job_id)

    def live_jobs(self) -> list[QueuedJob]:
        """All live jobs, in the order they were registered."""
        return list(self._live.values())

    def live_count(self) -> int:
        """How many jobs are live."""
        return len(self._live)

    def size(self) -> int:
        """How many jobs are unarchived, live and finished (the queue's size limits count these)."""
        return len(self._live) + len(self._stubs)

    def stub(self, job_id: int) -> JobStub | JobSummary | None:
        """The stub of finished, unarchived job ``job_id``, or None."""
        return self._stubs.get(job_id)

    def finished_ids(self) -> list[int]:
        """Ids of the finished, unarchived jobs, sorted."""
        return sorted(self._stubs)

    def ids(self) -> list[int]:
        """Ids of all unarchived jobs (live and finished), sorted."""
        return sorted(set(self._live) | set(self._stubs))

    def corrupt_ids(self) -> list[int]:
        """Ids of job files found unreadable, in the order found."""
        return list(self._corrupt)

    def knows(self, job_id: int) -> bool:
        """True when ``job_id`` is live, finished (unarchived) or reserved."""
        return job_id in self._live or job_id in self._stubs or job_id in self._reserved

    def get(self, job_id: Any, archived: bool = True) -> QueuedJob | None:
        """Job ``job_id`` (an int or a decimal string), or None when unknown.

        A live job is the object the queue changes (copy it before letting
        go of the lock); a finished one comes from the cache or its file,
        and from the archive too when ``archived`` (marked ``archived``,
        never cached).  An unreadable file is logged and answers None.
        """
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            try:
                job_id = int(job_id)
            except (TypeError, ValueError):
                return None
        job = self._live.get(job_id)
        if job is not None:
            return job
        return self._load_finished(job_id, archived)

    def summary(self, job_id: Any) -> JobSummary | QueuedJob | None:
        """The list-query view of job ``job_id`` (an int or a decimal string).

        A live job is summarized as shown now (a durable state); a finished
        one answers its kept summary (read from its file once when it only
        had a stub); an archived one is read whole from the archive.  None
        when unknown.
        """
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            try:
                job_id = int(job_id)
            except (TypeError, ValueError):
                return None
        job = self._live.get(job_id)
        if job is not None:
            return summarize(job)
        stub = self._stubs.get(job_id)
        if isinstance(stub, JobSummary):
            return stub
        full = self._load_finished(job_id, archived=True)
        if full is not None and stub is not None:
            summ = self._stubs[job_id] = summarize(full)
            return summ
        return full

    def finished_view(self, job_id: Any) -> JobSummary | QueuedJob | None:
        """Like :meth:`summary`, but a live job is the job itself (read it
        under the lock): for fields a summary holds, without making one."""
        job = self.live(job_id) if isinstance(job_id, int) else None
        return job if job is not None else self.summary(job_id)

    def summaries(self) -> dict[int, JobSummary]:
        """The summaries of the finished jobs that have one (for the index)."""
        return {i: s for i, s in self._stubs.items() if isinstance(s, JobSummary)}

    def status_counts(self) -> dict[str, int]:
        """How many unarchived jobs have each status (statuses without jobs: absent)."""
        counts: dict[str, int] = {}
        for job in self._live.values():
            status = job.status()
            counts[status] = counts.get(status, 0) + 1
        for stub in self._stubs.values():
            counts[stub.status] = counts.get(stub.status, 0) + 1
        return counts

    def take_unindexed(self) -> list[tuple[int, JobSummary]]:
        """Finished jobs whose summaries are not in the index file yet (then forgotten)."""
        taken, self._unindexed = self._unindexed, []
        out = []
        for job_id in taken:
            stub = self._stubs.get(job_id)
            if isinstance(stub, JobSummary):
                out.append((job_id, stub))
        return out

    def status_of(self, job_id: int) -> str | None:
        """Status of any job, the archive included; None when unknown."""
        job = self._live.get(job_id)
        if job is not None:
            return job.status()
        stub = self._stubs.get(job_id)
        if stub is not None:
            return stub.status
        job = self._load_finished(job_id, archived=True)
        return job.status() if job is not None else None

    def _load_finished(self, job_id: int, archived: bool) -> QueuedJob | None:
        job = self._cache.get(job_id)
        if job is not None:
            return job
        try:
            raw = self._storage.read_job(job_id) if job_id in self._stubs else None
            is_archived = False
            if raw is None and archived:
                raw = self._storage.read_archived_job(job_id)
                is_archived = raw is not None
        except (errors.UntrustedFileError, OSError) as exc:
            logger.error("Cannot read job %s: %s", job_id, exc)
            return None
        if raw is None:
            return None
        try:
            job = job_from_disk(serializer.loads(raw))
        except errors.GanetiError as exc:
            logger.error("Cannot read job %s: %s", job_id, exc)
            return None
        job.archived = is_archived
        if not is_archived:
            self._cache_put(job)
        return job

    def _cache_put(self, job: QueuedJob) -> None:
        self._cache[job.id] = job
        self._cache.move_to_end(job.id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # ids -----------------------------------------------------------------------
    def allocate(self, count: int) -> list[int]:
        """``count`` new job ids from the storage serial, reserved until
        registered (or :meth:`unreserve`)."""
        ids = self._storage.allocate_ids(count)
        self._reserved.update(ids)
        return ids

    def reserve_existing(self, job_id: int) -> bool:
        """Reserve an id found on disk, raising the storage serial to it.

        True when the serial was raised (it must then be written).  Raises
        :class:`errors.JobQueueError` when the id is already known.
        """
        if self.knows(job_id):
            raise errors.JobQueueError(f"Job {job_id} is already known to the queue")
        bump = job_id > self._storage.last_id
        self._storage.note_existing_id(job_id)
        self._reserved.add(job_id)
        return bump

    def unreserve(self, job_ids: Iterable[int]) -> None:
        """Forget reservations (ids of jobs never registered stay unused)."""
        self._reserved.difference_update(job_ids)

    # changes -------------------------------------------------------------------
    def add_live(self, job: QueuedJob) -> None:
        """Register an unfinished, durable job (its reservation ends)."""
        self._reserved.discard(job.id)
        self._forget_corrupt(job.id)
        self._live[job.id] = job

    def add_finished(self, job: QueuedJob, now: float) -> None:
        """Register a finished, durable job: a live job that ended, or one
        adopted from disk.

        Its summary is made now (the final state is durable); its end time
        is the job's (``now`` when it has none).  The whole job goes into
        the cache; the summary waits for :meth:`take_unindexed`.
        """
        self._live.pop(job.id, None)
        self._forget_corrupt(job.id)
        summ = summarize(job)
        if summ.end_ts is None:
            summ.fallback_end = now    # for the archive's age only, never shown
        self._stubs[job.id] = summ
        self._unindexed.append(job.id)
        self._cache_put(job)

    def add_stub(self, job_id: int, stub: JobStub | JobSummary, *, index: bool = False) -> None:
        """Register a finished job by its stub or summary only (start-up: the
        file is read on demand); ``index``: the summary is to be indexed."""
        self._stubs[job_id] = stub
        if index:
            self._unindexed.append(job_id)

    def add_corrupt(self, job_id: int) -> None:
        """Note an unreadable job file (registering the job later clears it)."""
        self._corrupt.append(job_id)

    def _forget_corrupt(self, job_id: int) -> None:
        if job_id in self._corrupt:
            self._corrupt.remove(job_id)

    def remove_archived(self, job_ids: Iterable[int]) -> None:
        """Forget finished jobs whose files were moved to the archive."""
        for job_id in job_ids:
            self._stubs.pop(job_id, None)
            self._cache.pop(job_id, None)
