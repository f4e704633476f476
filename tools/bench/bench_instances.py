#!/usr/bin/env python3
"""Instance throughput and query latency on a 3-node virtual cluster.

Figures (issue 6):

* creation of 200 diskless fake instances submitted as parallel jobs
  (``SubmitManyJobs``, one ``OP_INSTANCE_CREATE`` per job) -> instances/s;
* start, then stop, of 100 of them (one job per instance, all submitted
  at once) -> seconds per batch;
* ``gnt-instance list`` with 1,000 instances: median of 5 runs of the
  command (a new Python process, as a user runs it) with the default
  fields (which include the live ``status``/``oper_ram``) and with static
  fields only, plus the LUXI ``Query`` behind it in-process;
* master daemon RSS (``VmRSS``) with 1,000 and with 10,000 instances in the
  config (the extra instances are written with ConfigWriter while masterd
  is stopped, then masterd is started on that config and queried once).

Targets: >= 50 creations/s, start or stop of 100 instances < 2 s,
``gnt-instance list`` with 1,000 instances < 0.15 s.

Run: ``.venv/bin/python tools/bench/bench_instances.py`` (about 1-2 min).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import constants, daemonctl, luxi  # noqa: E402
from tools.harness import vcluster  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import fill_config  # noqa: E402

CREATE_COUNT = 200
START_COUNT = 100
LIST_COUNT = 1000
RSS_COUNT = 10000
RUNS = 5
JOB_TIMEOUT = 60.0


def _create_op(name: str, node: str) -> dict[str, Any]:
    return wire.instance_create(instance_name=name, disk_template="diskless", os_type="tinyos",
                                pnode=node, start=False, no_install=True, name_check=False,
                                ip_check=False, disks=[], nics=[{}])


def _run_jobs(cl: luxi.Client, ops: list[dict[str, Any]]) -> float:
    """Submit one job per opcode at once, wait for all; returns the elapsed seconds."""
    started = time.perf_counter()
    submitted = cl.SubmitManyJobs([[op] for op in ops])
    ids = []
    for ok, value in submitted:
        if not ok:
            raise RuntimeError(f"submit failed: {value}")
        ids.append(int(value))
    deadline = time.monotonic() + JOB_TIMEOUT
    pending = list(ids)
    while pending:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pending)} jobs not finished after {JOB_TIMEOUT}s")
        statuses = cl.QueryJobs(pending, ["id", "status"])
        pending = [jid for jid, status in statuses
                   if status not in constants.JOBS_FINALIZED]
        failed = [jid for jid, status in statuses if status in (constants.JOB_STATUS_ERROR,
                                                                constants.JOB_STATUS_CANCELED)]
        if failed:
            res = cl.QueryJobs(failed[:1], ["opresult"])
            raise RuntimeError(f"{len(failed)} jobs failed, e.g. {failed[0]}: {res}")
        if pending:
            time.sleep(0.02)
    return time.perf_counter() - started


def _median(fn, runs: int = RUNS) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _command(vc: vcluster.VCluster, argv: list[str]):
    env = {**os.environ, **vcluster.node_env(vc, vc.master_node)}
    script = os.path.join(REPO, "scripts", argv[0])

    def run() -> None:
        subprocess.run([sys.executable, script, *argv[1:]], env=env, check=True,
                       stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return run


def _masterd_rss_kib(vc: vcluster.VCluster) -> int:
    pid = daemonctl.daemon_pid(vc.paths(vc.master_node), constants.MASTERD)
    if pid is None:
        raise RuntimeError("master daemon not running")
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")




def main() -> int:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-inst-") as tmp:
        directory = os.path.join(tmp, "vc")
        try:
            vc = vcluster.create(directory, 3, use_ssh=False)
            master = vc.paths(vc.master_node)
            cl = luxi.Client(master.master_socket)
            names = [f"inst{i:04d}.example.com" for i in range(CREATE_COUNT)]
            nodes = [n.name for n in vc.nodes]
            ops = [_create_op(name, nodes[i % len(nodes)]) for i, name in enumerate(names)]
            elapsed = _run_jobs(cl, ops)
            figures["create_per_s"] = CREATE_COUNT / elapsed
            print(f"created {CREATE_COUNT} in {elapsed:.2f} s", flush=True)
            batch = names[:START_COUNT]
            figures["start_100_s"] = _run_jobs(cl, [
                wire.instance_startup(instance_name=n) for n in batch])
            running = cl.Query("instance", ["status"], None)["data"]
            assert sum(1 for row in running if row[0][1] == "running") == START_COUNT
            figures["stop_100_s"] = _run_jobs(cl, [
                wire.instance_shutdown(instance_name=n) for n in batch])
            # keep 100 running for the live-field list
            _run_jobs(cl, [wire.instance_startup(instance_name=n) for n in batch])
            cfg_size = os.path.getsize(master.config_file)
            figures["config_kib_200"] = cfg_size / 1024
            fill_config(vc, LIST_COUNT)
            cl = luxi.Client(master.master_socket)
            assert len(cl.Query("instance", ["name"], None)["data"]) == LIST_COUNT
            figures["list_default_s"] = _median(_command(vc, ["gnt-instance", "list"]))
            figures["list_static_s"] = _median(_command(
                vc, ["gnt-instance", "list", "-o", "name,os,pnode,be/maxmem,admin_state"]))
            default = ["name", "hypervisor", "os", "pnode", "status", "oper_ram"]
            figures["luxi_query_live_s"] = _median(lambda: cl.Query("instance", default, None))
            figures["luxi_query_static_s"] = _median(
                lambda: cl.Query("instance", ["name", "os", "pnode", "be/maxmem"], None))
            figures["rss_mib_1000"] = _masterd_rss_kib(vc) / 1024
            figures["config_kib_1000"] = os.path.getsize(master.config_file) / 1024
            fill_config(vc, RSS_COUNT)
            cl = luxi.Client(master.master_socket)
            started = time.perf_counter()
            assert len(cl.Query("instance", ["name", "status"], None)["data"]) == RSS_COUNT
            figures["query_live_10000_s"] = time.perf_counter() - started
            figures["rss_mib_10000"] = _masterd_rss_kib(vc) / 1024
            figures["config_kib_10000"] = os.path.getsize(master.config_file) / 1024
        finally:
            vcluster.destroy(directory)
    print(f"instance creations ({CREATE_COUNT} parallel jobs): "
          f"{figures['create_per_s']:.1f}/s (target >= 50)")
    print(f"start {START_COUNT} instances: {figures['start_100_s']:.2f} s (target < 2)")
    print(f"stop {START_COUNT} instances: {figures['stop_100_s']:.2f} s (target < 2)")
    print(f"gnt-instance list, {LIST_COUNT} instances, default (live) fields, median of {RUNS}:"
          f" {figures['list_default_s']:.3f} s (target < 0.15)")
    print(f"gnt-instance list, {LIST_COUNT} instances, static fields: "
          f"{figures['list_static_s']:.3f} s")
    print(f"LUXI Query {LIST_COUNT} instances: live {figures['luxi_query_live_s'] * 1000:.1f} ms,"
          f" static {figures['luxi_query_static_s'] * 1000:.1f} ms")
    print(f"LUXI Query {RSS_COUNT} instances with status (first query after start): "
          f"{figures['query_live_10000_s']:.2f} s")
    print(f"masterd RSS: {figures['rss_mib_1000']:.1f} MiB with {LIST_COUNT} instances, "
          f"{figures['rss_mib_10000']:.1f} MiB with {RSS_COUNT}")
    print(f"config.data size: {figures['config_kib_200']:.0f} KiB (200), "
          f"{figures['config_kib_1000']:.0f} KiB ({LIST_COUNT}), "
          f"{figures['config_kib_10000']:.0f} KiB ({RSS_COUNT})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
