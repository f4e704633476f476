"""Node loss recovery on a real virtual cluster (doc/ha.md, "Node loss recovery").

One 4-node cluster (fake hypervisor, ``sharedfile`` instances, the virtual
cluster's out-of-band program as ``oob_program``, ``ha_recovery`` on with
a 3-second node timeout), the tests in order:

* a node killed (every daemon, SIGKILL): its instances tagged for
  ``failover`` run again on another node, each exactly once (the dead
  node's guests are gone with its power, no second copy anywhere), in
  jobs with reason ``gnt:ha`` whose log names the fence and when it was
  confirmed; its untagged instance stays where it was, down, and the
  recovery's report names it;
* those relocations, counted in the instances' tags, survive two master
  failovers (shown by ``ha_state``; the last test finds the limit applied);
* a node cut off from the master only (the others still reach it): it is
  not declared dead, nothing of it moves;
* a node without OOB cut off from the master only: its lease goes through a
  candidate, its tagged instance keeps running there past the lease's length
  and is started nowhere else;
* a node without OOB cut off from everyone: it stops its own instance
  tagged for failover when its self-fence lease runs out, and only then
  does the instance run on another node; its untagged instance, which the
  lease does not name, keeps running there; another node without OOB keeps
  its lease (renewed while the master waits) and its instance.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any
from collections.abc import Iterator

import pytest
from failover_helpers import MASTERD_ARGS, failover, needs_partitions, wait_until
from instance_helpers import NOCHECK, rows
from vcluster_harness import VirtualCluster

import ha_helpers

from ganeti import constants, daemonctl
from ganeti.backend import ha as backend_ha
from ganeti.ha import recovery
from tools.harness import crash, oob, vcluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

N1, N2, N3, N4 = (f"node{k}.vcluster" for k in range(1, 5))
FAILOVER = "ganeti:watcher:autorepair:failover"
#: seconds of silence before the master asks the candidates (the cluster parameter)
TIMEOUT = 3


@pytest.fixture(scope="module")
def vc(tmp_path_factory) -> Iterator[VirtualCluster]:
    with VirtualCluster(tmp_path_factory.mktemp("vcha"), nodes=4, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        path = oob.install(cluster.cluster)
        cluster.ok("gnt-cluster", "modify", "--node-parameters", f"oob_program={path}")
        yield cluster


def _add(vc: VirtualCluster, name: str, node: str, *tags: str) -> None:
    vc.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=1M", "-o", "tinyos",
          "-B", "maxmem=128", "-n", node, *NOCHECK, name)
    if tags:
        vc.ok("gnt-instance", "add-tags", name, *tags)


_running_on = ha_helpers.running_on


def _pnode(vc: VirtualCluster, name: str) -> str:
    ((pnode,),) = rows(vc, "pnode", name)
    return pnode


def _offline(vc: VirtualCluster, node: str) -> str:
    out = vc.ok("gnt-node", "list", "--no-headers", "-o", "offline", node)
    return out.strip()


def _ha_jobs(vc: VirtualCluster) -> list[dict[str, Any]]:
    return ha_helpers.ha_jobs(vc, N1)


def _log_lines(vc: VirtualCluster, node: str, daemon: str, *words: str) -> list[str]:
    """The lines of ``node``'s ``daemon`` log that contain one of ``words`` (diagnostics)."""
    try:
        with open(vc.paths(node).daemon_log_file(daemon), encoding="utf-8",
                  errors="replace") as fh:
            return [line.rstrip() for line in fh if any(w in line for w in words)]
    except FileNotFoundError:
        return []


def _leased(vc: VirtualCluster, node: str) -> list[str]:
    """The instances ``node``'s self-fence lease record names (none: no lease)."""
    record = backend_ha.read_lease(vc.paths(node))
    return [entry["name"] for entry in record.get("instances", [])] if record else []


_failovers = ha_helpers.failovers


# --- a partition of one pair of nodes ------------------------------------------------


def _nft(script: str) -> None:
    res = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True,
                         check=False, timeout=30)
    assert res.returncode == 0, res.stderr


def _cut(vc: VirtualCluster, a: str, b: str) -> str:
    """Drop the node daemons' traffic between ``a`` and ``b`` only; the table's name."""
    table = f"ganeti_hatest_{os.getpid()}"
    ip_a, ip_b = vc.cluster.node(a).ip, vc.cluster.node(b).ip
    port = vc.cluster.noded_port
    lines = [f"table inet {table} {{", "  chain out {",
             "    type filter hook output priority 0; policy accept;"]
    for src, dst in ((ip_a, ip_b), (ip_b, ip_a)):
        for direction in ("dport", "sport"):
            lines.append(f"    ip saddr {src} ip daddr {dst} tcp {direction} {port} drop")
    lines += ["  }", "}"]
    _nft("\n".join(lines) + "\n")
    return table


def _uncut(table: str) -> None:
    _nft(f"table inet {table}\ndelete table inet {table}\n")


# --- the tests ------------------------------------------------------------------------


def test_a_killed_node_its_tagged_instances_run_elsewhere_exactly_once(vc):
    vc.ok("gnt-cluster", "modify", "--ha-recovery", "yes", "--ha-node-timeout", str(TIMEOUT))
    info = vc.ok("gnt-cluster", "info")
    assert "automatic node loss recovery: True" in info
    assert f"node loss timeout: {TIMEOUT}" in info
    _add(vc, "ha1.example.com", N4, FAILOVER)
    _add(vc, "ha2.example.com", N4, FAILOVER, f"{recovery.PRIORITY_PREFIX}5")
    _add(vc, "plain1.example.com", N4)
    assert _ha_jobs(vc) == []
    killed = time.monotonic()
    crash.kill_node_daemons(vc.paths(N4))
    tagged = ["ha1.example.com", "ha2.example.com"]
    twice: list[dict[str, list[str]]] = []

    def recovered() -> bool:
        where = {n: _running_on(vc, n) for n in tagged}
        if any(len(nodes) > 1 for nodes in where.values()):
            twice.append(where)
        return all(nodes and nodes != [N4] for nodes in where.values())

    assert wait_until(recovered, 60, step=0.1), {n: _running_on(vc, n) for n in tagged}
    assert twice == []                    # never two copies, not even for a moment
    elapsed = time.monotonic() - killed
    print(f"node death to instances running again: {elapsed:.1f} s")
    assert _offline(vc, N4) == "Y"
    for name in tagged:
        assert _pnode(vc, name) == _running_on(vc, name)[0]
    # the untagged one: left where it was, not running anywhere (its node's power is off)
    assert _pnode(vc, "plain1.example.com") == N4
    assert _running_on(vc, "plain1.example.com") == []
    assert daemonctl.daemon_pid(vc.paths(N4), constants.NODED) is None
    # the last failover job goes on after its instance started (it drops the fence record)
    assert wait_until(lambda: all(j["status"] in constants.JOBS_FINALIZED
                                  for j in _ha_jobs(vc)), 60)
    jobs = _ha_jobs(vc)
    assert all(j["status"] == constants.JOB_STATUS_SUCCESS for j in jobs), jobs
    # exactly one failover per tagged instance, the higher priority first
    assert _failovers(jobs) == ["ha2.example.com", "ha1.example.com"]
    fence = jobs[0]
    assert [op["OP_ID"] for op in fence["ops"]] == ["OP_NODE_HA_FENCE"]
    assert f"Node {N4} declared dead" in fence["log"]
    # its own log says which fence and when it was confirmed
    assert f"{N4} fenced by out-of-band power-off, confirmed at" in fence["log"]
    # no test opcode in the recovery's jobs: its log lines are OP_NODE_HA_REPORT
    assert not any(op["OP_ID"] == "OP_TEST_JQUEUE" for job in jobs for op in job["ops"])
    # what an operator sees: the jobs in gnt-job list, the reason in gnt-job info
    listed = vc.ok("gnt-job", "list", "--no-headers", "-o", "id")
    assert all(str(j["id"]) in listed.split() for j in jobs)
    assert recovery.REASON_SOURCE in vc.ok("gnt-job", "info", str(fence["id"]))
    assert "out-of-band power-off" in fence["log"]
    report = "\n".join(j["log"] for j in jobs)
    assert f"fenced by out-of-band power-off (job {fence['id']}), confirmed at" in report
    assert "leave plain1.example.com: not tagged for failover (disabled)" in report
    for job in jobs:
        if _failovers([job]):
            assert "confirmed at" in job["log"]


def test_the_recovery_counts_survive_a_master_failover(vc):
    """The relocations of the test before are in the instances' tags (the configuration):
    the new master shows them; the last test finds the limit still applied by a master
    daemon started twice since."""
    field = ("gnt-instance", "list", "--no-headers", "-o", "name,ha_state")
    assert "relocated 1 time(s) by recovery" in vc.ok(*field, "ha1.example.com", node=N1)
    code, text = failover(vc, N2)
    assert code == 0, text
    try:
        lines = {line.split()[0]: line for line in vc.ok(*field, node=N2).splitlines()}
        for name in ("ha1.example.com", "ha2.example.com"):
            assert "relocated 1 time(s) by recovery, 0 failed job(s)" in lines[name], lines
        assert "relocated" not in lines["plain1.example.com"]
        tags = vc.ok("gnt-instance", "list-tags", "ha1.example.com", node=N2).split()
        assert f"{recovery.RELOCATIONS_PREFIX}1" in tags
    finally:
        code, text = failover(vc, N1)
    assert code == 0, text
    assert wait_until(lambda: "relocated 1 time(s)" in vc.ok(*field, "ha2.example.com",
                                                              node=N1), 30)


def test_a_node_cut_off_from_the_master_alone_is_not_declared_dead(vc):
    _add(vc, "stay.example.com", N3, FAILOVER)
    before = len(_ha_jobs(vc))
    table = _cut(vc, N1, N3)
    try:
        master_log = vc.paths(N1).daemon_log_file(constants.MASTERD)

        def asked() -> bool:
            with open(master_log, encoding="utf-8", errors="replace") as fh:
                return f"Node {N3} silent for" in fh.read()

        assert wait_until(asked, 40)
        # the candidates still reach it: several rounds more, nothing happens
        time.sleep(3 * TIMEOUT)
        assert len(_ha_jobs(vc)) == before
    finally:
        _uncut(table)
    assert _offline(vc, N3) == "N"
    assert _pnode(vc, "stay.example.com") == N3
    assert _running_on(vc, "stay.example.com") == [N3]
    with open(master_log, encoding="utf-8", errors="replace") as fh:
        assert "not dead: " in fh.read()


@needs_partitions
def test_a_node_without_oob_cut_off_from_the_master_alone_keeps_its_instance(vc):
    """Its lease goes through a candidate: the instance keeps running there past the
    lease's length, and is started nowhere else."""
    vc.ok("gnt-node", "modify", "--node-parameters", "oob_program=", N3)
    name = "stay.example.com"                       # tagged, on N3 (the test before)
    assert wait_until(lambda: name in _leased(vc, N3), 20)
    before = len(_ha_jobs(vc))
    table = _cut(vc, N1, N3)
    cut = time.monotonic()
    seen: list[list[str]] = []
    try:
        # well past the lease (and the point 2 s before its end where it would fence)
        while time.monotonic() - cut < recovery.MIN_SELF_FENCE_LEASE + 10:
            where = _running_on(vc, name)
            if where != [N3]:
                seen.append(where)
            time.sleep(0.5)
        relayed = _log_lines(vc, N1, constants.MASTERD, "its lease renewed through")
    finally:
        _uncut(table)
    assert seen == [], seen
    assert any(N3 in line for line in relayed), _log_lines(vc, N1, constants.MASTERD, N3)
    assert _log_lines(vc, N3, constants.NODED, "Self-fence") == []
    assert len(_ha_jobs(vc)) == before
    assert _offline(vc, N3) == "N" and _pnode(vc, name) == N3


@needs_partitions
def test_a_node_without_oob_cut_off_from_everyone_fences_itself_first(vc):
    vc.ok("gnt-cluster", "modify", "--ha-recovery", "yes", "--ha-node-timeout", str(TIMEOUT))
    for node in (N2, N3):
        vc.ok("gnt-node", "modify", "--node-parameters", "oob_program=", node)
    name = "self.example.com"
    _add(vc, name, N2, FAILOVER)
    # not tagged: the master would not recover it, so the lease does not name it
    keep = "keep.example.com"
    _add(vc, keep, N2)
    # a healthy node without OOB: its lease must be renewed while the master waits
    _add(vc, "bystander.example.com", N3, FAILOVER)
    # an instance the first test moved here was relocated once: the limit (1) holds it
    limited = [inst for inst, pnode in rows(vc, "name,pnode")
               if pnode == N2 and inst in ("ha1.example.com", "ha2.example.com")]
    before = len(_ha_jobs(vc))
    # the master gives it a self-fence lease now that it has no OOB, naming its tagged
    # instance (without one confirmed, the master could not fence it and would
    # recover nothing)
    assert wait_until(lambda: name in _leased(vc, N2)
                 and "bystander.example.com" in _leased(vc, N3), 20)
    assert keep not in _leased(vc, N2)
    vcluster.isolate(vc.cluster, N2)
    isolated = time.monotonic()
    try:
        seen_twice: list[list[str]] = []

        def moved() -> bool:
            where = _running_on(vc, name)
            if len(where) > 1:
                seen_twice.append(where)
            return where != [N2] and len(where) == 1

        # the lease is at least recovery.MIN_SELF_FENCE_LEASE seconds
        assert wait_until(moved, recovery.MIN_SELF_FENCE_LEASE + 40, step=0.1), (
            _running_on(vc, name), _log_lines(vc, N2, constants.NODED, "elf-fence", "worker"),
            _log_lines(vc, N1, constants.MASTERD, "ecovery", N2),
            vc.ok("gnt-node", "list", "-o", "name,ndp/oob_program", N2))
        print(f"node isolated to its instance running elsewhere: {time.monotonic() - isolated:.1f} s")
        assert seen_twice == []
        assert _running_on(vc, name) != [N2]
        # the lease ran out: the untagged instance still runs on the isolated node
        assert _running_on(vc, keep) == [N2]
        assert any("Self-fence: stopped" in line and keep not in line
                   for line in _log_lines(vc, N2, constants.NODED, "Self-fence: stopped"))
    finally:
        vcluster.heal(vc.cluster, N2)
    jobs = _ha_jobs(vc)[before:]
    assert _failovers(jobs) == [name]
    assert [op["OP_ID"] for op in jobs[0]["ops"]] == ["OP_NODE_HA_FENCE"]
    assert f"{N2} fenced by its self-fence lease, confirmed at" in jobs[0]["log"]
    assert _running_on(vc, "bystander.example.com") == [N3]
    assert _log_lines(vc, N3, constants.NODED, "Self-fence") == []
    log = "\n".join(j["log"] for j in jobs)
    assert "fenced by its self-fence lease" in log
    assert f"leave {keep}: not tagged for failover (disabled)" in log
    assert _pnode(vc, keep) == N2
    for other in limited:
        assert f"leave {other}: relocation limit reached (1)" in log
    assert _offline(vc, N2) == "Y"
