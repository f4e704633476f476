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
import gc
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ganeti import (config, configfile, constants, errors, events, locking, luxi, query,
                    serializer, watcherpause)
from ganeti.cmdlib import backup as cmdlib_backup
from ganeti.cmdlib import query as cmdlib_query
from ganeti.cmdlib.cluster import cluster_info
from ganeti.cmdlib.common import find_instance, find_node
from ganeti.cmdlib import liveinfo
from ganeti.cmdlib.hooksrunner import HooksRunner
from ganeti.failover.lease import LEASE_DURATION
from ganeti.configevents import ConfigEventTracker
from ganeti.context import MasterContext
from ganeti.failover import takeover
from ganeti.failover.quorum import MasterGuard
from ganeti.failover.vote import Decision
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as jstorage
from ganeti.jqueue.lookup import SummaryRowCache
from ganeti.jqueue.summary import SUMMARY_FIELDS
from ganeti.mastermetrics import MasterMetrics
from ganeti.mcpu import Processor
from ganeti.pathutils import Paths
from ganeti.redact import Redactor, VersionedSource
from ganeti.replication import REPLICATION_TIMEOUT, Replicator
from ganeti.rpc.client import RpcRunner
from ganeti.server import luxiserver
from ganeti.server.daemon import DaemonRuntime, raise_fd_limit, run_daemon
from ganeti.server.luxiserver import MasterServer
from ganeti.utils import net as netutils

__all__ = ["main", "LuxiDispatcher", "MasterServer", "build_context"]

logger = logging.getLogger(__name__)


class LuxiDispatcher:
    """Maps LUXI method names to handlers; ``handle(frame) -> response bytes``."""

    def __init__(self, context: MasterContext, clock: Callable[[], float] = time.time,
                 guard: MasterGuard | None = None) -> None:
        self.context = context
        self._clock = clock
        self._pause_lock = threading.Lock()
        jq = context.require_jqueue()
        # the master lease and fencing (doc/design/failover.md); None: not checked
        self.guard = guard

        def check(count: int = 1) -> None:
            if self.guard is not None:
                self.guard.check_submit(count)

        def many(jobs: Any) -> Any:
            check(len(jobs) if isinstance(jobs, list) else 1)
            return jq.submit_many_jobs(jobs)

        def one(ops: Any, ignore_drain: bool = False) -> int:
            check()
            return jq.submit_job(ops, ignore_drain=ignore_drain)

        # name -> handler; the arguments are checked against luxi.METHOD_ARGS first
        self._methods: dict[str, Callable[..., Any]] = {
            "SubmitJob": one,
            "SubmitJobToDrainedQueue": lambda ops: one(ops, ignore_drain=True),
            "SubmitManyJobs": many,
            "WaitForJobChange": jq.wait_for_job_change,
            "PickupJob": jq.pickup_job,
            "CancelJob": self._cancel_job,
            "ArchiveJob": jq.archive_job,
            "AutoArchiveJobs": jq.auto_archive_jobs,
            "ChangeJobPriority": jq.change_job_priority,
            "QueryJobs": self._query_jobs,
            "Query": lambda what, fields, qfilter:
                cmdlib_query.run_query(context, what, fields, qfilter),
            "QueryFields": cmdlib_query.run_query_fields,
            "QueryInstances": lambda names, fields, use_locking=False:
                self._query_old_style(constants.QR_INSTANCE, names, fields),
            "QueryNetworks": lambda names, fields, use_locking=False:
                self._query_networks(names, fields),
            "QueryNodes": lambda names, fields, use_locking=False:
                self._query_old_style(constants.QR_NODE, names, fields),
            "QueryGroups": lambda names, fields, use_locking=False:
                self._query_old_style(constants.QR_GROUP, names, fields),
            "QueryExports": lambda nodes, use_locking=False:
                cmdlib_backup.query_exports(context, nodes, use_locking),
            "QueryConfigValues": self._query_config_values,
            "QueryClusterInfo": lambda: cluster_info(context.committed_cfg()),  # see _frames
            "QueryTags": self._query_tags,
            "SetDrainFlag": self._set_drain_flag,
            "SetWatcherPause": self._set_watcher_pause,
            "WaitForEvents": self._wait_for_events,
            "QueryMetrics": self._query_metrics,
            "DrainMaster": self._drain_master,
        }
        # methods whose response frame is made (or cached) as a whole: name ->
        # frame maker, called with the request's arguments; None: ask the handler
        self._frames: dict[str, Callable[..., bytes | None]] = {
            "QueryClusterInfo": self._cluster_info_frame,
            "Query": self._query_frame,
        }
        self._info_frame: tuple[tuple[Any, ...], bytes] | None = None
        self._job_rows = SummaryRowCache()
        # the last config-only Query answer: (committed reader, arguments, frame)
        self._config_frame: tuple[weakref.ref[Any], str, bytes] | None = None
        unchecked = set(self._methods) - set(luxi.METHOD_ARGS)
        if unchecked:
            raise errors.ProgrammerError(f"LUXI methods without an argument table row:"
                                         f" {sorted(unchecked)}")

    def handle(self, frame: bytes) -> bytes:
        """Answer one request frame; never raises for bad input."""
        try:
            req = luxi.parse_request(frame)
        except errors.GanetiError as exc:
            return luxi.encode_response(False, exc)
        if self.guard is not None:
            try:   # a master fenced by a majority answers nothing but who the master is
                self.guard.check_request()
            except errors.NotMasterError as exc:
                return luxi.encode_response(False, exc)
        entry = self._methods.get(req.method)
        if entry is None:
            return luxi.encode_response(False, errors.ProtocolError(
                f"Unknown or unsupported LUXI method '{req.method}'"))
        try:
            luxi.check_args(req.method, req.args)
        except errors.ParameterError as exc:
            return luxi.encode_response(False, exc)
        make_frame = self._frames.get(req.method)
        try:
            if make_frame is not None:
                made = make_frame(*req.args)
                if made is not None:
                    return made
            result = entry(*req.args)
        except errors.GanetiError as exc:
            logger.debug("LUXI %s failed: %s", req.method, exc)
            return luxi.encode_response(False, exc)
        except Exception as exc:  # bad input must never kill the daemon
            logger.exception("LUXI %s failed unexpectedly", req.method)
            return luxi.encode_response(False, errors.GanetiError(
                f"Internal error in {req.method}: {type(exc).__name__}: {exc}"))
        try:
            return luxi.encode_response(True, result)
        except (TypeError, ValueError, errors.GanetiError) as exc:
            logger.exception("Cannot encode the result of %s", req.method)
            return luxi.encode_response(False, errors.GanetiError(f"Cannot encode result: {exc}"))

    # handlers ------------------------------------------------------------------
    def _drain_master(self, seconds: float) -> dict[str, Any]:
        """Refuse submissions for ``seconds`` (0: accept again), then flush the
        replication (doc/design/failover.md, "Planned failover under load")."""
        if seconds < 0 or seconds > 600:
            raise errors.ParameterError("DrainMaster: seconds must be within 0..600",
                                        errors.ECODE_INVAL)
        if self.guard is not None:
            self.guard.drain(seconds)
        flushed = True
        replicator = self.context.replicator
        if seconds > 0 and isinstance(replicator, Replicator):
            flushed = replicator.flush(timeout=min(seconds, 20.0))
        logger.warning("Draining for a failover: %s", f"{seconds:g}s, replication"
                       f" {'flushed' if flushed else 'NOT flushed'}" if seconds > 0 else "ended")
        return {"last_job_id": self.context.require_jqueue().storage.last_id,
                "flushed": flushed}

    def _cluster_info_frame(self) -> bytes:
        """The QueryClusterInfo response, encoded once per configuration state.

        Keyed on the config serial and the cluster object's own serial and
        mtime (a change undone after a failed write and made again reuses a
        config serial, never the cluster's mtime); everything in the answer
        comes from the cluster object and the master node's name.
        """
        cfg = self.context.committed_cfg()
        cluster = cfg.get_cluster_info()
        key = (cfg.get_serial_no(), cluster.serial_no, cluster.mtime, cfg.get_master_node_name())
        cached = self._info_frame
        if cached is not None and cached[0] == key:
            return cached[1]
        frame = luxi.encode_response(True, cluster_info(cfg))
        self._info_frame = (key, frame)
        return frame

    def _query_frame(self, what: Any, fields: Any, qfilter: Any) -> bytes | None:
        """A ``Query`` response made here, or None (the handler answers it):
        :meth:`_job_list_frame`, or :meth:`_config_query_frame`."""
        if what == constants.QR_JOB:
            return self._job_list_frame(what, fields, qfilter)
        if what == constants.QR_INSTANCE:
            return self._config_query_frame(what, fields, qfilter)
        return None

    def _config_query_frame(self, what: str, fields: Any, qfilter: Any) -> bytes | None:
        """The response of a query that reads the committed configuration
        only (no field or filter needs live or other data), kept for the
        last such query: asked again while the committed configuration is
        the same tree (the same reader object: every commit makes a new
        one), the same frame.  None for queries that need more.
        """
        table = cmdlib_query.RESOURCES[what].table
        try:
            if query.required_data(table, fields, qfilter):
                return None
        except errors.GanetiError:
            return None   # (the general path reports bad fields)
        reader = self.context.committed_cfg()
        args = serializer.dumps([what, fields, qfilter])
        cached = self._config_frame
        if cached is not None and cached[0]() is reader and cached[1] == args:
            return cached[2]
        frame = luxi.encode_response(True, cmdlib_query.run_query(self.context, what, fields,
                                                                  qfilter))
        self._config_frame = (weakref.ref(reader), args, frame)
        return frame

    def _job_list_frame(self, what: Any, fields: Any, qfilter: Any) -> bytes | None:
        """The ``Query`` response for the plain job list (``gnt-job list``:
        the filter ``UNARCHIVED_FILTER`` alone, fields a job summary holds)
        and for the unfiltered listing of every job (archived ones included),
        its rows' JSON kept per finished job (:class:`SummaryRowCache`);
        None for any other query.  Byte for byte the frame of
        ``cmdlib_query.run_query``'s result: the unarchived jobs in id
        order, every cell normal.
        """
        if (what != constants.QR_JOB
                or (qfilter != cmdlib_query.UNARCHIVED_FILTER and qfilter is not None)
                or not fields or not SUMMARY_FIELDS.issuperset(fields)):
            return None   # (the arguments were checked: fields is a list of strings)
        jq = self.context.require_jqueue()
        get_summaries = getattr(jq, "get_summaries", None)
        get_archived = getattr(jq, "get_archived_summaries", None)
        if get_summaries is None or get_archived is None:   # (test fakes of the queue)
            return None
        summaries = [s for s in get_summaries(None) if s is not None]
        if qfilter is None:        # every job, the archived ones too (from memory)
            summaries += get_archived(exclude={s.id for s in summaries})
            summaries.sort(key=attrgetter("id"))
        fielddefs = query.query_fields(cmdlib_query.JOB_FIELDS, fields)["fields"]
        rows = self._job_rows.rows_json(summaries, fields)
        text = f'{{"success":true,"result":{{"fields":{serializer.dumps(fielddefs)},"data":{rows}}}}}'
        return text.encode("utf-8") + luxi.ETX

    def _query_old_style(self, what: str, names: Any, fields: Any) -> list[list[Any]]:
        if names is not None and not isinstance(names, list):
            raise errors.ParameterError(f"Query{what.capitalize()}s: names must be a list",
                                        errors.ECODE_INVAL)
        result = cmdlib_query.run_query(self.context, what, fields,
                                        query.make_simple_filter("name", names))
        return query.old_style_rows(result)

    @staticmethod
    def _query_networks(names: Any, fields: Any) -> list[list[Any]]:
        """Old-style QueryNetworks: this project has no networks yet, so no rows;
        naming a network is an unknown-entity error (doc/protocols/luxi.md)."""
        if names:
            raise errors.OpPrereqError(f"Network(s) {', '.join(map(str, names))} not known",
                                       errors.ECODE_NOENT)
        return []

    def _wait_for_events(self, last_id: int | None, event_filter: Any,
                         timeout: float) -> dict[str, Any]:
        """Events after ``last_id`` matching the filter, long-polling up to
        ``timeout`` (capped like WaitForJobChange); doc/protocols/events.md."""
        bus = self.context.events
        if bus is None:
            raise errors.ProgrammerError("This master daemon publishes no events")
        flt = events.EventFilter.from_wire(event_filter)
        timeout = min(max(0.0, timeout), constants.LUXI_WFJC_TIMEOUT)
        cursor, found = bus.wait(last_id, flt, timeout, limit=luxi.WAIT_FOR_EVENTS_LIMIT)
        return {"last_id": cursor, "events": [events.event_to_dict(e) for e in found]}

    def _query_metrics(self) -> list[dict[str, Any]]:
        """The master's figures as plain data (doc/metrics.md)."""
        figures = self.context.metrics
        return figures.snapshot() if figures is not None else []

    def _cancel_job(self, job_id: Any, kill: Any = False) -> list[Any]:
        return self.context.require_jqueue().cancel_job(job_id, kill=bool(kill))

    def _query_jobs(self, job_ids: Any, fields: Any) -> Any:
        if job_ids is not None and not isinstance(job_ids, list):
            raise errors.ParameterError("QueryJobs: job ids must be a list or null",
                                        errors.ECODE_INVAL)
        return self.context.require_jqueue().query_jobs(job_ids, fields)

    def _watcher_pause(self) -> int | None:
        return watcherpause.read_pause(self.context.paths.watcher_pause_file, self._clock())

    def _set_watcher_pause(self, until: Any) -> Any:
        """Store the pause on the master, then on every other online node (as Ganeti).

        Nodes that fail are named in an :class:`errors.OpExecError`; the
        pause is set everywhere else.
        """
        until = watcherpause.check_until(until)
        with self._pause_lock:   # concurrent requests: the last one wins everywhere
            watcherpause.write_pause(self.context.paths.watcher_pause_file, until)
            cfg, rpc = self.context.committed_cfg(), self.context.rpc
            if rpc is None:
                return until
            master = cfg.get_master_node_name()
            others = [n.name for n in cfg.get_all_nodes_info().values()
                      if n.name != master and not n.offline]
            if not others:
                return until
            results = rpc.call_set_watcher_pause(sorted(others), until=until)
        failed = [f"{name} ({res.fail_msg})" for name, res in sorted(results.items())
                  if res.fail_msg and not res.offline]
        if failed:
            raise errors.OpExecError("Watcher pause was set where possible, but failed on"
                                     f" the following node(s): {', '.join(failed)}")
        return until

    def _set_drain_flag(self, flag: Any) -> bool:
        if not isinstance(flag, bool):
            raise errors.ParameterError("SetDrainFlag: expected a boolean", errors.ECODE_INVAL)
        self.context.require_jqueue().set_drain_flag(flag)
        return True

    def _query_config_values(self, fields: Any) -> list[Any]:
        if not isinstance(fields, list):
            raise errors.ParameterError("QueryConfigValues: fields must be a list",
                                        errors.ECODE_INVAL)
        cfg = self.context.committed_cfg()
        cluster = cfg.get_cluster_info()
        jq = self.context.require_jqueue()
        getters: dict[str, Callable[[], Any]] = {
            "cluster_name": lambda: cluster.cluster_name,
            "master_node": lambda: cfg.get_master_node_name(),
            "drain_flag": lambda: jq.is_drained(),
            "watcher_pause": self._watcher_pause,
            "volume_group_name": lambda: cluster.volume_group_name,
            "enabled_hypervisors": lambda: list(cluster.enabled_hypervisors),
            "default_hypervisor": lambda: cluster.primary_hypervisor,
            "cluster_tags": lambda: sorted(cluster.tags),
            "uuid": lambda: cluster.uuid,
            "software_version": lambda: constants.RELEASE_VERSION,
        }
        result = []
        for name in fields:
            getter = getters.get(name) if isinstance(name, str) else None
            if getter is None:
                raise errors.ParameterError(f"Unknown config value '{name}'", errors.ECODE_INVAL)
            result.append(getter())
        return result

    def _query_tags(self, kind: Any, name: Any) -> list[str]:
        cfg = self.context.committed_cfg()
        if kind == constants.TAG_CLUSTER:
            obj: Any = cfg.get_cluster_info()
        elif kind == constants.TAG_NODE:
            obj = find_node(cfg, name) if isinstance(name, str) else None
        elif kind == constants.TAG_INSTANCE:
            obj = find_instance(cfg, name) if isinstance(name, str) else None
        elif kind == constants.TAG_NODEGROUP:
            obj = cfg.get_nodegroup_by_name(name)
        elif kind == constants.TAG_NETWORK:
            data = cfg.get_config_data()
            obj = next((n for n in data.networks.values() if n.name == name), None)
        else:
            raise errors.ParameterError(f"Invalid tag kind '{kind}'", errors.ECODE_INVAL)
        if obj is None:
            raise errors.OpPrereqError(f"{kind} '{name}' not found", errors.ECODE_NOENT)
        return sorted(obj.tags)


def _build_rpc(cfg: config.ConfigWriter, paths: Paths,
               timeout_scale: float = 1.0, observer: Any = None) -> RpcRunner | None:
    """The node RPC runner, or None when node RPC cannot be set up yet."""
    try:
        from ganeti.rpc import defs as rpc_defs
        from ganeti.rpc.client import ConfigResolver
        from ganeti.rpc.transport import HttpsTransport
        timeouts = ({k: v * timeout_scale for k, v in rpc_defs.TIMEOUTS.items()}
                    if timeout_scale != 1.0 else None)
        me = netutils.hostname()
        # kept connections for the read-only calls of live queries (doc/protocols/rpc.md)
        return RpcRunner(ConfigResolver(cfg), HttpsTransport(paths.server_pem, keepalive=True),
                         timeouts=timeouts, observer=observer,
                         fence=lambda: (cfg.get_cluster_info().master_epoch, me))
    except Exception as exc:  # missing certificate on a test cluster, ...
        logger.warning("Node RPC not available: %s", exc)
        return None


#: the shortest push timeout ``--rpc-timeout-scale`` gives (a healthy push of
#: a large configuration to a loaded node must still fit)
MIN_REPLICATION_TIMEOUT = 3.0


def replication_timeout(rpc_timeout_scale: float) -> float:
    """How long one push to the master candidates may take, for a timeout scale."""
    if rpc_timeout_scale == 1.0:
        return REPLICATION_TIMEOUT
    return max(MIN_REPLICATION_TIMEOUT, REPLICATION_TIMEOUT * rpc_timeout_scale)


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
                         replicate_rename=replicator.replicate_rename,
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


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=constants.DEFAULT_JOB_WORKERS,
                        help="number of job worker threads")
    parser.add_argument("--max-clients", type=int, default=luxiserver.DEFAULT_MAX_CLIENTS,
                        help="maximum number of open LUXI connections; a new one beyond that"
                             " closes the one idle the longest (default %(default)s)")
    parser.add_argument("--client-timeout", type=float,
                        default=luxiserver.DEFAULT_CLIENT_TIMEOUT,
                        help="seconds before an idle LUXI connection that has completed a"
                             " request is closed (default %(default)s)")
    parser.add_argument("--new-client-timeout", type=float,
                        default=luxiserver.DEFAULT_NEW_CLIENT_TIMEOUT,
                        help="seconds before a LUXI connection that has not completed a"
                             " request yet is closed when silent (default %(default)s)")
    parser.add_argument("--max-buffered", type=int, default=luxiserver.DEFAULT_MAX_BUFFERED,
                        help="bytes of partial LUXI messages kept for all connections"
                             " together (default %(default)s)")
    parser.add_argument("--max-message", type=int, default=constants.LUXI_MAX_MESSAGE,
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
                             " archived, past HARD submissions are refused"
                             " (default %(default)s)")
    parser.add_argument("--rpc-timeout-scale", type=float, default=1.0,
                        help="multiply all node RPC timeouts by this, the pushes to master"
                             " candidates' too (at least 3 s) (tests: e.g. 0.05)")
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


def _resume_takeover(paths: Paths, opts: argparse.Namespace) -> None:
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


def _vote(paths: Paths, opts: argparse.Namespace) -> Decision:
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


def _guard(context: MasterContext, opts: argparse.Namespace,
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
        data = cfg.get_config_data()
        return sorted(n.name for n in data.nodes.values()), me, data.cluster.master_epoch

    guard = MasterGuard(rpc, nodes, lambda: jq.storage.last_id, cfg.get_serial_no,
                        duration=opts.lease_duration, clock=clock,
                        timeout=min(10.0, max(5.0, 60.0 * opts.rpc_timeout_scale)),
                        enforce=not opts.no_voting)
    rpc.on_fenced = guard.on_fenced
    write_checks.append(lambda: guard.check_config_write(cfg.get_serial_no()))
    return guard


def _push_everything(context: MasterContext, *, with_queue: bool) -> None:
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


def _catch_up_candidates(context: MasterContext) -> None:
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


class _State:
    def __init__(self, context: MasterContext, server: MasterServer) -> None:
        self.context = context
        self.server = server


def _prepare(runtime: DaemonRuntime) -> _State:
    opts = runtime.options
    started = time.monotonic()
    raise_fd_limit()   # idle LUXI connections each hold a descriptor
    gc.disable()       # loading makes only long-lived objects: no collections meanwhile
    luxiserver.limit_malloc_arenas()
    luxiserver.fix_mmap_threshold()   # big blocks go back to the system when freed
    if not opts.no_rpc and not opts.no_voting:
        _resume_takeover(runtime.paths, opts)
    decision = _vote(runtime.paths, opts) if not opts.no_rpc else None
    write_checks: list[Callable[[], None]] = []
    context = build_context(runtime.paths, workers=opts.workers, sync_mode=opts.sync_mode,
                            with_rpc=not opts.no_rpc,
                            rpc_timeout_scale=opts.rpc_timeout_scale,
                            node_info_max_age=opts.node_info_max_age,
                            event_buffer=opts.event_buffer,
                            queue_limits=(opts.queue_limits[0], opts.queue_limits[1]),
                            write_checks=write_checks, redactor=runtime.redactor,
                            job_quorum=not opts.no_voting)
    guard = _guard(context, opts, write_checks)
    if guard is not None and opts.no_voting:
        # doc/design/failover.md, "--no-voting": the new epoch and an id
        # reservation on every node that answers, before the first job
        if not guard.renew():
            logger.warning("--no-voting: no node recorded this master's epoch and job id"
                           " reservation; jobs are refused until one does")
    if decision is not None and (opts.no_voting or decision.stale):
        # nodes that still name another master (or hold an older config) get ours
        _push_everything(context, with_queue=opts.no_voting)
    if decision is not None and not opts.no_voting:
        _catch_up_candidates(context)
    dispatcher = LuxiDispatcher(context, guard=guard)
    server = MasterServer(runtime.paths.master_socket, dispatcher, max_clients=opts.max_clients,
                          client_timeout=opts.client_timeout,
                          new_client_timeout=opts.new_client_timeout,
                          max_message=opts.max_message, max_buffered=opts.max_buffered)
    # the config (its working and committed trees, see ganeti.config) and the
    # queue loaded now are long-lived: keep them out of the cyclic GC's scans,
    # or every big query pays a full collection of 10,000 instances (about
    # 80 ms; doc/scale.md)
    gc.collect()
    gc.freeze()
    gc.enable()
    context.require_jqueue().start()
    start_master_ip(context)

    def _stop() -> None:
        server.stopping = True
        server.shutdown()

    runtime.add_stop_callback(_stop)
    logger.info("Master daemon ready in %.3fs", time.monotonic() - started)
    return _State(context, server)


def _serve(runtime: DaemonRuntime, state: _State) -> None:
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
                      description="Ganeti master daemon (LUXI and job queue)")


