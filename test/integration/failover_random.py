"""Seeded random histories of jobs, kills, partitions and failovers on a virtual cluster.

Used by ``test/integration/test_failover_random.py`` (20 scenarios) and by
``tools/soak/soak.py failover`` (many more).  After every step the
invariant of doc/design/failover.md is checked (:class:`Ledger`): no job
id acknowledged by two masters, no config serial with two contents.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from failover_helpers import Ledger, failover, masterd_running, submit
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl, errors
from tools.harness import vcluster

__all__ = ["Scenario", "run_scenario", "settle"]

STEPS = ("job", "job", "job-anywhere", "config", "kill", "revive", "isolate", "heal",
         "failover")


@dataclass
class Scenario:
    """What one seeded history did (for the failure message)."""

    seed: int
    steps: list[str] = field(default_factory=list)


def _master(vc: VirtualCluster) -> str:
    return vcluster.current_master(vc.cluster).name


def settle(vc: VirtualCluster) -> None:
    """Heal every partition, start every node, make sure the master daemon runs."""
    vcluster.heal(vc.cluster)
    vcluster.start(vc.cluster)
    master = _master(vc)
    if not masterd_running(vc, master):
        try:
            daemonctl.start_masterd(vc.paths(master), env=vc.env(master),
                                    extra_args=vc.cluster.masterd_args)
        except errors.GanetiError:
            # the current master's own data is stale: fail over to a candidate
            for name in vc.names:
                if name != master and failover(vc, name)[0] == 0:
                    break


def run_scenario(vc: VirtualCluster, ledger: Ledger, seed: int, *, steps: int = 4,
                 partitions: bool = True, log: Callable[[str], None] | None = None) -> Scenario:
    """One seeded history of ``steps`` steps, checking the invariant after each."""
    rng = random.Random(seed)
    done = Scenario(seed)
    down: set[str] = set()
    choices = [s for s in STEPS if partitions or s not in ("isolate", "heal")]
    for _ in range(steps):
        step = rng.choice(choices)
        master = _master(vc)
        if step in ("job", "job-anywhere", "config"):
            node = master if step != "job-anywhere" else rng.choice(vc.names)
            argv = (("gnt-cluster", "add-tags", f"t{seed}-{len(done.steps)}")
                    if step == "config" else ("gnt-debug", "delay", "0"))
            job, _ = submit(vc, node, *argv, wait=step == "config")
            if job is not None:
                ledger.acked(job, node)
            done.steps.append(f"{step}@{node}={job}")
        elif step == "kill" and not down and not vc.cluster.isolated:
            node = rng.choice(vc.names)
            vcluster.stop(vc.cluster, node)
            down.add(node)
            done.steps.append(f"kill {node}")
        elif step == "revive" and down:
            node = down.pop()
            vcluster.start(vc.cluster, node)
            done.steps.append(f"revive {node}")
        elif step == "isolate" and not down and not vc.cluster.isolated:
            node = rng.choice(vc.names)
            vcluster.isolate(vc.cluster, node)
            done.steps.append(f"isolate {node}")
        elif step == "heal" and vc.cluster.isolated:
            vcluster.heal(vc.cluster)
            done.steps.append("heal")
        elif step == "failover":
            options = [n for n in vc.names
                       if n != master and n not in down and n not in vc.cluster.isolated]
            if options:
                node = rng.choice(options)
                code, _ = failover(vc, node)
                done.steps.append(f"failover {node}: {code}")
        else:
            done.steps.append(f"{step} skipped")
        if log is not None:
            log(f"seed {seed}: {done.steps[-1]}")
        ledger.check(vc)
    settle(vc)
    ledger.check(vc)
    assert masterd_running(vc, _master(vc)), f"no master daemon after {done}"
    assert daemonctl.daemon_pid(vc.paths(_master(vc)), constants.MASTERD)
    return done
