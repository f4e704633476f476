#!/usr/bin/env python3
"""Job queue benchmarks against a real ganeti-masterd in a temporary root.

Prints: no-op jobs/s through SubmitManyJobs (1,000 jobs until all are
finished, durable writes), WaitForJobChange latency (job end -> client
sees it), and masterd startup time and RSS with 10,000 unarchived
finished jobs on disk.  Finishes in well under a minute.
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

from ganeti import luxi, serializer  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402
from masterd_harness import prepare_root, start_masterd  # noqa: E402
import benchlib  # noqa: E402

NOOP = wire.test_delay(duration=0.0, no_locks=True)


def _wait_all(conn: luxi.Client, ids: list[int], deadline: float) -> None:
    benchlib.wait_jobs(conn, ids, deadline)


def bench_throughput(tmp: str, count: int = 1000, rounds: int = 2) -> list[float]:
    handle = start_masterd(tmp, workers=25)
    rates = []
    try:
        with luxi.Client(handle.socket_path, rw_timeout=120) as conn:
            for _ in range(rounds):
                t0 = time.monotonic()
                res = conn.SubmitManyJobs([[NOOP] for _ in range(count)])
                ids = [r[1] for r in res if r[0]]
                assert len(ids) == count, res[:3]
                _wait_all(conn, ids, t0 + 60)
                rates.append(count / (time.monotonic() - t0))
            statuses = conn.QueryJobs(None, ["status"])
            assert all(s == ["success"] for s in statuses), "some no-op job failed"
    finally:
        handle.stop()
    return rates


def bench_wfjc_latency(tmp: str, samples: int = 20) -> list[float]:
    handle = start_masterd(tmp, workers=4)
    latencies = []
    try:
        with luxi.Client(handle.socket_path, rw_timeout=60) as conn:
            for _ in range(samples):
                job_id = conn.SubmitJob([wire.test_delay(duration=0.05, no_locks=True)])
                prev = None
                while True:
                    res = conn.WaitForJobChangeOnce(job_id, ["status", "end_ts"], prev, -1, 10)
                    seen = time.time()
                    if res == "nochange":
                        continue
                    prev = res[0]
                    if prev[0] == "success":
                        end = prev[1][0] + prev[1][1] / 1e6
                        latencies.append(seen - end)
                        break
    finally:
        handle.stop()
    return latencies


def _finished_job(job_id: int) -> bytes:
    ts = [int(time.time()) - 100, 0]
    op = {"input": {**NOOP, "dry_run": None, "debug_level": None, "priority": 0, "depends": None,
                    "comment": None, "reason": [["gnt:bench", "", 0]], "on_master": True,
                    "on_nodes": [], "on_node_uuids": None, "repeat": 0, "interruptible": False,
                    "no_locks": True},
          "status": "success", "result": None, "log": [], "priority": 0,
          "start_timestamp": ts, "exec_timestamp": ts, "end_timestamp": ts}
    return serializer.dumps_bytes({"id": job_id, "ops": [op], "received_timestamp": ts,
                                   "start_timestamp": ts, "end_timestamp": ts})


def bench_startup(tmp: str, count: int = 10000) -> tuple[float, float, int]:
    paths = prepare_root(os.path.join(tmp, "root"))
    for job_id in range(1, count + 1):
        with open(os.path.join(paths.queue_dir, f"job-{job_id}"), "wb") as fh:
            fh.write(_finished_job(job_id))
    with open(paths.queue_serial_file, "w") as fh:
        fh.write(f"{count}\n")
    # limits above the jobs written: all of them stay in the queue (past
    # the default soft limit the master would archive them once idle)
    handle = start_masterd(tmp, workers=25, extra_args=["--queue-limits", str(2 * count),
                                                        str(2 * count + 1000)])
    try:
        ready = _ready_time(handle.log_path)
        with open(f"/proc/{handle.pid}/status") as fh:
            rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        with luxi.Client(handle.socket_path, rw_timeout=60) as conn:
            loaded = len(conn.QueryJobs(None, ["id"]))
        assert loaded == count, loaded
    finally:
        handle.stop()
    return handle.startup_time or 0.0, ready, rss


def _ready_time(log_path: str) -> float:
    with open(log_path, encoding="utf-8", errors="replace") as fh:
        for line in reversed(fh.read().splitlines()):
            if "Master daemon ready in" in line:
                return float(line.rsplit(" ", 1)[1].rstrip("s"))
    return float("nan")


def main() -> int:
    base = tempfile.mkdtemp(prefix="bench-jobs-")
    try:
        rates = bench_throughput(os.path.join(base, "tp"))
        print(f"no-op jobs via SubmitManyJobs(1000), until all finished: "
              f"{', '.join(f'{r:.0f}' for r in rates)} jobs/s (durable writes, 25 workers)")
        lat = bench_wfjc_latency(os.path.join(base, "wfjc"))
        print(f"WaitForJobChange latency (job end -> client): median {statistics.median(lat) * 1000:.2f} ms,"
              f" max {max(lat) * 1000:.2f} ms over {len(lat)} jobs")
        total, ready, rss = bench_startup(os.path.join(base, "startup"))
        print(f"masterd with 10,000 unarchived finished jobs: socket answers after {total:.2f} s"
              f" (queue+config load {ready:.2f} s), RSS {rss / 1024:.1f} MiB")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
