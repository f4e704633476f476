"""The job archive: ``queue/archive/<id // 10000>/job-<id>``.

Archiving (:func:`archive_job`, :func:`auto_archive`) moves finished job
files there and forgets them in the :class:`~ganeti.jqueue.table.JobTable`.

Archived job files never change once moved there, so they are read
without the queue lock.  Only listings that ask for archived jobs
(``gnt-job list --archived``, a ``job`` query without the
``["!", ["?", "archived"]]`` conjunct) come here; the plain job list never
scans the archive.  Such listings that ask only for summary fields are
answered by an :class:`ArchiveIndex` from memory: it keeps the summary of
every job archived since start-up and reads any other archived file once
(doc/protocols/jobs.md, "Job summaries").
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

from ganeti import errors, serializer
from ganeti.jqueue.job import QueuedJob, job_from_disk
from ganeti.jqueue.storage import JobStorage
from ganeti.jqueue.summary import ArchivedSummary, JobSummary, archived_summary, summarize
from ganeti.jqueue.table import JobTable

__all__ = ["list_archived_ids", "read_archived_jobs", "archive_locked", "archive_job",
           "auto_archive", "make_room", "archive_due", "trim", "ArchiveIndex",
           "BackgroundArchiver"]

#: share of the size limit archived at once when a submission must make room
ARCHIVE_BATCH_SHARE = 0.05

#: seconds without a submission after which the queue, past its soft limit,
#: archives in the background (doc/protocols/jobs.md, "Queue size")
ARCHIVE_IDLE = 0.5

#: seconds before the background archiver looks again when it could archive
#: nothing (every job past the soft limit unfinished, moves failing, the master
#: not allowing it), doubled each time up to :data:`_RETRY_MAX`; and at most
#: between its looks while it waits for submissions to pause
_RETRY = 1.0
_RETRY_MAX = 60.0
#: seconds the background archiver leaves the table lock free between chunks
_PAUSE = 0.005

#: Finished jobs archived per hold of the table lock by :func:`auto_archive`
#: and the background archiver.
_CHUNK = 200

logger = logging.getLogger(__name__)


def list_archived_ids(archive_dir: str) -> list[int]:
    """Ids of all archived job files, sorted (a missing archive is empty)."""
    ids: list[int] = []
    try:
        buckets = [name for name in os.listdir(archive_dir) if name.isdigit()]
    except FileNotFoundError:
        return ids
    for bucket in buckets:
        try:
            names = os.listdir(os.path.join(archive_dir, bucket))
        except (FileNotFoundError, NotADirectoryError):
            continue
        ids.extend(int(name[4:]) for name in names
                   if name.startswith("job-") and name[4:].isdigit())
    ids.sort()
    return ids


def _read_archived(storage: JobStorage, job_id: int) -> QueuedJob | None:
    """Archived job ``job_id`` (``archived`` set), or None when gone or corrupt
    (logged; the file is never changed)."""
    try:
        raw = storage.read_archived_job(job_id)
        if raw is None:
            return None
        job = job_from_disk(serializer.loads(raw))
    except errors.GanetiError as exc:
        logger.error("Skipping corrupt archived job file of job %s: %s", job_id, exc)
        return None
    job.archived = True
    return job


def read_archived_jobs(storage: JobStorage, exclude: Collection[int] = ()) -> list[QueuedJob]:
    """All archived jobs except the ids in ``exclude``, sorted by id.

    Each job has ``archived`` set.  Unreadable or corrupt files are logged
    and skipped (never changed).
    """
    jobs = (_read_archived(storage, job_id)
            for job_id in list_archived_ids(storage.archive_dir) if job_id not in exclude)
    return [job for job in jobs if job is not None]


class ArchiveIndex:
    """Summaries of archived jobs, kept in memory (archived files never change).

    :meth:`add` records the summaries of jobs as they are archived; a
    listing (:meth:`summaries`) lists the archive's directory, reads only the
    files it has no summary of (all of them the first time after start-up,
    none afterwards) and forgets summaries whose files are gone.  Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[int, ArchivedSummary] = {}

    def add(self, entries: Iterable[tuple[int, Any]]) -> None:
        """Record ``(job id, stub)`` of jobs just archived; a stub that is not a
        :class:`JobSummary` is skipped (its file is read by the next listing)."""
        with self._lock:
            for job_id, stub in entries:
                if isinstance(stub, JobSummary):
                    self._known[job_id] = archived_summary(stub)

    def summaries(self, storage: JobStorage,
                  exclude: Collection[int] = ()) -> list[ArchivedSummary]:
        """Summaries of every archived job but ``exclude``, sorted by id."""
        ids = list_archived_ids(storage.archive_dir)
        with self._lock:
            known = self._known
            missing = [job_id for job_id in ids if job_id not in known]
            if len(known) > len(ids) - len(missing):      # files removed meanwhile
                present = set(ids)
                for job_id in [i for i in known if i not in present]:
                    del known[job_id]
        read: dict[int, ArchivedSummary] = {}
        for job_id in missing:          # outside the lock: the first listing reads them all
            job = _read_archived(storage, job_id)
            if job is not None:
                read[job_id] = archived_summary(summarize(job))
        with self._lock:
            self._known.update(read)
            known = self._known
            return [known[job_id] for job_id in ids
                    if job_id not in exclude and job_id in known]


def archive_locked(table: JobTable, storage: JobStorage, ids: list[int],
                   index: ArchiveIndex | None = None) -> int:
    """(table lock held) archive finished jobs ``ids``; how many moved.

    Their summaries go to ``index`` when given."""
    moved = storage.archive_jobs(ids)
    if index is not None:
        index.add((job_id, table.stub(job_id)) for job_id in moved)
    table.remove_archived(moved)
    if moved:
        table.changed.notify_all()
    return len(moved)


def make_room(table: JobTable, storage: JobStorage, count: int, limit: int,
              index: ArchiveIndex | None = None) -> None:
    """(queue lock held) Archive the oldest finished jobs so that ``count``
    more stay within ``limit`` (the hard limit: a submission that finds the
    queue full).

    Past the limit it archives a batch (:data:`ARCHIVE_BATCH_SHARE` of the
    limit, at least what is needed), so that the directory syncs of an
    archive are paid once per batch, not by every submission
    (doc/protocols/jobs.md, "Queue size")."""
    excess = table.size() + count - limit
    if excess <= 0:
        return
    batch = max(excess, int(limit * ARCHIVE_BATCH_SHARE))
    moved = archive_locked(table, storage, table.finished_ids()[:batch], index)
    if moved:
        logger.info("Job queue at its limit of %d jobs: archived the %d oldest"
                    " finished ones", limit, moved)


def archive_due(size: int, soft_limit: int, last_submission: float, now: float,
                idle: float) -> float | None:
    """When the background archiver of a queue of ``size`` unarchived jobs
    should archive: None when within ``soft_limit`` (nothing to do until a
    submission), else the seconds left until the queue has had no submission
    for ``idle`` seconds (0.0: now); times are monotonic seconds."""
    if size <= soft_limit:
        return None
    return max(0.0, last_submission + idle - now)


def trim(table: JobTable, storage: JobStorage, soft_limit: int,
         index: ArchiveIndex | None = None, *, skip: Collection[int] = (),
         chunk: int = _CHUNK) -> tuple[int, list[int]]:
    """(table lock held) One step of the background archiver: archive the
    oldest finished jobs past ``soft_limit`` but ``skip``, at most ``chunk``
    (the lock is held for one chunk at a time).  Returns how many moved
    and the ids whose move failed (logged by the storage)."""
    excess = table.size() - soft_limit
    if excess <= 0:
        return 0, []
    todo = [job_id for job_id in table.finished_ids() if job_id not in skip][:min(excess, chunk)]
    moved = archive_locked(table, storage, todo, index)
    if moved:
        logger.info("Job queue past its soft limit of %d jobs: archived the %d oldest"
                    " finished ones", soft_limit, moved)
    return moved, [job_id for job_id in todo if table.stub(job_id) is not None]


def archive_job(table: JobTable, storage: JobStorage, job_id: Any,
                index: ArchiveIndex | None = None) -> bool:
    """(table lock held) archive one finished job; False when unknown or unfinished."""
    job = table.get(job_id, archived=False)
    if job is None or not job.is_finalized() or table.stub(job.id) is None:
        return False
    return archive_locked(table, storage, [job.id], index) == 1


def auto_archive(table: JobTable, storage: JobStorage, age: Any, timeout: Any, *,
                 now: float, monotonic: Callable[[], float],
                 index: ArchiveIndex | None = None) -> list[int]:
    """Archive finished jobs that ended ``age`` seconds before ``now`` or
    earlier (-1: all); takes the table lock per chunk.

    Stops after ``timeout`` seconds (``monotonic``); returns ``[archived,
    left]`` where ``left`` counts the finished jobs not examined.  Raises
    :class:`errors.ParameterError` unless both are numbers.
    """
    if not isinstance(age, (int, float)) or not isinstance(timeout, (int, float)):
        raise errors.ParameterError("AutoArchiveJobs expects [age, timeout] numbers",
                                    errors.ECODE_INVAL)
    deadline = monotonic() + timeout
    archived = 0
    with table.lock:
        ids = table.finished_ids()
    left = len(ids)
    for start in range(0, len(ids), _CHUNK):
        if monotonic() > deadline:
            break
        chunk = ids[start:start + _CHUNK]
        with table.lock:
            stubs = [(i, table.stub(i)) for i in chunk]
            todo = [i for i, stub in stubs if stub is not None and
                    (age < 0 or (stub.end or 0) <= now - age)]
            archived += archive_locked(table, storage, todo, index)
        left -= len(chunk)
    return [archived, left]


class BackgroundArchiver:
    """The queue's archiver thread (doc/protocols/jobs.md, "Queue size").

    Past ``soft_limit`` unarchived jobs it archives the oldest finished
    ones, :data:`_CHUNK` per hold of the table lock, once the queue has had
    no submission for ``idle`` seconds (``monotonic``); not while job files
    cannot be written, the queue is drained, or :attr:`may_archive` says
    no (the master daemon: not while fenced or drained for a failover).  A
    job whose move failed is passed over until the queue is back within
    the limit (or nothing else is left); when nothing could move it waits
    :data:`_RETRY`, twice as long each time (and then tries one job, not a
    chunk).  The queue tells
    it of each submission (:meth:`submitted`) and stops it with its
    workers (:meth:`stop`).
    """

    def __init__(self, table: JobTable, storage: JobStorage, soft_limit: int,
                 index: ArchiveIndex | None, monotonic: Callable[[], float],
                 idle: float) -> None:
        self._table = table
        self._storage = storage
        self._soft_limit = soft_limit
        self._index = index
        self._mono = monotonic
        self._idle = idle
        #: asked (outside the table lock) before each chunk
        self.may_archive: Callable[[], bool] = lambda: True
        self._wake = threading.Condition(table.lock)
        self._last_submission = -math.inf       # monotonic; none yet
        self._parked = False                    # waits for a submission past the limit
        self._stopping = False

    def start(self) -> threading.Thread:
        """Start the thread; returns it (to join after :meth:`stop`).  A queue
        loaded past its soft limit is archived after the first pause too, not
        amid the master's start-up."""
        with self._table.lock:
            self._last_submission = self._mono()
        thread = threading.Thread(target=self._run, name="jq-archiver", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """(table lock held) End the thread."""
        self._stopping = True
        self._wake.notify_all()

    def submitted(self) -> None:
        """(table lock held) Jobs are being or were just added: wait for the
        next pause from now on; wake the thread if it waits for the queue to
        pass its soft limit and it has."""
        self._last_submission = self._mono()
        if self._parked and self._table.size() > self._soft_limit:
            self._parked = False
            self._wake.notify()

    def _allowed(self) -> bool:
        return (self._storage.write_error is None and not self._storage.is_drained()
                and self.may_archive())

    def _run(self) -> None:
        skip: set[int] = set()       # moves that failed, passed over until back within the limit
        backoff = 0.0                # 0: the last step moved something
        while True:
            allowed = self._allowed()
            with self._table.lock:
                if self._stopping:
                    return
                due = archive_due(self._table.size(), self._soft_limit,
                                  self._last_submission, self._mono(), self._idle)
                if due is None:
                    skip.clear()
                    self._parked = True
                    self._wake.wait()
                    continue
                if due > 0:
                    self._wake.wait(min(due, _RETRY))
                    continue
                moved = 0
                failed: list[int] = []
                if allowed:
                    moved, failed = trim(self._table, self._storage, self._soft_limit,
                                         self._index, skip=skip,
                                         chunk=1 if backoff else _CHUNK)
                    skip.update(failed)
                if not moved:
                    if not failed:   # none left but those that failed: all of them again
                        skip.clear()
                    backoff = min(backoff * 2, _RETRY_MAX) if backoff else _RETRY
                    self._wake.wait(backoff)
                    continue
                backoff = 0.0
            time.sleep(_PAUSE)       # a submission waiting for the lock goes first
