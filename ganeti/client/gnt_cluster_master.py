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

__all__ = ["commands", "master_failover", "master_ping", "show_master"]


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


def _float_arg(args: list[str], name: str, default: float) -> float:
    """The value of ``name VALUE`` among the master daemon arguments, else ``default``."""
    for idx, arg in enumerate(args[:-1]):
        if arg == name:
            try:
                return float(args[idx + 1])
            except ValueError:
                return default
    return default


def master_failover(opts: Any, args: list[str]) -> int:
    """Make this master candidate the master (see the module docstring)."""
    from ganeti import bootstrap, pathutils
    from ganeti.failover import catchup, quorum, takeover, vote
    from ganeti.failover.lease import LEASE_DURATION, RESERVE_BLOCK
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
    scale = _float_arg(extra, "--rpc-timeout-scale", 1.0)
    lease = _float_arg(extra, "--lease-duration", LEASE_DURATION)

    def out(line: str) -> None:
        if os.environ.get("GANETI_FAILOVER_TIMES"):   # benchmarks: where the time goes
            line = f"[{time.monotonic() - started:6.2f}s] {line}"
        cli.to_stdout(line)

    data = takeover.load_local_config(paths)
    takeover.check_taker(data, me)
    old = takeover.master_ip_params(data)["name"]
    rpc = takeover.node_rpc(paths, data, me, timeout_scale=scale)
    out(f"Master vote on {me} (the master is {old}):")
    if not opts.no_voting:
        catchup.catch_up_jobs(rpc, paths, data, me, out)
    decision = quorum.run_vote(rpc, data, me, mode=vote.MODE_FAILOVER,
                               no_voting=opts.no_voting)
    out(decision.message)
    if not decision.ok:
        cli.to_stderr(f"Failover refused: {decision.reason}")
        return cli.EXIT_FAILURE
    takeover.set_epoch(rpc, decision.epoch)
    if old in decision.missing:
        out(f"{old}: not stopped (no answer to the vote: {decision.missing[old]})")
        stopped = False
    else:
        stopped = takeover.stop_old_master(rpc, data, out)
    if stopped and not opts.no_voting:
        # the old master flushed its last job updates: vote again for the final numbers
        data = takeover.load_local_config(paths)
        catchup.catch_up_jobs(rpc, paths, data, me, out)
        final = quorum.run_vote(rpc, data, me, mode=vote.MODE_FAILOVER)
        if not final.ok:
            out(final.message)
            cli.to_stderr(f"Failover refused after stopping {old}: {final.reason}. Start the"
                          f" master daemon on {old} again, or fail over to the node with the"
                          " newer data")
            return cli.EXIT_FAILURE
        decision = vote.Decision(True, final.reason, final.message,
                                 queue_serial=final.queue_serial,
                                 config_serial=final.config_serial, missing=final.missing,
                                 # our own epoch, unless someone accepted a newer one meanwhile
                                 epoch=(decision.epoch if final.epoch - 1 <= decision.epoch
                                        else final.epoch))
        takeover.set_epoch(rpc, decision.epoch)
    new = takeover.write_takeover_config(paths, data, me, decision)
    catchup.clear_drain_flag(paths, out)
    serial = takeover.raise_queue_serial(paths, decision.queue_serial)
    out(f"{me}: configuration serial {new.serial_no}, master epoch {decision.epoch},"
        f" next job id {serial + 1}")
    takeover.fence_majority(rpc, new, me, decision.epoch, serial + RESERVE_BLOCK,
                            new.serial_no + RESERVE_BLOCK, out)
    if not stopped:
        out(f"waiting {lease:g}s for the master lease of {old} to run out")
        time.sleep(lease + 0.5)
    failed = takeover.push_config(rpc, paths, new, me, out, skip=decision.missing)
    if opts.no_voting:
        failed += takeover.push_queue(rpc, paths, new, me, out)
    # both at once: the RAPI daemon only needs the master daemon for requests
    import threading
    rapi_error: list[str] = []

    def _rapi() -> None:
        try:
            bootstrap.start_rapi(paths)
        except errors.GanetiError as exc:
            rapi_error.append(str(exc))

    rapi = threading.Thread(target=_rapi, name="start-rapi")
    rapi.start()
    try:
        bootstrap.start_masterd(paths, extra_args=extra)
    finally:
        rapi.join()
    out(f"{me}: ganeti-masterd started")
    out(f"{me}: ganeti-rapi NOT started: {rapi_error[0]}" if rapi_error
        else f"{me}: ganeti-rapi started")
    out(f"{me} is the master now ({time.monotonic() - started:.2f}s);"
        f" {old} stays a master candidate")
    if failed:
        out(f"Warning: not updated: {', '.join(sorted(set(failed)))}; they get the"
            " configuration with the next change")
    return cli.EXIT_SUCCESS


_O = cli.Option
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
}
