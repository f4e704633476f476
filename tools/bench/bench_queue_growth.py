#!/usr/bin/env python3
"""The job rate and the job listing as the queue grows, with the default queue limits.

One ganeti-masterd (``--no-rpc``) in a temporary root, with the default
soft/hard queue limits (4,000/5,000 unarchived jobs: past 4,000 the oldest
finished jobs are archived), durable writes.  A *round* submits 500 no-op
jobs as ten ``SubmitManyJobs`` of 50 and waits until all have finished;
its rate is jobs per second.  Printed, each as a ratio to the fresh queue
measured in the same run (a ratio holds on a noisy machine):

* the rate of a fresh queue (best of 3 rounds) and with 10,000 jobs
  submitted before (best of 3; 4,000 unarchived, the rest archived);
* an unfiltered ``Query("job", ["id", "status", "summary"])`` (archived
  jobs included: doc/protocols/jobs.md, "Job summaries"), median of 5,
  after one warm-up, at 1,000 and at 10,000 jobs.

Targets (issue "Performance that holds as the queue and the cluster
grow"): rate at 10,000 >= 90 % of the fresh rate; the listing <= 50 ms.
Takes about a minute.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, _REPO)
sys.path.insert(0, os.path.join(_REPO, "test", "integration"))

from ganeti import luxi  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402
from masterd_harness import start_masterd  # noqa: E402
import benchlib  # noqa: E402

NOOP = wire.test_delay(duration=0.0, no_locks=True)
BATCH = 50
ROUND = 500


def _submit(conn: luxi.Client, count: int) -> list[int]:
    ids: list[int] = []
    for start in range(0, count, BATCH):
        res = conn.SubmitManyJobs([[NOOP] for _ in range(min(BATCH, count - start))])
        ids.extend(r[1] for r in res if r[0])
        if not all(r[0] for r in res):
            raise RuntimeError(f"submission refused: {res[0]}")
    return ids


def _wait_all(conn: luxi.Client, ids: list[int], timeout: float = 300.0) -> None:
    benchlib.wait_jobs(conn, ids, time.monotonic() + timeout)


def _round(conn: luxi.Client) -> float:
    started = time.perf_counter()
    _wait_all(conn, _submit(conn, ROUND))
    return ROUND / (time.perf_counter() - started)


def _listing_ms(conn: luxi.Client) -> tuple[float, int]:
    conn.Query("job", ["id", "status", "summary"], None)      # warm-up
    times = []
    rows = 0
    for _ in range(5):
        started = time.perf_counter()
        rows = len(conn.Query("job", ["id", "status", "summary"], None)["data"])
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, rows


def main() -> int:
    """Run the benchmark and print the figures."""
    base = tempfile.mkdtemp(prefix="bench-queue-growth-")
    handle = start_masterd(base, workers=25)
    try:
        with luxi.Client(handle.socket_path, rw_timeout=300) as conn:
            fresh = max(_round(conn) for _ in range(3))
            _wait_all(conn, _submit(conn, 1000 - 3 * ROUND))
            early_ms, early_rows = _listing_ms(conn)
            while True:
                total = len(conn.Query("job", ["id"], None)["data"])
                if total >= 10000 - 3 * ROUND:
                    break
                _wait_all(conn, _submit(conn, min(2000, 10000 - 3 * ROUND - total)))
            full = max(_round(conn) for _ in range(3))
            full_ms, full_rows = _listing_ms(conn)
            unarchived = len(conn.Query("job", ["id"], ["!", ["?", "archived"]])["data"])
    finally:
        handle.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"no-op jobs/s, fresh queue: {fresh:.0f} (best of 3 rounds of {ROUND})")
    print(f"no-op jobs/s, {full_rows:,} jobs submitted ({unarchived:,} unarchived):"
          f" {full:.0f} = {full / fresh * 100:.0f} % of the fresh rate (target >= 90 %)")
    print(f"unfiltered job listing, {early_rows:,} jobs: {early_ms:.1f} ms")
    print(f"unfiltered job listing, {full_rows:,} jobs: {full_ms:.1f} ms"
          f" = {full_ms / early_ms:.1f}x the {early_rows:,}-job listing (target <= 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
