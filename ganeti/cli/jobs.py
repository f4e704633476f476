"""Submitting opcodes and following jobs from the command line.

* :func:`submit_or_send`: ``--submit`` prints ``JobID: <n>`` on stderr and
  returns at once; otherwise the job is followed to its end.
* :func:`poll_job`: follows a job through ``WaitForJobChange``, printing
  each log message as ``<time.ctime> <message>`` (like Ganeti; progress
  entries as a bar on a terminal, :class:`LogPrinter`), then returns the
  opcode results or raises the job's error.

Opcodes are handled as dicts (``{"OP_ID": ..., ...}``); OpCode objects are
converted with :func:`ganeti.opcodes.to_dict`, imported only when needed so
that commands which build dicts start fast.
"""

from __future__ import annotations

import time

from ganeti import constants, errors, serializer
from ganeti.cli.failure import format_job_error
from ganeti.cli.output import merge_time, to_stderr, to_stdout

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

__all__ = [
    "get_client", "op_to_dict", "set_generic_opcode_opts", "send_job", "poll_job",
    "format_log_message", "job_result", "submit_opcodes_and_wait",
    "submit_opcode_and_wait", "submit_or_send", "JOBS_UNFINISHED", "load_opcode_file",
    "submit_opcode_files", "read_json_file", "LogPrinter", "follow_result_jobs",
]

JOBS_UNFINISHED = frozenset([
    constants.JOB_STATUS_QUEUED, constants.JOB_STATUS_WAITING,
    constants.JOB_STATUS_CANCELING, constants.JOB_STATUS_RUNNING,
])

if TYPE_CHECKING:
    FeedbackFn: TypeAlias = Callable[[Any], None]


def get_client(opts: Any = None) -> Any:
    """The LUXI client for a command: ``opts.client_factory()`` if set (tests)."""
    factory = getattr(opts, "client_factory", None)
    if factory is not None:
        return factory()
    from ganeti import luxi
    return luxi.Client()


def op_to_dict(op: Any) -> dict[str, Any]:
    """A copy of an opcode as its JSON dict (accepts dicts and OpCode objects)."""
    if isinstance(op, dict):
        return dict(op)
    from ganeti import opcodes  # lazy: keeps start-up lean
    return opcodes.to_dict(op)


def set_generic_opcode_opts(ops: list[dict[str, Any]], opts: Any, *,
                            command: str | None = None,
                            clock: Callable[[], int] = time.time_ns) -> None:
    """Apply the common options to opcode dicts, in place.

    ``--priority``, ``--dry-run`` and ``-d`` set the envelope fields; the
    reason trail gets ``gnt:client:<command>`` and, with ``--reason``,
    ``gnt:user``.
    """
    now = clock()
    for op in ops:
        priority = getattr(opts, "priority", None)
        if priority is not None:
            op["priority"] = priority
        if getattr(opts, "dry_run", False):
            op["dry_run"] = True
        debug = getattr(opts, "debug", 0)
        if debug:
            op["debug_level"] = debug
        reason = list(op.get("reason") or [])
        if command:
            prog, _, verb = command.partition(" ")
            reason.append([f"gnt:client:{prog}", verb or prog, now])
        user = getattr(opts, "reason", None)
        if user:
            reason.append(["gnt:user", user, now])
        if reason:
            op["reason"] = reason


def send_job(ops: list[Any], opts: Any = None, cl: Any = None) -> int:
    """Submit one job made of ``ops`` (after the common options); returns its id."""
    if cl is None:
        cl = get_client(opts)
    data = [op_to_dict(op) for op in ops]
    if opts is not None:
        set_generic_opcode_opts(data, opts, command=getattr(opts, "command", None))
    return cl.SubmitJob(data)


def format_log_message(log_type: str, log_msg: Any) -> str:
    """The text of one opcode log entry."""
    if log_type == constants.ELOG_MESSAGE_LIST and isinstance(log_msg, list):
        return "\n".join(str(m) for m in log_msg)
    if log_type == constants.ELOG_MESSAGE or isinstance(log_msg, str):
        return str(log_msg)
    if log_type == constants.ELOG_PROGRESS:
        from ganeti import progress  # lazy: only jobs with progress entries need it
        if progress.is_entry(log_msg):
            return progress.render_line(log_msg)
    return repr(log_msg)


def _print_log_entry(entry: list[Any]) -> None:
    """The default ``feedback_fn``: one line per log entry on stdout.

    :func:`poll_job` replaces it by a :class:`LogPrinter` of its own, which
    also draws progress entries as a bar on a terminal.
    """
    _serial, timestamp, log_type, message = entry
    to_stdout(f"{_stamp(timestamp)} {format_log_message(log_type, message)}")


def _stamp(timestamp: Any) -> str:
    stamp = merge_time(timestamp)
    return time.ctime(stamp) if stamp is not None else "-"


class LogPrinter:
    """Prints a job's log entries; progress entries as a bar on a terminal.

    Not a terminal (a pipe, a file): every entry is one line, progress
    entries as plain lines (``migration: 25.0% (...)``).  On a terminal a
    running operation's progress entries redraw one bar line (``\r``, no
    newline); other messages are printed above it, and the final progress
    entry replaces the bar with its line (doc/progress.md, "On the command
    line").
    """

    def __init__(self, stream: Any = None, *, tty: bool | None = None,
                 width: int | None = None) -> None:
        import sys
        self.stream = stream if stream is not None else sys.stdout
        if tty is None:
            try:
                tty = bool(self.stream.isatty())
            except (AttributeError, ValueError):
                tty = False
        self.tty = tty
        self._width = width
        self._bar = ""          # the bar currently drawn (terminal only)

    def width(self) -> int:
        if self._width is not None:
            return self._width
        import os
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        return columns if columns > 0 else 80     # a terminal of unknown size: 80

    def __call__(self, entry: list[Any]) -> None:
        _serial, timestamp, log_type, message = entry
        if self.tty and log_type == constants.ELOG_PROGRESS:
            from ganeti import progress
            if progress.is_entry(message):
                if not message.get("done"):
                    self._draw(progress.render_bar(message, max(20, self.width() - 1)))
                    return
                self._clear()
                self._line(f"{_stamp(timestamp)} {progress.render_line(message)}")
                return
        bar = self._bar
        self._clear()
        self._line(f"{_stamp(timestamp)} {format_log_message(log_type, message)}")
        if bar:
            self._draw(bar)

    def close(self) -> None:
        """End a bar still drawn with a newline (the job ended without a final entry)."""
        if self._bar:
            self.stream.write("\n")
            self.stream.flush()
            self._bar = ""

    def _line(self, text: str) -> None:
        from ganeti.cli.output import _write_line
        _write_line(self.stream, text)

    def _draw(self, text: str) -> None:
        pad = " " * max(0, len(self._bar) - len(text))
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self._bar = text

    def _clear(self) -> None:
        if self._bar:
            self.stream.write("\r" + " " * len(self._bar) + "\r")
            self._bar = ""


def job_result(job_id: int, status: str, opstatus: list[str], opresult: list[Any]) -> list[Any]:
    """The opcode results of a finished job, or raise its error.

    A canceled job raises :class:`errors.OpExecError`; a failed opcode raises
    its decoded error (e.g. :class:`errors.OpPrereqError`).
    """
    if status == constants.JOB_STATUS_SUCCESS:
        return opresult
    if status == constants.JOB_STATUS_CANCELED:
        why = next((r for r in opresult if isinstance(r, str) and r.startswith("Job rejected")),
                   None)   # a job filter rule's rejection names the rule
        raise errors.OpExecError(f"Job {job_id} was canceled" + (f": {why}" if why else ""))
    has_ok = False
    for idx, (op_status, result) in enumerate(zip(opstatus, opresult)):
        if op_status == constants.OP_STATUS_SUCCESS:
            has_ok = True
        elif op_status == constants.OP_STATUS_ERROR:
            errors.maybe_raise(result)
            if has_ok:
                raise errors.OpExecError(f"partial failure (opcode {idx}): {result}")
            raise errors.OpExecError(str(result))
    raise errors.OpExecError(f"Job {job_id} finished with status {status}: {opresult}")


def poll_job(job_id: int, cl: Any, *, feedback_fn: FeedbackFn | None = _print_log_entry,
             max_wait: float | None = None) -> list[Any]:
    """Follow a job until it finishes; returns its opcode results.

    Each new log entry is passed to ``feedback_fn`` (default: printed with
    a ``time.ctime`` prefix by a :class:`LogPrinter`, which draws progress
    entries as a bar on a terminal; None: silent).  Raises :class:`errors.JobLost`
    for an unknown job, the job's error when it failed, and
    :class:`errors.LuxiTimeoutError` when ``max_wait`` seconds pass first.
    """
    printer = None
    if feedback_fn is _print_log_entry:
        printer = feedback_fn = LogPrinter()
    try:
        return _poll(job_id, cl, feedback_fn, max_wait)
    finally:
        if printer is not None:
            printer.close()


def _poll(job_id: int, cl: Any, feedback_fn: FeedbackFn | None,
          max_wait: float | None) -> list[Any]:
    prev_job_info: Any = None
    prev_log_serial = -1
    deadline = None if max_wait is None else time.monotonic() + max_wait
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise errors.LuxiTimeoutError(f"Job {job_id} did not finish in {max_wait} seconds")
        result = cl.WaitForJobChange(job_id, ["status"], prev_job_info, prev_log_serial,
                                     max_wait=left)
        if result is None:
            raise errors.JobLost(f"Job {job_id} not found")
        if result == "nochange":
            continue
        job_info, log_entries = result
        for entry in log_entries or []:
            if feedback_fn is not None:
                feedback_fn(entry)
            prev_log_serial = max(prev_log_serial, entry[0])
        status = job_info[0] if job_info else None
        if status not in JOBS_UNFINISHED:
            break
        prev_job_info = job_info
    rows = cl.QueryJobs([job_id], ["status", "opstatus", "opresult"])
    if not rows or rows[0] is None:
        raise errors.JobLost(f"Job {job_id} not found")
    status, opstatus, opresult = rows[0]
    return job_result(job_id, status, opstatus, opresult)


def submit_opcodes_and_wait(ops: list[Any], opts: Any = None, cl: Any = None, *,
                            feedback_fn: FeedbackFn | None = _print_log_entry) -> list[Any]:
    """Submit one job and follow it; returns the list of opcode results."""
    if cl is None:
        cl = get_client(opts)
    job_id = send_job(ops, opts, cl)
    if getattr(opts, "print_jobid", False):
        to_stdout(str(job_id))
    return poll_job(job_id, cl, feedback_fn=feedback_fn)


def submit_opcode_and_wait(op: Any, opts: Any = None, cl: Any = None, *,
                           feedback_fn: FeedbackFn | None = _print_log_entry) -> Any:
    """Submit a one-opcode job and follow it; returns that opcode's result."""
    return submit_opcodes_and_wait([op], opts, cl, feedback_fn=feedback_fn)[0]


def submit_or_send(op: Any, opts: Any, cl: Any = None, *,
                   feedback_fn: FeedbackFn | None = _print_log_entry) -> Any:
    """With ``--submit`` print ``JobID: <n>`` on stderr (and, with
    ``--print-jobid``, the bare id on stdout, as Ganeti) and return None;
    otherwise submit, follow the job and return the opcode's result."""
    if getattr(opts, "submit_only", False):
        job_id = send_job([op], opts, cl)
        if getattr(opts, "print_jobid", False):
            to_stdout(str(job_id))
        to_stderr(f"JobID: {job_id}")
        return None
    return submit_opcode_and_wait(op, opts, cl, feedback_fn=feedback_fn)


def follow_result_jobs(result: Any, cl: Any, *,
                       feedback_fn: FeedbackFn | None = _print_log_entry) -> int:
    """Follow the follow-up jobs of an opcode result ``{"jobs": [[ok, id or error],
    ...]}`` (anything else has none) to their end; each failure (not submitted, or
    failed) is printed on stderr.  Returns the number of failures."""
    failures = 0
    entries = result.get("jobs") if isinstance(result, dict) else None
    for ok, value in entries or []:
        if not ok:
            to_stderr(f"Submitting a follow-up job failed: {value}")
            failures += 1
            continue
        try:
            poll_job(int(value), cl, feedback_fn=feedback_fn)
        except errors.GanetiError as exc:
            to_stderr(f"Follow-up job {value} failed: {format_job_error(exc)}")
            failures += 1
    return failures


def read_json_file(path: str, what: str = "") -> Any:
    """The JSON document in the file ``path``; an unreadable file or bad JSON is
    :class:`errors.OpPrereqError` (``wrong_input``) saying "Cannot read/parse
    {what}{path}"."""
    try:
        with open(path, "rb") as handle:
            return serializer.loads(handle.read())
    except OSError as exc:
        raise errors.OpPrereqError(f"Cannot read {what}{path}: {exc.strerror}",
                                   errors.ECODE_INVAL) from exc
    except errors.SerializationError as exc:
        raise errors.OpPrereqError(f"Cannot parse {what}{path}: {exc}",
                                   errors.ECODE_INVAL) from exc


def load_opcode_file(path: str) -> list[dict[str, Any]]:
    """Read opcodes from a JSON file: a list of opcode dicts (or one dict).

    Only the shape is checked here; the master validates every opcode at
    submission (an invalid one gets an error and no job).  Raises
    :class:`errors.OpPrereqError` (``wrong_input``) for unreadable files or
    bad JSON.
    """
    data = read_json_file(path, "opcodes file ")
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data \
            or not all(isinstance(op, dict) for op in data):
        raise errors.OpPrereqError(f"Opcodes file {path} must hold a non-empty JSON list of"
                                   " opcode objects", errors.ECODE_INVAL)
    return data


def submit_opcode_files(opts: Any, files: list[str], cl: Any = None, *,
                        clock: Callable[[], float] = time.monotonic) -> int:
    """Submit the opcodes of JSON files as jobs (one job per file and repetition).

    Options used: ``op_repeat`` (each opcode N times in its job),
    ``job_repeat`` (each file's job N times), ``each`` (one SubmitJob call
    per job instead of one SubmitManyJobs), ``submit_only``, ``verbose``,
    ``timing_stats``.  Returns the exit code (1 when any job failed).
    """
    if cl is None:
        cl = get_client(opts)
    timing = getattr(opts, "timing_stats", False)
    t0 = clock()
    jobs: list[tuple[str, list[dict[str, Any]]]] = []
    for rep in range(max(1, getattr(opts, "job_repeat", 1) or 1)):
        for fname in files:
            ops = load_opcode_file(fname) * max(1, getattr(opts, "op_repeat", 1) or 1)
            ops = [dict(op) for op in ops]
            set_generic_opcode_opts(ops, opts, command=getattr(opts, "command", None))
            jobs.append((f"{fname}/{rep}", ops))
    t1 = clock()
    submitted: list[tuple[str, int]] = []
    failed = 0
    if getattr(opts, "each", False) or len(jobs) == 1:
        for name, ops in jobs:
            submitted.append((name, cl.SubmitJob(ops)))
    else:
        for (name, _ops), (ok, value) in zip(jobs, cl.SubmitManyJobs([ops for _, ops in jobs])):
            if ok:
                submitted.append((name, value))
            else:
                failed += 1
                try:
                    errors.maybe_raise(value)
                    msg = str(value)
                except errors.GanetiError as exc:
                    msg = format_job_error(exc)
                to_stderr(f"Failed to submit job for {name}: {msg}")
    t2 = clock()
    if getattr(opts, "submit_only", False):
        for _name, job_id in submitted:
            to_stderr(f"JobID: {job_id}")
        return 1 if failed else 0
    verbose = getattr(opts, "verbose", 0)
    for name, job_id in submitted:
        try:
            results = poll_job(job_id, cl, feedback_fn=_print_log_entry if verbose else None)
        except errors.GanetiError as exc:
            failed += 1
            to_stderr(f"Job {job_id} ({name}) failed: {format_job_error(exc)}")
        else:
            to_stdout(f"Job {job_id} ({name}): success")
            if verbose:
                to_stdout(f"  result: {results}")
    t3 = clock()
    if timing:
        op_count = sum(len(ops) for _, ops in jobs)
        to_stdout(f"C:op     {op_count:4d}")
        to_stdout(f"C:job    {len(jobs):4d}")
        to_stdout(f"T:load   {t1 - t0:4.4f}")
        to_stdout(f"T:submit {t2 - t1:4.4f}")
        to_stdout(f"T:exec   {t3 - t2:4.4f}")
        to_stdout(f"T:total  {t3 - t1:4.4f}")
    return 1 if failed else 0
