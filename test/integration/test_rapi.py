"""ganeti-rapi over TLS on a 3-node virtual cluster: reads, writes, auth, bad input.

The RAPI daemon is started by ``gnt-cluster init`` on the master and
listens on the master's address at the cluster's RAPI port
(``GANETI_RAPI_PORT``).  Requests use the standard library's HTTPS client.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from typing import Any

import pytest
import rapi_fuzz
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.rapi import resources
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(300)

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"
INST = "rapi1.example.com"
USERS = "# test users\nwriter wpass write\nreader {cleartext}rpass read\n"
WRITER = ("writer", "wpass")
READER = ("reader", "rpass")


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcr"), nodes=3, use_ssh=False) as cluster:
        write_users(cluster, USERS)
        yield cluster


def _tls() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def addr(vc) -> tuple[str, int]:
    return vc.cluster.master_node.ip, vc.cluster.rapi_port


def request(vc, method: str, path: str, body: Any = None, *, auth: tuple[str, str] | None = None,
            raw: bytes | None = None, headers: dict[str, str] | None = None
            ) -> tuple[int, Any, http.client.HTTPResponse]:
    host, port = addr(vc)
    conn = http.client.HTTPSConnection(host, port, context=_tls(), timeout=60)
    hdrs = dict(headers or {})
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    if auth:
        hdrs["Authorization"] = "Basic " + base64.b64encode(
            f"{auth[0]}:{auth[1]}".encode()).decode()
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        text = resp.read()
    finally:
        conn.close()
    return resp.status, (json.loads(text) if text else None), resp


def write_users(vc, text: str) -> None:
    path = vc.paths(N1).rapi_users_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as fh:
        fh.write(text)
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)


def wait_until(check, what: str, tries: int = 200) -> None:
    for _ in range(tries):
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def job_serial(vc) -> str:
    with open(vc.paths(N1).queue_serial_file) as fh:
        return fh.read().strip()


def wait_job(vc, job_id: int) -> dict[str, Any]:
    for _ in range(600):
        status, job, _ = request(vc, "GET", f"/2/jobs/{job_id}")
        assert status == 200
        if job["status"] in ("success", "error", "canceled"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")


def submit_ok(vc, method: str, path: str, body: Any = None) -> dict[str, Any]:
    status, job_id, _ = request(vc, method, path, body, auth=WRITER)
    assert status == 200 and isinstance(job_id, int), (status, job_id)
    job = wait_job(vc, job_id)
    assert job["status"] == "success", (job.get("opresult"), job.get("oplog"))
    return job


# --- reads ----------------------------------------------------------------------------

def test_env_prints_the_rapi_port(vc):
    tool = os.path.join(vcluster.REPO_ROOT, "tools", "vcluster")
    out = subprocess.run([sys.executable, tool, "env", vc.directory], capture_output=True,
                         text=True, check=True).stdout
    assert f"export {constants.ENV_RAPI_PORT}={vc.cluster.rapi_port}\n" in out


def test_version_root_features(vc):
    assert request(vc, "GET", "/version")[:2] == (200, 2)
    assert request(vc, "GET", "/")[:2] == (200, None)
    assert request(vc, "GET", "/2/features")[1] == resources.FEATURES


def test_info_matches_gnt_cluster(vc):
    status, info, resp = request(vc, "GET", "/2/info")
    assert status == 200 and resp.getheader("Content-Type") == "application/json"
    assert info["name"] == "cluster.vcluster" and info["master"] == N1


def test_info_and_modify_are_symmetric(vc):
    # Ganeti's QA TestEmptyCluster: every parameter of the cluster change is in /2/info
    # (vg_name and drbd_helper as aliases), and PUT /2/modify takes the values back
    from ganeti.opcodes.base import OpCode
    from ganeti.opcodes.cluster import OpClusterSetParams
    from ganeti.opcodes.upstream import ACCEPTED_AT_DEFAULT
    import dataclasses
    envelope = {f.name for f in dataclasses.fields(OpCode)}
    params = ({f.name for f in dataclasses.fields(OpClusterSetParams)} - envelope
              | set(ACCEPTED_AT_DEFAULT["OP_CLUSTER_SET_PARAMS"]))
    # the QA's exceptions: not returned, not exposed yet, and not set back
    exceptions = {"force", "add_uids", "remove_uids", "osparams_private_cluster",
                  "hv_state", "disk_state", "modify_etc_hosts"}
    status, info, _ = request(vc, "GET", "/2/info")
    assert status == 200
    assert info["vg_name"] == info["volume_group_name"]
    assert info["drbd_helper"] == info["drbd_usermode_helper"]
    assert sorted(p for p in params - exceptions if p not in info) == []
    payload = {p: info[p] for p in params - exceptions - {"nicparams", "compression_tools"}}
    # the QA only submits the job: beparams under "default" fail it, as in Ganeti
    status, job_id, _ = request(vc, "PUT", "/2/modify", payload, auth=WRITER)
    assert status == 200 and isinstance(job_id, int)
    assert wait_job(vc, job_id)["opresult"][0][0] == "ParameterError"
    # without them the job runs, the Ganeti 3.0 parameters we cannot change yet given
    # at their current value, and nothing changes
    del payload["beparams"]
    submit_ok(vc, "PUT", "/2/modify", payload)
    after = request(vc, "GET", "/2/info")[1]
    assert after == {**info, "mtime": after["mtime"]}
    # another value of one of them is refused
    status, job_id, _ = request(vc, "PUT", "/2/modify", {"reserved_lvs": ["xenvg/keep"]},
                                auth=WRITER)
    assert "not supported yet" in str(wait_job(vc, job_id)["opresult"])
    assert request(vc, "GET", "/2/info")[1]["reserved_lvs"] == info["reserved_lvs"]


def test_nodes_list_bulk_role(vc):
    status, nodes, _ = request(vc, "GET", "/2/nodes")
    assert status == 200
    assert sorted(n["id"] for n in nodes) == [N1, N2, N3]
    assert {n["uri"] for n in nodes} == {f"/2/nodes/{n}" for n in (N1, N2, N3)}
    status, bulk, _ = request(vc, "GET", "/2/nodes?bulk=1")
    by_name = {n["name"]: n for n in bulk}
    assert by_name[N1]["role"] == "M" and set(by_name[N1]) == set(resources.N_FIELDS)
    assert request(vc, "GET", f"/2/nodes/{N1}/role")[1] == "master"
    assert request(vc, "GET", "/2/nodes/nosuch.vcluster")[0] == 404


def test_tls_settings(vc):
    host, port = addr(vc)
    with socket.create_connection((host, port), timeout=10) as sock:
        with _tls().wrap_socket(sock) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
    # plain HTTP on the TLS port gets no answer, and the daemon stays up
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"GET /version HTTP/1.0\r\n\r\n")
        assert b"HTTP/1" not in sock.recv(100)
    assert request(vc, "GET", "/version")[0] == 200


# --- an instance lifecycle ----------------------------------------------------------------

def test_instance_lifecycle(vc):
    body = {"__version__": 1, "name": INST, "os": "tinyos", "mode": "create",
            "disk_template": "diskless", "disks": [], "nics": [{}], "pnode": N2,
            "name_check": False, "ip_check": False, "start": True}
    job = submit_ok(vc, "POST", "/2/instances?reason=rapi-test", body)
    reasons = job["ops"][0]["reason"]
    assert ["gnt:user", "rapi-test"] == reasons[-1][:2] or \
        any(r[:2] == ["gnt:user", "rapi-test"] for r in reasons)
    assert any(r[0] == "gnt:client:rapi" for r in reasons)
    status, insts, _ = request(vc, "GET", "/2/instances")
    assert {"id": INST, "uri": f"/2/instances/{INST}"} in insts
    status, inst, _ = request(vc, "GET", f"/2/instances/{INST}")
    assert inst["pnode"] == N2 and inst["status"] == "running"
    assert inst["disk_template"] == "diskless"
    submit_ok(vc, "PUT", f"/2/instances/{INST}/shutdown")
    assert request(vc, "GET", f"/2/instances/{INST}")[1]["status"] == "ADMIN_down"
    submit_ok(vc, "PUT", f"/2/instances/{INST}/startup")
    submit_ok(vc, "POST", f"/2/instances/{INST}/reboot?type=soft")
    assert request(vc, "GET", f"/2/instances/{INST}")[1]["status"] == "running"
    submit_ok(vc, "PUT", f"/2/instances/{INST}/tags?tag=web&tag=prod")
    assert sorted(request(vc, "GET", f"/2/instances/{INST}/tags")[1]) == ["prod", "web"]
    status, bulk, _ = request(vc, "GET", "/2/instances?bulk=1")
    (row,) = [r for r in bulk if r["name"] == INST]
    assert set(row) == set(resources.I_FIELDS) and sorted(row["tags"]) == ["prod", "web"]
    job = submit_ok(vc, "GET", f"/2/instances/{INST}/info")
    assert INST in job["opresult"][0]
    submit_ok(vc, "DELETE", f"/2/instances/{INST}")
    assert request(vc, "GET", f"/2/instances/{INST}")[0] == 404


def test_query_resource(vc):
    status, res, _ = request(vc, "GET", "/2/query/node?fields=name,role")
    assert status == 200 and sorted(r[0][1] for r in res["data"]) == [N1, N2, N3]
    status, res, _ = request(vc, "PUT", "/2/query/node",
                             {"fields": ["name"], "filter": ["=", "name", N3]})
    assert status == 200 and res["data"] == [[[0, N3]]]
    status, res, _ = request(vc, "GET", "/2/query/node/fields?fields=name")
    assert status == 200 and res["fields"][0]["name"] == "name"


def test_group_modify(vc):
    submit_ok(vc, "PUT", "/2/groups/default/modify",
              {"alloc_policy": "last_resort", "ipolicy": {"vcpu-ratio": 2}})
    status, group, _ = request(vc, "GET", "/2/groups/default")
    assert status == 200 and group["alloc_policy"] == "last_resort"
    assert group["custom_ipolicy"] == {"vcpu-ratio": 2.0}
    assert group["ipolicy"]["vcpu-ratio"] == 2.0 and group["ipolicy"]["minmax"]
    status, job_id, _ = request(vc, "PUT", "/2/groups/default/modify",
                                {"ipolicy": {"std": {"memory-size": 256}}}, auth=WRITER)
    job = wait_job(vc, job_id)
    assert job["status"] == "error" and "'std' cannot be set in a group" in str(job["opresult"])
    # Ganeti's QA (TestRapiNodeGroups) puts back what GET gave: custom_* are the group's own
    mine = ("alloc_policy", "custom_ndparams", "custom_ipolicy", "custom_diskparams")
    status, group, _ = request(vc, "GET", "/2/groups/default")
    submit_ok(vc, "PUT", "/2/groups/default/modify", {k: group[k] for k in mine})
    after = request(vc, "GET", "/2/groups/default")[1]
    assert {k: after[k] for k in mine} == {k: group[k] for k in mine}
    status, res, _ = request(vc, "PUT", "/2/groups/default/modify",
                             {"custom_ipolicy": {}, "ipolicy": {}}, auth=WRITER)
    assert status == 400 and "aliases" in str(res)
    submit_ok(vc, "PUT", "/2/groups/default/modify",
              {"alloc_policy": "preferred", "custom_ipolicy": {"vcpu-ratio": "default"}})
    assert request(vc, "GET", "/2/groups/default")[1]["custom_ipolicy"] == {}


def test_jobs_listing(vc):
    status, jobs, _ = request(vc, "GET", "/2/jobs")
    assert status == 200 and jobs and set(jobs[0]) == {"id", "uri"}
    status, bulk, _ = request(vc, "GET", "/2/jobs?bulk=1")
    assert set(bulk[0]) == set(resources.J_FIELDS_BULK)


def test_bulk_fields_are_all_known_end_to_end(vc):
    for resource, fields in (("instance", resources.I_FIELDS), ("node", resources.N_FIELDS),
                             ("group", resources.G_FIELDS)):
        status, res, _ = request(vc, "GET", f"/2/query/{resource}/fields?fields="
                                            + ",".join(fields))
        assert status == 200
        assert [f["name"] for f in res["fields"] if f["kind"] == "unknown"] == [], resource
    status, groups, _ = request(vc, "GET", "/2/groups?bulk=1")
    (default,) = groups
    assert set(default) == set(resources.G_FIELDS)
    assert isinstance(default["custom_ipolicy"], dict) and default["node_cnt"] == 3
    status, nodes, _ = request(vc, "GET", "/2/nodes?bulk=1")
    assert {(n["sptotal"], n["spfree"]) for n in nodes} == {(0, 0)}


# --- node storage, disk grow, console, short names -----------------------------------------

FILE_DIR = "/srv/ganeti/file-storage"


def test_node_storage_through_the_cli_and_rapi(vc):
    out = vc.ok("gnt-node", "list-storage", "--no-headers", "--separator=|", "--units=m",
                "-o", "node,type,name,size,used,free,allocatable")
    rows = [line.split("|") for line in out.splitlines()]
    assert [r[:3] for r in rows] == [[n, "file", FILE_DIR] for n in (N1, N2, N3)]
    assert all(int(r[3]) >= int(r[5]) > 0 and r[6] == "Y" for r in rows), rows
    res = vc.run("gnt-node", "list-storage", "-t", "lvm-vg")
    assert res.returncode != 0 and "'plain' is not among" in res.stderr
    res = vc.run("gnt-node", "list-storage", "-t", "rados")
    assert res.returncode != 0 and "not supported" in res.stderr
    res = vc.run("gnt-node", "modify-storage", "--allocatable", "no", N2, "file", FILE_DIR)
    assert res.returncode != 0 and "can not be modified" in res.stderr
    # no change given: nothing to do, not an error (as Ganeti; its QA's TestNodeStorage)
    res = vc.run("gnt-node", "modify-storage", N2, "file", FILE_DIR)
    assert res.returncode == 0 and "No changes to perform" in res.stderr
    res = vc.run("gnt-node", "repair-storage", N2, "file", FILE_DIR)
    assert res.returncode != 0 and "can not be repaired" in res.stderr
    # RAPI (a write-only GET: the LU locks the node), the node by its short name
    job = submit_ok(vc, "GET", "/2/nodes/node2/storage?storage_type=file"
                               "&output_fields=node,name,allocatable")
    assert job["opresult"] == [[[N2, FILE_DIR, True]]]
    assert request(vc, "GET", "/2/nodes/node2/storage?output_fields=name", auth=READER)[0] \
        == 403
    status, job_id, _ = request(vc, "PUT", f"/2/nodes/{N2}/storage/modify?storage_type=file"
                                           f"&name={FILE_DIR}&allocatable=0", auth=WRITER)
    job = wait_job(vc, job_id)
    assert job["status"] == "error" and "can not be modified" in json.dumps(job["opresult"])


INST2 = "rapi2.example.com"


def test_grow_disk_console_and_short_names(vc):
    body = {"__version__": 1, "name": INST2, "os": "tinyos", "mode": "create",
            "disk_template": "file", "disks": [{"size": 16}], "nics": [{}], "pnode": N2,
            "name_check": False, "ip_check": False, "start": True}
    submit_ok(vc, "POST", "/2/instances", body)
    # short names: the instance as "rapi2", the node as "node2"
    status, inst, _ = request(vc, "GET", "/2/instances/rapi2")
    assert status == 200 and inst["name"] == INST2 and inst["pnode"] == N2
    assert request(vc, "GET", "/2/nodes/node2")[1]["name"] == N2
    assert request(vc, "GET", "/2/nodes/node2/role")[1] == "master-candidate"
    submit_ok(vc, "PUT", "/2/instances/rapi2/tags?tag=short")
    assert request(vc, "GET", "/2/instances/rapi2/tags")[1] == ["short"]
    job = submit_ok(vc, "GET", "/2/instances/rapi2/info")
    assert list(job["opresult"][0]) == [INST2]
    # grow disk 0 by 8 MiB
    submit_ok(vc, "POST", "/2/instances/rapi2/disk/0/grow", {"amount": 8})
    assert request(vc, "GET", f"/2/instances/{INST2}")[1]["disk.sizes"] == [24]
    status, _, _ = request(vc, "POST", "/2/instances/rapi2/disk/7/grow", {"amount": 8},
                           auth=WRITER)
    assert status == 200            # accepted; the job fails (no disk 7)
    # console: the node's description of a running instance, write-only
    status, console, _ = request(vc, "GET", "/2/instances/rapi2/console", auth=WRITER)
    assert status == 200 and console["instance"] == INST2 and console["kind"], console
    assert request(vc, "GET", "/2/instances/rapi2/console", auth=READER)[0] == 403
    submit_ok(vc, "PUT", "/2/instances/rapi2/shutdown")
    status, body, _ = request(vc, "GET", "/2/instances/rapi2/console", auth=WRITER)
    assert status == 503 and "not running" in body["explain"]
    assert request(vc, "GET", "/2/instances/nosuch/console", auth=WRITER)[0] == 404
    submit_ok(vc, "DELETE", "/2/instances/rapi2")


# --- the auth matrix, generated from the table --------------------------------------------

def _concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: {"job_id": "1", "disk_index": "0",
                                           "resource": "node"}.get(m.group(1), "nosuch"),
                  path)


@pytest.mark.parametrize("route", resources.write_routes(),
                         ids=lambda r: f"{r.method} {r.path}")
def test_write_needs_a_write_user(vc, route):
    path = _concrete(route.path) + "?dry-run=1"
    before = job_serial(vc)
    status, body, resp = request(vc, route.method, path)
    assert status == 401 and body["code"] == 401
    assert resp.getheader("WWW-Authenticate") == 'Basic realm="Ganeti Remote API"'
    assert request(vc, route.method, path, auth=("writer", "wrong"))[0] == 401
    status, body, _ = request(vc, route.method, path, auth=READER)
    assert status == 403 and set(body) == {"code", "message", "explain"}
    assert job_serial(vc) == before
    status, _, _ = request(vc, route.method, path, auth=WRITER)
    assert status not in (401, 403)


def test_unknown_user_and_wrong_password_same_body(vc):
    a = request(vc, "POST", "/2/instances", {}, auth=("nobody", "x"))
    b = request(vc, "POST", "/2/instances", {}, auth=("writer", "x"))
    assert a[:2] == b[:2] and a[0] == 401


def test_users_file_reload_and_broken_file(vc):
    path = f"/2/nodes/{N3}/tags?tag=reload"
    submit_ok(vc, "PUT", path)
    write_users(vc, "reader {cleartext}rpass read\n")      # writer removed
    wait_until(lambda: request(vc, "PUT", path, auth=WRITER)[0] == 401, "writer removed")
    write_users(vc, USERS)
    wait_until(lambda: request(vc, "PUT", path, auth=WRITER)[0] == 200, "writer back")
    write_users(vc, USERS + "broken line with too many fields\n")
    time.sleep(0.5)   # give the watcher its chance to (not) switch tables
    assert request(vc, "DELETE", path, auth=WRITER)[0] == 200      # old table kept
    log = open(vc.paths(N1).daemon_log_file(constants.RAPI)).read()
    assert "invalid" in log and "keeping the previous users" in log
    write_users(vc, USERS)


# --- malformed requests --------------------------------------------------------------------

def test_malformed_requests(vc):
    before = job_serial(vc)
    assert request(vc, "GET", "/2/nowhere")[0] == 404
    status, _, resp = request(vc, "POST", "/2/info")
    assert status == 501 and resp.getheader("Allow") == "GET"     # Ganeti's code
    assert request(vc, "PATCH", "/2/info")[0] == 501
    assert request(vc, "PUT", f"/2/nodes/{N3}/role", raw=b'"drained"', auth=WRITER,
                   headers={"Content-Type": "text/plain"})[0] == 415
    assert request(vc, "PUT", f"/2/nodes/{N3}/role", raw=b'{"x":', auth=WRITER,
                   headers={"Content-Type": "application/json"})[0] == 400
    assert request(vc, "PUT", f"/2/nodes/{N3}/role", "boss", auth=WRITER)[0] == 400
    assert request(vc, "GET", "/2/nodes?bulk=maybe")[0] == 400
    assert request(vc, "POST", "/2/instances", {"name": "x"}, auth=WRITER)[0] == 400
    assert request(vc, "PUT", "/2/instances/x/modify", {"bogus": 1}, auth=WRITER)[0] == 400
    status, body, _ = request(vc, "PUT", "/2/tags?tag=a", raw=b'{"comment": "x\\ud800"}',
                              auth=WRITER, headers={"Content-Type": "application/json"})
    assert status == 400 and "surrogate" in json.dumps(body), body   # never stored
    for header in ("Basic", "Basic !!!", "Bearer abc", "Basic " + base64.b64encode(
            b"nocolon").decode()):
        status, body, _ = request(vc, "PUT", "/2/tags?tag=a",
                                  headers={"Authorization": header})
        assert status in (400, 401) and "Traceback" not in json.dumps(body)
    assert job_serial(vc) == before
    assert request(vc, "GET", "/version")[0] == 200


def test_oversized_body_refused_unread(vc):
    host, port = addr(vc)
    with socket.create_connection((host, port), timeout=30) as raw:
        with _tls().wrap_socket(raw) as sock:
            sock.sendall(b"PUT /2/tags?tag=a HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\n"
                         b"Authorization: Basic " + base64.b64encode(b"writer:wpass") +
                         b"\r\nContent-Length: 20000000\r\n\r\n")
            reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413")
    assert request(vc, "GET", "/version")[0] == 200


def test_a_dripping_client_is_dropped(vc):
    """One byte every 2 s (each read well within the 10 s timeout): the request head
    must arrive within 10 s in total, so the daemon drops the client mid-drip."""
    head = b"GET /version HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 20 + b"\r\n\r\n"
    assert rapi_fuzz.drip(addr(vc), head, every=2.0) < len(head)
    assert request(vc, "GET", "/version")[0] == 200


def test_access_log_has_user_not_password(vc):
    request(vc, "GET", "/2/info", auth=READER)
    path = vc.paths(N1).log_file(constants.RAPI_ACCESS_LOG)
    line = re.compile(r' - reader \[[^]]+\] "GET /2/info HTTP/1.1" 200 \d+')
    # the line is written once the answer is sent: the client may read the log first
    wait_until(lambda: line.search(open(path).read()), "the access log line")
    log = open(path).read()
    assert "rpass" not in log and "Basic" not in log


def test_verify_warns_when_rapi_is_down(vc):
    from ganeti import daemonctl
    res = vc.run("gnt-cluster", "verify")
    assert "RAPI daemon" not in res.stderr
    daemonctl.stop_daemon(vc.paths(N1), constants.RAPI)
    try:
        res = vc.run("gnt-cluster", "verify")
        assert "WARNING: the RAPI daemon (ganeti-rapi) is not running" in res.stderr
    finally:
        vcluster.start(vc.cluster, N1)
    assert request(vc, "GET", "/version")[0] == 200


def test_create_without_a_disk_template_uses_the_clusters_first_enabled_one(vc):
    """OP_INSTANCE_CREATE without disk_template, over RAPI and over LUXI: the
    cluster's first enabled template (as Ganeti), not "Disk template 'None'"."""
    from ganeti import cli, luxi
    cl = luxi.Client(vc.paths(N1).master_socket)
    first = cl.QueryClusterInfo()["enabled_disk_templates"][0]
    disks = [] if first == constants.DT_DISKLESS else [{"size": 8}]
    body = {"__version__": 1, "name": "notemplate1.example.com", "os": "tinyos",
            "mode": "create", "disks": disks, "nics": [{}], "pnode": N2,
            "name_check": False, "ip_check": False, "start": False}
    submit_ok(vc, "POST", "/2/instances", body)
    cli.submit_opcode_and_wait({"OP_ID": "OP_INSTANCE_CREATE",
                                "instance_name": "notemplate2.example.com",
                                "os_type": "tinyos", "disks": disks, "nics": [{}],
                                "pnode": N2, "name_check": False, "ip_check": False,
                                "start": False}, None, cl, feedback_fn=None)
    for name in ("notemplate1.example.com", "notemplate2.example.com"):
        status, inst, _ = request(vc, "GET", f"/2/instances/{name}")
        assert status == 200 and inst["disk_template"] == first
        submit_ok(vc, "DELETE", f"/2/instances/{name}")


def test_remote_export_parameters_and_unreachable_target(vc):
    """PUT /2/instances/NAME/export with mode=remote: upstream's parameters are checked
    against the cluster domain secret, the transfer key must be on the primary node and
    the destinations are tried; every refusal comes before the instance is touched
    (doc/exports.md, "Moves between clusters")."""
    import socket

    from ganeti import crypto
    from ganeti.cmdlib import backup_remote as br
    name = "rapirx.example.com"
    submit_ok(vc, "POST", "/2/instances", {
        "__version__": 1, "name": name, "os": "tinyos", "mode": "create",
        "disk_template": "file", "disks": [{"size": 8}], "nics": [{}], "pnode": N2,
        "name_check": False, "ip_check": False, "start": True})
    with open(vc.paths(N1).cluster_domain_secret) as fh:
        cds = fh.read().strip()
    _key, cert = crypto.generate_self_signed_cert("other.cluster")
    with socket.socket() as probe:              # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    prepared = submit_ok(vc, "PUT", f"/2/instances/{name}/prepare-export?mode=remote")
    key_name = prepared["opresult"][0]["x509_key_name"][0]

    def export(port: int, secret: str = cds, key: str = key_name) -> dict[str, Any]:
        body = {"mode": "remote", "shutdown": True,
                "destination": [br.sign_disk_info(secret, "ab", 0, "127.0.0.1", port, "mg")],
                "x509_key_name": br.sign_key_name(secret, key, "s"),
                "destination_x509_ca": br.sign_certificate(secret, cert.decode(), "5a")}
        status, job_id, _ = request(vc, "PUT", f"/2/instances/{name}/export", body,
                                    auth=WRITER)
        assert status == 200, job_id
        job = wait_job(vc, job_id)
        assert job["status"] == "error", job
        return job

    try:
        job = export(closed)
        assert f"Destination 127.0.0.1:{closed} of disk 0 is not reachable" in str(
            job["opresult"])
        assert "HMAC" in str(export(closed, "f" * 64)["opresult"])
        assert "The transfer key x509-1-nosuch cannot be used on node2" in str(
            export(closed, key="x509-1-nosuch")["opresult"])
        inst = request(vc, "GET", f"/2/instances/{name}")[1]
        assert inst["oper_state"] is True and inst["admin_state"] == "up"
    finally:
        submit_ok(vc, "DELETE", f"/2/instances/{name}")


def test_os_list_leaves_out_hidden_and_blacklisted_oses(vc):
    # as Ganeti's /2/os (its OP_OS_DIAGNOSE filter; its QA's TestOsValid checks it)
    assert "tinyos+default" in request(vc, "GET", "/2/os")[1]
    for flag in ("--hidden", "--blacklisted"):
        vc.ok("gnt-os", "modify", flag, "yes", "tinyos")
        try:
            assert not [n for n in request(vc, "GET", "/2/os")[1] if n.startswith("tinyos")]
        finally:
            vc.ok("gnt-os", "modify", flag, "no", "tinyos")
    assert "tinyos+default" in request(vc, "GET", "/2/os")[1]
