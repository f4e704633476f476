"""A kvm instance on ``drbd`` that keeps writing, on a guest cluster (doc/storage.md).

Shared by test/integration/test_guest_drbd_migrate.py and
tools/bench/bench_drbd_migrate.py.  The instance's disk holds the disk-writing
boot sector (test/fakes/diskwriter.py): write k goes to sector k of the disk
and ``wrote k`` on the serial port acknowledges it.  Its qemu runs under TCG
inside the nodes (doc/vcluster.md, "Guest clusters"); the serial log of the
qemu on each node, the mirror's state in /proc/drbd and the sectors on the
DRBD device are read inside the nodes.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import time
from typing import TYPE_CHECKING, Any

from ganeti import constants, pathutils
from ganeti.hypervisor.kvm import rundir
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from fakes import diskwriter

if TYPE_CHECKING:       # (imported at run time by its users: the tests, tools/bench)
    from guest_cluster_harness import GuestClusterFixture

__all__ = ["DrbdWriter", "PROC_LINE"]

PROC_LINE = re.compile(r"^\s*(\d+):\s+cs:(\S+)(?:\s+ro:(\S+)\s+ds:(\S+))?", re.M)
_INFO_MINOR = re.compile(r"(node\d)\.\S*, minor=(\d+)")


class DrbdWriter:
    """The writing instance ``name`` of a guest cluster, mirrored on ``nodes``."""

    def __init__(self, gc: GuestClusterFixture, name: str,
                 nodes: tuple[str, str] = ("node2", "node3"), *, memory_mib: int = 128,
                 fill_mib: int = 24, disk: str = "64m") -> None:
        self.gc = gc
        self.name = name
        self.nodes = nodes
        self.memory_mib = memory_mib
        self.fill_mib = fill_mib
        self.disk = disk
        self.minors: dict[str, int] = {}

    # --- set-up ----------------------------------------------------------------------------
    def create(self) -> str:
        """Add the instance stopped, put the writer on its disk, start it; the add's output."""
        gc = self.gc
        res = gc.gnt("gnt-instance", "add", "-t", "drbd", "-o", "tinyos", "--disk",
                     f"0:size={self.disk}", "-n", ":".join(f"{n}.vcluster" for n in self.nodes),
                     "-H", constants.HT_KVM, "-B", f"memory={self.memory_mib}",
                     "--no-start", "--no-name-check", "--no-ip-check", self.name)
        _ok(res)
        _ok(gc.gnt("gnt-instance", "activate-disks", self.name))
        self.minors = self._disk_minors()
        sector = base64.b64encode(diskwriter.boot_sector(fill_mib=self.fill_mib)).decode()
        written = gc.ssh(self.nodes[0], f"echo {sector} | base64 -d | dd of=/dev/drbd"
                                        f"{self.minors[self.nodes[0]]} bs=512 count=1"
                                        " oflag=direct conv=fsync 2>&1")
        assert not written.failed, written.stdout + written.stderr
        _ok(gc.gnt("gnt-instance", "deactivate-disks", self.name))
        _ok(gc.gnt("gnt-instance", "startup", self.name))
        return str(res.stdout)

    def remove(self) -> None:
        self.gc.gnt("gnt-instance", "remove", "-f", "--shutdown-timeout=0", self.name)

    def _disk_minors(self) -> dict[str, int]:
        info = _ok(self.gc.gnt("gnt-instance", "info", self.name))
        found = {node: int(minor) for node, minor in _INFO_MINOR.findall(info)}
        assert set(found) == set(self.nodes), info
        return found

    # --- what the nodes see ----------------------------------------------------------------
    def primary(self) -> str:
        """The primary node in the config (short name)."""
        out = _ok(self.gc.gnt("gnt-instance", "list", "--no-headers", "-o", "pnode",
                              self.name))
        return out.strip().split(".")[0]

    def running_on(self) -> list[str]:
        """The nodes where a qemu of the instance runs (its pid file's process alive)."""
        pidfile = os.path.join(self._rundir, rundir.PIDFILE)
        return [n for n in self.nodes
                if self.gc.ssh(n, f"kill -0 $(cat {pidfile} 2>/dev/null) 2>/dev/null"
                                  " && echo yes || true").stdout.strip() == "yes"]

    def drbd(self, node: str) -> tuple[str, str, str] | None:
        """(connection state, roles, disk states) of the disk's minor on ``node``."""
        res = self.gc.ssh(node, "cat /proc/drbd")
        assert not res.failed, res.stderr
        for minor, cs, ro, ds in PROC_LINE.findall(res.stdout):
            if int(minor) == self.minors[node] and cs != "Unconfigured":
                return cs, ro or "", ds or ""
        return None

    def kernel_log(self, node: str, lines: int = 40) -> str:
        """The last DRBD lines of ``node``'s kernel log about the disk's minor (why DRBD
        dropped a connection: "PingAck did not arrive in time", a ``disconnect``, a split
        brain) and its ``drbdsetup show`` net options, the secret cut; for messages."""
        minor = self.minors[node]
        res = self.gc.ssh(node, f"dmesg | grep -E 'drbd{minor}:|resource{minor}:'"
                                f" | tail -n {lines}; /lib/drbd/drbdsetup-84 show {minor}"
                                " | grep -v shared-secret")
        return f"--- {node} ---\n{res.stdout}{res.stderr}"

    def net_timeouts(self, node: str) -> dict[str, str]:
        """The mirror's ``ping-timeout`` and ``socket-check-timeout`` on ``node`` (tenths
        of a second, defaults included), as ``drbdsetup show --show-defaults`` prints
        them; {} when the minor is not set up."""
        res = self.gc.ssh(node, f"/lib/drbd/drbdsetup-84 show --show-defaults"
                                f" {self.minors[node]} | grep -E"
                                " '^[[:space:]]*(ping-timeout|socket-check-timeout)[[:space:]]'")
        return dict(line.split(";")[0].split() for line in res.stdout.splitlines()
                    if line.strip())

    @property
    def _rundir(self) -> str:
        """The instance's directory of the kvm hypervisor on the nodes (which use the
        standard paths, as this process does)."""
        return os.path.dirname(self.serial_log)

    @property
    def serial_log(self) -> str:
        """The instance's serial log on the node running its qemu (the nodes use the
        standard paths, as this process does)."""
        return KvmHypervisor(pathutils.Paths()).serial_log(self.name)

    def serial(self, node: str) -> bytes:
        """The serial log of the instance's qemu on ``node`` (b"" when none)."""
        res = self.gc.ssh(node, f"cat {self.serial_log} 2>/dev/null | base64 -w0")
        assert not res.failed, res.stderr
        return base64.b64decode(res.stdout.strip())

    def follow_serial(self, node: str) -> int:
        """Copy the serial log of the qemu on ``node`` to a file there until that qemu
        exits (its log goes with it after a migration); the copier's pid."""
        pidfile = os.path.join(self._rundir, rundir.PIDFILE)
        res = self.gc.ssh(node, f"nohup tail -c +1 -f --pid=$(cat {pidfile})"
                                f" {self.serial_log} > /tmp/{self.name}.followed"
                                " 2>/dev/null < /dev/null & echo $!")
        assert not res.failed, res.stderr
        return int(res.stdout.split()[-1])

    def followed_acks(self, node: str, copier: int) -> list[int]:
        """The writes acknowledged on ``node`` until its qemu exited (see
        :meth:`follow_serial`, ``copier`` its answer), once the copier is done."""
        res = self.gc.ssh(node, f"while kill -0 {copier} 2>/dev/null; do sleep 0.2; done;"
                                f" base64 -w0 /tmp/{self.name}.followed")
        assert not res.failed, res.stderr
        return diskwriter.acks(base64.b64decode(res.stdout.strip()))

    def acks(self, node: str) -> list[int]:
        """The writes acknowledged on ``node``'s serial log."""
        return diskwriter.acks(self.serial(node))

    def wait_acks(self, node: str, more_than: int = 0, timeout: float = 180.0) -> list[int]:
        """Until ``node``'s serial log acknowledges a write beyond ``more_than``."""
        deadline = time.monotonic() + timeout
        while True:
            acked = self.acks(node)
            if acked and acked[-1] > more_than:
                return acked
            if time.monotonic() > deadline:
                raise AssertionError(f"no write past {more_than} acknowledged on {node}"
                                     f" in {timeout:.0f}s: {acked[-3:]}")
            time.sleep(0.5)

    def on_disk(self, node: str, upto: int) -> list[int]:
        """:func:`diskwriter.records` of sectors 1..``upto`` of the DRBD device on ``node``,
        read past the node's page cache (``O_DIRECT``), as its qemu writes them: a page
        the node cached earlier misses what reached the device over the mirror since."""
        res = self.gc.ssh(node, f"dd if=/dev/drbd{self.minors[node]} bs=64k"
                                " iflag=direct,skip_bytes,count_bytes"
                                f" skip=512 count={upto * 512}"
                                " 2>/dev/null | base64 -w0")
        assert not res.failed, res.stderr
        return diskwriter.records(base64.b64decode(res.stdout.strip()))

    def lost(self, node: str, acked: list[int]) -> list[int]:
        """The acknowledged writes missing from the device on ``node``."""
        upto = min(max(acked), diskwriter.SPAN)
        return diskwriter.lost(acked, self.on_disk(node, upto))

    def qmp(self, node: str, command: str) -> dict[str, Any]:
        """The answer to QMP ``command`` of the instance's qemu on ``node`` ({} when none
        came), through socat: cheaper inside a TCG node than a Python start."""
        sock = os.path.join(self._rundir, rundir.QMP_SOCKET)
        request = json.dumps({"execute": "qmp_capabilities"}) + "\n" + \
            json.dumps({"execute": command}) + "\n"
        res = self.gc.ssh(node, f"printf '%s' {shlex.quote(request)} |"
                                f" socat -t 1 - UNIX-CONNECT:{sock}")
        answers = [json.loads(line) for line in res.stdout.splitlines()
                   if line.startswith("{")]
        returns = [a["return"] for a in answers if "return" in a]
        return returns[-1] if len(returns) == 2 and isinstance(returns[-1], dict) else {}


def _ok(res: Any) -> str:
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)
