"""The master's context: configuration, locks, node RPC, replication, events, job queue.

:func:`build_context` builds the one :class:`~ganeti.context.MasterContext`
the master daemon passes down (no hidden global state); the daemon's
start-up (:mod:`ganeti.server.masterd`) calls it once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ganeti import config, constants, events, locking
from ganeti.config import file as configfile
from ganeti.cmdlib import liveinfo
from ganeti.cmdlib.hooksrunner import HooksRunner
from ganeti.config.events import ConfigEventTracker
from ganeti.context import MasterContext
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as jstorage
from ganeti.metrics.master import MasterMetrics
from ganeti.mcpu import Processor
from ganeti.pathutils import Paths
from ganeti.redact import Redactor, VersionedSource
from ganeti.replication import REPLICATION_TIMEOUT, Replicator
from ganeti.rpc import defs
from ganeti.rpc.client import RpcRunner
from ganeti.utils import net as netutils

__all__ = ["build_context", "replication_timeout", "MIN_REPLICATION_TIMEOUT"]

logger = logging.getLogger(__name__)


def _build_rpc(cfg: config.ConfigWriter, paths: Paths,
               timeout_scale: float = 1.0, observer: Any = None) -> RpcRunner | None:
    """The node RPC runner, or None when node RPC cannot be set up yet."""
    try:
        from ganeti.rpc.client import ConfigResolver
        from ganeti.rpc.transport import HttpsTransport
        me = netutils.hostname()
        # kept connections for the read-only calls of live queries (doc/protocols/rpc.md)
        return RpcRunner(ConfigResolver(cfg),
                         HttpsTransport(paths.server_pem, keepalive=True,
                                        timeout_scale=timeout_scale),
                         timeout_scale=timeout_scale, observer=observer,
                         fence=lambda: (cfg.get_cluster_info().master_epoch, me))
    except Exception as exc:  # missing certificate on a test cluster, ...
        logger.warning("Node RPC not available: %s", exc)
        return None


#: the shortest push timeout ``--rpc-timeout-scale`` gives (a healthy push of
#: a large configuration to a loaded node must still fit)
MIN_REPLICATION_TIMEOUT = 3.0


def replication_timeout(rpc_timeout_scale: float) -> float:
    """How long one push to the master candidates may take, for a timeout scale
    (:func:`rpc.defs.scaled_timeout`, as every other scaled timeout)."""
    return defs.scaled_timeout(REPLICATION_TIMEOUT, rpc_timeout_scale, MIN_REPLICATION_TIMEOUT)


def build_context(paths: Paths, *, workers: int = constants.DEFAULT_JOB_WORKERS,
                  sync_mode: str = jstorage.SYNC_SYNCFS, with_rpc: bool = True,
                  rpc_timeout_scale: float = 1.0,
                  node_info_max_age: float = liveinfo.DEFAULT_MAX_AGE,
                  event_buffer: int = events.DEFAULT_CAPACITY,
                  queue_limits: tuple[int, int] | None = None,
                  write_checks: list[Callable[[], None]] | None = None,
                  redactor: Redactor | None = None,
                  job_quorum: bool = True) -> MasterContext:
    """Open the config, build the lock manager, RPC runner, event bus and job queue.

    The queue is loaded but its workers are not started; ``queue_limits``
    is its ``(soft, hard)`` size (default: the constants).  ``write_checks``
    run before every configuration write (the caller may fill the list
    later); one raising refuses the write and the change is undone.
    ``redactor`` (the daemon's, which its log handlers use; default a new
    one) learns the config's private values and scrubs the job queue's
    results and log entries (:mod:`ganeti.redact`).
    ``job_quorum`` False (``--no-voting``) acknowledges new jobs once they
    are on this node's disk, without waiting for a majority of the
    candidates (doc/design/replication.md, Invariant 1).
    """
    change_hooks: list[Callable[[bytes, int], None]] = []

    def _on_change(data: bytes, serial: int) -> None:
        for hook in change_hooks:
            hook(data, serial)

    figures = MasterMetrics()
    checks = write_checks if write_checks is not None else []

    def _write(path: str, raw: bytes) -> None:
        # the master lease and fencing may refuse the write: the change is undone
        for check in checks:
            check()
        configfile.write_config_file(path, raw)

    cfg = config.ConfigWriter(paths.config_file, on_change=_on_change,
                              on_write=figures.config_written, write_fn=_write)
    monitor = locking.LockMonitor()
    data = cfg.get_config_data()
    glm = locking.GanetiLockManager(
        nodes=list(data.nodes), nodegroups=list(data.nodegroups),
        instances=[inst.name for inst in data.instances.values()], monitor=monitor)
    rpc = _build_rpc(cfg, paths, rpc_timeout_scale, figures.rpc_call) if with_rpc else None
    # replication: config to candidates, ssconf to every node, job files to
    # candidates; see ganeti.replication and doc/design/replication.md
    replicator = Replicator(paths, rpc, timeout=replication_timeout(rpc_timeout_scale))
    replicator.refresh_targets(cfg.committed())
    change_hooks.append(lambda raw, serial: replicator.on_config_change(cfg, raw, serial))
    # one bus for job, instance and node events (doc/protocols/events.md)
    bus = events.EventBus(event_buffer, last_id=events.initial_event_id())
    tracker = ConfigEventTracker(bus, cfg.committed().get_config_data())

    def _config_events(raw: bytes, serial: int) -> None:
        try:   # the committed tree is exactly that of ``serial`` here
            tracker.on_change(cfg.committed().get_config_data())
        except Exception:  # never fail the config write that carried the change
            logger.exception("Cannot publish the events of configuration serial %s", serial)

    change_hooks.append(_config_events)
    context = MasterContext(paths=paths, cfg=cfg, glm=glm, lock_monitor=monitor, rpc=rpc,
                            hooks_runner=(HooksRunner(cfg, rpc, paths=paths)
                                          if rpc is not None else None))
    # the processor waits for replicator.wait_replicated (see mcpu)
    context.replicator = replicator
    context.events = bus
    context.metrics = figures
    if node_info_max_age > 0:
        context.node_info_cache = liveinfo.NodeInfoCache(node_info_max_age)
    storage = JobStorage(paths, sync_mode=sync_mode, replicate=replicator.replicate_job_file,
                         replicate_renames=replicator.replicate_renames,
                         replicate_batch=replicator.replicate_job_files,
                         replicate_drain=replicator.replicate_drain_flag,
                         wait_replicated=replicator.wait_job_quorum if job_quorum else None)
    storage.open()
    redactor = redactor if redactor is not None else Redactor()
    redactor.add_source(VersionedSource(lambda: cfg.committed().get_serial_no(),
                                        lambda: cfg.committed().get_private_values()))
    jq = JobQueue(storage, lambda: Processor(context), workers=workers, events=bus,
                  size_limits=queue_limits, metrics=figures, redactor=redactor,
                  epoch=lambda: cfg.get_cluster_info().master_epoch)
    context.jqueue = jq

    def _jobs_by_status() -> dict[str, int]:
        with jq.table.lock:
            return jq.table.status_counts()

    figures.watch(jobs_by_status=_jobs_by_status, replication_lag=replicator.candidate_lag)
    monitor.register(jq, weak=False)
    jq.load()
    return context
