"""The master role under faults, short form: seeded rounds, one test per fault story.

doc/design/failover.md, "Fault injection".  Each test, on a 4-node
virtual cluster, lets one client per node submit jobs continuously to the
master its node's ssconf names, applies one plan of
``test/integration/master_nemesis.py`` with a fixed seed, recovers by the
documented means, and checks the history (``master_history.check``):
every acknowledged job exists exactly once with its content, no id was
acknowledged twice, ids grow with the epoch, at most one master accepted
writes at any moment, and a master acknowledged a job within
``RECOVERY_LIMIT`` seconds after the faults stopped.  ``tools/soak/soak.py
--only master`` runs 1,000 such rounds with every plan.

The racing and killing stories depend on timing: their tests run a few
rounds (three takers, then two, twice; four kills) and stop at the
first violation; the fault-point test stops a failover at each named
point in turn.  Every test starts on a fresh cluster (a round's outcome
depends on what earlier rounds left behind); a round that left no master
also gets a fresh one after it.  Before the quorum write and the
resumable takeover (issue 24) every one of these tests failed
(doc/design/failover.md, "Fault injection").
Reproduce one round with ``tools/soak/soak.py --only master
--master-plan PLAN --master-first-seed SEED --master-rounds 1``.
"""

from __future__ import annotations

import os

import pytest
from master_nemesis import RECOVERY_LIMIT, RoundResult, make_cluster, run_round
from vcluster_harness import VirtualCluster

from ganeti.failover import faultpoints

pytestmark = pytest.mark.timeout(600)

class _Clusters:
    """A test's 4-node virtual cluster, made afresh after a round that left no master."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.made = 0
        self.current: VirtualCluster | None = None

    def get(self) -> VirtualCluster:
        if self.current is None:
            self.made += 1
            self.current = make_cluster(os.path.join(self.base, f"vc{self.made}"), nodes=4)
        return self.current

    def done(self, result: RoundResult) -> None:
        if result.history.recovered_after is None and self.current is not None:
            self.current.close()
            self.current = None

    def close(self) -> None:
        if self.current is not None:
            self.current.close()


@pytest.fixture
def clusters(tmp_path_factory):
    pool = _Clusters(str(tmp_path_factory.mktemp("vcmf")))   # short: LUXI socket paths
    try:
        yield pool
    finally:
        pool.close()


def _explain(result: RoundResult) -> str:
    return "\n".join([result.summary(), *result.steps,
                      *(str(v) for v in result.violations[:30])])


def _rounds(clusters: _Clusters, *rounds: tuple[str, int]) -> RoundResult:
    """Rounds ``(plan, seed)`` in order until one shows a violation; the last round."""
    for plan, seed in rounds:
        result = run_round(clusters.get(), seed, plan, limit=RECOVERY_LIMIT)
        clusters.done(result)
        assert result.history.acks, _explain(result)     # the clients did submit
        if result.violations:
            break
    return result


def test_failover_killed_at_each_fault_point_is_recovered(clusters) -> None:
    """One round per named point, in takeover order, on one cluster."""
    for seed, point in enumerate(faultpoints.POINTS, start=101):
        result = _rounds(clusters, (f"point-{point}", seed))
        stopped = [code for _, code in result.failovers[:1]]
        assert stopped == [faultpoints.EXIT_STATUS], _explain(result)
        assert result.violations == [], _explain(result)


def test_racing_takers_leave_exactly_one_master(clusters) -> None:
    result = _rounds(clusters, ("race-3", 202), ("race-2", 201), ("race-2", 1201))
    assert result.violations == [], _explain(result)


def test_master_killed_during_a_failover_loses_no_acknowledged_job(clusters) -> None:
    # seeds whose kill comes just before the failover (a kill during it may come after
    # the failover stopped the old master, which flushes its replication)
    result = _rounds(clusters, *(("kill-master", seed) for seed in (305, 308, 309, 1301)))
    assert result.violations == [], _explain(result)


def test_cut_off_master_loses_no_acknowledged_job(clusters) -> None:
    result = _rounds(clusters, ("isolate-master", 401))
    assert result.violations == [], _explain(result)


def test_planned_failover_under_load_succeeds(clusters) -> None:
    result = _rounds(clusters, ("failover-under-load", 501))
    assert [code for _, code in result.failovers] == [0], _explain(result)
    assert result.violations == [], _explain(result)
