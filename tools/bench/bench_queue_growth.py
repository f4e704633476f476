#!/usr/bin/env python3
"""The job rate and the job listing as the queue grows, with the default queue limits.

Two ganeti-masterd (``--no-rpc``), each in a temporary root, with the
default soft/hard queue limits (4,000/5,000 unarchived jobs: past 4,000
the oldest finished jobs are archived once submissions pause, at 5,000 by
the submission itself), durable writes: one starts with
an empty queue (*fresh*), the other is first filled with 6,500 no-op jobs
(*full*).  A *round* submits 500 no-op jobs as ten ``SubmitManyJobs`` of
50 and waits until all have finished; its rate is jobs per second.  The
two queues get ``ROUNDS`` rounds each, alternating (every pair in the
other order), so that a busy moment of a shared machine falls on both
alike; the fresh queue ends with 3,500 jobs (none archived), the full one
with 10,000 (4,000 unarchived, the rest archived).  Printed, each as a
ratio to the fresh queue measured in the same run (a ratio holds on a
noisy machine):

* the median rate of each queue's rounds, and the ratio of the medians;
* the master daemon's CPU time (user and system) per job, median of each
  queue's rounds, and their ratio: steadier than the rates on a shared
  machine, where one round of 500 jobs lasts well under a second;
* the same with the CPU time of the background archiving that follows
  each round of the full queue (it archives once submissions pause,
  doc/protocols/jobs.md, "Queue size"): what a job costs when the queue
  is never idle.  Each round starts after the other master's archiving
  has ended (its queue back within the soft limit), so that no round
  shares the CPUs with it;
* an unfiltered ``Query("job", ["id", "status", "summary"])`` (archived
  jobs included: doc/protocols/jobs.md, "Job summaries"), median of 5,
  after one warm-up, on each queue after its rounds (3,500 and 10,000
  jobs).

Targets (issue "Performance that holds as the queue and the cluster
grow"): rate at 10,000 >= 90 % of the fresh rate; the listing <= 50 ms.
Takes about a minute.

``--decompose`` instead runs four masters side by side, rounds rotating
among them, and prints each one's CPU per job (user and system apart) as
a ratio to the fresh one's: *fresh* and *full* as above, *restarted* (the
full queue, its master restarted after the filling: same files, a new
process) and *noarchive* (filled the same way with ``--queue-limits 20000
25000``: 6,500 to 10,000 unarchived jobs, nothing archived), and the same
with the background archiving after each round.  What the
full queue costs beyond the fresh one then splits into what archiving
adds (full against noarchive) and what the master's own history adds
(full against restarted); doc/protocols/jobs.md, "Queue size".
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

from ganeti import constants, luxi  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402
from masterd_harness import MasterdHandle, start_masterd  # noqa: E402
import benchlib  # noqa: E402

NOOP = wire.test_delay(duration=0.0, no_locks=True)
BATCH = 50
ROUND = 500
ROUNDS = 7
FULL = 10000
#: the queue's default soft limit (the noarchive master's is 20,000)
SOFT = constants.JOB_QUEUE_SIZE_SOFT_LIMIT
#: the soft limit of the ``--decompose`` master that archives nothing
NOARCHIVE_SOFT = 20000


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


def _round(conn: luxi.Client, pid: int) -> tuple[float, float, float]:
    """One round: jobs per second, and the master's user and system CPU
    milliseconds per job."""
    user, system = benchlib.process_times(pid)
    started = time.perf_counter()
    _wait_all(conn, _submit(conn, ROUND))
    rate = ROUND / (time.perf_counter() - started)
    user2, system2 = benchlib.process_times(pid)
    return rate, (user2 - user) * 1000 / ROUND, (system2 - system) * 1000 / ROUND


def _unarchived(handle: MasterdHandle) -> int:
    """Job files in the master's queue directory (its unarchived jobs)."""
    with os.scandir(handle.paths.queue_dir) as entries:
        return sum(1 for entry in entries if entry.name.startswith("job-"))


def _settle(handle: MasterdHandle, pid: int, soft_limit: int,
            timeout: float = 60.0) -> float:
    """Wait until the master's background archiver has brought its queue back
    within ``soft_limit`` (it starts once submissions pause:
    doc/protocols/jobs.md, "Queue size"); its CPU milliseconds per job of a
    round meanwhile.  So that no round shares the CPUs with another master's
    archiving, every round starts settled."""
    user, system = benchlib.process_times(pid)
    deadline = time.monotonic() + timeout
    while _unarchived(handle) > soft_limit:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the queue of {handle.root} stayed past {soft_limit} jobs")
        time.sleep(0.02)
    user2, system2 = benchlib.process_times(pid)
    return (user2 + system2 - user - system) * 1000 / ROUND


def _listing_ms(conn: luxi.Client) -> tuple[float, int]:
    conn.Query("job", ["id", "status", "summary"], None)      # warm-up
    times = []
    rows = 0
    for _ in range(5):
        started = time.perf_counter()
        rows = len(conn.Query("job", ["id", "status", "summary"], None)["data"])
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, rows


def _fill(conn: luxi.Client) -> None:
    """Submit and wait for the jobs a full queue holds before its rounds."""
    filled = 0
    while filled < FULL - ROUNDS * ROUND:
        count = min(2000, FULL - ROUNDS * ROUND - filled)
        _wait_all(conn, _submit(conn, count))
        filled += count


def _soft(variant: str) -> int:
    """The soft queue limit of the ``--decompose`` master ``variant``."""
    return NOARCHIVE_SOFT if variant == "noarchive" else SOFT


def decompose() -> int:
    """The ``--decompose`` run (see the module docstring)."""
    variants = [("fresh", [], False), ("full", [], False), ("restarted", [], True),
                ("noarchive", ["--queue-limits", str(NOARCHIVE_SOFT), str(NOARCHIVE_SOFT + 5000)],
                 False)]
    base = tempfile.mkdtemp(prefix="bench-queue-growth-")
    handles = []
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _, _ in variants}
    try:
        for name, args, _ in variants:
            handles.append(start_masterd(os.path.join(base, name), workers=25,
                                         extra_args=args))
        for (name, _, restart), handle in zip(variants[1:], handles[1:]):
            with luxi.Client(handle.socket_path, rw_timeout=300) as conn:
                _fill(conn)
            if handle.pid is not None:
                _settle(handle, handle.pid, _soft(name))
            if restart:
                handle.restart()
        conns = [luxi.Client(h.socket_path, rw_timeout=300) for h in handles]
        try:
            for index in range(ROUNDS):
                order = list(range(len(handles)))
                order = order[index % len(order):] + order[:index % len(order)]
                for k in order:
                    pid = handles[k].pid
                    if pid is None:
                        raise RuntimeError("a master daemon is not running")
                    _, user, system = _round(conns[k], pid)
                    after = _settle(handles[k], pid, _soft(variants[k][0]))
                    times[variants[k][0]].append((user, system, after))
        finally:
            for conn in conns:
                conn.close()
    finally:
        for handle in handles:
            handle.stop()
        shutil.rmtree(base, ignore_errors=True)

    def medians(name: str) -> tuple[float, float, float, float]:
        rounds = times[name]
        return (statistics.median(u + s for u, s, _ in rounds),
                statistics.median(u for u, _, _ in rounds),
                statistics.median(s for _, s, _ in rounds),
                statistics.median(u + s + a for u, s, a in rounds))

    fresh = medians("fresh")
    print(f"masterd CPU per job, median of {ROUNDS} rounds of {ROUND} (ratio to the fresh"
          " queue); 'with archiving': the round and the background archiving after it:")
    for name, _, _ in variants:
        total, user, system, whole = medians(name)
        print(f"  {name:10s} {total:.2f} ms ({total / fresh[0]:.2f}x)  user {user:.2f} ms"
              f" ({user / fresh[1]:.2f}x)  system {system:.2f} ms ({system / fresh[2]:.2f}x)"
              f"  with archiving {whole:.2f} ms ({whole / fresh[3]:.2f}x)")
    return 0


def main() -> int:
    """Run the benchmark and print the figures."""
    if "--decompose" in sys.argv[1:]:
        return decompose()
    base = tempfile.mkdtemp(prefix="bench-queue-growth-")
    handles = []
    try:
        for name in ("fresh", "full"):
            handles.append(start_masterd(os.path.join(base, name), workers=25))
        with luxi.Client(handles[0].socket_path, rw_timeout=300) as fresh_conn, \
                luxi.Client(handles[1].socket_path, rw_timeout=300) as full_conn:
            _fill(full_conn)
            fresh_rates: list[float] = []
            full_rates: list[float] = []
            fresh_cpu: list[float] = []
            full_cpu: list[float] = []
            fresh_whole: list[float] = []
            full_whole: list[float] = []
            pids: list[int] = []
            for handle in handles:
                if handle.pid is None:
                    raise RuntimeError("a master daemon is not running")
                pids.append(handle.pid)
            _settle(handles[1], pids[1], SOFT)
            pair = [(fresh_conn, handles[0], pids[0], fresh_rates, fresh_cpu, fresh_whole),
                    (full_conn, handles[1], pids[1], full_rates, full_cpu, full_whole)]
            for index in range(ROUNDS):
                for conn, handle, pid, rates, cpus, whole in pair[::-1] if index % 2 else pair:
                    rate, user, system = _round(conn, pid)
                    rates.append(rate)
                    cpus.append(user + system)
                    whole.append(user + system + _settle(handle, pid, SOFT))
            early_ms, early_rows = _listing_ms(fresh_conn)
            full_ms, full_rows = _listing_ms(full_conn)
            unarchived = len(full_conn.Query("job", ["id"], ["!", ["?", "archived"]])["data"])
    finally:
        for handle in handles:
            handle.stop()
        shutil.rmtree(base, ignore_errors=True)
    fresh, full = statistics.median(fresh_rates), statistics.median(full_rates)
    fresh_ms, full_ms_job = statistics.median(fresh_cpu), statistics.median(full_cpu)
    print(f"no-op jobs/s, fresh queue ({early_rows:,} jobs at the end): {fresh:.0f}"
          f" (median of {ROUNDS} rounds of {ROUND}: "
          + " ".join(f"{r:.0f}" for r in fresh_rates) + ")")
    print(f"no-op jobs/s, {full_rows:,} jobs submitted ({unarchived:,} unarchived): {full:.0f}"
          f" (" + " ".join(f"{r:.0f}" for r in full_rates) + ")"
          f" = {full / fresh * 100:.0f} % of the fresh rate (target >= 90 %)")
    print(f"masterd CPU per job (median of the rounds): fresh queue {fresh_ms:.2f} ms,"
          f" {full_rows:,} jobs {full_ms_job:.2f} ms = {full_ms_job / fresh_ms:.2f}x")
    fresh_all, full_all = statistics.median(fresh_whole), statistics.median(full_whole)
    print(f"  with the background archiving after each round: fresh queue {fresh_all:.2f} ms,"
          f" {full_rows:,} jobs {full_all:.2f} ms = {full_all / fresh_all:.2f}x")
    print(f"unfiltered job listing, {early_rows:,} jobs: {early_ms:.1f} ms")
    print(f"unfiltered job listing, {full_rows:,} jobs: {full_ms:.1f} ms"
          f" = {full_ms / early_ms:.1f}x the {early_rows:,}-job listing (target <= 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
