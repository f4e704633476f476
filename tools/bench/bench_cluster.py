#!/usr/bin/env python3
"""Cluster command latency on 3-node and 50-node virtual clusters.

For each cluster size, the median of 10 runs of:

* ``gnt-cluster info`` and ``gnt-node list`` as commands (a new Python
  process each time, as a user runs them);
* the LUXI calls behind them in-process (``QueryClusterInfo``; ``Query``
  of the default node list fields, which fans ``node_info`` out to every
  node).

``gnt-node list`` needs live data from every node.  The master reuses a
node's answer for up to 5 s unless an operation touched the node
(``ganeti-masterd --node-info-max-age``, ``ganeti/cmdlib/liveinfo.py``):
the default rows are measured that way (the first of the 10 runs asks
every node), and the "always fetched" rows with the master restarted
with ``--node-info-max-age 0``, so every run fans out to all nodes.

The 3-node cluster is a full one (SSH servers, ``gnt-node add``); the
50-node one is built with ``vcluster create --offline-add`` (50 node
daemons, nodes written into the config directly) to stay within the time
budget.  Targets (issue 5): both commands under 60 ms.

Run: ``.venv/bin/python tools/bench/bench_cluster.py`` (about 40 s).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import cli, luxi  # noqa: E402
from ganeti.client import gnt_node  # noqa: E402
from tools.harness import vcluster  # noqa: E402

RUNS = 10
TARGET_MS = 60.0


def _median_ms(fn, runs: int = RUNS) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _command(vc: vcluster.VCluster, argv: list[str]):
    env = {**os.environ, **vcluster.node_env(vc, vc.master_node)}
    script = os.path.join(REPO, "scripts", argv[0])

    def run() -> None:
        subprocess.run([sys.executable, script, *argv[1:]], env=env, check=True,
                       stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return run


def bench(nodes: int, **create_kwargs) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix=f"bench-vc{nodes}-") as tmp:
        directory = os.path.join(tmp, "vc")
        started = time.monotonic()
        try:
            vc = vcluster.create(directory, nodes, **create_kwargs)
            created = time.monotonic() - started
            cl = luxi.Client(vc.paths(vc.master_node).master_socket)
            fields = cli.parse_fields(None, gnt_node.LIST_DEFAULT_FIELDS)
            figures = {
                "create_s": created,
                "gnt-cluster info": _median_ms(_command(vc, ["gnt-cluster", "info"])),
                "gnt-node list": _median_ms(_command(vc, ["gnt-node", "list"])),
                "luxi QueryClusterInfo": _median_ms(cl.QueryClusterInfo),
                "luxi Query node": _median_ms(lambda: cl.Query("node", fields, None)),
                "luxi Query node name only": _median_ms(lambda: cl.Query("node", ["name"],
                                                                          None)),
            }
            # the same with live data fetched from every node on every run
            master = vc.master_node.name
            vcluster.stop(vc, master)
            vc.masterd_args = [*vc.masterd_args, "--node-info-max-age", "0"]
            vcluster.start(vc, master)
            cl = luxi.Client(vc.paths(vc.master_node).master_socket)
            figures["gnt-node list, live data always fetched"] = _median_ms(
                _command(vc, ["gnt-node", "list"]))
            figures["luxi Query node, node_info fan-out every time"] = _median_ms(
                lambda: cl.Query("node", fields, None))
        finally:
            vcluster.destroy(directory)
    return figures


def main() -> int:
    results = {3: bench(3), 50: bench(50, offline_add=True)}
    print(f"{'measure (median of %d)' % RUNS:56} {'3 nodes':>10} {'50 nodes':>10}")
    for key in results[3]:
        unit = "s" if key.endswith("_s") else "ms"
        name = "cluster creation" if key == "create_s" else key
        print(f"{name + ' (' + unit + ')':56} {results[3][key]:10.1f} {results[50][key]:10.1f}")
    for key in ("gnt-cluster info", "gnt-node list", "gnt-node list, live data always fetched"):
        for size, figures in results.items():
            verdict = "ok" if figures[key] < TARGET_MS else "ABOVE TARGET"
            print(f"target {key} < {TARGET_MS:.0f} ms on {size} nodes: {figures[key]:.1f} ms"
                  f" {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
