"""ganeti-rapi against hostile requests on a real 1-node virtual cluster (issue 25).

* a body never chooses the opcode: ``OP_ID``, path parameters and unknown
  keys are a 400 naming them, for every row of the table, and nothing is
  submitted (the job queue's serial stays);
* paths are split before decoding: ``%2F`` is part of a name (404), and
  ids are ASCII digits of bounded length (400/404, never 500);
* an anonymous request costs little: 64 KiB of body at most (413 before
  reading), a bounded JSON shape (400), and the daemon's memory comes back.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from typing import Any

import pytest
from test_rapi import READER, USERS, WRITER, _concrete, _tls, addr, job_serial, request, \
    wait_job, wait_until, write_users
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl
from ganeti.rapi import resources
from ganeti.server import rapi as rapi_server

pytestmark = pytest.mark.timeout(300)

N1 = "node1.vcluster"
INST = "hard1.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vch"), nodes=1, use_ssh=False) as cluster:
        write_users(cluster, USERS)
        wait_until(lambda: request(cluster, "GET", "/2/features", auth=READER)[0] == 200,
                   "the users file loaded")
        body = {"__version__": 1, "name": INST, "os": "tinyos", "mode": "create",
                "disk_template": "diskless", "disks": [], "nics": [{}], "pnode": N1,
                "name_check": False, "ip_check": False, "start": False}
        status, job_id, _ = request(cluster, "POST", "/2/instances", body, auth=WRITER)
        assert status == 200, job_id
        assert wait_job(cluster, job_id)["status"] == "success"
        yield cluster


def _status(vc) -> str:
    return request(vc, "GET", f"/2/instances/{INST}")[1]["status"]


# --- 1. no opcode smuggling ----------------------------------------------------------------

def test_a_body_cannot_run_another_opcode(vc):
    before = job_serial(vc)
    for body in ({"OP_ID": "OP_TEST_DELAY", "duration": 0},
                 {"OP_ID": "OP_CLUSTER_DESTROY"}):
        status, answer, _ = request(vc, "PUT", "/2/modify", body, auth=WRITER)
        assert status == 400, answer
        assert "'OP_ID'" in answer["explain"] and "chooses the opcode" in answer["explain"]
    status, answer, _ = request(vc, "PUT", f"/2/instances/{INST}/modify",
                                {"instance_name": "other", "bogus": 1}, auth=WRITER)
    assert status == 400
    assert "'instance_name'" in answer["explain"] and "'bogus'" in answer["explain"]
    assert job_serial(vc) == before
    assert request(vc, "GET", "/2/info")[0] == 200


_SUBMITTING = [r for r in resources.ROUTES if r.needs_write or r.build is not None]


@pytest.mark.parametrize("route", _SUBMITTING, ids=lambda r: f"{r.method} {r.path}")
def test_no_row_accepts_op_id_or_unknown_keys(vc, route):
    path = _concrete(route.path).replace("nosuch", INST if "instances" in route.path
                                         else N1 if "nodes" in route.path else "default")
    before = job_serial(vc)
    body = {"OP_ID": "OP_TEST_DELAY", "duration": 0, "no_such_key": 1}
    status, answer, _ = request(vc, route.method, path, body, auth=WRITER)
    assert status == 400, (status, answer)
    if route.body.kind != "any":        # PUT .../role wants a JSON string and says so
        assert "'OP_ID'" in answer["explain"] and "'no_such_key'" in answer["explain"]
    assert job_serial(vc) == before


def test_the_keys_of_a_rows_own_opcode_still_work(vc):
    status, job_id, _ = request(vc, "PUT", f"/2/instances/{INST}/modify",
                                {"beparams": {"vcpus": 2}}, auth=WRITER)
    assert status == 200 and wait_job(vc, job_id)["status"] == "success"
    assert request(vc, "GET", f"/2/instances/{INST}")[1]["beparams"]["vcpus"] == 2


# --- 4. paths and ids ----------------------------------------------------------------------

def test_an_encoded_slash_is_part_of_a_name(vc):
    assert _status(vc) == "ADMIN_down"
    before = job_serial(vc)
    for method, path in (("PUT", f"/2/instances/{INST}%2Fstartup"),
                         ("PUT", f"/2/instances/{INST}%2fstartup"),
                         ("GET", f"/2/instances/{INST}%2Finfo"),
                         ("DELETE", f"/2/instances/{INST}%2Ftags?tag=x")):
        status, answer, _ = request(vc, method, path, auth=WRITER)
        assert status == 404, (path, status, answer)
    assert job_serial(vc) == before and _status(vc) == "ADMIN_down"
    # the same name, encoded without a slash, is the instance
    encoded = INST.replace(".", "%2E")
    assert request(vc, "GET", f"/2/instances/{encoded}")[0] == 200


@pytest.mark.parametrize("path, expected", [
    ("/2/jobs/%C2%B2", 400),                    # "²".isdigit() holds
    ("/2/jobs/%D9%A1", 400),                    # an Arabic-Indic digit
    ("/2/jobs/" + "9" * 5000, 404),             # int() refuses 4,300 digits
    ("/2/jobs/" + "0" * 5000 + "1", 200),       # leading zeros: still job 1
    ("/2/jobs/99999999999999999999", 404),      # above a signed 64-bit word
    ("/2/events?jobs=" + "9" * 5000, 400),
    (f"/2/instances/{INST}/disk/%C2%B2/grow", 400),
], ids=["superscript", "arabic", "5000-digits", "leading-zeros", "int64", "events-jobs",
        "disk-index"])
def test_ids_are_ascii_digits_of_bounded_length(vc, path, expected):
    method = "POST" if path.endswith("/grow") else "GET"
    status, answer, _ = request(vc, method, path, {"amount": 1} if method == "POST" else None,
                                auth=WRITER)
    assert status == expected, (status, answer)
    assert "Traceback" not in json.dumps(answer)
    if status != 200:
        assert len(answer["explain"]) < 300


# --- 3. what an anonymous request may cost -------------------------------------------------

def _head_only(vc, length: int, auth: tuple[str, str] | None = None) -> bytes:
    """Send a query's head announcing ``length`` bytes of body, none of them; the reply."""
    host, port = addr(vc)
    head = (b"PUT /2/query/instance HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {length}\r\n".encode())
    if auth:
        head += b"Authorization: Basic " + base64.b64encode(":".join(auth).encode()) + b"\r\n"
    with socket.create_connection((host, port), timeout=60) as raw:
        with _tls().wrap_socket(raw) as sock:
            sock.sendall(head + b"\r\n")
            return sock.recv(4096)


def _query(padding: int) -> dict[str, Any]:
    """A query body of about ``padding`` bytes (a filter on a long OS name)."""
    return {"fields": ["name"], "qfilter": ["=", "os", "x" * padding]}


def test_anonymous_bodies_are_small_and_refused_unread(vc):
    limit = rapi_server.MAX_ANONYMOUS_BODY
    assert _head_only(vc, limit + 1).startswith(b"HTTP/1.1 413")
    assert _head_only(vc, 9_900_000).startswith(b"HTTP/1.1 413")
    assert request(vc, "PUT", "/2/query/instance", _query(limit - 200))[0] == 200
    status, answer, _ = request(vc, "PUT", "/2/query/instance", _query(limit + 10))
    assert status == 413 and "without credentials" in answer["explain"]
    # with credentials (a read-only user will do) the larger limit applies
    assert request(vc, "PUT", "/2/query/instance", _query(4 * limit), auth=READER)[0] == 200


@pytest.mark.parametrize("raw, text", [
    (b"[" * 65 + b"]" * 65, "nested too deep"),
    (b'{"fields": [' + b"0," * 200_001 + b"0]}", "too large"),
], ids=["deep", "many-values"])
def test_the_json_shape_is_bounded_before_decoding(vc, raw, text):
    auth = None if len(raw) <= rapi_server.MAX_ANONYMOUS_BODY else READER
    status, answer, _ = request(vc, "PUT", "/2/query/instance", raw=raw, auth=auth,
                                headers={"Content-Type": "application/json"})
    assert status == 400 and text in answer["explain"], answer


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_parallel_large_bodies_leave_the_daemon_small(vc):
    pid = daemonctl.daemon_pid(vc.paths(N1), constants.RAPI)
    assert pid is not None
    before = _rss_kib(pid)
    replies: list[bytes] = []

    def anonymous() -> None:
        replies.append(_head_only(vc, 9_900_000))

    def reader() -> None:        # authenticated: read, shape-checked, refused, given back
        raw = b'{"fields": [' + b"0," * 3_000_000 + b"0]}"
        replies.append(str(request(vc, "PUT", "/2/query/instance", raw=raw, auth=READER,
                                   headers={"Content-Type": "application/json"})[0]).encode())

    threads = [threading.Thread(target=fn) for fn in [anonymous] * 6 + [reader] * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(r[:12] for r in replies) == [b"400"] * 3 + [b"HTTP/1.1 413"] * 6
    after = _rss_kib(pid)
    # before: six anonymous 9.9 MB bodies took the daemon from 58 to 840 MiB, 417 kept
    assert after - before < 48 * 1024, (before, after)
    assert request(vc, "GET", "/version")[0] == 200
