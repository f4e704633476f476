#!/usr/bin/env python3
"""The cost of acknowledging a job only on a quorum of master candidates.

doc/design/replication.md, Invariant 1: ``SubmitJob`` answers once the new
job file is on the master's disk and on a strict majority of the master
candidates.  For 1, 3 and 5 candidates (a virtual cluster of that many
nodes, all candidates, no SSH servers), ``CLIENTS`` clients each submit
``JOBS`` no-op jobs (``OP_TEST_DELAY`` 0 s) one ``SubmitJob`` at a time
(a *burst*); printed per cluster size: the rate until every job of a
burst finished, the submit latency p50/p99, and the no-op job rate
through ``SubmitManyJobs`` (``MANY_ROUNDS`` calls of ``MANY`` jobs, until
all finished, as tools/bench/bench_jobs.py measures it).

Every cluster is made once and kept for the whole run (one worker
process each, running its tree's code); ``--rounds`` bursts go to each
cluster in turn, every round in another order, so that a busy moment of
a shared machine falls on all sizes alike.  Rates are the medians of the
rounds, latencies the percentiles over every submission of all rounds.

Every figure is printed with its ratio to the same tree's *single-node*
figure measured in the same run (one node: the master alone, no other
candidate, so no quorum wait; a noisy machine slows both alike): the
rate, the submit latency p50 and p99, and the ``SubmitManyJobs`` rate, for
1, 3 and 5 candidates.  Target (doc/design/replication.md, "Measurements";
issues 24 and 33): the no-op job rate with 3 candidates at least 0.8 of
the single-node rate.  With ``--baseline DIR`` (a checkout of another
revision, e.g. ``git worktree add /tmp/base main``) every size is
measured for both trees in the same run, alternating, the daemons of each
run from its own tree, and both tables are printed, with each size's rate
against the baseline's at the same size and against the baseline's
single-node rate.  Issues 24 and 33 ask that the no-op rate with 3
candidates stay within 20 % of the single-node rate of the tree before
the quorum write: that tree is ``3ee5522^`` (its replication was
asynchronous; the worker imports its ``vcluster`` from where that tree
kept it and submits the same opcode dict), and the last figure of each
line is that ratio.  A ``SubmitJob`` is
acknowledged once its files are durable on the master's disk and on a
majority of the candidates: the master's batch goes to the candidates'
lanes while it is committed locally (group commit on both sides, see
doc/design/replication.md, "New jobs: the quorum write"), so the
sequential clients' latency measures the slower of the two writes and
the batches queued ahead of it.

Before the clusters are made and after the last round, the CPU time of a
new file in the directory holding the clusters is printed
(:func:`file_create_cost`): every job costs one on every node, and on a
filesystem without a journal it varies twentyfold with what was deleted
there in the minutes before.

Each burst also measures the CPU time the cluster's daemons spent (user
plus system, from ``/proc``, reaped children included) per job, split
into the master daemon and all the other daemons (the node daemons of
every node and their children): the virtual cluster's nodes share the
machine's CPUs, so whatever replication costs a candidate is taken from
the master too, and a CPU-bound run shows it here rather than in the
latency of the quorum (doc/design/replication.md, "Quorum write, seventh
round").

With ``--apart`` (at least two CPUs) every worker, after its warm-up,
puts the master node's processes and its own client threads on the
machine's first CPU and every other node's processes on the others (CPU
affinity, inherited by what they start later): the candidates' copies no
longer take the master's CPU, as on separate machines, while the disk and
its filesystem stay shared.  The single-node figures then have the master
alone on its CPU, so the ratios compare like with like
(doc/design/replication.md, "Quorum write, eighth round").

Run: ``.venv/bin/python tools/bench/bench_quorum.py [--baseline DIR]
[--rounds N] [--sizes 1 3 5] [--apart]`` (a few minutes on a 2-CPU
machine, most of it making the clusters).
"""

from __future__ import annotations

import argparse
import json
import statistics
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

REPO = os.environ.get("BENCH_REPO") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import errors, luxi  # noqa: E402

try:
    from tools.harness import vcluster
except ImportError:     # a baseline tree from before the harness moved out of ganeti/
    from ganeti.tools import vcluster  # type: ignore[no-redef,attr-defined]

#: the worker's no-op opcode, as the parent built it (a baseline tree from
#: before ``ganeti.opcodes.wire`` submits the same dict)
_OP_ENV = "BENCH_QUORUM_OP"

SIZES = (1, 3, 5)
CLIENTS = 8
JOBS = 25
ROUNDS = 6
MANY = 250
MANY_ROUNDS = 2       # SubmitManyJobs calls per measurement of that rate
MANY_MEASURED = 2     # the first rounds also measure the SubmitManyJobs rate


def _noop() -> dict[str, Any]:
    """The no-op job's opcode: from the parent in a worker, else built here."""
    given = os.environ.get(_OP_ENV)
    if given:
        op: dict[str, Any] = json.loads(given)
        return op
    from ganeti.opcodes import wire
    return wire.test_delay(duration=0.0, no_locks=True)


NOOP = _noop()
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


#: the environment variable naming a virtual node's root (ganeti/constants.py)
_ROOT_ENV = b"GANETI_ROOTDIR="


def cluster_processes(directory: str) -> list[tuple[int, str]]:
    """``(pid, node root)`` of every process whose node root (``GANETI_ROOTDIR``)
    lies below ``directory``, the virtual cluster's.

    Its own scan of ``/proc`` rather than :mod:`tools.harness.procscan`: a
    ``--baseline`` worker imports the tools of the baseline's tree, which
    may predate that module.
    """
    prefix = _ROOT_ENV + os.path.abspath(directory).rstrip("/").encode() + b"/"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(prefix):
                found.append((int(entry), os.fsdecode(item[len(_ROOT_ENV):])))
                break
    return found


def daemon_cpu(directory: str) -> dict[str, float]:
    """CPU seconds (user + system, reaped children included) used so far by
    the daemons of the virtual cluster in ``directory``: ``master`` for the
    master daemon, ``others`` for every other process whose node root lies
    below it.  A process gone meanwhile is left out (its parent's reaped
    children count it, as long as the parent lives)."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {"master": 0.0, "others": 0.0}
    for pid, _root in cluster_processes(directory):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # utime, stime, cutime, cstime (fields 14-17 of proc(5))
        seconds = sum(int(x) for x in fields[11:15]) / tick
        used["master" if b"ganeti-masterd" in cmdline else "others"] += seconds
    return used


def apart_cpus(cpus: set[int]) -> tuple[set[int], set[int]]:
    """``--apart``: the CPUs of the master node's processes (and the clients),
    and those of every other node's: the lowest CPU, and the rest."""
    if len(cpus) < 2:
        raise errors.GanetiError("--apart needs at least two CPUs")
    first = min(cpus)
    return {first}, cpus - {first}


def pin_apart(directory: str, master_root: str, master_cpus: set[int],
              other_cpus: set[int]) -> None:
    """Every thread of the cluster's processes on ``master_cpus`` (those of the
    master node, whose root is ``master_root``) or ``other_cpus`` (the other
    nodes'); processes and threads started later inherit it from their parent."""
    master_root = os.path.abspath(master_root)
    for pid, root in cluster_processes(directory):
        cpus = master_cpus if os.path.abspath(root) == master_root else other_cpus
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue                       # gone meanwhile
        for tid in tids:
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:
                pass


#: files made by :func:`file_create_cost`, about the size of a no-op job's file
PROBE_FILES = 200
PROBE_SIZE = 600


def file_create_cost(directory: str, count: int = PROBE_FILES) -> float:
    """CPU seconds per new file of ``PROBE_SIZE`` bytes (create, write, close)
    in a fresh subdirectory of ``directory``, removed again.

    Every job needs a new inode on every node (its file keeps one, in the
    queue and later in the archive), and the clusters' nodes share one
    filesystem.  On ext4 without a journal, allocating an inode skips
    those freed in the last minutes one by one, so after a large deletion
    (an earlier run's clusters, a test suite) a new file there can cost 20
    times what it costs elsewhere, paid once per node and job
    (doc/design/replication.md, "Quorum write, tenth round").  Printed with the figures so that a run on such a
    filesystem can be told from a slower tree.
    """
    probe = tempfile.mkdtemp(prefix="probe-", dir=directory)
    data = b"x" * PROBE_SIZE
    try:
        start = time.process_time()
        for number in range(count):
            fd = os.open(os.path.join(probe, f"f{number}"),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        return (time.process_time() - start) / count
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def burst(socket_path: str, directory: str | None = None) -> dict[str, object]:
    """``CLIENTS`` x ``JOBS`` sequential ``SubmitJob``; the rates, every
    latency (s) and, with the cluster's ``directory``, its daemons' CPU
    time per job (s, :func:`daemon_cpu`) until every job finished."""
    cpu_before = daemon_cpu(directory) if directory else None
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
    out: dict[str, object] = {"ack_rate": len(ids) / acked, "done_rate": len(ids) / finished,
                              "latencies": latencies}
    if directory and cpu_before is not None:
        cpu_after = daemon_cpu(directory)
        for role in ("master", "others"):
            out[f"cpu_{role}"] = (cpu_after[role] - cpu_before[role]) / len(ids)
    return out


def serve(nodes: int, apart: bool = False) -> None:
    """Worker: a ``nodes``-node virtual cluster kept for the whole run; for
    each line of stdin (``burst``, ``many``) one measurement as a JSON line.
    With ``apart``, after the warm-up the master node's processes and this
    worker run on one CPU, the other nodes' on the others (:func:`pin_apart`)."""
    with tempfile.TemporaryDirectory(prefix="bench-quorum-") as tmp:
        directory = os.path.join(tmp, "vc")
        try:
            vc = vcluster.create(directory, nodes, use_ssh=False)
            master_paths = vc.paths(vcluster.current_master(vc).name)
            socket_path = master_paths.master_socket
            # warm-up: connections, first replication pushes
            _client_run(socket_path, 5, [], [], [])
            if apart:
                master_cpus, other_cpus = apart_cpus(os.sched_getaffinity(0))
                pin_apart(directory, master_paths.root, master_cpus, other_cpus)
                os.sched_setaffinity(0, master_cpus)     # the clients' threads inherit it
            print(json.dumps({"ready": nodes}), flush=True)
            for line in sys.stdin:
                if line.strip() == "burst":
                    print(json.dumps(burst(socket_path, directory)), flush=True)
                elif line.strip() == "many":
                    print(json.dumps({"many_rate": _many_rate(socket_path)}), flush=True)
                else:
                    break
        finally:
            vcluster.destroy(directory)


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


class _Worker:
    """A :func:`serve` process running ``tree``'s code on its own cluster."""

    def __init__(self, tree: str, nodes: int, apart: bool = False) -> None:
        env = {**os.environ, "BENCH_REPO": tree, "PYTHONPATH": tree, _OP_ENV: json.dumps(NOOP)}
        self.tree, self.nodes = tree, nodes
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", str(nodes),
             *(["--apart"] if apart else [])], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.bursts: list[dict[str, Any]] = []
        self.many: list[float] = []
        self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise errors.GanetiError(f"The {self.nodes}-node worker of {self.tree} failed"
                                     f" (exit status {self.proc.wait(60)})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, what: str) -> None:
        """One ``burst`` or ``many`` measurement on this worker's cluster."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        answer = self._answer()
        if what == "many":
            self.many.append(float(answer["many_rate"]))
        else:
            self.bursts.append(answer)

    def close(self) -> None:
        """End the worker (it destroys its cluster)."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def figures(self) -> dict[str, float]:
        """Median rates of the bursts, latency p50/p99 over all of them."""
        latencies = [x for b in self.bursts for x in b["latencies"]]
        return {"done_rate": statistics.median(float(b["done_rate"]) for b in self.bursts),
                "ack_rate": statistics.median(float(b["ack_rate"]) for b in self.bursts),
                "p50_ms": 1000 * _percentile(latencies, 50),
                "p99_ms": 1000 * _percentile(latencies, 99),
                "many_rate": statistics.median(self.many),
                # CPU ms per job, median of the bursts
                "cpu_master": 1000 * statistics.median(
                    float(b["cpu_master"]) for b in self.bursts),
                "cpu_others": 1000 * statistics.median(
                    float(b["cpu_others"]) for b in self.bursts)}


def _ratio(value: float, ref: float) -> str:
    return f"{value / ref:4.2f}x" if ref else "  n/a"


def _table(label: str, sizes: list[int], figures: dict[tuple[str, int], dict[str, float]]) -> \
        list[str]:
    """One tree's rows: every figure and its ratio to the same tree's
    single-node figure of the same run."""
    ref = figures[label, 1]
    lines = [f"{label}: ratios (x) against its single-node figures of this run",
             f"  {'candidates':>10s}  {CLIENTS} x SubmitJob rate   latency p50        latency p99"
             "        SubmitManyJobs       CPU ms/job: masterd  others"]
    for nodes in sizes:
        fig = figures[label, nodes]
        lines.append(
            f"  {nodes:10d}  {fig['done_rate']:6.1f} jobs/s {_ratio(fig['done_rate'], ref['done_rate'])}"
            f"  {fig['p50_ms']:6.1f} ms {_ratio(fig['p50_ms'], ref['p50_ms'])}"
            f"  {fig['p99_ms']:6.1f} ms {_ratio(fig['p99_ms'], ref['p99_ms'])}"
            f"  {fig['many_rate']:6.1f} jobs/s {_ratio(fig['many_rate'], ref['many_rate'])}"
            f"  {fig['cpu_master']:19.2f}  {fig['cpu_others']:6.2f}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a checkout of the revision to compare with")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help="bursts per cluster, interleaved across the clusters")
    parser.add_argument("--apart", action="store_true",
                        help="the master node's daemons and the clients on one CPU, the"
                        " other nodes' on the others (separate machines' CPUs, one disk)")
    opts = parser.parse_args()
    if opts.serve:
        serve(opts.serve, opts.apart)
        return 0
    print(f"{CLIENTS} clients x {JOBS} no-op SubmitJob each; load average"
          f" {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    scratch = tempfile.gettempdir()
    print(f"a new {PROBE_SIZE}-byte file in {scratch} (where the clusters live):"
          f" {file_create_cost(scratch) * 1e6:.0f} us of CPU", flush=True)
    if opts.apart:
        master_cpus, other_cpus = apart_cpus(os.sched_getaffinity(0))
        print(f"apart: the master node's processes and the clients on CPU"
              f" {','.join(map(str, sorted(master_cpus)))}, the other nodes' on CPU"
              f" {','.join(map(str, sorted(other_cpus)))}", flush=True)
    sizes = sorted(set(opts.sizes) | {1})
    trees = [("this tree", REPO)]
    if opts.baseline:
        trees.insert(0, ("baseline", os.path.abspath(opts.baseline)))
    workers: dict[tuple[str, int], _Worker] = {}
    try:
        for nodes in sizes:
            for label, tree in trees:
                workers[label, nodes] = _Worker(tree, nodes, opts.apart)
        order = list(workers.values())
        for round_no in range(opts.rounds):   # interleaved, each round in another order
            shift = round_no % len(order)
            for worker in order[shift:] + order[:shift]:
                worker.ask("burst")
            if round_no < MANY_MEASURED:
                for worker in order[shift:] + order[:shift]:
                    worker.ask("many")
        late_cost = file_create_cost(scratch)     # before the clusters are removed
    finally:
        for worker in workers.values():
            worker.close()
    figures = {key: worker.figures() for key, worker in workers.items()}
    print(f"{opts.rounds} interleaved rounds on kept clusters: rates are medians,"
          f" latencies over all rounds; load average now {os.getloadavg()[0]:.1f};"
          f" a new file after the last round {late_cost * 1e6:.0f} us of CPU")
    for label, _ in trees:
        print("\n".join(_table(label, sizes, figures)))
    if opts.baseline:
        for nodes in sizes:
            base, this = figures["baseline", nodes], figures["this tree", nodes]
            ratio = this["done_rate"] / base["done_rate"] if base["done_rate"] else 0.0
            single = figures["baseline", 1]["done_rate"]
            against_single = this["done_rate"] / single if single else 0.0
            print(f"{nodes} candidate(s), this tree against the baseline: rate {ratio:.2f}x"
                  f" of the baseline's at the same size, {against_single:.2f}x of the"
                  f" baseline's single-node rate"
                  f" ({'OK' if against_single >= 1 - TARGET else 'SLOW'}, target >="
                  f" {1 - TARGET:.2f}x), p50 {_ratio(this['p50_ms'], base['p50_ms'])}")
    ref = figures["this tree", 1]
    for nodes in sizes:
        if nodes == 1:
            continue
        ratio = figures["this tree", nodes]["done_rate"] / ref["done_rate"]
        print(f"no-op job rate, {CLIENTS} x SubmitJob with {nodes} candidates: {ratio:.2f}x the"
              f" single-node rate ({'OK' if ratio >= 1 - TARGET else 'SLOW'}, target"
              f" >= {1 - TARGET:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
