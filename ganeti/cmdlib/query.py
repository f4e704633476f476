"""Query resources (query2) and the OP_QUERY/OP_QUERY_FIELDS logical units.

A :class:`QueryResource` ties a field table (:mod:`ganeti.query`) to a
``collect(context, qfilter, needs) -> (items, ctx)`` function.
:data:`RESOURCES` lists the resources known so far (``job``, ``lock``);
domain modules add theirs with one row each (instance, node, group, os,
cluster...), e.g. ``RESOURCES[constants.QR_NODE] = QueryResource(...)`` in
:func:`build_resources`.

:func:`run_query` and :func:`run_query_fields` answer LUXI ``Query`` and
``QueryFields`` (and the opcodes).
"""

from __future__ import annotations

import dataclasses

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors, query
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.context import MasterContext
from ganeti.opcodes.query import OpQuery, OpQueryFields
from ganeti.query.filter import OP_AND, OP_NOT, OP_TRUE
from ganeti.utils.names import expand_names

__all__ = ["QueryResource", "RESOURCES", "run_query", "run_query_fields",
           "LUQuery", "LUQueryFields", "JOB_FIELDS", "LOCK_FIELDS", "FILTER_FIELDS",
           "UNARCHIVED_FILTER"]

Collect = Callable[[MasterContext, Any, set[str]], tuple[list[Any], Any]]


@dataclass(frozen=True)
class QueryResource:
    """One queryable resource: its fields and how to collect its items."""

    name: str
    table: query.FieldTable
    collect: Collect
    namefield: str | None = "name"
    #: all item names, for resources whose items may be named by a unique
    #: short name (nodes, instances: "node2" for "node2.example.com")
    all_names: Callable[[MasterContext], list[str]] | None = None
    #: the field whose values given in a simple filter order the rows
    #: (default ``namefield``; jobs: their ids)
    order_field: str | None = None


#: Job fields a job summary lacks: asking for (or filtering on) one of them
#: reads the job files (``needs``); the others are answered from memory
#: (doc/protocols/jobs.md, "Job summaries").
_FILE_FIELDS = frozenset(["ops", "opresult", "oplog", "opstart", "opexec", "opend"])
_NEEDS_FILE = frozenset(["file"])


def _job_field(name: str, title: str, kind: str, doc: str) -> query.FieldDef:
    return query.FieldDef(name, title, kind, doc, lambda ctx, job: job.get_field(name),
                          needs=_NEEDS_FILE if name in _FILE_FIELDS else frozenset())


JOB_FIELDS = query.make_table([
    _job_field("id", "ID", constants.QFT_NUMBER, "Job ID"),
    _job_field("status", "Status", constants.QFT_TEXT, "Job status"),
    _job_field("priority", "Prio", constants.QFT_NUMBER, "Current job priority"),
    _job_field("ops", "OpCodes", constants.QFT_OTHER, "List of all opcodes"),
    _job_field("opresult", "OpCode_result", constants.QFT_OTHER, "List of opcode results"),
    _job_field("opstatus", "OpCode_status", constants.QFT_OTHER, "List of opcode statuses"),
    _job_field("oplog", "OpCode_log", constants.QFT_OTHER, "List of opcode logs"),
    _job_field("opstart", "OpCode_start", constants.QFT_OTHER, "Opcode start timestamps"),
    _job_field("opexec", "OpCode_exec", constants.QFT_OTHER, "Opcode execution start timestamps"),
    _job_field("opend", "OpCode_end", constants.QFT_OTHER, "Opcode end timestamps"),
    _job_field("oppriority", "OpCode_prio", constants.QFT_OTHER, "Opcode priorities"),
    _job_field("summary", "Summary", constants.QFT_OTHER, "Summary of the opcodes"),
    _job_field("received_ts", "Received", constants.QFT_OTHER, "Timestamp of job submission"),
    _job_field("start_ts", "Start", constants.QFT_OTHER, "Timestamp of job start"),
    _job_field("end_ts", "End", constants.QFT_OTHER, "Timestamp of job end"),
    _job_field("archived", "Archived", constants.QFT_BOOL, "Whether the job is archived"),
])


#: The conjunct that limits a ``job`` query to unarchived jobs (what
#: ``gnt-job list`` sends without ``--archived``, as in Ganeti 3.x).
UNARCHIVED_FILTER = [OP_NOT, [OP_TRUE, "archived"]]


def _conjuncts(qfilter: Any) -> list[Any]:
    """The top-level conjuncts of a filter (nested ``&`` flattened)."""
    if qfilter is None:
        return []
    if isinstance(qfilter, (list, tuple)) and qfilter and qfilter[0] == OP_AND:
        return [c for sub in qfilter[1:] for c in _conjuncts(sub)]
    return [qfilter]


def _is_unarchived_filter(flt: Any) -> bool:
    return (isinstance(flt, (list, tuple)) and len(flt) == 2 and flt[0] == OP_NOT
            and isinstance(flt[1], (list, tuple)) and list(flt[1]) == UNARCHIVED_FILTER[1])


def _collect_jobs(context: MasterContext, qfilter: Any, needs: set[str]) -> tuple[list[Any], Any]:
    """Jobs for a ``job`` query.

    Archived jobs are included unless the filter has the
    :data:`UNARCHIVED_FILTER` conjunct at its top level, so the plain job
    list never scans the archive.  A conjunct naming job ids (``["|",
    ["==", "id", 1], ...]``) limits the lookup to those ids (archived or
    not; the filter itself then decides).  Unless a field needs the job
    files (``needs``), jobs are their in-memory summaries, archived ones
    included (:class:`ganeti.jqueue.archive.ArchiveIndex`).
    """
    conjuncts = _conjuncts(qfilter)
    unarchived_only = any(_is_unarchived_filter(c) for c in conjuncts)
    ids = None
    for conj in conjuncts:
        names = query.requested_names(conj, "id")
        if names:
            try:
                ids = sorted({int(n) for n in names})
            except (TypeError, ValueError):
                continue
            break
    jq = context.require_jqueue()
    # (test fakes of the queue may have no summaries)
    get_summaries = getattr(jq, "get_summaries", None)
    if "file" in needs or get_summaries is None:
        jobs = [j for j in jq.get_jobs(ids) if j is not None]
    else:
        jobs = [j for j in get_summaries(ids) if j is not None]
    if ids is None and not unarchived_only:
        # archived jobs too: their summaries from memory unless a field needs
        # the files (test fakes of the queue may have no archive)
        get_archived = getattr(jq, "get_archived_jobs" if "file" in needs
                               or get_summaries is None else "get_archived_summaries", None)
        if get_archived is not None:
            jobs.extend(get_archived(exclude={j.id for j in jobs}))
    # rows come in id order (the resource has no name field to sort on: ids
    # are ints, and sorting the rows by nice_sort_key costs a third of a list)
    jobs.sort(key=lambda job: job.id)
    return jobs, None


def _lock_getter(key: str) -> Any:
    return lambda ctx, item: item.get(key)


LOCK_FIELDS = query.make_table([
    query.FieldDef("name", "Name", constants.QFT_TEXT, "Lock name", _lock_getter("name")),
    query.FieldDef("mode", "Mode", constants.QFT_OTHER, "Mode in which the lock is currently acquired"
                   " (exclusive or shared)", _lock_getter("mode")),
    query.FieldDef("owner", "Owner", constants.QFT_OTHER, "Current lock owner(s)",
                   _lock_getter("owner")),
    query.FieldDef("pending", "Pending", constants.QFT_OTHER, "Jobs waiting for the lock",
                   _lock_getter("pending")),
])


def _collect_locks(context: MasterContext, qfilter: Any, needs: set[str]) -> tuple[list[Any], Any]:
    monitor = context.lock_monitor
    return (list(monitor.query()) if monitor is not None else []), None


def _filter_getter(key: str) -> Callable[[Any, Any], Any]:
    return lambda ctx, rule: rule.get(key)


#: Fields of the ``filter`` resource (job filter rules, doc/jobfilters.md),
#: Ganeti's names, titles and kinds.
FILTER_FIELDS = query.make_table([
    query.FieldDef("action", "Action", constants.QFT_OTHER, "Filter action",
                   _filter_getter("action")),
    query.FieldDef("predicates", "Predicates", constants.QFT_OTHER, "List of filter predicates",
                   _filter_getter("predicates")),
    query.FieldDef("priority", "Priority", constants.QFT_OTHER, "Filter priority",
                   _filter_getter("priority")),
    query.FieldDef("reason_trail", "ReasonTrail", constants.QFT_OTHER,
                   "Reason why this filter was added", _filter_getter("reason_trail")),
    query.FieldDef("uuid", "UUID", constants.QFT_OTHER, "Filter ID", _filter_getter("uuid")),
    query.FieldDef("watermark", "Watermark", constants.QFT_OTHER,
                   "Highest job ID used at the time when the filter was added",
                   _filter_getter("watermark")),
])


def _collect_filters(context: MasterContext, qfilter: Any,
                     needs: set[str]) -> tuple[list[Any], Any]:
    rules = context.committed_cfg().get_filters()
    return [rules[uuid] for uuid in sorted(rules)], None


def _node_group_cluster_resources() -> dict[str, QueryResource]:
    """Rows for ``node``, ``group`` and ``cluster`` (fields live in their LU modules)."""
    from ganeti.cmdlib import cluster, group, node
    return {
        constants.QR_NODE: QueryResource(constants.QR_NODE, node.NODE_FIELDS,
                                         node.collect_nodes, "name",
                                         lambda c: c.committed_cfg().get_node_names()),
        constants.QR_GROUP: QueryResource(constants.QR_GROUP, group.GROUP_FIELDS,
                                          group.collect_groups, "name"),
        constants.QR_CLUSTER: QueryResource(constants.QR_CLUSTER, cluster.CLUSTER_FIELDS,
                                            cluster.collect_cluster, None),
    }


def _instance_resource() -> QueryResource:
    from ganeti.cmdlib import instance_query
    return QueryResource(constants.QR_INSTANCE, instance_query.INSTANCE_FIELDS,
                         instance_query.collect_instances, "name",
                         lambda c: c.committed_cfg().get_instance_names())


def _os_resource() -> QueryResource:
    from ganeti.cmdlib import os as cmdlib_os
    return QueryResource(constants.QR_OS, cmdlib_os.OS_FIELDS, cmdlib_os.collect_os)


def _network_resource() -> QueryResource:
    from ganeti.cmdlib import network
    return QueryResource(constants.QR_NETWORK, network.NETWORK_FIELDS, network.collect_networks,
                         "name")


def _export_resource() -> QueryResource:
    from ganeti.cmdlib import backup
    return QueryResource(constants.QR_EXPORT, backup.EXPORT_FIELDS, backup.collect_exports, None)


def _extstorage_resource() -> QueryResource:
    from ganeti.cmdlib import extstorage
    return QueryResource(constants.QR_EXTSTORAGE, extstorage.EXTSTORAGE_FIELDS,
                         extstorage.collect_extstorage)


def build_resources() -> dict[str, QueryResource]:
    """The resource table; add one row per new resource here."""
    return {
        constants.QR_JOB: QueryResource(constants.QR_JOB, JOB_FIELDS, _collect_jobs, None,
                                        order_field="id"),
        constants.QR_LOCK: QueryResource(constants.QR_LOCK, LOCK_FIELDS, _collect_locks, "name"),
        constants.QR_FILTER: QueryResource(constants.QR_FILTER, FILTER_FIELDS, _collect_filters,
                                           "uuid"),
        constants.QR_INSTANCE: _instance_resource(),
        constants.QR_OS: _os_resource(),
        constants.QR_EXPORT: _export_resource(),
        constants.QR_NETWORK: _network_resource(),
        constants.QR_EXTSTORAGE: _extstorage_resource(),
        **_node_group_cluster_resources(),
    }


def _with_upstream_names(resources: dict[str, QueryResource]) -> dict[str, QueryResource]:
    """Every table plus Ganeti 3.0's field names (ganeti/cmdlib/query_upstream.py)."""
    from ganeti.cmdlib import query_upstream
    return {what: dataclasses.replace(res, table=query_upstream.extend(what, res.table))
            for what, res in resources.items()}


RESOURCES: dict[str, QueryResource] = _with_upstream_names(build_resources())


def _resource(what: Any) -> QueryResource:
    res = RESOURCES.get(what) if isinstance(what, str) else None
    if res is None:
        raise errors.OpPrereqError(f"Resource type '{what}' is not queryable (yet)",
                                   errors.ECODE_INVAL)
    return res


def _expand_short_names(context: MasterContext, res: QueryResource, qfilter: Any) -> Any:
    """A simple name filter with unique short names replaced by the full names.

    Only a filter that just lists names (:func:`query.requested_names`) is
    rewritten; any other filter compares names as given.
    """
    if res.all_names is None or res.namefield is None:
        return qfilter
    wanted = query.requested_names(qfilter, res.namefield)
    if not wanted or not all(isinstance(w, str) for w in wanted):
        return qfilter
    full = list(dict.fromkeys(expand_names(wanted, res.all_names(context))))
    return qfilter if full == wanted else query.make_simple_filter(res.namefield, full)


def run_query(context: MasterContext, what: Any, fields: Any, qfilter: Any) -> dict[str, Any]:
    """Answer ``Query(what, fields, qfilter)``.

    Raises :class:`errors.OpPrereqError` for unknown resources,
    :class:`errors.ParameterError` for bad field lists and
    :class:`errors.QueryFilterParseError` for bad filters.
    """
    res = _resource(what)
    qfilter = _expand_short_names(context, res, qfilter)
    needs = query.required_data(res.table, fields, qfilter)
    items, ctx = res.collect(context, qfilter, needs)
    return query.query(res.table, items, ctx, fields, qfilter, namefield=res.namefield,
                       order_field=res.order_field)


def run_query_fields(what: Any, fields: Any) -> dict[str, Any]:
    """Answer ``QueryFields(what, fields)`` (``fields`` None: all)."""
    res = _resource(what)
    if fields is not None and (not isinstance(fields, list)
                               or not all(isinstance(f, str) for f in fields)):
        raise errors.ParameterError("Field names must be a list of strings", errors.ECODE_INVAL)
    return query.query_fields(res.table, fields)


class LUQuery(NoHooksLU[OpQuery]):
    """Query a resource through the job queue (OP_QUERY)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}
        _resource(self.op.what)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        return run_query(self.context, self.op.what, self.op.fields, self.op.qfilter)


class LUQueryFields(NoHooksLU[OpQueryFields]):
    """Describe a resource's fields (OP_QUERY_FIELDS)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        return run_query_fields(self.op.what, self.op.fields)
