"""Master autopromotion on a real virtual cluster (doc/ha.md, "Master autopromotion").

One 4-node cluster (a two-second master lease: the master is declared gone
after 5 s without a renewal), the tests in order:

* with ``auto_promote`` off (the default) a dead master stays dead: no
  candidate takes over;
* with it on, the master killed (every daemon, kill -9, kept down) while a
  client submits jobs: a candidate takes over without an operator, every
  acknowledged job is in its queue, new ids are higher; the old master,
  started again, stays a candidate and, without any command, gets the new
  master's configuration and jobs;
* the new master killed in turn: the three candidates lose it at the same
  moment and exactly one becomes the master, as every node agrees.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from failover_helpers import MASTERD_ARGS, masterd_running, ssconf_master, wait_until
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl, errors, luxi
from tools.harness import crash, vcluster

pytestmark = pytest.mark.timeout(600)

N1 = "node1.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcap"), nodes=4, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        yield cluster


def _kill_daemons(vc: VirtualCluster, node: str) -> None:
    """The node dies: its master, node and RAPI daemons killed with SIGKILL."""
    paths = vc.paths(node)
    crash.kill_node_daemons(paths)
    assert wait_until(lambda: all(daemonctl.daemon_pid(paths, d) is None
                             for d in (constants.MASTERD, constants.NODED)), 30)


def _submit(vc: VirtualCluster, node: str) -> int:
    client = luxi.Client(vc.paths(node).master_socket, connect_timeout=2.0, rw_timeout=20.0)
    return int(client.SubmitJob([{"OP_ID": "OP_TEST_DELAY", "duration": 0}]))


def _answering_master(vc: VirtualCluster, candidates: list[str]) -> list[str]:
    found = []
    for node in candidates:
        if not masterd_running(vc, node):
            continue
        try:
            luxi.Client(vc.paths(node).master_socket, connect_timeout=2.0,
                        rw_timeout=10.0).QueryConfigValues(["master_node"])
        except (errors.GanetiError, OSError):
            continue
        found.append(node)
    return found


def _has_job(vc: VirtualCluster, node: str, job_id: int) -> bool:
    paths = vc.paths(node)
    name = f"job-{job_id}"
    if os.path.exists(os.path.join(paths.queue_dir, name)):
        return True
    archive = paths.queue_archive_dir
    return os.path.exists(os.path.join(archive, str(job_id // 10000), name))


def _noded_log(vc: VirtualCluster, node: str) -> str:
    try:
        with open(vc.paths(node).daemon_log_file(constants.NODED)) as fh:
            return fh.read()
    except FileNotFoundError:
        return ""


def test_off_by_default_a_dead_master_stays_dead(vc):
    assert "automatic master promotion: False" in vc.ok("gnt-cluster", "info")
    _kill_daemons(vc, N1)
    others = [n for n in vc.names if n != N1]
    # nothing can be polled for here: wait twice the autopromotion's timeout (5 s)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        assert not any(masterd_running(vc, n) for n in others)
        time.sleep(0.5)
    assert all(ssconf_master(vc, n) == N1 for n in others)
    assert not any("asking the master candidates" in _noded_log(vc, n) for n in others)
    vcluster.start(vc.cluster, N1)
    assert wait_until(lambda: _answering_master(vc, [N1]) == [N1])


def test_master_killed_a_candidate_takes_over(vc):
    vc.ok("gnt-cluster", "modify", "--auto-promote", "yes")
    assert "automatic master promotion: True" in vc.ok("gnt-cluster", "info")
    acked: list[int] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            try:
                acked.append(_submit(vc, N1))
            except (errors.GanetiError, OSError):
                if stop.wait(0.05):
                    return
            stop.wait(0.02)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    assert wait_until(lambda: len(acked) >= 5, 30)
    _kill_daemons(vc, N1)
    stop.set()
    thread.join(30)
    others = [n for n in vc.names if n != N1]
    found: list[str] = []

    def one_master() -> bool:
        found[:] = _answering_master(vc, others)
        return len(found) == 1

    assert wait_until(one_master, 90), f"no new master: {found}"
    new = found[0]
    assert all(_has_job(vc, new, job) for job in acked), \
        [job for job in acked if not _has_job(vc, new, job)]
    job = _submit(vc, new)
    assert job > max(acked)
    log = _noded_log(vc, new)
    assert "Master autopromotion:" in log and f"{new} takes over" in log
    # the old master comes back: the new master's heartbeat finds it naming
    # itself and gives it the configuration; it stays a candidate
    vcluster.start(vc.cluster, N1)
    assert wait_until(lambda: ssconf_master(vc, N1) == new, 30)
    assert wait_until(lambda: _has_job(vc, N1, job), 30)
    assert not masterd_running(vc, N1)
    assert vc.ok("gnt-cluster", "getmaster", node=N1).strip() == new
    roles = vc.ok("gnt-node", "list", "--no-headers", "-o", "name,role", node=new)
    assert dict(line.split() for line in roles.splitlines())[N1] == "C"
    res = vc.run("gnt-job", "list", node=N1)
    assert res.returncode != 0 and f"the master is {new}" in res.stdout + res.stderr


def test_candidates_losing_the_master_at_once_elect_exactly_one(vc):
    master = ssconf_master(vc, N1)
    last = _submit(vc, master)
    _kill_daemons(vc, master)
    others = [n for n in vc.names if n != master]
    found: list[str] = []

    def one_master() -> bool:
        found[:] = _answering_master(vc, others)
        return len(found) == 1

    assert wait_until(one_master, 90), f"masters: {found}"
    new = found[0]
    vc.ok("gnt-cluster", "add-tags", "second-autopromotion", node=new)
    assert wait_until(lambda: all(ssconf_master(vc, n) == new for n in others), 30)
    assert _answering_master(vc, others) == [new]
    assert _submit(vc, new) > last
    # the candidates that lost the election did not try a takeover of their own
    for node in others:
        if node != new:
            assert "Autopromotion takeover:" not in _noded_log(vc, node), node
    vcluster.start(vc.cluster, master)
