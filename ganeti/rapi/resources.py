"""RAPI v2 resources as data: one :class:`Route` row per path and method.

A row either *reads* (its ``read`` function asks the master over LUXI and
returns the JSON result) or *submits* (its ``build`` function returns the
opcodes of one job; :func:`dispatch` adds the generic ``dry-run`` and
``reason`` parameters, validates the opcodes locally and submits them; the
result is the job id as a bare JSON number).  Each row declares the body
it accepts (:class:`ganeti.rapi.opinput.Body`: for a submitting row, the
parameters of its own opcode, derived from the opcode class), and
:func:`dispatch` refuses any other key, ``OP_ID`` included, before the
row runs: a body never chooses the opcode.  Paths are matched segment by
segment before percent-decoding (:mod:`ganeti.rapi.uri`).  Adding a
resource is adding a row to :data:`ROUTES`.  Nothing here opens a socket:
the client passed in is a :class:`ganeti.luxi.Client` (or its fake), called
through its typed methods.

Paths, parameters and results follow Ganeti's Remote API v2 (doc/rapi.md).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, errors, luxi, opcodes
from ganeti.rapi import openapi, stream, uri
from ganeti.rapi.opinput import ANY_JSON, NO_BODY, STRINGS, Body
from ganeti.opcodes import wire

__all__ = ["Ctx", "Route", "RawBody", "ROUTES", "FEATURES", "match", "dispatch", "dispatch_ops",
           "write_routes",
           "I_FIELDS", "N_FIELDS", "N_ALIASES", "G_FIELDS", "J_FIELDS", "J_FIELDS_BULK",
           "RAPI_REASON_SOURCE", "RAPI_VERSION", "allowed_methods"]

#: the reason-trail source of every opcode submitted through RAPI
RAPI_REASON_SOURCE = "gnt:client:rapi"
#: the result of ``GET /version``
RAPI_VERSION = 2
#: how long ``/2/jobs/[id]/wait`` waits for a change (seconds)
WAIT_TIMEOUT = 10.0
#: how long a read that runs a job (``/console``) waits for its result (seconds)
JOB_WAIT_TIMEOUT = 60.0
#: features Ganeti clients probe (only those implemented here)
FEATURES = ["instance-create-reqv1", "instance-reinstall-reqv1", "node-evac-res1",
            "node-migrate-reqv1", "instance-multi-alloc"]

_COMMON = ["ctime", "mtime", "uuid", "serial_no", "tags"]
I_FIELDS = ["name", "admin_state", "os", "pnode", "snodes", "disk_template",
            "nic.ips", "nic.macs", "nic.modes", "nic.uuids", "nic.names", "nic.links",
            "nic.networks", "nic.networks.names", "nic.bridges", "network_port",
            "disk.sizes", "disk.spindles", "disk_usage", "disk.uuids", "disk.names",
            "beparams", "hvparams", "oper_state", "oper_ram", "oper_vcpus", "status",
            "custom_hvparams", "custom_beparams", "custom_nicparams", "custom_osparams",
            *_COMMON]
N_FIELDS = ["name", "offline", "master_candidate", "drained", "dtotal", "dfree",
            "sptotal", "spfree", "mtotal", "mnode", "mfree", "pinst_cnt",
            "sinst_cnt", "ctotal", "cnos", "cnodes", "csockets", "pip", "sip", "role",
            "pinst_list", "sinst_list", "master_capable", "vm_capable", "ndparams",
            "group.uuid", *_COMMON]
G_FIELDS = ["alloc_policy", "name", "node_cnt", "node_list", "ipolicy", "custom_ipolicy",
            "diskparams", "custom_diskparams", "ndparams", "custom_ndparams", *_COMMON]
J_FIELDS_BULK = ["id", "ops", "status", "summary", "opstatus", "received_ts", "start_ts",
                 "end_ts"]
J_FIELDS = [*J_FIELDS_BULK, "oplog", "opresult"]

#: extra keys of ``GET /2/nodes/[node]``: the same value under the opcode's name
N_ALIASES = {"sip": "secondary_ip"}

_ROLE_NAMES = {"M": "master", "C": "master-candidate", "R": "regular", "D": "drained",
               "O": "offline"}


def _bad(msg: str) -> errors.HttpError:
    return errors.HttpError(msg, 400)


@dataclass
class Ctx:
    """One request as the handlers see it."""

    method: str
    args: dict[str, str]
    query: dict[str, list[str]]
    body: Any
    client: luxi.Client
    user: str | None = None
    path: str = ""
    clock: Callable[[], float] = time.time
    #: the row's body declaration (set by :func:`dispatch`)
    spec: Body = NO_BODY

    def qstr(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def qbool(self, name: str, default: bool = False) -> bool:
        """A boolean query parameter: ``0`` or ``1`` (Ganeti also accepts an empty value)."""
        value = self.qstr(name)
        if value is None:
            return default
        if value in ("1", ""):
            return True
        if value == "0":
            return False
        raise _bad(f"Invalid value for boolean parameter '{name}': {value!r} (use 0 or 1)")

    def body_dict(self) -> dict[str, Any]:
        if self.body is None:
            return {}
        if not isinstance(self.body, dict):
            raise _bad("The request body must be a JSON object")
        return dict(self.body)


Reader = Callable[[Ctx], Any]
Builder = Callable[[Ctx], list[dict[str, Any]]]


@dataclass(frozen=True)
class Route:
    """One resource row: ``path`` with ``{name}`` segments, one HTTP method."""

    path: str
    method: str
    read: Reader | None = None
    build: Builder | None = None
    opcode: str | None = None          # the opcode a write submits
    access: str = ""                   # "read"/"write"; default: write unless GET
    body: Body = NO_BODY               # what the request body may say
    also: tuple[str, ...] = ()         # other opcodes of the row's job (reinstall)
    segments: tuple[str, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.read is None) == (self.build is None):
            raise errors.ProgrammerError(f"{self.method} {self.path}: exactly one of"
                                         " read/build")
        if self.body.op_id is not None and self.body.op_id != self.opcode:
            raise errors.ProgrammerError(f"{self.method} {self.path}: body of"
                                         f" {self.body.op_id}, row of {self.opcode}")
        object.__setattr__(self, "segments", uri.template_segments(self.path))

    @property
    def body_keys(self) -> frozenset[str] | None:
        """The keys a JSON object body may carry (None: not an object body)."""
        return self.body.allowed() if self.body.kind == "object" else None

    @property
    def opcodes(self) -> frozenset[str]:
        """Every opcode a job of this row may hold."""
        return frozenset(([self.opcode] if self.opcode else []) + list(self.also))

    @property
    def needs_write(self) -> bool:
        if self.access:
            return self.access == "write"
        return self.method != "GET"


@dataclass(frozen=True)
class RawBody:
    """A read result sent as it is, with its own Content-Type (not JSON)."""

    content_type: str
    body: bytes


def _metrics(ctx: Ctx) -> RawBody:
    """``GET /metrics``: the master's figures in the OpenMetrics text format."""
    from ganeti import metrics
    return RawBody(metrics.OPENMETRICS_CONTENT_TYPE,
                   metrics.render_openmetrics(ctx.client.QueryMetrics()))


# --- helpers ------------------------------------------------------------------------------

def _from_body(ctx: Ctx, fixed: dict[str, Any]) -> dict[str, Any]:
    """The row's opcode from its accepted body (:func:`dispatch` checked the keys
    and renamed the aliases) and the ``fixed`` values from the path."""
    return ctx.spec.opcode(ctx.body_dict(), fixed)


def _op_row(path: str, method: str, op_id: str, *, args: dict[str, str] | None = None,
            aliases: dict[str, str] | None = None, **query_flags: str) -> Route:
    """A row whose opcode is its body's parameters plus the path arguments
    ``args`` (opcode parameter -> path argument) and boolean query parameters
    ``query_flags`` (opcode parameter -> query parameter; the query wins)."""
    args = dict(args or {})

    def build(ctx: Ctx) -> list[dict[str, Any]]:
        op = _from_body(ctx, {param: ctx.args[arg] for param, arg in args.items()})
        for param, qname in query_flags.items():
            if ctx.qstr(qname) is not None:
                op[param] = ctx.qbool(qname)
        return [op]
    return Route(path, method, build=build, opcode=op_id,
                 body=Body(op_id=op_id, fixed=frozenset(args), aliases=aliases or {}))


def _cell(cell: Any) -> Any:
    status, value = cell
    return value if status == constants.RS_NORMAL else None


def _query(ctx: Ctx, what: str, fields: list[str], qfilter: Any = None) -> list[dict[str, Any]]:
    res = ctx.client.Query(what, fields, qfilter)
    return [{f: _cell(c) for f, c in zip(fields, row)} for row in res["data"]]


def _listing(ctx: Ctx, what: str, prefix: str, fields: list[str], key: str = "id",
             fix: Callable[[dict[str, Any]], dict[str, Any]] | None = None
             ) -> list[dict[str, Any]]:
    """``[{key: name, "uri"}]``, or with ``bulk=1`` one dict of ``fields`` per item."""
    if ctx.qbool("bulk"):
        rows = _query(ctx, what, fields)
        return [fix(r) for r in rows] if fix else rows
    return [{key: row["name"], "uri": f"{prefix}/{row['name']}"}
            for row in _query(ctx, what, ["name"])]


def _one(ctx: Ctx, what: str, name: str, fields: list[str]) -> dict[str, Any]:
    rows = _query(ctx, what, fields, ["=", "name", name])
    if not rows:
        raise errors.HttpError(f"{what.capitalize()} '{name}' not found", 404)
    return rows[0]


def _job_id(ctx: Ctx) -> int:
    return uri.parse_id(ctx.args["job_id"], "job id")


def _tags(ctx: Ctx) -> list[str]:
    """The ``tag`` query parameters; a body (Ganeti's client sends the same list
    there) must name the same tags."""
    tags = ctx.query.get("tag", [])
    if not tags:
        raise _bad("Give at least one 'tag' query parameter")
    if ctx.body is not None and set(ctx.body) != set(tags):
        raise _bad("The body's tags differ from the 'tag' query parameters")
    return tags


# --- cluster ------------------------------------------------------------------------------

def _os_list(ctx: Ctx) -> list[str]:
    names: list[str] = []
    for row in _query(ctx, constants.QR_OS, ["name", "variants"]):
        variants = row.get("variants") or []
        names.extend([f"{row['name']}+{v}" for v in variants] if variants else [row["name"]])
    return names


def _tags_routes(prefix: str, kind: str, arg: str | None) -> list[Route]:
    def name(ctx: Ctx) -> str | None:
        return ctx.args[arg] if arg else None
    return [
        Route(prefix, "GET", read=lambda c: c.client.QueryTags(kind, name(c) or ""),
              opcode=wire.OP_TAGS_GET),
        Route(prefix, "PUT", build=lambda c: [wire.tags_set(kind=kind, name=name(c), tags=_tags(c))], opcode=wire.OP_TAGS_SET,
              body=STRINGS),
        Route(prefix, "DELETE", build=lambda c: [wire.tags_del(
            kind=kind, name=name(c), tags=_tags(c))], opcode=wire.OP_TAGS_DEL,
              body=STRINGS),
    ]


# --- jobs ---------------------------------------------------------------------------------

def _jobs(ctx: Ctx) -> list[dict[str, Any]]:
    fields = J_FIELDS_BULK if ctx.qbool("bulk") else ["id"]
    rows = [r for r in ctx.client.QueryJobs(None, fields) if r is not None]
    if ctx.qbool("bulk"):
        return [dict(zip(fields, r)) for r in rows]
    return [{"id": r[0], "uri": f"/2/jobs/{r[0]}"} for r in rows]


def _job(ctx: Ctx) -> dict[str, Any]:
    (row,) = ctx.client.QueryJobs([_job_id(ctx)], J_FIELDS)
    if row is None:
        raise errors.HttpError(f"Job {_job_id(ctx)} not found", 404)
    return dict(zip(J_FIELDS, row))


def _job_wait(ctx: Ctx) -> Any:
    body = ctx.body_dict()
    fields = body.get("fields")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise _bad("'fields' must be a list of field names")
    prev_info = body.get("previous_job_info")
    prev_serial = body.get("previous_log_serial")
    if prev_info is not None and not isinstance(prev_info, list):
        raise _bad("'previous_job_info' must be a list")
    if prev_serial is not None and not isinstance(prev_serial, int):
        raise _bad("'previous_log_serial' must be a number")
    res = ctx.client.WaitForJobChangeOnce(_job_id(ctx), fields, prev_info,
                                          -1 if prev_serial is None else prev_serial,
                                          WAIT_TIMEOUT)
    if not res or res == luxi.JOB_NOTCHANGED:
        return None
    if isinstance(res, list) and len(res) == 2:
        return {"job_info": res[0], "log_entries": res[1]}
    raise errors.HttpError(f"Job {_job_id(ctx)} not found", 404)


# --- nodes --------------------------------------------------------------------------------

def _node_get(ctx: Ctx) -> dict[str, Any]:
    row = _one(ctx, constants.QR_NODE, ctx.args["node"], N_FIELDS)
    for name, alias in N_ALIASES.items():
        row[alias] = row[name]
    return row


def _node_role(ctx: Ctx) -> str:
    role = _one(ctx, constants.QR_NODE, ctx.args["node"], ["name", "role"])["role"]
    return _ROLE_NAMES.get(role, role)


_ROLE_FLAGS: dict[str, dict[str, Any]] = {
    "master-candidate": dict(master_candidate=True, offline=False, drained=False),
    "regular": dict(master_candidate=False, offline=False, drained=False),
    "drained": dict(master_candidate=False, offline=False, drained=True),
    "offline": dict(master_candidate=False, offline=True, drained=False),
}


def _set_node_role(ctx: Ctx) -> list[dict[str, Any]]:
    role = ctx.body
    if not isinstance(role, str):
        raise _bad("The body must be a JSON string naming the role")
    if role == "master":
        raise _bad("Cannot set the role to master (use a master failover)")
    flags = _ROLE_FLAGS.get(role)
    if flags is None:
        raise _bad(f"Unknown node role '{role}'")
    return [wire.node_set_params(node_name=ctx.args["node"], force=ctx.qbool("force"),
                                 auto_promote=ctx.qbool("auto-promote"), **flags)]


# --- instances ----------------------------------------------------------------------------

#: the body of one instance creation (``POST /2/instances`` and each
#: ``instances`` entry of a multi-allocation): the opcode's parameters, with
#: Ganeti's RAPI names ``name`` and ``os``
_CREATE_ALIASES = {"name": "instance_name", "os": "os_type"}
_CREATE_ENTRY = Body(op_id=wire.OP_INSTANCE_CREATE, aliases=_CREATE_ALIASES)
_CREATE_BODY = Body(op_id=wire.OP_INSTANCE_CREATE, aliases=_CREATE_ALIASES,
                    extra=frozenset({"__version__"}))


def _instance_create(ctx: Ctx) -> list[dict[str, Any]]:
    body = ctx.body_dict()
    version = body.pop("__version__", None)
    if version != 1:
        raise _bad("Unsupported instance creation request: expected '__version__': 1")
    return [ctx.spec.opcode(body, {})]


def _multi_alloc(ctx: Ctx) -> list[dict[str, Any]]:
    """Every ``instances`` entry is checked like a creation body (a 400 names the
    entry and its bad keys; an ``OP_ID`` there too)."""
    body = ctx.body_dict()
    entries = body.get("instances")
    if isinstance(entries, list):
        body["instances"] = [_CREATE_ENTRY.rename(e, where=f"'instances[{i}]'")
                             if isinstance(e, dict) else e for i, e in enumerate(entries)]
    return [ctx.spec.opcode(body, {})]


def _inst(ctx: Ctx) -> str:
    return ctx.args["instance"]


#: reinstall body keys beyond upstream's (os, start, osparams): the private
#: and secret OS parameters of OP_INSTANCE_REINSTALL (doc/rapi.md)
_REINSTALL_PRIVATE = ("osparams_private", "osparams_secret")


def _instance_reinstall(ctx: Ctx) -> list[dict[str, Any]]:
    body = ctx.body_dict()
    if body:
        os_name, start, osparams = body.get("os"), body.get("start", True), body.get("osparams")
    else:
        os_name, start, osparams = ctx.qstr("os"), not ctx.qbool("nostartup"), None
    if not isinstance(start, bool):
        raise _bad("'start' must be a boolean")
    private = {key: body[key] for key in _REINSTALL_PRIVATE if body.get(key) is not None}
    ops = [wire.instance_shutdown(instance_name=_inst(ctx)),
           wire.instance_reinstall(instance_name=_inst(ctx), os_type=os_name, osparams=osparams,
                                   **private)]
    if start:
        ops.append(wire.instance_startup(instance_name=_inst(ctx), force=False))
    return ops


def _instance_reboot(ctx: Ctx) -> list[dict[str, Any]]:
    return [_from_body(ctx, {"instance_name": _inst(ctx),
                             "reboot_type": ctx.qstr("type", constants.REBOOT_HARD),
                             "ignore_secondaries": ctx.qbool("ignore_secondaries")})]


def _instance_startup(ctx: Ctx) -> list[dict[str, Any]]:
    return [wire.instance_startup(instance_name=_inst(ctx), force=ctx.qbool("force"),
                                  no_remember=ctx.qbool("no_remember"))]


def _instance_shutdown(ctx: Ctx) -> list[dict[str, Any]]:
    return [_from_body(ctx, {"instance_name": _inst(ctx),
                             "no_remember": ctx.qbool("no_remember")})]


def _with_memory(row: dict[str, Any]) -> dict[str, Any]:
    """Ganeti's clients still read ``beparams["memory"]``: the same as ``maxmem``."""
    beparams = row.get("beparams")
    if isinstance(beparams, dict) and "maxmem" in beparams:
        row["beparams"] = {**beparams, "memory": beparams["maxmem"]}
    return row


def _instance_get(ctx: Ctx) -> dict[str, Any]:
    return _with_memory(_one(ctx, constants.QR_INSTANCE, _inst(ctx), I_FIELDS))


def _inst_row(suffix: str, method: str, op_id: str, aliases: dict[str, str] | None = None,
              **query_flags: str) -> Route:
    """An instance row: the opcode from the body (after ``aliases``), the instance
    from the path, boolean query parameters."""
    return _op_row(_INST + suffix, method, op_id, args={"instance_name": "instance"},
                   aliases=aliases, **query_flags)


def _instance_grow_disk(ctx: Ctx) -> list[dict[str, Any]]:
    index = uri.parse_id(ctx.args["disk_index"], "disk index")
    return [_from_body(ctx, {"instance_name": _inst(ctx), "disk": index})]


def _instance_console(ctx: Ctx) -> Any:
    """The console dict of a running instance (503 when it is not running).

    Like Ganeti's, a write-only GET; the console description comes from
    the instance's primary node, through an OP_INSTANCE_CONSOLE job whose
    result is the answer.
    """
    row = _one(ctx, constants.QR_INSTANCE, _inst(ctx), ["name", "oper_state"])
    if not row["oper_state"]:
        raise errors.HttpError(f"Instance console unavailable: {row['name']} is not running",
                               503)
    return _run_job(ctx, [wire.instance_console(instance_name=row["name"])])[0]


def _run_job(ctx: Ctx, ops: list[dict[str, Any]]) -> list[Any]:
    """Submit ``ops`` and wait (at most :data:`JOB_WAIT_TIMEOUT`) for their results.

    A failed opcode answers like Ganeti's error classes: unknown entity
    404, wrong input 400, anything else 503.
    """
    job_id = dispatch_ops(ops, ctx)
    deadline = ctx.clock() + JOB_WAIT_TIMEOUT
    prev: Any = None
    while True:
        res = ctx.client.WaitForJobChangeOnce(job_id, ["status"], prev, -1, WAIT_TIMEOUT)
        if isinstance(res, list) and len(res) == 2:
            prev = res[0]
        if prev and prev[0] in constants.JOBS_FINALIZED:
            break
        if ctx.clock() >= deadline or not res:
            raise errors.HttpError(f"Job {job_id} did not finish in time", 504)
    ((status, opresult),) = ctx.client.QueryJobs([job_id], ["status", "opresult"])
    if status == constants.JOB_STATUS_SUCCESS:
        return list(opresult)
    failure = next((r for r in opresult or [] if isinstance(r, list) and len(r) == 2), None)
    kind, details = failure if failure else ("OpExecError", [f"job {job_id} {status}"])
    message = details[0] if isinstance(details, list) and details else str(details)
    ecode = details[1] if isinstance(details, list) and len(details) > 1 else None
    code = 404 if ecode == errors.ECODE_NOENT else 400 if ecode == errors.ECODE_INVAL else 503
    raise errors.HttpError(f"{kind}: {message}", code)


def _storage_type(ctx: Ctx) -> str | None:
    """The ``storage_type`` parameter; empty (Ganeti's client sends None so) is none."""
    return ctx.qstr("storage_type") or None


def _node_storage(ctx: Ctx) -> list[dict[str, Any]]:
    fields = ctx.qstr("output_fields")
    if not fields:
        raise _bad("Missing the required 'output_fields' parameter")
    return [wire.node_query_storage(nodes=[ctx.args["node"]], storage_type=_storage_type(ctx),
                                    output_fields=fields.split(","))]


def _storage_unit(ctx: Ctx) -> tuple[str, str]:
    """The storage unit's ``(storage_type, name)``, both required."""
    name = ctx.qstr("name")
    if not name:
        raise _bad("Missing the required 'name' parameter")
    stype = _storage_type(ctx)
    if not stype:
        raise _bad("Missing the required 'storage_type' parameter")
    return stype, name


def _node_storage_modify(ctx: Ctx) -> list[dict[str, Any]]:
    stype, name = _storage_unit(ctx)
    changes = {}
    if ctx.qstr(constants.SF_ALLOCATABLE) is not None:
        changes[constants.SF_ALLOCATABLE] = ctx.qbool(constants.SF_ALLOCATABLE)
    return [wire.node_modify_storage(node_name=ctx.args["node"], storage_type=stype, name=name,
                                     changes=changes)]


def _node_storage_repair(ctx: Ctx) -> list[dict[str, Any]]:
    stype, name = _storage_unit(ctx)
    return [wire.repair_node_storage(node_name=ctx.args["node"], storage_type=stype, name=name,
                                     ignore_consistency=ctx.qbool("ignore_consistency"))]


def _relocation(path: str, method: str, op_id: str, key: str, arg: str) -> Route:
    """A relocation row: its opcode from the body; ``?plan=1`` asks for the plan
    instead of jobs (doc/protocols/iallocator.md, "Plans")."""
    return _op_row(path, method, op_id, args={key: arg}, plan_only="plan")


# --- queries ------------------------------------------------------------------------------

def _query_fields_param(ctx: Ctx) -> list[str] | None:
    text = ctx.qstr("fields")
    return [f for f in text.split(",") if f] if text is not None else None


def _query_get(ctx: Ctx) -> Any:
    fields = _query_fields_param(ctx)
    if not fields:
        raise _bad("Missing 'fields' query argument")
    return ctx.client.Query(ctx.args["resource"], fields, None)


def _query_put(ctx: Ctx) -> Any:
    body = ctx.body_dict()
    fields = body.get("fields", _query_fields_param(ctx))
    if not isinstance(fields, list) or not fields:
        raise _bad("Missing 'fields' (a list of field names)")
    qfilter = body.get("qfilter", body.get("filter"))
    if "qfilter" in body and "filter" in body and body["filter"] != body["qfilter"]:
        raise _bad("'qfilter' and 'filter' are aliases; they must not differ")
    return ctx.client.Query(ctx.args["resource"], fields, qfilter)


def _query_fields(ctx: Ctx) -> Any:
    return ctx.client.QueryFields(ctx.args["resource"], _query_fields_param(ctx))


# --- the table ----------------------------------------------------------------------------

_NODE = "/2/nodes/{node}"
_INST = "/2/instances/{instance}"
_GROUP = "/2/groups/{group}"

_WAIT_BODY = Body(extra=frozenset({"fields", "previous_job_info", "previous_log_serial"}))
_QUERY_BODY = Body(extra=frozenset({"fields", "qfilter", "filter"}))
_REINSTALL_BODY = Body(extra=frozenset({"os", "start", "osparams", *_REINSTALL_PRIVATE}))
_NODE_ARG = {"node_name": "node"}
_GROUP_ARG = {"group_name": "group"}

ROUTES: list[Route] = [
    Route("/", "GET", read=lambda c: None),
    Route("/version", "GET", read=lambda c: RAPI_VERSION),
    Route("/metrics", "GET", read=_metrics),
    Route("/2", "GET", read=lambda c: None),
    Route("/2/info", "GET", read=lambda c: c.client.QueryClusterInfo()),
    Route("/2/features", "GET", read=lambda c: list(FEATURES)),
    Route("/2/openapi.json", "GET", read=lambda c: openapi.document(ROUTES)),
    Route("/2/os", "GET", read=_os_list),
    Route("/2/redistribute-config", "PUT", build=lambda c: [wire.cluster_redist_conf()],
          opcode=wire.OP_CLUSTER_REDIST_CONF),
    _op_row("/2/modify", "PUT", wire.OP_CLUSTER_SET_PARAMS),
    *_tags_routes("/2/tags", constants.TAG_CLUSTER, None),
    Route("/2/jobs", "GET", read=_jobs),
    Route("/2/jobs/{job_id}", "GET", read=_job),
    Route("/2/jobs/{job_id}", "DELETE", read=lambda c: c.client.CancelJob(_job_id(c))),
    Route("/2/jobs/{job_id}/wait", "GET", read=_job_wait, access="write", body=_WAIT_BODY),
    Route("/2/events", "GET", read=stream.open_stream),    # Server-Sent Events
    # nodes
    Route("/2/nodes", "GET", read=lambda c: _listing(c, constants.QR_NODE, "/2/nodes",
                                                     N_FIELDS)),
    Route(_NODE, "GET", read=_node_get),
    Route(_NODE + "/role", "GET", read=_node_role),
    Route(_NODE + "/role", "PUT", build=_set_node_role, opcode=wire.OP_NODE_SET_PARAMS,
          body=ANY_JSON),     # a bare JSON string, checked by the row
    _op_row(_NODE + "/modify", "POST", wire.OP_NODE_SET_PARAMS, args=_NODE_ARG),
    Route(_NODE + "/powercycle", "POST",
          build=lambda c: [wire.node_powercycle(node_name=c.args["node"], force=c.qbool("force"))], opcode=wire.OP_NODE_POWERCYCLE),
    Route(_NODE + "/storage", "GET", build=_node_storage, opcode=wire.OP_NODE_QUERY_STORAGE,
          access="write"),      # the LU locks nodes: write-only, as in Ganeti
    Route(_NODE + "/storage/modify", "PUT", build=_node_storage_modify,
          opcode=wire.OP_NODE_MODIFY_STORAGE),
    Route(_NODE + "/storage/repair", "PUT", build=_node_storage_repair,
          opcode=wire.OP_REPAIR_NODE_STORAGE),
    _relocation(_NODE + "/evacuate", "POST", wire.OP_NODE_EVACUATE, "node_name", "node"),
    _op_row(_NODE + "/migrate", "POST", wire.OP_NODE_MIGRATE, args=_NODE_ARG),
    *_tags_routes(_NODE + "/tags", constants.TAG_NODE, "node"),
    # instances
    Route("/2/instances", "GET", read=lambda c: _listing(c, constants.QR_INSTANCE,
                                                         "/2/instances", I_FIELDS,
                                                         fix=_with_memory)),
    Route("/2/instances", "POST", build=_instance_create, opcode=wire.OP_INSTANCE_CREATE,
          body=_CREATE_BODY),
    Route("/2/instances-multi-alloc", "POST", build=_multi_alloc,
          opcode=wire.OP_INSTANCE_MULTI_ALLOC, body=Body(op_id=wire.OP_INSTANCE_MULTI_ALLOC)),
    Route(_INST, "GET", read=_instance_get),
    Route(_INST, "DELETE", build=lambda c: [_from_body(c, {"instance_name": _inst(c),
                                                           "ignore_failures": False})],
          opcode=wire.OP_INSTANCE_REMOVE,
          body=Body(op_id=wire.OP_INSTANCE_REMOVE,
                    fixed=frozenset({"instance_name", "ignore_failures"}))),
    Route(_INST + "/info", "GET",
          build=lambda c: [wire.instance_query_data(instances=[_inst(c)], static=c.qbool("static"))], opcode=wire.OP_INSTANCE_QUERY_DATA),
    Route(_INST + "/reboot", "POST", build=_instance_reboot, opcode=wire.OP_INSTANCE_REBOOT,
          body=Body(op_id=wire.OP_INSTANCE_REBOOT,
                    fixed=frozenset({"instance_name", "reboot_type", "ignore_secondaries"}))),
    Route(_INST + "/shutdown", "PUT", build=_instance_shutdown, opcode=wire.OP_INSTANCE_SHUTDOWN,
          body=Body(op_id=wire.OP_INSTANCE_SHUTDOWN,
                    fixed=frozenset({"instance_name", "no_remember"}))),
    Route(_INST + "/startup", "PUT", build=_instance_startup, opcode=wire.OP_INSTANCE_STARTUP),
    Route(_INST + "/reinstall", "POST", build=_instance_reinstall,
          opcode=wire.OP_INSTANCE_REINSTALL, body=_REINSTALL_BODY,
          also=(wire.OP_INSTANCE_SHUTDOWN, wire.OP_INSTANCE_STARTUP)),
    _inst_row("/activate-disks", "PUT", wire.OP_INSTANCE_ACTIVATE_DISKS,
              ignore_size="ignore_size"),
    _inst_row("/deactivate-disks", "PUT", wire.OP_INSTANCE_DEACTIVATE_DISKS, force="force"),
    _inst_row("/rename", "PUT", wire.OP_INSTANCE_RENAME),
    _inst_row("/modify", "PUT", wire.OP_INSTANCE_SET_PARAMS,
              {"custom_beparams": "beparams", "custom_hvparams": "hvparams"}),
    _inst_row("/migrate", "PUT", wire.OP_INSTANCE_MIGRATE),
    _inst_row("/failover", "PUT", wire.OP_INSTANCE_FAILOVER),
    Route(_INST + "/prepare-export", "PUT",
          build=lambda c: [wire.backup_prepare(instance_name=_inst(c),
                                               mode=c.qstr("mode") or constants.EXPORT_MODE_LOCAL)],
          opcode=wire.OP_BACKUP_PREPARE),
    _inst_row("/export", "PUT", wire.OP_BACKUP_EXPORT, {"destination": "target_node"}),
    Route(_INST + "/disk/{disk_index}/grow", "POST", build=_instance_grow_disk,
          opcode=wire.OP_INSTANCE_GROW_DISK,
          body=Body(op_id=wire.OP_INSTANCE_GROW_DISK, fixed=frozenset({"instance_name", "disk"}))),
    Route(_INST + "/console", "GET", read=_instance_console, opcode=wire.OP_INSTANCE_CONSOLE,
          access="write"),
    _relocation(_INST + "/change-group", "PUT", wire.OP_INSTANCE_CHANGE_GROUP, "instance_name",
                "instance"),
    *_tags_routes(_INST + "/tags", constants.TAG_INSTANCE, "instance"),
    # groups
    Route("/2/groups", "GET", read=lambda c: _listing(c, constants.QR_GROUP, "/2/groups",
                                                      G_FIELDS, key="name")),
    _op_row("/2/groups", "POST", wire.OP_GROUP_ADD, aliases={"name": "group_name"}),
    Route(_GROUP, "GET", read=lambda c: _one(c, constants.QR_GROUP, c.args["group"], G_FIELDS)),
    Route(_GROUP, "DELETE", build=lambda c: [wire.group_remove(group_name=c.args["group"])],
          opcode=wire.OP_GROUP_REMOVE),
    _op_row(_GROUP + "/rename", "PUT", wire.OP_GROUP_RENAME, args=_GROUP_ARG),
    _op_row(_GROUP + "/modify", "PUT", wire.OP_GROUP_SET_PARAMS, args=_GROUP_ARG),
    _op_row(_GROUP + "/assign-nodes", "PUT", wire.OP_GROUP_ASSIGN_NODES, args=_GROUP_ARG),
    _relocation(_GROUP + "/evacuate", "PUT", wire.OP_GROUP_EVACUATE, "group_name", "group"),
    *_tags_routes(_GROUP + "/tags", constants.TAG_NODEGROUP, "group"),
    # query2
    Route("/2/query/{resource}", "GET", read=_query_get),
    Route("/2/query/{resource}", "PUT", read=_query_put, access="read", body=_QUERY_BODY),
    Route("/2/query/{resource}/fields", "GET", read=_query_fields),
]


def write_routes(routes: list[Route] | None = None) -> list[Route]:
    """The rows that need a ``write`` user."""
    return [r for r in (ROUTES if routes is None else routes) if r.needs_write]


def match(method: str, path: str, routes: list[Route] | None = None
          ) -> tuple[Route, dict[str, str]]:
    """The row for ``method path`` and its path arguments (decoded).

    ``path`` is the raw request path: it is split at ``/`` before each
    segment is percent-decoded (:func:`ganeti.rapi.uri.split_path`), so
    ``%2F`` never separates segments.  Raises :class:`errors.HttpError`
    404 for an unknown path (a path argument holding a slash included),
    405 (the allowed methods in the message) for a known path with
    another method, 400 for a segment that is not UTF-8.
    """
    segments = uri.split_path(path)
    allowed: list[str] = []
    for route in ROUTES if routes is None else routes:
        args = uri.match_segments(route.segments, segments)
        if args is None:
            continue
        if route.method == method:
            return route, args
        allowed.append(route.method)
    if allowed:
        raise errors.HttpError(f"Method {method} is not supported; allowed: "
                               f"{', '.join(sorted(set(allowed)))}", 405)
    raise errors.HttpError(f"Resource {uri.shown(path)} not found", 404)


def allowed_methods(path: str, routes: list[Route] | None = None) -> list[str]:
    """The methods the table has for the raw ``path`` (for the ``Allow`` header)."""
    try:
        segments = uri.split_path(path)
    except errors.HttpError:
        return []
    return sorted({r.method for r in (ROUTES if routes is None else routes)
                   if uri.match_segments(r.segments, segments) is not None})


def _add_generic(ops: list[dict[str, Any]], ctx: Ctx) -> list[dict[str, Any]]:
    dry_run = ctx.qbool("dry-run")
    reason_text = ctx.qstr("reason")
    now = int(ctx.clock() * 1e9)
    out = []
    for op in ops:
        op = dict(op)
        if dry_run:
            op["dry_run"] = True
        trail = list(op.get("reason") or [])
        trail.append([RAPI_REASON_SOURCE, f"{ctx.method} {ctx.path}", now])
        if reason_text is not None:
            trail.append(["gnt:user", reason_text, now])
        op["reason"] = trail
        out.append(op)
    return out


def dispatch(route: Route, ctx: Ctx) -> Any:
    """Run one row: the read result, or the id of the job the row submitted.

    The body is checked against the row's :class:`~ganeti.rapi.opinput.Body`
    first (a key it does not declare, ``OP_ID`` included, is a 400 naming
    it); opcodes are validated here (a bad parameter is a 400) and must be
    the row's own (else :class:`errors.ProgrammerError`, a 500): nothing
    is submitted then.
    """
    ctx = dataclasses.replace(ctx, body=route.body.accept(ctx.body), spec=route.body)
    if route.read is not None:
        return route.read(ctx)
    assert route.build is not None
    ops = route.build(ctx)
    foreign = sorted({str(op.get("OP_ID")) for op in ops} - route.opcodes)
    if foreign:
        raise errors.ProgrammerError(f"{route.method} {route.path} built {foreign},"
                                     f" not its own {sorted(route.opcodes)}")
    return dispatch_ops(ops, ctx)


def dispatch_ops(ops: list[dict[str, Any]], ctx: Ctx) -> Any:
    """Add the generic parameters to ``ops``, validate them and submit one job (its id)."""
    ops = _add_generic(ops, ctx)
    for op in ops:
        opcodes.from_dict(op)   # raises ParameterError/OpCodeError: the caller answers 400
    return ctx.client.SubmitJob(ops)
