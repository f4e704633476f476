"""``gnt-debug``: debugging commands (delay jobs, raw opcode files, locks, metrics,
Ganeti's ``wconfd`` calls, secret OS parameters)."""

from __future__ import annotations

import time

from ganeti import cli
from ganeti.client import relocation
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "delay", "submit_job", "test_jobqueue", "test_osparams", "show_locks",
           "show_metrics", "wconfd", "LOCK_DEFAULT_FIELDS"]

LOCK_DEFAULT_FIELDS = ["name", "mode", "owner", "pending"]


def delay(opts: Any, args: list[str]) -> int:
    """Run OP_TEST_DELAY: sleep DURATION seconds on the master and/or nodes."""
    try:
        duration = float(args[0])
    except ValueError:
        return cli.usage_error(opts.command, f"invalid duration '{args[0]}' (seconds expected)")
    op = wire.test_delay(duration=duration, on_master=opts.on_master, on_nodes=list(opts.on_nodes),
                         repeat=opts.repeat, interruptible=opts.interruptible,
                         no_locks=opts.no_locks)
    cli.submit_or_send(op, opts)
    return cli.EXIT_SUCCESS


def test_jobqueue(opts: Any, args: list[str]) -> int:
    """Run Ganeti's job queue tests against the master (doc/commands.md)."""
    from ganeti.client import debug_jobqueue
    return debug_jobqueue.test_jobqueue(opts, args)


def test_osparams(opts: Any, args: list[str]) -> int:
    """Run OP_TEST_OS_PARAMS: the master names the secret OS parameters it got
    (the keys; the values are never written to a job, doc/commands.md)."""
    from ganeti.client.gnt_instance import parse_kv
    secret = parse_kv(opts.osparams_secret) if opts.osparams_secret else None
    cli.submit_or_send(wire.test_os_params(osparams_secret=secret), opts)
    return cli.EXIT_SUCCESS


#: ``gnt-debug wconfd`` commands -> how many arguments each takes
_WCONFD_COMMANDS = {"echo": 1, "cleanuplocks": 0, "listlocks": 1, "listalllocks": 0,
                    "listalllocksowners": 0, "flushconfig": 0}


def wconfd(opts: Any, args: list[str]) -> int:
    """Ganeti's ``gnt-debug wconfd CMD``: the calls to its config/lock daemon,
    answered by our master daemon, which holds the config and the locks."""
    command, rest = args[0], args[1:]
    wanted = _WCONFD_COMMANDS.get(command)
    if wanted is None:
        cli.to_stderr(f"Command '{command}' not supported")
        return 1
    if len(rest) != wanted:
        cli.to_stderr(f"Command '{command}' takes "
                      + ("precisely one argument." if wanted else "no arguments."))
        return 1
    if command == "listlocks" and not (rest[0].isascii() and rest[0].isdigit()):
        return cli.usage_error(opts.command, f"invalid job id '{rest[0]}'")
    cl = cli.get_client(opts)
    if command == "echo":
        cli.to_stdout(f"Answer: {cl.Echo(rest[0])}")
    elif command == "cleanuplocks":
        for lock, owner in cl.CleanupLocks():
            cli.to_stdout(f"Released {lock} (held by {owner}, which has ended)")
        cli.to_stdout("Stale locks cleaned up.")
    elif command == "listlocks":
        cli.to_stdout(f"Answer: {cl.ListLocks(int(rest[0]))}")
    elif command == "listalllocks":
        cli.to_stdout(f"Answer: {cl.ListAllLocks()}")
    elif command == "listalllocksowners":
        cli.to_stdout(f"Answer: {cl.ListAllLocksOwners()}")
    else:
        cl.FlushConfig()
        cli.to_stdout("Configuration flushed.")
    return cli.EXIT_SUCCESS


def submit_job(opts: Any, args: list[str]) -> int:
    """Submit opcodes from JSON files (one job per file) and wait for them."""
    return cli.submit_opcode_files(opts, args)


def _format_pending(value: Any) -> str:
    if not value:
        return "-"
    return " ".join(f"{mode}:{','.join(str(o) for o in owners)}" for mode, owners in value)


def show_locks(opts: Any, args: list[str]) -> int:
    """Show the locks in the master daemon (name, mode, owner, pending)."""
    fields = cli.parse_fields(opts.output, LOCK_DEFAULT_FIELDS)
    cl = cli.get_client(opts)
    # Lock names contain "/", so they are never taken as filter text.
    qfilter = ["|"] + [["==", "name", name] for name in args] if args else None
    rounds = 0
    while True:
        result = cl.Query("lock", fields, qfilter)
        names = [f["name"] for f in result["fields"]]
        if "pending" in names:
            idx = names.index("pending")
            for row in result["data"]:
                status, value = row[idx]
                if status == 0:
                    row[idx] = [status, _format_pending(value)]
        for line in cli.format_query_table(result, headers=not opts.no_headers,
                                           separator=opts.separator):
            cli.to_stdout(line)
        rounds += 1
        if opts.interval is None or (opts.count is not None and rounds >= opts.count):
            return cli.EXIT_SUCCESS
        cli.to_stdout()
        time.sleep(opts.interval)


def show_metrics(opts: Any, args: list[str]) -> int:
    """Print the master daemon's figures (doc/metrics.md): one line per sample,
    or the OpenMetrics text that ganeti-rapi serves at ``/metrics``."""
    from ganeti import metrics
    snapshot = cli.get_client(opts).QueryMetrics()
    if args:
        snapshot = [fam for fam in snapshot if any(fam["name"].startswith(a) for a in args)]
    if opts.openmetrics:
        cli.to_stdout(metrics.render_openmetrics(snapshot).decode("utf-8").rstrip("\n"))
    else:
        for line in metrics.format_lines(snapshot):
            cli.to_stdout(line)
    return cli.EXIT_SUCCESS


_OSP_SECRET_OPT = cli.Option("--os-parameters-secret", dest="osparams_secret", default=None,
                             metavar="KEY=VAL,...",
                             help="Secret OS parameters to send (never written to the job)")
_NODE_OPT = cli.Option("-n", "--node", dest="on_nodes", action="append", default=[],
                       metavar="NODE", help="Also sleep on this node (repeatable)")
_NO_MASTER_OPT = cli.Option("--no-master", dest="on_master", action="store_false",
                            default=True, help="Do not sleep on the master")
_REPEAT_OPT = cli.Option("-r", "--repeat", dest="repeat", type=int, default=0, metavar="N",
                         help="Repeat the delay N times")
_INTERRUPTIBLE_OPT = cli.Option("-i", "--interruptible", dest="interruptible",
                                action="store_true", default=False,
                                help="Allow the delay to be interrupted (cancel/kill)")
_NO_LOCKS_OPT = cli.Option("--no-locks", dest="no_locks", action="store_true", default=False,
                           help="Do not take the node locks while sleeping")
_OP_REPEAT_OPT = cli.Option("--op-repeat", dest="op_repeat", type=int, default=1, metavar="N",
                            help="Repeat each opcode N times inside its job")
_JOB_REPEAT_OPT = cli.Option("--job-repeat", dest="job_repeat", type=int, default=1,
                             metavar="N", help="Submit each file's job N times")
_EACH_OPT = cli.Option("--each", dest="each", action="store_true", default=False,
                       help="Submit each job with its own SubmitJob call"
                            " (default: one SubmitManyJobs call)")
_TIMING_OPT = cli.Option("--timing-stats", dest="timing_stats", action="store_true",
                         default=False, help="Print timing statistics")
_INTERVAL_OPT = cli.Option("--interval", dest="interval", type=float, default=None,
                           metavar="SECONDS", help="Repeat the output every SECONDS")
_OPENMETRICS_OPT = cli.Option("--openmetrics", dest="openmetrics", action="store_true",
                              default=False, help="Print the OpenMetrics text exposition")
_COUNT_OPT = cli.Option("--count", dest="count", type=int, default=None, metavar="N",
                        help="With --interval: stop after N rounds")

commands: dict[str, cli.Command] = {
    "delay": (delay, [cli.ArgUnknown(min=1, max=1, name="DURATION")],
              [cli.SUBMIT_OPT, cli.PRINT_JOBID_OPT, cli.PRIORITY_OPT, cli.DRY_RUN_OPT,
               _NODE_OPT, _NO_MASTER_OPT, _REPEAT_OPT, _INTERRUPTIBLE_OPT, _NO_LOCKS_OPT],
              "[options] DURATION",
              "Run a delay opcode (OP_TEST_DELAY) for DURATION seconds"),
    "submit-job": (submit_job, [cli.ArgFile(min=1)],
                   [cli.SUBMIT_OPT, cli.PRIORITY_OPT, cli.VERBOSE_OPT, _OP_REPEAT_OPT,
                    _JOB_REPEAT_OPT, _EACH_OPT, _TIMING_OPT],
                   "[options] FILE...",
                   "Submit the opcodes in JSON files (a list of opcode objects each)"
                   " as jobs and wait for them"),
    "test-jobqueue": (test_jobqueue, cli.ARGS_NONE, [cli.PRIORITY_OPT], "",
                      "Test the job queue: submission checks, dependencies, and test jobs"
                      " whose notifications check the job's status"),
    "test-osparams": (test_osparams, cli.ARGS_NONE,
                      [_OSP_SECRET_OPT, cli.SUBMIT_OPT, cli.PRINT_JOBID_OPT, cli.PRIORITY_OPT],
                      "[--os-parameters-secret KEY=VAL,...]",
                      "Test the transmission of secret OS parameters (OP_TEST_OS_PARAMS):"
                      " the master names those it received"),
    "wconfd": (wconfd, [cli.ArgUnknown(min=1, name="CMD")], [],
               "echo TEXT|cleanuplocks|listlocks JOBID|listalllocks|listalllocksowners"
               "|flushconfig",
               "Ganeti's WConfd calls, answered by the master daemon"),
    "locks": (show_locks, [cli.ArgUnknown(name="LOCK")],
              [cli.NOHDR_OPT, cli.SEP_OPT, cli.FIELDS_OPT, _INTERVAL_OPT, _COUNT_OPT],
              "[options] [LOCK...]",
              "Show the master daemon's locks with their owners and waiters"),
    "metrics": (show_metrics, [cli.ArgUnknown(name="PREFIX")], [_OPENMETRICS_OPT],
                "[--openmetrics] [PREFIX...]",
                "Show the master daemon's metrics (those whose names start with a PREFIX)"),
    **relocation.DEBUG_ROWS,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-debug``."""
    return cli.generic_main(commands, argv, prog="gnt-debug")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
