"""Turning a submission (LUXI ``SubmitJob``/``SubmitManyJobs``) into jobs.

Pure steps, no queue state: :func:`validate_ops` checks a job's opcodes
(the input limits are those of :mod:`ganeti.opcodes`, see
doc/protocols/opcodes.md), :func:`resolve_relative` turns the relative
dependency ids of ``SubmitManyJobs`` into absolute ones, and
:func:`build_job` makes the :class:`~ganeti.jqueue.job.QueuedJob` to store.
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, opcodes
from ganeti.jqueue.job import QueuedJob, QueuedOpCode, split_time

__all__ = ["validate_ops", "resolve_relative", "build_job"]


def check_submit_priority(priority: Any, idx: int) -> None:
    """Refuse (:class:`errors.ParameterError`) a submitted opcode's priority outside
    Ganeti's submittable ones (low 10, normal 0, high -10); the wider range
    -20..19 is for the priorities the queue itself gives waiting opcodes."""
    if priority not in constants.OP_PRIO_SUBMIT_VALID or isinstance(priority, bool):
        raise errors.ParameterError(
            f"Opcode {idx}: priority {priority!r} is not valid for a submitted job (valid:"
            f" {', '.join(map(str, sorted(constants.OP_PRIO_SUBMIT_VALID)))})",
            errors.ECODE_INVAL)


def check_many_priorities(jobs: list[Any]) -> None:
    """``SubmitManyJobs``: an opcode priority :func:`check_submit_priority` refuses
    fails the whole call, as Ganeti 3.0's (other errors fail only their job)."""
    for ops in jobs:
        for idx, data in enumerate(ops if isinstance(ops, list) else []):
            if isinstance(data, dict) and "priority" in data:
                check_submit_priority(data["priority"], idx)


def validate_ops(ops: Any, relative_ok: bool) -> list[opcodes.OpCode]:
    """The opcodes of one submitted job, checked.

    Raises :class:`errors.OpCodeError` for an empty or non-list job, the
    :class:`errors.OpPrereqError` of :func:`ganeti.opcodes.from_dict`
    (prefixed with the opcode's index) for an invalid opcode, and
    :class:`errors.ParameterError` for relative dependencies when
    ``relative_ok`` is false.
    """
    if not isinstance(ops, list) or not ops:
        raise errors.OpCodeError("A job needs a non-empty list of opcodes", errors.ECODE_INVAL)
    result = []
    for idx, data in enumerate(ops):
        try:
            op = opcodes.from_dict(data)
        except errors.OpPrereqError as exc:
            raise type(exc)(f"Opcode {idx}: {exc}", exc.ecode) from exc
        check_submit_priority(op.priority, idx)
        if not relative_ok and any(d[0] < 0 for d in op.depends or []):
            raise errors.ParameterError(
                f"Opcode {idx}: relative job dependencies are only valid in SubmitManyJobs",
                errors.ECODE_INVAL)
        result.append(op)
    return result


def resolve_relative(depends: list[Any] | None, idx: int,
                     assigned: list[int | None]) -> list[Any] | None:
    """``depends`` of job ``idx`` of a ``SubmitManyJobs`` call with absolute ids.

    ``assigned`` holds the ids given to the earlier jobs of the call (None
    for one refused); a relative id naming none of them raises
    :class:`errors.ParameterError`.
    """
    if not depends:
        return depends
    resolved = []
    for dep_id, wanted in depends:
        if dep_id < 0:
            target = idx + dep_id
            if target < 0 or assigned[target] is None:
                raise errors.ParameterError(
                    f"Job dependency {dep_id} cannot be resolved (no such job submitted"
                    " in this call)", errors.ECODE_INVAL)
            dep_id = assigned[target]
        resolved.append([dep_id, wanted])
    return resolved


def build_job(job_id: int, ops: list[opcodes.OpCode], now: float,
              epoch: int | None = None) -> QueuedJob:
    """A new queued job ``job_id`` received at ``now``; each opcode gets its
    ``gnt:opcode:*`` reason entry.  ``epoch``, the master epoch of the
    master accepting it, is recorded in the job file (key ``epoch``,
    doc/protocols/jobs.md, "Job file format")."""
    ts_ns = int(now * 1e9)
    qops = []
    for idx, op in enumerate(ops):
        op.reason = list(op.reason) + [[f"gnt:opcode:{op.OP_ID[3:].lower()}",
                                        f"job={job_id};index={idx}", ts_ns]]
        qops.append(QueuedOpCode.from_opcode(op))
    job = QueuedJob(id=job_id, ops=qops, received_timestamp=split_time(now))
    if epoch is not None:
        job.extra["epoch"] = epoch
    return job
