"""Read-side lookups of a job queue: listings, queries, waiting for a change.

These only read the :class:`~ganeti.jqueue.table.JobTable` (taking its
lock themselves) and never write; :class:`~ganeti.jqueue.queue.JobQueue`
delegates its ``job_ids``, ``get_jobs``, ``query_jobs`` and
``wait_for_job_change`` here.  What they answer is always durable: the
queue shows a state in the table only once it is on disk
(doc/protocols/jobs.md, "Full disk").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ganeti import constants, errors, serializer
from ganeti.jqueue.job import QueuedJob, check_fields, copy_job, get_job_field
from ganeti.jqueue.summary import SUMMARY_FIELDS, JobSummary
from ganeti.jqueue.table import JobTable

__all__ = ["job_ids", "get_jobs", "get_summaries", "query_jobs", "wait_for_job_change"]


def job_ids(table: JobTable) -> list[int]:
    """Ids of all unarchived jobs, sorted."""
    with table.lock:
        return table.ids()


def get_jobs(table: JobTable, ids: list[int] | None) -> list[QueuedJob | None]:
    """Snapshots of jobs (None for unknown ids); all unarchived when ``ids`` is None."""
    with table.lock:
        wanted = table.ids() if ids is None else ids
        found = [table.get(i) for i in wanted]
        return [copy_job(j) if j is not None else None for j in found]


def get_summaries(table: JobTable, ids: list[Any] | None) -> list[JobSummary | QueuedJob | None]:
    """List-query views of jobs (None for unknown ids); all unarchived when
    ``ids`` is None.

    Unarchived jobs answer a :class:`~ganeti.jqueue.summary.JobSummary`
    (the fields in :data:`~ganeti.jqueue.summary.SUMMARY_FIELDS`, from
    memory); archived ones named in ``ids`` are read whole.  Both have
    ``get_field``.
    """
    with table.lock:
        wanted = table.ids() if ids is None else ids
        return [table.summary(i) for i in wanted]


def query_jobs(table: JobTable, ids: list[Any] | None,
               fields: list[str]) -> list[list[Any] | None]:
    """LUXI QueryJobs: one row of field values per id (None when unknown).

    Fields a summary holds are answered from memory (no job file is read);
    others from the jobs.  Raises :class:`errors.ParameterError` for
    unknown fields.
    """
    check_fields(fields)
    with table.lock:
        wanted = table.ids() if ids is None else ids
        # (answered under the lock: a live job is read as it is, no summary made)
        lookup = table.finished_view if SUMMARY_FIELDS.issuperset(fields) else table.get
        rows: list[list[Any] | None] = []
        for job_id in wanted:
            job = lookup(job_id)
            rows.append(None if job is None else [job.get_field(f) for f in fields])
        return rows


def wait_for_job_change(table: JobTable, job_id: Any, fields: list[str], prev_job_info: Any,
                        prev_log_serial: Any, timeout: Any, *,
                        monotonic: Callable[[], float],
                        stopping: Callable[[], bool]) -> Any:
    """Block until the job's fields or log change, or ``timeout`` passes.

    Returns ``"nochange"`` on timeout (capped at LUXI_WFJC_TIMEOUT) or once
    ``stopping()`` (checked under the table lock) is true, else ``[field
    values, new log entries]``; a finalized job answers at once.  Sleeps on
    ``table.changed``.  Raises :class:`errors.JobLost` for unknown jobs,
    :class:`errors.ParameterError` for a bad field or timeout.
    """
    check_fields(fields)
    try:
        limit = min(float(timeout), float(constants.LUXI_WFJC_TIMEOUT))
    except (TypeError, ValueError) as exc:
        raise errors.ParameterError("WaitForJobChange: timeout must be a number",
                                    errors.ECODE_INVAL) from exc
    serial = prev_log_serial if isinstance(prev_log_serial, int) else -1
    deadline = monotonic() + max(0.0, limit)
    with table.lock:
        while True:
            job = table.get(job_id)
            if job is None:
                raise errors.JobLost(f"Job {job_id} not found")
            info = [get_job_field(job, f) for f in fields]
            logs = job.log_entries_since(serial)
            if info != prev_job_info or logs or job.is_finalized():
                return [serializer.loads(serializer.dumps(info)), [list(e) for e in logs]]
            remaining = deadline - monotonic()
            if remaining <= 0 or stopping():
                return "nochange"
            table.changed.wait(remaining)
