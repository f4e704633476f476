"""Burnin's jobs: submitting the opcodes of a step over LUXI and waiting for them.

:class:`JobRunner` runs the :class:`Job` list of one step serially or, with
``-p``, submitted together and waited for together; a failed job becomes a
:class:`BurninFailure` carrying the job id and the job's error as the CLI
words it (doc/burnin.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ganeti import errors
from ganeti.cli.failure import format_job_error
from ganeti.cli.jobs import format_log_message, poll_job, set_generic_opcode_opts
from ganeti.cli.output import merge_time
from ganeti.tools.burnin_opts import BurninOptions

__all__ = ["Job", "JobRunner", "BurninFailure", "StepResult", "log_line", "Out"]

LOG_HEADERS = {0: "- ", 1: "* ", 2: ""}

Out = Callable[[str], None]


def log_line(msg: str, indent: int = 0) -> str:
    """One output line as upstream prints it: ``- step``, ``  * instance``, ``    detail``."""
    return f"{'  ' * indent}{LOG_HEADERS.get(indent, '  ')}{msg}"


class BurninFailure(errors.GanetiError):
    """A burnin job failed (or could not be submitted); carries the job and its error."""

    def __init__(self, step: str, instance: str, job_id: int | None, message: str) -> None:
        self.step = step
        self.instance = instance
        self.job_id = job_id
        self.message = message
        if job_id is not None:
            super().__init__(f"{step}: job {job_id} for {instance} failed: {message}")
        else:
            super().__init__(f"{step}: {instance}: {message}")


@dataclass
class Job:
    """One job of a step: the opcodes for one instance, and what to do on success."""

    instance: str
    ops: list[dict[str, Any]]
    on_success: Callable[[], None] | None = None


@dataclass
class StepResult:
    """What became of one step: ``done``, ``skipped`` (with the reason) or ``failed``."""

    name: str
    status: str
    seconds: float = 0.0
    reason: str = ""
    jobs: int = 0


class JobRunner:
    """Submits the jobs of a step over LUXI and waits for them.

    Serially (the default) each job is submitted and followed to its end
    before the next; in parallel mode all jobs are submitted with one
    ``SubmitManyJobs`` and then waited for.  Either way every job of the
    batch ends before :meth:`run` returns or raises, so that cleanup never
    races a running job.  The job log messages are kept in a buffer
    (printed when a step fails, and live with ``-v``).
    """

    def __init__(self, client: Any, opts: BurninOptions, out: Out) -> None:
        self.client = client
        self.opts = opts
        self.out = out
        self.buffer: list[str] = []
        self.submitted = 0

    def _feedback(self, entry: list[Any]) -> None:
        _serial, stamp, kind, message = entry
        when = merge_time(stamp)
        text = f"{time.ctime(when) if when is not None else '-'} {format_log_message(kind, message)}"
        self.buffer.append(text)
        if self.opts.verbose:
            self.out(log_line(text, 3))

    def _prepare(self, job: Job) -> list[dict[str, Any]]:
        ops = [dict(o) for o in job.ops]
        set_generic_opcode_opts(ops, self.opts, command="burnin")
        return ops

    def _wait(self, step: str, job: Job, job_id: int) -> list[Any]:
        try:
            return poll_job(job_id, self.client, feedback_fn=self._feedback)
        except errors.GanetiError as exc:
            raise BurninFailure(step, job.instance, job_id, format_job_error(exc)) from exc

    def run(self, step: str, jobs: Sequence[Job], *, parallel: bool | None = None,
            keep_going: bool = False) -> list[Any]:
        """Run ``jobs``; returns their results, or raises the first :class:`BurninFailure`.

        Serially the first failure stops the batch, unless ``keep_going``
        (the removal: every instance gets its chance); the first failure is
        raised once the batch is over.
        """
        self.buffer = []
        if parallel is None:
            parallel = self.opts.parallel
        if not parallel or len(jobs) < 2:
            results: list[Any] = []
            first: BurninFailure | None = None
            for job in jobs:
                try:
                    job_id = self._submit_one(step, job)
                    results.append(self._wait(step, job, job_id))
                except BurninFailure as exc:
                    if not keep_going:
                        raise
                    first = first or exc
                    results.append(None)
                    continue
                if job.on_success is not None:
                    job.on_success()
            if first is not None:
                raise first
            return results
        try:
            answers = self.client.SubmitManyJobs([self._prepare(j) for j in jobs])
        except errors.GanetiError as exc:
            raise BurninFailure(step, ", ".join(j.instance for j in jobs), None,
                                "cannot submit the jobs: " + format_job_error(exc)) from exc
        self.submitted += len(jobs)
        results = []
        failure: BurninFailure | None = None
        for job, (ok, value) in zip(jobs, answers):
            if not ok:
                failure = failure or BurninFailure(step, job.instance, None,
                                                  "cannot submit the job: "
                                                  + _submit_error(value))
                results.append(None)
                continue
            try:
                results.append(self._wait(step, job, value))
            except BurninFailure as exc:
                failure = failure or exc
                results.append(None)
            else:
                if job.on_success is not None:
                    job.on_success()
        if failure is not None:
            raise failure
        return results

    def _submit_one(self, step: str, job: Job) -> int:
        try:
            job_id = self.client.SubmitJob(self._prepare(job))
        except errors.GanetiError as exc:
            raise BurninFailure(step, job.instance, None,
                                "cannot submit the job: " + format_job_error(exc)) from exc
        self.submitted += 1
        return int(job_id)


def _submit_error(value: Any) -> str:
    try:
        errors.maybe_raise(value)
    except errors.GanetiError as exc:
        return format_job_error(exc)
    return str(value)
