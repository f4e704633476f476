"""Reading the job archive: ``queue/archive/<id // 10000>/job-<id>``.

Archived job files never change once moved there, so they are read
without the queue lock.  Only listings that ask for archived jobs
(``gnt-job list --archived``, a ``job`` query without the
``["!", ["?", "archived"]]`` conjunct) come here; the plain job list never
scans the archive.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection

from ganeti import errors, serializer
from ganeti.jqueue.job import QueuedJob, job_from_disk
from ganeti.jqueue.storage import JobStorage

__all__ = ["list_archived_ids", "read_archived_jobs"]

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
        raw = storage.read_archived_job(job_id)
        if raw is None:
            continue
        try:
            job = job_from_disk(serializer.loads(raw))
        except errors.GanetiError as exc:
            logger.error("Skipping corrupt archived job file of job %s: %s", job_id, exc)
            continue
        job.archived = True
        jobs.append(job)
    return jobs
