"""``GET /2/events`` of a real ganeti-rapi over TLS on a 3-node virtual cluster.

A job's submission, each status change, each log line and its end arrive
in order on an open stream (pushed: the client only reads); a client that
reconnects with ``Last-Event-ID`` from the middle gets exactly the rest;
``jobs=`` and a query2 ``filter`` narrow the stream.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.parse
from typing import Any

import pytest
from vcluster_harness import VirtualCluster

from ganeti import luxi

pytestmark = pytest.mark.timeout(300)

N1 = "node1.vcluster"
#: most messages one test reads from a stream before giving up
MAX_MESSAGES = 200


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vce"), nodes=3, use_ssh=False) as cluster:
        yield cluster


def _jqueue(msgs: list[str], **kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_JQUEUE", "log_messages": msgs, **kw}


def _master(vc) -> luxi.Client:
    return luxi.Client(vc.paths(N1).master_socket)


class Stream:
    """One open ``GET /2/events``: read SSE messages one at a time."""

    def __init__(self, vc, query: dict[str, str] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self.conn = http.client.HTTPSConnection(vc.cluster.master_node.ip,
                                                vc.cluster.rapi_port, context=ctx, timeout=60)
        path = "/2/events" + ("?" + urllib.parse.urlencode(query) if query else "")
        self.conn.request("GET", path, headers=headers or {})
        self.resp = self.conn.getresponse()
        self.comments: list[str] = []

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.conn.close()

    def next(self) -> dict[str, Any]:
        """The next message: ``{"id", "event", "data"}`` with ``data`` decoded."""
        msg: dict[str, Any] = {}
        data: list[str] = []
        for _ in range(1000):
            line = self.resp.readline()
            assert line, "the stream ended"
            text = line.decode("utf-8").rstrip("\n")
            if not text:
                if data:
                    return {**msg, "data": json.loads("\n".join(data))}
                continue
            if text.startswith(":"):
                self.comments.append(text)
                continue
            name, _, value = text.partition(": ")
            if name == "data":
                data.append(value)
            else:
                msg[name] = value
        raise AssertionError("no message in 1000 lines")

    def until_finished(self, job_ids: set[int]) -> list[dict[str, Any]]:
        """Messages until every job in ``job_ids`` finished (bounded)."""
        seen, left = [], set(job_ids)
        for _ in range(MAX_MESSAGES):
            msg = self.next()
            seen.append(msg)
            if msg["event"] == "job.finished":
                left.discard(msg["data"]["job_id"])
            if not left:
                return seen
        raise AssertionError(f"jobs {left} did not finish in {MAX_MESSAGES} messages")


def _shape(seen: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for msg in seen:
        data = msg["data"]["data"]
        if msg["event"] == "job.log":
            out.append(("log", data["message"]))
        elif msg["event"] == "job.status":
            out.append(("status", tuple(data["opstatus"])))
        else:
            out.append((msg["event"], data["status"]))
    return out


def test_an_open_stream_shows_a_job_in_order_and_resumes_with_last_event_id(vc):
    with Stream(vc) as stream:
        assert stream.resp.status == 200
        assert stream.resp.getheader("Content-Type") == "text/event-stream"
        assert stream.resp.getheader("Content-Length") is None
        job_id = _master(vc).call("SubmitJob", [[_jqueue(["one", "two"]),
                                                 _jqueue(["three"])]])
        seen = [m for m in stream.until_finished({job_id})
                if m["data"]["job_id"] == job_id]
        assert stream.comments[:1] == [": ganeti events"]
    assert _shape(seen) == [
        ("job.submitted", "queued"),
        ("status", ("running", "queued")),
        ("log", "one"), ("log", "two"),
        ("status", ("success", "queued")),
        ("status", ("success", "running")),
        ("log", "three"),
        ("status", ("success", "success")),
        ("job.finished", "success"),
    ]
    ids = [int(m["id"]) for m in seen]
    assert ids == sorted(ids) and all(m["data"]["id"] == i for m, i in zip(seen, ids))

    # reconnect from the middle: exactly the rest, then what happens next
    middle = seen[3]["id"]
    with Stream(vc, {"jobs": str(job_id)}, {"Last-Event-ID": middle}) as stream:
        rest = [stream.next() for _ in seen[4:]]
        assert rest == seen[4:]
    with Stream(vc, {"last_id": middle}) as stream:     # the parameter form
        again = [m for m in stream.until_finished({job_id})
                 if m["data"]["job_id"] == job_id]
        assert again == seen[4:]
        second = _master(vc).call("SubmitJob", [[_jqueue([])]])
        after = stream.next()
        while after["data"]["job_id"] not in (job_id, second):
            after = stream.next()         # an unrelated event (e.g. the config)
        assert (after["data"]["job_id"], after["event"]) == (second, "job.submitted")


def test_jobs_and_a_query2_filter_narrow_the_stream(vc):
    master = _master(vc)
    cursor = master.WaitForEvents(None, None, 0)["last_id"]
    bad = master.call("SubmitJob", [[_jqueue(["x"], fail=True)]])
    ok = master.call("SubmitJob", [[_jqueue(["y"])]])
    with Stream(vc, {"jobs": str(ok), "last_id": str(cursor)}) as stream:
        only_ok = stream.until_finished({ok})
    assert {m["data"]["job_id"] for m in only_ok} == {ok}
    assert [m["event"] for m in only_ok][0::len(only_ok) - 1] == ["job.submitted",
                                                                    "job.finished"]
    finished = json.dumps(["==", "type", "job.finished"])
    with Stream(vc, {"filter": finished, "last_id": str(cursor)}) as stream:
        ends = stream.until_finished({ok, bad})
    assert {m["event"] for m in ends} == {"job.finished"}   # maybe an earlier job's too
    # the two jobs run side by side: either may finish first
    assert sorted((m["data"]["job_id"], m["data"]["data"]["status"]) for m in ends
                  if m["data"]["job_id"] in (ok, bad)) == [(bad, "error"), (ok, "success")]


def test_bad_requests_and_credentials(vc):
    for query, headers in [({"jobs": "1,x"}, {}), ({"filter": "[oops"}, {}),
                           ({}, {"Last-Event-ID": "abc"})]:
        with Stream(vc, query, headers) as stream:
            assert stream.resp.status == 400
            body = json.loads(stream.resp.read())
            assert body["code"] == 400 and body["explain"]
    wrong = base64.b64encode(b"nobody:nothing").decode()
    with Stream(vc, {}, {"Authorization": "Basic " + wrong}) as stream:
        assert stream.resp.status == 401
    with Stream(vc) as stream:                             # the daemon is still fine
        assert stream.resp.status == 200
