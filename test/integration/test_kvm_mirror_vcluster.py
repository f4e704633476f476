"""Live migration of a ``file`` instance with its disks on a 2-node kvm virtual cluster.

``gnt-instance migrate --with-disks`` and ``gnt-node evacuate --with-disks``
through the real daemons and qemu (doc/kvm.md, "Migration with disks").
The guest is the ticking boot-sector guest (test/fakes/tickguest.py: it
dirties memory and prints a numbered tick every second), written over the
instance's disk with a marker block behind it.  After each move the ticks
go on from the last number seen on the source (the same guest, not a new
boot), the disk arrives byte for byte, the qemu on the source is gone, the
config names the new node for the instance and its disk, and the source's
files are gone.  A migration whose target
qemu is killed during the (throttled) disk copy must leave the instance
running on the source, the config unchanged and no file on the target.
Skips only when qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys

import guest_helpers
import pytest
from instance_helpers import NOCHECK, config_bytes, disk_files, rows, status_of
from vcluster_harness import VirtualCluster

from fakes import tickguest
from ganeti import constants, daemonctl, serializer
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from tools.harness import vcluster
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "mirror1.example.com"
MARKER = b"written before the migration\n" * 100


def _wait(predicate, what: str, timeout: float = 120.0):
    return guest_helpers.wait_for(predicate, what, timeout, poll=0.2)


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vmirror"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


def _hv(vc, node: str) -> KvmHypervisor:
    return KvmHypervisor(vc.paths(node))


def _pid(vc, node: str) -> int | None:
    return _hv(vc, node)._pid(INST)


def _ticks(vc, node: str) -> list[int]:
    try:
        with open(_hv(vc, node).serial_log(INST), "rb") as fh:
            return tickguest.ticks(fh.read())
    except FileNotFoundError:
        return []


def _assert_continues(vc, node: str, before: list[int]) -> None:
    """The guest on ``node`` ticks on from ``before`` (the same guest, not a new boot)."""
    after = _wait(lambda: (t := _ticks(vc, node)) and len(t) >= 2 and t, "ticks on " + node)
    assert before and after[0] > before[-1], (before, after)
    assert after == list(range(after[0], after[0] + len(after)))


def _digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _where(vc) -> tuple[str, list[list[str]]]:
    """(primary node, [disk nodes]) from the master's config file."""
    data = serializer.loads(config_bytes(vc))
    inst = next(i for i in data["instances"].values() if i["name"] == INST)
    names = {u: n["name"] for u, n in data["nodes"].items()}
    disks = [[names[u] for u in data["disks"][d]["nodes"]] for d in inst["disks"]]
    return names[inst["primary_node"]], disks


def test_add_a_running_file_instance_with_a_booting_guest(vc):
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=16M", "-o", "tinyos",
          "-B", "maxmem=128,minmem=128", "-n", N1, *NOCHECK, INST)
    vc.ok("gnt-instance", "shutdown", "--timeout", "0", INST)
    (disk,) = disk_files(vc, N1, INST)
    with open(disk, "r+b") as fh:
        fh.write(tickguest.boot_sector(fill_mib=16, dirty_kib=64))
        fh.seek(8 * 1024 * 1024)
        fh.write(MARKER)
    vc.ok("gnt-instance", "startup", INST)
    _wait(lambda: len(_ticks(vc, N1)) >= 2, "the guest ticking")


def test_migrate_without_with_disks_names_the_option(vc):
    res = vc.run("gnt-instance", "migrate", "-f", "-n", N2, INST)
    assert res.returncode != 0
    assert "--with-disks" in res.stdout + res.stderr


def test_migrate_with_disks_moves_the_running_instance_and_its_disk(vc):
    (src_disk,) = disk_files(vc, N1, INST)
    before = _digest(src_disk)
    src_pid = _pid(vc, N1)
    ticks = _ticks(vc, N1)
    out = vc.ok("gnt-instance", "migrate", "-f", "--with-disks", "-n", N2, INST)
    assert "disks in sync" in out
    _assert_continues(vc, N2, ticks)
    assert status_of(vc, INST) == "running"
    assert _where(vc) == (N2, [[N2]])
    assert rows(vc, "pnode", INST) == [[N2]]
    (dst_disk,) = disk_files(vc, N2, INST)
    assert _digest(dst_disk) == before
    assert disk_files(vc, N1, INST) == []                  # the source's file is removed
    assert _pid(vc, N1) is None and src_pid is not None
    pid = _pid(vc, N2)
    assert pid is not None
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        assert os.fsencode(dst_disk) in fh.read()
    assert _hv(vc, N2).qmp_command(INST, "query-status")["status"] == "running"
    assert _hv(vc, N2).qmp_command(INST, "query-block-exports") == []   # NBD stopped


def test_target_killed_during_the_copy_leaves_the_instance_on_the_source(vc):
    # 1 MiB/s: the 16 MiB copy takes long enough to kill the target meanwhile
    vc.ok("gnt-instance", "modify", "-H", "migration_bandwidth=1", INST)
    before = config_bytes(vc)
    (disk,) = disk_files(vc, N2, INST)
    digest = _digest(disk)
    pid = _pid(vc, N2)
    script = os.path.join(vcluster.REPO_ROOT, "scripts", "gnt-instance")
    proc = subprocess.Popen([sys.executable, script, "migrate", "-f", "--with-disks", "-n", N1,
                             INST], env=vc.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        target = _wait(lambda: _pid(vc, N1), "the incoming qemu on node1")
        # the copy shows as a throttled block mirror in the instance's runtime jobs
        cell = _wait(lambda: "opType=mirror" in (c := rows(vc, "name,hv_jobs", INST)[0][1]) and c,
                     "the mirror in hv_jobs")
        assert "jobType=block" in cell and "bandwidth=1" in cell
        os.kill(target, signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, out
    assert status_of(vc, INST) == "running"
    assert _where(vc) == (N2, [[N2]])
    assert _pid(vc, N2) == pid                              # the same qemu, still running
    seen = len(_ticks(vc, N2))
    _wait(lambda: len(_ticks(vc, N2)) > seen, "the guest ticking on the source")
    assert _hv(vc, N2).qmp_command(INST, "query-status")["status"] == "running"
    assert _hv(vc, N2).qmp_command(INST, "query-block-jobs") == []
    assert disk_files(vc, N1, INST) == []                   # the partial copy is removed
    assert _digest(disk) == digest
    assert config_bytes(vc) == before


def test_node_evacuate_with_disks_moves_the_file_instance(vc):
    vc.ok("gnt-instance", "modify", "-H", "migration_bandwidth=default", INST)
    res = vc.run("gnt-node", "evacuate", "-f", "-p", N2)
    assert res.returncode != 0 and "--with-disks" in res.stdout + res.stderr
    assert _where(vc) == (N2, [[N2]])
    (disk,) = disk_files(vc, N2, INST)
    digest = _digest(disk)
    ticks = _ticks(vc, N2)
    vc.ok("gnt-node", "evacuate", "-f", "-p", "--with-disks", N2)
    assert _where(vc) == (N1, [[N1]])
    _assert_continues(vc, N1, ticks)
    assert status_of(vc, INST) == "running"
    assert _pid(vc, N2) is None and _pid(vc, N1) is not None
    assert disk_files(vc, N2, INST) == []
    (new,) = disk_files(vc, N1, INST)
    assert _digest(new) == digest


def test_cleanup_after_the_master_died_during_the_copy(vc):
    """The master is killed mid-copy; ``--cleanup`` keeps the instance on the source."""
    vc.ok("gnt-instance", "modify", "-H", "migration_bandwidth=1", INST)
    before = config_bytes(vc)
    script = os.path.join(vcluster.REPO_ROOT, "scripts", "gnt-instance")
    proc = subprocess.Popen([sys.executable, script, "migrate", "-f", "--with-disks", "-n", N2,
                             INST], env=vc.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: _pid(vc, N2), "the incoming qemu on node2")
        _wait(lambda: os.path.exists(_hv(vc, N2).qmp_socket(INST)), "its QMP socket")
        _wait(lambda: _hv(vc, N1).qmp_command(INST, "query-block-jobs"), "the disk copy")
        os.kill(daemonctl.daemon_pid(vc.paths(N1), constants.MASTERD), signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    vcluster.start(vc.cluster, N1)
    _wait(lambda: vc.run("gnt-instance", "list", INST).returncode == 0, "the master back")
    assert disk_files(vc, N2, INST)                        # the half-done state
    ticks = _ticks(vc, N1)
    vc.ok("gnt-instance", "migrate", "--cleanup", "-f", "-n", N2, INST)
    assert _where(vc) == (N1, [[N1]])
    assert _pid(vc, N2) is None and disk_files(vc, N2, INST) == []
    assert _hv(vc, N1).qmp_command(INST, "query-block-jobs") == []
    _wait(lambda: len(_ticks(vc, N1)) > len(ticks), "the guest ticking on")
    assert status_of(vc, INST) == "running"
    assert config_bytes(vc) == before


def test_remove(vc):
    vc.ok("gnt-instance", "remove", "-f", "--shutdown-timeout", "0", INST)
    assert _pid(vc, N1) is None
    assert disk_files(vc, N1, INST) == [] and disk_files(vc, N2, INST) == []
