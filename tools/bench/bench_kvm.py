#!/usr/bin/env python3
"""Start and stop of a kvm instance running the tinylinux guest (1-node virtual cluster).

A ``file`` instance of the ``tinylinux`` OS (128 MiB, 64 MiB disk; the
guest of tools/harness/tinylinux.py, built or found in its cache) is
started ``RUNS`` times.  Printed per run: the wall time of
``gnt-instance startup`` (job, RPC, qemu start), the time from the
command's start to the guest's ``tinylinux: booted`` line in its serial
log (BIOS, syslinux, kernel, initramfs), and the wall time of
``gnt-instance shutdown`` (ACPI powerdown, which the guest obeys at once,
then QMP quit).  The first ``gnt-instance add`` (disk creation, OS
install, start) to the booted line is printed too.  Figures only; no
assertion on time.  Skipped with a message when qemu cannot run.

Run: ``.venv/bin/python tools/bench/bench_kvm.py [RUNS]`` (about 1 min);
``GANETI_BENCH_KVM_ACCEL=auto`` measures with /dev/kvm when it opens (the
virtual cluster's default is TCG: doc/kvm.md, "Acceleration").
Others may add their figures (migrations, disk copies) here or next to it.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import guest_helpers  # noqa: E402
import host_helpers  # noqa: E402
from ganeti import constants  # noqa: E402
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor  # noqa: E402
from tools.harness import vcluster  # noqa: E402

INST = "bench-kvm.example.com"
RUNS = 5


def _gnt(vc: vcluster.VCluster, *argv: str) -> str:
    res = vcluster.run_gnt(vc, list(argv), timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{res.stdout}{res.stderr}")
    return res.stdout


def _booted(log: str, timeout: float = 120.0) -> float:
    """Poll the serial log for the booted line; the monotonic time it was seen."""
    deadline = time.monotonic() + timeout
    while guest_helpers.boot_count(log) < 1:
        if time.monotonic() > deadline:
            raise SystemExit(f"the guest did not boot; its log:\n{guest_helpers.read_log(log)}")
        time.sleep(0.02)
    return time.monotonic()


def main(argv: list[str]) -> int:
    reason = host_helpers.qemu_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    runs = int(argv[0]) if argv else RUNS
    accel = os.environ.get("GANETI_BENCH_KVM_ACCEL", vcluster.DEFAULT_KVM_ACCEL)
    with tempfile.TemporaryDirectory(prefix="bench-kvm-") as tmp:
        vc = vcluster.create(os.path.join(tmp, "vc"), 1, use_ssh=False,
                             hypervisor=constants.HT_KVM, kvm_accel=accel)
        try:
            node = vc.nodes[0].name
            hv = KvmHypervisor(vc.paths(node))
            log = hv.serial_log(INST)
            start = time.monotonic()
            _gnt(vc, "gnt-instance", "add", "-t", "file", "-s", "64M", "-o", "tinylinux",
                 "-n", node, "--no-name-check", "--no-ip-check", INST)
            added = time.monotonic()
            booted = _booted(log)
            info = hv.get_instance_info(INST) or {}
            print(f"guest: tinylinux, {info.get('memory')} MiB, acceleration {info.get('accel')};"
                  f" load average {os.getloadavg()[0]:.2f}")
            print(f"add: command {added - start:.2f} s, to the booted line {booted - start:.2f} s")
            _gnt(vc, "gnt-instance", "shutdown", INST)
            print(f"{'run':>4} {'startup s':>10} {'to booted s':>12} {'shutdown s':>11}")
            rows = []
            for run in range(runs):
                start = time.monotonic()
                _gnt(vc, "gnt-instance", "startup", INST)
                started = time.monotonic()
                booted = _booted(log)
                stop = time.monotonic()
                _gnt(vc, "gnt-instance", "shutdown", "--timeout", "60", INST)
                stopped = time.monotonic()
                rows.append((started - start, booted - start, stopped - stop))
                print(f"{run + 1:>4} {rows[-1][0]:10.2f} {rows[-1][1]:12.2f} {rows[-1][2]:11.2f}")
            print(f"median of {runs}: startup {statistics.median(r[0] for r in rows):.2f} s,"
                  f" to the booted line {statistics.median(r[1] for r in rows):.2f} s,"
                  f" shutdown {statistics.median(r[2] for r in rows):.2f} s")
            _gnt(vc, "gnt-instance", "remove", "-f", INST)
        finally:
            vcluster.destroy(vc.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
