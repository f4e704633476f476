"""The ``jobs`` runtime field on a 2-node kvm virtual cluster (real qemu): doc/progress.md.

A speed-limited qemu block job (``drive-mirror`` started through QMP on
the node) shows as a ``block`` runtime job in ``gnt-instance info`` and
the ``hv_jobs`` field, with its limit and a measured rate, and is gone
once qemu's job ended.  A live migration throttled by
``migration_bandwidth`` (the tick guest dirtying 128 MiB,
test/fakes/tickguest.py) shows as a ``migration`` job while it runs, and
its job log holds progress entries and one final entry.  Skips only when
qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import glob
import os
import re
import time

import guest_helpers
import pytest
import yaml
from failover_helpers import submit
from instance_helpers import NOCHECK, rows
from vcluster_harness import VirtualCluster

from fakes import tickguest
from ganeti import constants
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "kvmprog1.example.com"
MIG = "kvmprog2.example.com"


def _wait(predicate, what: str, timeout: float = 90.0):
    return guest_helpers.wait_for(predicate, what, timeout, poll=0.2)


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vkprog"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


def _hv_jobs(vc, name: str = INST) -> str:
    (row,) = rows(vc, "name,hv_jobs", name)
    return row[1]


def test_a_block_job_shows_in_info_and_hv_jobs(vc, tmp_path):
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=24M", "-o", "tinyos",
          "-n", N1, *NOCHECK, INST)
    assert _hv_jobs(vc) == ""
    (disk,) = glob.glob(os.path.join(vc.paths(N1).file_storage_dir, INST, "*disk0"))
    with open(disk, "r+b") as fh:       # data the mirror must really copy
        fh.seek(1 << 20)
        fh.write(os.urandom(20 << 20))
    hv = KvmHypervisor(vc.paths(N1))
    hv.qmp_command(INST, "drive-mirror", device="disk0", target=str(tmp_path / "copy.img"),
                   format="raw", sync="full", speed=1 << 20, mode="absolute-paths")
    try:
        cell = _hv_jobs(vc)
        assert "jobType=block" in cell and "opType=mirror" in cell and "bandwidth=1" in cell
        time.sleep(1.2)     # a second sample later: the rate is measured from two
        info = _wait(lambda: (out := vc.ok("gnt-instance", "info", INST))
                     and "MiB/s, eta" in out and out, "a measured rate")
        (running,) = yaml.safe_load(info)[0]["Running jobs"]
        assert running.startswith("block mirror disk/0: "), info
        assert "limit 1 MiB/s" in info
    finally:
        hv.qmp_command(INST, "block-job-cancel", device="disk0")
    _wait(lambda: _hv_jobs(vc) == "", "the block job to end")
    assert "Running jobs" not in vc.ok("gnt-instance", "info", INST)


def test_a_throttled_live_migration_shows_as_a_migration_job(vc):
    vc.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=8M", "-o", "tinyos",
          "-B", "maxmem=256,minmem=256", "-n", N1, *NOCHECK, MIG)
    vc.ok("gnt-instance", "shutdown", "--timeout", "0", MIG)
    (disk,) = glob.glob(os.path.join(vc.paths(N1).shared_file_storage_dir, MIG, "*disk0"))
    with open(disk, "r+b") as fh:
        fh.write(tickguest.boot_sector(fill_mib=128, dirty_kib=256))
    vc.ok("gnt-instance", "modify", "-H", "migration_bandwidth=8", MIG)
    vc.ok("gnt-instance", "startup", MIG)
    _wait(lambda: b"tick" in _serial(vc, N1), "the guest ticking")
    job, out = submit(vc, N1, "gnt-instance", "migrate", "-f", "-n", N2, MIG)
    assert job is not None, out
    cell = _wait(lambda: "jobType=migration" in (c := _hv_jobs(vc, MIG)) and "cur=0," not in c
                 and c, "the migration under way")
    assert "bandwidth=8" in cell
    info = _wait(lambda: "MiB/s, eta" in (out := vc.ok("gnt-instance", "info", MIG)) and out,
                 "the migration with a rate", timeout=60)
    (running,) = yaml.safe_load(info)[0]["Running jobs"]
    assert running.startswith("migration: ") and "limit 8 MiB/s" in running, info
    watch = vc.run("gnt-job", "watch", str(job), timeout=240)
    assert watch.returncode == 0, watch.stdout + watch.stderr
    lines = [line for line in watch.stdout.splitlines() if " migration: " in line]
    assert len(lines) >= 3 and "migration: done, " in lines[-1], watch.stdout
    assert sum("migration: done" in line for line in lines) == 1
    assert any(re.search(r"migration: [0-9.]+% \(.*MiB/s", line) for line in lines[:-1])
    assert rows(vc, "pnode,status", MIG) == [[N2, "running"]]
    assert _hv_jobs(vc, MIG) == ""
    assert "Running jobs" not in vc.ok("gnt-instance", "info", MIG)
    vc.ok("gnt-instance", "remove", "-f", "--shutdown-timeout", "0", MIG)


def _serial(vc, node: str) -> bytes:
    try:
        with open(KvmHypervisor(vc.paths(node)).serial_log(MIG), "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return b""
