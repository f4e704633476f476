"""gnt-node powercycle on a real 3-node virtual cluster (fake hypervisor).

The node answers, then its fake hypervisor drops every guest and records
the cycle, and its node daemon starts again (new pid, same options).
"""

from __future__ import annotations

import time

import pytest
from instance_helpers import NOCHECK, fake_hv, status_of
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "cycled.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcp"), nodes=3, use_ssh=False) as cluster:
        yield cluster


def _wait_for_new_noded(vc, node: str, old_pid: int, limit: float = 30.0) -> int:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        pid = daemonctl.daemon_pid(vc.paths(node), constants.NODED)
        if pid is not None and pid != old_pid:
            return pid
        time.sleep(0.1)
    raise AssertionError(f"the node daemon of {node} did not restart (old pid {old_pid})")


def test_powercycle_asks_and_refuses_without_yes(vc):
    old_pid = daemonctl.daemon_pid(vc.paths(N2), constants.NODED)
    res = vc.run("gnt-node", "powercycle", N2)
    assert res.returncode == 2
    assert f"Are you sure you want to hard powercycle node {N2}? Use --yes" in res.stderr
    assert daemonctl.daemon_pid(vc.paths(N2), constants.NODED) == old_pid
    assert fake_hv(vc, N2).powercycles() == []


def test_powercycle_of_the_master_needs_force(vc):
    res = vc.run("gnt-node", "powercycle", "--yes", N1)
    assert res.returncode == 1
    assert "The node is the master and the force parameter was not set" in res.stderr
    assert fake_hv(vc, N1).powercycles() == []


def test_powercycle_drops_the_guests_and_restarts_the_node_daemon(vc):
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N2, *NOCHECK, INST)
    assert status_of(vc, INST) == "running"
    old_pid = daemonctl.daemon_pid(vc.paths(N2), constants.NODED)
    assert old_pid is not None
    res = vc.run("gnt-node", "powercycle", "--yes", N2)
    assert res.returncode == 0, res.stderr
    assert f"Power cycle of {N2} scheduled" in res.stderr
    new_pid = _wait_for_new_noded(vc, N2, old_pid)
    assert new_pid != old_pid
    (record,) = fake_hv(vc, N2).powercycles()
    assert record["instances"] == [INST]
    # the restarted daemon answers again, and the guest is gone: down against the config
    deadline = time.monotonic() + 30
    while status_of(vc, INST) != "ERROR_down" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status_of(vc, INST) == "ERROR_down"
    vc.ok("gnt-instance", "startup", INST)
    assert status_of(vc, INST) == "running"
