"""Jobs adopted from the queue directory: at start-up and by ``PickupJob``.

:func:`load_jobs` reads the unarchived jobs when the master starts;
:func:`pickup_job` (LUXI ``PickupJob``) adopts one job file written into
the queue directory by another process.  Both work on the internals of
:class:`~ganeti.jqueue.queue.JobQueue` (they are part of the queue, kept
apart only for size); the pure parts are in :mod:`ganeti.jqueue.job`
(:func:`~ganeti.jqueue.job.recover_job`,
:func:`~ganeti.jqueue.job.job_for_pickup`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ganeti import constants, errors, serializer
from ganeti.jqueue.job import JobStub, QueuedJob, calc_status, job_for_pickup, job_from_disk, recover_job

if TYPE_CHECKING:
    from ganeti.jqueue.queue import JobQueue

__all__ = ["load_jobs", "pickup_job", "parse_job_id"]

logger = logging.getLogger(__name__)


def load_jobs(queue: JobQueue) -> None:
    """Load the unarchived jobs into ``queue`` (see :meth:`JobQueue.load`)."""
    rewrite: list[QueuedJob] = []
    now = queue._clock()
    for job_id in queue.storage.list_job_ids():
        queue.storage.note_existing_id(job_id)
        raw = queue.storage.read_job(job_id)
        if raw is None:
            continue
        try:
            data = serializer.loads(raw)
            statuses = [op["status"] for op in data["ops"]]
            status = calc_status(statuses)
            if status in constants.JOBS_FINALIZED:
                end = data.get("end_timestamp")
                queue._stubs[job_id] = JobStub(status, end[0] if end else None)
                continue
            job = job_from_disk(data)
            if job.id != job_id:
                raise errors.JobFileCorrupted(f"file job-{job_id} holds job {job.id}")
        except (errors.GanetiError, KeyError, TypeError, IndexError) as exc:
            logger.error("Skipping corrupt job file job-%s: %s", job_id, exc)
            queue.corrupt_ids.append(job_id)
            continue
        if recover_job(job, now):
            rewrite.append(job)
        if job.is_finalized():
            queue._stubs[job_id] = JobStub(job.status(), now)
        else:
            queue._jobs[job_id] = job
    if rewrite:
        queue.storage.write_jobs([(j.id, queue._encode(j)) for j in rewrite])
    with queue._lock:
        for job in queue._jobs.values():
            queue._push(job)
    logger.info("Loaded %d unfinished and %d finished jobs (%d corrupt)",
                len(queue._jobs), len(queue._stubs), len(queue.corrupt_ids))


def pickup_job(queue: JobQueue, job_id: Any) -> None:
    """Adopt ``queue/job-<job_id>``, written there by another process.

    Refused, changing nothing: an id the queue knows (unarchived,
    archived, or being submitted) with :class:`errors.JobQueueError`;
    a missing file with :class:`errors.JobLost`; a corrupt file or
    invalid opcodes with :class:`errors.JobFileCorrupted`; a bad id
    with :class:`errors.ParameterError`.

    An id above the queue serial is accepted and the serial raised to
    it, durably and before the job is registered, so ids never repeat.
    A queued or waiting job is then scheduled like one loaded at
    start-up (a running one is failed, a canceling one canceled, see
    :meth:`JobQueue.load`), its opcodes get a ``gnt:daemon:masterd:pickup``
    reason; a finished job is only registered.
    """
    job_id = parse_job_id(job_id)
    with queue._pickup_lock:
        queue._check_unknown(job_id)
        raw = queue.storage.read_job(job_id)
        if raw is None:
            raise errors.JobLost(f"Job {job_id}: no file job-{job_id} in the queue directory")
        now = queue._clock()
        job = job_for_pickup(job_id, raw, now)
        rewrite = recover_job(job, now)
        finished = job.is_finalized()
        if not finished:
            queue._check_accepting(True, 1)
            rewrite = True  # the pickup reason
        bump = queue._reserve_existing(job_id)
        try:
            if rewrite or bump:
                data = [(job_id, queue._encode(job))] if rewrite else []
                queue.storage.write_jobs(data, serial=bump)
        finally:
            queue._unreserve(job_id)
        queue._register_adopted(job, now)
    logger.info("Picked up job %s (%s%s)", job_id, job.status(),
                ", serial raised" if bump else "")


def parse_job_id(job_id: Any) -> int:
    """A positive job id from an int or a decimal string."""
    if isinstance(job_id, str) and job_id.isdigit():
        job_id = int(job_id)
    if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id < 1:
        raise errors.ParameterError(f"Invalid job id {job_id!r}", errors.ECODE_INVAL)
    return job_id
