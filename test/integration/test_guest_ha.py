"""Node loss recovery of ``drbd`` instances on the session's guest cluster (doc/ha.md).

The guests' out-of-band program (``tools/vcluster-guest-oob``, asking the
host's power server: doc/oob.md, "The guest clusters' program") is the nodes'
``oob_program``; node2, the primary of two ``drbd`` instances mirrored on
node3, loses its power (its qemu killed from the host: a dead machine).
The master (node1) declares it dead, fences it by an out-of-band power-off
(confirmed: the guest is off), and fails the tagged instance over to its
secondary; the untagged one stays down and is named in the report.  Then
node2 is powered on through ``gnt-node power on``, brought back online,
and the mirror reconnects with node2 as the secondary.  The cluster is
left as found: every node up and online, no instance, recovery off.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from ganeti import constants
from ganeti.hypervisor.base import HV_STATE_RUNNING
from test.integration import ha_helpers
from test.integration.guest_cluster_harness import GuestClusterFixture
from tools.harness import guestoob, guestvm

pytestmark = pytest.mark.timeout(1200)

N2, N3 = "node2.vcluster", "node3.vcluster"
FAILOVER = "ganeti:watcher:autorepair:failover"
HA, PLAIN = "ha1.vcluster", "plain1.vcluster"
#: seconds of silence before the master asks the candidates
TIMEOUT = 5
_PROC_LINE = re.compile(r"^\s*(\d+):\s+cs:(\S+)(?:\s+ro:(\S+)\s+ds:(\S+))?", re.M)


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)


def _add(gc: GuestClusterFixture, name: str, *extra: str) -> None:
    _ok(gc.gnt("gnt-instance", "add", "-t", "drbd", "-o", "tinyos", "--disk", "0:size=32m",
               "-n", f"{N2}:{N3}", "--no-name-check", "--no-ip-check", *extra, name))


def _running_on(gc: GuestClusterFixture, name: str, nodes: list[str]) -> list[str]:
    """The nodes among ``nodes`` whose fake hypervisor runs ``name`` (the machines'
    state, not the configuration); a powered-off node runs nothing."""
    found = []
    for node in nodes:
        if not guestvm.guest_running(gc.cluster.spec(gc.cluster.node(node))):
            continue
        res = gc.ssh(node, f"cat /var/run/ganeti/fake-hypervisor/{name}.json 2>/dev/null"
                           " || true")
        assert not res.failed, res.stderr
        if res.stdout.strip() and json.loads(res.stdout).get("state") == HV_STATE_RUNNING:
            found.append(node)
    return found


def _ha_jobs(gc: GuestClusterFixture) -> list[dict[str, Any]]:
    """Every job with an opcode whose reason trail has ``gnt:ha``: id, status, ops, log."""
    return ha_helpers.ha_jobs_of(gc.luxi())


def _list(gc: GuestClusterFixture, fields: str, name: str) -> list[str]:
    return _ok(gc.gnt("gnt-instance", "list", "--no-headers", "-o", fields, name)).split()


def _drbd_roles(gc: GuestClusterFixture, node: str) -> dict[int, tuple[str, str, str]]:
    res = gc.ssh(node, "cat /proc/drbd")
    assert not res.failed, res.stderr
    return {int(m): (cs, ro or "", ds or "") for m, cs, ro, ds in _PROC_LINE.findall(res.stdout)
            if cs != "Unconfigured"}


def test_a_powered_off_guest_node_its_tagged_instance_runs_on_its_secondary(
        guest_cluster: GuestClusterFixture) -> None:
    gc = guest_cluster
    before = _ok(gc.gnt("gnt-cluster", "info"))
    timeout_was = re.search(r"node loss timeout: (\d+)", before)
    assert timeout_was is not None, before
    powered_off = False
    try:
        _ok(gc.gnt("gnt-cluster", "modify", "--ha-recovery", "yes", "--ha-node-timeout",
                   str(TIMEOUT), "--node-parameters", f"oob_program={guestoob.SCRIPT}"))
        status = _ok(gc.gnt("gnt-node", "power", "status", N2))
        assert re.search(rf"{N2}\s+powered", status), status
        _add(gc, HA)
        _add(gc, PLAIN, "--no-wait-for-sync")   # never moved: its mirror need not be in sync
        _ok(gc.gnt("gnt-instance", "add-tags", HA, FAILOVER))
        nodes = [n.name for n in gc.cluster.nodes]
        assert _running_on(gc, HA, nodes) == [N2] and _running_on(gc, PLAIN, nodes) == [N2]
        known = {j["id"] for j in _ha_jobs(gc)}

        # node2 dies: its qemu is killed from the host
        killed = time.monotonic()
        _ok(gc.vcluster("stop", gc.directory, "node2"))
        powered_off = True
        twice = []
        deadline = killed + 300
        while time.monotonic() < deadline:
            where = _running_on(gc, HA, nodes)
            if len(where) > 1:
                twice.append(where)
            if where == [N3]:
                break
            time.sleep(1)
        elapsed = time.monotonic() - killed
        print(f"node power-off to the instance running on its secondary: {elapsed:.1f} s")
        assert _running_on(gc, HA, nodes) == [N3], _list(gc, "pnode,status", HA)
        assert twice == []
        assert _list(gc, "pnode,snodes", HA) == [N3, N2]
        assert _running_on(gc, PLAIN, nodes) == []
        assert _list(gc, "pnode", PLAIN) == [N2]
        assert _ok(gc.gnt("gnt-node", "list", "--no-headers", "-o", "offline", N2)).strip() \
            == "Y"
        # the failover job goes on after its instance started (it drops the fence record)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(
                j["status"] not in constants.JOBS_FINALIZED for j in _ha_jobs(gc)):
            time.sleep(1)
        jobs = [j for j in _ha_jobs(gc) if j["id"] not in known]
        assert jobs and all(j["status"] == constants.JOB_STATUS_SUCCESS for j in jobs), jobs
        fence = jobs[0]
        assert [op["OP_ID"] for op in fence["ops"]] == ["OP_NODE_HA_FENCE"]
        assert f"{N2} fenced by out-of-band power-off, confirmed at" in fence["log"]
        failovers = [op["instance_name"] for job in jobs for op in job["ops"]
                     if op["OP_ID"] == "OP_INSTANCE_FAILOVER"]
        assert failovers == [HA]
        report = "\n".join(j["log"] for j in jobs)
        assert f"leave {PLAIN}: not tagged for failover" in report, report
        with open(f"{gc.directory}/{guestoob.LOG_FILE}", encoding="utf-8") as fh:
            served = fh.read()
        assert f"power-off {N2}: " in served and '"status": 0' in served

        # node2 comes back through its OOB program, then online: a secondary again
        # (a boot under TCG beside a busy host can outlast the default 60 s)
        _ok(gc.gnt("gnt-node", "power", "on", "--oob-timeout", "300", N2))
        powered_off = False
        powered = _ok(gc.gnt("gnt-node", "list", "--no-headers", "-o", "powered", N2))
        assert powered.strip() == "Y", powered      # the state of record
        _ok(gc.gnt("gnt-node", "modify", "-O", "no", "--force", N2))
        _ok(gc.gnt("gnt-cluster", "verify-disks"))
        deadline = time.monotonic() + 180
        seen: dict[int, tuple[str, str, str]] = {}
        while time.monotonic() < deadline:
            seen = _drbd_roles(gc, "node2")
            if any(state == ("Connected", "Secondary/Primary", "UpToDate/UpToDate")
                   for state in seen.values()):
                break
            time.sleep(2)
        assert any(s[:2] == ("Connected", "Secondary/Primary") and s[2] == "UpToDate/UpToDate"
                   for s in seen.values()), seen
        assert _running_on(gc, HA, nodes) == [N3]
    finally:
        if powered_off:
            gc.vcluster("start", gc.directory, "node2")
            gc.gnt("gnt-node", "modify", "-O", "no", "--force", N2)
        for name in (HA, PLAIN):
            gc.gnt("gnt-instance", "remove", "-f", "--ignore-failures", name)
        gc.gnt("gnt-cluster", "modify", "--ha-recovery", "no", "--ha-node-timeout",
               timeout_was.group(1), "--node-parameters", "oob_program=")
    listed = _ok(gc.gnt("gnt-node", "list", "--no-headers", "-o", "name,offline"))
    assert all(line.split()[1] == "N" for line in listed.splitlines()), listed
