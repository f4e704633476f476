"""Ganeti's own RAPI client library, unchanged, against our RAPI daemon.

The library is Debian's ``python3-ganeti-rapi`` (``make debian-deps``
installs it when run as root); nothing of it is vendored here.  Its
top-level package is also named ``ganeti``, so it runs in the system's
``python3`` in isolated mode (``-I``: no PYTHONPATH, no script directory,
no user site) with a clean environment, where it cannot shadow ours and
ours cannot shadow it.  test/integration/upstream_rapi_driver.py makes the
calls and prints their results as JSON; the assertions are here.  See
doc/rapi.md ("Compatibility").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

import pytest
from test_rapi import READER, USERS, WRITER, request, wait_until, write_users
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(600)

#: Debian's interpreter, outside the project's virtualenv (never sys.executable)
SYSTEM_PYTHON = "/usr/bin/python3"
#: the Debian package that holds ``ganeti.rapi.client``
PACKAGE = "python3-ganeti-rapi"
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_rapi_driver.py")
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"
INST = "upstream1.example.com"
NEW_NAME = "upstream2.example.com"
OS_NAME = "tinyos"
FILE_INST = "upstream-file.example.com"
FILE_DIR = "/srv/ganeti/file-storage"


def _library_missing() -> str | None:
    """Why the upstream library cannot be used here, or None."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing (install {PACKAGE}: make debian-deps as root)"
    res = subprocess.run([SYSTEM_PYTHON, "-I", "-c", "import ganeti.rapi.client"],
                         env=CLEAN_ENV, capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        return (f"{PACKAGE} is not installed for {SYSTEM_PYTHON} (make debian-deps as root"
                f" installs it): {res.stderr.strip().splitlines()[-1:]}")
    return None


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    reason = _library_missing()
    if reason:
        pytest.skip(reason)
    with VirtualCluster(tmp_path_factory.mktemp("vcu"), nodes=3, use_ssh=False) as cluster:
        write_users(cluster, USERS)
        yield cluster


def run_driver(vc, phase: str, tmp_path) -> dict[str, Any]:
    """Run one phase of the driver in the system interpreter; its results by step."""
    cfg = {"phase": phase, "host": vc.cluster.master_node.ip, "port": vc.cluster.rapi_port,
           "cafile": vc.paths(N1).rapi_pem, "writer": WRITER[0], "writer_password": WRITER[1],
           "reader": READER[0], "reader_password": READER[1], "node1": N1, "node2": N2,
           "node3": N3, "instance": INST, "new_name": NEW_NAME, "os": OS_NAME,
           "file_instance": FILE_INST, "file_storage_dir": FILE_DIR}
    path = os.path.join(tmp_path, f"driver-{phase}.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(cfg, fh)
    res = subprocess.run([SYSTEM_PYTHON, "-I", DRIVER, path], env=CLEAN_ENV,
                         capture_output=True, text=True, timeout=540)
    assert res.returncode == 0, res.stderr
    results: dict[str, Any] = json.loads(res.stdout)
    # the library that answered is Debian's, not this project's package
    assert results["library"].startswith("/usr/lib/python3/dist-packages/ganeti/rapi/")
    return results


@pytest.fixture(scope="module")
def main_results(vc, tmp_path_factory):
    return run_driver(vc, "main", tmp_path_factory.mktemp("driver"))


def assert_job_ok(r: dict[str, Any], name: str) -> dict[str, Any]:
    """The step ``name`` returned a job id as a number, and the job succeeded."""
    assert isinstance(r[name + ".job"], int), (name, r[name + ".job"])
    status = r[name + ".status"]
    assert r[name + ".ok"] is True, (name, status.get("status"), r.get(name + ".failure"))
    assert status["status"] == "success" and status["id"] == r[name + ".job"]
    return status


def test_cluster_reads(main_results):
    r = main_results
    assert r["version"] == 2
    assert {"instance-create-reqv1", "instance-reinstall-reqv1"} <= set(r["features"])
    assert r["info"]["name"] == "cluster.vcluster" and r["info"]["master"] == N1
    assert f"{OS_NAME}+default" in r["os"]   # variants as name+variant


def test_cluster_tags(main_results):
    r = main_results
    assert_job_ok(r, "cluster_tags_add")
    assert {"upstream", "client"} <= set(r["cluster_tags"])
    assert_job_ok(r, "cluster_tags_del")
    assert "client" not in r["cluster_tags_after"] and "upstream" in r["cluster_tags_after"]


def test_nodes(main_results):
    r = main_results
    assert sorted(r["nodes"]) == [N1, N2, N3]
    by_name = {n["name"]: n for n in r["nodes_bulk"]}
    assert sorted(by_name) == [N1, N2, N3]
    assert by_name[N1]["role"] == "M" and by_name[N1]["master_candidate"] is True
    assert r["node"]["name"] == N1 and r["node"]["pip"] == by_name[N1]["pip"]
    assert r["node"]["secondary_ip"] == r["node"]["sip"]
    assert set(r["node"]) >= set(by_name[N1])
    assert r["node_missing"]["code"] == 404
    assert r["groups"] == ["default"] and r["groups_bulk"][0]["name"] == "default"
    assert sorted(r["groups_bulk"][0]["node_list"]) == [N1, N2, N3]
    assert re.match(r"404 Not Found: ", r["node_missing"]["error"])


def test_node_roles(main_results):
    r = main_results
    assert r["node3_role"] == "master-candidate"
    assert_job_ok(r, "set_role_drained")
    assert r["node3_role_drained"] == "drained"
    assert_job_ok(r, "set_role_candidate")
    assert r["node3_role_after"] == "master-candidate"
    assert r["set_role_by_reader"]["code"] == 403
    assert_job_ok(r, "node_tags_add")
    assert r["node_tags"] == ["rack1"]
    assert_job_ok(r, "node_tags_del")


def test_create_and_read_instance(main_results):
    r = main_results
    job = assert_job_ok(r, "create")
    op = job["ops"][0]
    assert op["OP_ID"] == "OP_INSTANCE_CREATE" and op["instance_name"] == INST
    assert op["os_type"] == OS_NAME and op["pnode"] == N2
    assert any(entry[:2] == ["gnt:user", "upstream-client"] for entry in op["reason"])
    assert any(entry[0] == "gnt:client:rapi" for entry in op["reason"])
    change = r["wait_change"]
    assert change["job_info"] == ["success"] and isinstance(change["log_entries"], list)
    # a finished job answers at once (as Ganeti's queue): no log entries past the last
    again = r["wait_change_again"]
    assert again == {"job_info": ["success"], "log_entries": []}
    assert INST in r["instances"]
    (bulk,) = [i for i in r["instances_bulk"] if i["name"] == INST]
    inst = r["instance"]
    assert inst["pnode"] == N2 and inst["snodes"] == [] and inst["os"] == OS_NAME
    assert inst["disk_template"] == "diskless" and inst["status"] == "running"
    assert inst["admin_state"] == "up" and inst["oper_state"] is True
    assert inst["beparams"]["memory"] == inst["beparams"]["maxmem"]
    assert set(bulk) == set(inst)


def test_instance_info_job(main_results):
    job = assert_job_ok(main_results, "info_job")
    assert job["ops"][0]["OP_ID"] == "OP_INSTANCE_QUERY_DATA"
    assert job["ops"][0]["static"] is True
    assert INST in job["opresult"][0]


def test_instance_power(main_results):
    r = main_results
    assert_job_ok(r, "shutdown")
    assert r["instance_down"]["status"] == "ADMIN_down"
    assert_job_ok(r, "startup")
    reboot = assert_job_ok(r, "reboot")
    assert reboot["ops"][0]["reboot_type"] == "soft"
    assert r["instance_up"]["status"] == "running"


def test_modify_and_tags(main_results):
    r = main_results
    assert_job_ok(r, "modify")
    assert r["instance_modified"]["beparams"]["vcpus"] == 2
    assert_job_ok(r, "inst_tags_add")
    assert sorted(r["inst_tags"]) == ["prod", "web"]
    assert_job_ok(r, "inst_tags_del")
    assert r["inst_tags_after"] == ["web"]


def test_reinstall_rename_delete(main_results):
    r = main_results
    job = assert_job_ok(r, "reinstall")
    assert [op["OP_ID"] for op in job["ops"]] == ["OP_INSTANCE_SHUTDOWN",
                                                   "OP_INSTANCE_REINSTALL"]
    assert r["instance_reinstalled"]["status"] == "ADMIN_down"
    assert_job_ok(r, "rename")
    assert r["instance_renamed"]["name"] == NEW_NAME
    assert_job_ok(r, "delete")
    assert r["instance_deleted"]["code"] == 404


def test_console(main_results):
    r = main_results
    console = r["console"]
    assert console["instance"] == INST and console["kind"] in ("msg", "ssh", "vnc",
                                                                "spice")
    assert r["console_by_reader"]["code"] == 403


def test_grow_disk(main_results):
    r = main_results
    assert_job_ok(r, "create_file")
    job = assert_job_ok(r, "grow")
    assert job["ops"][0]["OP_ID"] == "OP_INSTANCE_GROW_DISK" and job["ops"][0]["disk"] == 0
    assert r["instance_grown"]["disk.sizes"] == [24]
    assert_job_ok(r, "delete_file")


def test_node_storage(main_results):
    r = main_results
    job = assert_job_ok(r, "storage")
    ((unit,),) = job["opresult"]
    node, stype, name, size, used, free, allocatable = unit
    assert (node, stype, name, allocatable) == (N3, "file", FILE_DIR, True)
    assert size >= free > 0 and used >= 24       # the grown disk file is there
    assert r["storage_by_reader"]["code"] == 403
    for step, text in (("storage_modify", "can not be modified"),
                       ("storage_repair", "can not be repaired")):
        assert isinstance(r[step + ".job"], int) and r[step + ".ok"] is False
        assert text in json.dumps(r[step + ".failure"]), r[step + ".failure"]


def test_query(main_results):
    r = main_results
    nodes = r["query_nodes"]
    assert [f["name"] for f in nodes["fields"]] == ["name", "role"]
    assert sorted(row[0][1] for row in nodes["data"]) == [N1, N2, N3]
    assert r["query_filter"]["data"] == [[[0, NEW_NAME], [0, "ADMIN_down"]]]
    assert [f["name"] for f in r["query_fields"]["fields"]] == ["name", "role"]
    assert "status" in {f["name"] for f in r["query_fields_all"]["fields"]}


def test_jobs(main_results):
    r = main_results
    assert r["create.job"] in r["jobs"]
    success, message = r["cancel_finished"]
    assert success is False and str(r["create.job"]) in message


def test_cancel_a_waiting_job(vc, main_results, tmp_path):
    # a delay job holds node3's lock, so the client's role change has to wait
    res = vc.run("gnt-debug", "delay", "300", "--interruptible", "-n", N3, "--submit")
    match = re.search(r"JobID: (\d+)", res.stdout + res.stderr)
    assert res.returncode == 0 and match, res.stderr
    delay_job = match.group(1)
    try:
        wait_until(lambda: request(vc, "GET", f"/2/jobs/{delay_job}")[1]["status"]
                   == "running", "the delay job to run", tries=1200)
        r = run_driver(vc, "cancel", tmp_path)
    finally:
        vc.run("gnt-job", "cancel", "--kill", "--yes-do-it", delay_job)
    assert isinstance(r["blocked"], int) and r["blocked.status_before"] == "waiting"
    success, _message = r["cancel"]
    assert success is True
    assert r["cancel.ok"] is False and r["cancel.status"]["status"] == "canceled"
    assert r["node3_role"] == "master-candidate"


def test_job_filter_rules(vc, tmp_path):
    # doc/jobfilters.md: upstream's client adds, lists, replaces and deletes rules
    r = run_driver(vc, "filters", tmp_path)
    uuid = r["add"]
    assert isinstance(uuid, str) and len(uuid) == 36
    assert r["list"] == [uuid]
    (bulk,) = r["list_bulk"]
    assert bulk == r["get"]
    assert bulk["uuid"] == uuid and bulk["priority"] == 5 and bulk["action"] == "CONTINUE"
    assert bulk["predicates"] == [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]
    sources = [entry[0] for entry in bulk["reason_trail"]]
    assert sources[0] == "qa" and "gnt:client" in sources and sources[-1] == "luxid"
    assert r["reader_add"]["code"] == 403
    assert r["replace"] == uuid
    assert r["get_replaced"]["action"] == "REJECT" and r["get_replaced"]["priority"] == 0
    assert r["get_replaced"]["watermark"] >= bulk["watermark"]
    assert r["bad_action"]["code"] == 400 and "DROP" in r["bad_action"]["error"]
    assert r["list_after_bad"] == [uuid]          # the refused rule changed nothing
    assert r["delete"] is None
    assert r["delete_again"]["code"] in (400, 404)
    assert "does not exist" in r["delete_again"]["error"]
    assert r["list_after"] == []


def test_networks(vc, tmp_path):
    # doc/networks.md, doc/rapi.md: upstream's client drives /2/networks
    r = run_driver(vc, "networks", tmp_path)
    assert r["create.ok"] is True and r["create.status"]["status"] == "success"
    assert r["list"] == ["rapinet"]
    (bulk,) = r["list_bulk"]
    assert bulk["name"] == "rapinet" and bulk["network"] == "192.0.2.0/28"
    assert bulk["gateway"] == "192.0.2.1" and bulk["free_count"] == 12
    assert bulk["external_reservations"] == "192.0.2.0, 192.0.2.1, 192.0.2.9, 192.0.2.15"
    assert bulk["tags"] == ["lab"] and bulk["group_list"] == [] and bulk["inst_list"] == []
    assert r["get"] == bulk
    assert r["reader_create"]["code"] == 403
    # a refused network: the job fails, naming the reason, and nothing is added
    assert r["bad.ok"] is False and "/16" in str(r["bad.failure"])
    assert r["modify.ok"] is True
    assert r["connect.ok"] is True
    connected = r["get_connected"]
    assert connected["mac_prefix"] == "aa:00:77" and connected["free_count"] == 11
    assert connected["group_list"] == [["default", "bridged", "br5", ".5"]]
    assert sorted(r["tags"]) == ["blue", "lab"] and r["tags_after"] == ["blue"]
    assert r["delete_connected.ok"] is False and "disconnect it first" in str(
        r["delete_connected.failure"])
    assert r["disconnect.ok"] is True and r["delete.ok"] is True
    assert r["list_after"] == [] and r["get_gone"]["code"] == 404
