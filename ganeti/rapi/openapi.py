"""An OpenAPI 3 description of RAPI v2, generated from the resource table (pure).

:func:`document` turns the rows of :data:`ganeti.rapi.resources.ROUTES`
into an OpenAPI 3.0 document: one path per row path (``{name}`` segments
become path parameters), one operation per row method, the query
parameters and body of each row from :data:`DOCS`, the generic ``dry-run``
and ``reason`` parameters on every row that submits a job, and the
write requirement as a security requirement (HTTP Basic).  A row that
submits a job answers with the job id (a bare JSON number); every error
is Ganeti's ``{"code", "message", "explain"}`` body.  ``GET
/2/openapi.json`` serves the result (doc/rapi.md).

:data:`DOCS` is the only hand-written part: a test checks that it has an
entry for every row and none for a row that is gone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ganeti import constants
from ganeti.opcodes import wire

__all__ = ["OPENAPI_VERSION", "Param", "Doc", "DOCS", "document", "operation_id"]

#: the OpenAPI version the document follows
OPENAPI_VERSION = "3.0.3"
_BASIC = "basicAuth"
_JSON = "application/json"


class RouteLike(Protocol):
    """What :func:`document` needs of a :class:`ganeti.rapi.resources.Route`."""

    @property
    def path(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def opcode(self) -> str | None: ...
    @property
    def needs_write(self) -> bool: ...
    @property
    def build(self) -> Any: ...
    @property
    def body_keys(self) -> frozenset[str] | None: ...


@dataclass(frozen=True)
class Param:
    """One query parameter; ``kind`` is ``bool`` (``0``/``1``), ``str`` or ``list``."""

    name: str
    kind: str = "bool"
    description: str = ""


@dataclass(frozen=True)
class Doc:
    """The hand-written part of one row: summary, query parameters, body, result."""

    summary: str
    params: tuple[Param, ...] = ()
    body: dict[str, Any] | None = None       # a JSON schema, or None for no body
    result: dict[str, Any] = field(default_factory=dict)   # the 200 schema of a read
    media_type: str = "application/json"                   # of the 200 answer


_OBJ: dict[str, Any] = {"type": "object"}
_STR: dict[str, Any] = {"type": "string"}
_STRS: dict[str, Any] = {"type": "array", "items": _STR}
_ANY: dict[str, Any] = {}
_LIST = {"type": "array", "items": {"$ref": "#/components/schemas/Link"}}
_BULK = Param("bulk", description="1: full objects instead of id/uri links")
_FORCE = Param("force", description="force the operation")
_TAG = Param("tag", "list", "a tag (repeat the parameter for several)")
_FIELDS = Param("fields", "str", "comma-separated field names")
_NO_REMEMBER = Param("no_remember", description="do not record the new state")
_STORAGE_TYPE = Param("storage_type", "str", "file or sharedfile (Ganeti's other storage"
                                             " types are refused)")
_STORAGE_NAME = Param("name", "str", "the storage unit (for file storage: its directory)")
_PLAN = Param("plan", description="1: the job's result is the plan (jobs, moves, N+1 state);"
              " no move is submitted")


def _opbody(opcode: str, required: Iterable[str] = (), **props: Any) -> dict[str, Any]:
    """A body schema: the parameters of ``opcode`` as a JSON object."""
    schema: dict[str, Any] = {"type": "object", "description": f"parameters of {opcode}"}
    if props:
        schema["properties"] = props
    req = list(required)
    if req:
        schema["required"] = req
    return schema


def _tag_docs(prefix: str, what: str) -> dict[tuple[str, str], Doc]:
    return {
        ("GET", prefix): Doc(f"Tags of the {what}", result=_STRS),
        ("PUT", prefix): Doc(f"Add tags to the {what}", (_TAG,)),
        ("DELETE", prefix): Doc(f"Remove tags from the {what}", (_TAG,)),
    }


_NODE = "/2/nodes/{node}"
_INST = "/2/instances/{instance}"
_GROUP = "/2/groups/{group}"

#: (method, path) -> the row's documentation; one entry per row of the table
DOCS: dict[tuple[str, str], Doc] = {
    ("GET", "/"): Doc("Root (no content)", result={"nullable": True}),
    ("GET", "/version"): Doc("The RAPI version (2)", result={"type": "integer"}),
    ("GET", "/metrics"): Doc(
        "The master daemon's figures in the OpenMetrics text format (doc/metrics.md)",
        result={**_STR, "description": "OpenMetrics 1.0 text exposition"},
        media_type="application/openmetrics-text; version=1.0.0; charset=utf-8"),
    ("GET", "/2"): Doc("Version 2 root (no content)", result={"nullable": True}),
    ("GET", "/2/info"): Doc("Cluster information", result=_OBJ),
    ("GET", "/2/features"): Doc("Optional features this server implements", result=_STRS),
    ("GET", "/2/os"): Doc("Operating systems (with variants as os+variant)", result=_STRS),
    ("GET", "/2/openapi.json"): Doc("This document (OpenAPI 3)", result=_OBJ),
    ("GET", "/2/events"): Doc(
        "The cluster's events as Server-Sent Events (a stream; doc/rapi.md)",
        (Param("jobs", "str", "comma-separated job ids: only events about these"),
         Param("filter", "str", "a query2 filter (JSON) over the event fields"),
         Param("last_id", "str", "resume after this event id (the Last-Event-ID header"
                                 " wins)")),
        result={**_STR, "description": "id:/event:/data: messages"},
        media_type="text/event-stream"),
    ("PUT", "/2/redistribute-config"): Doc("Redistribute the configuration to all nodes"),
    ("PUT", "/2/modify"): Doc("Change cluster parameters",
                              body=_opbody(wire.OP_CLUSTER_SET_PARAMS)),
    **_tag_docs("/2/tags", "cluster"),
    ("GET", "/2/jobs"): Doc("Jobs", (_BULK,), result={"type": "array", "items": _OBJ}),
    ("GET", "/2/jobs/{job_id}"): Doc("One job", result=_OBJ),
    ("DELETE", "/2/jobs/{job_id}"): Doc("Cancel a job", result={
        "type": "array", "description": "[success, message]"}),
    ("GET", "/2/jobs/{job_id}/wait"): Doc(
        "Wait (up to 10 s) for a job to change",
        body={"type": "object", "required": ["fields"], "properties": {
            "fields": _STRS, "previous_job_info": {"type": "array", "nullable": True},
            "previous_log_serial": {"type": "integer", "nullable": True}}},
        result={"type": "object", "nullable": True, "properties": {
            "job_info": {"type": "array"}, "log_entries": {"type": "array"}}}),
    # nodes
    ("GET", "/2/nodes"): Doc("Nodes", (_BULK,), result=_LIST),
    ("GET", _NODE): Doc("One node", result=_OBJ),
    ("GET", _NODE + "/role"): Doc("A node's role", result={
        "type": "string", "enum": ["master", "master-candidate", "regular", "drained",
                                   "offline"]}),
    ("PUT", _NODE + "/role"): Doc(
        "Set a node's role", (_FORCE,),
        body={"type": "string", "enum": ["master-candidate", "regular", "drained",
                                         "offline"]}),
    ("POST", _NODE + "/modify"): Doc("Change node parameters",
                                     body=_opbody(wire.OP_NODE_SET_PARAMS)),
    ("POST", _NODE + "/powercycle"): Doc("Power-cycle a node", (_FORCE,)),
    ("GET", _NODE + "/storage"): Doc(
        "Storage units of a node (a job; its result: one row of values per unit)",
        (_STORAGE_TYPE, Param("output_fields", "str", "comma-separated: node, type, name,"
                                                      " size, used, free, allocatable"))),
    ("PUT", _NODE + "/storage/modify"): Doc(
        "Change a storage unit", (_STORAGE_TYPE, _STORAGE_NAME,
                                  Param("allocatable", description="new disks may go there"))),
    ("PUT", _NODE + "/storage/repair"): Doc(
        "Repair a storage unit", (_STORAGE_TYPE, _STORAGE_NAME, Param(
            "ignore_consistency", description="ignore the consistency of the disks"))),
    ("POST", _NODE + "/evacuate"): Doc(
        "Move a node's instances elsewhere (one job each; the result lists them)", (_PLAN,),
        body=_opbody(wire.OP_NODE_EVACUATE, mode={**_STR, "enum": list(constants.NODE_EVAC_MODES)},
                     remote_node=_STR, iallocator=_STR, early_release={"type": "boolean"},
                     with_disks={"type": "boolean"})),
    ("POST", _NODE + "/migrate"): Doc(
        "Migrate every primary instance off a node", body=_opbody(
            wire.OP_NODE_MIGRATE, mode=_STR, live={"type": "boolean"}, target_node=_STR,
            iallocator=_STR, with_disks={"type": "boolean"})),
    **_tag_docs(_NODE + "/tags", "node"),
    # instances
    ("GET", "/2/instances"): Doc("Instances", (_BULK,), result=_LIST),
    ("POST", "/2/instances"): Doc(
        "Create an instance (request version 1)",
        body=_opbody(wire.OP_INSTANCE_CREATE, ["__version__"],
                     __version__={"type": "integer", "enum": [1]},
                     name={**_STR, "description": "alias of instance_name"},
                     os={**_STR, "description": "alias of os_type"},
                     mode=_STR, disk_template=_STR, disks={"type": "array"},
                     nics={"type": "array"}, pnode=_STR, snode=_STR)),
    ("GET", _INST): Doc("One instance", result=_OBJ),
    ("DELETE", _INST): Doc("Remove an instance"),
    ("GET", _INST + "/info"): Doc("Detailed instance information (a job)", (
        Param("static", description="1: configuration only, no live data"),)),
    ("POST", _INST + "/reboot"): Doc("Reboot an instance", (
        Param("type", "str", "hard, soft or full"),
        Param("ignore_secondaries", description="ignore errors on secondary nodes")),
        body=_opbody(wire.OP_INSTANCE_REBOOT)),
    ("PUT", _INST + "/shutdown"): Doc("Shut an instance down", (_NO_REMEMBER,),
                                      body=_opbody(wire.OP_INSTANCE_SHUTDOWN)),
    ("PUT", _INST + "/startup"): Doc("Start an instance", (_FORCE, _NO_REMEMBER)),
    ("POST", _INST + "/reinstall"): Doc(
        "Reinstall an instance (request version 1 in the body, or query parameters)",
        (Param("os", "str", "the OS (without a body)"),
         Param("nostartup", description="1: do not start it afterwards (without a body)")),
        body={"type": "object", "additionalProperties": False, "properties": {
            "os": _STR, "start": {"type": "boolean"}, "osparams": _OBJ}}),
    ("PUT", _INST + "/activate-disks"): Doc(
        "Activate an instance's disks",
        (Param("ignore_size", description="ignore the recorded disk sizes"),),
        body=_opbody(wire.OP_INSTANCE_ACTIVATE_DISKS)),
    ("PUT", _INST + "/deactivate-disks"): Doc(
        "Deactivate an instance's disks", (_FORCE,),
        body=_opbody(wire.OP_INSTANCE_DEACTIVATE_DISKS)),
    ("PUT", _INST + "/rename"): Doc("Rename an instance", body=_opbody(
        wire.OP_INSTANCE_RENAME, ["new_name"], new_name=_STR)),
    ("PUT", _INST + "/modify"): Doc("Change instance parameters",
                                    body=_opbody(wire.OP_INSTANCE_SET_PARAMS)),
    ("PUT", _INST + "/migrate"): Doc(
        "Live-migrate an instance (with_disks: also its local disks)",
        body=_opbody(wire.OP_INSTANCE_MIGRATE, with_disks={"type": "boolean"})),
    ("PUT", _INST + "/failover"): Doc("Fail an instance over",
                                      body=_opbody(wire.OP_INSTANCE_FAILOVER)),
    ("PUT", _INST + "/prepare-export"): Doc(
        "Prepare an export of an instance", (Param("mode", description="export mode"
                                                   " (only local)"),),
        body=_opbody(wire.OP_BACKUP_PREPARE)),
    ("PUT", _INST + "/export"): Doc("Export an instance to a node", body=_opbody(
        wire.OP_BACKUP_EXPORT, destination={"description": "alias of target_node: a node"
                                            " name (mode local) or one signed [host, port,"
                                            " magic, hmac, salt] per disk (mode remote:"
                                            " checked and tried, then refused;"
                                            " doc/compat.md)"})),
    ("POST", _INST + "/disk/{disk_index}/grow"): Doc(
        "Grow one disk of an instance", body=_opbody(
            wire.OP_INSTANCE_GROW_DISK, ["amount"],
            amount={"type": "integer", "description": "MiB to add (the new size with"
                                                      " absolute)"},
            absolute={"type": "boolean"}, wait_for_sync={"type": "boolean"})),
    ("GET", _INST + "/console"): Doc(
        "How to reach the console of a running instance (503 when it is not running)",
        result={"type": "object", "properties": {
            k: _STR for k in ("instance", "kind", "message", "host", "user", "command")}}),
    ("PUT", _INST + "/change-group"): Doc(
        "Move an instance into another node group (jobs from the allocator)", (_PLAN,),
        body=_opbody(wire.OP_INSTANCE_CHANGE_GROUP, target_groups=_STRS, iallocator=_STR)),
    ("POST", "/2/instances-multi-alloc"): Doc(
        "Create many instances placed by one allocator request", body=_opbody(
            wire.OP_INSTANCE_MULTI_ALLOC, ["instances"],
            instances={"type": "array", "items": _OBJ}, iallocator=_STR)),
    **_tag_docs(_INST + "/tags", "instance"),
    # groups
    ("GET", "/2/groups"): Doc("Node groups", (_BULK,), result=_LIST),
    ("POST", "/2/groups"): Doc("Add a node group", body=_opbody(
        wire.OP_GROUP_ADD, name={**_STR, "description": "alias of group_name"})),
    ("GET", _GROUP): Doc("One node group", result=_OBJ),
    ("DELETE", _GROUP): Doc("Remove a node group"),
    ("PUT", _GROUP + "/rename"): Doc("Rename a node group", body=_opbody(
        wire.OP_GROUP_RENAME, ["new_name"], new_name=_STR)),
    ("PUT", _GROUP + "/modify"): Doc("Change a node group's allocation policy, parameters"
                                     " and instance policy (doc/ipolicy.md)",
                                     body=_opbody(wire.OP_GROUP_SET_PARAMS)),
    ("PUT", _GROUP + "/assign-nodes"): Doc("Move nodes into a group", body=_opbody(
        wire.OP_GROUP_ASSIGN_NODES, ["nodes"], nodes=_STRS)),
    ("PUT", _GROUP + "/evacuate"): Doc(
        "Move every instance of a group into other groups", (_PLAN,),
        body=_opbody(wire.OP_GROUP_EVACUATE, target_groups=_STRS, iallocator=_STR)),
    **_tag_docs(_GROUP + "/tags", "node group"),
    # query2
    ("GET", "/2/query/{resource}"): Doc("Query a resource (query2)", (_FIELDS,), result=_OBJ),
    ("PUT", "/2/query/{resource}"): Doc(
        "Query a resource with a query2 filter", (_FIELDS,),
        body={"type": "object", "properties": {"fields": _STRS, "filter": {
            "type": "array", "nullable": True}}}, result=_OBJ),
    ("GET", "/2/query/{resource}/fields"): Doc("Fields of a query2 resource", (_FIELDS,),
                                               result=_OBJ),
}

_GENERIC = (Param("dry-run", description="1: check only, run nothing"),
            Param("reason", "str", "a reason, appended to the opcodes' reason trail"))
_PATH_ARG = re.compile(r"\{(\w+)\}")


def operation_id(method: str, path: str) -> str:
    """A stable operation id, e.g. ``put_2_instances_instance_shutdown``."""
    words = re.findall(r"\w+", path.replace("-", "_")) or ["root"]
    return "_".join([method.lower(), *words])


def _param(p: Param) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "in": "query", "required": False}
    if p.kind == "bool":
        out["schema"] = {"type": "integer", "enum": [0, 1]}
    elif p.kind == "list":
        out.update(schema=_STRS, style="form", explode=True)
    else:
        out["schema"] = _STR
    if p.description:
        out["description"] = p.description
    return out


def _path_param(name: str) -> dict[str, Any]:
    schema = {"type": "integer", "minimum": 0} if name == "job_id" else _STR
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {
        _JSON: {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _closed(schema: dict[str, Any], keys: frozenset[str] | None) -> dict[str, Any]:
    """An object body schema listing every key the row accepts, and no other
    (``keys`` from the row's declaration, :mod:`ganeti.rapi.opinput`)."""
    if schema.get("type") != "object" or keys is None:
        return schema
    props = {key: _ANY for key in sorted(keys)}
    props.update(schema.get("properties", {}))
    return {**schema, "properties": props, "additionalProperties": False}


def _operation(route: RouteLike) -> dict[str, Any]:
    doc = DOCS.get((route.method, route.path)) or Doc(
        route.opcode or f"{route.method} {route.path}")
    submits = route.build is not None
    params = [_path_param(n) for n in _PATH_ARG.findall(route.path)]
    params += [_param(p) for p in doc.params + (_GENERIC if submits else ())]
    result = ({"$ref": "#/components/schemas/JobId"} if submits else doc.result)
    op: dict[str, Any] = {
        "operationId": operation_id(route.method, route.path),
        "summary": doc.summary,
        "responses": {
            "200": {"description": "the job id" if submits else "the result",
                    "content": {doc.media_type: {"schema": result}}},
            "400": _error("invalid parameters or body"),
            "401": _error("missing or wrong credentials"),
            "404": _error("unknown resource or object"),
            "default": _error("an error"),
        },
        # reads are open unless the daemon runs with --require-authentication
        "security": [{_BASIC: []}] if route.needs_write else [{}, {_BASIC: []}],
        "x-ganeti-access": "write" if route.needs_write else "read",
    }
    if route.needs_write:
        op["responses"]["403"] = _error("the user may not write")
    if route.opcode:
        op["x-ganeti-opcode"] = route.opcode
    if params:
        op["parameters"] = params
    if doc.body is not None:
        schema = _closed(doc.body, route.body_keys)
        op["requestBody"] = {"required": False, "content": {_JSON: {"schema": schema}}}
        op["responses"]["415"] = _error("the body is not application/json")
    return op


def document(routes: Iterable[RouteLike]) -> dict[str, Any]:
    """The OpenAPI 3 document for ``routes`` (every row: one path, one operation)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "Ganeti Remote API", "version": f"2 (ganeti {constants.RELEASE_VERSION})",
                 "description": "RAPI v2 as this project serves it (doc/rapi.md). Reads are"
                                " open unless the daemon runs with"
                                " --require-authentication; writes need a user with the"
                                " write option. Booleans are 0 or 1."},
        "paths": paths,
        "components": {
            "securitySchemes": {_BASIC: {"type": "http", "scheme": "basic"}},
            "schemas": {
                "Error": {"type": "object", "required": ["code", "message", "explain"],
                          "properties": {"code": {"type": "integer"}, "message": _STR,
                                         "explain": _STR}},
                "JobId": {"type": "integer", "description": "the id of the submitted job"},
                "Link": {"type": "object", "required": ["id", "uri"],
                         "properties": {"id": _ANY, "uri": _STR}},
            },
        },
    }
