#!/usr/bin/env python3
"""Time from ``gnt-cluster master-failover`` to the new master accepting jobs.

A 5-node virtual cluster (no SSH servers, default RPC timeouts and master
lease) gets 1,000 finished jobs in its queue; then, three times in a row,
a planned failover to the next node is started (``gnt-cluster
master-failover`` as that node, a new process as an operator runs it) and
the clock stops when a ``SubmitJob`` on the new master's LUXI socket is
acknowledged.  Printed: each failover's time, split into the command
itself and the wait for the first acknowledged job, and the median (with
the machine's load average: the figure is mostly Python start-up of the
new master daemon, which a busy machine stretches).  ``BENCH_VERBOSE=1``
prints each failover's steps with their times.
Target (issue 15): under 3 s.

``--load RATE``: during each failover a client submits RATE no-op jobs a
second to whichever node is the master (retrying a refused one after the
pause of its rate); printed besides: jobs acknowledged and refused during
the failover (a planned failover drains the old master: its refusals are
the retryable ``MasterFailingOverError``; doc/design/failover.md).

Run: ``.venv/bin/python tools/bench/bench_failover.py [--load 50]`` (about 60 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import errors, luxi  # noqa: E402
from tools.harness import vcluster  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402

NODES = 5
JOBS = 1000
TARGET_S = 3.0
DELAY_OP = wire.test_delay(duration=0.0, no_locks=True)


def _fill_queue(vc: vcluster.VCluster, count: int) -> None:
    client = luxi.Client(vc.paths(vc.master_node).master_socket)
    ids = []
    for start in range(0, count, 100):
        ids += [job for ok, job in client.SubmitManyJobs([[DELAY_OP]] * min(100, count - start))
                if ok]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        rows = client.QueryJobs(ids[-50:], ["status"])
        if all(row and row[0] in ("success", "error") for row in rows):
            return
        time.sleep(0.2)
    raise errors.GanetiError("The queued jobs did not finish")


def _wait_replicated(vc: vcluster.VCluster, timeout: float = 120.0) -> None:
    """Wait until every node holds the master's newest job file as the master has it
    (a planned failover otherwise first waits for that replication)."""
    master = vc.paths(vcluster.current_master(vc))

    def newest(paths) -> bytes | None:
        names = [n for n in os.listdir(paths.queue_dir) if n.startswith("job-")]
        if not names:
            return None
        last = max(names, key=lambda n: int(n[4:]))
        with open(os.path.join(paths.queue_dir, last), "rb") as fh:
            return fh.read()

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        want = newest(master)
        if all(newest(vc.paths(n)) == want for n in vc.nodes):
            return
        time.sleep(0.2)
    raise errors.GanetiError("The job files did not reach every candidate")


def _first_job(socket_path: str, deadline: float) -> int:
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            return int(luxi.Client(socket_path, connect_timeout=1.0,
                                   rw_timeout=10.0).SubmitJob([DELAY_OP]))
        except errors.GanetiError as exc:
            last = exc
            time.sleep(0.01)
    raise errors.GanetiError(f"The new master did not accept a job: {last}")


def _failover(vc: vcluster.VCluster, target: vcluster.VNode) -> tuple[float, float, int]:
    env = {**os.environ, **vcluster.node_env(vc, target), "GANETI_FAILOVER_TIMES": "1"}
    started = time.monotonic()
    res = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gnt-cluster"),
                          "master-failover"], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    command = time.monotonic() - started
    if os.environ.get("BENCH_VERBOSE"):
        print(res.stdout)
    if res.returncode != 0:
        raise errors.GanetiError(f"master-failover to {target.name} failed:\n"
                                 f"{res.stdout}{res.stderr}")
    job = _first_job(vc.paths(target).master_socket, time.monotonic() + 60)
    return command, time.monotonic() - started, job


class _Load:
    """Submits ``rate`` no-op jobs a second to the current master in a thread."""

    def __init__(self, vc: vcluster.VCluster, rate: float) -> None:
        self.vc = vc
        self.rate = rate
        self.stop = threading.Event()
        self.acked = 0
        self.refused: dict[str, int] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.monotonic()
        count = 0
        while not self.stop.is_set():
            count += 1
            try:
                master = vcluster.current_master(self.vc)
                luxi.Client(self.vc.paths(master).master_socket, connect_timeout=1.0,
                            rw_timeout=20.0).SubmitJob([DELAY_OP])
                self.acked += 1
            except errors.GanetiError as exc:
                kind = type(exc).__name__
                self.refused[kind] = self.refused.get(kind, 0) + 1
            # paced by the clock: a slow submission is not followed by a full pause
            self.stop.wait(max(0.0, start + count / self.rate - time.monotonic()))

    def __enter__(self) -> _Load:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=float, default=0.0, metavar="RATE",
                        help="no-op jobs a second submitted during each failover")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        directory = os.path.join(tmp, "vc")
        print(f"Creating a {NODES}-node virtual cluster...", flush=True)
        vc = vcluster.create(directory, NODES, use_ssh=False)
        try:
            print(f"Putting {JOBS} jobs in the queue...", flush=True)
            _fill_queue(vc, JOBS)
            totals = []
            for target in (vc.nodes[1], vc.nodes[2], vc.nodes[0]):
                _wait_replicated(vc)
                old = vcluster.current_master(vc).name
                if opts.load > 0:
                    with _Load(vc, opts.load) as load:
                        time.sleep(1.0)
                        command, total, job = _failover(vc, target)
                    extra = (f"; under {opts.load:g} jobs/s: {load.acked} acknowledged,"
                             f" refused {load.refused or 'none'}")
                else:
                    command, total, job = _failover(vc, target)
                    extra = ""
                totals.append(total)
                print(f"  {old} -> {target.name}: command {command:.2f}s, first job"
                      f" ({job}) accepted after {total:.2f}s{extra}", flush=True)
            median = statistics.median(totals)
            cpu_load = os.getloadavg()[0]
            print(f"failover to accepting jobs, {NODES} nodes, {JOBS} jobs in the queue"
                  f"{f', {opts.load:g} jobs/s submitted' if opts.load > 0 else ''}:"
                  f" median {median:.2f}s (target < {TARGET_S:g}s)"
                  f" {'OK' if median < TARGET_S else 'SLOW'}; load average {cpu_load:.1f}"
                  f" on {os.cpu_count()} CPUs")
        finally:
            vcluster.destroy(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
