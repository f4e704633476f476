"""The event stream of a real ganeti-masterd over LUXI (WaitForEvents).

A job's submission, every status change and each log line arrive in
order; a reader resumes from a middle id; a reader that fell behind the
bounded buffer gets a gap; a reader that never reads its answers does not
hold up the job queue.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from ganeti import errors, luxi
from test.integration.masterd_harness import LuxiConnection, MasterdHandle, start_masterd

DEADLINE = 60.0
FINAL = ("success", "error", "canceled")


@pytest.fixture
def masterd(tmp_path):
    handle = start_masterd(tmp_path, workers=4, extra_args=["--event-buffer", "64"])
    try:
        yield handle
    finally:
        handle.close()


def _jqueue(msgs: list[str]) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_JQUEUE", "log_messages": msgs}


def _read_until_finished(conn: LuxiConnection, cursor: int, job_ids: set[int],
                         flt: Any = None) -> tuple[int, list[dict[str, Any]]]:
    """Long-poll from ``cursor`` until every job in ``job_ids`` finished."""
    seen: list[dict[str, Any]] = []
    left = set(job_ids)
    deadline = time.monotonic() + DEADLINE
    while left:
        assert time.monotonic() < deadline, f"jobs {left} did not finish: {seen[-5:]}"
        answer = conn.call("WaitForEvents", [cursor, flt, 10])
        cursor = answer["last_id"]
        for event in answer["events"]:
            seen.append(event)
            if event["type"] == "job.finished":
                left.discard(event["job_id"])
    return cursor, seen


def _shape(seen: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for event in seen:
        data = event["data"]
        if event["type"] == "job.log":
            out.append(("log", data["message"]))
        elif event["type"] == "job.status":
            out.append(("status", tuple(data["opstatus"])))
        else:
            out.append((event["type"], data["status"]))
    return out


def test_a_job_shows_submitted_every_status_and_each_log_line_in_order(
        masterd: MasterdHandle) -> None:
    with LuxiConnection(masterd.socket_path) as conn:
        start = conn.call("WaitForEvents", [None, None, 0])
        assert start["events"] == []
        job_id = conn.call("SubmitJob", [[_jqueue(["one", "two"]), _jqueue(["three"])]])
        _, seen = _read_until_finished(conn, start["last_id"], {job_id},
                                       {"jobs": [job_id]})
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
    ids = [e["id"] for e in seen]
    assert ids == sorted(ids) and all(e["job_id"] == job_id for e in seen)
    # the same log lines as the job itself reports
    (oplog,) = luxi.Client(masterd.socket_path).QueryJobs([job_id], ["oplog"])
    assert [e[3] for op in oplog[0] for e in op] == ["one", "two", "three"]


def test_resume_from_a_middle_id_gives_the_rest(masterd: MasterdHandle) -> None:
    with LuxiConnection(masterd.socket_path) as conn:
        cursor = conn.call("WaitForEvents", [None, None, 0])["last_id"]
        job_id = conn.call("SubmitJob", [[_jqueue(["a", "b", "c"])]])
        _, seen = _read_until_finished(conn, cursor, {job_id})
        middle = seen[3]["id"]
        again = conn.call("WaitForEvents", [middle, {"jobs": [job_id]}, 0])
    assert [e["id"] for e in again["events"]] == [e["id"] for e in seen[4:]]
    assert again["events"] == seen[4:]


def test_a_query2_filter_narrows_the_stream(masterd: MasterdHandle) -> None:
    with LuxiConnection(masterd.socket_path) as conn:
        cursor = conn.call("WaitForEvents", [None, None, 0])["last_id"]
        ok = conn.call("SubmitJob", [[_jqueue(["x"])]])
        bad = conn.call("SubmitJob", [[{**_jqueue(["y"]), "fail": True}]])
        _read_until_finished(conn, cursor, {ok, bad})
        answer = conn.call("WaitForEvents", [cursor, {"filter": [
            "&", ["==", "type", "job.finished"], ["==", "status", "error"]]}, 0])
    assert [(e["job_id"], e["data"]["status"]) for e in answer["events"]] == [(bad, "error")]


def test_a_reader_behind_the_buffer_gets_a_gap(masterd: MasterdHandle) -> None:
    client = luxi.Client(masterd.socket_path)
    first = client.WaitForEvents(None, None, 0)["last_id"]
    ids = [r[1] for r in client.SubmitManyJobs([[_jqueue(["m"] * 5)] for _ in range(10)])]
    with LuxiConnection(masterd.socket_path) as conn:
        _read_until_finished(conn, first, set(ids))   # 10 jobs x 9 events > 64 kept
    answer = client.WaitForEvents(first, None, 0)
    gap = answer["events"][0]
    assert gap["type"] == "gap" and gap["data"]["after"] == first
    assert gap["data"]["missed"] == gap["id"] - first > 0
    assert [e["id"] for e in answer["events"][1:]] == list(range(gap["id"] + 1,
                                                                 answer["last_id"] + 1))
    assert len(answer["events"]) == 65


def test_a_reader_that_never_reads_does_not_hold_up_jobs(masterd: MasterdHandle) -> None:
    client = luxi.Client(masterd.socket_path)
    warm = [r[1] for r in client.SubmitManyJobs([[_jqueue(["w"] * 5)] for _ in range(10)])]
    with LuxiConnection(masterd.socket_path) as conn:
        _read_until_finished(conn, 0, set(warm))           # the buffer is full now
    stuck = LuxiConnection(masterd.socket_path)
    try:
        # Pipelined long polls (each answer: the whole buffer) that are never
        # read, until the master stops reading them: its handler for this
        # connection is then blocked sending on a full socket.
        request = luxi.encode_request("WaitForEvents", [0, None, 0])
        stuck.sock.setblocking(False)
        sent = 0
        for sent in range(20000):
            try:
                stuck.sock.send(request)
            except BlockingIOError:
                break
        else:
            raise AssertionError("the master kept reading unread long polls")
        assert sent > 10
        cursor = client.WaitForEvents(None, None, 0)["last_id"]
        count = 40
        ids = [r[1] for r in client.SubmitManyJobs(
            [[_jqueue([f"job {i} line {k}" for k in range(3)])] for i in range(count)])]
        for job_id in ids:   # each within the normal WaitForJobChange timeout
            prev, serial = None, -1
            for _ in range(20):
                res = client.WaitForJobChangeOnce(job_id, ["status"], prev, serial, 10)
                if res != "nochange":
                    prev = res[0]
                    serial = max([serial] + [entry[0] for entry in res[1]])
                    if prev[0] in FINAL:
                        break
            assert prev == ["success"], (job_id, prev)
        # and every event of every job was published: submitted, running,
        # 3 log lines, success, finished (the oldest fell out of the buffer)
        answer = client.WaitForEvents(cursor, None, 0)
        gap, *kept = answer["events"]
        assert answer["last_id"] - cursor == 7 * count
        assert gap["type"] == "gap" and gap["data"]["missed"] + len(kept) == 7 * count
        assert kept[-1]["type"] == "job.finished" and len(kept) == 64
    finally:
        stuck.sock.close()


def test_bad_event_filters_are_refused(masterd: MasterdHandle) -> None:
    client = luxi.Client(masterd.socket_path)
    for flt in ({"jobs": "1"}, {"filter": ["==", "nosuchfield", 1]}, [1], {"what": 1}):
        with pytest.raises(errors.GanetiError):
            client.WaitForEvents(None, flt, 0)
    with pytest.raises(errors.ParameterError):
        client.call("WaitForEvents", ["x", None, 0])
    assert client.WaitForEvents(None, None, 0)["events"] == []
