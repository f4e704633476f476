"""RAPI v2 resources as data: one :class:`Route` row per path and method.

Each resource is declared once, as a row: its path, method, handler (a
``read`` function, or a ``build`` function returning the opcodes of one
job), the opcode it submits, the body it accepts
(:class:`ganeti.rapi.opinput.Body`) and its OpenAPI text
(:class:`ganeti.rapi.openapi.Doc`).  The rows live with their handlers in
one module per resource family (:mod:`.cluster`, :mod:`.jobs`,
:mod:`.nodes`, :mod:`.instances`, :mod:`.groups`, :mod:`.networks`, :mod:`.query`,
:mod:`.filters`; what
they share in :mod:`.base`); :data:`ROUTES` is their concatenation, the
one table that :func:`match` routes by, the server checks users by
(:func:`write_routes`) and ``GET /2/openapi.json`` is generated from
(:func:`ganeti.rapi.openapi.document`).  Adding a resource is adding a
row to its family's ``ROUTES`` (doc/design/contracts.md, "Adding a RAPI
resource").

:func:`dispatch` refuses a body key the row does not declare, ``OP_ID``
included, before the row runs: a body never chooses the opcode.  Paths
are matched segment by segment before percent-decoding
(:mod:`ganeti.rapi.uri`).  Nothing here opens a socket: the client passed
in is a :class:`ganeti.luxi.Client` (or its fake), called through its
typed methods.

Paths, parameters and results follow Ganeti's Remote API v2 (doc/rapi.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ganeti import errors
from ganeti.opcodes import wire
from ganeti.rapi import openapi, roles, uri
from ganeti.rapi.resources import (cluster, filters, groups, instances, jobs, networks, nodes,
                                   query, tokens)
from ganeti.rapi.resources.base import (FEATURES, G_FIELDS, I_FIELDS, J_FIELDS, J_FIELDS_BULK,
                                        N_ALIASES, N_FIELDS, RAPI_REASON_SOURCE, RAPI_VERSION,
                                        Ctx, RawBody, Route, dispatch_ops)

__all__ = ["Ctx", "Route", "RawBody", "ROUTES", "FEATURES", "match", "dispatch", "dispatch_ops",
           "write_routes",
           "check_opcodes", "OWNER_TAG_PREFIX", "I_FIELDS", "N_FIELDS", "N_ALIASES", "G_FIELDS", "J_FIELDS", "J_FIELDS_BULK",
           "RAPI_REASON_SOURCE", "RAPI_VERSION", "allowed_methods"]


def _openapi(ctx: Ctx) -> dict[str, Any]:
    """``GET /2/openapi.json``: the document of the whole table."""
    return openapi.document(ROUTES)


#: every row, by family (this order is the order of the OpenAPI document's paths); the
#: document's own row is here, beside the table it describes
ROUTES: list[Route] = [
    *cluster.ROOTS,
    Route("/2/openapi.json", "GET", read=_openapi,
          doc=openapi.Doc("This document (OpenAPI 3)", result=openapi.OBJ)),
    *cluster.ROUTES, *jobs.ROUTES, *nodes.ROUTES, *instances.ROUTES, *groups.ROUTES,
    *networks.ROUTES,
    *query.ROUTES, *filters.ROUTES, *tokens.ROUTES,
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
    501 (the allowed methods in the message; Ganeti's "not implemented",
    where HTTP would say 405) for a known path with another method, 400 for
    a segment that is not UTF-8.
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
                               f"{', '.join(sorted(set(allowed)))}", 501)
    raise errors.HttpError(f"Resource {uri.shown(path)} not found", 404)


def allowed_methods(path: str, routes: list[Route] | None = None) -> list[str]:
    """The methods the table has for the raw ``path`` (for the ``Allow`` header)."""
    try:
        segments = uri.split_path(path)
    except errors.HttpError:
        return []
    return sorted({r.method for r in (ROUTES if routes is None else routes)
                   if uri.match_segments(r.segments, segments) is not None})


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
        if route.needs_write and ctx.principal is None:
            raise errors.HttpError("Authentication required", 401)
        if route.needs_write and ctx.principal is not None and ctx.principal.owner_only:
            _check_owned_read(route, ctx, ctx.principal.user)
        return route.read(ctx)
    assert route.build is not None
    ops = route.build(ctx)
    foreign = sorted({str(op.get("OP_ID")) for op in ops} - route.opcodes)
    if foreign:
        raise errors.ProgrammerError(f"{route.method} {route.path} built {foreign},"
                                     f" not its own {sorted(route.opcodes)}")
    if route.needs_write:
        check_opcodes(ops, ctx)
    return dispatch_ops(ops, ctx)


#: an instance tagged ``owner:<user>`` is ``<user>``'s (for users with the ``owner`` option)
OWNER_TAG_PREFIX = roles.OWNER_TAG_PREFIX


def _owned(op: dict[str, Any], ctx: Ctx, user: str) -> str | None:
    """Why an owner-limited ``user`` may not submit ``op`` (None: it may)."""
    tag = OWNER_TAG_PREFIX + user
    if op.get("OP_ID") in (wire.OP_TAGS_SET, wire.OP_TAGS_DEL):
        if op.get("kind") != "instance":
            return "it may tag its own instances only"
        if any(str(t).startswith(OWNER_TAG_PREFIX) for t in op.get("tags") or []):
            return f"it may not change '{OWNER_TAG_PREFIX}' tags"
        name = op.get("name")
    else:
        name = op.get("instance_name")
    if not isinstance(name, str) or not name:
        return "it may act on its own instances only"
    if tag not in ctx.client.QueryTags("instance", name):
        return f"instance {name!r} is not tagged {tag!r}"
    return None


def _check_owned_read(route: Route, ctx: Ctx, user: str) -> None:
    """An owner-limited user's write-only read (``console``, a job wait): on its own
    instance, or a row without an opcode that only reads (the job wait)."""
    name = ctx.args.get("instance")
    if name is not None:
        why = _owned({"instance_name": name}, ctx, user)
    elif route.method == "GET" and not route.opcodes:
        why = None
    else:
        why = "it may act on its own instances only"
    if why is not None:
        raise errors.HttpError(f"Permission denied: user '{user}' is limited to its own"
                               f" instances; {why}", 403)


def check_opcodes(ops: list[dict[str, Any]], ctx: Ctx) -> None:
    """Refuse (403) opcodes the request's principal may not submit: by their role
    (:func:`ganeti.rapi.roles.opcode_role`), and for a user with the ``owner``
    option, any opcode but one on an instance tagged ``owner:<user>``.  A write
    without a principal is refused (401): the server lets none through, and
    should it ever, nothing is submitted."""
    principal = ctx.principal
    if principal is None:
        raise errors.HttpError("Authentication required", 401)
    for op in ops:
        need = roles.opcode_role(op)
        if principal.role < need:
            raise errors.HttpError(roles.refusal(principal.user, principal.role, need,
                                                 roles.describe(op)), 403)
        if principal.owner_only:
            why = _owned(op, ctx, principal.user)
            if why is not None:
                raise errors.HttpError(f"Permission denied: user '{principal.user}' is"
                                       f" limited to its own instances; {why}", 403)
