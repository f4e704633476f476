"""The LUXI methods of the master daemon: each declared once, by its handler here.

A handler decorated with :func:`ganeti.luxi.luxi_method` is the LUXI method
of its name: its parameters after ``self`` are the arguments in wire order
(typed with the annotations of :mod:`ganeti.wiretypes`; one with a default
is optional), its docstring's first paragraph the one-line doc, the
decorator says how the client calls it.  ``tools/gen_luxi_client.py``
writes the rows to ``ganeti/luxi_table.py`` (:data:`ganeti.luxi.METHODS`,
which the client side reads without importing this module) and the typed
``luxi.Client`` methods (doc/design/contracts.md, "Adding a LUXI method").

:class:`LuxiDispatcher` turns one request frame into one response frame
(``handle(frame) -> bytes``, never raising for bad input): it decodes the
request, checks the master's fencing, looks the method up, checks the
arguments against the method's row of :data:`ganeti.luxi.METHODS`
(doc/protocols/luxi.md) and runs the handler.  Answers that are asked for
again and again unchanged come whole from one
:class:`~ganeti.query.answercache.AnswerCache`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ganeti import constants, errors, events, luxi, query, serializer
from ganeti.watcher import pause as watcherpause
from ganeti.cmdlib import backup as cmdlib_backup
from ganeti.cmdlib import query as cmdlib_query
from ganeti.cmdlib import drbd
from ganeti.cmdlib.cluster import cluster_info
from ganeti.cmdlib.common import find_instance, find_node
from ganeti.context import MasterContext
from ganeti.failover.quorum import MasterGuard
from ganeti.jqueue.summary import SUMMARY_FIELDS
from ganeti.locking.monitor import owners_by_lock
from ganeti.luxi import JOBS, OPS, luxi_method
from ganeti.query.answercache import AnswerCache
from ganeti.replication import Replicator
from ganeti.server.filterrules import FilterRules
from ganeti.wiretypes import JobId

__all__ = ["LuxiDispatcher"]

logger = logging.getLogger(__name__)


def _job_of(owner: str) -> int | None:
    """The job id of a job's execution thread name (``job/17`` -> 17), else None."""
    prefix, _, number = owner.partition("/")
    return int(number) if prefix == "job" and number.isdigit() else None


class _Frame:
    """A whole response frame a handler made (or took from the answer cache)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class LuxiDispatcher:
    """Answers LUXI requests: ``handle(frame) -> response bytes``.

    Each row of :data:`ganeti.luxi.METHODS` is served by the method of this
    class that declares it (``@luxi_method``, the row's name), called with
    the request's arguments once they passed the row's check
    (:func:`ganeti.luxi.check_args`).
    """

    def __init__(self, context: MasterContext, clock: Callable[[], float] = time.time,
                 guard: MasterGuard | None = None) -> None:
        self.context = context
        self._clock = clock
        self._pause_lock = threading.Lock()
        # the master lease and fencing (doc/design/failover.md); None: not checked
        self.guard = guard
        # one handler per row of the LUXI table: the method of this class that
        # declares it (the table is generated from them; test_luxi_table checks)
        missing = [name for name in luxi.METHODS if not callable(getattr(self, name, None))]
        if missing:
            raise errors.ProgrammerError(f"LUXI methods without a handler: {missing}")
        self._methods: dict[str, Callable[..., Any]] = {
            name: getattr(self, name) for name in luxi.METHODS}
        self._answers = AnswerCache()
        self._filters = FilterRules(context)

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
        try:
            result = entry(*req.args)
        except errors.GanetiError as exc:
            logger.debug("LUXI %s failed: %s", req.method, exc)
            return luxi.encode_response(False, exc)
        except Exception as exc:  # bad input must never kill the daemon
            logger.exception("LUXI %s failed unexpectedly", req.method)
            return luxi.encode_response(False, errors.GanetiError(
                f"Internal error in {req.method}: {type(exc).__name__}: {exc}"))
        if isinstance(result, _Frame):
            return result.data
        try:
            return luxi.encode_response(True, result)
        except (TypeError, ValueError, errors.GanetiError) as exc:
            logger.exception("Cannot encode the result of %s", req.method)
            return luxi.encode_response(False, errors.GanetiError(f"Cannot encode result: {exc}"))

    # handlers: each @luxi_method declares its row of luxi.METHODS ------------------
    def _submitting(self, count: int = 1) -> contextlib.AbstractContextManager[None]:
        """The guard's check of a submission, counted while it runs (a drain
        for a failover waits for it: doc/design/failover.md)."""
        if self.guard is None:
            return contextlib.nullcontext()
        return self.guard.submitting(count)

    @luxi_method(idempotent=False)
    def SubmitJob(self, ops: OPS) -> int:
        """Submit one job (a list of opcodes); returns its id."""
        with self._submitting():
            return self.context.require_jqueue().submit_job(ops)

    @luxi_method(idempotent=False)
    def SubmitJobToDrainedQueue(self, ops: OPS) -> int:
        """Like SubmitJob, ignoring the drain flag."""
        with self._submitting():
            return self.context.require_jqueue().submit_job(ops, ignore_drain=True)

    @luxi_method(idempotent=False)
    def SubmitManyJobs(self, jobs: JOBS) -> list[list[Any]]:
        """Submit several jobs; returns [success, job_id_or_error] per job."""
        with self._submitting(len(jobs)):
            return self.context.require_jqueue().submit_many_jobs(jobs)

    @luxi_method(idempotent=True, wait="timeout", client="WaitForJobChangeOnce",
                 defaults={"timeout": "constants.LUXI_WFJC_TIMEOUT"})
    def WaitForJobChange(self, job_id: JobId, fields: list[str], prev_job_info: object,
                         prev_log_serial: int | None, timeout: float) -> Any:
        """One wait for a job change: "nochange" or [job_info, log_entries]."""
        return self.context.require_jqueue().wait_for_job_change(
            job_id, fields, prev_job_info, prev_log_serial, timeout)

    @luxi_method(idempotent=False)
    def PickupJob(self, job_id: JobId) -> Any:
        """Adopt a job written to the queue by another process."""
        return self.context.require_jqueue().pickup_job(job_id)

    @luxi_method(idempotent=True)
    def ArchiveJob(self, job_id: JobId) -> bool:
        """Archive a finished job; returns whether it was archived."""
        return self.context.require_jqueue().archive_job(job_id)

    @luxi_method(idempotent=True, wait="timeout")
    def AutoArchiveJobs(self, age: float, timeout: float) -> list[int]:
        """Archive jobs older than age seconds (-1: all); returns [archived, left]."""
        return self.context.require_jqueue().auto_archive_jobs(age, timeout)

    @luxi_method(idempotent=True)
    def ChangeJobPriority(self, job_id: JobId, priority: int) -> list[Any]:
        """Change a job's priority; returns [success, message]."""
        return self.context.require_jqueue().change_job_priority(job_id, priority)

    @luxi_method(idempotent=True, result="dict[str, Any]")
    def Query(self, what: str, fields: list[str], qfilter: object) -> Any:
        """Query2: {fields: [fielddefs], data: [[[status, value], ...], ...]}."""
        made = self._query_frame(what, fields, qfilter)
        if made is not None:
            return _Frame(made)
        return cmdlib_query.run_query(self.context, what, fields, qfilter)

    @luxi_method(idempotent=True, result="dict[str, Any]")
    def QueryFields(self, what: str, fields: list[str] | None) -> Any:
        """Field definitions of a resource: {fields: [...]}."""
        return cmdlib_query.run_query_fields(what, fields)

    @luxi_method(idempotent=True, result="list[Any]")
    def QueryInstances(self, names: list[str] | None, fields: list[str],
                       use_locking: bool = False) -> list[list[Any]]:
        """Old-style instance query (rows)."""
        return self._query_old_style(constants.QR_INSTANCE, names, fields)

    @luxi_method(idempotent=True, result="list[Any]")
    def QueryNodes(self, names: list[str] | None, fields: list[str],
                   use_locking: bool = False) -> list[list[Any]]:
        """Old-style node query (rows)."""
        return self._query_old_style(constants.QR_NODE, names, fields)

    @luxi_method(idempotent=True, result="list[Any]")
    def QueryGroups(self, names: list[str] | None, fields: list[str],
                    use_locking: bool = False) -> list[list[Any]]:
        """Old-style node group query (rows)."""
        return self._query_old_style(constants.QR_GROUP, names, fields)

    @luxi_method(idempotent=True, result="list[Any]")
    def QueryNetworks(self, names: list[str] | None, fields: list[str],
                      use_locking: bool = False) -> list[list[Any]]:
        """Old-style network query (rows)."""
        return self._query_old_style(constants.QR_NETWORK, names, fields)

    @luxi_method(idempotent=True, result="dict[str, Any]")
    def QueryExports(self, nodes: list[str] | None, use_locking: bool = False) -> Any:
        """Exports per node."""
        return cmdlib_backup.query_exports(self.context, nodes, use_locking)

    @luxi_method(idempotent=True, result="dict[str, Any]")
    def QueryClusterInfo(self) -> _Frame:
        """The cluster information dict."""
        return _Frame(self._cluster_info_frame())

    @luxi_method(idempotent=True)
    def DrainMaster(self, seconds: float) -> dict[str, Any]:
        """Refuse submissions for seconds (0: accept again), then flush the replication.

        See doc/design/failover.md, "Planned failover under load".
        """
        if seconds < 0 or seconds > 600:
            raise errors.ParameterError("DrainMaster: seconds must be within 0..600",
                                        errors.ECODE_INVAL)
        if self.guard is not None:
            self.guard.drain(seconds)
        flushed = True
        replicator = self.context.replicator
        if seconds > 0:
            deadline = time.monotonic() + min(seconds, 20.0)
            # submissions that passed their check before the drain hand out
            # their job ids now: wait for them, then flush what they wrote
            if self.guard is not None:
                flushed = self.guard.wait_submissions(deadline - time.monotonic())
            if isinstance(replicator, Replicator):
                flushed = replicator.flush(
                    timeout=max(0.0, deadline - time.monotonic())) and flushed
        logger.warning("Draining for a failover: %s", f"{seconds:g}s, replication"
                       f" {'flushed' if flushed else 'NOT flushed'}" if seconds > 0 else "ended")
        return {"last_job_id": self.context.require_jqueue().storage.last_id,
                "flushed": flushed}

    # Ganeti's WConfd calls (gnt-debug wconfd): the master holds the locks and the config here
    @luxi_method(idempotent=True)
    def Echo(self, text: str) -> str:
        """Return text (WConfd echo)."""
        return text

    @luxi_method(idempotent=True)
    def FlushConfig(self) -> int:
        """Write the configuration and replicate it now; returns its serial.

        Write the configuration now (a new serial, the same objects) and wait
        until it was pushed to the master candidates, as every write is
        (per-node failures are logged and resynced by the replication)."""
        serial = self.context.require_cfg().flush()
        replicator = self.context.replicator
        if isinstance(replicator, Replicator) and not replicator.wait_replicated(serial):
            raise errors.OpExecError(f"Configuration serial {serial} was written, but not yet"
                                     " sent to the master candidates")
        return serial

    @luxi_method(idempotent=True)
    def CleanupLocks(self) -> list[list[str]]:
        """Release locks of ended owner threads; returns [lock, owner] pairs.

        Release the locks of threads that ended holding them (Ganeti: of dead
        lock owners); ``[lock, owner]`` per hold released."""
        glm = self.context.glm
        freed = glm.release_ended_owners() if glm is not None else []
        for lock, owner in freed:
            logger.warning("Released lock %s held by %s, which has ended", lock, owner)
        return [[lock, owner] for lock, owner in freed]

    def _lock_owners(self) -> list[tuple[str, list[tuple[Any, str]]]]:
        """The monitor's locks with owners; a job's thread (``job/N``) shown as N."""
        monitor = self.context.lock_monitor
        infos = monitor.query() if monitor is not None else []
        return [(name, [(_job_of(owner) or owner, mode) for owner, mode in owners])
                for name, owners in owners_by_lock(infos)]

    @luxi_method(idempotent=True)
    def ListLocks(self, job_id: JobId) -> list[list[str]]:
        """The locks a job holds: [lock, shared|exclusive] pairs."""
        wanted = int(str(job_id))   # (an int, or its decimal text: checked)
        return [[name, mode] for name, owners in self._lock_owners()
                for owner, mode in owners if owner == wanted]

    @luxi_method(idempotent=True)
    def ListAllLocks(self) -> list[str]:
        """The names of the locks held now."""
        return [name for name, _ in self._lock_owners()]

    @luxi_method(idempotent=True)
    def ListAllLocksOwners(self) -> list[list[Any]]:
        """The locks held now: [lock, [[owner, shared|exclusive], ...]]."""
        return [[name, [list(pair) for pair in owners]] for name, owners in self._lock_owners()]

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
        return self._answers.frame("QueryClusterInfo", key,
                                   lambda: luxi.encode_response(True, cluster_info(cfg)))

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
        return self._answers.frame(
            "config-query", serializer.dumps([what, fields, qfilter]),
            lambda: luxi.encode_response(True, cmdlib_query.run_query(self.context, what,
                                                                      fields, qfilter)),
            source=reader)

    def _job_list_frame(self, what: Any, fields: Any, qfilter: Any) -> bytes | None:
        """The ``Query`` response for the plain job list (``gnt-job list``:
        the filter ``UNARCHIVED_FILTER`` alone, fields a job summary holds)
        and for the unfiltered listing of every job (archived ones included),
        its rows' JSON kept per finished job (:meth:`AnswerCache.rows_json`);
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
        rows = serializer.Encoded(self._answers.rows_json(summaries, fields))
        return luxi.encode_response(True, {"fields": fielddefs, "data": rows}, spliced=True)

    def _query_old_style(self, what: str, names: Any, fields: Any) -> list[list[Any]]:
        if names is not None and not isinstance(names, list):
            raise errors.ParameterError(f"Query{what.capitalize()}s: names must be a list",
                                        errors.ECODE_INVAL)
        result = cmdlib_query.run_query(self.context, what, fields,
                                        query.make_simple_filter("name", names))
        return query.old_style_rows(result)

    @luxi_method(idempotent=True, wait="timeout",
                 defaults={"event_filter": "None", "timeout": "constants.LUXI_WFJC_TIMEOUT"})
    def WaitForEvents(self, last_id: int | None, event_filter: object,
                      timeout: float) -> dict[str, Any]:
        """Events after last_id (None: from now), waiting up to timeout.

        Events after ``last_id`` matching the filter, long-polling up to
        ``timeout`` (capped like WaitForJobChange); doc/protocols/events.md."""
        bus = self.context.events
        if bus is None:
            raise errors.ProgrammerError("This master daemon publishes no events")
        flt = events.EventFilter.from_wire(event_filter)
        timeout = min(max(0.0, timeout), constants.LUXI_WFJC_TIMEOUT)
        cursor, found = bus.wait(last_id, flt, timeout, limit=luxi.WAIT_FOR_EVENTS_LIMIT)
        return {"last_id": cursor, "events": [events.event_to_dict(e) for e in found]}

    @luxi_method(idempotent=True, result="list[Any]")
    def QueryFilters(self, uuids: list[str] | None, fields: list[str]) -> list[list[Any]]:
        """Old-style job filter rule query (rows; uuids empty or None: all).

        The rows of job filter rule fields (doc/jobfilters.md).
        """
        result = cmdlib_query.run_query(self.context, constants.QR_FILTER, fields,
                                        query.make_simple_filter("uuid", uuids or None))
        return query.old_style_rows(result)

    @luxi_method(idempotent=False)
    def ReplaceFilter(self, uuid: str | None, priority: int, predicates: list,
                      action: object, reason: list) -> str:
        """Add (uuid None) or replace a job filter rule; returns its UUID."""
        return self._filters.replace(uuid, priority, predicates, action, reason)

    @luxi_method(idempotent=False, result="Any")
    def DeleteFilter(self, uuid: str) -> None:
        """Remove a job filter rule."""
        self._filters.delete(uuid)

    @luxi_method(idempotent=True)
    def QueryMetrics(self) -> list[dict[str, Any]]:
        """The master daemon's figures (metric families, see ganeti.metrics).

        The master's figures as plain data (doc/metrics.md).
        """
        figures = self.context.metrics
        return figures.snapshot() if figures is not None else []

    @luxi_method(idempotent=True)
    def CancelJob(self, job_id: JobId, kill: bool = False) -> list[Any]:
        """Cancel a queued or waiting job; returns [success, message]."""
        return self.context.require_jqueue().cancel_job(job_id, kill=bool(kill))

    @luxi_method(idempotent=True, result="list[Any]")
    def QueryJobs(self, job_ids: list[JobId] | None, fields: list[str]) -> Any:
        """Rows of job fields; None in place of an unknown job."""
        if job_ids is not None and not isinstance(job_ids, list):
            raise errors.ParameterError("QueryJobs: job ids must be a list or null",
                                        errors.ECODE_INVAL)
        return self.context.require_jqueue().query_jobs(job_ids, fields)

    def _watcher_pause(self) -> int | None:
        return watcherpause.read_pause(self.context.paths.watcher_pause_file, self._clock())

    @luxi_method(idempotent=True)
    def SetWatcherPause(self, until: float | None) -> Any:
        """Pause the watcher until a timestamp (None: resume).

        Store the pause on the master, then on every other online node (as Ganeti).

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

    @luxi_method(idempotent=True, result="Any")
    def SetDrainFlag(self, flag: bool) -> bool:
        """Set or clear the job queue drain flag."""
        if not isinstance(flag, bool):
            raise errors.ParameterError("SetDrainFlag: expected a boolean", errors.ECODE_INVAL)
        self.context.require_jqueue().set_drain_flag(flag)
        return True

    @luxi_method(idempotent=True)
    def QueryNodeDrbd(self, node: str) -> list[list[Any]]:
        """DRBD minors of a node from the configuration (rows as gnt-node list-drbd).

        The DRBD minors the configuration gives ``node`` (Ganeti answers this from
        confd): ``[node, minor, instance, "disk/N", role, peer]`` rows."""
        cfg = self.context.committed_cfg()
        found = find_node(cfg, node)
        if found is None:
            raise errors.OpPrereqError(f"Node '{node}' not known", errors.ECODE_NOENT)
        return drbd.node_drbd_minors(cfg, found.uuid)

    @luxi_method(idempotent=True)
    def QueryConfigValues(self, fields: list[str]) -> list[Any]:
        """Cluster configuration values (cluster_name, drain_flag, ...)."""
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

    @luxi_method(idempotent=True)
    def QueryTags(self, kind: str, name: str | None) -> list[str]:
        """Tags of one object (kind: cluster, node, instance, nodegroup, network)."""
        cfg = self.context.committed_cfg()
        if kind == constants.TAG_CLUSTER:
            obj: Any = cfg.get_cluster_info()
        elif kind == constants.TAG_NODE:
            obj = find_node(cfg, name) if isinstance(name, str) else None
        elif kind == constants.TAG_INSTANCE:
            obj = find_instance(cfg, name) if isinstance(name, str) else None
        elif kind == constants.TAG_NODEGROUP:
            obj = cfg.get_nodegroup_by_name(name) if isinstance(name, str) else None
        elif kind == constants.TAG_NETWORK:
            data = cfg.get_config_data()
            obj = next((n for n in data.networks.values() if n.name == name), None)
        else:
            raise errors.ParameterError(f"Invalid tag kind '{kind}'", errors.ECODE_INVAL)
        if obj is None:
            raise errors.OpPrereqError(f"{kind} '{name}' not found", errors.ECODE_NOENT)
        return sorted(obj.tags)
