"""Ganeti 3.0's own ``gnt-node power``/``health`` and ``gnt-cluster epo`` against our master.

Upstream's unchanged CLI (test/integration/upstream_cli.py) submits its
``OP_OOB_COMMAND`` jobs; every node's ``oob_program`` is the virtual
cluster's program (tools/harness/oob.py), so a power-off really stops the
node's daemons (doc/oob.md).
"""

from __future__ import annotations

import pytest
import upstream_cli
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl
from tools.harness import oob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    reason = upstream_cli.unusable()
    if reason:
        pytest.skip(reason)
    upstream_cli.prepare_host()
    with VirtualCluster(tmp_path_factory.mktemp("vcupoob"), nodes=3, use_ssh=False,
                        masterd_args=["--rpc-timeout-scale", "0.05"]) as cluster:
        cluster.ok("gnt-cluster", "modify", "--node-parameters",
                   f"oob_program={oob.install(cluster.cluster)}")
        yield cluster


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("upoobscratch"))


def up(vc, scratch, *argv: str, code: int = 0):
    res = upstream_cli.run(vc, scratch, *argv)
    assert res.returncode == code, f"{argv} ({res.returncode}):\n{res.stdout}{res.stderr}"
    return res


def _noded(vc, node: str) -> int | None:
    return daemonctl.daemon_pid(vc.paths(node), constants.NODED)


def test_upstream_power_status_and_health(vc, scratch):
    out = up(vc, scratch, "gnt-node", "power", "--separator=|", "status").stdout
    assert out.splitlines() == ["Node|Status", f"{N1}|powered", f"{N2}|powered",
                                f"{N3}|powered"]
    out = up(vc, scratch, "gnt-node", "health", "--separator=|", N2).stdout
    assert out.splitlines()[:3] == ["Node|Status", f"{N2}|node daemon=OK", "|disk space=OK"]


def test_upstream_power_off_of_the_master_fails(vc, scratch):
    res = up(vc, scratch, "gnt-node", "power", "-f", "--ignore-status", "off", N1, code=1)
    assert f"Operating on the master node {N1} is not allowed" in res.stdout + res.stderr
    assert _noded(vc, N1) is not None


def test_upstream_power_off_and_on(vc, scratch):
    out = up(vc, scratch, "gnt-node", "power", "-f", "--separator=|", "off", N2).stdout
    assert f"{N2}|invoked" in out.splitlines()
    assert _noded(vc, N2) is None
    assert vc.ok("gnt-node", "list", "--no-headers", "-o", "offline,powered", N2).split() == [
        "Y", "N"]
    out = up(vc, scratch, "gnt-node", "power", "--separator=|", "on", N2).stdout
    assert f"{N2}|invoked" in out.splitlines()
    assert _noded(vc, N2) is not None
    vc.ok("gnt-node", "modify", "-O", "no", "--force", N2)
    assert vc.ok("gnt-node", "list", "--no-headers", "-o", "offline,powered", N2).split() == [
        "N", "Y"]


def test_upstream_epo_off_then_ours_on(vc, scratch):
    up(vc, scratch, "gnt-cluster", "epo", "-f", N3)
    assert _noded(vc, N3) is None        # upstream's leaves it online (ours: offline)
    vc.ok("gnt-cluster", "epo", "--on", "-f", N3)
    assert _noded(vc, N3) is not None
    assert vc.ok("gnt-node", "list", "--no-headers", "-o", "offline,powered", N3).split() == [
        "N", "Y"]
