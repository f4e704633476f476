"""RAPI rows of query2: a query with fields (GET), with a filter (PUT), and the
fields of a resource (pure)."""

from __future__ import annotations

from typing import Any

from ganeti.rapi.openapi import OBJ, STRS, Doc, Param
from ganeti.rapi.opinput import Body
from ganeti.rapi.resources.base import Ctx, Route, bad

__all__ = ["ROUTES"]


def _query_fields_param(ctx: Ctx) -> list[str] | None:
    text = ctx.qstr("fields")
    return [f for f in text.split(",") if f] if text is not None else None


def _query_get(ctx: Ctx) -> Any:
    fields = _query_fields_param(ctx)
    if not fields:
        raise bad("Missing 'fields' query argument")
    return ctx.client.Query(ctx.args["resource"], fields, None)


def _query_put(ctx: Ctx) -> Any:
    body = ctx.body_dict()
    fields = body.get("fields", _query_fields_param(ctx))
    if not isinstance(fields, list) or not fields:
        raise bad("Missing 'fields' (a list of field names)")
    qfilter = body.get("qfilter", body.get("filter"))
    if "qfilter" in body and "filter" in body and body["filter"] != body["qfilter"]:
        raise bad("'qfilter' and 'filter' are aliases; they must not differ")
    return ctx.client.Query(ctx.args["resource"], fields, qfilter)


def _query_fields(ctx: Ctx) -> Any:
    return ctx.client.QueryFields(ctx.args["resource"], _query_fields_param(ctx))


_QUERY_BODY = Body(extra=frozenset({"fields", "qfilter", "filter"}))
_FIELDS = Param("fields", "str", "comma-separated field names")

ROUTES: list[Route] = [
    Route("/2/query/{resource}", "GET", read=_query_get,
          doc=Doc("Query a resource (query2)", (_FIELDS,), result=OBJ)),
    Route("/2/query/{resource}", "PUT", read=_query_put, access="read", body=_QUERY_BODY,
          doc=Doc("Query a resource with a query2 filter", (_FIELDS,), body={
              "type": "object", "properties": {"fields": STRS, "filter": {
                  "type": "array", "nullable": True}}}, result=OBJ)),
    Route("/2/query/{resource}/fields", "GET", read=_query_fields,
          doc=Doc("Fields of a query2 resource", (_FIELDS,), result=OBJ)),
]
