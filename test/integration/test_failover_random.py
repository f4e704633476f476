"""20 seeded random histories of jobs, kills, partitions and failovers on 3 nodes.

After every step: no job id acknowledged by two masters, no config serial
written twice with different content (doc/design/failover.md).  Without
root (no nftables) the histories have no partitions.  ``tools/soak/soak.py
failover`` runs many more.
"""

from __future__ import annotations

import pytest
from failover_helpers import MASTERD_ARGS, Ledger
from failover_random import run_scenario
from vcluster_harness import VirtualCluster

from tools.harness import vcluster

pytestmark = pytest.mark.timeout(900)

SEEDS = range(1, 21)
HISTORY: list[str] = []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcfr"), nodes=3, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as vc:
        yield vc, Ledger()


@pytest.mark.parametrize("seed", SEEDS)
def test_random_history_keeps_the_invariant(cluster, seed):
    vc, ledger = cluster
    done = run_scenario(vc, ledger, seed, partitions=vcluster.partition_support() is None)
    assert done.steps
    HISTORY.extend(done.steps)


def test_histories_did_fail_over(cluster):
    """The seeds above are not trivial: jobs were acknowledged by several masters."""
    vc, ledger = cluster
    if len(HISTORY) < 4 * len(SEEDS):
        pytest.skip("run together with the seeded histories")
    assert any(step.startswith("failover") and step.endswith(": 0") for step in HISTORY)
    assert len(set(ledger.jobs.values())) >= 2, HISTORY
    assert len(ledger.configs) >= 3
