#!/usr/bin/env python3
"""Benchmark the CLI path: ``gnt-debug delay 0`` round trip and jobs/s.

Starts a real ganeti-masterd on a temporary root (through the integration
test harness), then runs ``scripts/gnt-debug delay 0`` as separate
processes:

* round trip: median (and p90) wall time of one command, start to exit;
* jobs/s: N commands one after the other (one CLI process per job), and
  the same with 4 commands in parallel.

Installed Python code has cached bytecode; this tree runs with
PYTHONDONTWRITEBYTECODE set, so the commands run with a private
``PYTHONPYCACHEPREFIX`` (a temporary directory, nothing is written in the
tree) after one warm-up run.  The figure without bytecode caching is
printed too.  Takes well under 60 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

from masterd_harness import start_masterd  # noqa: E402

GNT_DEBUG = os.path.join(REPO, "scripts", "gnt-debug")


def _run_delay(env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, GNT_DEBUG, "delay", "0"], env=env,
                          capture_output=True, timeout=60)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"gnt-debug delay failed: {proc.stderr.decode()}")
    return elapsed


def _round_trip(env: dict[str, str], runs: int) -> tuple[float, float]:
    times = sorted(_run_delay(env) for _ in range(runs))
    return statistics.median(times), times[int(len(times) * 0.9) - 1]


def _jobs_per_second(env: dict[str, str], jobs: int, parallel: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda _: _run_delay(env), range(jobs)))
    return jobs / (time.perf_counter() - start)


def main() -> int:
    """Run the benchmark and print the figures."""
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        handle = start_masterd(tmp, workers=8)
        try:
            cached = dict(handle.env)
            cached.pop("PYTHONDONTWRITEBYTECODE", None)
            cached["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
            uncached = dict(handle.env, PYTHONDONTWRITEBYTECODE="1")
            _run_delay(cached)  # warm-up: compiles the bytecode cache
            med, p90 = _round_trip(cached, 20)
            print(f"gnt-debug delay 0 round trip (bytecode cached): median {med * 1000:.1f} ms,"
                  f" p90 {p90 * 1000:.1f} ms (20 runs)")
            med_u, _ = _round_trip(uncached, 10)
            print(f"gnt-debug delay 0 round trip (no bytecode cache): median"
                  f" {med_u * 1000:.1f} ms (10 runs)")
            seq = _jobs_per_second(cached, 40, 1)
            print(f"jobs/s, one CLI process per job, sequential: {seq:.1f} (40 jobs)")
            par = _jobs_per_second(cached, 40, 4)
            print(f"jobs/s, one CLI process per job, 4 in parallel: {par:.1f} (40 jobs)")
        finally:
            handle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
