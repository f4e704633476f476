"""``gnt-cluster master-failover``, ``master-ping`` and ``getmaster``.

These verbs work without (or against) the master daemon: ``getmaster``
reads this node's ssconf, so it answers on every node; ``master-ping``
exits 0 only when the master daemon answers; ``master-failover``, run on
a master candidate, makes it the master after the master vote, printing
what it did node by node (doc/design/failover.md, "Takeover").  The
commands are merged into ``gnt-cluster``'s table (``gnt_cluster.commands``).
"""

from __future__ import annotations

import os
import time

from ganeti import cli, errors
from ganeti.client.cluster_common import masterd_args

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["commands", "master_failover", "master_ping", "show_master", "activate_master_ip",
           "deactivate_master_ip"]


def show_master(opts: Any, args: list[str]) -> int:
    """Print the master node named by this node's ssconf (works on every node)."""
    from ganeti import pathutils, ssconfstore
    try:
        name = ssconfstore.SimpleStore(pathutils.get_paths()).get_master_node()
    except errors.GanetiError as exc:
        cli.to_stderr(f"Cannot read the master node from ssconf: {exc}")
        return cli.EXIT_FAILURE
    cli.to_stdout(name)
    return cli.EXIT_SUCCESS


def master_ping(opts: Any, args: list[str]) -> int:
    """Exit 0 when the master daemon answers a query, 1 otherwise."""
    from ganeti import luxi, pathutils
    try:
        luxi.Client(pathutils.get_paths().master_socket, connect_timeout=5.0,
                    rw_timeout=10.0).QueryConfigValues(["master_node"])
    except errors.GanetiError as exc:
        cli.to_stderr(f"Master daemon not answering: {exc}")
        return cli.EXIT_FAILURE
    return cli.EXIT_SUCCESS


def _start_daemons(paths: Any, me: str, extra: list[str], out: Any) -> None:
    """Start the master daemon and ``ganeti-rapi`` here, both at once (the RAPI
    daemon only needs the master daemon for requests)."""
    import threading

    from ganeti import daemonctl
    from ganeti.failover import faultpoints
    rapi_error: list[str] = []

    def _rapi() -> None:
        try:
            daemonctl.start_rapi(paths)
        except errors.GanetiError as exc:
            rapi_error.append(str(exc))

    rapi = threading.Thread(target=_rapi, name="start-rapi")
    rapi.start()
    try:
        daemonctl.start_masterd(paths, extra_args=extra)
    finally:
        rapi.join()
    faultpoints.reached("after_masterd_start")
    out(f"{me}: ganeti-masterd started")
    out(f"{me}: ganeti-rapi NOT started: {rapi_error[0]}" if rapi_error
        else f"{me}: ganeti-rapi started")


def master_failover(opts: Any, args: list[str]) -> int:
    """Make this master candidate the master (see the module docstring).

    Resumes a takeover interrupted on this node; on a node that is the
    master in its configuration but runs no master daemon (a takeover
    killed after its push), starts the daemons.
    """
    from ganeti import constants, daemonctl, pathutils
    from ganeti.failover import takeover
    from ganeti.failover.lease import LEASE_DURATION
    from ganeti.utils import net
    if opts.no_voting and not opts.yes_do_it:
        cli.to_stderr("--no-voting skips the master vote: this node's configuration and job"
                      " queue then overwrite every other node's, even if they are newer."
                      " Confirm with --yes-do-it")
        return cli.EXIT_USAGE
    started = time.monotonic()
    paths = pathutils.get_paths()
    me = net.hostname()
    extra = masterd_args()
    scale = takeover.float_option(extra, "--rpc-timeout-scale", 1.0)
    lease = takeover.float_option(extra, "--lease-duration", LEASE_DURATION)

    def out(line: str) -> None:
        if os.environ.get("GANETI_FAILOVER_TIMES"):   # benchmarks: where the time goes
            line = f"[{time.monotonic() - started:6.2f}s] {line}"
        cli.to_stdout(line)

    if takeover.read_marker(paths) is None and not opts.no_voting:
        data = takeover.load_local_config(paths)
        if takeover.master_ip_params(data)["name"] == me \
                and daemonctl.daemon_pid(paths, constants.MASTERD) is None:
            out(f"{me} is the master in its configuration but its master daemon does not run"
                " (an interrupted takeover?): starting the daemons")
            _start_daemons(paths, me, extra, out)
            return cli.EXIT_SUCCESS
    try:
        done = takeover.take_over(paths, me, no_voting=opts.no_voting, out=out,
                                  timeout_scale=scale, lease=lease)
    except takeover.TakeoverRefused as exc:
        cli.to_stderr(str(exc))
        return cli.EXIT_FAILURE
    try:
        _start_daemons(paths, me, extra, out)
    except errors.GanetiError as exc:
        now = takeover.master_ip_params(takeover.load_local_config(paths))["name"]
        if now == me:
            raise
        # a later takeover (another candidate's) replaced this one before its
        # master daemon started: that one is the master, nothing here runs
        daemonctl.stop_daemon(paths, constants.RAPI)
        cli.to_stderr(f"Failover superseded: {now} took over after this node did and is"
                      f" the master now; this node's master daemon did not start ({exc})")
        return cli.EXIT_FAILURE
    out(f"{me} is the master now ({time.monotonic() - started:.2f}s);"
        f" {done.old} stays a master candidate")
    if done.failed:
        out(f"Warning: not updated: {', '.join(sorted(set(done.failed)))}; they get the"
            " configuration with the next change")
    return cli.EXIT_SUCCESS


def activate_master_ip(opts: Any, args: list[str]) -> int:
    """Activate the master IP address on the master node."""
    from ganeti.opcodes import wire
    cli.submit_or_send(wire.cluster_activate_master_ip(), opts)
    return cli.EXIT_SUCCESS


def deactivate_master_ip(opts: Any, args: list[str]) -> int:
    """Deactivate the master IP address (asks for confirmation without --yes)."""
    from ganeti.opcodes import wire
    if not cli.confirm("This will disable the master IP. All the open connections to the"
                       " master IP will be closed.", forced=opts.confirm, flag="--yes"):
        return cli.EXIT_FAILURE
    cli.submit_or_send(wire.cluster_deactivate_master_ip(), opts)
    return cli.EXIT_SUCCESS


_O = cli.Option
CONFIRM_OPT = _O("--yes", dest="confirm", action="store_true", default=False,
                 help="Do not ask for confirmation")
NO_VOTING_OPT = _O("--no-voting", dest="no_voting", action="store_true", default=False,
                   help="Skip the master vote (e.g. a two-node cluster whose other node is"
                        " down for good); this node's data then wins everywhere")
YES_DO_IT_OPT = _O("--yes-do-it", dest="yes_do_it", action="store_true", default=False,
                   help="Confirm --no-voting")

commands: dict[str, cli.Command] = {
    "master-failover": (master_failover, cli.ARGS_NONE, [NO_VOTING_OPT, YES_DO_IT_OPT],
                        "[--no-voting [--yes-do-it]]",
                        "Make this master candidate the master: vote, take over the"
                        " configuration and queue, move the master daemons and IP"),
    "master-ping": (master_ping, cli.ARGS_NONE, [], "",
                    "Exit 0 when the master daemon answers, 1 otherwise"),
    "getmaster": (show_master, cli.ARGS_NONE, [], "",
                  "Print the name of the master node (from this node's ssconf)"),
    "activate-master-ip": (activate_master_ip, cli.ARGS_NONE, [cli.SUBMIT_OPT], "",
                           "Activate the master IP address on the master node"),
    "deactivate-master-ip": (deactivate_master_ip, cli.ARGS_NONE,
                             [CONFIRM_OPT, cli.SUBMIT_OPT], "[--yes]",
                             "Deactivate the master IP address on the master node"),
}
