"""``ganeti-watcher``: options, and the order of one pass (doc/watcher.md).

1. Take the node's watcher lock; if another watcher holds it, say so and
   exit (status 0: the other one does the work).
2. Unless ``--ignore-pause``, stop when ``gnt-cluster watcher pause`` is in
   force on this node.
3. On every node: make sure the node daemon runs and answers; run the
   watcher hooks.
4. On the master: make sure the master daemon (LUXI) and the RAPI daemon
   (``GET /version`` on ``--rapi-ip``) run and answer, then one pass over
   every node group (:mod:`ganeti.watcher.master`), with verify-disks
   unless ``--no-verify-disks``.  A RAPI daemon that cannot be brought
   back does not stop the group pass, but the exit status is then 1.

The exit status is 0 unless the pass itself failed (a daemon could not be
brought back, the master could not be asked).  Logs go to ``watcher.log``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ganeti import constants, errors, pathutils, ssconf
from ganeti.watcher import pause as watcherpause
from ganeti.utils import net
from ganeti.watcher import master, nodes, state

__all__ = ["parse_args", "run", "main", "rapi_address", "rapi_port", "DEFAULT_JOB_AGE",
           "EXIT_OK", "EXIT_FAILED"]

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
#: seconds after which finished jobs are archived (``--job-age``)
DEFAULT_JOB_AGE = 6 * 3600
_ANY_ADDRESS = ("0.0.0.0", "::")


def _seconds(text: str) -> float:
    """``--job-age``: seconds, or a number with ``s``/``m``/``h``/``d``."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid age {text!r}") from None


def _positive(text: str) -> float:
    """``--daemon-timeout``: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"the timeout must be positive, not {text}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line of ``ganeti-watcher``."""
    parser = argparse.ArgumentParser(
        prog="ganeti-watcher", description="One pass of the Ganeti watcher: restart what"
        " crashed, keep the daemons running, archive old jobs (doc/watcher.md)")
    parser.add_argument("-d", "--debug", action="store_true",
                        help="log debug messages, also to standard error")
    parser.add_argument("--version", action="version", version=constants.VERSION_LINE,
                        help="print the version and exit")
    parser.add_argument("--job-age", type=_seconds, default=float(DEFAULT_JOB_AGE),
                        metavar="SECONDS", help="archive finished jobs older than this"
                        " (default 6h; -1 archives every finished job)")
    parser.add_argument("--ignore-pause", action="store_true",
                        help="run even if the watcher is paused")
    parser.add_argument("--no-verify-disks", action="store_true",
                        help="do not verify the disks of the node groups")
    parser.add_argument("--wait-children", action="store_true",
                        help="wait for the jobs this pass submits and log how they ended")
    parser.add_argument("--daemon-timeout", type=_positive, default=None, metavar="SECONDS",
                        help="how long the master and RAPI daemons may take to answer"
                        " before they count as hung and are restarted (default"
                        f" {master.MASTERD_TIMEOUT:.0f} s and {master.RAPI_TIMEOUT:.0f} s)")
    parser.add_argument("--rapi-ip", default=None, metavar="ADDRESS",
                        help="address the RAPI daemon is checked on (default: the"
                        " address it listens on, $GANETI_RAPI_BIND, or else the master"
                        " node's primary address)")
    return parser.parse_args(argv)


def _luxi_factory(paths: pathutils.Paths) -> Callable[[float], master.LuxiClient]:
    def factory(timeout: float) -> master.LuxiClient:
        from ganeti import luxi
        return luxi.Client(paths.master_socket, connect_timeout=min(timeout, 10.0),
                           rw_timeout=timeout)
    return factory


def _node_pass(paths: pathutils.Paths, me: str, store: ssconf.SimpleStore) -> None:
    from ganeti.rpc.client import default_noded_port
    address = store.get_node_primary_ips().get(me)
    if address is None:
        logger.warning("This node (%s) has no primary address in ssconf; not checking"
                       " its node daemon", me)
    else:
        done = nodes.ensure_noded(paths, address, default_noded_port())
        if done:
            logger.info("Node daemon: %s", done)
    done = nodes.ensure_metad(paths, os.environ)
    if done:
        logger.info("Metadata daemon: %s", done)
    nodes.run_hooks(paths)


def rapi_address(opts: argparse.Namespace, env: Mapping[str, str], store: ssconf.SimpleStore,
                 me: str) -> str:
    """Where the master's RAPI daemon is asked: ``--rapi-ip``, else its bind address.

    The bind address is ``$GANETI_RAPI_BIND`` (as :func:`ganeti.daemonctl.start_rapi`
    starts the daemon); a daemon listening on all addresses is asked on the
    master node's primary address (loopback if ssconf does not know it).
    """
    if opts.rapi_ip:
        return str(opts.rapi_ip)
    bind = env.get(constants.ENV_RAPI_BIND, "")
    if bind and bind not in _ANY_ADDRESS:
        return bind
    return store.get_node_primary_ips().get(me) or "127.0.0.1"


def rapi_port(env: Mapping[str, str]) -> int:
    """The RAPI daemon's port: ``$GANETI_RAPI_PORT``, else the default (5080)."""
    return int(env.get(constants.ENV_RAPI_PORT) or constants.DEFAULT_RAPI_PORT)


def _rapi_pass(opts: argparse.Namespace, paths: pathutils.Paths, store: ssconf.SimpleStore,
               me: str) -> bool:
    """Make sure the RAPI daemon answers; False when it could not be brought back."""
    address = rapi_address(opts, os.environ, store, me)
    try:
        port = rapi_port(os.environ)
        timeout = opts.daemon_timeout or master.RAPI_TIMEOUT
        done = master.ensure_rapi(paths, address, port, probe=lambda: master.rapi_answers(
            address, port, paths.rapi_pem, timeout=timeout))
    except errors.GanetiError as exc:
        logger.error("The RAPI daemon could not be brought back: %s", exc)
        return False
    if done:
        logger.info("RAPI daemon: %s", done)
    return True


def _resume_takeover(paths: pathutils.Paths, me: str) -> bool:
    """Finish a takeover interrupted on this node (doc/design/failover.md,
    "Interrupted takeovers"); whether there was one and it finished."""
    import shlex

    from ganeti.failover import takeover
    from ganeti.failover.lease import LEASE_DURATION
    if takeover.read_marker(paths) is None:
        return False
    args = shlex.split(os.environ.get("GANETI_MASTERD_ARGS", ""))
    logger.warning("A takeover was interrupted on this node: finishing it")
    try:
        takeover.take_over(paths, me, out=lambda line: logger.warning("Takeover: %s", line),
                           timeout_scale=takeover.float_option(args, "--rpc-timeout-scale", 1.0),
                           lease=takeover.float_option(args, "--lease-duration", LEASE_DURATION))
    except errors.GanetiError as exc:
        logger.error("Could not finish the interrupted takeover: %s", exc)
        return False
    return True


def run(opts: argparse.Namespace, paths: pathutils.Paths, *,
        clock: Callable[[], float] = time.time) -> int:
    """One watcher pass on this node; returns the exit status."""
    lock = state.WatcherLock(paths.watcher_lock_file)
    try:
        acquired = lock.acquire()
    except (errors.GanetiError, OSError) as exc:
        msg = f"Cannot take the watcher lock: {exc}; not running (remove or fix it)"
        logger.error("%s", msg)
        sys.stderr.write(msg + "\n")
        return EXIT_FAILED
    if not acquired:
        holder = lock.holder()
        msg = ("Another watcher is already running on this node"
               f"{f' (pid {holder})' if holder else ''}; exiting")
        logger.info("%s", msg)
        sys.stderr.write(msg + "\n")
        return EXIT_OK
    try:
        until = watcherpause.read_pause(paths.watcher_pause_file, clock())
        if until is not None and not opts.ignore_pause:
            logger.info("The watcher is paused until %s; doing nothing", time.ctime(until))
            return EXIT_OK
        if until is not None:
            logger.info("The watcher is paused until %s, but --ignore-pause was given",
                        time.ctime(until))
        store = ssconf.SimpleStore(paths)
        try:
            master_name = store.get_master_node()
        except errors.GanetiError as exc:
            logger.error("This node is not part of a cluster (%s); nothing to do", exc)
            return EXIT_FAILED
        me = net.hostname()
        _node_pass(paths, me, store)
        if _resume_takeover(paths, me):
            master_name = store.get_master_node()
        if me != master_name:
            return EXIT_OK
        factory = _luxi_factory(paths)
        done = master.ensure_masterd(paths, factory,
                                     timeout=opts.daemon_timeout or master.MASTERD_TIMEOUT)
        if done:
            logger.info("Master daemon: %s", done)
        rapi_ok = _rapi_pass(opts, paths, store, me)
        report = master.master_pass(
            factory(master.MASTERD_TIMEOUT), paths,
            master.MasterOptions(job_age=opts.job_age, wait_jobs=opts.wait_children,
                                 verify_disks=not opts.no_verify_disks),
            clock=clock)
        logger.info("Pass done: %d group(s), %d job(s) submitted, %d job(s) archived",
                    len(report.groups), sum(len(g.jobs) for g in report.groups),
                    report.archived)
        return EXIT_OK if rapi_ok else EXIT_FAILED
    except (errors.GanetiError, OSError) as exc:
        logger.error("Watcher pass failed: %s", exc)
        return EXIT_FAILED
    finally:
        lock.release()


def main(argv: Sequence[str] | None = None, *,
         setup_logging: Callable[..., Any] | None = None) -> int:
    """Entry point of ``daemons/ganeti-watcher``; ``setup_logging`` installs the log."""
    opts = parse_args(argv)
    paths = pathutils.get_paths()
    if setup_logging is not None:
        setup_logging(paths.daemon_log_file(constants.WATCHER), debug=opts.debug,
                      stderr=opts.debug, program=constants.WATCHER)
    return run(opts, paths)
