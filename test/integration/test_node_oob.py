"""Out-of-band power control through the real master of a 3-node virtual cluster.

Every node's ``oob_program`` is the virtual cluster's out-of-band program
(``tools/vcluster-oob``, tools/harness/oob.py): powering a node off stops
its daemons and drops its fake-hypervisor guests, powering it on starts
its daemons again with a new boot id.  The commands are Ganeti's
``gnt-node power on|off|cycle|status`` and ``gnt-node health``, run as an
operator would, and the tests look at the node's processes, not only at
what the master says.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from instance_helpers import NOCHECK, fake_hv, status_of
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl
from tools.harness import oob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"
INST = "powered.example.com"
#: the master lease's duration (seconds) on this cluster: short, so that a
#: test can wait for it to run out
LEASE = 2.0


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcoob"), nodes=3, use_ssh=False,
                        masterd_args=["--rpc-timeout-scale", "0.05",
                                      "--lease-duration", str(LEASE)]) as cluster:
        path = oob.install(cluster.cluster)
        cluster.ok("gnt-cluster", "modify", "--node-parameters", f"oob_program={path}")
        yield cluster


def _noded(vc, node: str) -> int | None:
    return daemonctl.daemon_pid(vc.paths(node), constants.NODED)


def _boot_id(vc, node: str) -> str:
    with open(vc.paths(node).vnode_boot_id_file, encoding="utf-8") as fh:
        return fh.read().strip()


def _table(out: str) -> dict[str, str]:
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def _node_flags(vc, node: str) -> tuple[str, str]:
    out = vc.ok("gnt-node", "list", "--no-headers", "--separator=|", "-o", "offline,powered",
                node)
    offline, powered = out.strip().split("|")
    return offline, powered


def _log_lines(vc) -> list[str]:
    with open(os.path.join(vc.directory, oob.LOG_NAME), encoding="utf-8") as fh:
        return [line.split(" ", 1)[1].strip() for line in fh]


def test_power_status_of_every_node(vc):
    out = vc.ok("gnt-node", "power", "--separator=|", "status")
    assert out.splitlines()[0] == "Node|Status"
    assert _table(out) == {"Node": "Status", N1: "powered", N2: "powered", N3: "powered"}
    assert f"power-status {N3}" in _log_lines(vc)
    assert _node_flags(vc, N2) == ("N", "Y")


def test_health_lists_the_items_and_warns(vc):
    with open(os.path.join(vc.cluster.node(N3).root, oob.HEALTH_FILE), "w",
              encoding="utf-8") as fh:
        json.dump([["fan 1", "WARNING"]], fh)
    try:
        res = vc.run("gnt-node", "health", "--separator=|", N2, N3)
    finally:
        os.unlink(os.path.join(vc.cluster.node(N3).root, oob.HEALTH_FILE))
    assert res.returncode == 0, res.stderr
    table = [line for line in res.stdout.splitlines() if "|" in line]
    assert table == ["Node|Status", f"{N2}|node daemon=OK", "|disk space=OK",
                     f"{N3}|node daemon=OK", "|disk space=OK", "|fan 1=WARNING"]
    assert f"Item 'fan 1' on node '{N3}' has status 'WARNING'" in res.stdout + res.stderr


def test_power_off_needs_nodes_and_a_confirmation(vc):
    res = vc.run("gnt-node", "power", "off")
    assert res.returncode == 1
    assert "Please provide at least one node or use --all" in res.stderr
    res = vc.run("gnt-node", "power", "off", N2)
    assert res.returncode == 1
    assert "Use --force to confirm" in res.stderr
    assert _noded(vc, N2) is not None and _node_flags(vc, N2) == ("N", "Y")


def test_power_off_of_the_master_is_refused(vc):
    res = vc.run("gnt-node", "power", "-f", "--ignore-status", "off", N1)
    assert res.returncode == 1
    assert f"Operating on the master node {N1} is not allowed for power-off" in res.stderr
    assert _noded(vc, N1) is not None


def test_power_off_stops_the_node_and_power_on_brings_it_back(vc):
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N2, *NOCHECK, INST)
    assert fake_hv(vc, N2).list_instances() == [INST]
    boot_before = _boot_id(vc, N2)

    out = vc.ok("gnt-node", "power", "-f", "--separator=|", "off", N2)
    assert _table(out)[N2] == "invoked"
    assert _noded(vc, N2) is None                      # its daemons are really gone
    assert fake_hv(vc, N2).list_instances() == []      # and so are its guests
    assert _node_flags(vc, N2) == ("Y", "N")           # marked offline, recorded unpowered
    assert _table(vc.ok("gnt-node", "power", "--separator=|", "status", N2)) == {
        "Node": "Status", N2: "unpowered"}

    res = vc.run("gnt-node", "modify", "-O", "no", "--force", N2)
    assert res.returncode == 1
    assert f"Node {N2} needs to be turned on before its offline status can be reset" in res.stderr

    out = vc.ok("gnt-node", "power", "--separator=|", "on", N2)
    assert _table(out)[N2] == "invoked"
    assert _noded(vc, N2) is not None and _boot_id(vc, N2) != boot_before
    assert _node_flags(vc, N2) == ("Y", "Y")
    vc.ok("gnt-node", "modify", "-O", "no", "--force", N2)
    assert _node_flags(vc, N2) == ("N", "Y")
    assert status_of(vc, INST) == "ERROR_down"         # the guest did not survive the power loss
    vc.ok("gnt-instance", "startup", INST)
    assert status_of(vc, INST) == "running"
    assert [line for line in _log_lines(vc) if line.endswith(N2)][-3:] == [
        f"power-off {N2}", f"power-status {N2}", f"power-on {N2}"]


def test_power_cycle_reboots_the_node(vc):
    pid, boot = _noded(vc, N3), _boot_id(vc, N3)
    out = vc.ok("gnt-node", "power", "-f", "--separator=|", "cycle", N3)
    assert _table(out)[N3] == "invoked"
    assert _noded(vc, N3) not in (None, pid) and _boot_id(vc, N3) != boot
    assert _node_flags(vc, N3) == ("N", "Y")           # a cycle changes no record
    vc.ok("gnt-cluster", "verify")


def test_modify_powered_needs_an_oob_program(vc):
    vc.ok("gnt-node", "modify", "--node-parameters", "oob_program=", N3)
    try:
        res = vc.run("gnt-node", "modify", "--node-powered", "no", N3)
        assert res.returncode == 1
        assert "does not support out-of-band handling" in res.stderr
        assert _node_flags(vc, N3) == ("N", "-")
        out = vc.run("gnt-node", "power", "--separator=|", "status", N3)
        assert out.returncode == 1 and _table(out.stdout)[N3] == "(unavail)"
    finally:
        vc.ok("gnt-node", "modify", "--node-parameters", "oob_program=default", N3)


def test_epo_of_the_master_needs_all(vc):
    res = vc.run("gnt-cluster", "epo", "-f", N1, N3)
    assert res.returncode == 1
    assert f"{N1} is the master node, please do a master-failover" in res.stderr
    assert _noded(vc, N3) is not None


def test_epo_powers_a_node_off_with_its_instances_and_back_on(vc):
    inst = "epo.example.com"
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N3, *NOCHECK, inst)
    res = vc.run("gnt-cluster", "epo", "-f", N3)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Submit shutdown of instance {inst}" in res.stdout
    assert "All instances have been stopped successfully" in res.stdout
    assert _noded(vc, N3) is None and fake_hv(vc, N3).list_instances() == []
    assert _node_flags(vc, N3) == ("Y", "N")           # offline: no job waits for it

    res = vc.run("gnt-cluster", "epo", "--on", "-f", N3)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Node {N3} became available" in res.stdout
    assert f"Submit startup of instance {inst}" in res.stdout
    assert _noded(vc, N3) is not None and _node_flags(vc, N3) == ("N", "Y")
    assert fake_hv(vc, N3).list_instances() == [inst]
    assert status_of(vc, inst) == "running"


def test_epo_all_keeps_the_master_and_brings_the_cluster_back(vc):
    running = {n for n in (INST, "epo.example.com") if status_of(vc, n) == "running"}
    res = vc.run("gnt-cluster", "epo", "--all", "-f")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Node {N1} is the master node, it stays powered on" in res.stdout
    assert (_noded(vc, N1), _noded(vc, N2), _noded(vc, N3))[1:] == (None, None)
    assert _noded(vc, N1) is not None
    assert [_node_flags(vc, n) for n in (N1, N2, N3)] == [("N", "Y"), ("Y", "N"), ("Y", "N")]
    # long after the last lease the powered-off nodes confirmed, the master
    # still writes its configuration: they are no longer the lease's voters
    time.sleep(LEASE * 2)
    vc.ok("gnt-cluster", "add-tags", "epo-lease")
    vc.ok("gnt-cluster", "remove-tags", "epo-lease")

    res = vc.run("gnt-cluster", "epo", "--all", "--on", "-f")   # jobs are still accepted
    assert res.returncode == 0, res.stdout + res.stderr
    assert [_node_flags(vc, n) for n in (N1, N2, N3)] == [("N", "Y")] * 3
    assert {n for n in running if status_of(vc, n) == "running"} == running == {
        INST, "epo.example.com"}
    vc.ok("gnt-cluster", "verify")


def test_the_program_protocol_through_the_master(vc, tmp_path):
    """Ganeti's QA check of the protocol (its TestOutOfBand): a program whose output and
    exit status the test sets; the master accepts only the right shape per command."""
    verify, data, code = (tmp_path / name for name in ("args", "data", "code"))
    data.write_text("")
    code.write_text("0")
    program = "/usr/lib/ganeti/qa-oob"
    local = os.path.join(vc.cluster.master_node.root, program.lstrip("/"))
    with open(local, "w", encoding="utf-8") as fh:
        fh.write(f'#!/bin/sh\necho "$@" > {verify}\ncat {data}\nexit $(cat {code})\n')
    os.chmod(local, 0o700)

    def power(*argv: str, ok: bool) -> None:
        res = vc.run("gnt-node", "power", "-f", "--ignore-status", *argv, N3)
        assert (res.returncode == 0) == ok, res.stdout + res.stderr
        assert verify.read_text().split() == [f"power-{argv[-1]}", N3]

    vc.ok("gnt-node", "modify", "--node-parameters", f"oob_program={program}", N3)
    try:
        power("on", ok=True)
        power("status", ok=False)                      # no output: not a power state
        data.write_text('{"powered": true}')
        power("status", ok=True)
        power("on", ok=False)                          # output where none is expected
        data.write_text('[["temp", "OK"], ["disk0", "CRITICAL"]]')
        res = vc.run("gnt-node", "health", "--separator=|", N3)
        assert res.returncode == 0, res.stderr
        assert [line for line in res.stdout.splitlines() if "|" in line][1:] == [
            f"{N3}|temp=OK", "|disk0=CRITICAL"]
        code.write_text("1")
        res = vc.run("gnt-node", "health", "--separator=|", N3)
        assert res.returncode == 1 and f"{N3}|(nodata)" in res.stdout
        assert "exit status 1" in res.stdout + res.stderr
        data.write_text("")
        power("off", ok=False)
        assert _node_flags(vc, N3) == ("N", "Y")       # a failed command changes no record
    finally:
        vc.ok("gnt-node", "modify", "--node-parameters", "oob_program=default", N3)


def test_epo_without_oob_stops_and_starts_the_instances(vc):
    """Ganeti's QA TestClusterEpo: no node has a program; the instances still go down
    (still marked up: ERROR_down) and come back."""
    vc.ok("gnt-cluster", "modify", "--node-parameters", "oob_program=")
    try:
        out = vc.ok("gnt-node", "list", "--verbose", "--no-headers", "-o", "powered")
        assert set(out.split()) == {"(unavail)"}
        res = vc.run("gnt-cluster", "epo", "-f", "--all")
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"Node {N2} does not support out-of-band handling" in res.stdout
        statuses = vc.ok("gnt-instance", "list", "--no-headers", "-o", "status").split()
        assert statuses and set(statuses) == {"ERROR_down"}
        res = vc.run("gnt-cluster", "epo", "--on", "-f", "--all")
        assert res.returncode == 0, res.stdout + res.stderr
        statuses = vc.ok("gnt-instance", "list", "--no-headers", "-o", "status").split()
        assert set(statuses) == {"running"}
    finally:
        vc.ok("gnt-cluster", "modify", "--node-parameters",
              f"oob_program={oob.CANONICAL_PATH}")
