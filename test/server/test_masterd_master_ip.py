"""ganeti-masterd startup: the master IP is activated in the background (best effort)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti.server import masterstart  # noqa: E402


def test_startup_activates_the_master_ip(tmp_path) -> None:
    cfg = make_config(tmp_path)
    rpc = FakeRpc(cfg)
    thread = masterstart.start_master_ip(make_cluster_context(tmp_path, cfg, rpc))
    assert thread is not None
    thread.join(10)
    assert rpc.nodes_called("node_activate_master_ip") == {node_name(1)}


def test_startup_failure_is_only_logged(tmp_path, caplog) -> None:
    cfg = make_config(tmp_path)
    rpc = FakeRpc(cfg).set_failure("node_activate_master_ip", node_name(1), "no device")
    thread = masterstart.start_master_ip(make_cluster_context(tmp_path, cfg, rpc))
    thread.join(10)
    assert "no device" in caplog.text


def test_startup_without_netdev_or_rpc_does_nothing(tmp_path) -> None:
    cfg = make_config(tmp_path)
    assert masterstart.start_master_ip(make_cluster_context(tmp_path, cfg, None)) is None
    cluster = cfg.get_cluster_info()
    cluster.master_netdev = ""
    cfg.update(cluster)
    rpc = FakeRpc(cfg)
    assert masterstart.start_master_ip(make_cluster_context(tmp_path, cfg, rpc)) is None
    assert rpc.calls == []
