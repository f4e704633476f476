"""Tests for ganeti.cmdlib.hooksmaster with a fake hooks_runner call."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from ganeti import constants, errors
from ganeti.cmdlib.hooksmaster import HooksMaster, build_env
from ganeti.rpc.client import OFFLINE_MSG, RpcResult

OK, FAIL, SKIP = constants.HKR_SUCCESS, constants.HKR_FAIL, constants.HKR_SKIP


class FakeHooksCall:
    def __init__(self, replies: dict[str, RpcResult | list]):
        self.replies = replies
        self.calls: list[tuple[list, str, str, dict]] = []

    def __call__(self, nodes, hpath, phase, env):
        self.calls.append((list(nodes), hpath, phase, dict(env)))
        out = {}
        for n in nodes:
            reply = self.replies.get(n, [])
            out[n] = reply if isinstance(reply, RpcResult) else RpcResult(n, reply, call="hooks_runner")
        return out


def _hm(call, env_fn=lambda: {"NODE_NAME": "n3", "TAGS": ["a", "b"], "X": None}, **kw):
    args = dict(hpath="node-add", opcode="OP_NODE_ADD", htype=constants.HTYPE_NODE,
                cluster_name="c.example.com", master_name="n1", env_fn=env_fn,
                pre_nodes=["n1", "n2"], post_nodes=["n1", "n2", "n3"], target="n3")
    args.update(kw)
    return HooksMaster(call, **args)


def test_build_env_pre() -> None:
    env = build_env(hpath="node-add", phase="pre", opcode="OP_NODE_ADD", htype="NODE",
                    cluster_name="c", master_name="m", data_dir="/var/lib/ganeti",
                    lu_env={"NODE_NAME": "n3", "GANETI_ALREADY": 1}, target="n3")
    assert env == {
        "GANETI_HOOKS_VERSION": "2", "GANETI_HOOKS_PHASE": "pre", "GANETI_HOOKS_PATH": "node-add",
        "GANETI_OP_CODE": "OP_NODE_ADD", "GANETI_CLUSTER": "c", "GANETI_MASTER": "m",
        "GANETI_DATA_DIR": "/var/lib/ganeti", "GANETI_OBJECT_TYPE": "NODE",
        "GANETI_OP_TARGET": "n3", "GANETI_NODE_NAME": "n3", "GANETI_ALREADY": "1"}


def test_pre_success_sends_env_to_pre_nodes() -> None:
    call = FakeHooksCall({"n1": [["10-ok", OK, ""]], "n2": [["x.sh", SKIP, ""]]})
    res = _hm(call).run_pre()
    assert res == {"n1": [("10-ok", OK, "")], "n2": [("x.sh", SKIP, "")]}
    nodes, hpath, phase, env = call.calls[0]
    assert (nodes, hpath, phase) == (["n1", "n2"], "node-add", "pre")
    assert env["GANETI_NODE_NAME"] == "n3" and env["GANETI_TAGS"] == "a b" and env["GANETI_X"] == ""


def test_pre_failure_aborts_with_output() -> None:
    call = FakeHooksCall({"n2": [["10-ok", OK, ""], ["20-deny", FAIL, "no way, not today\n"]]})
    with pytest.raises(errors.HooksAbort) as info:
        _hm(call).run_pre()
    msg = str(info.value)
    assert "20-deny" in msg and "n2" in msg and "no way, not today" in msg
    assert "10-ok" not in msg


def test_unreachable_and_offline_nodes_do_not_deny(caplog) -> None:
    call = FakeHooksCall({
        "n1": RpcResult("n1", None, "Error contacting node n1: connection refused"),
        "n2": RpcResult("n2", None, OFFLINE_MSG, offline=True)})
    logged = []
    with caplog.at_level(logging.WARNING):
        assert _hm(call, log_fn=logged.append).run_pre() == {}
    assert "connection refused" in caplog.text
    assert logged and "n1" in logged[0]


def test_post_failures_only_logged_and_post_env(caplog) -> None:
    state = {"NODE_NAME": "n3", "STATE": "before"}
    call = FakeHooksCall({"n3": [["99-bad", FAIL, "oops"]]})
    hm = _hm(call, env_fn=lambda: dict(state))
    hm.run_pre()
    state["STATE"] = "after"
    with caplog.at_level(logging.WARNING):
        res = hm.run_post()
    assert res["n3"] == [("99-bad", FAIL, "oops")]
    assert "99-bad" in caplog.text
    nodes, _, phase, env = call.calls[-1]
    assert nodes == ["n1", "n2", "n3"] and phase == "post"
    assert env["GANETI_STATE"] == "before" and env["GANETI_POST_STATE"] == "after"
    assert env["GANETI_HOOKS_PHASE"] == "post"


def test_no_hpath_means_no_calls() -> None:
    call = FakeHooksCall({})
    hm = _hm(call, hpath=None)
    assert hm.run_pre() == {} and hm.run_post() == {}
    assert call.calls == []


def test_from_lu() -> None:
    class LUNodeAdd:
        HPATH = "node-add"
        HTYPE = constants.HTYPE_NODE
        op = SimpleNamespace(OP_ID="OP_NODE_ADD", summary=lambda: "NODE_ADD(n3)")

        def BuildHooksEnv(self):
            return {"NODE_NAME": "n3"}

        def BuildHooksNodes(self):
            return ["n1"], ["n1", "n3"]

    call = FakeHooksCall({})
    hm = HooksMaster.from_lu(LUNodeAdd(), call, "c", "n1")
    hm.run_pre()
    hm.run_post()
    assert [c[0] for c in call.calls] == [["n1"], ["n1", "n3"]]
    env = call.calls[0][3]
    assert env["GANETI_OP_CODE"] == "OP_NODE_ADD" and env["GANETI_OP_TARGET"] == "n3"
    assert env["GANETI_OBJECT_TYPE"] == "NODE"
