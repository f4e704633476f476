#!/usr/bin/env python3
"""The cost of job filter rules on the submit rate (doc/jobfilters.md).

One ganeti-masterd (``--no-rpc``) in a temporary root, durable writes.  A
*round* submits 500 no-op jobs as ten ``SubmitManyJobs`` of 50 and waits
until all have finished; its rate is jobs per second.  Rounds alternate
between no rule and 50 rules installed (``ReplaceFilter``; each rule has
an ``opcode`` and a ``reason`` predicate that a no-op job does not match,
so every job is checked against all 50, at submission and when it
starts), ``--pairs`` pairs, in alternating order; printed: the median
rate of each and the median of the pairs' ratios (a ratio of two rounds
run back to back holds better on a noisy machine; target: the 50 rules
cost under 5 %, i.e. a ratio >= 0.95).  Also printed: the master daemon's CPU time per job in
each kind of round (steadier than the wall rate on a shared machine), and
the time of one check of a job against the 50 rules (the pure part,
:func:`ganeti.jqueue.filters.verdict`).

Run: ``.venv/bin/python tools/bench/bench_filters.py [--pairs N]`` (about
a minute).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import timeit

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, _REPO)
sys.path.insert(0, os.path.join(_REPO, "test", "integration"))

from ganeti import luxi  # noqa: E402
from ganeti.jqueue import filters as jfilters  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402
from masterd_harness import start_masterd  # noqa: E402
import benchlib  # noqa: E402

NOOP = wire.test_delay(duration=0.0, no_locks=True)
BATCH = 50
ROUND = 500
RULES = 50


def _predicates(idx: int) -> list:
    return [["opcode", ["=", "OP_ID", f"OP_INSTANCE_CREATE_{idx}"]],
            ["reason", ["=~", "reason", f"maintenance {idx}"]]]


def _round(conn: luxi.Client) -> float:
    started = time.perf_counter()
    ids: list[int] = []
    for _ in range(ROUND // BATCH):
        res = conn.SubmitManyJobs([[NOOP] for _ in range(BATCH)])
        ids.extend(r[1] for r in res)
    benchlib.wait_jobs(conn, ids, time.monotonic() + 300)
    return ROUND / (time.perf_counter() - started)


def _pure_check_us() -> float:
    rules = jfilters.ordered(
        jfilters.FilterRule(f"u{i}", 0, i, _predicates(i), jfilters.PAUSE, []) for i in range(RULES))
    job = jfilters.JobView(7, [dict(NOOP, reason=[["gnt:client:gnt-debug", "delay", 1]])])
    loops = 2000
    return timeit.timeit(lambda: jfilters.verdict(rules, job, {}), number=loops) / loops * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--rules", type=int, default=RULES,
                        help="rules in the filtered rounds (0: an A/A run, for the noise)")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="bench-filters-")
    handle = start_masterd(base, workers=25)
    plain: list[float] = []
    filtered: list[float] = []
    cpu: dict[bool, list[float]] = {False: [], True: []}     # masterd CPU ms per job
    pid = handle.pid
    if pid is None:
        raise RuntimeError("masterd did not start")
    try:
        with luxi.Client(handle.socket_path, rw_timeout=300) as conn:
            _round(conn)                                       # warm-up
            for pair in range(args.pairs):
                for with_rules in ((False, True) if pair % 2 == 0 else (True, False)):
                    uuids = [conn.ReplaceFilter(None, i, _predicates(i), "PAUSE", [])
                             for i in range(args.rules)] if with_rules else []
                    before = benchlib.process_cpu(pid)
                    (filtered if with_rules else plain).append(_round(conn))
                    cpu[with_rules].append((benchlib.process_cpu(pid) - before) / ROUND * 1000)
                    for uuid in uuids:
                        conn.DeleteFilter(uuid)
    finally:
        handle.stop()
        shutil.rmtree(base, ignore_errors=True)
    none, fifty = statistics.median(plain), statistics.median(filtered)
    ratio = statistics.median(f / p for f, p in zip(filtered, plain))
    print(f"no-op jobs/s, no filter rule: {none:.0f} (median of {len(plain)} rounds of {ROUND};"
          f" {', '.join(f'{r:.0f}' for r in plain)})")
    print(f"no-op jobs/s, {args.rules} rules: {fifty:.0f} ({', '.join(f'{r:.0f}' for r in filtered)})")
    print(f"with {args.rules} rules / without, median of the {len(plain)} pairs' ratios:"
          f" {ratio:.2f}x (target >= 0.95x)")
    cpu_plain, cpu_rules = statistics.median(cpu[False]), statistics.median(cpu[True])
    print(f"masterd CPU per job: {cpu_plain:.2f} ms without rules, {cpu_rules:.2f} ms with"
          f" {args.rules} = {cpu_rules / cpu_plain:.2f}x (medians; the wall rate above is"
          " noisier)")
    print(f"one job checked against {RULES} rules: {_pure_check_us():.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
