"""drbd.reconnect_mirrors: both nodes disconnect in one RPC call, then connect in one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ganeti import errors
from ganeti.cmdlib import drbd
from ganeti.rpc.results import RpcResult, RpcResults


class _Rpc:
    """Records each call's procedure and nodes; ``failing`` nodes answer with a failure."""

    def __init__(self, failing: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, list[str], dict[str, Any]]] = []
        self.failing = failing

    def _answer(self, procedure: str, nodes: list[str], **kwargs: Any) -> RpcResults:
        self.calls.append((procedure, list(nodes), kwargs))
        return RpcResults(procedure, {
            n: RpcResult(node=n, fail_msg="refused" if n in self.failing else None,
                         call=procedure) for n in nodes})

    def call_drbd_disconnect_net(self, nodes: list[str], *, disks: Any) -> RpcResults:
        return self._answer("drbd_disconnect_net", nodes)

    def call_drbd_attach_net(self, nodes: list[str], *, disks: Any,
                             multimaster: bool) -> RpcResults:
        return self._answer("drbd_attach_net", nodes, multimaster=multimaster)


def _reconnect(rpc: _Rpc, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(drbd, "rpc_disks", lambda disks, cfg: [{}])
    waited: list[str] = []
    monkeypatch.setattr(drbd, "wait_for_sync",
                        lambda lu, node, disks, fb, **kw: waited.append(node.name) or True)
    lu = SimpleNamespace(require_rpc=lambda: rpc, cfg=None)
    nodes = [SimpleNamespace(name="node1"), SimpleNamespace(name="node2")]
    drbd.reconnect_mirrors(lu, [], nodes, True, nodes[1], lambda msg: None,  # type: ignore[arg-type]
                           instance="inst1")
    return waited


def test_both_nodes_are_asked_at_once_disconnect_then_connect(monkeypatch) -> None:
    rpc = _Rpc()
    waited = _reconnect(rpc, monkeypatch)
    assert [(proc, nodes) for proc, nodes, _ in rpc.calls] == [
        ("drbd_disconnect_net", ["node1", "node2"]),
        ("drbd_attach_net", ["node1", "node2"])]
    assert rpc.calls[1][2] == {"multimaster": True}
    assert waited == ["node2"]


def test_a_node_that_fails_to_disconnect_stops_it_before_any_connect(monkeypatch) -> None:
    rpc = _Rpc(failing=("node2",))
    with pytest.raises(errors.OpExecError, match="Cannot disconnect the mirrors on node2"):
        _reconnect(rpc, monkeypatch)
    assert [proc for proc, _, _ in rpc.calls] == ["drbd_disconnect_net"]
