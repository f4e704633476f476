#!/usr/bin/env python3
"""Start-up time of a guest cluster (doc/vcluster.md, "Guest clusters").

Creates a ``NODES``-node guest cluster (default 3) in a temporary directory
with ``tools.harness.guestcluster.create``, as ``tools/vcluster create DIR
--guests`` does, and prints: the whole ``create`` (from nothing to a
cluster whose every node is added), when each phase began (its log lines,
time-stamped), each guest's uptime when its init said ready, then the time
of one node's power-off and boot again (``stop`` + ``start``), and the
host's load average before and after (the machine may be shared).  The
cluster is destroyed at the end.  Figures only; no assertion on time.
Needs root (bridges, taps); says why and exits 0 otherwise.

Run: ``.venv/bin/python tools/bench/bench_guest_cluster.py [NODES]``
(a few minutes; the first run also fetches the kernel package).
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


def _ready_uptime(gc: guestcluster.GuestCluster, node: guestcluster.GuestNode) -> str:
    with open(gc.spec(node).console_log, errors="replace") as fh:
        found = re.findall(rf"{re.escape(guestimage.READY_LINE)} {re.escape(node.name)} \S+"
                           r" uptime (\S+)", fh.read())
    return found[-1] if found else "?"


def main(argv: list[str]) -> int:
    nodes = int(argv[0]) if argv else 3
    why = guestvm.network_support()
    if why:
        print(f"skipped: {why}")
        return 0
    # the kernel build (download) is not part of the start-up time
    guestimage.build(log=print)
    with tempfile.TemporaryDirectory(prefix="bench-guests-") as tmp:
        directory = os.path.join(tmp, "gc")
        started = time.monotonic()

        def log(msg: str) -> None:
            print(f"  {time.monotonic() - started:6.1f}s  {msg}", flush=True)

        print(f"load average before: {_load()}")
        try:
            gc = guestcluster.create(directory, nodes, log=log)
            total = time.monotonic() - started
            print(f"create: {nodes} guest nodes ({gc.accel.upper()}, {gc.memory_mib} MiB each)"
                  f" ready in {total:.1f}s")
            for node in gc.nodes:
                print(f"  {node.name}: init ready at guest uptime {_ready_uptime(gc, node)}s")
            last = gc.nodes[-1]
            began = time.monotonic()
            guestcluster.stop(gc, last.name)
            guestcluster.start(gc, last.name)
            print(f"power-off and boot of {last.name} (daemons up, SSH answers):"
                  f" {time.monotonic() - began:.1f}s (uptime at ready"
                  f" {_ready_uptime(gc, last)}s)")
        finally:
            guestcluster.destroy(directory)
        print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
