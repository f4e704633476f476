"""``gnt-job``: list, inspect, follow, cancel and archive jobs."""

from __future__ import annotations

from ganeti import cli, constants

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "list_jobs", "show_job_info", "format_job_info", "watch_job", "wait_job",
           "cancel_jobs", "archive_jobs", "auto_archive_jobs", "change_priority",
           "submit_file", "LIST_DEFAULT_FIELDS", "INFO_FIELDS", "UNARCHIVED_FILTER"]

LIST_DEFAULT_FIELDS = ["id", "status", "summary"]
#: Ganeti 3.x: without --archived, ``gnt-job list`` ANDs this to its filter
#: (the same literal as ``cmdlib.query.UNARCHIVED_FILTER``, which a front
#: end may not import).
UNARCHIVED_FILTER = ["!", ["?", "archived"]]
INFO_FIELDS = ["id", "ops", "status", "priority", "received_ts", "start_ts", "end_ts",
               "opstatus", "oplog", "opresult", "opstart", "opexec", "opend", "oppriority"]

_STATUS_GROUPS = {
    "pending": [constants.JOB_STATUS_QUEUED, constants.JOB_STATUS_WAITING],
    "running": [constants.JOB_STATUS_RUNNING, constants.JOB_STATUS_CANCELING],
    "error": [constants.JOB_STATUS_ERROR],
    "finished": sorted(constants.JOBS_FINALIZED),
}


def _job_ids(args: list[str]) -> list[int]:
    from ganeti import errors
    try:
        return [int(a) for a in args]
    except ValueError:
        raise errors.OpPrereqError(f"Invalid job ID in: {' '.join(args)}",
                                   errors.ECODE_INVAL) from None


def list_jobs(opts: Any, args: list[str]) -> int:
    """List jobs: id, status and summary by default; archived ones only
    with ``--archived`` (the server skips the archive for the filter
    conjunct :data:`UNARCHIVED_FILTER`)."""
    fields = cli.parse_fields(opts.output, LIST_DEFAULT_FIELDS)
    qfilter = cli.build_query_filter(args, opts.force_filter, namefield="id", isnumeric=True)
    statuses: list[str] = []
    for group, members in _STATUS_GROUPS.items():
        if getattr(opts, f"only_{group}"):
            statuses.extend(s for s in members if s not in statuses)
    conjuncts = [] if qfilter is None else [qfilter]
    if statuses:
        conjuncts.append(["|"] + [["==", "status", s] for s in statuses])
    if not opts.archived:
        conjuncts.append(UNARCHIVED_FILTER)
    if conjuncts:
        qfilter = conjuncts[0] if len(conjuncts) == 1 else ["&", *conjuncts]
    return cli.generic_query_list(cli.get_client(opts), constants.QR_JOB, fields, qfilter,
                                  headers=not opts.no_headers, separator=opts.separator,
                                  units=opts.units)


def _delta(start: Any, end: Any) -> str:
    a, b = cli.merge_time(start), cli.merge_time(end)
    if a is None or b is None:
        return ""
    return f" (delta {b - a:.6f}s)"


def _format_value(value: Any) -> str:
    from ganeti import serializer
    if isinstance(value, str):
        return value
    return serializer.dumps(value)


def _timestamp(ts: Any, prior: Any = None) -> str:
    """A job timestamp as Ganeti's info shows it: time (delta to ``prior``), or unknown."""
    if ts is None:
        return "unknown (None)"
    return cli.format_timestamp(ts) + _delta(prior, ts)


def _at(values: Any, idx: int) -> Any:
    return values[idx] if values and idx < len(values) else None


def format_job_info(row: list[Any]) -> list[tuple[str, Any]]:
    """One job's ``gnt-job info`` entry (Ganeti's keys; ``Priority`` is ours)."""
    (job_id, ops, status, priority, received, started, ended, opstatus, oplog,
     opresult, opstart, opexec, opend, oppriority) = row
    t_received, t_ended = cli.merge_time(received), cli.merge_time(ended)
    data: list[tuple[str, Any]] = [
        ("Job ID", job_id), ("Status", status), ("Priority", priority),
        ("Received", _timestamp(received)),
        ("Processing start", _timestamp(started, received)),
        ("Processing end", _timestamp(ended, started)),
        ("Total processing time", f"{t_ended - t_received:.6f} seconds"
         if t_received is not None and t_ended is not None else "N/A")]
    opcodes = []
    for idx, op in enumerate(ops or []):
        entry: list[tuple[str, Any]] = [
            ("Opcode", op.get("OP_ID", "?") if isinstance(op, dict) else "?"),
            ("Status", _at(opstatus, idx))]
        if oppriority:
            entry.append(("Priority", _at(oppriority, idx)))
        entry += [("Processing start", _timestamp(_at(opstart, idx))),
                  ("Execution start", _timestamp(_at(opexec, idx))),
                  ("Processing end", _timestamp(_at(opend, idx))),
                  ("Input fields", op if isinstance(op, dict) else {}),
                  ("Result", _at(opresult, idx)),
                  ("Execution log", [
                      [("Time", cli.format_timestamp(timestamp)),
                       ("Content", (serial, log_type,
                                    cli.format_log_message(log_type, message)))]
                      for serial, timestamp, log_type, message in (_at(oplog, idx) or [])])]
        opcodes.append(entry)
    data.append(("Opcodes", opcodes))
    return data


def show_job_info(opts: Any, args: list[str]) -> int:
    """Show the details of jobs: timestamps, opcodes, results and logs (YAML)."""
    from ganeti.cli import info
    ids = _job_ids(args)
    rows = cli.get_client(opts).QueryJobs(ids, INFO_FIELDS)
    code = cli.EXIT_SUCCESS
    found = []
    for job_id, row in zip(ids, rows):
        if row is None:
            cli.to_stderr(f"Job ID {job_id} not found")
            code = cli.EXIT_FAILURE
            continue
        found.append(format_job_info(row))
    if found:
        info.print_info(found)
    return code


def _follow(opts: Any, job_id: int, *, quiet: bool) -> int:
    from ganeti import errors
    feedback = None if quiet else cli.jobs._print_log_entry
    try:
        cli.poll_job(job_id, cli.get_client(opts), feedback_fn=feedback,
                     max_wait=getattr(opts, "timeout", None))
    except errors.GanetiError as exc:
        code, msg = cli.format_error(exc)
        cli.to_stderr(f"Job {job_id} failed: {msg}")
        return code
    return cli.EXIT_SUCCESS


def watch_job(opts: Any, args: list[str]) -> int:
    """Follow a job's log until it finishes; the exit code is the job's result."""
    job_id = _job_ids(args)[0]
    msg = f"Output from job {job_id} follows"
    cli.to_stdout(msg)
    cli.to_stdout("-" * len(msg))
    return _follow(opts, job_id, quiet=False)


def wait_job(opts: Any, args: list[str]) -> int:
    """Wait silently for a job to finish; exit 0 if it succeeded, 1 otherwise."""
    return _follow(opts, _job_ids(args)[0], quiet=True)


def cancel_jobs(opts: Any, args: list[str]) -> int:
    """Cancel queued or waiting jobs (``--kill``: also running ones, confirmed
    with ``--yes-do-it`` as in Ganeti)."""
    if opts.kill and not opts.yes_do_it:
        from ganeti import errors
        raise errors.OpPrereqError("The --kill option must be confirmed with --yes-do-it",
                                   errors.ECODE_INVAL)
    cl = cli.get_client(opts)
    code = cli.EXIT_SUCCESS
    for job_id in _job_ids(args):
        success, msg = cl.CancelJob(job_id, opts.kill)
        (cli.to_stdout if success else cli.to_stderr)(str(msg))
        if not success:
            code = cli.EXIT_FAILURE
    return code


def archive_jobs(opts: Any, args: list[str]) -> int:
    """Move finished jobs to the archive."""
    cl = cli.get_client(opts)
    code = cli.EXIT_SUCCESS
    for job_id in _job_ids(args):
        if not cl.ArchiveJob(job_id):
            cli.to_stderr(f"Failed to archive job {job_id}")
            code = cli.EXIT_FAILURE
    return code


def auto_archive_jobs(opts: Any, args: list[str]) -> int:
    """Archive finished jobs older than AGE ("all", or e.g. 30m, 6h, 1d, 2w)."""
    age = -1 if args[0] == "all" else cli.parse_timespec(args[0])
    archived, left = cli.get_client(opts).AutoArchiveJobs(age, (constants.LUXI_DEF_RWTO - 1) // 2)
    cli.to_stdout(f"Archived {archived} jobs, {left} unchecked left")
    return cli.EXIT_SUCCESS


def change_priority(opts: Any, args: list[str]) -> int:
    """Change the priority of queued or waiting jobs."""
    if opts.priority is None:
        return cli.usage_error(opts.command, "--priority is required")
    cl = cli.get_client(opts)
    code = cli.EXIT_SUCCESS
    for job_id in _job_ids(args):
        success, msg = cl.ChangeJobPriority(job_id, opts.priority)
        if success:
            if opts.verbose:
                cli.to_stdout(str(msg))
        else:
            cli.to_stderr(f"Job {job_id}: {msg}")
            code = cli.EXIT_FAILURE
    return code


def submit_file(opts: Any, args: list[str]) -> int:
    """Submit the opcodes of a JSON file (a list of opcode objects) as one job."""
    ops = cli.load_opcode_file(args[0])
    cl = cli.get_client(opts)
    if opts.submit_only:
        job_id = cli.send_job(ops, opts, cl)
        if opts.print_jobid:
            cli.to_stdout(str(job_id))
        cli.to_stderr(f"JobID: {job_id}")
        return cli.EXIT_SUCCESS
    results = cli.submit_opcodes_and_wait(ops, opts, cl)
    if opts.verbose:
        for idx, result in enumerate(results):
            cli.to_stdout(f"Opcode {idx} result: {_format_value(result)}")
    return cli.EXIT_SUCCESS


def _status_opt(group: str, text: str) -> cli.Option:
    return cli.Option(f"--{group}", dest=f"only_{group}", action="store_true", default=False,
                      help=text)


_ARCHIVED_OPT = cli.Option("--archived", dest="archived", action="store_true", default=False,
                           help="Include archived jobs in the list")
_KILL_OPT = cli.Option("--kill", dest="kill", action="store_true", default=False,
                       help="Kill the job even if it is running (with --yes-do-it)")
_YES_DO_IT_OPT = cli.Option("--yes-do-it", "--ya-rly", dest="yes_do_it", action="store_true",
                            default=False, help="Confirm --kill")

commands: dict[str, cli.Command] = {
    "list": (list_jobs, [cli.ArgJobId()],
             [cli.NOHDR_OPT, cli.SEP_OPT, cli.FIELDS_OPT, cli.UNITS_OPT, cli.FILTER_OPT,
              cli.VERBOSE_OPT, _ARCHIVED_OPT,
              _status_opt("pending", "Show only queued and waiting jobs"),
              _status_opt("running", "Show only running (and canceling) jobs"),
              _status_opt("error", "Show only failed jobs"),
              _status_opt("finished", "Show only finished jobs")],
             "[options] [JOB_ID...]",
             "List jobs (default fields: id, status, summary)"),
    "list-fields": (cli.list_fields_verb(constants.QR_JOB), [cli.ArgUnknown(name="FIELD")],
                    [cli.NOHDR_OPT, cli.SEP_OPT], "[FIELD...]",
                    "List the fields available for the list command"),
    "info": (show_job_info, [cli.ArgJobId(min=1)], [], "JOB_ID...",
             "Show detailed information about jobs"),
    "watch": (watch_job, cli.ARGS_ONE_JOB, [cli.TIMEOUT_OPT], "JOB_ID",
              "Follow a job's log messages until it finishes"),
    "wait": (wait_job, cli.ARGS_ONE_JOB, [cli.TIMEOUT_OPT], "JOB_ID",
             "Wait for a job to finish; the exit code tells whether it succeeded"),
    "cancel": (cancel_jobs, [cli.ArgJobId(min=1)], [_KILL_OPT, _YES_DO_IT_OPT],
               "[--kill --yes-do-it] JOB_ID...",
               "Cancel queued or waiting jobs"),
    "archive": (archive_jobs, [cli.ArgJobId(min=1)], [], "JOB_ID...",
                "Move finished jobs to the archive"),
    "autoarchive": (auto_archive_jobs, [cli.ArgUnknown(min=1, max=1, name="AGE")], [],
                    "AGE",
                    "Archive finished jobs older than AGE (all, or e.g. 30m, 6h, 1d, 2w)"),
    "change-priority": (change_priority, [cli.ArgJobId(min=1)],
                        [cli.PRIORITY_OPT, cli.VERBOSE_OPT], "--priority PRIO JOB_ID...",
                        "Change the priority of queued or waiting jobs"),
    "submit": (submit_file, [cli.ArgFile(min=1, max=1)],
               [cli.SUBMIT_OPT, cli.PRINT_JOBID_OPT, cli.PRIORITY_OPT, cli.VERBOSE_OPT],
               "[--submit] FILE",
               "Submit the opcodes in a JSON file (a list of opcode objects) as one job"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-job``."""
    return cli.generic_main(commands, argv, prog="gnt-job")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
