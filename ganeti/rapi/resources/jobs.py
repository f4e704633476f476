"""RAPI rows of jobs (list, one, cancel, wait for a change) and the event
stream (pure)."""

from __future__ import annotations

from typing import Any

from ganeti import errors, luxi
from ganeti.rapi import stream, uri
from ganeti.rapi.openapi import BULK, OBJ, STR, STRS, Doc, Param
from ganeti.rapi.opinput import Body
from ganeti.rapi.resources.base import (J_FIELDS, J_FIELDS_BULK, WAIT_TIMEOUT, Ctx, Route,
                                        bad)

__all__ = ["ROUTES"]


def _job_id(ctx: Ctx) -> int:
    return uri.parse_id(ctx.args["job_id"], "job id")


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
        raise bad("'fields' must be a list of field names")
    prev_info = body.get("previous_job_info")
    prev_serial = body.get("previous_log_serial")
    if prev_info is not None and not isinstance(prev_info, list):
        raise bad("'previous_job_info' must be a list")
    if prev_serial is not None and not isinstance(prev_serial, int):
        raise bad("'previous_log_serial' must be a number")
    res = ctx.client.WaitForJobChangeOnce(_job_id(ctx), fields, prev_info,
                                          -1 if prev_serial is None else prev_serial,
                                          WAIT_TIMEOUT)
    if not res or res == luxi.JOB_NOTCHANGED:
        return None
    if isinstance(res, list) and len(res) == 2:
        return {"job_info": res[0], "log_entries": res[1]}
    raise errors.HttpError(f"Job {_job_id(ctx)} not found", 404)


_WAIT_BODY = Body(extra=frozenset({"fields", "previous_job_info", "previous_log_serial"}))

ROUTES: list[Route] = [
    Route("/2/jobs", "GET", read=_jobs,
          doc=Doc("Jobs", (BULK,), result={"type": "array", "items": OBJ})),
    Route("/2/jobs/{job_id}", "GET", read=_job, doc=Doc("One job", result=OBJ)),
    Route("/2/jobs/{job_id}", "DELETE", read=lambda c: c.client.CancelJob(_job_id(c)),
          role="operator",
          doc=Doc("Cancel a job", result={"type": "array", "description": "[success, message]"})),
    Route("/2/jobs/{job_id}/wait", "GET", read=_job_wait, access="write", role="operator",
          body=_WAIT_BODY,
          doc=Doc("Wait (up to 10 s) for a job to change",
                  body={"type": "object", "required": ["fields"], "properties": {
                      "fields": STRS, "previous_job_info": {"type": "array", "nullable": True},
                      "previous_log_serial": {"type": "integer", "nullable": True}}},
                  result={"type": "object", "nullable": True, "properties": {
                      "job_info": {"type": "array"}, "log_entries": {"type": "array"}}})),
    Route("/2/events", "GET", read=stream.open_stream,    # Server-Sent Events
          doc=Doc("The cluster's events as Server-Sent Events (a stream; doc/rapi.md)",
                  (Param("jobs", "str", "comma-separated job ids: only events about these"),
                   Param("filter", "str", "a query2 filter (JSON) over the event fields"),
                   Param("last_id", "str", "resume after this event id (the Last-Event-ID"
                                           " header wins)")),
                  result={**STR, "description": "id:/event:/data: messages"},
                  media_type="text/event-stream")),
]
