"""The master's metrics through the real daemons: each one moves when its event happens.

A 3-node virtual cluster (node2 and node3 master candidates).  Each test
reads ``QueryMetrics`` before and after one event and checks the figure it
names moved; ``GET /metrics`` of ganeti-rapi and ``gnt-debug metrics`` show
the same figures.
"""

from __future__ import annotations

import http.client
import ssl
import time
from typing import Any

import pytest
from vcluster_harness import SHORT_RPC_TIMEOUTS, VirtualCluster

from ganeti import constants, daemonctl, luxi
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(300)

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcm"), nodes=3, use_ssh=False,
                        masterd_args=SHORT_RPC_TIMEOUTS) as cluster:
        yield cluster


def _client(vc) -> luxi.Client:
    return luxi.Client(vc.paths(N1).master_socket)


def _families(vc) -> dict[str, dict[str, Any]]:
    return {fam["name"]: fam for fam in _client(vc).QueryMetrics()}


def _sample(fams: dict[str, dict[str, Any]], name: str, **labels: str) -> dict[str, Any] | None:
    for sample in fams[name]["samples"]:
        if sample["labels"] == labels:
            return sample
    return None


def _count(fams: dict[str, dict[str, Any]], name: str, **labels: str) -> float:
    sample = _sample(fams, name, **labels)
    if sample is None:
        return 0
    return sample["count"] if "count" in sample else sample["value"]


def _run_job(vc, ops: list[dict[str, Any]]) -> int:
    cl = _client(vc)
    job_id = int(cl.SubmitJob(ops))
    deadline = time.monotonic() + 60
    while cl.QueryJobs([job_id], ["status"])[0][0] not in constants.JOBS_FINALIZED:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return job_id


def _delay(**kw: Any) -> list[dict[str, Any]]:
    return [{"OP_ID": "OP_TEST_DELAY", "duration": 0, **kw}]


def test_jobs_by_status_and_queue_latencies_move_with_a_job(vc):
    before = _families(vc)
    _run_job(vc, _delay())
    after = _families(vc)
    assert _count(after, "ganeti_jobs", status="success") == \
        _count(before, "ganeti_jobs", status="success") + 1
    assert _count(after, "ganeti_job_start_latency_seconds") == \
        _count(before, "ganeti_job_start_latency_seconds") + 1
    assert _count(after, "ganeti_job_end_latency_seconds", status="success") == \
        _count(before, "ganeti_job_end_latency_seconds", status="success") + 1
    _run_job(vc, [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_nodes": ["nosuchnode"]}])
    failed = _families(vc)
    assert _count(failed, "ganeti_job_end_latency_seconds", status="error") == \
        _count(after, "ganeti_job_end_latency_seconds", status="error") + 1
    assert _count(failed, "ganeti_jobs", status="error") == \
        _count(after, "ganeti_jobs", status="error") + 1


def test_lock_wait_per_level_moves_when_an_opcode_takes_locks(vc):
    before = _families(vc)
    _run_job(vc, _delay(on_nodes=[N2], no_locks=False))
    after = _families(vc)
    for level in ("cluster", "node"):
        assert _count(after, "ganeti_lock_wait_seconds", level=level) > \
            _count(before, "ganeti_lock_wait_seconds", level=level), level


def test_rpc_latency_per_procedure_moves_with_a_node_query(vc):
    before = _families(vc)
    _run_job(vc, _delay(on_nodes=[N2, N3], on_master=False))
    after = _families(vc)
    assert _count(after, "ganeti_rpc_latency_seconds", procedure="test_delay") == \
        _count(before, "ganeti_rpc_latency_seconds", procedure="test_delay") + 2


def test_config_write_time_and_size_move_with_a_config_change(vc):
    before = _families(vc)
    vc.ok("gnt-cluster", "add-tags", "metrics-test")
    after = _families(vc)
    assert _count(after, "ganeti_config_write_seconds") > \
        _count(before, "ganeti_config_write_seconds")
    with open(vc.paths(N1).config_file, "rb") as fh:
        size = len(fh.read())
    assert _count(after, "ganeti_config_size_bytes") == size


def test_rpc_failures_and_replication_lag_move_when_a_candidate_is_down(vc):
    paths3 = vc.paths(N3)
    before = _families(vc)
    assert _count(before, "ganeti_replication_lag_serials", candidate=N3) == 0
    daemonctl.stop_daemon(paths3, constants.NODED, timeout=10.0)
    try:
        vc.ok("gnt-cluster", "add-tags", "while-node3-is-down")
        vc.ok("gnt-cluster", "remove-tags", "while-node3-is-down")
        down = _families(vc)
        assert _count(down, "ganeti_rpc_failures", node=N3) >= \
            _count(before, "ganeti_rpc_failures", node=N3) + 2
        assert _count(down, "ganeti_rpc_failures", node=N2) == \
            _count(before, "ganeti_rpc_failures", node=N2)
        assert _count(down, "ganeti_replication_lag_serials", candidate=N3) >= 2
        assert _count(down, "ganeti_replication_lag_serials", candidate=N2) == 0
    finally:
        vcluster.start(vc.cluster, N3)
    vc.ok("gnt-cluster", "add-tags", "node3-is-back")
    assert _count(_families(vc), "ganeti_replication_lag_serials", candidate=N3) == 0


def test_rapi_serves_openmetrics_and_gnt_debug_prints_the_same(vc):
    _run_job(vc, _delay())
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(vc.cluster.master_node.ip, vc.cluster.rapi_port,
                                       context=tls, timeout=60)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    assert resp.status == 200
    assert resp.getheader("Content-Type") == \
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert body.endswith(b"# EOF\n")
    assert b"# TYPE ganeti_job_end_latency_seconds histogram\n" in body
    assert b'ganeti_jobs{status="success"} ' in body
    lines = vc.ok("gnt-debug", "metrics", "ganeti_jobs").splitlines()
    assert lines[0].startswith("ganeti_jobs (gauge)") and any("status=success" in ln
                                                              for ln in lines)
    text = vc.ok("gnt-debug", "metrics", "--openmetrics")
    assert text.endswith("# EOF\n") and "# TYPE ganeti_rpc_latency_seconds histogram" in text
