"""A real guest moves with its disk: ``migrate --with-disks`` of a tinylinux ``file`` instance.

On a 2-node kvm virtual cluster (tools/vcluster create --hypervisor kvm),
a ``tinylinux`` instance on a ``file`` disk (doc/kvm.md, "The tinylinux
guest") keeps a file in its memory (``/tmp``) and writes a block to its
disk before the migration, and a second block *while* the disk copy runs
(throttled by ``migration_bandwidth``).  After ``gnt-instance migrate
--with-disks`` the guest on the target is the same one: its uptime lines
go on from the source's (no new boot), the file in its memory is there,
and it reads both blocks from its disk, which the target's disk file holds
too (doc/kvm.md, "Migration with disks").  Skips only when
qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from guest_helpers import BOOT_LINE, SerialConsole, boot_count, uptimes, wait_for, wait_for_line
from instance_helpers import NOCHECK, disk_files, rows, status_of
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from tools.harness import vcluster
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "mirror-guest.example.com"
#: sectors of the 64 MiB disk the guest writes raw (past the FAT's used part)
BEFORE_SECTOR, DURING_SECTOR = 120000, 125000
BEFORE, DURING = "block-written-before", "block-written-during-the-copy"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vmguest"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


def _hv(vc, node: str) -> KvmHypervisor:
    return KvmHypervisor(vc.paths(node))


def _write_block(con: SerialConsole, sector: int, text: str) -> None:
    con.run(f"echo {text} | dd of=/dev/vda bs=512 seek={sector} conv=notrunc 2>/dev/null;"
            " sync")


def _read_block(con: SerialConsole, sector: int, length: int) -> str:
    return con.run(f"dd if=/dev/vda bs=512 skip={sector} count=1 2>/dev/null"
                   f" | head -c {length}")


def _host_block(path: str, sector: int, length: int) -> str:
    with open(path, "rb") as fh:
        fh.seek(sector * 512)
        return fh.read(length).decode(errors="replace")


def test_a_tinylinux_guest_moves_with_its_disk_and_memory(vc):
    vc.ok("gnt-instance", "add", "-t", "file", "-s", "64M", "-o", "tinylinux", "-n", N1,
          *NOCHECK, INST)
    src_log = _hv(vc, N1).serial_log(INST)
    wait_for_line(src_log, BOOT_LINE)
    with SerialConsole(_hv(vc, N1).serial_socket(INST)) as con:
        con.run("echo kept-in-memory > /tmp/before")
        _write_block(con, BEFORE_SECTOR, BEFORE)
    # a throttled copy, so that the guest can write while it runs
    vc.ok("gnt-instance", "modify", "-H", "migration_bandwidth=4", INST)
    script = os.path.join(vcluster.REPO_ROOT, "scripts", "gnt-instance")
    proc = subprocess.Popen([sys.executable, script, "migrate", "-f", "--with-disks", "-n", N2,
                             INST], env=vc.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: "opType=mirror" in rows(vc, "name,hv_jobs", INST)[0][1],
                 "the disk copy running")
        with SerialConsole(_hv(vc, N1).serial_socket(INST)) as con:
            _write_block(con, DURING_SECTOR, DURING)
        before = uptimes(src_log)
        out, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert rows(vc, "pnode", INST) == [[N2]] and status_of(vc, INST) == "running"
    assert disk_files(vc, N1, INST) == []
    dst_log = _hv(vc, N2).serial_log(INST)
    after = wait_for(lambda: (u := uptimes(dst_log)) and u, "uptime lines on node2")
    assert after[0] > before[-1] and boot_count(dst_log) == 0    # the same guest, no boot
    with SerialConsole(_hv(vc, N2).serial_socket(INST)) as con:
        assert con.run("cat /tmp/before") == "kept-in-memory"
        assert _read_block(con, BEFORE_SECTOR, len(BEFORE)) == BEFORE
        assert _read_block(con, DURING_SECTOR, len(DURING)) == DURING
    (disk,) = disk_files(vc, N2, INST)
    assert _host_block(disk, BEFORE_SECTOR, len(BEFORE)) == BEFORE
    assert _host_block(disk, DURING_SECTOR, len(DURING)) == DURING


def test_remove(vc):
    vc.ok("gnt-instance", "remove", "-f", INST)
    assert disk_files(vc, N1, INST) == [] and disk_files(vc, N2, INST) == []
