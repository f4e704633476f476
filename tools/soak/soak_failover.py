"""Soak scenario ``failover``: many seeded histories of jobs, kills, partitions, failovers.

The same histories as ``test/integration/test_failover_random.py``
(``test/integration/failover_random.py``), on one 3-node virtual cluster,
for ``--failover-scenarios`` seeds (default 200) or ``--failover-time-limit``
seconds.  After every step: no job id acknowledged by two masters, no
config serial written twice with different content (doc/design/failover.md).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from failover_helpers import MASTERD_ARGS, Ledger
from failover_random import run_scenario
from vcluster_harness import VirtualCluster

from tools.harness import vcluster

__all__ = ["FailoverFigures", "run_failover"]


@dataclass
class FailoverFigures:
    """What the failover soak saw."""

    scenarios: int = 0
    steps: int = 0
    failovers: int = 0
    masters: int = 0
    jobs: int = 0
    serials: int = 0
    partitions: bool = False
    violations: list[str] = field(default_factory=list)
    stopped_early: bool = False

    def failed(self) -> bool:
        return bool(self.violations)

    def line(self) -> str:
        return (f"failover: scenarios={self.scenarios} steps={self.steps}"
                f" failovers_ok={self.failovers} masters={self.masters} jobs={self.jobs}"
                f" config_serials={self.serials} partitions={'yes' if self.partitions else 'no'}"
                f" violations={len(self.violations)}"
                + (" stopped_early" if self.stopped_early else ""))


def run_failover(workdir: str, *, scenarios: int, rng: random.Random, time_limit: float,
                 steps: int = 6, log: Callable[[str], None]) -> FailoverFigures:
    """Run the histories; every invariant break is a violation (and stops the run)."""
    figures = FailoverFigures(partitions=vcluster.partition_support() is None)
    ledger = Ledger()
    deadline = time.monotonic() + time_limit
    with VirtualCluster(workdir + "/vc", nodes=3, masterd_args=MASTERD_ARGS) as vc:
        for _ in range(scenarios):
            if time.monotonic() > deadline:
                figures.stopped_early = True
                break
            seed = rng.randrange(1 << 30)
            try:
                done = run_scenario(vc, ledger, seed, steps=steps,
                                    partitions=figures.partitions)
            except AssertionError as exc:
                figures.violations.append(f"seed {seed}: {exc}")
                log(f"failover: VIOLATION with seed {seed}: {exc}")
                break
            figures.scenarios += 1
            figures.steps += len(done.steps)
            figures.failovers += sum(1 for s in done.steps
                                     if s.startswith("failover") and s.endswith(": 0"))
            if figures.scenarios % 10 == 0:
                log(f"failover: {figures.scenarios} scenarios, {figures.failovers} failovers")
    figures.masters = len(set(ledger.jobs.values()))
    figures.jobs = len(ledger.jobs)
    figures.serials = len(ledger.configs)
    return figures
