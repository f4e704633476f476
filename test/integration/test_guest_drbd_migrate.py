"""Migrating a writing kvm instance on ``drbd``: the session's guest cluster (doc/storage.md).

One kvm instance (128 MiB of memory, the least the default policy allows, 24
MiB of it filled so that a migration has something to send; a 64 MiB disk)
whose disk is a real DRBD 8.4 mirror between node2 and node3, running the disk-writing boot sector (test/fakes/diskwriter.py): it
writes numbered sectors without end and acknowledges each on its serial
port.  Its qemu runs under TCG inside the nodes (so the copy is made with the
guest paused: doc/kvm.md, "Migration").  Checked, with what the nodes
themselves show (the qemu's serial log, /proc/drbd, the sectors on
/dev/drbd<minor>):

* a live migration moves the running machine: the write counter goes on on
  the target from where the source stopped (no reboot), every acknowledged
  write is on the target's device, and the mirror is back to one primary,
  connected and in sync;
* a migration whose master daemon is killed (``kill -9``) while qemu copies
  the memory: the memory still arrives, the master is started again as the
  watcher would, and ``gnt-instance migrate --cleanup`` finishes it: the
  instance runs on exactly one node, the one the config names, the mirror
  has one primary again, the guest writes on and lost no acknowledged write;
* the mirror's net timeouts (``drbdsetup show``): while both sides are primary
  a 5 s ping timeout with a half-second socket check, DRBD's own again after.

The two tests share the instance (the second starts where the first left it);
about 6 minutes together on a loaded 2-core machine (TCG inside TCG).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest

from test.integration.drbd_writer import DrbdWriter
from test.integration.guest_helpers import wait_for
from test.integration.guest_cluster_harness import GuestClusterFixture

# the session's guest cluster may be made by the first test that asks (minutes under load)
pytestmark = pytest.mark.timeout(1200)

NAME = "drbdmig.vcluster"
_JOB_ID = re.compile(r"JobID: (\d+)")
_MASTERD_PID = "/var/run/ganeti/ganeti-masterd.pid"


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)


def _wait(predicate: Callable[[], object], what: str, timeout: float = 180.0) -> object:
    return wait_for(predicate, what, timeout, poll=0.5)


@pytest.fixture(scope="module")
def _module_writer(_guest_cluster_session: GuestClusterFixture) -> Iterator[DrbdWriter]:
    """The writing instance, made once for the module's tests (they go on from where
    the one before left it)."""
    gc = _guest_cluster_session.ensure_running()
    with gc.kvm_enabled():
        inst = DrbdWriter(gc, NAME)
        try:
            inst.create()
            inst.wait_acks("node2")
            yield inst
        finally:
            inst.remove()


@pytest.fixture
def writer(guest_cluster: GuestClusterFixture, _module_writer: DrbdWriter) -> DrbdWriter:
    assert _module_writer.gc is guest_cluster
    return _module_writer


def _single_primary(inst: DrbdWriter, primary: str) -> None:
    """The mirror back to one primary (``primary``), connected and in sync."""
    other = next(n for n in inst.nodes if n != primary)
    want = {primary: ("Connected", "Primary/Secondary", "UpToDate/UpToDate"),
            other: ("Connected", "Secondary/Primary", "UpToDate/UpToDate")}
    _wait(lambda: {n: inst.drbd(n) for n in inst.nodes} == want,
          f"one primary ({primary}) in sync", 120)


#: DRBD's own timeouts (tenths of a second): those of a single-primary connection
_DEFAULT_TIMEOUTS = {"ping-timeout": "5", "socket-check-timeout": "0"}
#: a migration's dual-primary connection: a stall of up to 5 s does not cost it, and it
#: is used after DRBD's usual half-second socket check (doc/storage.md, "DRBD figures")
_DUAL_PRIMARY_TIMEOUTS = {"ping-timeout": "50", "socket-check-timeout": "5"}


def _continues(before: list[int], after: list[int]) -> None:
    """The target's acknowledgements go on from the source's: the same machine.  The
    line being printed at the switch may be cut in two (its tail on the target)."""
    assert before and after, (before[-3:], after[:3])
    assert before == list(range(before[0], before[0] + len(before))), before[-5:]
    assert after == list(range(after[0], after[0] + len(after))), after[:5]
    assert before[-1] < after[0] <= before[-1] + 2, (before[-3:], after[:3])


def test_drbd_live_migration_under_writes_keeps_every_acknowledged_write(
        writer: DrbdWriter) -> None:
    inst, gc = writer, writer.gc
    assert inst.primary() == "node2" and inst.running_on() == ["node2"]
    _single_primary(inst, "node2")
    copier = inst.follow_serial("node2")
    out = _ok(gc.gnt("gnt-instance", "migrate", "-f", NAME))
    assert "dual-primary" in out and "single-primary" in out, out
    sent = re.search(r"memory sent: ([0-9.]+) MiB", out)
    assert sent and float(sent.group(1)) >= inst.fill_mib, out
    assert inst.primary() == "node3" and inst.running_on() == ["node3"]
    assert inst.qmp("node3", "query-status")["status"] == "running"
    _single_primary(inst, "node3")
    # one primary again: DRBD's own timeouts again on both sides
    assert {n: inst.net_timeouts(n) for n in inst.nodes} == \
        {n: _DEFAULT_TIMEOUTS for n in inst.nodes}
    before = inst.followed_acks("node2", copier)
    after = inst.wait_acks("node3")
    _continues(before, after)
    assert inst.lost("node3", before + after) == []


def _start_masterd(gc: GuestClusterFixture) -> None:
    """Start the master daemon on node1 as the watcher does after a crash
    (ganeti/watcher/master.py, ``ensure_masterd``)."""
    gc.python("node1", "import os, shlex; from ganeti import daemonctl, pathutils;"
                       " daemonctl.start_masterd(pathutils.Paths(), env=os.environ, extra_args="
                       "shlex.split(os.environ.get('GANETI_MASTERD_ARGS', '')))", timeout=300)


def test_drbd_migration_with_its_master_killed_is_finished_by_cleanup(
        writer: DrbdWriter) -> None:
    inst, gc = writer, writer.gc
    src, dst = "node3", "node2"
    assert inst.primary() == src
    # 1 MiB/s: the filled memory takes qemu half a minute, time to kill the master
    _ok(gc.gnt("gnt-instance", "modify", "-H", "migration_bandwidth=1", NAME))
    copier = inst.follow_serial(src)
    res = gc.gnt("gnt-instance", "migrate", "-f", "--submit", NAME)
    job = _JOB_ID.search(_ok(res) + res.stderr)
    assert job, res
    _wait(lambda: (st := inst.qmp(src, "query-migrate")).get("status") == "active"
          and st.get("ram", {}).get("transferred", 0) > 1 << 20, "qemu sending the memory")
    # the two primaries of the migration, only now (polled: under make test's load a
    # side may report its peer Unknown for a moment before DRBD reconnects them)
    _wait(lambda: inst.drbd(src)[1] == inst.drbd(dst)[1] == "Primary/Primary",
          "both sides Primary during the copy", 60)
    # the two primaries' connection waits 5 s for a ping's answer on both sides
    assert {n: inst.net_timeouts(n) for n in inst.nodes} == \
        {n: _DUAL_PRIMARY_TIMEOUTS for n in inst.nodes}
    res = gc.ssh("node1", f"kill -9 $(cat {_MASTERD_PID})")
    assert not res.failed, res.stderr
    # qemu goes on without the master: the memory arrives, the guest waits paused on
    # the target for a "cont" nobody sends, the source's qemu is done
    _wait(lambda: inst.qmp(src, "query-migrate").get("status") == "completed",
          "qemu's copy to complete", 300)
    assert inst.qmp(dst, "query-status")["status"] == "paused"
    assert inst.running_on() == [dst, src]
    # still connected, both primary: a side that stalled past DRBD's half-second ping
    # timeout once made its peer drop the connection here, and two primaries do not
    # connect again (split brain; doc/storage.md, "DRBD figures")
    state = inst.drbd(src)
    _start_masterd(gc)      # (before the check: the cluster's later tests need a master)
    assert state is not None and state[:2] == ("Connected", "Primary/Primary"), \
        f"{state}\n{inst.kernel_log(src)}\n{inst.kernel_log(dst)}"
    status = _ok(gc.gnt("gnt-job", "list", "--no-headers", "-o", "status", job.group(1)))
    assert status.strip() == "error", status
    assert inst.primary() == src            # the config still names the source

    out = _ok(gc.gnt("gnt-instance", "migrate", "--cleanup", "-f", NAME))
    assert f"runs on {dst}.vcluster: finishing the migration" in out, out
    assert inst.primary() == dst and inst.running_on() == [dst]
    assert inst.qmp(dst, "query-status")["status"] == "running"
    _single_primary(inst, dst)
    before = inst.followed_acks(src, copier)
    after = inst.wait_acks(dst)
    _continues(before, after)
    assert inst.lost(dst, before + after) == []
