"""An OpenAPI 3 description of RAPI v2, generated from the resource table (pure).

:func:`document` turns the rows of :data:`ganeti.rapi.resources.ROUTES`
into an OpenAPI 3.0 document: one path per row path (``{name}`` segments
become path parameters), one operation per row method, the query
parameters, body and result of each row from its :class:`Doc` (the row's
``doc``), the generic ``dry-run``
and ``reason`` parameters on every row that submits a job, and the
credentials a row needs as a security requirement (HTTP Basic, or an API
token as Bearer) with the role it needs as ``x-ganeti-role``.  A row that
submits a job answers with the job id (a bare JSON number); every error
is Ganeti's ``{"code", "message", "explain"}`` body.  ``GET
/2/openapi.json`` serves the result (doc/rapi.md).

A row's :class:`Doc` is the only hand-written part; it is written in the
row itself (:mod:`ganeti.rapi.resources`), with the shared pieces below
(:data:`STRS`, :data:`BULK`, :func:`opbody`...).  A test fails when a row of
the table has none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ganeti import constants

__all__ = ["OPENAPI_VERSION", "Param", "Doc", "document", "operation_id", "opbody",
           "OBJ", "STR", "STRS", "LINKS", "BOOL", "BULK", "FORCE", "TAG", "PLAN"]

#: the OpenAPI version the document follows
OPENAPI_VERSION = "3.0.3"
_BASIC = "basicAuth"
_BEARER = "bearerAuth"
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
    def needs_auth(self) -> bool: ...
    @property
    def role_label(self) -> str: ...
    @property
    def build(self) -> Any: ...
    @property
    def body_keys(self) -> frozenset[str] | None: ...
    @property
    def doc(self) -> Doc | None: ...


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


#: schemas and query parameters the rows' docs share
OBJ: dict[str, Any] = {"type": "object"}
STR: dict[str, Any] = {"type": "string"}
STRS: dict[str, Any] = {"type": "array", "items": STR}
BOOL: dict[str, Any] = {"type": "boolean"}
_ANY: dict[str, Any] = {}
LINKS = {"type": "array", "items": {"$ref": "#/components/schemas/Link"}}
BULK = Param("bulk", description="1: full objects instead of id/uri links")
FORCE = Param("force", description="force the operation")
TAG = Param("tag", "list", "a tag (repeat the parameter for several)")
PLAN = Param("plan", description="1: the job's result is the plan (jobs, moves, N+1 state);"
             " no move is submitted")


def opbody(opcode: str, required: Iterable[str] = (), **props: Any) -> dict[str, Any]:
    """A body schema: the parameters of ``opcode`` as a JSON object."""
    schema: dict[str, Any] = {"type": "object", "description": f"parameters of {opcode}"}
    if props:
        schema["properties"] = props
    req = list(required)
    if req:
        schema["required"] = req
    return schema


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
        out.update(schema=STRS, style="form", explode=True)
    else:
        out["schema"] = STR
    if p.description:
        out["description"] = p.description
    return out


def _path_param(name: str) -> dict[str, Any]:
    schema = {"type": "integer", "minimum": 0} if name == "job_id" else STR
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
    doc = route.doc or Doc(
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
        "security": ([{_BASIC: []}, {_BEARER: []}] if route.needs_auth
                     else [{}, {_BASIC: []}, {_BEARER: []}]),
        "x-ganeti-access": ("write" if route.needs_write else
                            "auth" if route.needs_auth else "read"),
        "x-ganeti-role": route.role_label,
    }
    if route.needs_auth:
        op["responses"]["403"] = _error("the user's role does not allow it")
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
                                " --require-authentication; each operation needs the role"
                                " in its x-ganeti-role (readonly, operator, admin)."
                                " Booleans are 0 or 1."},
        "paths": paths,
        "components": {
            "securitySchemes": {_BASIC: {"type": "http", "scheme": "basic"},
                                _BEARER: {"type": "http", "scheme": "bearer",
                                           "description": "an API token (POST /2/tokens)"}},
            "schemas": {
                "Error": {"type": "object", "required": ["code", "message", "explain"],
                          "properties": {"code": {"type": "integer"}, "message": STR,
                                         "explain": STR}},
                "JobId": {"type": "integer", "description": "the id of the submitted job"},
                "Link": {"type": "object", "required": ["id", "uri"],
                         "properties": {"id": _ANY, "uri": STR}},
            },
        },
    }
