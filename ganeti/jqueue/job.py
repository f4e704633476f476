"""The job model: opcodes in a job, status calculation, on-disk format.

Pure logic, no threads and no files: :class:`QueuedJob` and
:class:`QueuedOpCode` hold the state; :data:`OP_TRANSITIONS` lists the
opcode status changes allowed and :func:`set_op_status` is the one place
that makes them; :func:`calc_status` derives a job's status from its
opcodes (doc/protocols/jobs.md, "Job status from opcode statuses");
:func:`job_to_disk` and :func:`job_from_disk` give the exact
``queue/job-<id>`` JSON (doc/protocols/jobs.md, "Job file format");
:func:`get_job_field` answers the ``job`` query fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from ganeti import constants, errors, opcodes, serializer

__all__ = ["QueuedOpCode", "QueuedJob", "JobStub", "OP_TRANSITIONS", "check_op_transition",
           "set_op_status", "calc_status", "split_time",
           "job_to_disk", "job_from_disk", "job_for_pickup", "recover_job", "get_job_field",
           "JOB_FIELDS", "REASON_SRC_PICKUP", "MSG_MASTER_STOPPED", "MSG_CANCELED",
           "check_fields", "jsonable"]

#: Reason trail source added to the opcodes of a job adopted by PickupJob.
REASON_SRC_PICKUP = "gnt:daemon:masterd:pickup"
MSG_MASTER_STOPPED = "Master daemon stopped while the job was running"
MSG_CANCELED = "Job canceled by request"

_T = TypeVar("_T")

Timestamp = list  # [seconds, microseconds]


def split_time(value: float) -> list[int]:
    """``1.5`` -> ``[1, 500000]``."""
    sec = int(value)
    usec = int(round((value - sec) * 1000000))
    if usec >= 1000000:
        sec, usec = sec + 1, usec - 1000000
    return [sec, usec]


_Q, _W, _R = constants.OP_STATUS_QUEUED, constants.OP_STATUS_WAITING, constants.OP_STATUS_RUNNING
_CI, _C = constants.OP_STATUS_CANCELING, constants.OP_STATUS_CANCELED
_S, _E = constants.OP_STATUS_SUCCESS, constants.OP_STATUS_ERROR

#: The opcode state machine: each status and the statuses it may move to.
#: A job has no status of its own: it is derived from its opcodes'
#: (:func:`calc_status`, same vocabulary), so this one table rules both.
#:
#: * ``queued``: to ``waiting`` (its locks are busy, or a dependency is
#:   unfinished), ``running`` (locks taken at once), ``canceling`` (cancel
#:   of a job a worker holds), ``canceled`` (cancel of a job no worker
#:   holds, a canceled dependency) or ``error`` (a dependency failed, the
#:   opcode failed before it started, an earlier opcode failed).
#: * ``waiting``: as ``queued``, plus back to ``queued`` (a job file read at
#:   start-up or adopted, that no process runs) and ``waiting`` again (a lock
#:   wait after a dependency wait, a dependency re-checked).
#: * ``running``: to ``success``, ``error``, ``canceling`` (cancel with
#:   kill) or ``canceled`` (a job file whose earlier opcode was canceling,
#:   recovered).
#: * ``canceling``: to ``canceled``; ``success`` or ``error`` when it was
#:   running and ended on its own first; ``canceling`` again (a repeated
#:   cancel).
#: * ``success``, ``error``, ``canceled`` are final.
OP_TRANSITIONS: Mapping[str, frozenset[str]] = MappingProxyType({
    _Q: frozenset([_W, _R, _CI, _C, _E]),
    _W: frozenset([_Q, _W, _R, _CI, _C, _E]),
    _R: frozenset([_S, _E, _CI, _C]),
    _CI: frozenset([_CI, _C, _S, _E]),
    _S: frozenset(),
    _E: frozenset(),
    _C: frozenset(),
})


def check_op_transition(old: str, new: str) -> None:
    """Raise :class:`errors.ProgrammerError` unless ``old -> new`` is in
    :data:`OP_TRANSITIONS` (an unknown status is never legal)."""
    allowed = OP_TRANSITIONS.get(old)
    if allowed is None or new not in allowed:
        raise errors.ProgrammerError(f"Illegal opcode status change {old!r} -> {new!r}")


def set_op_status(op: QueuedOpCode, new: str) -> None:
    """Move ``op`` to status ``new``, checked against :data:`OP_TRANSITIONS`.

    Every status change of an opcode goes through here.  Only the
    in-memory object changes: writing it to disk is the caller's separate
    step (the queue applies a change to a copy, writes that, and only then
    applies it to the job others see).  Raises
    :class:`errors.ProgrammerError` for an illegal change (``op`` is left
    as it was).
    """
    check_op_transition(op.status, new)
    op.status = new


@dataclass
class QueuedOpCode:
    """One opcode inside a job, with its status, result and log."""

    input: dict[str, Any]
    op: opcodes.OpCode | None = None
    status: str = constants.OP_STATUS_QUEUED
    result: Any = None
    log: list[list[Any]] = field(default_factory=list)
    priority: int = constants.OP_PRIO_DEFAULT
    start_timestamp: list[int] | None = None
    exec_timestamp: list[int] | None = None
    end_timestamp: list[int] | None = None

    @classmethod
    def from_opcode(cls, op: opcodes.OpCode) -> QueuedOpCode:
        return cls(input=opcodes.to_dict(op), op=op, priority=op.priority)

    def get_op(self) -> opcodes.OpCode:
        """The opcode object (rebuilt from ``input`` when loaded from disk)."""
        if self.op is None:
            self.op = opcodes.from_dict(self.input)
        return self.op

    def summary(self) -> str:
        try:
            return self.get_op().summary()
        except errors.GanetiError:
            op_id = str(self.input.get("OP_ID", "OP_UNKNOWN"))
            return op_id[3:] if op_id.startswith("OP_") else op_id


class JobStub:
    """What the queue keeps of a finished, unarchived job: status and end time."""

    __slots__ = ("status", "end")

    def __init__(self, status: str, end: float | None) -> None:
        self.status = status
        self.end = end


@dataclass
class QueuedJob:
    """A job: an id and its opcodes, plus bookkeeping the queue needs.

    ``log_serial`` is the serial of the last log entry (per job);
    ``cancel_requested`` marks a job whose cancel must be acted on by the
    worker running it.
    """

    id: int
    ops: list[QueuedOpCode]
    received_timestamp: list[int] | None = None
    start_timestamp: list[int] | None = None
    end_timestamp: list[int] | None = None
    log_serial: int = 0
    archived: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def status(self) -> str:
        return calc_status([op.status for op in self.ops])

    def priority(self) -> int:
        """The lowest priority number among unfinished opcodes."""
        prios = [op.priority for op in self.ops if op.status not in constants.OPS_FINALIZED]
        if not prios:
            return self.ops[-1].priority if self.ops else constants.OP_PRIO_DEFAULT
        return min(prios)

    def is_finalized(self) -> bool:
        return self.status() in constants.JOBS_FINALIZED

    def add_log(self, timestamp: float, log_type: str, message: Any, op_index: int) -> list[Any]:
        """Append a log entry to opcode ``op_index``; returns the entry."""
        self.log_serial += 1
        entry = [self.log_serial, split_time(timestamp), log_type, message]
        self.ops[op_index].log.append(entry)
        return entry

    def get_field(self, name: str) -> Any:
        """The value of query field ``name`` (see :func:`get_job_field`)."""
        return get_job_field(self, name)

    def log_entries_since(self, serial: int) -> list[list[Any]]:
        return [e for op in self.ops for e in op.log if e[0] > serial]

    def finalize_ops(self, start: int, status: str, result: Any, now: float) -> None:
        """Mark the unfinished opcodes ``start..`` with ``status``/``result``
        and end the job."""
        ts = split_time(now)
        for op in self.ops[start:]:
            if op.status in constants.OPS_FINALIZED:
                continue
            set_op_status(op, status)
            op.result = result
            if op.end_timestamp is None:
                op.end_timestamp = ts
        self.end_timestamp = ts


def recover_job(job: QueuedJob, now: float) -> bool:
    """Bring a job read from disk, that no process runs, back to a sane state.

    A running opcode fails (the master stopped under it), a canceling one
    is canceled, waiting ones are queued again.  True when ``job`` changed
    (and must be written back).
    """
    changed = False
    for idx, op in enumerate(job.ops):
        if op.status == constants.OP_STATUS_RUNNING:
            err = errors.encode_exception(errors.OpExecError(MSG_MASTER_STOPPED))
            job.finalize_ops(idx, constants.OP_STATUS_ERROR, err, now)
            return True
        if op.status == constants.OP_STATUS_CANCELING:
            job.finalize_ops(idx, constants.OP_STATUS_CANCELED, MSG_CANCELED, now)
            return True
        if op.status == constants.OP_STATUS_WAITING:
            set_op_status(op, constants.OP_STATUS_QUEUED)
            changed = True
    return changed


def calc_status(statuses: list[str]) -> str:
    """A job's status from its opcodes' statuses (upstream ``CalcStatus``)."""
    status = constants.JOB_STATUS_QUEUED
    all_success = True
    for st in statuses:
        if st == constants.OP_STATUS_SUCCESS:
            continue
        all_success = False
        if st == constants.OP_STATUS_QUEUED:
            continue
        if st in (constants.OP_STATUS_WAITING, constants.OP_STATUS_RUNNING):
            status = st
            continue
        if st in (constants.OP_STATUS_CANCELING, constants.OP_STATUS_ERROR,
                  constants.OP_STATUS_CANCELED):
            status = st
            break
    if all_success and statuses:
        return constants.JOB_STATUS_SUCCESS
    return status


_OP_DISK_KEYS = ("input", "status", "result", "log", "priority",
                 "start_timestamp", "exec_timestamp", "end_timestamp")


def job_to_disk(job: QueuedJob) -> dict[str, Any]:
    """The on-disk dict of a job (doc/protocols/jobs.md, "Job file format")."""
    data: dict[str, Any] = {
        "id": job.id,
        "ops": [{k: getattr(op, k) for k in _OP_DISK_KEYS} for op in job.ops],
        "received_timestamp": job.received_timestamp,
        "start_timestamp": job.start_timestamp,
        "end_timestamp": job.end_timestamp,
    }
    data.update(job.extra)
    return data


def job_from_disk(data: Any) -> QueuedJob:
    """Rebuild a job from its on-disk dict.

    Raises :class:`errors.JobFileCorrupted` when the shape is wrong.  The
    opcode objects are rebuilt lazily (:meth:`QueuedOpCode.get_op`).
    """
    try:
        if not isinstance(data, dict) or not isinstance(data["id"], int) \
                or not isinstance(data["ops"], list) or not data["ops"]:
            raise ValueError("missing id or ops")
        ops = []
        for op in data["ops"]:
            if not isinstance(op, dict) or not isinstance(op.get("input"), dict):
                raise ValueError("bad opcode entry")
            if op.get("status") not in constants.JOB_STATUS_ALL:
                raise ValueError(f"bad opcode status {op.get('status')!r}")
            ops.append(QueuedOpCode(
                input=op["input"], status=op["status"], result=op.get("result"),
                log=list(op.get("log") or []),
                priority=int(op.get("priority", constants.OP_PRIO_DEFAULT)),
                start_timestamp=op.get("start_timestamp"),
                exec_timestamp=op.get("exec_timestamp"),
                end_timestamp=op.get("end_timestamp")))
        job = QueuedJob(id=data["id"], ops=ops,
                        received_timestamp=data.get("received_timestamp"),
                        start_timestamp=data.get("start_timestamp"),
                        end_timestamp=data.get("end_timestamp"))
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.JobFileCorrupted(f"Invalid job data: {exc}") from exc
    job.extra = {k: data[k] for k in ("livelock", "process_id", "epoch") if k in data}
    serials = [e[0] for op in ops for e in op.log
               if isinstance(e, list) and e and isinstance(e[0], int)]
    job.log_serial = max(serials, default=0)
    return job


def job_for_pickup(job_id: int, raw: bytes, now: float) -> QueuedJob:
    """Parse ``queue/job-<job_id>`` written by another process, for PickupJob.

    The file must hold job ``job_id``; the opcodes that still have to run
    must be valid opcodes (checked now, so a bad job is refused instead of
    failing later).  Those opcodes get a ``gnt:daemon:masterd:pickup``
    reason entry.  Raises :class:`errors.JobFileCorrupted`.
    """
    try:
        data = serializer.loads(raw)
    except errors.GanetiError as exc:
        raise errors.JobFileCorrupted(f"Job file job-{job_id} is not valid JSON: {exc}") from exc
    job = job_from_disk(data)
    if job.id != job_id:
        raise errors.JobFileCorrupted(f"Job file job-{job_id} holds job {job.id}")
    ts_ns = int(now * 1e9)
    for idx, qop in enumerate(job.ops):
        if qop.status in constants.OPS_FINALIZED:
            continue
        reason = qop.input.get("reason")
        if not isinstance(reason, list):
            reason = []
        qop.input = {**qop.input, "reason": reason + [[REASON_SRC_PICKUP,
                                                       f"job={job_id};index={idx}", ts_ns]]}
        try:
            qop.get_op()
        except errors.GanetiError as exc:
            raise errors.JobFileCorrupted(f"Job {job_id} opcode {idx} is invalid: {exc}") from exc
    return job


def _per_op(attr: str) -> Any:
    return lambda job: [getattr(op, attr) for op in job.ops]


_GETTERS: dict[str, Any] = {
    "id": lambda job: job.id,
    "status": lambda job: job.status(),
    "priority": lambda job: job.priority(),
    "ops": lambda job: [op.input for op in job.ops],
    "opresult": _per_op("result"),
    "opstatus": _per_op("status"),
    "oplog": _per_op("log"),
    "opstart": _per_op("start_timestamp"),
    "opexec": _per_op("exec_timestamp"),
    "opend": _per_op("end_timestamp"),
    "oppriority": _per_op("priority"),
    "summary": lambda job: [op.summary() for op in job.ops],
    "received_ts": lambda job: job.received_timestamp,
    "start_ts": lambda job: job.start_timestamp,
    "end_ts": lambda job: job.end_timestamp,
    "archived": lambda job: job.archived,
}

JOB_FIELDS: tuple[str, ...] = tuple(_GETTERS)


def get_job_field(job: QueuedJob, name: str) -> Any:
    """The value of query field ``name`` for ``job``.

    Raises :class:`errors.ParameterError` for unknown fields.
    """
    getter = _GETTERS.get(name)
    if getter is None:
        raise errors.ParameterError(f"Unknown job field '{name}'", errors.ECODE_INVAL)
    return getter(job)


def copy_job(job: QueuedJob) -> QueuedJob:
    """A shallow copy safe to read while the original changes (logs copied).

    Made field by field without ``__init__`` (every field is copied, none
    is derived): ``dataclasses.replace`` cost several times as much, and
    the queue copies every job at each of its durable changes.
    """
    ops = []
    for op in job.ops:
        op_copy = _shallow(op)
        op_copy.log = list(op.log)
        ops.append(op_copy)
    new = _shallow(job)
    new.ops = ops
    new.extra = dict(job.extra)
    return new


def _shallow(obj: _T) -> _T:
    new: _T = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


def check_fields(fields: Any) -> None:
    """Refuse a job field list that is not strings or names unknown fields."""
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise errors.ParameterError("Job fields must be a list of strings", errors.ECODE_INVAL)
    unknown = [f for f in fields if f not in JOB_FIELDS]
    if unknown:
        raise errors.ParameterError(f"Unknown job field(s): {', '.join(unknown)}", errors.ECODE_INVAL)


def jsonable(value: Any) -> Any:
    """Make an opcode result plain JSON data (dataclasses, tuples, sets...)."""
    try:
        return serializer.loads(serializer.dumps(value))
    except (TypeError, ValueError, errors.GanetiError):
        return str(value)
