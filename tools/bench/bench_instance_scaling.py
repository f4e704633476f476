#!/usr/bin/env python3
"""How instance operations grow with their count, on a 3-node virtual cluster (issue 33, point 5).

For each count N (default 20, 100 and 1000), on a fresh cluster: create N
diskless fake instances (one ``OP_INSTANCE_CREATE`` job each, submitted at
once with ``SubmitManyJobs``, no install, not started), start all N, stop
all N.  Prints the seconds of each batch and, for every count after the
first, its ratio to the first count's figure and to the previous
count's, next to the ratio of the work: an operation that grows linearly
has a time ratio no larger than the work ratio (the issue's bound: 5.5x
for 5x the work).
The baseline is measured in the same run, so a slow machine moves both.
Next to the seconds it prints the CPU seconds each batch cost the
cluster's daemons (``/proc/PID/stat``: the master daemon, and all of
them, node daemons' forked children included), with the same ratios:
on a shared machine the CPU figures move much less with the load than
the elapsed ones.

Run: ``.venv/bin/python tools/bench/bench_instance_scaling.py`` (about
3-5 minutes on 2 cores); ``--counts 20 100`` for a quick one.  Prints
figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ganeti import constants, daemonctl, luxi  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402
from tools.harness import vcluster  # noqa: E402

import benchlib  # noqa: E402

import bench_instances  # noqa: E402

OPERATIONS = ("create", "start", "stop")
#: the fake hypervisor's memory per node (MiB): 1000 running instances of
#: 128 MiB fit on three nodes
NODE_MEMORY = 256 * 1024
#: jobs whose status one poll asks for: a window at the head of the pending
#: ones, so that the client's polling does not itself grow with the batch
POLL_WINDOW = 64


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU of ``pid`` and of its waited-for children (0 if gone)."""
    if pid is None:
        return 0.0
    try:
        return benchlib.process_cpu(pid, reaped=True)
    except OSError:
        return 0.0


def _daemon_cpu(vc: Any) -> tuple[float, float]:
    """CPU seconds so far of the master daemon and of all the cluster's daemons."""
    master = total = 0.0
    for node in vc.nodes:
        paths = vc.paths(node)
        for daemon in (constants.NODED, constants.MASTERD):
            used = _cpu_seconds(daemonctl.daemon_pid(paths, daemon))
            total += used
            if daemon == constants.MASTERD:
                master += used
    return master, total


def _run_jobs(cl: luxi.Client, ops: list[dict[str, Any]]) -> float:
    """Submit one job per opcode at once and wait for all; the elapsed seconds."""
    started = time.perf_counter()
    ids = []
    for ok, value in cl.SubmitManyJobs([[op] for op in ops]):
        if not ok:
            raise RuntimeError(f"submit failed: {value}")
        ids.append(int(value))
    deadline = time.monotonic() + max(60.0, len(ops) * 1.0)
    pending = ids
    while pending:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pending)} jobs not finished in time")
        window = pending[:POLL_WINDOW]
        statuses = dict(cl.QueryJobs(window, ["id", "status"]))
        bad = [jid for jid in window if statuses[jid] in ("error", "canceled")]
        if bad:
            raise RuntimeError(f"job {bad[0]} failed: {cl.QueryJobs(bad[:1], ['opresult'])}")
        done = {jid for jid in window if statuses[jid] in constants.JOBS_FINALIZED}
        pending = [jid for jid in pending if jid not in done]
        if window and not done:
            time.sleep(0.02)
    return time.perf_counter() - started


def _measure(count: int) -> dict[str, float]:
    """Seconds of each batch operation on ``count`` instances (a fresh cluster)."""
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        directory = os.path.join(tmp, "vc")
        try:
            vc = vcluster.create(directory, 3, use_ssh=False)
            cl = luxi.Client(vc.paths(vc.master_node).master_socket)
            nodes = [n.name for n in vc.nodes]
            names = [f"inst{i:05d}.example.com" for i in range(count)]
            batches = {
                "create": [bench_instances._create_op(name, nodes[i % len(nodes)])
                           for i, name in enumerate(names)],
                "start": [wire.instance_startup(instance_name=n) for n in names],
                "stop": [wire.instance_shutdown(instance_name=n) for n in names],
            }
            out: dict[str, float] = {}
            for op, ops in batches.items():
                master, total = _daemon_cpu(vc)
                out[op] = _run_jobs(cl, ops)
                master_after, total_after = _daemon_cpu(vc)
                out[f"{op} master cpu"] = master_after - master
                out[f"{op} cpu"] = total_after - total
            return out
        finally:
            vcluster.destroy(directory)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[20, 100, 1000])
    args = parser.parse_args()
    os.environ["GANETI_FAKE_HV_MEMORY"] = str(NODE_MEMORY)   # the node daemons inherit it
    results: dict[int, dict[str, float]] = {}
    for count in args.counts:
        results[count] = _measure(count)
        print(f"{count} instances: " + ", ".join(
            f"{op} {results[count][op]:.2f} s" for op in OPERATIONS), flush=True)
        print(f"{count} instances, CPU s (master/all daemons): " + ", ".join(
            f"{op} {results[count][op + ' master cpu']:.2f}/{results[count][op + ' cpu']:.2f}"
            for op in OPERATIONS), flush=True)
    base = args.counts[0]
    for prev, count in zip(args.counts, args.counts[1:]):
        for ref in dict.fromkeys((base, prev)):
            print(f"{count} vs {ref} (work {count / ref:.0f}x): " + ", ".join(
                f"{op} {results[count][op] / results[ref][op]:.2f}x" for op in OPERATIONS))
            print(f"{count} vs {ref} CPU (master/all daemons): " + ", ".join(
                f"{op} {_ratio(results[count], results[ref], op + ' master cpu')}/"
                f"{_ratio(results[count], results[ref], op + ' cpu')}" for op in OPERATIONS))
    return 0


def _ratio(new: dict[str, float], old: dict[str, float], key: str) -> str:
    return f"{new[key] / old[key]:.2f}x" if old[key] > 0 else "-"


if __name__ == "__main__":
    sys.exit(main())
