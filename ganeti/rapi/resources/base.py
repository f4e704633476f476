"""What every RAPI resource module shares: the request (:class:`Ctx`), the row
(:class:`Route`), and the helpers rows are made of (pure).

A row either *reads* (its ``read`` function asks the master over LUXI and
returns the JSON result) or *submits* (its ``build`` function returns the
opcodes of one job; :func:`ganeti.rapi.resources.dispatch` adds the generic
``dry-run`` and ``reason`` parameters, validates the opcodes locally and
submits them; the result is the job id as a bare JSON number).  Each row
declares the body it accepts (:class:`ganeti.rapi.opinput.Body`) and its
OpenAPI text (:class:`ganeti.rapi.openapi.Doc`).  Nothing here opens a
socket: the client passed in is a :class:`ganeti.luxi.Client` (or its
fake), called through its typed methods.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, errors, luxi, opcodes
from ganeti.opcodes import wire
from ganeti.rapi import roles, uri
from ganeti.rapi.auth import Principal
from ganeti.rapi.tokens import TokenService
from ganeti.rapi.openapi import STRS, TAG, Doc
from ganeti.rapi.opinput import NO_BODY, STRINGS, Body

__all__ = ["run_job", "Ctx", "Route", "RawBody", "Reader", "Builder", "bad", "from_body",
           "op_row", "relocation", "query_rows", "listing", "one", "tags_routes",
           "dispatch_ops", "FEATURES", "I_FIELDS", "N_FIELDS", "N_ALIASES", "G_FIELDS",
           "J_FIELDS", "J_FIELDS_BULK", "RAPI_REASON_SOURCE", "RAPI_VERSION", "WAIT_TIMEOUT",
           "JOB_WAIT_TIMEOUT"]

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


def bad(msg: str) -> errors.HttpError:
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
    #: who sent it (None: anonymous); the server sets it
    principal: Principal | None = None
    #: the API tokens (the ``/2/tokens`` rows); the server sets it
    tokens: TokenService | None = None
    #: makes a console token for an instance and a kind of console
    #: (``.../console/token``): ``(token, seconds it lives)``, bound to this
    #: request's credentials; the server sets it
    console_token: Callable[[str, str], tuple[str, float]] | None = None
    #: reads a VNC password file (``vnc_password_file``) on the master: the
    #: password, or None when it cannot be read; the server sets it
    console_password: Callable[[str], str | None] | None = None

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
        raise bad(f"Invalid value for boolean parameter '{name}': {value!r} (use 0 or 1)")

    def body_dict(self) -> dict[str, Any]:
        if self.body is None:
            return {}
        if not isinstance(self.body, dict):
            raise bad("The request body must be a JSON object")
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
    access: str = ""                   # "read"/"write"/"auth"; default: write unless GET
    role: str = ""                     # the role it needs; default: from its opcodes
    body: Body = NO_BODY               # what the request body may say
    also: tuple[str, ...] = ()         # other opcodes of the row's job (reinstall)
    doc: Doc | None = None             # its OpenAPI text (every row of ROUTES has one)
    segments: tuple[str, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.read is None) == (self.build is None):
            raise errors.ProgrammerError(f"{self.method} {self.path}: exactly one of"
                                         " read/build")
        if self.body.op_id is not None and self.body.op_id != self.opcode:
            raise errors.ProgrammerError(f"{self.method} {self.path}: body of"
                                         f" {self.body.op_id}, row of {self.opcode}")
        if self.access not in ("", "read", "write", "auth"):
            raise errors.ProgrammerError(f"{self.method} {self.path}: unknown access"
                                         f" {self.access!r}")
        if self.role and roles.parse_role(self.role) is None:
            raise errors.ProgrammerError(f"{self.method} {self.path}: unknown role"
                                         f" {self.role!r}")
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

    @property
    def needs_auth(self) -> bool:
        """Whether it needs credentials even without ``--require-authentication``
        (a write, or an ``auth`` row: one that answers per user)."""
        return self.needs_write or self.access == "auth"

    @property
    def required_role(self) -> roles.Role:
        """The smallest role that may use it (:func:`ganeti.rapi.roles.row_role`)."""
        return roles.row_role(self)

    @property
    def role_label(self) -> str:
        return self.required_role.label


@dataclass(frozen=True)
class RawBody:
    """A read result sent as it is, with its own Content-Type (not JSON)."""

    content_type: str
    body: bytes


# --- helpers ------------------------------------------------------------------------------


def from_body(ctx: Ctx, fixed: dict[str, Any]) -> dict[str, Any]:
    """The row's opcode from its accepted body (``dispatch`` checked the keys
    and renamed the aliases) and the ``fixed`` values from the path."""
    return ctx.spec.opcode(ctx.body_dict(), fixed)


def op_row(path: str, method: str, op_id: str, doc: Doc, *, args: dict[str, str] | None = None,
           aliases: dict[str, str] | None = None, **query_flags: str) -> Route:
    """A row whose opcode is its body's parameters plus the path arguments
    ``args`` (opcode parameter -> path argument) and boolean query parameters
    ``query_flags`` (opcode parameter -> query parameter; the query wins);
    ``doc`` is its OpenAPI text."""
    args = dict(args or {})

    def build(ctx: Ctx) -> list[dict[str, Any]]:
        op = from_body(ctx, {param: ctx.args[arg] for param, arg in args.items()})
        for param, qname in query_flags.items():
            if ctx.qstr(qname) is not None:
                op[param] = ctx.qbool(qname)
        return [op]
    return Route(path, method, build=build, opcode=op_id,
                 body=Body(op_id=op_id, fixed=frozenset(args), aliases=aliases or {}), doc=doc)


def _cell(cell: Any) -> Any:
    status, value = cell
    return value if status == constants.RS_NORMAL else None


def query_rows(ctx: Ctx, what: str, fields: list[str], qfilter: Any = None) -> list[dict[str, Any]]:
    res = ctx.client.Query(what, fields, qfilter)
    return [{f: _cell(c) for f, c in zip(fields, row)} for row in res["data"]]


def listing(ctx: Ctx, what: str, prefix: str, fields: list[str], key: str = "id",
            fix: Callable[[dict[str, Any]], dict[str, Any]] | None = None
             ) -> list[dict[str, Any]]:
    """``[{key: name, "uri"}]``, or with ``bulk=1`` one dict of ``fields`` per item."""
    if ctx.qbool("bulk"):
        rows = query_rows(ctx, what, fields)
        return [fix(r) for r in rows] if fix else rows
    return [{key: row["name"], "uri": f"{prefix}/{row['name']}"}
            for row in query_rows(ctx, what, ["name"])]


def one(ctx: Ctx, what: str, name: str, fields: list[str]) -> dict[str, Any]:
    rows = query_rows(ctx, what, fields, ["=", "name", name])
    if not rows:
        raise errors.HttpError(f"{what.capitalize()} '{name}' not found", 404)
    return rows[0]


def _tags(ctx: Ctx) -> list[str]:
    """The ``tag`` query parameters; a body (Ganeti's client sends the same list
    there) must name the same tags."""
    tags = ctx.query.get("tag", [])
    if not tags:
        raise bad("Give at least one 'tag' query parameter")
    if ctx.body is not None and set(ctx.body) != set(tags):
        raise bad("The body's tags differ from the 'tag' query parameters")
    return tags


def tags_routes(prefix: str, kind: str, arg: str | None, what: str) -> list[Route]:
    """The three tag rows of ``prefix`` (tags of a ``kind`` object named by the
    path argument ``arg``; ``what`` names it in their docs)."""
    def name(ctx: Ctx) -> str | None:
        return ctx.args[arg] if arg else None
    return [
        Route(prefix, "GET", read=lambda c: c.client.QueryTags(kind, name(c) or ""),
              opcode=wire.OP_TAGS_GET, doc=Doc(f"Tags of the {what}", result=STRS)),
        Route(prefix, "PUT", build=lambda c: [wire.tags_set(kind=kind, name=name(c), tags=_tags(c))], opcode=wire.OP_TAGS_SET,
              body=STRINGS, doc=Doc(f"Add tags to the {what}", (TAG,))),
        Route(prefix, "DELETE", build=lambda c: [wire.tags_del(
            kind=kind, name=name(c), tags=_tags(c))], opcode=wire.OP_TAGS_DEL,
              body=STRINGS, doc=Doc(f"Remove tags from the {what}", (TAG,))),
    ]


def relocation(path: str, method: str, op_id: str, key: str, arg: str, doc: Doc) -> Route:
    """A relocation row: its opcode from the body; ``?plan=1`` asks for the plan
    instead of jobs (doc/protocols/iallocator.md, "Plans")."""
    return op_row(path, method, op_id, doc, args={key: arg}, plan_only="plan")


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


def dispatch_ops(ops: list[dict[str, Any]], ctx: Ctx) -> Any:
    """Add the generic parameters to ``ops``, validate them and submit one job (its id)."""
    ops = _add_generic(ops, ctx)
    for op in ops:
        opcodes.from_dict(op)   # raises ParameterError/OpCodeError: the caller answers 400
    return ctx.client.SubmitJob(ops)


def run_job(ctx: Ctx, ops: list[dict[str, Any]]) -> list[Any]:
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
