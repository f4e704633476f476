"""Disk mirroring for migration with local disks, on real qemu (ganeti/hypervisor/kvm/mirror.py).

Two "nodes" on one host: two kvm run dirs with their own disk files.  The
source runs the boot-sector guest (test/fakes/bootsector.py) on a disk
with random data; the target is an incoming qemu (``-incoming``, paused)
on an empty file of the same size, started here the way the target of a
migration is.  The mirror runs through the hypervisor's ``mirror_*``
methods over NBD on loopback; data written into the source disk while
the mirror runs (qemu-io through the monitor) must arrive too.  Then the
memory migrates, the mirrors complete, the NBD server stops and the
target resumes: its disk file must equal the source's byte for byte.  A
second test kills the target during the mirror: the mirror fails, the
abort leaves the source running on an untouched disk.  TCG throughout.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import time

import pytest

from fakes import bootsector
from ganeti import constants, errors, parameters, pathutils
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import cmdline
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from ganeti.utils import process
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

NAME = "mirror1.example.com"
SIZE = 32 * 1024 * 1024


def _wait(predicate, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spec(**hvp) -> base.InstanceSpec:
    params = parameters.defaults("hv", constants.HT_KVM)
    params.update(hvp)
    return base.InstanceSpec(name=NAME, memory=32, vcpus=1, hvparams=params)


def _digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _start_incoming(hv: KvmHypervisor, spec: base.InstanceSpec, disk: str, port: int) -> None:
    """The target side of a migration: qemu paused, waiting for the memory stream."""
    idir = hv.instance_dir(spec.name)
    os.makedirs(idir, exist_ok=True)
    files = cmdline.RuntimeFiles(pidfile="pid", qmp_socket="qmp.sock",
                                 serial_socket="serial.sock", serial_log="serial.log")
    argv = cmdline.build_command(spec, [disk], files, binary=hv.binary(spec.hvparams),
                                 accel=cmdline.ACCEL_TCG, incoming=f"tcp:127.0.0.1:{port}")
    with open(os.path.join(idir, "runtime.json"), "w") as fh:
        fh.write('{"name": "%s"}' % spec.name)
    result = process.run_command(argv, cwd=idir, timeout=60)
    assert not result.failed, result.stderr


@pytest.fixture
def nodes(tmp_path):
    hvs = []
    for node in ("src", "dst"):
        paths = pathutils.Paths(root=str(tmp_path / node))
        hvs.append(KvmHypervisor(paths, kvm_device=str(tmp_path / "no-kvm")))
    src_disk = bootsector.disk_image(str(tmp_path / "src.img"), size=SIZE)
    with open(src_disk, "r+b") as fh:
        fh.seek(1024 * 1024)
        fh.write(os.urandom(8 * 1024 * 1024))
    dst_disk = str(tmp_path / "dst.img")
    with open(dst_disk, "wb") as fh:
        fh.truncate(SIZE)
    yield hvs[0], hvs[1], src_disk, dst_disk
    for hv in hvs:
        for name in hv.list_instances():
            try:
                hv.stop_instance(name, force=True)
            except errors.HypervisorError:
                pass


def test_mirror_then_memory_gives_an_identical_disk(nodes):
    src, dst, src_disk, dst_disk = nodes
    spec = _spec()
    src.start_instance(spec, [src_disk])
    port = _free_port()
    _start_incoming(dst, spec, dst_disk, port)
    assert dst.qmp_command(NAME, "query-status")["status"] == "inmigrate"

    target = dst.mirror_accept(NAME, "127.0.0.1")
    assert target["exports"] == [{"device": "disk0", "size": SIZE}]
    assert src.mirror_start(spec, target) == ["disk0"]
    status = _wait(lambda: (s := src.mirror_status(NAME))["status"] != "active" and s,
                   "the mirror to be ready")
    assert status["status"] == "ready", status
    assert status["disks"][0]["end"] == SIZE
    # the default migration_bandwidth (32 MiB/s) is the job's speed
    assert status["disks"][0]["speed"] == 32 * 1024 * 1024

    # the guest "writes" while the mirror runs: this must reach the target too
    src.qmp_command(NAME, "human-monitor-command",
                    **{"command-line": 'qemu-io disk0 "write -P 0x5a 20M 64k"'})
    src.qmp_command(NAME, "migrate", uri=f"tcp:127.0.0.1:{port}")
    _wait(lambda: src.qmp_command(NAME, "query-migrate").get("status") == "completed",
          "the memory migration")
    src.mirror_finish(NAME, True)
    assert src.mirror_status(NAME)["disks"] == []          # the jobs are dismissed
    dst.mirror_release(NAME)
    assert dst.qmp_command(NAME, "query-block-exports") == []
    dst.qmp_command(NAME, "cont")
    assert dst.qmp_command(NAME, "query-status")["status"] == "running"

    with open(dst_disk, "rb") as fh:
        fh.seek(20 * 1024 * 1024)
        assert fh.read(65536) == b"\x5a" * 65536
    assert _digest(dst_disk) == _digest(src_disk)


def test_target_killed_during_the_mirror_leaves_the_source_running(nodes):
    src, dst, src_disk, dst_disk = nodes
    spec = _spec(migration_bandwidth=1)            # 1 MiB/s: still copying when killed
    src.start_instance(spec, [src_disk])
    before = _digest(src_disk)
    _start_incoming(dst, spec, dst_disk, _free_port())
    target = dst.mirror_accept(NAME, "127.0.0.1")
    src.mirror_start(spec, target)
    assert src.mirror_status(NAME)["status"] == "active"

    os.kill(dst._pid(NAME), signal.SIGKILL)
    status = _wait(lambda: (s := src.mirror_status(NAME))["status"] != "active" and s,
                   "the mirror to fail", timeout=30)
    assert status["status"] == "failed"
    assert "Input/output error" in status["info"]
    with pytest.raises(errors.HypervisorError, match="Cannot complete"):
        src.mirror_finish(NAME, True)                 # a failed mirror never "completes"
    src.mirror_finish(NAME, False)
    assert src.mirror_status(NAME)["disks"] == []
    assert src.qmp_command(NAME, "query-status")["status"] == "running"
    assert _digest(src_disk) == before
    dst.mirror_release(NAME)                          # qemu gone: nothing to do
