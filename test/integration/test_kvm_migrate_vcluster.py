"""Migration of kvm instances on a 2-node virtual cluster (real qemu over loopback).

A ``sharedfile`` instance of 256 MiB whose disk is overwritten with the
tick guest (test/fakes/tickguest.py: fills 128 MiB, keeps dirtying some and
prints a numbered tick every second).  In order: a live migration (the ticks
go on counting on the target: the same guest kept running), a non-live one
back, a failover (stop + start: the ticks start again at 1), a throttled
migration whose target qemu is killed (the job fails, the instance keeps
running on the source, ``--cleanup`` finds nothing left), and a throttled
non-live migration interrupted by both node daemons going away, after which
``--cleanup`` resumes the paused source and kills the incoming qemu.  Last,
a ``tinylinux`` instance (a real kernel) migrated live: no new boot on the
target, its uptime lines go on past the source's, its shell answers there.
Skips only when qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import glob
import os
import re
import signal

import guest_helpers
import pytest
from failover_helpers import submit
from instance_helpers import NOCHECK, rows
from vcluster_harness import SHORT_RPC_TIMEOUTS, VirtualCluster

from fakes import tickguest
from ganeti import constants, daemonctl
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from tools.harness import vcluster
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "kmig1.example.com"
FILL_MIB = 128


def _wait(predicate, what: str, timeout: float = 120.0):
    return guest_helpers.wait_for(predicate, what, timeout, poll=0.2)


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vkmig"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM,
                        masterd_args=SHORT_RPC_TIMEOUTS) as cluster:
        yield cluster


def _hv(vc, node: str) -> KvmHypervisor:
    return KvmHypervisor(vc.paths(node))


def _ticks(vc, node: str) -> list[int]:
    try:
        with open(_hv(vc, node).serial_log(INST), "rb") as fh:
            return tickguest.ticks(fh.read())
    except FileNotFoundError:
        return []


def _where(vc) -> list[str]:
    return [n for n in (N1, N2) if _hv(vc, n)._pid(INST) is not None]


def _qemu_status(vc, node: str) -> str:
    return _hv(vc, node).qmp_command(INST, "query-status")["status"]


def _assert_continues(vc, node: str, before: list[int]) -> None:
    """The guest on ``node`` ticks on from ``before`` (the same guest, not a new boot)."""
    after = _wait(lambda: (t := _ticks(vc, node)) and len(t) >= 2 and t, "ticks on " + node)
    assert before and after[0] > before[-1], (before, after)
    assert after == list(range(after[0], after[0] + len(after)))


def test_add_a_ticking_sharedfile_instance(vc):
    vc.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=8M", "-o", "tinyos",
          "-B", "maxmem=256,minmem=256", "-n", N1, *NOCHECK, INST)
    vc.ok("gnt-instance", "shutdown", "--timeout", "0", INST)
    (disk,) = glob.glob(os.path.join(vc.paths(N1).shared_file_storage_dir, INST, "*disk0"))
    with open(disk, "r+b") as fh:
        fh.write(tickguest.boot_sector(fill_mib=FILL_MIB, dirty_kib=256))
    vc.ok("gnt-instance", "startup", INST)
    _wait(lambda: len(_ticks(vc, N1)) >= 2, "the guest ticking")
    assert _where(vc) == [N1]


def test_live_migration_keeps_the_guest_running(vc):
    before = _ticks(vc, N1)
    out = vc.ok("gnt-instance", "migrate", "-f", "-n", N2, INST)
    # qemu's figures: at least the filled memory went, with a downtime
    # (under TCG, the default here, a live migration is copied paused: doc/kvm.md)
    sent = re.search(r"memory sent: ([0-9.]+) MiB in [0-9.]+ s, (downtime [0-9]+ ms|the guest"
                     r" was paused for the whole copy)", out)
    assert sent and float(sent.group(1)) >= FILL_MIB, out
    assert rows(vc, "pnode,status", INST) == [[N2, "running"]]
    assert _where(vc) == [N2] and _qemu_status(vc, N2) == "running"
    assert _hv(vc, N1).list_instances() == []
    assert _hv(vc, N2).migration_state(INST) is None
    _assert_continues(vc, N2, before)


def test_non_live_migration_back(vc):
    before = _wait(lambda: _ticks(vc, N2), "ticks on the source")
    vc.ok("gnt-instance", "migrate", "-f", "--non-live", "-n", N1, INST)
    assert rows(vc, "pnode,status", INST) == [[N1, "running"]]
    assert _where(vc) == [N1] and _qemu_status(vc, N1) == "running"
    _assert_continues(vc, N1, before)


def test_failover_restarts_the_guest_on_the_other_node(vc):
    vc.ok("gnt-instance", "failover", "-f", "--shutdown-timeout", "0", INST)
    assert rows(vc, "pnode,status", INST) == [[N2, "running"]]
    assert _where(vc) == [N2]
    ticks = _wait(lambda: _ticks(vc, N2), "ticks after the failover")
    assert ticks[0] == 1            # a new boot, not the old guest


def _throttled_migration(vc, *extra: str) -> int:
    """Submit a 1 MiB/s migration N2 -> N1; return the job id once bytes flow."""
    vc.ok("gnt-instance", "modify", "-H", "migration_bandwidth=1", INST)
    job, out = submit(vc, N1, "gnt-instance", "migrate", "-f", *extra, "-n", N1, INST)
    assert job is not None, out
    _wait(lambda: _hv(vc, N1).migration_state(INST) is not None
          and _hv(vc, N2).get_migration_status(INST).get("ram", {}).get("transferred", 0)
          > 1024 * 1024, "the transfer under way")
    return job


def _job_status(vc, job: int) -> str:
    vc.run("gnt-job", "wait", str(job), timeout=120)
    return vc.ok("gnt-job", "list", "--no-headers", "-o", "status", str(job)).strip()


def test_killed_target_fails_the_migration_and_cleanup_finds_it_running(vc):
    job = _throttled_migration(vc)
    os.kill(_hv(vc, N1)._pid(INST), signal.SIGKILL)
    assert _job_status(vc, job) == "error"
    assert rows(vc, "pnode,status", INST) == [[N2, "running"]]
    assert _where(vc) == [N2] and _qemu_status(vc, N2) == "running"
    assert not os.path.exists(_hv(vc, N1).instance_dir(INST))
    out = vc.ok("gnt-instance", "migrate", "-f", "--cleanup", INST)
    assert "nothing to clean up" in out
    seen = len(_ticks(vc, N2))
    _wait(lambda: len(_ticks(vc, N2)) > seen, "the guest ticking on")


def test_cleanup_resumes_the_paused_source_and_kills_the_incoming_qemu(vc):
    job = _throttled_migration(vc, "--non-live")
    assert _qemu_status(vc, N2) == "paused"
    for node in (N1, N2):          # the job loses both nodes mid-way
        daemonctl.stop_daemon(vc.paths(node), constants.NODED, timeout=10.0)
    try:
        assert _job_status(vc, job) == "error"
    finally:
        for node in (N1, N2):
            vcluster.start(vc.cluster, node)
    # left behind: the paused source, still sending, and the incoming qemu
    assert _where(vc) == [N1, N2] and _qemu_status(vc, N2) == "paused"
    assert _hv(vc, N1).migration_state(INST)["role"] == "target"
    out = _wait(lambda: (r := vc.run("gnt-instance", "migrate", "-f", "--cleanup", INST))
                .returncode == 0 and r.stdout, "the cleanup (node daemons back)", 60)
    assert "stays on " + N2 in out
    assert rows(vc, "pnode,status", INST) == [[N2, "running"]]
    assert _where(vc) == [N2] and _qemu_status(vc, N2) == "running"
    assert not os.path.exists(_hv(vc, N1).instance_dir(INST))
    assert _hv(vc, N2).migration_state(INST) is None
    seen = len(_ticks(vc, N2))
    _wait(lambda: len(_ticks(vc, N2)) > seen, "the guest ticking again")


def test_remove(vc):
    vc.ok("gnt-instance", "remove", "-f", "--shutdown-timeout", "0", INST)
    assert _where(vc) == []


LINUX = "kmig-linux.example.com"


def test_tinylinux_uptime_goes_on_across_a_live_migration(vc):
    vc.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=64M", "-o", "tinylinux",
          "-n", N1, *NOCHECK, LINUX)
    src_log = _hv(vc, N1).serial_log(LINUX)
    guest_helpers.wait_for_line(src_log, guest_helpers.BOOT_LINE)
    # up long enough that a new boot could not print a larger uptime at once
    guest_helpers.wait_for(lambda: (u := guest_helpers.uptimes(src_log)) and u[-1] >= 6.0,
                           "six seconds of uptime")
    before = guest_helpers.uptimes(src_log)
    vc.ok("gnt-instance", "migrate", "-f", "-n", N2, LINUX)
    dst_log = _hv(vc, N2).serial_log(LINUX)
    guest_helpers.wait_for_line(dst_log, guest_helpers.UPTIME_LINE, count=2)
    after = guest_helpers.uptimes(dst_log)
    # the same kernel goes on: no new boot, and its uptime carries on past the move
    assert guest_helpers.boot_count(dst_log) == 0
    assert after == sorted(after) and after[0] > before[-1], (before, after)
    with guest_helpers.SerialConsole(_hv(vc, N2).serial_socket(LINUX)) as con:
        assert con.run("echo still-here") == "still-here"
    assert rows(vc, "pnode,status", LINUX) == [[N2, "running"]]
    vc.ok("gnt-instance", "remove", "-f", LINUX)
