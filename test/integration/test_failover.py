"""Master failover on real 5- and 3-node virtual clusters (doc/design/failover.md).

* planned failover with everything up (5 nodes): job ids and the config
  serial continue upward, the old master's daemons are stopped, every node
  names the new master, ``gnt-cluster verify`` is clean, ``tools/vcluster
  env`` follows;
* the master died: a failover from another candidate, and the old master
  refusing to start its master daemon when it comes back;
* with partitions (root and nftables): a stale candidate refused with both
  serials, then accepted with ``--no-voting --yes-do-it``; an old master
  cut off while the majority fails over, then healed: it refuses jobs and
  the nodes refuse its writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from failover_helpers import (MASTERD_ARGS, Ledger, config_serial, failover, masterd_running,
                              needs_partitions, rapi_running, ssconf_master, submit)
from vcluster_harness import VirtualCluster

from ganeti import constants, pathutils, ssh
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(400)

N1, N2, N3, N4, N5 = (f"node{i}.vcluster" for i in range(1, 6))


def _masterd_argv(*extra: str) -> list[str]:
    return [sys.executable, f"{vcluster.REPO_ROOT}/daemons/{constants.MASTERD}",
            *MASTERD_ARGS, *extra]


def _masterd(vc: VirtualCluster, node: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """Start ganeti-masterd on ``node`` directly (as the operator would)."""
    return subprocess.run(_masterd_argv(*extra), env=vc.env(node), capture_output=True,
                          text=True, timeout=120, check=False)


def _wait(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.fixture(scope="module")
def vc5(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcf5"), nodes=5,
                        masterd_args=MASTERD_ARGS) as cluster:
        yield cluster


def _mip_log(vc: VirtualCluster, node: str) -> list[str]:
    try:
        with open(os.path.join(vc.paths(node).root, "mip.log")) as fh:
            return fh.read().split()
    except FileNotFoundError:
        return []


def _install_mip_script(vc: VirtualCluster) -> None:
    """A master IP setup script on every node that records start/stop in <root>/mip.log."""
    for name in vc.names:
        paths = vc.paths(name)
        script = pathutils.external_master_setup_script(paths)
        os.makedirs(os.path.dirname(script), exist_ok=True)
        with open(script, "w") as fh:
            fh.write(f"#!/bin/sh\necho \"$1\" >> {paths.root}/mip.log\n")
        os.chmod(script, 0o755)


def test_planned_failover_five_nodes(vc5):
    ledger = Ledger()
    _install_mip_script(vc5)
    vc5.ok("gnt-cluster", "modify", "--use-external-mip-script", "yes", "--master-netdev",
           "gntdev0", node=N1)
    assert _mip_log(vc5, N1) == ["start"]
    ids = []
    for _ in range(3):
        job, text = submit(vc5, N1, "gnt-debug", "delay", "0", wait=True)
        assert job is not None, text
        ledger.acked(job, N1)
        ids.append(job)
    vc5.ok("gnt-cluster", "add-tags", "before-failover", node=N1)
    serial_before = config_serial(vc5, N1)
    code, out = failover(vc5, N2)
    assert code == 0, out
    # it says what it did, node by node
    assert "5 of 5 nodes answered and confirm node2.vcluster" in out
    assert f"{N1}: ganeti-masterd stopped, ganeti-rapi stopped" in out
    for name in (N1, N3, N4, N5):
        assert f"{name}: configuration (serial" in out or f"{name}: ssconf updated" in out
    assert f"{N2}: ganeti-masterd started" in out and f"{N2}: ganeti-rapi started" in out
    # the daemons moved
    assert not masterd_running(vc5, N1) and not rapi_running(vc5, N1)
    assert masterd_running(vc5, N2) and rapi_running(vc5, N2)
    # every node names the new master, from its ssconf
    for name in vc5.names:
        assert vc5.ok("gnt-cluster", "getmaster", node=name).strip() == N2
        assert ssconf_master(vc5, name) == N2
    assert vcluster.current_master(vc5.cluster).name == N2
    assert f"GANETI_HOSTNAME={N2}" in "\n".join(vcluster.env_lines(vc5.cluster))
    assert vc5.run("gnt-cluster", "master-ping", node=N2).returncode == 0
    assert vc5.run("gnt-cluster", "master-ping", node=N1).returncode == 1
    # job ids and the config serial continue upward; the tag survived
    job, text = submit(vc5, N2, "gnt-debug", "delay", "0", wait=True)
    assert job is not None and job > max(ids), text
    ledger.acked(job, N2)
    assert config_serial(vc5, N2) > serial_before
    assert "before-failover" in vc5.ok("gnt-cluster", "list-tags", node=N2)
    # the old master stays a candidate; verify is clean on the new master
    roles = dict(line.split() for line in vc5.ok("gnt-node", "list", "--no-headers", "-o",
                                                  "name,role", node=N2).splitlines())
    assert roles[N2] == "M" and roles[N1] == "C"
    verify = vc5.run("gnt-cluster", "verify", node=N2)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "ERROR" not in verify.stdout
    ledger.check(vc5)
    # the master IP moved: down on the old master, up on the new one
    assert _mip_log(vc5, N1) == ["start", "stop"]
    assert _wait(lambda: _mip_log(vc5, N2) == ["start"])
    # the new master trusts the old one's SSH host key, recorded when the
    # cluster was made (a console refuses hosts it does not know)
    new_master = vc5.paths(N2)
    strict = ssh.SshRunner(new_master.ssh_key_file, known_hosts_path=new_master.known_hosts_file,
                           port=vc5.cluster.ssh_port or 22, accept_new_hosts=False)
    assert not strict.run(vc5.cluster.node(N1).ip, "true", timeout=30).failed


def test_failover_after_master_died_five_nodes(vc5):
    master = vcluster.current_master(vc5.cluster).name
    assert master == N2
    job_before, _ = submit(vc5, N2, "gnt-debug", "delay", "0", wait=True)
    vcluster.stop(vc5.cluster, "node2")          # the master dies: every daemon of it
    code, out = failover(vc5, N3)
    assert code == 0, out
    assert f"{N2}: not stopped (no answer to the vote" in out
    assert "4 of 5 nodes answered" in out
    assert masterd_running(vc5, N3)
    job, text = submit(vc5, N3, "gnt-debug", "delay", "0", wait=True)
    assert job is not None and job > job_before, text
    # the old master comes back: its daemons start, but not as master
    vcluster.start(vc5.cluster, "node2")
    assert not masterd_running(vc5, N2)
    res = _masterd(vc5, N2)
    assert res.returncode != 0
    assert "Master vote refused" in res.stderr and "no longer the master" in res.stderr
    assert "epoch" in res.stderr
    assert not masterd_running(vc5, N2)
    # its ssconf and config get fixed by the new master's next change
    vc5.ok("gnt-cluster", "add-tags", "after-death", node=N3)
    assert _wait(lambda: ssconf_master(vc5, N2) == N3)


@pytest.fixture
def vc2(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcf2"), nodes=2, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        yield cluster


def test_two_nodes_masterd_vote_retry_refusal_and_override(vc2):
    from ganeti import daemonctl
    daemonctl.stop_daemon(vc2.paths(N1), constants.MASTERD)
    vcluster.stop(vc2.cluster, "node2")
    # the other node down: a clear refusal after the bounded retry, never a hang
    started = time.monotonic()
    res = _masterd(vc2, N1, "--vote-timeout", "2")
    assert res.returncode != 0
    assert "Only 1 of 2 nodes answered" in res.stderr and N2 in res.stderr
    assert "--no-voting --yes-do-it" in res.stderr
    assert time.monotonic() - started < 60
    assert not masterd_running(vc2, N1)
    # a whole cluster booting: node2 comes up while the master daemon keeps asking
    proc = subprocess.Popen(_masterd_argv("--vote-timeout", "60"), env=vc2.env(N1),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.0)
        assert proc.poll() is None          # still voting
        daemonctl.start_noded(vc2.paths(N2), vc2.cluster.node(N2).ip, vc2.cluster.noded_port,
                              env=vc2.env(N2))
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    assert masterd_running(vc2, N1)
    log = open(vc2.paths(N1).daemon_log_file(constants.MASTERD)).read()
    assert "asking again" in log and "2 of 2 nodes answered and confirm" in log
    # the override: only with --yes-do-it, then loudly
    daemonctl.stop_daemon(vc2.paths(N1), constants.MASTERD)
    vcluster.stop(vc2.cluster, "node2")
    res = _masterd(vc2, N1, "--no-voting")
    assert res.returncode != 0 and "confirm with --yes-do-it" in res.stderr
    serial = config_serial(vc2, N1)
    res = _masterd(vc2, N1, "--no-voting", "--yes-do-it")
    assert res.returncode == 0, res.stderr
    log = open(vc2.paths(N1).daemon_log_file(constants.MASTERD)).read()
    assert "WITHOUT the master vote" in log and "Vote skipped (--no-voting)" in log
    assert config_serial(vc2, N1) > serial
    job, text = submit(vc2, N1, "gnt-debug", "delay", "0", wait=True)
    assert job is not None, text


# --- partitions --------------------------------------------------------------------------

@pytest.fixture
def vc3(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcf3"), nodes=3, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        yield cluster


@needs_partitions
def test_stale_candidate_refused_then_forced(vc3):
    vcluster.isolate(vc3.cluster, "node3")
    try:
        for _ in range(2):
            assert submit(vc3, N1, "gnt-debug", "delay", "0", wait=True)[0] is not None
        vc3.ok("gnt-cluster", "add-tags", "while-node3-was-away", node=N1)
        serial1 = config_serial(vc3, N1)
        serial3 = config_serial(vc3, N3)
        assert serial3 < serial1
        # the master daemon goes down before node3 catches up; node3 comes back
        from ganeti import daemonctl
        daemonctl.stop_daemon(vc3.paths(N1), constants.MASTERD)
    finally:
        vcluster.heal(vc3.cluster, "node3")
    code, out = failover(vc3, N3)
    assert code != 0
    assert "node3.vcluster has stale data" in out
    assert f"config serial {serial1} there, {serial3} here" in out
    assert "--no-voting --yes-do-it" in out
    assert not masterd_running(vc3, N3)
    # forced: node3's data wins, with a serial above every one seen
    code, out = failover(vc3, N3, "--no-voting", "--yes-do-it")
    assert code == 0, out
    assert "Vote skipped (--no-voting)" in out
    assert config_serial(vc3, N3) > serial1
    assert _wait(lambda: config_serial(vc3, N1) == config_serial(vc3, N3))
    assert "job queue copied" in out
    assert vc3.ok("gnt-cluster", "getmaster", node=N1).strip() == N3


@needs_partitions
def test_cut_off_master_is_fenced(vc3, monkeypatch):
    ledger = Ledger()
    job, _ = submit(vc3, N1, "gnt-debug", "delay", "0", wait=True)
    ledger.acked(job, N1)
    vcluster.isolate(vc3.cluster, "node1")
    try:
        code, out = failover(vc3, N2)
        assert code == 0, out
        assert "2 of 3 nodes answered" in out and "waiting 2s for the master lease" in out
        # the cut-off old master still runs, but accepts no job
        assert masterd_running(vc3, N1)
        job1, text = submit(vc3, N1, "gnt-debug", "delay", "0")
        assert job1 is None and "master lease has expired" in text
        job2, text = submit(vc3, N2, "gnt-debug", "delay", "0", wait=True)
        assert job2 is not None, text
        ledger.acked(job2, N2)
    finally:
        vcluster.heal(vc3.cluster, "node1")
    # healed: it learns from the nodes that it is no longer the master
    job1, text = submit(vc3, N1, "gnt-debug", "delay", "0")
    assert job1 is None and "no longer the master" in text
    logs = [open(vc3.paths(n).daemon_log_file(constants.NODED)).read() for n in (N2, N3)]
    assert any("Fenced: master epoch 0 (from node1.vcluster) is older than epoch" in log
               for log in logs)
    ledger.check(vc3)
    # a write carrying the old epoch, straight to a node: refused, nothing written
    from ganeti.failover import takeover
    for key in (constants.ENV_NODED_PORT, constants.ENV_SOURCE_ADDRESS):
        monkeypatch.setenv(key, vc3.env(N1)[key])
    old_rpc = takeover.node_rpc(vc3.paths(N1), takeover.load_local_config(vc3.paths(N1)), N1,
                                epoch=0, timeout_scale=0.05)
    res = old_rpc.call("write_ssconf_files", [N3], [{"master_node": N1}])[N3]
    assert res.fail_msg and res.fail_msg.startswith("Fenced: master epoch 0 (from node1.vcluster)")
    assert ssconf_master(vc3, N3) == N2
    # and it refuses to start again as master
    from ganeti import daemonctl
    daemonctl.stop_daemon(vc3.paths(N1), constants.MASTERD)
    res = _masterd(vc3, N1)
    assert res.returncode != 0 and "Master vote refused" in res.stderr
    assert vc3.ok("gnt-cluster", "getmaster", node=N3).strip() == N2
