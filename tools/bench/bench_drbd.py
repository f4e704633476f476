#!/usr/bin/env python3
"""DRBD on a guest cluster: sync and replace throughput, migration, evacuation.

Creates a 3-node guest cluster (doc/vcluster.md, "Guest clusters") in a
temporary directory and prints, each with the host's load average:

* the guests' raw write speed: ``dd`` of SIZE MiB with ``oflag=direct`` onto
  a fresh logical volume of node2 (the limit of any mirror);
* ``gnt-instance add -t drbd`` of a SIZE MiB disk (node2:node3): the whole
  command and the initial sync's own rate (the ``drbd-resync`` progress
  entry's average);
* ``replace-disks -s`` (the same amount copied again) and ``-n node1``;
* ``gnt-instance migrate`` of that instance (fake hypervisor: the time of
  the DRBD dual-primary dance and the switch, not a guest's downtime);
* ``gnt-node evacuate -s`` of node3 with COUNT small drbd instances whose
  secondary it is, and the time until the last job ended.

Figures only, no assertion; the cluster is destroyed at the end.  Needs
root (bridges, taps); says why and exits 0 otherwise.

Run: ``.venv/bin/python tools/bench/bench_drbd.py [SIZE_MIB [COUNT]]`` (default
1024 MiB and 6 instances; ten minutes or more under TCG).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from tools.harness import guestcluster, guestimage, guestvm  # noqa: E402


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def _gnt(gc: guestcluster.GuestCluster, *argv: str) -> tuple[float, str]:
    started = time.monotonic()
    res = guestcluster.run_gnt(gc, list(argv), timeout=3600, check=False)
    took = time.monotonic() - started
    if res.failed:
        raise SystemExit(f"{' '.join(argv)} failed: {res.stdout}{res.stderr}")
    return took, res.stdout


def _rate(out: str) -> str:
    found = re.findall(r"drbd-resync: done, ([\d.]+ \S+), ([\d.]+ \S+/s)", out)
    return f"{found[-1][0]} at {found[-1][1]}" if found else "no resync entry"


def _add(gc: guestcluster.GuestCluster, name: str, size: int, nodes: str) -> tuple[float, str]:
    return _gnt(gc, "gnt-instance", "add", "-t", "drbd", "-o", "tinyos", "--no-install",
                "--disk", f"0:size={size}m", "-n", nodes, "--no-name-check", "--no-ip-check",
                name)


def main(argv: list[str]) -> int:
    size = int(argv[0]) if argv else 1024
    count = int(argv[1]) if len(argv) > 1 else 6
    why = guestvm.network_support()
    if why:
        print(f"skipped: {why}")
        return 0
    guestimage.build(log=print)
    with tempfile.TemporaryDirectory(prefix="bench-drbd-") as tmp:
        directory = os.path.join(tmp, "gc")
        print(f"load average before: {_load()}")
        try:
            gc = guestcluster.create(directory, 3, disk_size_gib=max(4, 2 * size // 1024 + 2),
                                     log=lambda m: None)
            vg = gc.vg_name
            raw = guestcluster.run_on(gc, "node2", f"lvcreate -q -y -L {size}m -n rawbench {vg}"
                                      f" && dd if=/dev/zero of=/dev/{vg}/rawbench bs=1M"
                                      f" count={size} oflag=direct 2>&1 | tail -1;"
                                      f" lvremove -q -f {vg}/rawbench >/dev/null 2>&1",
                                      timeout=3600)
            print(f"raw write of {size} MiB on node2: {raw.stdout.strip().splitlines()[-1:]}")
            took, out = _add(gc, "bench1.vcluster", size, "node2.vcluster:node3.vcluster")
            print(f"add -t drbd, {size} MiB (create + initial sync): {took:.1f}s;"
                  f" resync {_rate(out)}")
            took, out = _gnt(gc, "gnt-instance", "replace-disks", "-s", "bench1.vcluster")
            print(f"replace-disks -s: {took:.1f}s; resync {_rate(out)}")
            took, out = _gnt(gc, "gnt-instance", "replace-disks", "-n", "node1.vcluster",
                             "bench1.vcluster")
            print(f"replace-disks -n node1: {took:.1f}s; resync {_rate(out)}")
            took, _ = _gnt(gc, "gnt-instance", "migrate", "-f", "bench1.vcluster")
            print(f"migrate (fake hypervisor; the DRBD steps and the switch): {took:.1f}s")
            _gnt(gc, "gnt-instance", "remove", "-f", "bench1.vcluster")
            for i in range(count):
                _add(gc, f"evac{i}.vcluster", 64, "node2.vcluster:node3.vcluster"
                     if i % 2 else "node1.vcluster:node3.vcluster")
            took, out = _gnt(gc, "gnt-node", "evacuate", "-f", "-s", "node3.vcluster")
            jobs = re.findall(r"(\d+) job\(s\) followed, (\d+) failure", out)
            print(f"gnt-node evacuate -s node3 of {count} instances (64 MiB each):"
                  f" {took:.1f}s, jobs {jobs}")
        finally:
            guestcluster.destroy(directory)
        print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
