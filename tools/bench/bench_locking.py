#!/usr/bin/env python3
"""Benchmark of ganeti.locking; prints figures, asserts nothing.

Run as ``.venv/bin/python tools/bench/bench_locking.py`` (about 10-20 s).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import threading  # noqa: E402
import time  # noqa: E402

from ganeti import locking  # noqa: E402

N_INSTANCES = 10_000
N_THREADS = 8
WORK_SECONDS = 0.002
THREAD_RUN_SECONDS = 1.5


def bench_uncontended(seconds: float = 1.0) -> float:
    """Acquire+release pairs per second on one SharedLock, no contention."""
    lock = locking.SharedLock("bench")
    count = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            lock.acquire()
            lock.release()
        count += 1000
    return count / seconds


def bench_whole_level(glm: locking.GanetiLockManager, shared: bool, rounds: int = 50) -> float:
    """Best time in ms of acquire+release of the whole instance level."""
    best = float("inf")
    glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], shared=True)
    try:
        for _ in range(rounds):
            start = time.perf_counter()
            got = glm.acquire(locking.LEVEL_INSTANCE, locking.ALL_SET, shared=shared)
            glm.release(locking.LEVEL_INSTANCE)
            best = min(best, time.perf_counter() - start)
            assert got is not None and len(got) == N_INSTANCES
    finally:
        glm.release(locking.LEVEL_CLUSTER)
    return best * 1000


def bench_threads(glm: locking.GanetiLockManager, same: bool) -> float:
    """Lock, work, unlock cycles per second of N_THREADS threads."""
    counts = [0] * N_THREADS
    stop = threading.Event()

    def worker(idx: int) -> None:
        name = "inst0.example.com" if same else f"inst{idx}.example.com"
        while not stop.is_set():
            glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], shared=True)
            glm.acquire(locking.LEVEL_INSTANCE, [name])
            time.sleep(WORK_SECONDS)
            glm.release(locking.LEVEL_INSTANCE)
            glm.release(locking.LEVEL_CLUSTER)
            counts[idx] += 1

    threads = [threading.Thread(target=worker, args=(i,), name=f"bench-{i}")
               for i in range(N_THREADS)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(THREAD_RUN_SECONDS)
    stop.set()
    for thread in threads:
        thread.join(10)
    return sum(counts) / (time.perf_counter() - start)


def main() -> int:
    """Run every benchmark and print the figures."""
    print(f"uncontended SharedLock acquire+release: {bench_uncontended():,.0f} ops/s")
    instances = [f"inst{i}.example.com" for i in range(N_INSTANCES)]
    monitor = locking.LockMonitor()
    start = time.perf_counter()
    glm = locking.GanetiLockManager([f"node{i}" for i in range(100)], ["default"],
                                    instances, monitor=monitor)
    print(f"building a lock manager with {N_INSTANCES} instances: "
          f"{(time.perf_counter() - start) * 1000:.1f} ms")
    print(f"whole instance level ({N_INSTANCES} locks), shared acquire+release: "
          f"{bench_whole_level(glm, True):.3f} ms")
    print(f"whole instance level ({N_INSTANCES} locks), exclusive acquire+release: "
          f"{bench_whole_level(glm, False):.3f} ms")
    start = time.perf_counter()
    glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], shared=True)
    glm.acquire(locking.LEVEL_INSTANCE, instances)
    glm.release(locking.LEVEL_INSTANCE)
    glm.release(locking.LEVEL_CLUSTER)
    print(f"(for comparison: {N_INSTANCES} instance locks by name, exclusive: "
          f"{(time.perf_counter() - start) * 1000:.1f} ms)")
    start = time.perf_counter()
    glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], shared=True)
    glm.acquire(locking.LEVEL_INSTANCE, instances, timeout=60)
    glm.release(locking.LEVEL_INSTANCE)
    glm.release(locking.LEVEL_CLUSTER)
    print(f"(the same with a timeout, which reads the clock per lock: "
          f"{(time.perf_counter() - start) * 1000:.1f} ms)")
    start = time.perf_counter()
    rows = monitor.query()
    print(f"monitor query of {len(rows)} locks: {(time.perf_counter() - start) * 1000:.1f} ms")
    different = bench_threads(glm, same=False)
    same = bench_threads(glm, same=True)
    print(f"{N_THREADS} threads, different instances ({WORK_SECONDS * 1000:.0f} ms work): "
          f"{different:,.0f} cycles/s")
    print(f"{N_THREADS} threads, same instance ({WORK_SECONDS * 1000:.0f} ms work): "
          f"{same:,.0f} cycles/s")
    print(f"parallelism ratio (different / same): {different / same:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
