"""The disk-writing boot sector (test/fakes/diskwriter.py) on the host's qemu.

The guest's acknowledgements (``wrote k`` on COM1) are what the drbd
migration tests count as acknowledged writes, so here it is checked
against a plain raw file: boot it under TCG, let it write past a small wrap
span, kill qemu as a crash would, and every acknowledged write is on the
disk (the file's page cache holds what qemu wrote, killed or not).  On
virtio-blk (the kvm hypervisor's default disk type) and on IDE.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess

import guest_helpers
import pytest

from fakes import diskwriter
from test.integration import host_helpers

_QEMU = host_helpers.qemu_reason()
SPAN = 64
FILL_MIB = 2


def _monitor(path: str, command: str) -> str:
    """What qemu's human monitor on the unix socket ``path`` answers to ``command``."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(command.encode() + b"\nquit\n")
        out = b""
        while chunk := sock.recv(4096):
            out += chunk
    return out.decode(errors="replace")


def test_the_sector_of_a_write_and_what_counts_as_lost() -> None:
    assert [diskwriter.sector(k, 4) for k in (1, 2, 4, 5, 8, 9)] == [1, 2, 4, 1, 4, 1]
    sector = diskwriter.boot_sector()
    assert len(sector) == 512 and sector.endswith(b"\x55\xaa")
    # sectors 1..4 with span 4: write 5 overwrote write 1; sector 3 never written
    disk = b"".join((diskwriter.MAGIC + k.to_bytes(4, "little")) * 64
                    for k in (5, 2, 0, 4))
    disk = disk[:1024] + b"\0" * 512 + disk[1536:]
    on_disk = diskwriter.records(disk)
    assert on_disk == [5, 2, 0, 4]
    assert diskwriter.lost([1, 2, 4, 5], on_disk, 4) == []
    assert diskwriter.lost([3], on_disk, 4) == [3]
    assert diskwriter.lost([6], on_disk, 4) == [6]     # acknowledged, yet write 2 is there
    torn = disk[:8] * 32 + b"\0" * 256 + disk[512:]
    assert diskwriter.records(torn)[0] == 0
    assert diskwriter.acks(b"wrote 0000000A\r\nwrote 0000000B\r\nwrote 0000") == [10, 11]


@pytest.mark.skipif(bool(_QEMU), reason=_QEMU or "qemu runs")
@pytest.mark.parametrize("interface", ["virtio", "ide"])
def test_every_acknowledged_write_is_on_the_disk(tmp_path, interface: str) -> None:
    disk = diskwriter.disk_image(str(tmp_path / "disk"), size=1024 * 1024, span=SPAN,
                                 fill_mib=FILL_MIB)
    log = tmp_path / "serial"
    monitor = str(tmp_path / "monitor")
    proc = subprocess.Popen(
        ["qemu-system-x86_64", "-machine", "accel=tcg", "-m", "16", "-display", "none",
         "-nodefaults", "-no-reboot", "-serial", f"file:{log}",
         "-monitor", f"unix:{monitor},server=on,wait=off",
         "-drive", f"file={disk},format=raw,if={interface}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def acked() -> list[int]:
            return diskwriter.acks(log.read_bytes()) if log.exists() else []

        # past the span: the writes wrapped and overwrote the first ones
        guest_helpers.wait_for(lambda: len(acked()) > 2 * SPAN, "writes past the span", 120)
        # before its first write the guest filled FILL_MIB MiB from 1 MiB up, no more
        end = 0x100000 + FILL_MIB * 0x100000
        seen = _monitor(monitor, f"xp /1wx 0x100000\nxp /1wx {end - 4:#x}\nxp /1wx {end:#x}")
        assert seen.count("0xa5a55a5a") == 2 and f"{end:016x}: 0x00000000" in seen, seen
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    done = acked()
    assert done == list(range(1, len(done) + 1))
    with open(disk, "rb") as fh:
        data = fh.read()
    assert data[:512] == diskwriter.boot_sector(SPAN, FILL_MIB)
    on_disk = diskwriter.records(data[512:512 * (SPAN + 1)])
    assert diskwriter.lost(done, on_disk, SPAN) == []
    # what the sectors hold: the newest write of each, at most one beyond the last ack
    newest = {diskwriter.sector(k, SPAN): k for k in range(1, done[-1] + 2)}
    for slot, k in enumerate(on_disk, start=1):
        assert k in (newest[slot], newest[slot] - SPAN), (slot, k, done[-1])
    assert b"fail" not in log.read_bytes()
