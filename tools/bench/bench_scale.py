#!/usr/bin/env python3
"""Scale: 200 nodes, 10,000 instances, 10,000 finished jobs (issue 18, doc/scale.md).

Builds a virtual cluster of ``--nodes`` node daemons (really running,
written into the config with ``vcluster create --offline-add``), fills the
config with ``--instances`` diskless fake-hypervisor instances spread over
the nodes, half of them running (benchlib.fill_config, the offline path),
puts ``--jobs`` finished no-op jobs in the queue, and prints every figure
of the issue's target table with the machine's core count.

Run: ``.venv/bin/python tools/bench/bench_scale.py`` (2-6 minutes on
2 cores); ``--nodes 20 --instances 1000 --jobs 1000`` for a quick one.
``--candidates 9`` promotes nine nodes to master candidates first, so
that every config change includes its push to them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import constants, daemonctl, luxi  # noqa: E402
from tools.harness import vcluster  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import fill_config, process_cpu, use_bytecode_cache  # noqa: E402

JOB_TIMEOUT = 600.0
SUBMIT_BATCH = 1000
#: rounds of SubmitManyJobs(SUBMIT_BATCH) for each job rate
RATE_ROUNDS = 5
INSTANCE_DEFAULT = ["name", "hypervisor", "os", "pnode", "status", "oper_ram"]
INSTANCE_STATIC = "name,os,pnode,be/maxmem,admin_state"


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _median(fn: Callable[[], Any], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _command(vc: vcluster.VCluster, argv: list[str]) -> Callable[[], None]:
    env = {**os.environ, **vcluster.node_env(vc, vc.master_node)}
    script = os.path.join(REPO, "scripts", argv[0])

    def run() -> None:
        subprocess.run([sys.executable, script, *argv[1:]], env=env, check=True,
                       stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return run


def _client(vc: vcluster.VCluster) -> luxi.Client:
    return luxi.Client(vc.paths(vc.master_node).master_socket)


def _wait_jobs(cl: luxi.Client, ids: list[int]) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT
    pending = list(ids)
    while pending:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pending)} jobs not finished after {JOB_TIMEOUT}s")
        rows = cl.QueryJobs(pending, ["id", "status"])
        failed = [jid for jid, status in rows
                  if status in (constants.JOB_STATUS_ERROR, constants.JOB_STATUS_CANCELED)]
        if failed:
            raise RuntimeError(f"jobs failed: {failed[:5]}: {cl.QueryJobs(failed[:1], ['opresult'])}")
        pending = [jid for jid, status in rows if status not in constants.JOBS_FINALIZED]
        if pending:
            time.sleep(0.05)


def _submit_noops(cl: luxi.Client, count: int) -> list[int]:
    ids: list[int] = []
    for start in range(0, count, SUBMIT_BATCH):
        n = min(SUBMIT_BATCH, count - start)
        res = cl.SubmitManyJobs([[wire.test_delay(duration=0, no_locks=True)]
                                 for _ in range(n)])
        for ok, value in res:
            if not ok:
                raise RuntimeError(f"submit failed: {value}")
            ids.append(int(value))
    return ids


def _masterd_cpu_s(vc: vcluster.VCluster) -> float:
    """CPU seconds (user + system) the master daemon used so far."""
    pid = daemonctl.daemon_pid(vc.paths(vc.master_node), constants.MASTERD)
    if pid is None:
        raise RuntimeError("master daemon not running")
    return process_cpu(pid)


def _job_rate(vc: vcluster.VCluster, cl: luxi.Client) -> tuple[float, float, list[int]]:
    """No-op jobs per second through SubmitManyJobs(1,000), until all are
    finished; the master's CPU milliseconds per job; the job ids."""
    cpu = _masterd_cpu_s(vc)
    started = time.perf_counter()
    ids = _submit_noops(cl, SUBMIT_BATCH)
    _wait_jobs(cl, ids)
    rate = SUBMIT_BATCH / (time.perf_counter() - started)
    return rate, (_masterd_cpu_s(vc) - cpu) * 1000 / SUBMIT_BATCH, ids


def _rates(vc: vcluster.VCluster, cl: luxi.Client) -> tuple[float, float]:
    """The best rate of :data:`RATE_ROUNDS` :func:`_job_rate` (the machine is
    shared: the best run is the one least slowed by others; with 3 rounds the
    ratio of two bests still moved between 84 % and 210 % from run to run)
    and the median CPU per job; their jobs are archived after each, so the
    queue is the same for every run."""
    results = []
    for _ in range(RATE_ROUNDS):
        rate, cpu, ids = _job_rate(vc, cl)
        results.append((rate, cpu))
        for job_id in ids:
            cl.ArchiveJob(job_id)
    return (max(r[0] for r in results), statistics.median(r[1] for r in results))


def _cpu_median(vc: vcluster.VCluster, fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    """Median wall seconds of ``fn`` and the master's CPU seconds per run."""
    cpu = _masterd_cpu_s(vc)
    wall = _median(fn, runs)
    return wall, (_masterd_cpu_s(vc) - cpu) / runs


def _instance_cycle(vc: vcluster.VCluster, name: str, runs: int) -> float:
    """Median seconds of ``gnt-instance startup`` (the instance is stopped in between)."""
    start = _command(vc, ["gnt-instance", "startup", name])
    stop = _command(vc, ["gnt-instance", "shutdown", "--timeout", "0", name])
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        start()
        samples.append(time.perf_counter() - started)
        stop()
    return statistics.median(samples)


def _masterd_rss_mib(vc: vcluster.VCluster) -> float:
    pid = daemonctl.daemon_pid(vc.paths(vc.master_node), constants.MASTERD)
    if pid is None:
        raise RuntimeError("master daemon not running")
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _restart_masterd(vc: vcluster.VCluster) -> float:
    """Seconds from starting ganeti-masterd until LUXI answers."""
    paths = vc.paths(vc.master_node)
    daemonctl.stop_daemon(paths, constants.MASTERD, timeout=30.0)
    env = vcluster.node_env(vc, vc.master_node)
    started = time.perf_counter()
    daemonctl.start_masterd(paths, env={**os.environ, **env}, extra_args=vc.masterd_args,
                            timeout=120.0)
    return time.perf_counter() - started


def _candidates(vc: vcluster.VCluster) -> list[str]:
    rows = _client(vc).Query("node", ["name", "master_candidate"], None)["data"]
    return [row[0][1] for row in rows
            if row[1][1] and row[0][1] != vc.master_node.name]


def _promote(vc: vcluster.VCluster, count: int) -> None:
    """Make ``count`` nodes besides the master master candidates: the pool
    size is raised (the master promotes nodes to fill it), then ``gnt-node
    modify -C yes`` for any missing; the real paths, each new candidate
    gets the config and the queue."""
    _command(vc, ["gnt-cluster", "modify", "-C", str(count + 1)])()
    have = _candidates(vc)
    for node in vc.nodes:
        if len(have) >= count:
            break
        if node.name != vc.master_node.name and node.name not in have:
            _command(vc, ["gnt-node", "modify", "-C", "yes", node.name])()
            have.append(node.name)
    if len(have) < count:
        raise RuntimeError(f"only {len(have)} master candidates, {count} asked")
    _log(f"{len(have)} master candidates besides the master")


def run(opts: argparse.Namespace, directory: str) -> dict[str, float]:
    fig: dict[str, float] = {}
    started = time.monotonic()
    # as installed: modules byte-compiled once, not on every command
    use_bytecode_cache(os.path.join(directory, "pycache"))
    limit = str(opts.jobs + 4 * SUBMIT_BATCH)
    vc = vcluster.create(directory, opts.nodes, offline_add=True,
                         masterd_args=["--queue-limits", limit, str(int(limit) + 1000)],
                         log=_log)
    fig["create_s"] = time.monotonic() - started
    _log(f"cluster of {opts.nodes} nodes in {fig['create_s']:.0f} s")
    fill_config(vc, 10)
    if opts.candidates:
        _promote(vc, opts.candidates)
    cl = _client(vc)
    first = "cfg00000.example.com"
    fig["start_10_s"] = _instance_cycle(vc, first, opts.runs)
    _log(f"instance start with 10 instances: {fig['start_10_s']:.3f} s")
    started = time.monotonic()
    fill_config(vc, opts.instances, half_running=True)
    _log(f"{opts.instances} instances written in {time.monotonic() - started:.0f} s")
    cl = _client(vc)
    # both rates with the full config: only the queue differs; one round
    # first, not counted, so that one-time costs (the job code's first
    # imports, worker threads) do not fall on the empty queue's figure
    for job_id in _job_rate(vc, cl)[2]:
        cl.ArchiveJob(job_id)
    fig["rate_empty"], fig["job_cpu_empty_ms"] = _rates(vc, cl)
    _log(f"no-op jobs/s, empty queue: {fig['rate_empty']:.0f}"
         f" ({fig['job_cpu_empty_ms']:.2f} ms masterd CPU a job)")
    started = time.monotonic()
    _wait_jobs(cl, _submit_noops(cl, opts.jobs))
    _log(f"{opts.jobs} jobs run in {time.monotonic() - started:.0f} s")
    fig["rate_full"], fig["job_cpu_full_ms"] = _rates(vc, cl)
    _log(f"no-op jobs/s, {opts.jobs} jobs queued: {fig['rate_full']:.0f}"
         f" ({fig['job_cpu_full_ms']:.2f} ms masterd CPU a job)")
    fig["startup_s"] = _restart_masterd(vc)
    cl = _client(vc)
    fig["rss_mib"] = _masterd_rss_mib(vc)
    _log(f"masterd startup {fig['startup_s']:.2f} s, RSS {fig['rss_mib']:.0f} MiB")
    njobs = len(cl.Query("job", ["id"], ["!", ["?", "archived"]])["data"])
    fig["jobs_in_queue"] = njobs
    fig["job_list_s"] = _median(_command(vc, ["gnt-job", "list"]), opts.runs)
    fig["luxi_job_query_s"], fig["cpu_job_query_s"] = _cpu_median(
        vc, lambda: cl.Query("job", ["id", "status", "summary"], ["!", ["?", "archived"]]),
        opts.runs)
    fig["cluster_info_s"] = _median(cl.QueryClusterInfo, 200)
    fig["inst_static_s"] = _median(_command(vc, ["gnt-instance", "list", "-o",
                                                 INSTANCE_STATIC]), opts.runs)
    fig["luxi_inst_static_s"], fig["cpu_inst_static_s"] = _cpu_median(
        vc, lambda: cl.Query("instance", INSTANCE_STATIC.split(","), None), opts.runs)
    fig["inst_live_s"] = _median(_command(vc, ["gnt-instance", "list"]), opts.runs)
    fig["luxi_inst_live_s"], fig["cpu_inst_live_s"] = _cpu_median(
        vc, lambda: cl.Query("instance", INSTANCE_DEFAULT, None), opts.runs)
    fig["node_list_s"] = _median(_command(vc, ["gnt-node", "list"]), opts.runs)
    _log("queries measured")
    started = time.perf_counter()
    verify = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gnt-cluster"),
                             "verify"], env={**os.environ, **vcluster.node_env(vc, vc.master_node)},
                            capture_output=True, stdin=subprocess.DEVNULL, text=True)
    fig["verify_s"] = time.perf_counter() - started
    _log(f"verify {fig['verify_s']:.1f} s, exit {verify.returncode}; last lines:")
    for line in (verify.stdout + verify.stderr).splitlines()[-5:]:
        _log(f"  {line}")
    fig["start_full_s"] = _instance_cycle(vc, first, opts.runs)
    fig["rss_mib_end"] = _masterd_rss_mib(vc)
    return fig


def report(opts: argparse.Namespace, fig: dict[str, float]) -> None:
    n, i, j = opts.nodes, opts.instances, int(fig["jobs_in_queue"])
    ms = 1000.0
    rows = [
        (f"gnt-job list, {j} jobs", f"{fig['job_list_s'] * ms:.0f} ms", "<= 50 ms",
         fig["job_list_s"] <= 0.05),
        ("  (LUXI Query job id,status,summary; masterd CPU)",
         f"{fig['luxi_job_query_s'] * ms:.1f} ms; {fig['cpu_job_query_s'] * ms:.0f} ms", "", None),
        ("QueryClusterInfo over LUXI", f"{fig['cluster_info_s'] * ms:.2f} ms", "<= 0.5 ms",
         fig["cluster_info_s"] <= 0.0005),
        (f"gnt-instance list static fields, {i} instances", f"{fig['inst_static_s']:.3f} s",
         "<= 0.2 s", fig["inst_static_s"] <= 0.2),
        ("  (LUXI Query; masterd CPU)",
         f"{fig['luxi_inst_static_s']:.3f} s; {fig['cpu_inst_static_s']:.3f} s", "", None),
        (f"gnt-instance list default fields, {i} instances, {n} nodes",
         f"{fig['inst_live_s']:.3f} s", "<= 1 s", fig["inst_live_s"] <= 1.0),
        ("  (LUXI Query; masterd CPU)",
         f"{fig['luxi_inst_live_s']:.3f} s; {fig['cpu_inst_live_s']:.3f} s", "", None),
        (f"gnt-node list, {n} nodes (live)", f"{fig['node_list_s']:.3f} s", "<= 0.5 s",
         fig["node_list_s"] <= 0.5),
        (f"gnt-cluster verify, {n} nodes, {i} instances", f"{fig['verify_s']:.1f} s", "<= 10 s",
         fig["verify_s"] <= 10.0),
        (f"instance start, {i} vs 10 instances, {opts.candidates} candidates",
         f"{fig['start_full_s']:.3f} s vs {fig['start_10_s']:.3f} s"
         f" ({fig['start_full_s'] / fig['start_10_s']:.2f}x)", "<= 3x",
         fig["start_full_s"] <= 3 * fig["start_10_s"]),
        (f"masterd startup, {j} jobs, {i} instances", f"{fig['startup_s']:.2f} s", "<= 3 s",
         fig["startup_s"] <= 3.0),
        ("masterd RSS (after start; at the end)",
         f"{fig['rss_mib']:.0f} MiB; {fig['rss_mib_end']:.0f} MiB", "<= 150 MiB",
         max(fig["rss_mib"], fig["rss_mib_end"]) <= 150),
        (f"no-op jobs/s, SubmitManyJobs(1000), {opts.jobs} queued vs empty",
         f"{fig['rate_full']:.0f} vs {fig['rate_empty']:.0f}"
         f" ({fig['rate_full'] / fig['rate_empty'] * 100:.0f} %)", ">= 90 %",
         fig["rate_full"] >= 0.9 * fig["rate_empty"]),
        ("  (masterd CPU a job, queued vs empty)",
         f"{fig['job_cpu_full_ms']:.2f} vs {fig['job_cpu_empty_ms']:.2f} ms", "", None),
    ]
    load = os.getloadavg()[0]
    print(f"\nscale figures on {os.cpu_count()} cores, load average {load:.1f}"
          f" (cluster built in {fig['create_s']:.0f} s)")
    for name, value, target, ok in rows:
        verdict = "" if ok is None else ("ok" if ok else "MISSED")
        print(f"{name:58} {value:>28} {target:>10} {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--instances", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5, help="runs per median")
    parser.add_argument("--candidates", type=int, default=0, metavar="N",
                        help="promote N nodes to master candidates (every config"
                             " change then waits for its push to them)")
    parser.add_argument("--keep", metavar="DIR", help="build the cluster in DIR and leave it")
    opts = parser.parse_args(argv)
    started = time.monotonic()
    if opts.keep:
        fig = run(opts, os.path.abspath(opts.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            directory = os.path.join(tmp, "vc")
            try:
                fig = run(opts, directory)
            finally:
                vcluster.destroy(directory)
    report(opts, fig)
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
