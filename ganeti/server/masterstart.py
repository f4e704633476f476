"""The master daemon's start-up steps around the vote (doc/design/failover.md).

Finishing an interrupted takeover, the start-up vote, the master lease
and fencing guard, pushing this node's state to the others
(``--no-voting``, stale nodes), bringing the candidates' queues up to
date and activating the master IP.  :mod:`ganeti.server.masterd` calls
them in that order.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections.abc import Callable

from ganeti import errors
from ganeti.context import MasterContext
from ganeti.failover import takeover
from ganeti.failover.quorum import MasterGuard, voter_change
from ganeti.failover.vote import Decision
from ganeti.pathutils import Paths
from ganeti.replication import Replicator
from ganeti.utils import net as netutils

__all__ = ["start_master_ip", "resume_takeover", "vote", "make_guard", "push_everything",
           "catch_up_candidates", "start_heartbeat"]

logger = logging.getLogger(__name__)


def start_master_ip(context: MasterContext) -> threading.Thread | None:
    """Activate the master IP in the background at startup (best effort, logged).

    Returns the thread doing it, or None when no master network device is
    configured or node RPC is not available.
    """
    from ganeti.cmdlib import roles
    cfg = context.require_cfg()
    if context.rpc is None or not cfg.get_cluster_info().master_netdev:
        return None

    def _activate() -> None:
        try:
            roles.activate_master_ip(cfg, context.rpc)
            logger.info("Master IP activated")
        except errors.GanetiError as exc:
            logger.warning("Could not activate the master IP at startup: %s", exc)

    thread = threading.Thread(target=_activate, name="master-ip-startup", daemon=True)
    thread.start()
    return thread


def resume_takeover(paths: Paths, opts: argparse.Namespace) -> None:
    """Finish a takeover interrupted on this node before voting (doc/design/failover.md,
    "Interrupted takeovers"); raises when it was refused or lost."""
    marker = takeover.read_marker(paths)
    if marker is None:
        return
    logger.warning("A takeover of master epoch %s was interrupted here: finishing it",
                   marker.epoch)
    takeover.take_over(paths, netutils.hostname(), out=lambda line: logger.warning(
        "Takeover: %s", line), timeout_scale=opts.rpc_timeout_scale,
        lease=opts.lease_duration)


def vote(paths: Paths, opts: argparse.Namespace) -> Decision:
    """The start-up vote (doc/design/failover.md, "Master daemon startup"); raises if refused."""
    me = netutils.hostname()
    if opts.no_voting:
        logger.warning("Starting WITHOUT the master vote (--no-voting --yes-do-it): this"
                       " node's configuration and job queue will overwrite the other nodes',"
                       " and new jobs are acknowledged without a majority of the candidates")
    decision = takeover.startup_vote(paths, me, no_voting=opts.no_voting,
                                     retry_for=opts.vote_timeout,
                                     timeout_scale=opts.rpc_timeout_scale,
                                     log=lambda msg: logger.warning("Master vote: %s", msg))
    for line in decision.message.splitlines():
        (logger.warning if opts.no_voting else logger.info)("Master vote: %s", line)
    return decision


def make_guard(context: MasterContext, opts: argparse.Namespace,
           write_checks: list[Callable[[], None]],
           clock: Callable[[], float] = time.monotonic) -> MasterGuard | None:
    """The master lease and fencing state, wired to the RPC runner (None without RPC)."""
    rpc = context.rpc
    if rpc is None:
        return None
    cfg = context.require_cfg()
    jq = context.require_jqueue()
    me = netutils.hostname()

    def nodes() -> tuple[list[str], str, int]:
        # the voters of the configuration on disk: a change that adds one
        # counts it from the write after (doc/design/failover.md, "Lease voters")
        live = cfg.get_config_data()
        voters, _ = voter_change(cfg.committed().get_config_data(), live)
        return voters, me, live.cluster.master_epoch

    def check_write() -> None:
        _, leaving = voter_change(cfg.committed().get_config_data(), cfg.get_config_data())
        guard.check_config_write(cfg.get_serial_no(), fresh=bool(leaving))

    guard = MasterGuard(rpc, nodes, lambda: jq.storage.last_id, cfg.get_serial_no,
                        duration=opts.lease_duration, clock=clock,
                        timeout=min(10.0, max(5.0, 60.0 * opts.rpc_timeout_scale)),
                        enforce=not opts.no_voting)
    rpc.on_fenced = guard.on_fenced
    write_checks.append(check_write)
    return guard


def push_everything(context: MasterContext, *, with_queue: bool) -> None:
    """Push this node's configuration (and with ``with_queue``, for ``--no-voting``,
    its whole queue) to the other nodes."""
    cfg = context.require_cfg()
    replicator = context.replicator
    if not isinstance(replicator, Replicator):
        return
    candidates, nodes = replicator.targets()
    logger.warning("Pushing configuration serial %s to %s and ssconf to %s",
                   cfg.get_serial_no(), ", ".join(candidates) or "nobody",
                   ", ".join(nodes) or "nobody")
    replicator.on_config_change(cfg, cfg.dump(), cfg.get_serial_no())
    if with_queue and candidates:
        logger.warning("--no-voting: copying the whole job queue to %s", ", ".join(candidates))
        replicator.replicate_queue_to(candidates)


def catch_up_candidates(context: MasterContext) -> None:
    """Queue a copy of this master's whole queue to every candidate.

    What candidates missed before this start (a previous master's replication
    in memory was lost with it, or they were down) reaches them now, with
    the queue serial and drain flag, before any new job file: nothing about
    stale candidates survives a restart otherwise (doc/design/replication.md,
    "Master start-up").
    """
    replicator = context.replicator
    if not isinstance(replicator, Replicator):
        return
    candidates, _ = replicator.targets()
    if candidates:
        logger.info("Bringing the job queue of %s up to date", ", ".join(candidates))
        replicator.replicate_queue_to(candidates)


def start_heartbeat(context: MasterContext, guard: MasterGuard, lease: float,
                    stop: threading.Event) -> threading.Thread:
    """Renew the master lease every ``heartbeat_interval(lease)`` seconds while the
    configuration has ``auto_promote`` on, even with no job coming: the master
    candidates take a missing renewal for the master's death (doc/ha.md,
    "Master autopromotion").  Stops with ``stop`` or when this master is fenced."""
    from ganeti.failover.autopromote import heartbeat_interval
    cfg = context.require_cfg()
    interval = heartbeat_interval(lease)

    def _beat() -> None:
        while not stop.wait(interval):
            if guard.fenced is not None:
                return
            if not cfg.get_cluster_info().auto_promote:
                continue
            try:
                guard.renew()
            except Exception:  # the heartbeat must outlive one failed round
                logger.exception("Master lease heartbeat failed")

    thread = threading.Thread(target=_beat, name="master-heartbeat", daemon=True)
    thread.start()
    return thread
