"""Reading job files this process did not write: at start-up and for ``PickupJob``.

:func:`read_queue_dir` reads the unarchived jobs when the master starts;
:func:`read_for_pickup` (LUXI ``PickupJob``) reads and checks one job file
written into the queue directory by another process.  Both only read:
they return the jobs, recovered (:func:`~ganeti.jqueue.job.recover_job`)
and marked for rewriting where needed, and
:class:`~ganeti.jqueue.queue.JobQueue` writes and registers them in its
:class:`~ganeti.jqueue.table.JobTable`.

The queue directory is not trusted: a job file is opened without
following symbolic links (``O_NOFOLLOW``) and must be a regular file
whose content names the id of its file name.  An entry ``job-<id>`` that
is not (a symbolic link, a directory, a job file of another id) is moved
to ``queue/quarantine/`` (:func:`quarantine`) with one log line, and the
master starts anyway (doc/protocols/jobs.md, "Quarantine").  Files that
cannot be parsed stay where they are, noted as corrupt.  The reads go
through :meth:`JobStorage.read_job`, which never follows a link either.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from ganeti import errors, serializer
from ganeti.jqueue import summary as jsummary
from ganeti.jqueue.job import QueuedJob, job_for_pickup, job_from_disk, recover_job
from ganeti.jqueue.summary import JobSummary
from ganeti.jqueue.storage import JobStorage
from ganeti.jqueue.table import JobTable

__all__ = ["LoadedJobs", "read_queue_dir", "read_for_pickup", "parse_job_id",
           "read_job_file", "quarantine", "QUARANTINE_DIR", "UntrustedEntry"]

#: Where untrusted ``job-<id>`` entries go, inside the queue directory.
QUARANTINE_DIR = "quarantine"

logger = logging.getLogger(__name__)


@dataclass
class LoadedJobs:
    """What :func:`read_queue_dir` found in the queue directory."""

    #: Unfinished jobs (recovered), to register and schedule.
    live: list[QueuedJob] = field(default_factory=list)
    #: Finished jobs by id, kept as summaries (their files are read on demand).
    stubs: dict[int, JobSummary] = field(default_factory=dict)
    #: Jobs recovery changed: to write back before they are registered.
    rewrite: list[QueuedJob] = field(default_factory=list)
    #: Ids of unreadable job files (left as they are).
    corrupt: list[int] = field(default_factory=list)
    #: Ids whose entries were moved to the quarantine directory.
    quarantined: list[int] = field(default_factory=list)
    #: The summary index lines valid now (finished jobs whose files were matched or read).
    index: list[tuple[jsummary.FileId, JobSummary]] = field(default_factory=list)
    #: Whether the index on disk differs from :attr:`index` (rewrite it).
    index_stale: bool = False
    #: Finished jobs (ended by recovery) to add to the index once written.
    unindexed: list[int] = field(default_factory=list)


class UntrustedEntry(errors.JobFileCorrupted):
    """A ``job-<id>`` entry that is not a regular file holding job ``<id>``."""


def read_job_file(storage: JobStorage, job_id: int) -> bytes | None:
    """Content of ``queue/job-<job_id>``, or None when there is none.

    Read by :meth:`JobStorage.read_job` (``O_NOFOLLOW``, ``O_NONBLOCK``);
    raises :class:`UntrustedEntry` when the entry is a symbolic link or
    not a regular file.
    """
    try:
        return storage.read_job(job_id)
    except errors.UntrustedFileError as exc:
        raise UntrustedEntry(str(exc.args[0])) from None


def quarantine(storage: JobStorage, job_id: int, why: str) -> str | None:
    """Move the entry ``queue/job-<job_id>`` (a link itself, not its target)
    into ``queue/quarantine/``; one error log line.

    Returns the new path, or None when the entry could not be moved (also
    logged; the caller leaves the id unused either way).
    """
    qdir = os.path.join(storage.queue_dir, QUARANTINE_DIR)
    source = storage.job_path(job_id)
    try:
        os.makedirs(qdir, mode=0o700, exist_ok=True)
        target = os.path.join(qdir, f"job-{job_id}")
        for n in range(1, 1000):
            if not os.path.lexists(target):
                break
            target = os.path.join(qdir, f"job-{job_id}.{n}")
        else:
            raise FileExistsError(f"{qdir} holds too many entries for job-{job_id}")
        os.rename(source, target)
    except OSError as exc:
        logger.error("Untrusted queue entry job-%s (%s) could not be quarantined: %s",
                     job_id, why, exc)
        return None
    logger.error("Quarantined untrusted queue entry job-%s (%s): moved to %s",
                 job_id, why, target)
    return target


def read_queue_dir(storage: JobStorage, now: float) -> LoadedJobs:
    """Read the unarchived jobs (see :meth:`JobQueue.load`).

    Each id found is noted with the storage (ids never repeat).  A running
    opcode becomes ``error`` (the master stopped under it), a canceling one
    ``canceled``, waiting ones ``queued`` again; corrupt files are logged.

    A finished job whose file matches its line in the summary index
    (:mod:`ganeti.jqueue.summary`) is not read: its summary comes from the
    index.  ``index`` of the result lists the lines the index should have
    now, and ``index_stale`` says whether it must be rewritten.
    """
    found = LoadedJobs()
    index, bad = jsummary.read_index(storage.queue_dir)
    found.index_stale = bad > 0
    for job_id in storage.list_job_ids():
        storage.note_existing_id(job_id)
        path = storage.job_path(job_id)
        fid = jsummary.stat_job_file(path)
        entry = index.pop(job_id, None)
        if entry is not None:
            if fid is not None and fid == entry[0]:
                found.stubs[job_id] = entry[1]
                found.index.append(entry)
                continue
            found.index_stale = True
        try:
            raw = read_job_file(storage, job_id)
        except (UntrustedEntry, OSError) as exc:
            quarantine(storage, job_id, str(exc))
            found.quarantined.append(job_id)
            continue
        if raw is None:
            continue
        try:
            data = serializer.loads(raw)
            if isinstance(data, dict) and "id" in data and data["id"] != job_id:
                quarantine(storage, job_id, f"the file holds job {data['id']!r}")
                found.quarantined.append(job_id)
                continue
            job = job_from_disk(data)
            if job.id != job_id:
                raise errors.JobFileCorrupted(f"file job-{job_id} holds job {job.id}")
        except (errors.GanetiError, KeyError, TypeError, IndexError) as exc:
            logger.error("Skipping corrupt job file job-%s: %s", job_id, exc)
            found.corrupt.append(job_id)
            continue
        if job.is_finalized():
            summ = jsummary.summarize(job)
            found.stubs[job_id] = summ
            if fid is not None and fid == jsummary.stat_job_file(path):
                found.index.append((fid, summ))    # unchanged while read: that content
                found.index_stale = True
            continue
        if recover_job(job, now):
            found.rewrite.append(job)
        if job.is_finalized():
            # ended by recovery: the summary is of the state about to be written
            # (it is registered only once written, see JobQueue.load)
            found.stubs[job_id] = jsummary.summarize(job)
            found.unindexed.append(job_id)
        else:
            found.live.append(job)
    if index:
        found.index_stale = True      # lines of jobs archived or gone
    return found


def read_for_pickup(table: JobTable, storage: JobStorage, job_id: int,
                    now: float) -> tuple[QueuedJob, bool]:
    """Read ``queue/job-<job_id>``, written there by another process.

    Returns the job, recovered as at start-up (a running opcode failed, a
    canceling one canceled, waiting ones queued), with a
    ``gnt:daemon:masterd:pickup`` reason on the opcodes still to run, and
    whether it must be written back (recovery changed it, or it still
    runs: the reason).  Takes ``table.lock`` to look the id up.

    Raises :class:`errors.JobQueueError` for an id the queue knows
    (unarchived, archived, or being submitted), :class:`errors.JobLost`
    when the file is missing, :class:`errors.JobFileCorrupted` for a
    corrupt file or invalid opcodes.
    """
    with table.lock:
        known = table.knows(job_id)
    if known:
        raise errors.JobQueueError(f"Job {job_id} is already known to the queue")
    if os.path.exists(storage.archived_path(job_id)):
        raise errors.JobQueueError(f"Job {job_id} is already known to the queue (archived)")
    try:
        raw = read_job_file(storage, job_id)
    except UntrustedEntry as exc:
        quarantine(storage, job_id, str(exc))
        raise errors.JobFileCorrupted(f"Job {job_id}: {exc}; moved to the quarantine"
                                      " directory") from None
    if raw is None:
        raise errors.JobLost(f"Job {job_id}: no file job-{job_id} in the queue directory")
    try:
        data = serializer.loads(raw)
    except errors.GanetiError:
        data = None   # job_for_pickup says why
    if isinstance(data, dict) and "id" in data and data["id"] != job_id:
        why = f"the file holds job {data['id']!r}"
        quarantine(storage, job_id, why)
        raise errors.JobFileCorrupted(f"Job {job_id}: {why}; moved to the quarantine directory")
    job = job_for_pickup(job_id, raw, now)
    rewrite = recover_job(job, now)
    return job, rewrite or not job.is_finalized()


def parse_job_id(job_id: Any) -> int:
    """A positive job id from an int or a decimal string."""
    if isinstance(job_id, str) and job_id.isdigit():
        job_id = int(job_id)
    if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id < 1:
        raise errors.ParameterError(f"Invalid job id {job_id!r}", errors.ECODE_INVAL)
    return job_id
