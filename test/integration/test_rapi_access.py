"""RAPI roles, API tokens and web console sessions through a real ganeti-rapi.

A 2-node virtual cluster; users of each role in the users file; every
refusal is checked to submit nothing (the queue's serial stays) and to be
logged with the user.  Helpers come from ``test_rapi.py``.
"""

from __future__ import annotations

import os
import stat
import time
import urllib.parse
from typing import Any

import pytest
from test_rapi import job_serial, request, wait_job, write_users
from vcluster_harness import VirtualCluster

from ganeti import constants

pytestmark = pytest.mark.timeout(300)

N1, N2 = "node1.vcluster", "node2.vcluster"
MINE, THEIRS = "mine.example.com", "theirs.example.com"
USERS = ("boss bpass write\n"          # Ganeti's write: admin
         "rita rpass read\n"           # Ganeti's read: readonly
         "olga opass operator\n"
         "owen wpass operator,owner\n")
BOSS, RITA, OLGA, OWEN = ("boss", "bpass"), ("rita", "rpass"), ("olga", "opass"), ("owen", "wpass")


def _make(vc, name: str, tags: list[str]) -> None:
    body = {"__version__": 1, "name": name, "os": "tinyos", "mode": "create",
            "disk_template": "diskless", "disks": [], "nics": [{}], "pnode": N1,
            "name_check": False, "ip_check": False, "start": True, "tags": tags}
    status, job_id, _ = request(vc, "POST", "/2/instances", body, auth=BOSS)
    assert status == 200, job_id
    assert wait_job(vc, job_id)["status"] == "success"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcacc"), nodes=2, use_ssh=False) as cluster:
        write_users(cluster, USERS)
        deadline = time.monotonic() + 10
        while request(cluster, "GET", "/2/tokens", auth=BOSS)[0] != 200:   # users loaded
            assert time.monotonic() < deadline, "users file not loaded"
            time.sleep(0.1)
        _make(cluster, MINE, ["owner:owen"])
        _make(cluster, THEIRS, [])
        yield cluster


def _ok_job(vc, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
    status, job_id, _ = request(vc, method, path, body, **kw)
    assert status == 200 and isinstance(job_id, int), (status, job_id)
    job = wait_job(vc, job_id)
    assert job["status"] == "success", job
    return job


def _refused(vc, method: str, path: str, body: Any = None, *, status: int = 403,
             **kw: Any) -> dict[str, Any]:
    """The request is refused with ``status`` and submits nothing."""
    before = job_serial(vc)
    got, answer, _ = request(vc, method, path, body, **kw)
    assert got == status, (got, answer)
    assert set(answer) == {"code", "message", "explain"} and answer["code"] == status
    assert job_serial(vc) == before
    return answer


def _daemon_log(vc) -> str:
    with open(vc.paths(N1).daemon_log_file(constants.RAPI), encoding="utf-8") as fh:
        return fh.read()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _status(vc, name: str) -> str:
    return request(vc, "GET", f"/2/instances/{name}")[1]["status"]


# --- roles --------------------------------------------------------------------------------

def test_readonly_is_refused_a_write_with_the_reason_and_a_log_line(vc):
    answer = _refused(vc, "PUT", f"/2/instances/{THEIRS}/shutdown", auth=RITA)
    assert "'rita'" in answer["explain"] and "readonly" in answer["explain"]
    assert "needs operator" in answer["explain"]
    log = _daemon_log(vc)
    assert "Refused PUT to user 'rita'" in log and "rpass" not in log
    assert request(vc, "GET", f"/2/instances/{THEIRS}", auth=RITA)[0] == 200


def test_operator_starts_and_stops_but_does_not_remove_or_modify(vc):
    _ok_job(vc, "PUT", f"/2/instances/{THEIRS}/shutdown", auth=OLGA)
    assert _status(vc, THEIRS) == "ADMIN_down"
    _ok_job(vc, "PUT", f"/2/instances/{THEIRS}/startup", auth=OLGA)
    assert _status(vc, THEIRS) == "running"
    _ok_job(vc, "PUT", f"/2/instances/{THEIRS}/tags?tag=seen", auth=OLGA)
    answer = _refused(vc, "PUT", f"/2/instances/{THEIRS}/tags?tag=owner:olga", auth=OLGA)
    assert "OP_TAGS_SET (an operator's only without 'owner:' tags)" in answer["explain"]
    answer = _refused(vc, "PUT", f"/2/instances/{THEIRS}/failover",
                      {"ignore_consistency": True}, auth=OLGA)
    assert "ignore_* overrides" in answer["explain"]
    answer = _refused(vc, "DELETE", f"/2/instances/{THEIRS}", auth=OLGA)
    assert "'olga'" in answer["explain"] and "needs admin" in answer["explain"]
    _refused(vc, "PUT", f"/2/instances/{THEIRS}/modify", {"beparams": {"maxmem": 256}},
             auth=OLGA)
    _refused(vc, "POST", "/2/instances", {"__version__": 1, "name": "x.example.com"},
             auth=OLGA)
    assert request(vc, "GET", f"/2/instances/{THEIRS}")[0] == 200


def test_operator_drains_and_undrains_a_node_but_does_not_offline_it(vc):
    _ok_job(vc, "PUT", f"/2/nodes/{N2}/role", "drained", auth=OLGA)
    assert request(vc, "GET", f"/2/nodes/{N2}/role")[1] == "drained"
    answer = _refused(vc, "PUT", f"/2/nodes/{N2}/role", "offline", auth=OLGA)
    assert "OP_NODE_SET_PARAMS (an operator's only when it sets drained" in answer["explain"]
    _refused(vc, "POST", f"/2/nodes/{N2}/modify", {"drained": False, "master_candidate": False},
             auth=OLGA)
    _ok_job(vc, "PUT", f"/2/nodes/{N2}/role", "regular", auth=OLGA)
    # undrained, back in the candidate pool (it has room), as gnt-node modify -D no
    assert request(vc, "GET", f"/2/nodes/{N2}/role")[1] == "master-candidate"


def test_owner_limited_operator_acts_on_its_tagged_instance_only(vc):
    _ok_job(vc, "POST", f"/2/instances/{MINE}/reboot", auth=OWEN)
    answer = _refused(vc, "POST", f"/2/instances/{THEIRS}/reboot", auth=OWEN)
    assert "not tagged 'owner:owen'" in answer["explain"]
    _refused(vc, "PUT", f"/2/instances/{THEIRS}/tags?tag=owner:owen", auth=OWEN)


# --- tokens -------------------------------------------------------------------------------

def test_token_works_as_bearer_and_stops_at_once_when_revoked(vc):
    status, made, _ = request(vc, "POST", "/2/tokens", {"comment": "ci"}, auth=OLGA)
    assert status == 200 and made["role"] == "operator" and made["user"] == "olga"
    token = made["token"]
    _ok_job(vc, "PUT", f"/2/instances/{THEIRS}/startup", headers=_bearer(token))
    _refused(vc, "DELETE", f"/2/instances/{THEIRS}", headers=_bearer(token))
    status, mine, _ = request(vc, "GET", "/2/tokens", headers=_bearer(token))
    assert status == 200 and [t["id"] for t in mine] == [made["id"]]
    assert "token" not in mine[0] and all("digest" not in t for t in mine)
    # on disk: the digest only, mode 0600
    path = vc.paths(N1).rapi_tokens_file
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    assert made["id"] in text and token.split("_", 2)[2] not in text
    # a token cannot make tokens
    _refused(vc, "POST", "/2/tokens", {}, headers=_bearer(token))
    # another user cannot revoke it; its creator can, and it stops at once
    assert request(vc, "DELETE", f"/2/tokens/{made['id']}", auth=RITA)[0] == 404
    assert request(vc, "DELETE", f"/2/tokens/{made['id']}", auth=OLGA)[0] == 200
    answer = _refused(vc, "PUT", f"/2/instances/{THEIRS}/startup", status=401,
                      headers=_bearer(token))
    assert "revoked" in answer["explain"]
    status, _, resp = request(vc, "GET", "/2/tokens", headers=_bearer(token))
    assert status == 401 and resp.getheader("WWW-Authenticate").startswith("Bearer ")
    assert made["id"] not in open(path, encoding="utf-8").read()


def test_token_role_is_at_most_its_creators_and_may_be_smaller(vc):
    assert request(vc, "POST", "/2/tokens", {"role": "admin"}, auth=OLGA)[0] == 403
    status, made, _ = request(vc, "POST", "/2/tokens", {"role": "readonly"}, auth=BOSS)
    assert status == 200
    _refused(vc, "PUT", f"/2/instances/{THEIRS}/startup", headers=_bearer(made["token"]))
    assert request(vc, "GET", "/2/info", headers=_bearer(made["token"]))[0] == 200


def test_expired_token_fails(vc):
    status, made, _ = request(vc, "POST", "/2/tokens", {"expires_in": 1}, auth=OLGA)
    assert status == 200
    assert request(vc, "GET", "/2/tokens", headers=_bearer(made["token"]))[0] == 200
    time.sleep(1.2)
    _refused(vc, "PUT", f"/2/instances/{THEIRS}/startup", status=401,
             headers=_bearer(made["token"]))
    _, listed, _ = request(vc, "GET", f"/2/tokens/{made['id']}", auth=OLGA)
    assert listed["expired"] is True


# --- sessions -----------------------------------------------------------------------------

def _login(vc, user: tuple[str, str]) -> tuple[str, str, Any]:
    form = urllib.parse.urlencode({"user": user[0], "password": user[1]}).encode()
    status, answer, resp = request(vc, "POST", "/ui/login", raw=form, headers={
        "Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200, answer
    cookie = resp.getheader("Set-Cookie")
    return cookie.split(";")[0], answer["csrf_token"], cookie


def test_login_sets_a_secure_httponly_strict_cookie(vc):
    pair, csrf, cookie = _login(vc, OLGA)
    attrs = [a.strip() for a in cookie.split(";")]
    assert pair.startswith("__Host-ganeti_session=") and len(pair) > 40
    assert {"Secure", "HttpOnly", "SameSite=Strict", "Path=/"} <= set(attrs)
    assert not any(a.lower().startswith("domain") for a in attrs)   # a __Host- cookie
    assert csrf and csrf not in cookie
    status, who, _ = request(vc, "GET", "/ui/session", headers={"Cookie": pair})
    assert status == 200 and who == {"user": "olga", "role": "operator", "csrf_token": csrf}


def test_login_with_json_and_a_wrong_password(vc):
    status, answer, resp = request(vc, "POST", "/ui/login", {"user": "olga",
                                                             "password": "nope"})
    assert status == 401 and resp.getheader("Set-Cookie") is None
    assert resp.getheader("WWW-Authenticate") is None      # no browser password dialog
    status, answer, resp = request(vc, "POST", "/ui/login", {"user": "olga",
                                                             "password": "opass"})
    assert status == 200 and answer["role"] == "operator"


def test_login_from_another_origin_is_refused(vc):
    creds = {"user": "olga", "password": "opass"}
    host, port = vc.cluster.master_node.ip, vc.cluster.rapi_port
    status, answer, resp = request(vc, "POST", "/ui/login", creds,
                                   headers={"Origin": "https://evil.example"})
    assert status == 403 and resp.getheader("Set-Cookie") is None
    assert "another origin" in answer["explain"]
    for origin in (f"http://{host}:{port}", f"https://{host}:{port + 1}", "null"):
        status, _, resp = request(vc, "POST", "/ui/login", creds, headers={"Origin": origin})
        assert status == 403 and resp.getheader("Set-Cookie") is None, origin
    status, _, resp = request(vc, "POST", "/ui/login", creds,
                              headers={"Origin": f"https://{host}:{port}"})
    assert status == 200 and resp.getheader("Set-Cookie")


def test_session_write_needs_the_csrf_token(vc):
    pair, csrf, _ = _login(vc, OLGA)
    path = f"/2/instances/{THEIRS}/startup"
    answer = _refused(vc, "PUT", path, headers={"Cookie": pair})
    assert "X-CSRF-Token" in answer["explain"]
    _refused(vc, "PUT", path, headers={"Cookie": pair, "X-CSRF-Token": csrf[:-1] + "x"})
    assert request(vc, "GET", f"/2/instances/{THEIRS}", headers={"Cookie": pair})[0] == 200
    # a GET row that submits a job is a write: it needs the header too
    answer = _refused(vc, "GET", f"/2/instances/{THEIRS}/console", headers={"Cookie": pair})
    assert "X-CSRF-Token" in answer["explain"]
    _ok_job(vc, "PUT", path, headers={"Cookie": pair, "X-CSRF-Token": csrf})
    # the session has olga's role, CSRF token or not
    _refused(vc, "DELETE", f"/2/instances/{THEIRS}",
             headers={"Cookie": pair, "X-CSRF-Token": csrf})


def test_logout_ends_the_session(vc):
    pair, csrf, _ = _login(vc, RITA)
    assert request(vc, "POST", "/ui/logout", headers={"Cookie": pair})[0] == 403   # no CSRF
    status, _, resp = request(vc, "POST", "/ui/logout",
                              headers={"Cookie": pair, "X-CSRF-Token": csrf})
    assert status == 200 and "Max-Age=0" in resp.getheader("Set-Cookie")
    assert request(vc, "GET", "/ui/session", headers={"Cookie": pair})[0] == 401
    assert request(vc, "GET", "/2/info", headers={"Cookie": pair})[0] == 401


def test_redistribution_copies_the_tokens_file_to_the_other_nodes(vc):
    status, made, _ = request(vc, "POST", "/2/tokens", {"comment": "copied"}, auth=BOSS)
    assert status == 200
    _ok_job(vc, "PUT", "/2/redistribute-config", auth=BOSS)
    copy = vc.paths(N2).rapi_tokens_file
    with open(copy, encoding="utf-8") as fh:
        text = fh.read()
    with open(vc.paths(N1).rapi_tokens_file, encoding="utf-8") as fh:
        assert fh.read() == text
    assert made["id"] in text and made["token"].split("_", 2)[2] not in text
    assert stat.S_IMODE(os.stat(copy).st_mode) == 0o600


def test_token_changes_reach_the_other_nodes_without_redist_conf(vc):
    status, made, _ = request(vc, "POST", "/2/tokens", {"comment": "failover"}, auth=BOSS)
    assert status == 200
    copy = vc.paths(N2).rapi_tokens_file
    with open(copy, encoding="utf-8") as fh:
        assert made["id"] in fh.read()
    assert request(vc, "DELETE", f"/2/tokens/{made['id']}", auth=BOSS)[0] == 200
    with open(copy, encoding="utf-8") as fh:
        assert made["id"] not in fh.read()      # a new master would refuse it too


def test_logout_with_a_body_is_refused_and_the_session_stays(vc):
    pair, csrf, _ = _login(vc, RITA)
    status, answer, _ = request(vc, "POST", "/ui/logout", {"x": 1},
                                headers={"Cookie": pair, "X-CSRF-Token": csrf})
    assert status == 400 and "no request body" in answer["explain"]
    assert request(vc, "GET", "/ui/session", headers={"Cookie": pair})[0] == 200


def test_an_open_event_stream_ends_when_its_token_is_revoked(vc):
    from test_rapi_events import Stream
    status, made, _ = request(vc, "POST", "/2/tokens", {"comment": "events"}, auth=OLGA)
    assert status == 200
    with Stream(vc, {}, _bearer(made["token"])) as stream:
        assert stream.resp.status == 200
        assert stream.resp.readline().startswith(b": ganeti events")
        assert request(vc, "DELETE", f"/2/tokens/{made['id']}", auth=OLGA)[0] == 200
        _ok_job(vc, "PUT", f"/2/instances/{THEIRS}/startup", auth=BOSS)   # events to send
        deadline = time.monotonic() + 20.0
        while stream.resp.readline():       # the daemon closes the stream
            assert time.monotonic() < deadline, "the stream outlived its revoked token"
