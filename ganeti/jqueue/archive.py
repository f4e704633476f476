"""The job archive: ``queue/archive/<id // 10000>/job-<id>``.

Archiving (:func:`archive_job`, :func:`auto_archive`) moves finished job
files there and forgets them in the :class:`~ganeti.jqueue.table.JobTable`.

Archived job files never change once moved there, so they are read
without the queue lock.  Only listings that ask for archived jobs
(``gnt-job list --archived``, a ``job`` query without the
``["!", ["?", "archived"]]`` conjunct) come here; the plain job list never
scans the archive.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection
from typing import Any

from ganeti import errors, serializer
from ganeti.jqueue.job import QueuedJob, job_from_disk
from ganeti.jqueue.storage import JobStorage
from ganeti.jqueue.table import JobTable

__all__ = ["list_archived_ids", "read_archived_jobs", "archive_locked", "archive_job",
           "auto_archive"]

#: Finished jobs archived per hold of the table lock by :func:`auto_archive`.
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


def read_archived_jobs(storage: JobStorage, exclude: Collection[int] = ()) -> list[QueuedJob]:
    """All archived jobs except the ids in ``exclude``, sorted by id.

    Each job has ``archived`` set.  Unreadable or corrupt files are logged
    and skipped (never changed).
    """
    jobs: list[QueuedJob] = []
    for job_id in list_archived_ids(storage.archive_dir):
        if job_id in exclude:
            continue
        try:
            raw = storage.read_archived_job(job_id)
            if raw is None:
                continue
            job = job_from_disk(serializer.loads(raw))
        except errors.GanetiError as exc:
            logger.error("Skipping corrupt archived job file of job %s: %s", job_id, exc)
            continue
        job.archived = True
        jobs.append(job)
    return jobs


def archive_locked(table: JobTable, storage: JobStorage, ids: list[int]) -> int:
    """(table lock held) archive finished jobs ``ids``; how many moved."""
    moved = storage.archive_jobs(ids)
    table.remove_archived(moved)
    if moved:
        table.changed.notify_all()
    return len(moved)


def archive_job(table: JobTable, storage: JobStorage, job_id: Any) -> bool:
    """(table lock held) archive one finished job; False when unknown or unfinished."""
    job = table.get(job_id, archived=False)
    if job is None or not job.is_finalized() or table.stub(job.id) is None:
        return False
    return archive_locked(table, storage, [job.id]) == 1


def auto_archive(table: JobTable, storage: JobStorage, age: Any, timeout: Any, *,
                 now: float, monotonic: Callable[[], float]) -> list[int]:
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
            archived += archive_locked(table, storage, todo)
        left -= len(chunk)
    return [archived, left]
