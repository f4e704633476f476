"""Virtual clusters created side by side do not pick the same ports
(tools/vcluster: ports are reserved until their daemons listen)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from vcluster_harness import VirtualCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_clusters_created_at_the_same_time_all_start(tmp_path):
    clusters = [VirtualCluster(tmp_path / f"c{k}", nodes=2, use_ssh=False) for k in range(3)]
    try:
        with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
            started = list(pool.map(lambda c: c.start(), clusters))
        ports = [(c.cluster.noded_port, c.cluster.rapi_port) for c in started]
        flat = [p for pair in ports for p in pair]
        assert len(set(flat)) == len(flat), ports
        for cluster in started:
            assert "node2.vcluster" in cluster.ok("gnt-node", "list", "-o", "name")
    finally:
        for cluster in clusters:
            cluster.close()
