"""The real ganeti-masterd, driven by raw LUXI frames."""

from __future__ import annotations

import os
import select
import socket
import time
from typing import Any

import pytest

from ganeti import errors, luxi, serializer
from test.integration.masterd_harness import LuxiConnection, MasterdHandle, start_masterd

DEADLINE = 30.0


def delay(duration: float = 0, **kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, **kw}


def fail_op(**kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_JQUEUE", "fail": True, **kw}


@pytest.fixture
def masterd(tmp_path):
    handle = start_masterd(tmp_path, workers=8, extra_args=["--max-message", "65536",
                                                             "--max-clients", "8"])
    try:
        yield handle
    finally:
        handle.close()


def wait_final(h: MasterdHandle, job_id: int) -> str:
    """Follow a job with WaitForJobChange until it is finalized."""
    prev = None
    deadline = time.monotonic() + DEADLINE
    with LuxiConnection(h.socket_path) as conn:
        while time.monotonic() < deadline:
            res = conn.call("WaitForJobChange", [job_id, ["status"], prev, -1, 5])
            if res == "nochange":
                continue
            prev = res[0]
            if prev[0] in ("success", "error", "canceled"):
                return prev[0]
    raise AssertionError(f"job {job_id} not finished in time")


def test_submit_wait_query_archive(masterd: MasterdHandle) -> None:
    job_id = masterd.call("SubmitJob", [[delay(0.05), {"OP_ID": "OP_TEST_JQUEUE",
                                                       "log_messages": ["one", "two"]}]])
    assert isinstance(job_id, int)
    # following the log: every message arrives once, in order
    seen: list[str] = []
    serial, prev = -1, None
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        res = masterd.call("WaitForJobChange", [job_id, ["status"], prev, serial, 5])
        if res == "nochange":
            continue
        prev, logs = res
        for entry in logs:
            serial = max(serial, entry[0])
            seen.append(entry[3])
        if prev[0] == "success":
            break
    assert seen == ["one", "two"]
    row = masterd.call("QueryJobs", [[job_id], ["status", "opstatus", "summary", "received_ts",
                                                "start_ts", "end_ts"]])[0]
    assert row[0] == "success" and row[1] == ["success", "success"]
    assert row[2] == ["TEST_DELAY(0.05)", "TEST_JQUEUE(False)"]
    assert all(isinstance(ts, list) and len(ts) == 2 for ts in row[3:])
    assert masterd.call("ArchiveJob", [job_id]) is True
    archived = os.path.join(masterd.paths.queue_archive_dir, "0", f"job-{job_id}")
    assert os.path.exists(archived)
    assert masterd.call("QueryJobs", [[job_id], ["archived"]]) == [[True]]


def test_invalid_submission_creates_no_job(masterd: MasterdHandle) -> None:
    with pytest.raises(errors.OpPrereqError) as info:
        masterd.call("SubmitJob", [[delay("soon")]])
    assert "duration" in str(info.value)
    with pytest.raises(errors.OpCodeError):
        masterd.call("SubmitJob", [[{"OP_ID": "OP_NOPE"}]])
    assert masterd.call("QueryJobs", [None, ["id"]]) == []


def test_cancel_waiting_job(masterd: MasterdHandle) -> None:
    blocker = masterd.call("SubmitJob", [[delay(3)]])
    waiter = masterd.call("SubmitJob", [[delay(0, depends=[[blocker, ["success"]]])]])
    deadline = time.monotonic() + DEADLINE
    while masterd.call("QueryJobs", [[waiter], ["status"]])[0][0] != "waiting":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    locks = masterd.call("Query", ["lock", ["name", "pending"], ["==", "name", f"job/{blocker}"]])
    assert locks["data"] == [[[0, f"job/{blocker}"], [0, [["success", [f"job/{waiter}"]]]]]]
    ok, msg = masterd.call("CancelJob", [waiter, False])
    assert ok, msg
    assert wait_final(masterd, waiter) == "canceled"
    ok, msg = masterd.call("CancelJob", [blocker, False])
    assert not ok


def test_submit_many_relative_dependencies(masterd: MasterdHandle) -> None:
    res = masterd.call("SubmitManyJobs", [[
        [delay(0.1)],                                             # 0 ok
        [delay(0, depends=[[-1, ["success"]]])],                  # 1 chain ok
        [delay(0, depends=[[-1, []]])],                           # 2 chain ok
        [fail_op()],                                              # 3 fails
        [delay(0, depends=[[-1, ["success"]]])],                  # 4 -> error
        [delay(0, depends=[[-2, ["error"]]])],                    # 5 ok (wanted error)
        [delay(5, comment="to be canceled")],                     # 6 canceled below
        [delay(0, depends=[[-1, ["success"]]])],                  # 7 -> canceled
        [delay(0, depends=[[-20, []]])],                          # 8 unresolvable
    ]])
    assert [r[0] for r in res] == [True] * 8 + [False]
    assert "-20" in res[8][1]
    ids = [r[1] for r in res[:8]]
    ok, _ = masterd.call("CancelJob", [ids[6], False])
    if ok:   # it may already be running on a free worker; then let it finish
        assert wait_final(masterd, ids[6]) == "canceled"
        assert wait_final(masterd, ids[7]) == "canceled"
    expected = {0: "success", 1: "success", 2: "success", 3: "error", 4: "error", 5: "success"}
    for idx, status in expected.items():
        assert wait_final(masterd, ids[idx]) == status, idx
    row = masterd.call("QueryJobs", [[ids[4]], ["opresult", "ops"]])[0]
    assert "wanted 'success'" in row[0][0][1][0]
    assert row[1][0]["depends"] == [[ids[3], ["success"]]]


def test_jobs_run_in_parallel(masterd: MasterdHandle) -> None:
    res = masterd.call("SubmitManyJobs", [[[delay(1.0)] for _ in range(6)]])
    ids = [r[1] for r in res]
    for j in ids:
        assert wait_final(masterd, j) == "success"
    rows = masterd.call("QueryJobs", [ids, ["opexec", "opend"]])
    starts = [r[0][0][0] + r[0][0][1] / 1e6 for r in rows]
    ends = [r[1][0][0] + r[1][0][1] / 1e6 for r in rows]
    # all six executions overlap in one common interval
    assert max(starts) < min(ends)


def test_kill_and_restart_keeps_every_acknowledged_job(masterd: MasterdHandle) -> None:
    acked = [masterd.call("SubmitJob", [[delay(0)]]) for _ in range(5)]
    long_running = [masterd.call("SubmitJob", [[delay(30)]]) for _ in range(8)]
    queued = [masterd.call("SubmitJob", [[delay(0)]]) for _ in range(4)]   # no free worker
    for j in acked:
        wait_final(masterd, j)
    deadline = time.monotonic() + DEADLINE
    while any(s[0] != "running" for s in masterd.call("QueryJobs", [long_running, ["status"]])):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    masterd.kill()
    masterd.restart()
    every = acked + long_running + queued
    rows = masterd.call("QueryJobs", [every, ["id", "status", "opresult"]])
    assert all(r is not None for r in rows)
    for row in rows:
        if row[0] in acked:
            assert row[1] == "success"
        elif row[0] in long_running:
            assert row[1] == "error"
            assert "stopped while the job was running" in row[2][0][1][0]
    for j in queued:
        assert wait_final(masterd, j) == "success"
    new = masterd.call("SubmitJob", [[delay(0)]])
    assert new > max(every)


def test_bad_input_keeps_daemon_alive(masterd: MasterdHandle) -> None:
    with LuxiConnection(masterd.socket_path, timeout=10) as conn:
        conn.send_raw(b"this is not json\x03")
        resp = serializer.loads(conn.recv_frame())
        assert resp["success"] is False and resp["result"][0] == "ProtocolError"
        resp = conn.call_raw("NoSuchMethod", [])
        assert resp["success"] is False and "NoSuchMethod" in resp["result"][1][0]
        resp = conn.call_raw("SubmitJob", [])
        assert resp["success"] is False and resp["result"][0] == "ParameterError"
        resp = conn.call_raw("QueryJobs", ["x", 5])
        assert resp["success"] is False
        conn.send_raw(b'{"method": "QueryJobs"}\x03')
        assert serializer.loads(conn.recv_frame())["success"] is False
        # the connection still works after all that
        assert conn.call("QueryConfigValues", [["cluster_name"]]) == ["cluster.example.com"]
    with LuxiConnection(masterd.socket_path, timeout=10) as conn:
        conn.send_raw(b"[" + b"1," * 40000 + b"1]\x03")   # > 64 KiB (--max-message)
        resp = serializer.loads(conn.recv_frame())
        assert resp["success"] is False and resp["result"][0] == "ProtocolError"
        with pytest.raises((ConnectionError, OSError)):
            conn.recv_frame()
    assert masterd.call("QueryConfigValues", [["cluster_name"]]) == ["cluster.example.com"]


def _closed_by_server(sock: socket.socket, wait: float = 0.5) -> bool:
    """Whether the peer has closed ``sock`` (end of file or reset), without reading data."""
    ready, _, _ = select.select([sock], [], [], wait)
    if not ready:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _fill_to_the_cap(masterd: MasterdHandle, cap: int) -> list[LuxiConnection]:
    """``cap`` served connections, all still open.

    Under load the server may still hold the harness's last connection (its
    worker not yet done with it, so not idle and not evictable); a connection
    of ours closed to make room for it means: start again.
    """
    for _ in range(10):
        conns = []
        for _ in range(cap):
            conns.append(LuxiConnection(masterd.socket_path, timeout=10))
            conns[-1].call("QueryConfigValues", [["cluster_name"]])
        if not any(_closed_by_server(c.sock, wait=0.05) for c in conns):
            return conns
        for c in conns:
            c.close()
        time.sleep(0.2)
    raise AssertionError(f"could not hold {cap} connections open")


def test_connection_cap_closes_the_idle_longest(masterd: MasterdHandle) -> None:
    conns = _fill_to_the_cap(masterd, 8)
    try:
        # a ninth is served: the connection idle the longest makes room.  A
        # connection an earlier test closed may still be open on the server's
        # side (its end not read yet under load); closing that one makes room
        # too, so open ninths until one of ours goes, looking without a request
        for _ in range(8):
            with LuxiConnection(masterd.socket_path, timeout=10) as extra:
                assert extra.call("QueryConfigValues",
                                  [["cluster_name"]]) == ["cluster.example.com"]
            if _closed_by_server(conns[0].sock):
                break
        assert _closed_by_server(conns[0].sock)
        assert not any(_closed_by_server(c.sock) for c in conns[1:])
        assert conns[-1].call("QueryConfigValues", [["cluster_name"]]) == ["cluster.example.com"]
    finally:
        for c in conns:
            c.close()


def test_connection_cap_refuses_when_all_are_busy(masterd: MasterdHandle) -> None:
    job_id = masterd.call("SubmitJob", [[delay(30)]])
    deadline = time.monotonic() + DEADLINE
    while masterd.call("QueryJobs", [[job_id], ["status"]])[0][0] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)   # the polls' connections are gone on the server side too
    conns = [LuxiConnection(masterd.socket_path, timeout=30) for _ in range(8)]
    try:
        for c in conns:   # each long-polls: busy for 5 s
            c.send_raw(luxi.encode_request("WaitForJobChange",
                                           [job_id, ["status"], ["running"], 10 ** 6, 5]))
        time.sleep(0.5)   # let the requests reach the workers (a refusal needs all 8 busy)
        with LuxiConnection(masterd.socket_path, timeout=10) as extra:
            resp = serializer.loads(extra.recv_frame())
            assert resp["success"] is False and "Too many" in resp["result"][1][0]
        for c in conns:
            assert luxi.parse_response(c.recv_frame()) == "nochange"
    finally:
        for c in conns:
            c.close()
        masterd.call("CancelJob", [job_id, True])
    assert masterd.call("QueryConfigValues", [["cluster_name"]]) == ["cluster.example.com"]


def test_drain_flag_and_watcher_pause(masterd: MasterdHandle) -> None:
    masterd.call("SetDrainFlag", [True])
    assert masterd.call("QueryConfigValues", [["drain_flag"]]) == [True]
    with pytest.raises(errors.JobQueueDrainError):
        masterd.call("SubmitJob", [[delay(0)]])
    with pytest.raises(errors.JobQueueDrainError):
        masterd.call("SubmitManyJobs", [[[delay(0)]]])
    job_id = masterd.call("SubmitJobToDrainedQueue", [[delay(0)]])
    assert wait_final(masterd, job_id) == "success"
    masterd.call("SetDrainFlag", [False])
    assert masterd.call("QueryConfigValues", [["drain_flag"]]) == [False]
    until = time.time() + 3600
    masterd.call("SetWatcherPause", [until])
    # stored in whole seconds, as Ganeti does
    assert masterd.call("QueryConfigValues", [["watcher_pause"]]) == [int(until)]
    masterd.call("SetWatcherPause", [None])
    assert masterd.call("QueryConfigValues", [["watcher_pause"]]) == [None]


def test_cluster_info_tags_priority_autoarchive(masterd: MasterdHandle) -> None:
    info = masterd.call("QueryClusterInfo", [])
    assert info["name"] == "cluster.example.com" and info["master"] == "node1.example.com"
    assert masterd.call("QueryTags", ["cluster", ""]) == []
    with pytest.raises(errors.OpPrereqError):
        masterd.call("QueryTags", ["node", "nonexistent"])
    job_id = masterd.call("SubmitJob", [[{"OP_ID": "OP_CLUSTER_QUERY"}]])
    assert wait_final(masterd, job_id) == "success"
    assert masterd.call("QueryJobs", [[job_id], ["opresult"]])[0][0][0]["name"] == info["name"]
    ok, _ = masterd.call("ChangeJobPriority", [job_id, 5])
    assert not ok   # finished
    assert masterd.call("AutoArchiveJobs", [-1, 30]) == [1, 0]


def test_sigterm_exits_cleanly(masterd: MasterdHandle) -> None:
    job_id = masterd.call("SubmitJob", [[delay(0.5)]])
    deadline = time.monotonic() + DEADLINE
    while masterd.call("QueryJobs", [[job_id], ["status"]])[0][0] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert masterd.stop(timeout=30) == 0
    assert not os.path.exists(masterd.socket_path)
    masterd.restart()
    assert masterd.call("QueryJobs", [[job_id], ["status"]]) == [["success"]]


def test_the_query_socket_of_ganeti_2_10_leads_to_the_master(masterd: MasterdHandle) -> None:
    """Ganeti 2.10+'s clients use luxid's socket, ganeti-query: a link to ours."""
    query = masterd.paths.query_socket
    assert os.path.islink(query) and os.readlink(query) == "ganeti-master"
    with luxi.Client(query) as client:
        assert client.QueryConfigValues(["cluster_name"])[0]
        job_id = client.SubmitJob([delay()])
    assert wait_final(masterd, job_id) == "success"
