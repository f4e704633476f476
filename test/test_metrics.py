"""ganeti.metrics: counters, gauges, histograms and their OpenMetrics text (checked as bytes)."""

from __future__ import annotations

import pytest

from ganeti import metrics
from ganeti.metrics.master import MasterMetrics


def test_openmetrics_text_of_each_kind_is_exact() -> None:
    reg = metrics.Registry()
    reg.counter("t_failures", "Failed calls", ["node"]).inc(node="n1")
    reg.get("t_failures").inc(2, node='a"b\\c\nd')
    reg.gauge("t_size_bytes", "Size", unit="bytes").set(4096)
    hist = reg.histogram("t_wait_seconds", "Wait", ["level"], unit="seconds",
                         buckets=(0.1, 1.0))
    hist.observe(0.05, level="node")
    hist.observe(0.5, level="node")
    hist.observe(7.0, level="node")
    assert metrics.render_openmetrics(reg.snapshot()) == (
        b"# TYPE t_failures counter\n"
        b"# HELP t_failures Failed calls\n"
        b't_failures_total{node="a\\"b\\\\c\\nd"} 2\n'
        b't_failures_total{node="n1"} 1\n'
        b"# TYPE t_size_bytes gauge\n"
        b"# UNIT t_size_bytes bytes\n"
        b"# HELP t_size_bytes Size\n"
        b"t_size_bytes 4096\n"
        b"# TYPE t_wait_seconds histogram\n"
        b"# UNIT t_wait_seconds seconds\n"
        b"# HELP t_wait_seconds Wait\n"
        b't_wait_seconds_bucket{level="node",le="0.1"} 1\n'
        b't_wait_seconds_bucket{level="node",le="1.0"} 2\n'
        b't_wait_seconds_bucket{level="node",le="+Inf"} 3\n'
        b't_wait_seconds_count{level="node"} 3\n'
        b't_wait_seconds_sum{level="node"} 7.55\n'
        b"# EOF\n")


def test_an_empty_registry_is_just_eof() -> None:
    assert metrics.render_openmetrics(metrics.Registry().snapshot()) == b"# EOF\n"


def test_collector_gauges_are_read_at_each_snapshot() -> None:
    reg = metrics.Registry()
    state = {"queued": 1}
    reg.gauge("t_jobs", "Jobs", ["status"],
              collector=lambda: [({"status": k}, v) for k, v in state.items()])
    assert reg.get("t_jobs").value(status="queued") == 1.0
    state["queued"] = 5
    state["success"] = 2
    text = metrics.render_openmetrics(reg.snapshot())
    assert b't_jobs{status="queued"} 5\n' in text and b't_jobs{status="success"} 2\n' in text


@pytest.mark.parametrize("bad", [
    lambda reg: reg.counter("x", "h").inc(-1),
    lambda reg: reg.counter("x", "h", ["a"]).inc(b="1"),
    lambda reg: (reg.gauge("x", "h"), reg.gauge("x", "h")),
    lambda reg: reg.histogram("x", "h", buckets=(1.0, 0.5)),
], ids=["counter-down", "wrong-labels", "twice", "buckets-unsorted"])
def test_misuse_is_refused(bad) -> None:
    with pytest.raises(ValueError):
        bad(metrics.Registry())


def test_format_lines_for_operators() -> None:
    reg = metrics.Registry()
    reg.histogram("t_lat_seconds", "Latency", buckets=(1.0,)).observe(0.5)
    reg.counter("t_n", "N")
    assert metrics.format_lines(reg.snapshot()) == [
        "t_lat_seconds (histogram): Latency", "  -: count 1, sum 0.5, mean 0.5",
        "t_n (counter): N", "  (no samples)"]


def test_master_metrics_observations_move_their_families() -> None:
    m = MasterMetrics()
    m.job_started([10, 0], [10, 500000])
    m.job_finished([10, 0], [12, 0], "success")
    m.lock_waited("node", 0.25)
    m.rpc_call("node_info", "n1", 0.01, True)
    m.rpc_call("node_info", "n2", 0.01, False)
    m.config_written(0.003, 12345)
    m.watch(jobs_by_status=lambda: {"success": 3}, replication_lag=lambda: {"n2": 4})
    snap = {fam["name"]: fam for fam in m.snapshot()}
    assert snap["ganeti_job_start_latency_seconds"]["samples"][0]["sum"] == 0.5
    assert snap["ganeti_job_end_latency_seconds"]["samples"][0]["labels"] == {"status": "success"}
    assert m.lock_wait.count(level="node") == 1
    assert m.rpc_latency.count(procedure="node_info") == 2
    assert m.rpc_failures.value(node="n2") == 1 and m.rpc_failures.value(node="n1") == 0
    assert m.config_write.count() == 1 and m.config_size.value() == 12345
    assert snap["ganeti_jobs"]["samples"] == [{"labels": {"status": "success"}, "value": 3.0}]
    assert snap["ganeti_replication_lag_serials"]["samples"][0]["value"] == 4.0
