"""The master daemon: LUXI server, job queue workers and the master context.

Threads: the main thread runs the LUXI loop (one selector for every
connection, :mod:`ganeti.server.luxiserver`), a request in progress runs in
a LUXI worker thread, and the job queue keeps a pool of long-lived worker
threads.

Limits that keep the daemon alive (see :mod:`ganeti.server.luxiserver`):
frames larger than ``--max-message`` get an error response and the
connection is closed; at most ``--max-clients`` connections are open (a
new one closes the connection idle the longest); a connection that has
sent no request is closed after ``--new-client-timeout`` seconds, an idle
one after ``--client-timeout``; partial frames of all connections together
are bounded by ``--max-buffered``.  Malformed requests, unknown methods and
bad arguments get ``success: false`` with an encoded error; the daemon
never dies of bad input.

SIGTERM: stop accepting, let running opcodes finish (bounded by
``--shutdown-timeout``), exit 0.  Unfinished jobs resume at the next start.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import time
from collections.abc import Callable

from ganeti import constants, errors, events
from ganeti.cmdlib import liveinfo
from ganeti.context import MasterContext
from ganeti.failover.lease import LEASE_DURATION
from ganeti.failover.quorum import MasterGuard
from ganeti.jqueue import storage as jstorage
from ganeti.pathutils import Paths
from ganeti.server import filterrules, harecovery, luxiserver, masterstart, tuning
from ganeti.server.daemon import DaemonRuntime, raise_fd_limit, run_daemon
from ganeti.server.luxi_handlers import LuxiDispatcher
from ganeti.server.luxiserver import MasterServer
from ganeti.server.mastercontext import build_context

__all__ = ["main", "LuxiDispatcher", "MasterServer", "build_context"]   # (the last three: re-exported)

logger = logging.getLogger(__name__)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=constants.DEFAULT_JOB_WORKERS,
                        help="number of job worker threads")
    parser.add_argument("--max-clients", type=int, default=luxiserver.DEFAULT_LIMITS.max_connections,
                        help="maximum number of open LUXI connections; a new one beyond that"
                             " closes the one idle the longest (default %(default)s)")
    parser.add_argument("--client-timeout", type=float,
                        default=luxiserver.DEFAULT_LIMITS.keepalive_timeout,
                        help="seconds before an idle LUXI connection that has completed a"
                             " request is closed (default %(default)s)")
    parser.add_argument("--new-client-timeout", type=float,
                        default=luxiserver.DEFAULT_LIMITS.request_timeout,
                        help="seconds before a LUXI connection that has not completed a"
                             " request yet is closed when silent (default %(default)s)")
    parser.add_argument("--max-buffered", type=int, default=luxiserver.DEFAULT_LIMITS.max_buffered,
                        help="bytes of partial LUXI messages kept for all connections"
                             " together (default %(default)s)")
    parser.add_argument("--max-message", type=int, default=luxiserver.DEFAULT_LIMITS.max_body_size,
                        help="maximum LUXI message size in bytes")
    parser.add_argument("--shutdown-timeout", type=float, default=60.0,
                        help="seconds to wait for running opcodes at shutdown")
    parser.add_argument("--sync-mode", choices=[jstorage.SYNC_SYNCFS, jstorage.SYNC_FSYNC,
                                                jstorage.SYNC_NONE],
                        default=jstorage.SYNC_SYNCFS,
                        help="how job files are made durable (none: tests only)")
    parser.add_argument("--no-rpc", action="store_true", help="do not set up node RPC")
    parser.add_argument("--node-info-max-age", type=float, default=liveinfo.DEFAULT_MAX_AGE,
                        metavar="SECONDS",
                        help="reuse a node's live data (free memory/disk) in queries for up to"
                             " this long; operations on a node drop it at once; 0: always ask"
                             " (default %(default)s)")
    parser.add_argument("--event-buffer", type=int, default=events.DEFAULT_CAPACITY,
                        metavar="EVENTS",
                        help="events kept for readers that resume (WaitForEvents;"
                             " default %(default)s)")
    parser.add_argument("--queue-limits", type=int, nargs=2, metavar=("SOFT", "HARD"),
                        default=[constants.JOB_QUEUE_SIZE_SOFT_LIMIT,
                                 constants.JOB_QUEUE_SIZE_HARD_LIMIT],
                        help="unarchived jobs kept: past SOFT the oldest finished ones are"
                             " archived once submissions pause, at HARD by the submission"
                             " itself, which is refused when too many are unfinished"
                             " (default %(default)s)")
    parser.add_argument("--rpc-timeout-scale", type=float, default=1.0,
                        help="multiply all node RPC timeouts by this, the pushes to master"
                             " candidates' (at least 3 s), the connect and TLS handshake"
                             " timeouts and a takeover's steps too (each with a floor:"
                             " doc/protocols/rpc.md) (tests: e.g. 0.05)")
    parser.add_argument("--no-voting", action="store_true",
                        help="start without the master vote (needs --yes-do-it): this node's"
                             " configuration and queue are pushed to the others")
    parser.add_argument("--yes-do-it", action="store_true",
                        help="confirm --no-voting")
    parser.add_argument("--vote-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="while too few nodes answer the master vote, ask again for up to"
                             " this long (default %(default)s)")
    parser.add_argument("--lease-duration", type=float, default=LEASE_DURATION,
                        metavar="SECONDS", help="seconds a majority confirmation lets this"
                        " master accept jobs (default %(default)s; doc/design/failover.md)")


def _check(options: argparse.Namespace, paths: Paths) -> None:
    if not os.path.exists(paths.config_file):
        raise errors.ConfigurationError(
            f"No cluster configuration at {paths.config_file}; is the cluster initialised?")
    if options.workers < 1:
        raise errors.ParameterError("--workers must be at least 1", errors.ECODE_INVAL)
    soft, hard = options.queue_limits
    if not 1 <= soft <= hard:
        raise errors.ParameterError("--queue-limits: need 1 <= SOFT <= HARD", errors.ECODE_INVAL)
    if options.event_buffer < 1:
        raise errors.ParameterError("--event-buffer must be at least 1", errors.ECODE_INVAL)
    if options.no_voting and not options.yes_do_it:
        raise errors.ParameterError("--no-voting skips the master vote and pushes this node's"
                                    " configuration and queue to every node; confirm with"
                                    " --yes-do-it", errors.ECODE_INVAL)


class _State:
    def __init__(self, context: MasterContext, server: MasterServer,
                 guard: MasterGuard | None = None) -> None:
        self.context = context
        self.server = server
        self.guard = guard


def _prepare(runtime: DaemonRuntime) -> _State:
    opts = runtime.options
    started = time.monotonic()
    raise_fd_limit()   # idle LUXI connections each hold a descriptor
    if not opts.no_rpc and not opts.no_voting:
        masterstart.resume_takeover(runtime.paths, opts)
    decision = masterstart.vote(runtime.paths, opts) if not opts.no_rpc else None
    write_checks: list[Callable[[], None]] = []
    context = build_context(runtime.paths, workers=opts.workers, sync_mode=opts.sync_mode,
                            with_rpc=not opts.no_rpc,
                            rpc_timeout_scale=opts.rpc_timeout_scale,
                            node_info_max_age=opts.node_info_max_age,
                            event_buffer=opts.event_buffer,
                            queue_limits=(opts.queue_limits[0], opts.queue_limits[1]),
                            write_checks=write_checks, redactor=runtime.redactor,
                            job_quorum=not opts.no_voting)
    guard = masterstart.make_guard(context, opts, write_checks)
    if guard is not None and opts.no_voting:
        # doc/design/failover.md, "--no-voting": the new epoch and an id
        # reservation on every node that answers, before the first job
        if not guard.renew():
            logger.warning("--no-voting: no node recorded this master's epoch and job id"
                           " reservation; jobs are refused until one does")
    if decision is not None and (opts.no_voting or decision.stale):
        # nodes that still name another master (or hold an older config) get ours
        masterstart.push_everything(context, with_queue=opts.no_voting)
    if decision is not None and not opts.no_voting:
        masterstart.catch_up_candidates(context)
    dispatcher = LuxiDispatcher(context, guard=guard)
    limits = dataclasses.replace(luxiserver.DEFAULT_LIMITS, max_connections=opts.max_clients,
                                 keepalive_timeout=opts.client_timeout,
                                 request_timeout=opts.new_client_timeout,
                                 max_body_size=opts.max_message, max_buffered=opts.max_buffered)
    server = MasterServer(runtime.paths.master_socket, dispatcher, limits=limits)
    # Ganeti 2.10+'s clients (gnt-*, htools, harep) talk to luxid's socket
    luxiserver.link_socket_alias(runtime.paths.query_socket, runtime.paths.master_socket)

    def _stop() -> None:
        server.stopping = True
        server.shutdown()

    runtime.add_stop_callback(_stop)
    logger.info("Master daemon ready in %.3fs", time.monotonic() - started)
    return _State(context, server, guard)


def _serve(runtime: DaemonRuntime, state: _State) -> None:
    # the job workers start after tuning.MASTERD froze what _prepare loaded (the
    # config's trees and the queue: long-lived, kept out of the GC's scans, or every
    # big query pays a full collection of 10,000 instances, about 80 ms; doc/scale.md)
    filterrules.apply_rules(state.context)
    state.context.require_jqueue().start()
    masterstart.start_master_ip(state.context)
    if state.guard is not None:
        masterstart.start_heartbeat(state.context, state.guard, runtime.options.lease_duration,
                                    runtime.stop_event)
    harecovery.start(state.context, runtime.stop_event)
    try:
        state.server.serve_forever(poll_interval=0.5)
    finally:
        state.server.stopping = True
        if state.context.events is not None:
            state.context.events.stop()       # end the WaitForEvents long polls
        state.server.server_close()
        try:
            os.unlink(runtime.paths.master_socket)
        except OSError:
            pass
        ok = state.context.require_jqueue().shutdown(timeout=runtime.options.shutdown_timeout)
        if not ok:
            logger.warning("Some jobs were still running at shutdown")
        replicator = state.context.replicator
        if replicator is not None and not replicator.stop(timeout=30.0):
            logger.warning("Replication to the master candidates did not finish at shutdown")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ganeti-masterd``."""
    return run_daemon(constants.MASTERD, add_options=_add_options, check_fn=_check,
                      prepare_fn=_prepare, exec_fn=_serve, argv=argv,
                      description="Ganeti master daemon (LUXI and job queue)",
                      tuning=tuning.MASTERD)


