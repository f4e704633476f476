#!/usr/bin/env python3
"""Live migration of a 256 MiB kvm guest on a 2-node virtual cluster (loopback).

A ``sharedfile`` instance with 256 MiB of memory runs the tick guest of
test/fakes/tickguest.py, which fills 240 MiB of its memory with non-zero
data (qemu sends zero pages as a flag only, so an idle guest would measure
nothing) and keeps rewriting 1 MiB of it.  It is migrated live between the
two nodes ``RUNS`` times with the default ``migration_bandwidth`` (32 MiB/s)
and once more without a limit (``migration_bandwidth`` 0 is not accepted:
10000 MiB/s).  Printed per run: qemu's reported downtime and total
migration time and the memory sent (from the ``memory sent:`` line of
``gnt-instance migrate``), and the wall time of the whole command (RPCs,
the target's qemu start, the copy, the finalize steps).  Figures only; no
assertion on time.  Skipped with a message when qemu cannot run.

The guest runs with KVM when ``/dev/kvm`` is usable (``GANETI_BENCH_KVM_ACCEL=tcg``
forces TCG, whose live migrations are copied paused: the downtime printed is
then the whole copy).

Run: ``.venv/bin/python tools/bench/bench_kvm_migrate.py`` (about 2 min).
"""

from __future__ import annotations

import glob
import os
import re
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test"))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import host_helpers  # noqa: E402
from fakes import tickguest  # noqa: E402
from ganeti import constants  # noqa: E402
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor  # noqa: E402
from tools.harness import vcluster  # noqa: E402

INST = "bench-mig.example.com"
MEMORY_MIB = 256
FILL_MIB = 240
RUNS = 3
_SENT = re.compile(r"memory sent: ([0-9.]+) MiB in ([0-9.]+) s, (?:downtime ([0-9]+) ms"
                   r"|(the guest was paused for the whole copy))")


def _gnt(vc: vcluster.VCluster, *argv: str) -> str:
    res = vcluster.run_gnt(vc, list(argv), timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{res.stdout}{res.stderr}")
    return res.stdout


def _ticking(vc: vcluster.VCluster, node: str, timeout: float = 120.0) -> None:
    log = KvmHypervisor(vc.paths(node)).serial_log(INST)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(log, "rb") as fh:
                if len(tickguest.ticks(fh.read())) >= 2:
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the guest does not tick on {node}")


def _migrate(vc: vcluster.VCluster, target: str) -> tuple[float, float, int, float]:
    """``(MiB sent, qemu total s, qemu downtime ms, wall s)`` of one live migration."""
    start = time.monotonic()
    out = _gnt(vc, "gnt-instance", "migrate", "-f", "-n", target, INST)
    wall = time.monotonic() - start
    found = _SENT.search(out)
    if not found:
        raise SystemExit(f"no qemu figures in the output:\n{out}")
    total = float(found.group(2))
    # copied paused (TCG): the guest stood still for the whole copy
    downtime = int(found.group(3)) if found.group(3) else int(total * 1000)
    return float(found.group(1)), total, downtime, wall


def main() -> int:
    reason = host_helpers.qemu_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-kvm-mig-") as tmp:
        # KVM where /dev/kvm works (the tick guest runs under nested KVM too):
        # under TCG a live migration is copied paused (doc/kvm.md, "Migration")
        vc = vcluster.create(os.path.join(tmp, "vc"), 2, use_ssh=False,
                             hypervisor=constants.HT_KVM,
                             kvm_accel=os.environ.get("GANETI_BENCH_KVM_ACCEL", "auto"))
        try:
            n1, n2 = (n.name for n in vc.nodes)
            _gnt(vc, "gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=8M",
                 "-o", "tinyos", "-B", f"maxmem={MEMORY_MIB},minmem={MEMORY_MIB}",
                 "-n", n1, "--no-name-check", "--no-ip-check", INST)
            _gnt(vc, "gnt-instance", "shutdown", "--timeout", "0", INST)
            (disk,) = glob.glob(os.path.join(vc.paths(n1).shared_file_storage_dir, INST,
                                             "*disk0"))
            with open(disk, "r+b") as fh:
                fh.write(tickguest.boot_sector(fill_mib=FILL_MIB, dirty_kib=1024))
            _gnt(vc, "gnt-instance", "startup", INST)
            _ticking(vc, n1)
            accel = (KvmHypervisor(vc.paths(n1)).get_instance_info(INST) or {}).get("accel")
            print(f"guest: {MEMORY_MIB} MiB, {FILL_MIB} MiB filled, 1 MiB rewritten in a loop;"
                  f" acceleration {accel}; load average {os.getloadavg()[0]:.2f}")
            print(f"{'run':>14} {'MiB sent':>9} {'qemu total s':>13} {'downtime ms':>12}"
                  f" {'command s':>10}")
            here, there = n1, n2
            results = []
            for run in range(RUNS + 1):
                if run == RUNS:
                    _gnt(vc, "gnt-instance", "modify", "-H", "migration_bandwidth=10000", INST)
                sent, total, downtime, wall = _migrate(vc, there)
                label = f"32 MiB/s #{run + 1}" if run < RUNS else "unlimited"
                print(f"{label:>14} {sent:9.1f} {total:13.2f} {downtime:12d} {wall:10.2f}")
                if run < RUNS:
                    results.append((total, downtime, wall))
                here, there = there, here
                _ticking(vc, here)
            print(f"median at 32 MiB/s: qemu total {statistics.median(r[0] for r in results):.2f} s,"
                  f" downtime {statistics.median(r[1] for r in results):.0f} ms,"
                  f" command {statistics.median(r[2] for r in results):.2f} s")
            _gnt(vc, "gnt-instance", "remove", "-f", "--shutdown-timeout", "0", INST)
        finally:
            vcluster.destroy(vc.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
