#!/usr/bin/env python3
"""Live migration of a kvm instance with a local 1 GiB disk (doc/kvm.md, "Migration with disks").

Two "nodes" on this machine (two kvm run dirs and disk files, loopback):
the source runs the boot-sector guest (test/fakes/bootsector.py) on a
1 GiB raw file written full of data (not sparse, so every byte travels);
the target is an incoming qemu on an empty 1 GiB file.  The steps are the
node side of ``gnt-instance migrate --with-disks``, through the kvm
hypervisor's ``mirror_*`` methods: NBD export on the target, one
drive-mirror per disk until ready, the memory migration (QMP ``migrate``),
the mirror completion, the NBD stop and the resume on the target.

Printed per ``migration_bandwidth`` (the speed of the mirror and of the
memory stream; 32 MiB/s is upstream's default): the total time, the
mirror time (start to every disk ready), the memory migration time, and
the downtime: qemu's own (source stopped to memory migrated) plus our
switch-over (mirror completion, NBD stop, resume), during which the guest
runs nowhere.  The target file is compared with the source afterwards.
TCG; ``BENCH_BANDWIDTHS=32,1024`` chooses the speeds (MiB/s).

Run: ``.venv/bin/python tools/bench/bench_kvm_mirror.py`` (about 60 s).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test"))

from fakes import bootsector  # noqa: E402

from ganeti import constants, errors, parameters, pathutils  # noqa: E402
from ganeti.hypervisor import base  # noqa: E402
from ganeti.hypervisor.kvm import cmdline  # noqa: E402
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor  # noqa: E402
from ganeti.utils import process  # noqa: E402

NAME = "bench-mirror.example.com"
SIZE = 1024 * 1024 * 1024
CHUNK = 8 * 1024 * 1024


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _digest(path: str) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            sha.update(block)
    return sha.hexdigest()


def _make_disks(tmp: str) -> tuple[str, str]:
    src = bootsector.disk_image(os.path.join(tmp, "src.img"), size=SIZE)
    pattern = os.urandom(CHUNK)
    with open(src, "r+b") as fh:
        fh.seek(CHUNK)
        for _ in range(1, SIZE // CHUNK):
            fh.write(pattern)
    dst = os.path.join(tmp, "dst.img")
    with open(dst, "wb") as fh:
        fh.truncate(SIZE)
    return src, dst


def _start_incoming(hv: KvmHypervisor, spec: base.InstanceSpec, disk: str, port: int) -> None:
    idir = hv.instance_dir(spec.name)
    os.makedirs(idir, exist_ok=True)
    files = cmdline.RuntimeFiles(pidfile="pid", qmp_socket="qmp.sock",
                                 serial_socket="serial.sock", serial_log="serial.log")
    argv = cmdline.build_command(spec, [disk], files, binary=hv.binary(spec.hvparams),
                                 accel=cmdline.ACCEL_TCG, incoming=f"tcp:127.0.0.1:{port}")
    with open(os.path.join(idir, "runtime.json"), "w") as fh:
        fh.write('{"name": "%s"}' % spec.name)
    result = process.run_command(argv, cwd=idir, timeout=60)
    if result.failed:
        raise errors.HypervisorError(result.stderr)


def _wait(predicate, what: str, timeout: float, poll: float = 0.01):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise errors.GanetiError(f"timed out waiting for {what}")
        time.sleep(poll)


def run_once(tmp: str, bandwidth: int) -> dict[str, float]:
    src_disk, dst_disk = _make_disks(tmp)
    hvp = parameters.defaults("hv", constants.HT_KVM)
    hvp["migration_bandwidth"] = bandwidth
    spec = base.InstanceSpec(name=NAME, memory=64, vcpus=1, hvparams=hvp)
    src = KvmHypervisor(pathutils.Paths(root=os.path.join(tmp, "src")),
                        kvm_device=os.path.join(tmp, "no-kvm"))
    dst = KvmHypervisor(pathutils.Paths(root=os.path.join(tmp, "dst")),
                        kvm_device=os.path.join(tmp, "no-kvm"))
    try:
        src.start_instance(spec, [src_disk])
        port = _free_port()
        _start_incoming(dst, spec, dst_disk, port)
        params = cmdline.migration_parameters(hvp)
        t0 = time.monotonic()
        target = dst.mirror_accept(NAME, "127.0.0.1")
        src.mirror_start(spec, target)
        _wait(lambda: src.mirror_status(NAME)["status"] == "ready", "the mirror", 600, 0.05)
        t_ready = time.monotonic()
        src.qmp_command(NAME, "migrate-set-parameters", **params)
        src.qmp_command(NAME, "migrate", uri=f"tcp:127.0.0.1:{port}")
        info = _wait(lambda: (m := src.qmp_command(NAME, "query-migrate"))
                     .get("status") in ("completed", "failed") and m, "the memory", 600)
        t_mem = time.monotonic()
        if info["status"] != "completed":
            raise errors.GanetiError(f"memory migration failed: {info}")
        src.mirror_finish(NAME, True)
        dst.mirror_release(NAME)
        dst.qmp_command(NAME, "cont")
        t_run = time.monotonic()
        same = _digest(src_disk) == _digest(dst_disk)
        if not same:
            raise errors.GanetiError("the target disk differs from the source")
        return {"total": t_run - t0, "mirror": t_ready - t0, "memory": t_mem - t_ready,
                "qemu_downtime": float(info.get("downtime", 0)) / 1000.0,
                "switch": t_run - t_mem}
    finally:
        for hv in (src, dst):
            for name in hv.list_instances():
                try:
                    hv.stop_instance(name, force=True)
                except errors.HypervisorError:
                    pass


def main() -> int:
    speeds = [int(s) for s in os.environ.get("BENCH_BANDWIDTHS", "32,1024").split(",") if s]
    print(f"kvm live migration with a local {SIZE >> 20} MiB disk (full of data), TCG,"
          f" loopback; load average {os.getloadavg()[0]:.1f}")
    for speed in speeds:
        tmp = tempfile.mkdtemp(prefix="bench-kvm-mirror-")
        try:
            r = run_once(tmp, speed)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        down = r["qemu_downtime"] + r["switch"]
        print(f"migration_bandwidth {speed:5d} MiB/s: total {r['total']:6.2f} s,"
              f" mirror {r['mirror']:6.2f} s ({SIZE / 2**20 / r['mirror']:6.1f} MiB/s),"
              f" memory {r['memory']:5.2f} s, downtime {down * 1000:6.0f} ms"
              f" (qemu {r['qemu_downtime'] * 1000:.0f} ms + switch-over"
              f" {r['switch'] * 1000:.0f} ms); target disk identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
