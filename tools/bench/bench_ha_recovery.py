#!/usr/bin/env python3
"""Time from a node's death to its HA instances running again (node loss recovery).

A 4-node virtual cluster (no SSH servers, the fake hypervisor, the
virtual cluster's out-of-band program as every node's ``oob_program``)
with ``gnt-cluster modify --ha-recovery yes``; the node loss timeout is
the cluster's default (20 s) unless ``--timeout`` says otherwise.  Each
round puts N ``sharedfile`` instances tagged
``ganeti:watcher:autorepair:failover`` on one node, kills every daemon of
that node with SIGKILL and keeps it down, and runs the clock until each
of the N instances runs on another node (what the nodes' hypervisors say,
not the configuration): nobody runs any command, the master notices the
silence, the candidates confirm, the master powers the node off and
fails the instances over (doc/ha.md, "Node loss recovery").  Between
rounds the dead node is powered on (``gnt-node power on``) and set
online, and the instances are removed.  Printed: each round's time, with the machine's load.
Target (issue 29): under 30 s with the default settings.

Run: ``.venv/bin/python tools/bench/bench_ha_recovery.py [--instances 3 10]
[--timeout SECONDS]`` (about a minute a round).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import constants, errors, hypervisor  # noqa: E402
from tools.harness import crash, oob, vcluster  # noqa: E402

TARGET_S = 30.0
TAG = "ganeti:watcher:autorepair:failover"
NOCHECK = ("--no-name-check", "--no-ip-check", "--no-wait-for-sync")


def _gnt(vc: vcluster.VCluster, *argv: str) -> str:
    master = vcluster.current_master(vc)
    return vcluster.run_gnt(vc, list(argv), node=master.name, check=True).stdout


def _running_elsewhere(vc: vcluster.VCluster, names: list[str], dead: str) -> set[str]:
    """The instances of ``names`` that a node other than ``dead`` runs."""
    found: set[str] = set()
    for node in vc.nodes:
        if node.name == dead:
            continue
        hv = hypervisor.get_hypervisor(constants.HT_FAKE, vc.paths(node))
        for name, info in hv.get_all_instances_info().items():
            if name in names and info.get("state") == "running":
                found.add(name)
    return found


def _round(vc: vcluster.VCluster, victim: vcluster.VNode, count: int, serial: int) -> float:
    names = [f"ha{serial}-{k}.example.com" for k in range(count)]
    for name in names:
        _gnt(vc, "gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=1M", "-o",
             "tinyos", "-B", "maxmem=128", "-n", victim.name, *NOCHECK, name)
        _gnt(vc, "gnt-instance", "add-tags", name, TAG)
    time.sleep(3.0)       # a lease round or two: the master has heard every node
    started = time.monotonic()
    crash.kill_node_daemons(vc.paths(victim))
    deadline = started + 300.0
    while len(_running_elsewhere(vc, names, victim.name)) < count:
        if time.monotonic() > deadline:
            raise errors.GanetiError(f"{count} instances not recovered within 300 s")
        time.sleep(0.1)
    took = time.monotonic() - started
    _gnt(vc, "gnt-node", "power", "on", victim.name)     # boots it (its daemons start)
    _gnt(vc, "gnt-node", "modify", "-O", "no", "--force", victim.name)
    for name in names:
        _gnt(vc, "gnt-instance", "remove", "-f", "--ignore-failures", name)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, nargs="+", default=[3, 10])
    parser.add_argument("--timeout", type=int, default=None,
                        help="ha_node_timeout in seconds (default: the cluster's, 20)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ha-") as tmp:
        directory = os.path.join(tmp, "vc")
        print("Creating a 4-node virtual cluster...", flush=True)
        vc = vcluster.create(directory, 4, use_ssh=False)
        try:
            path = oob.install(vc)
            _gnt(vc, "gnt-cluster", "modify", "--node-parameters", f"oob_program={path}")
            extra = ["--ha-node-timeout", str(opts.timeout)] if opts.timeout else []
            _gnt(vc, "gnt-cluster", "modify", "--ha-recovery", "yes", *extra)
            master = vcluster.current_master(vc)
            victim = next(n for n in vc.nodes if n.name != master.name)
            results = []
            for serial, count in enumerate(opts.instances):
                took = _round(vc, victim, count, serial)
                results.append((count, took))
                print(f"  {count} instances on {victim.name}: running elsewhere"
                      f" {took:.2f}s after the kill", flush=True)
            timeout = opts.timeout or "default 20"
            summary = ", ".join(f"{count} instances {took:.2f}s" for count, took in results)
            worst = max(took for _, took in results)
            print(f"node death to its HA instances running again (4 nodes, OOB fence,"
                  f" node loss timeout {timeout} s): {summary} (target < {TARGET_S:g}s)"
                  f" {'OK' if worst < TARGET_S else 'SLOW'}; load average"
                  f" {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        finally:
            vcluster.destroy(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
