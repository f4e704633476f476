#!/usr/bin/env python3
"""Live migration downtime of a writing kvm instance on ``drbd`` (a guest cluster).

The instance of test/integration/test_guest_drbd_migrate.py (kvm, 128 MiB of
memory, 24 MiB of it filled, a 64 MiB drbd disk on node2:node3, running the
disk-writing boot sector of test/fakes/diskwriter.py) is migrated live
between its two nodes RUNS times (default 4).  Printed per migration:

* the wall time of ``gnt-instance migrate`` (the DRBD dual-primary steps,
  the target's qemu start, the copy, the finalize steps, single-primary);
* qemu's own figures from the command's ``memory sent:`` line: memory sent,
  total time, and its downtime, or, when the copy was made with the guest
  paused (TCG, doc/kvm.md, "Migration"), that it was paused throughout;
* the largest gap between two consecutive acknowledged writes of the guest
  across the switch, as the host saw them arrive: the serial logs of both
  nodes are followed live (``tail -F`` over SSH) and every ``wrote k`` line
  stamped on arrival.  That is the downtime as the guest's disk user sees it.

Then the largest gap between acknowledgements outside the migrations, for
comparison (the pace of the writes themselves).  Figures only, no assertion.

A guest cluster is created in a temporary directory and destroyed at the end
(needs root; says why and exits 0 otherwise), or ``--cluster DIR`` uses a
running one (``tools/vcluster create DIR --guests --nodes 3``) and leaves it.

Run: ``.venv/bin/python tools/bench/bench_drbd_migrate.py [--runs N] [--cluster DIR]``
(about 5 minutes with a cluster of its own under TCG).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test"))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import guest_cluster_harness  # noqa: E402
from drbd_writer import DrbdWriter  # noqa: E402
from tools.harness import guestcluster  # noqa: E402

NAME = "benchdrbdmig.vcluster"
_ACK = re.compile(rb"wrote ([0-9A-F]{8})\r?$")
_SENT = re.compile(r"memory sent: ([0-9.]+) MiB in ([0-9.]+) s, (?:downtime ([0-9]+) ms"
                   r"|(the guest was paused for the whole copy))")


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


class Follower:
    """``tail -F`` of the instance's serial log on one node, over SSH; every
    acknowledgement stamped with the host's monotonic clock when it arrived."""

    def __init__(self, gc: guestcluster.GuestCluster, node: str, log: str,
                 seen: dict[int, float], lock: threading.Lock) -> None:
        self.proc = subprocess.Popen(
            ["ssh", "-oBatchMode=yes", "-oStrictHostKeyChecking=yes",
             f"-oUserKnownHostsFile={os.path.join(gc.directory, 'known_hosts')}",
             "-i", gc.key_file, f"root@{gc.node(node).ip}",
             f"tail -n +1 -F {log} 2>/dev/null"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.seen, self.lock = seen, lock
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            found = _ACK.search(line.rstrip(b"\n"))
            if found:
                now = time.monotonic()
                with self.lock:
                    self.seen.setdefault(int(found.group(1), 16), now)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _gaps(seen: dict[int, float], lock: threading.Lock, start: float, end: float
          ) -> list[tuple[float, int]]:
    """(gap, k) between acknowledgement k and the next one seen, for the later one
    arriving within [start, end]; largest first."""
    with lock:
        items = sorted(seen.items())
    gaps = [(t2 - t1, k1) for (k1, t1), (_k2, t2) in zip(items, items[1:])
            if start <= t2 <= end]
    return sorted(gaps, reverse=True)


def _wait_new_ack(seen: dict[int, float], lock: threading.Lock, after: float,
                  timeout: float = 300.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with lock:
            if any(t > after for t in seen.values()):
                return time.monotonic()
        time.sleep(0.2)
    raise SystemExit("the guest acknowledged no write after the migration")


def bench(fixture: guest_cluster_harness.GuestClusterFixture, runs: int) -> None:
    seen: dict[int, float] = {}
    lock = threading.Lock()
    followers: list[Follower] = []
    with fixture.kvm_enabled():
        inst = DrbdWriter(fixture, NAME)
        try:
            inst.create()
            inst.wait_acks("node2")
            followers = [Follower(fixture.cluster, node, inst.serial_log, seen, lock)
                         for node in inst.nodes]
            _wait_new_ack(seen, lock, time.monotonic())
            quiet_start = time.monotonic()
            time.sleep(5)       # a stretch without migration: the writes' own pace
            quiet = _gaps(seen, lock, quiet_start, time.monotonic())
            walls, guest_gaps = [], []
            for run in range(1, runs + 1):
                source = inst.primary()
                started = time.monotonic()
                res = fixture.gnt("gnt-instance", "migrate", "-f", NAME, timeout=900)
                wall = time.monotonic() - started
                if res.returncode != 0:
                    raise SystemExit(f"migrate failed: {res.stdout}{res.stderr}")
                ended = _wait_new_ack(seen, lock, time.monotonic())
                gaps = _gaps(seen, lock, started, ended)
                sent = _SENT.search(res.stdout)
                qemu = "no memory sent: line"
                if sent:
                    qemu = (f"{sent.group(1)} MiB in {sent.group(2)} s, "
                            + (f"downtime {sent.group(3)} ms" if sent.group(3)
                               else "guest paused for the whole copy (TCG)"))
                gap = gaps[0][0] if gaps else float("nan")
                walls.append(wall)
                guest_gaps.append(gap)
                print(f"migration {run} ({source} -> {inst.primary()}): command {wall:.1f} s;"
                      f" qemu: {qemu}; largest gap between acknowledged writes"
                      f" {gap:.2f} s (after write {gaps[0][1] if gaps else '-'})"
                      f"; load {_load()}")
            print(f"median of {runs}: command {statistics.median(walls):.1f} s, largest"
                  f" gap between acknowledged writes {statistics.median(guest_gaps):.2f} s"
                  f" (max {max(guest_gaps):.2f} s)")
            if quiet:
                print(f"without migration (5 s): largest gap {quiet[0][0]:.2f} s,"
                      f" {len(quiet) + 1} writes acknowledged")
        finally:
            for follower in followers:
                follower.stop()
            inst.remove()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--cluster", help="a running guest cluster's directory (kept)")
    args = parser.parse_args(argv)
    print(f"load average before: {_load()}")
    if args.cluster:
        fixture = guest_cluster_harness.GuestClusterFixture(args.cluster)
        fixture.gc = guestcluster.load(os.path.abspath(args.cluster))
        bench(fixture, args.runs)
    else:
        why = guest_cluster_harness.support_problem()
        if why:
            print(f"skipped: {why}")
            return 0
        with tempfile.TemporaryDirectory(prefix="bench-drbdmig-") as tmp:
            fixture = guest_cluster_harness.GuestClusterFixture(os.path.join(tmp, "gc"))
            try:
                fixture.ensure_running()
                bench(fixture, args.runs)
            finally:
                fixture.close()
    print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
