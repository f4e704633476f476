"""Live node data in queries: reused for a bounded time, dropped by operations.

A real 3-node virtual cluster whose master keeps node live data for 60 s
(so nothing expires while the test runs).  A guest started behind the
master's back is not seen by a listing until something invalidates the
node; an instance started through the master is seen at once.
"""

from __future__ import annotations

import pytest
from instance_helpers import start_behind_masters_back
from vcluster_harness import SHORT_RPC_TIMEOUTS, VirtualCluster

pytestmark = pytest.mark.timeout(240)

N1, N2 = "node1.vcluster", "node2.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vclive"), nodes=3, use_ssh=False,
                        masterd_args=[*SHORT_RPC_TIMEOUTS, "--node-info-max-age", "60"]) as cluster:
        yield cluster


def _node_rows(vc, fields: str, *names: str) -> list[list[str]]:
    out = vc.ok("gnt-node", "list", "--no-headers", "--separator=|", "--units=m",
                "-o", fields, *names)
    return [line.split("|") for line in out.splitlines() if line.strip()]


def _mfree(vc, node: str) -> int:
    (row,) = _node_rows(vc, "mfree", node)
    return int(row[0])


def test_listing_reuses_live_data_and_operations_refresh_it(vc):
    before = _mfree(vc, N2)
    start_behind_masters_back(vc, N2, "ghost.example.com", memory=256)
    assert _mfree(vc, N2) == before                # cached: the master was not told
    # an operation on node2 drops its cached figures
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N2,
          "-B", "maxmem=128,minmem=128", "--no-name-check", "--no-ip-check",
          "live1.example.com")
    after = _mfree(vc, N2)
    assert after == before - 256 - 128, (before, after)   # the ghost and the new instance
    # other nodes' figures were not refreshed, node1's still come from the cache
    start_behind_masters_back(vc, N1, "ghost1.example.com", memory=64)
    n1 = _mfree(vc, N1)
    vc.ok("gnt-instance", "shutdown", "live1.example.com")
    assert _mfree(vc, N1) == n1
    assert _mfree(vc, N2) == before - 256


def test_offline_and_static_queries_do_not_touch_the_cache(vc):
    # a static listing asks nobody, and still works
    names = [r[0] for r in _node_rows(vc, "name")]
    assert N1 in names and N2 in names
