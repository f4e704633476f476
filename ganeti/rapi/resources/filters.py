"""RAPI rows of job filter rules, ``/2/filters`` (pure; doc/jobfilters.md).

Rules are changed over LUXI (``ReplaceFilter``, ``DeleteFilter``), not by
jobs: a write answers the rule's UUID (or null for a removal), as
Ganeti's RAPI does.
"""

from __future__ import annotations

import time
from typing import Any

from ganeti import errors
from ganeti.rapi.openapi import BULK, OBJ, STR, Doc
from ganeti.rapi.opinput import Body
from ganeti.rapi.resources.base import RAPI_REASON_SOURCE, Ctx, Route, bad

__all__ = ["ROUTES", "FILTER_FIELDS"]

#: the fields of one rule in an answer (Ganeti's)
FILTER_FIELDS = ["uuid", "watermark", "priority", "predicates", "action", "reason_trail"]


def _filters(ctx: Ctx) -> list[dict[str, Any]]:
    rows = ctx.client.QueryFilters(None, FILTER_FIELDS)
    if ctx.qbool("bulk"):
        return [dict(zip(FILTER_FIELDS, r)) for r in rows]
    return [{"uuid": r[0], "uri": f"/2/filters/{r[0]}"} for r in rows]


def _filter(ctx: Ctx) -> dict[str, Any]:
    uuid = ctx.args["filter_uuid"]
    rows = ctx.client.QueryFilters([uuid], FILTER_FIELDS)
    if not rows:
        raise errors.HttpError(f"Filter rule {uuid} not found", 404)
    return dict(zip(FILTER_FIELDS, rows[0]))


def _replace(ctx: Ctx, uuid: str | None) -> Any:
    body = ctx.body_dict()
    reason = body.get("reason", [])
    if not isinstance(reason, list):
        raise bad("'reason' must be a list of [source, reason, timestamp]")
    trail = list(reason) + [[RAPI_REASON_SOURCE, f"{ctx.method} {ctx.path}", time.time_ns()]]
    return ctx.client.ReplaceFilter(uuid, body.get("priority", 0), body.get("predicates", []),
                                    body.get("action", "CONTINUE"), trail)


_BODY = Body(extra=frozenset({"priority", "predicates", "action", "reason"}))
_RULE_BODY = {"type": "object", "properties": {
    "priority": {"type": "integer", "minimum": 0, "description": "rules are looked at from"
                 " the lowest priority up (default 0)"},
    "predicates": {"type": "array", "description": "[[jobid|opcode|reason, expression],"
                   " ...] (default: [], every job)"},
    "action": {"description": "ACCEPT, PAUSE, REJECT, CONTINUE (default) or"
               " [\"RATE_LIMIT\", n]"},
    "reason": {"type": "array", "description": "reason trail: [[source, reason, timestamp],"
               " ...]"}}}
_UUID_RESULT = {**STR, "description": "the rule's UUID"}

ROUTES: list[Route] = [
    Route("/2/filters", "GET", read=_filters,
          doc=Doc("Job filter rules", (BULK,), result={"type": "array", "items": OBJ})),
    Route("/2/filters", "POST", read=lambda c: _replace(c, None), body=_BODY, role="admin",
          doc=Doc("Add a job filter rule", body=_RULE_BODY, result=_UUID_RESULT)),
    Route("/2/filters/{filter_uuid}", "GET", read=_filter, doc=Doc("One job filter rule",
                                                                   result=OBJ)),
    Route("/2/filters/{filter_uuid}", "PUT", read=lambda c: _replace(c, c.args["filter_uuid"]),
          body=_BODY, role="admin", doc=Doc("Replace a job filter rule (or add it with this UUID)",
                              body=_RULE_BODY, result=_UUID_RESULT)),
    Route("/2/filters/{filter_uuid}", "DELETE",
          read=lambda c: c.client.DeleteFilter(c.args["filter_uuid"]), role="admin",
          doc=Doc("Remove a job filter rule", result={"nullable": True})),
]
