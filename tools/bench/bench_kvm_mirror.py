#!/usr/bin/env python3
"""Live migration of a kvm instance with a local 1 GiB disk (doc/kvm.md, "Migration with disks").

1. The node steps, timed one by one.  Two "nodes" on this machine (two kvm
   run dirs and disk files, loopback): the source runs the boot-sector
   guest (test/fakes/bootsector.py) on a 1 GiB raw file written full of
   data (not sparse, so every byte travels); the target accepts it
   (``accept_instance``) on an empty 1 GiB file.  Then the node side of
   ``gnt-instance migrate --with-disks``: NBD export on the target, one
   drive-mirror per disk until ready, the memory (``migrate_instance``),
   the mirror completion, the NBD stop and the resume
   (``finalize_migration_dst``).  Printed per ``migration_bandwidth`` (the
   speed of the mirror and of the memory stream; 32 MiB/s is upstream's
   default): the total time, the mirror time (start to every disk
   ready), the memory time, and the downtime: qemu's own (source stopped
   to memory migrated) plus our switch-over (mirror completion, NBD stop,
   resume), during which the guest runs nowhere.  The target file is
   compared with the source afterwards.  ``BENCH_BANDWIDTHS=32,1024``
   chooses the speeds (MiB/s).
2. The command: on a 2-node kvm virtual cluster, a ``file`` instance with
   a 1 GiB disk full of data running the tick guest
   (test/fakes/tickguest.py) is moved with ``gnt-instance migrate
   --with-disks`` at the default bandwidth: the wall time of the command
   and qemu's downtime from its ``memory sent:`` line.  ``BENCH_CLUSTER=0``
   skips it.

TCG in part 1; figures only, no assertion on time.  Skipped with a
message when qemu cannot run.

Run: ``.venv/bin/python tools/bench/bench_kvm_mirror.py`` (about 90 s).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test"))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import host_helpers  # noqa: E402
from guest_helpers import wait_for  # noqa: E402
from fakes import bootsector, tickguest  # noqa: E402

from ganeti import constants, errors, parameters, pathutils  # noqa: E402
from ganeti.hypervisor import base  # noqa: E402
from ganeti.hypervisor.kvm.hypervisor import KVM_DEVICE, KvmHypervisor  # noqa: E402
from tools.harness import vcluster  # noqa: E402

NAME = "bench-mirror.example.com"
SIZE = 1024 * 1024 * 1024
#: "auto": KVM where /dev/kvm works; "tcg" copies the memory paused (doc/kvm.md)
ACCEL = os.environ.get("GANETI_BENCH_KVM_ACCEL", "auto")
CHUNK = 8 * 1024 * 1024


def _digest(path: str) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            sha.update(block)
    return sha.hexdigest()


def _fill(path: str) -> None:
    """Write data over all but the first chunk (the boot sector) of ``path``."""
    pattern = os.urandom(CHUNK)
    with open(path, "r+b") as fh:
        fh.seek(CHUNK)
        for _ in range(1, SIZE // CHUNK):
            fh.write(pattern)


def _make_disks(tmp: str) -> tuple[str, str]:
    src = bootsector.disk_image(os.path.join(tmp, "src.img"), size=SIZE)
    _fill(src)
    dst = os.path.join(tmp, "dst.img")
    with open(dst, "wb") as fh:
        fh.truncate(SIZE)
    return src, dst


def run_once(tmp: str, bandwidth: int) -> dict[str, float]:
    src_disk, dst_disk = _make_disks(tmp)
    hvp = parameters.defaults("hv", constants.HT_KVM)
    hvp["migration_bandwidth"] = bandwidth
    spec = base.InstanceSpec(name=NAME, memory=64, vcpus=1, hvparams=hvp)
    device = os.path.join(tmp, "no-kvm") if ACCEL == "tcg" else KVM_DEVICE
    src = KvmHypervisor(pathutils.Paths(root=os.path.join(tmp, "src")), kvm_device=device)
    dst = KvmHypervisor(pathutils.Paths(root=os.path.join(tmp, "dst")), kvm_device=device)
    try:
        src.start_instance(spec, [src_disk])
        t0 = time.monotonic()
        info = src.migration_info(NAME)
        accepted = dst.accept_instance(spec, info, "127.0.0.1", [dst_disk])
        target = dst.mirror_accept(NAME, "127.0.0.1")
        src.mirror_start(spec, target)
        wait_for(lambda: src.mirror_status(NAME)["status"] == "ready", "the mirror", 600, 0.05)
        t_ready = time.monotonic()
        src.migrate_instance(NAME, "dst", "127.0.0.1", True, accepted, hvp)
        status: Any = wait_for(lambda: (m := src.get_migration_status(NAME))
                       .get("status") in ("completed", "failed", "cancelled") and m,
                       "the memory", 600)
        t_mem = time.monotonic()
        if status["status"] != "completed":
            raise errors.GanetiError(f"memory migration failed: {status}")
        src.mirror_finish(NAME, True)
        dst.mirror_release(NAME)
        dst.finalize_migration_dst(spec, info, True)
        t_run = time.monotonic()
        src.finalize_migration_src(NAME, True, True)
        same = _digest(src_disk) == _digest(dst_disk)
        if not same:
            raise errors.GanetiError("the target disk differs from the source")
        # a live copy under TCG is made paused: the guest stood still all along
        qemu_down = (t_mem - t_ready if status.get("paused_copy")
                     else float(status.get("downtime_ms") or 0) / 1000.0)
        return {"total": t_run - t0, "mirror": t_ready - t0, "memory": t_mem - t_ready,
                "qemu_downtime": qemu_down, "switch": t_run - t_mem}
    finally:
        for hv in (src, dst):
            for name in hv.list_instances():
                try:
                    hv.stop_instance(name, force=True)
                except errors.HypervisorError:
                    pass


_SENT = re.compile(r"memory sent: .*(?:downtime ([0-9]+) ms|(paused for the whole copy))")
CLUSTER_INST = "bench-mirror-vc.example.com"


def _gnt(vc: vcluster.VCluster, *argv: str) -> str:
    res = vcluster.run_gnt(vc, list(argv), timeout=900)
    if res.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{res.stdout}{res.stderr}")
    return res.stdout


def run_cluster(tmp: str) -> tuple[float, int]:
    """``(wall s, qemu downtime ms)`` of ``gnt-instance migrate --with-disks``."""
    vc = vcluster.create(os.path.join(tmp, "vc"), 2, use_ssh=False,
                         hypervisor=constants.HT_KVM, kvm_accel=ACCEL)
    try:
        n1, n2 = (n.name for n in vc.nodes)
        _gnt(vc, "gnt-instance", "add", "-t", "file", "--disk", f"0:size={SIZE >> 20}M",
             "-o", "tinyos", "-n", n1, "--no-name-check", "--no-ip-check", CLUSTER_INST)
        _gnt(vc, "gnt-instance", "shutdown", "--timeout", "0", CLUSTER_INST)
        paths = vc.paths(n1)
        (disk,) = [os.path.join(d, f) for d, _, files in os.walk(paths.file_storage_dir)
                   for f in files if ".file.disk" in f]
        _fill(disk)
        with open(disk, "r+b") as fh:
            fh.write(tickguest.boot_sector(fill_mib=16, dirty_kib=64))
        _gnt(vc, "gnt-instance", "startup", CLUSTER_INST)
        start = time.monotonic()
        out = _gnt(vc, "gnt-instance", "migrate", "-f", "--with-disks", "-n", n2,
                   CLUSTER_INST)
        wall = time.monotonic() - start
        found = _SENT.search(out)
        if not found:
            return wall, -1
        return wall, int(found.group(1)) if found.group(1) else -2   # -2: copied paused
    finally:
        vcluster.destroy(os.path.join(tmp, "vc"))


def main() -> int:
    reason = host_helpers.qemu_reason()
    if reason:
        print(f"bench_kvm_mirror: skipped: {reason}")
        return 0
    speeds = [int(s) for s in os.environ.get("BENCH_BANDWIDTHS", "32,1024").split(",") if s]
    print(f"kvm live migration with a local {SIZE >> 20} MiB disk (full of data),"
          f" acceleration {ACCEL} (GANETI_BENCH_KVM_ACCEL), loopback; load average"
          f" {os.getloadavg()[0]:.1f}")
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
    if os.environ.get("BENCH_CLUSTER", "1") != "0":
        tmp = tempfile.mkdtemp(prefix="bench-kvm-mirror-vc-")
        try:
            wall, down = run_cluster(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"gnt-instance migrate --with-disks, 2-node kvm vcluster, {SIZE >> 20} MiB file"
              f" disk, default migration_bandwidth: {wall:.2f} s wall, qemu downtime"
              f" {'(copied paused, TCG)' if down == -2 else f'{down} ms'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
