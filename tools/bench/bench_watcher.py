#!/usr/bin/env python3
"""One watcher pass with nothing to do on a 3-node virtual cluster (issue 12).

The figure is the wall time of the master's pass: ``daemons/ganeti-watcher``
started as cron starts it (a new Python process, with the master node's
environment) until it exits, with 0 and with 100 running diskless fake
instances; median of 5 passes after one warm-up pass.  The master daemon runs
with its live-data cache off (``--node-info-max-age 0``): cron passes lie five
minutes apart, so every pass asks the nodes.  The passes of the
other two nodes are timed too (node daemon check and hooks only).

Target: < 0.3 s per master pass (Ganeti 3.0.2 on this kind of machine:
3.0 s with 0 and 4.0 s with 100 instances).

Run: ``.venv/bin/python tools/bench/bench_watcher.py`` (about half a minute).
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

from ganeti import constants, luxi  # noqa: E402
from tools.harness import vcluster  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402

INSTANCES = 100
RUNS = 5
TARGET = 0.3


def _create_op(name: str, node: str) -> dict[str, Any]:
    return wire.instance_create(instance_name=name, disk_template="diskless", os_type="tinyos",
                                pnode=node, start=True, no_install=True, name_check=False,
                                ip_check=False, disks=[], nics=[{}])


def _wait_all(cl: luxi.Client, ids: list[int], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = cl.QueryJobs(ids, ["status"])
        if all(row[0] in constants.JOBS_FINALIZED for row in rows):
            bad = [i for i, row in zip(ids, rows) if row[0] != constants.JOB_STATUS_SUCCESS]
            if bad:
                raise SystemExit(f"jobs failed: {bad}")
            return
        time.sleep(0.2)
    raise SystemExit("jobs did not finish")


def _pass(vc: vcluster.VCluster, node: vcluster.VNode) -> float:
    env = {**os.environ, **vcluster.node_env(vc, node)}
    started = time.perf_counter()
    res = subprocess.run([sys.executable, vcluster.WATCHER], env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.perf_counter() - started
    if res.returncode != 0:
        raise SystemExit(f"watcher on {node.name} failed: {res.stderr}")
    return elapsed


def _median_pass(vc: vcluster.VCluster, node: vcluster.VNode) -> float:
    _pass(vc, node)    # warm-up: page cache, the state file's first write
    return statistics.median(_pass(vc, node) for _ in range(RUNS))


def _submitted_jobs(vc: vcluster.VCluster) -> int:
    cl = luxi.Client(vc.paths(vc.master_node).master_socket)
    return len(cl.QueryJobs(None, ["id"]))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-watcher-") as tmp:
        directory = os.path.join(tmp, "vc")
        try:
            vc = vcluster.create(directory, 3, use_ssh=False,
                                 masterd_args=["--node-info-max-age", "0"])
            master = vc.master_node
            others = [n for n in vc.nodes if n is not master]
            figures = {}
            jobs_before = _submitted_jobs(vc)
            figures[0] = _median_pass(vc, master)
            node_pass = statistics.median(_median_pass(vc, n) for n in others)
            cl = luxi.Client(vc.paths(master).master_socket)
            created = cl.SubmitManyJobs([[_create_op(f"inst{k:03d}.vcluster",
                                                     vc.nodes[k % 3].name)]
                                         for k in range(INSTANCES)])
            _wait_all(cl, [job for _ok, job in created])
            jobs_before = _submitted_jobs(vc)
            figures[INSTANCES] = _median_pass(vc, master)
            idle = _submitted_jobs(vc) == jobs_before
        finally:
            vcluster.destroy(directory)
    for count, seconds in figures.items():
        verdict = "ok" if seconds < TARGET else "over"
        print(f"master pass, {count:3d} instances: {seconds:.3f} s  (target < {TARGET} s: "
              f"{verdict})")
    print(f"non-master node pass:          {node_pass:.3f} s")
    print(f"no jobs submitted by the idle passes: {idle}")
    return 0 if all(s < TARGET for s in figures.values()) and idle else 1


if __name__ == "__main__":
    sys.exit(main())
