#!/usr/bin/env python3
"""The cost of acknowledging a job only on a quorum of master candidates.

doc/design/replication.md, Invariant 1: ``SubmitJob`` answers once the new
job file is on the master's disk and on a strict majority of the master
candidates.  For 1, 3 and 5 candidates (a virtual cluster of that many
nodes, all candidates, no SSH servers), ``CLIENTS`` clients each submit
``JOBS`` no-op jobs (``OP_TEST_DELAY`` 0 s) one ``SubmitJob`` at a time;
printed per cluster size: the acknowledged-job rate (jobs/s from the first
submission to the last answer), the rate until every job finished, and the
submit latency p50/p99; then the no-op job rate through ``SubmitManyJobs``
(``MANY_ROUNDS`` calls of ``MANY`` jobs, until all finished, as
tools/bench/bench_jobs.py measures it).

With ``--baseline DIR`` (a checkout of another revision, e.g. ``git
worktree add /tmp/base main``) every size is measured for both trees in
the same run, alternating, the daemons of each run from its own tree, and
the change is printed.  As the machine is shared and noisy, every rate is
also printed as a ratio to the *single-node rate* measured in the same
run (one node: the master alone, no other candidate, so no quorum wait;
the baseline tree's when given, else this tree's).  Target
(doc/design/replication.md, "Measurements"): the no-op job rate with 3
candidates at least 0.8 of the single-node rate before the quorum write.
A single ``SubmitJob`` waits for its batch to be confirmed by a majority
of the candidates' lanes (one kept connection each, a durable write on the
node), so the sequential clients' figures measure that round trip;
batches grow with concurrency, so ``SubmitManyJobs`` pays it about once
per call.

Run: ``.venv/bin/python tools/bench/bench_quorum.py [--baseline DIR]
[--rounds N]`` (about a minute per tree, size and round on an idle 2-CPU
machine; with ``--rounds`` every figure is the best of its rounds, which
are interleaved, as other work only ever slows a run down).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.environ.get("BENCH_REPO") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import errors, luxi  # noqa: E402
from ganeti.tools import vcluster  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402

SIZES = (1, 3, 5)
CLIENTS = 8
JOBS = 40
MANY = 250
MANY_ROUNDS = 2
NOOP = wire.test_delay(duration=0.0)
TARGET = 0.20


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def _client_run(socket_path: str, count: int, latencies: list[float], ids: list[int],
                failures: list[str]) -> None:
    try:
        with luxi.Client(socket_path, connect_timeout=10, rw_timeout=120) as cl:
            for _ in range(count):
                t0 = time.monotonic()
                job_id = cl.SubmitJob([NOOP])
                latencies.append(time.monotonic() - t0)
                ids.append(int(job_id))
    except errors.GanetiError as exc:
        failures.append(str(exc))


def _wait_finished(socket_path: str, ids: list[int], deadline: float) -> None:
    with luxi.Client(socket_path, rw_timeout=120) as cl:
        while time.monotonic() < deadline:
            rows = cl.QueryJobs(ids, ["status"])
            if all(row and row[0] in ("success", "error", "canceled") for row in rows):
                return
            time.sleep(0.05)
    raise errors.GanetiError("The no-op jobs did not finish in time")


def measure(nodes: int) -> dict[str, float]:
    """One measurement on a fresh ``nodes``-node virtual cluster."""
    with tempfile.TemporaryDirectory(prefix="bench-quorum-") as tmp:
        directory = os.path.join(tmp, "vc")
        vc = vcluster.create(directory, nodes, use_ssh=False)
        try:
            socket_path = vc.paths(vcluster.current_master(vc).name).master_socket
            # warm-up: connections, first replication pushes
            _client_run(socket_path, 5, [], [], [])
            latencies: list[float] = []
            ids: list[int] = []
            failures: list[str] = []
            threads = [threading.Thread(target=_client_run,
                                        args=(socket_path, JOBS, latencies, ids, failures))
                       for _ in range(CLIENTS)]
            t0 = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(300)
            acked = time.monotonic() - t0
            if failures:
                raise errors.GanetiError(f"Submissions failed: {failures[:3]}")
            _wait_finished(socket_path, ids, time.monotonic() + 300)
            finished = time.monotonic() - t0
            many = _many_rate(socket_path)
        finally:
            vcluster.destroy(directory)
    return {"ack_rate": len(ids) / acked, "done_rate": len(ids) / finished,
            "p50_ms": 1000 * _percentile(latencies, 50),
            "p99_ms": 1000 * _percentile(latencies, 99), "many_rate": many}


def _many_rate(socket_path: str) -> float:
    """No-op jobs/s through ``SubmitManyJobs`` (``MANY_ROUNDS`` calls of
    ``MANY`` jobs, until all finished), as tools/bench/bench_jobs.py measures it."""
    t0 = time.monotonic()
    with luxi.Client(socket_path, rw_timeout=120) as cl:
        ids: list[int] = []
        for _ in range(MANY_ROUNDS):
            ids += [int(job) for ok, job in cl.SubmitManyJobs([[NOOP]] * MANY) if ok]
    _wait_finished(socket_path, ids, time.monotonic() + 300)
    return len(ids) / (time.monotonic() - t0)


def _one(tree: str, nodes: int) -> dict[str, float]:
    """:func:`measure` in a new process running ``tree``'s code."""
    env = {**os.environ, "BENCH_REPO": tree, "PYTHONPATH": tree}
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", str(nodes)],
                         env=env, capture_output=True, text=True, timeout=900, check=False)
    if res.returncode != 0:
        raise errors.GanetiError(f"Measurement of {tree} with {nodes} nodes failed:\n"
                                 f"{res.stdout}{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _line(label: str, fig: dict[str, float], ref: dict[str, float]) -> str:
    return (f"  {label:9s} SubmitManyJobs {fig['many_rate']:6.1f} jobs/s"
            f" ({fig['many_rate'] / ref['many_rate']:4.2f}x);"
            f" {CLIENTS} x SubmitJob: acknowledged {fig['ack_rate']:6.1f} jobs/s, finished"
            f" {fig['done_rate']:6.1f} jobs/s ({fig['done_rate'] / ref['done_rate']:4.2f}x),"
            f" latency p50 {fig['p50_ms']:6.1f} ms p99 {fig['p99_ms']:6.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a checkout of the revision to compare with")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure everything this many times, interleaved; print the"
                        " best of each figure")
    opts = parser.parse_args()
    if opts.one:
        print(json.dumps(measure(opts.one)))
        return 0
    print(f"{CLIENTS} clients x {JOBS} no-op SubmitJob each; load average"
          f" {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    sizes = sorted(set(opts.sizes) | {1})
    trees = [("this tree", REPO)]
    if opts.baseline:
        trees.insert(0, ("baseline", os.path.abspath(opts.baseline)))
    figures: dict[tuple[str, int], dict[str, float]] = {}
    for _ in range(opts.rounds):
        for nodes in sizes:
            for label, tree in trees:
                fig = _one(tree, nodes)
                best = figures.setdefault((label, nodes), fig)
                for key, value in fig.items():   # best of the rounds: noise only slows
                    best[key] = (min if key.endswith("_ms") else max)(best[key], value)
    ref_label = trees[0][0]
    ref = figures[ref_label, 1]
    print(f"best of {opts.rounds} round(s); ratios (x) against the single-node rate of"
          f" {ref_label}, same run; load average now {os.getloadavg()[0]:.1f}")
    for nodes in sizes:
        print(f"{nodes} master candidate(s):")
        for label, _ in trees:
            print(_line(label, figures[label, nodes], ref))
    if 3 in sizes:
        ratio = figures["this tree", 3]["done_rate"] / ref["done_rate"]
        print(f"no-op job rate, {CLIENTS} x SubmitJob with 3 candidates: {ratio:.2f}x the"
              f" single-node rate ({'OK' if ratio >= 1 - TARGET else 'SLOW'}, target"
              f" >= {1 - TARGET:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
