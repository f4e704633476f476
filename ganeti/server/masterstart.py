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
           "catch_up_candidates", "start_heartbeat", "update_stragglers"]

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
    # no archiving in the background by a fenced master, nor while a
    # failover drains this one (doc/protocols/jobs.md, "Queue size")
    jq.archiver.may_archive = lambda: guard.fenced is None and not guard.draining
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


#: every this many heartbeats the master looks for nodes naming another master
_STRAGGLER_BEATS = 5


def update_stragglers(context: MasterContext) -> list[str]:
    """Give the configuration (and candidates the job queue) to nodes that name
    another master: an old master back after an autopromotion, a node that was
    down at the takeover (doc/ha.md, "Master autopromotion").  Returns them."""
    from ganeti.failover.quorum import collect_answers, config_node_names
    from ganeti.failover.vote import NodeAnswer
    rpc = context.rpc
    replicator = context.replicator
    if rpc is None or not isinstance(replicator, Replicator):
        return []
    me = netutils.hostname()
    names = [n for n in config_node_names(context.require_cfg().get_config_data()) if n != me]
    answers = collect_answers(rpc, names)
    stale = sorted(n for n, a in answers.items() if isinstance(a, NodeAnswer) and a.master != me)
    if not stale:
        return []
    logger.warning("Nodes naming another master: %s; giving them this master's state",
                   ", ".join(stale))
    push_everything(context, with_queue=False)
    candidates, _ = replicator.targets()
    behind = [n for n in stale if n in candidates]
    if behind:
        replicator.replicate_queue_to(behind)
    return stale


def start_heartbeat(context: MasterContext, guard: MasterGuard, lease: float,
                    stop: threading.Event) -> threading.Thread:
    """Renew the master lease every ``heartbeat_interval(lease)`` seconds while the
    configuration has ``auto_promote`` on, even with no job coming: the master
    candidates take a missing renewal for the master's death (doc/ha.md,
    "Master autopromotion"); every few beats, :func:`update_stragglers`.
    Stops with ``stop`` or when this master is fenced."""
    from ganeti.failover.autopromote import heartbeat_interval
    cfg = context.require_cfg()
    interval = heartbeat_interval(lease)

    def _beat() -> None:
        beats = 0
        while not stop.wait(interval):
            if guard.fenced is not None:
                return
            if not cfg.get_cluster_info().auto_promote:
                continue
            beats += 1
            try:
                guard.renew()
                if beats % _STRAGGLER_BEATS == 0:
                    update_stragglers(context)
            except Exception:  # the heartbeat must outlive one failed round
                logger.exception("Master lease heartbeat failed")

    thread = threading.Thread(target=_beat, name="master-heartbeat", daemon=True)
    thread.start()
    return thread
