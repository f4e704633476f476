"""gnt-node on a real 4-node virtual cluster: add/remove/readd, roles, promotion."""

from __future__ import annotations

import concurrent.futures
import os
import socket
import threading
import time

import pytest
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl, luxi

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcn"), nodes=4) as cluster:
        yield cluster


def _candidates_have_same_config(vc, wait: float = 30.0) -> bool:
    deadline = time.monotonic() + wait
    while True:
        roles = vc.roles()
        contents = set()
        for name, role in roles.items():
            if role in ("M", "C"):
                with open(vc.paths(name).config_file, "rb") as fh:
                    contents.add(fh.read())
        if len(contents) == 1:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_list_default_fields_and_headers(vc):
    out = vc.ok("gnt-node", "list")
    lines = out.splitlines()
    assert lines[0].split() == ["Node", "DTotal", "DFree", "MTotal", "MNode", "MFree",
                                "Pinst", "Sinst"]
    assert [line.split()[0] for line in lines[1:]] == vc.names
    out = vc.ok("gnt-node", "list", "--no-headers", "--separator", "|", "-o", "name,pip")
    assert out.splitlines()[1] == "node2.vcluster|127.0.1.2"
    assert "master_candidate" in vc.ok("gnt-node", "list-fields")


def test_info(vc):
    import yaml
    (node,) = yaml.safe_load(vc.ok("gnt-node", "info", "node2.vcluster"))
    assert node["Node name"] == "node2.vcluster"
    assert node["primary ip"] == "127.0.1.2"     # quoted: it starts like a number
    res = vc.run("gnt-node", "info", "nosuch.vcluster")
    assert res.returncode == 1


def _log_tail(path: str, lines: int = 40) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def _submit_jobs_until(vc, done: threading.Event, limit: int = 400) -> list[int]:
    """Keep jobs (and so job file replication to every candidate) flowing.

    Stops when ``done`` is set, after ``limit`` jobs or 60 s; returns the ids.
    """
    cl = luxi.Client(vc.paths(vc.names[0]).master_socket)
    ids: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while not done.is_set() and len(ids) < limit and time.monotonic() < deadline:
            for ok, job_id in cl.SubmitManyJobs(
                    [[{"OP_ID": "OP_TEST_DELAY", "duration": 0.01}]] * 5):
                assert ok, job_id
                ids.append(int(job_id))
            time.sleep(0.01)
    finally:
        cl.close()
    return ids


def _wait_jobs(vc, ids: list[int], wait: float = 60.0) -> None:
    cl = luxi.Client(vc.paths(vc.names[0]).master_socket)
    deadline = time.monotonic() + wait
    try:
        while ids and time.monotonic() < deadline:
            ids = [job_id for job_id, status in cl.QueryJobs(ids, ["id", "status"])
                   if status not in constants.JOBS_FINALIZED]
            time.sleep(0.1)
    finally:
        cl.close()
    assert not ids, f"jobs still running: {ids[:5]}"


def test_remove_and_add_again(vc):
    # removing a candidate while job files replicate to it: no push may recreate
    # its files after it left, and its node daemon must stop all the same
    done = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        jobs = pool.submit(_submit_jobs_until, vc, done)
        try:
            time.sleep(0.2)
            res = vc.run("gnt-node", "remove", "node4.vcluster")
        finally:
            done.set()
        ids = jobs.result(timeout=90)
    _wait_jobs(vc, ids)   # later tests must not queue behind them
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "Errors encountered" not in out
    assert "node4.vcluster" not in vc.roles()
    # the removed node forgot the cluster and its node daemon stopped
    paths = vc.paths("node4")
    deadline = time.monotonic() + 30
    while daemonctl.daemon_pid(paths, constants.NODED) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert daemonctl.daemon_pid(paths, constants.NODED) is None, (
        f"gnt-node remove said:\n{out}\nnode4's node daemon log:\n"
        f"{_log_tail(paths.daemon_log_file(constants.NODED))}\nmaster daemon log:\n"
        f"{_log_tail(vc.paths(vc.names[0]).daemon_log_file(constants.MASTERD))}")
    assert not os.path.exists(paths.config_file)
    assert [f for f in os.listdir(paths.queue_dir) if f != "lock"] == []
    out = vc.ok("gnt-node", "add", "node4.vcluster")
    assert "Setting up node node4.vcluster" in out
    assert vc.roles()["node4.vcluster"] in ("C", "R")
    assert _candidates_have_same_config(vc)


def test_readd_existing_node(vc):
    res = vc.run("gnt-node", "add", "node3.vcluster")
    assert res.returncode == 1  # already in the cluster, without --readd
    vc.ok("gnt-node", "add", "--readd", "node3.vcluster")
    assert set(vc.roles()) == set(vc.names)
    assert vc.run("gnt-cluster", "verify").returncode == 0


def test_roles_and_candidate_promotion(vc):
    vc.ok("gnt-cluster", "modify", "-C", "2")
    for name in ("node3.vcluster", "node4.vcluster"):
        if vc.roles()[name] == "C":
            vc.ok("gnt-node", "modify", "-C", "no", name)
    if vc.roles()["node2.vcluster"] != "C":
        vc.ok("gnt-node", "modify", "-C", "yes", "node2.vcluster")
    assert vc.roles() == {"node1.vcluster": "M", "node2.vcluster": "C",
                          "node3.vcluster": "R", "node4.vcluster": "R"}
    assert _candidates_have_same_config(vc)
    # taking a candidate offline promotes another node to keep the pool at 2
    vc.ok("gnt-node", "modify", "-O", "yes", "--auto-promote", "node2.vcluster")
    roles = vc.roles()
    assert roles["node2.vcluster"] == "O"
    assert sorted(r for n, r in roles.items() if n != "node2.vcluster") == ["C", "M", "R"]
    assert _candidates_have_same_config(vc)
    vc.ok("gnt-node", "modify", "-O", "no", "--force", "node2.vcluster")
    assert vc.roles()["node2.vcluster"] in ("C", "R")
    vc.ok("gnt-node", "modify", "-D", "yes", "node4.vcluster")
    assert vc.roles()["node4.vcluster"] == "D"
    vc.ok("gnt-node", "modify", "-D", "no", "node4.vcluster")
    assert vc.roles()["node4.vcluster"] in ("C", "R")


def test_modify_needs_a_change(vc):
    res = vc.run("gnt-node", "modify", "node2.vcluster")
    assert res.returncode == 1 and "at least one" in res.stderr


def test_destroy_needs_the_master_alone(vc):
    res = vc.run("gnt-cluster", "destroy")
    assert res.returncode == 1 and "--yes-do-it" in res.stderr
    assert vc.run("gnt-cluster", "destroy", "--yes-do-it").returncode == 1  # nodes left
    for name in ("node2.vcluster", "node3.vcluster", "node4.vcluster"):
        vc.ok("gnt-node", "remove", name)
    assert daemonctl.daemon_pid(vc.paths("node1"), constants.RAPI) is not None
    vc.ok("gnt-cluster", "destroy", "--yes-do-it")
    master = vc.paths("node1")
    assert not os.path.exists(master.config_file)
    with pytest.raises(ConnectionRefusedError):   # the RAPI daemon is gone too
        socket.create_connection((vc.cluster.master_node.ip, vc.cluster.rapi_port),
                                 timeout=10).close()
    assert daemonctl.daemon_pid(master, constants.MASTERD) is None
    assert daemonctl.daemon_pid(master, constants.NODED) is None
