#!/usr/bin/env python3
"""Address pool allocation on a big network (doc/networks.md, "The pool").

A /16 (65,536 addresses) with 60,000 of them reserved: the time of one
allocation (``generate_free()`` then ``reserve()``, as an instance NIC
with ``ip=pool`` will take one), of loading the pool from its stored bit
strings (what every network query and LU does), and of the ``map`` and
counts.  Each figure is the median of ``--runs`` runs; pure Python, no
daemons, a few seconds.

Run: ``.venv/bin/python tools/bench/bench_netpool.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ganeti.netpool import AddressPool  # noqa: E402

TAKEN = 60_000
ALLOCATIONS = 300


def _filled() -> AddressPool:
    pool = AddressPool.initialize("10.20.0.0/16", "10.20.0.1")
    while pool.reserved_count < TAKEN:
        pool.reserve(pool.generate_free())
    return pool


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    alloc, load, stats = [], [], []
    for _ in range(args.runs):
        pool = _filled()
        started = time.perf_counter()
        for _ in range(ALLOCATIONS):
            pool.reserve(pool.generate_free())
        alloc.append((time.perf_counter() - started) / ALLOCATIONS)
        texts = pool.reservations_text(), pool.ext_reservations_text()
        started = time.perf_counter()
        again = AddressPool("10.20.0.0/16", *texts)
        load.append(time.perf_counter() - started)
        started = time.perf_counter()
        _ = again.map, again.free_count, again.reserved_count
        stats.append(time.perf_counter() - started)
    print(f"one allocation on a /16 with {TAKEN:,} addresses taken:"
          f" {statistics.median(alloc) * 1e6:.1f} us (median of {args.runs} runs of"
          f" {ALLOCATIONS})")
    print(f"loading the /16 pool from its stored strings: {statistics.median(load) * 1e3:.2f} ms")
    print(f"map and counts of the /16: {statistics.median(stats) * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
