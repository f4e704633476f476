"""Job events for the cluster event stream (:mod:`ganeti.events`).

The queue calls these under its table lock, right after a change is
shown (so events come in the order others see the changes, and never
before a state is durable; log entries are shown before they are written,
as for ``WaitForJobChange``).  Each takes the bus or None (no events); publishing never blocks on readers; the
payloads are doc/protocols/events.md, "Job events".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ganeti import constants
from ganeti import events as ev
from ganeti.jqueue.job import QueuedJob

__all__ = ["job_submitted", "job_changed", "log_added"]


def _summaries(job: QueuedJob) -> list[str]:
    return [op.summary() for op in job.ops]


def job_submitted(bus: ev.EventBus | None, job: QueuedJob, *, source: str = "submit") -> None:
    """A job was registered (``source``: ``submit`` or ``pickup``)."""
    if bus is None:
        return
    bus.publish(ev.EV_JOB_SUBMITTED, job_id=job.id, data={
        "status": job.status(), "summary": _summaries(job), "source": source})


def job_changed(bus: ev.EventBus | None, job: QueuedJob, old_opstatus: Sequence[str]) -> None:
    """After a commit: ``job.status`` when an opcode status changed, then
    ``job.finished`` when the job became final."""
    opstatus = [op.status for op in job.ops]
    if bus is None or opstatus == list(old_opstatus):
        return
    status = job.status()
    data: dict[str, Any] = {"status": status, "opstatus": opstatus}
    bus.publish(ev.EV_JOB_STATUS, job_id=job.id, data=data)
    if status in constants.JOBS_FINALIZED:
        bus.publish(ev.EV_JOB_FINISHED, job_id=job.id, data={
            **data, "end_ts": job.end_timestamp, "summary": _summaries(job)})


def log_added(bus: ev.EventBus | None, job: QueuedJob, op_index: int, entry: list[Any]) -> None:
    """A log entry ``[serial, timestamp, type, message]`` was added to opcode ``op_index``."""
    if bus is None:
        return
    serial, timestamp, log_type, message = entry
    bus.publish(ev.EV_JOB_LOG, job_id=job.id, data={
        "serial": serial, "op_index": op_index, "timestamp": timestamp,
        "log_type": log_type, "message": message})
