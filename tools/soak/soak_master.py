"""Soak scenario ``master``: many seeded rounds of the master-role fault injection.

The rounds of ``test/integration/test_master_faults.py``
(``test/integration/master_nemesis.py``): clients submit continuously, a
seeded nemesis picks a fault plan per round (a failover killed at a named
fault point, two or three racing takers, the master killed, paused or cut
off during a failover, a node restarted, a failover process killed, a
planned failover under load), the cluster is recovered by the documented
means and the pure checker (``master_history.check``) counts violations
per kind.  ``--master-rounds`` rounds (default 1,000), at most
``--master-time-limit`` seconds.  A fresh virtual cluster every
``--master-rounds-per-cluster`` rounds (its queue stays small), and after
a round that left no working master.  Round ``i`` uses seed ``first + i``,
so ``--master-first-seed SEED --master-rounds 1`` repeats one round.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from master_history import KINDS
from master_nemesis import PLANS, RECOVERY_LIMIT, RoundResult, make_cluster, run_round
from vcluster_harness import VirtualCluster

from tools.harness import vcluster

__all__ = ["MasterFigures", "run_master", "PLANS"]


@dataclass
class MasterFigures:
    """What the master-role soak saw."""

    rounds: int = 0
    wanted: int = 0
    first_seed: int = 0
    acks: int = 0
    failovers: int = 0
    failovers_ok: int = 0
    clusters: int = 0
    worst_recovery: float = 0.0
    partitions: bool = False
    violations: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    bad_rounds: list[str] = field(default_factory=list)
    stopped_early: bool = False

    def failed(self) -> bool:
        return any(self.violations.values())

    def line(self) -> str:
        kinds = " ".join(f"{k}={v}" for k, v in self.violations.items())
        return (f"master: rounds={self.rounds}/{self.wanted} first_seed={self.first_seed}"
                f" acks={self.acks} failovers_ok={self.failovers_ok}/{self.failovers}"
                f" clusters={self.clusters} worst_recovery={self.worst_recovery:.1f}s"
                f" partitions={'yes' if self.partitions else 'simulated'}"
                f" violations={sum(self.violations.values())} {kinds}"
                + (" stopped_early" if self.stopped_early else ""))

    def add(self, result: RoundResult) -> None:
        self.rounds += 1
        self.acks += len(result.history.acks)
        self.failovers += len(result.failovers)
        self.failovers_ok += sum(1 for _, code in result.failovers if code == 0)
        after = result.history.recovered_after
        self.worst_recovery = max(self.worst_recovery,
                                  RECOVERY_LIMIT if after is None else after)
        for kind, count in result.counts().items():
            self.violations[kind] = self.violations.get(kind, 0) + count
        if result.violations:
            self.bad_rounds.append(f"seed {result.seed} plan {result.plan}: "
                                   + "; ".join(str(v) for v in result.violations[:3]))


def run_master(workdir: str, *, rounds: int, rng: random.Random, time_limit: float,
               log: Callable[[str], None], first_seed: int | None = None,
               plan: str | None = None, rounds_per_cluster: int = 25,
               nodes: int = 4) -> MasterFigures:
    """Run the rounds; every violation is counted (the run goes on, and fails at the end)."""
    figures = MasterFigures(wanted=rounds, partitions=vcluster.partition_support() is None)
    figures.first_seed = first_seed if first_seed is not None else rng.randrange(1 << 30)
    deadline = time.monotonic() + time_limit
    vc: VirtualCluster | None = None
    earlier: dict[int, str] = {}
    used = 0
    try:
        for idx in range(rounds):
            if time.monotonic() > deadline:
                figures.stopped_early = True
                break
            if vc is None or used >= rounds_per_cluster:
                if vc is not None:
                    vc.close()
                figures.clusters += 1
                vc = make_cluster(os.path.join(workdir, f"vc{figures.clusters}"), nodes=nodes)
                earlier, used = {}, 0
            seed = figures.first_seed + idx
            result = run_round(vc, seed, plan, earlier=earlier)
            used += 1
            earlier.update({a.job_id: a.marker for a in result.history.acks})
            figures.add(result)
            log(f"master: {result.summary()}")
            if result.violations:       # what happened, to read with the daemons' logs
                for step in result.steps:
                    log(f"master:   {step}")
            for violation in result.violations[:10]:
                log(f"master:   VIOLATION {violation}")
            if result.history.recovered_after is None:
                used = rounds_per_cluster        # no master left: a fresh cluster next
    finally:
        if vc is not None:
            vc.close()
    return figures
