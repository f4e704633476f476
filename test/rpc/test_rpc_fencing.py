"""The master epoch on the wire (doc/protocols/rpc.md, "Master epoch"), runner side."""

from __future__ import annotations

from ganeti.rpc.client import RpcRunner, StaticResolver
from ganeti.rpc.transport import FunctionTransport


def _runner(reply: bytes, seen: list[str], **kwargs) -> RpcRunner:
    def post(address, port, procedure, body, timeout):
        seen.append(procedure)
        return reply
    return RpcRunner(StaticResolver({"n1": "10.0.0.1", "n2": "10.0.0.2"}, default_port=1811),
                     FunctionTransport(post), **kwargs)


def test_epoch_and_master_travel_in_the_target():
    seen: list[str] = []
    rpc = _runner(b"[true, null]", seen, fence=lambda: (3, "node 2"))
    res = rpc.call("write_ssconf_files", ["n1", "n2"], [{}])
    assert all(not r.fail_msg for r in res.values())
    assert seen == ["write_ssconf_files?epoch=3&master=node%202"] * 2
    assert res["n1"].call == "write_ssconf_files"


def test_no_fence_no_query():
    seen: list[str] = []
    _runner(b"[true, 1]", seen).call("version", ["n1"])
    assert seen == ["version"]


def test_fenced_reply_reported_once_per_node():
    seen: list[str] = []
    fenced: list[tuple[str, str]] = []
    rpc = _runner(b'[false, "Fenced: master epoch 1 (from a) is older than epoch 2"]', seen,
                  fence=lambda: (1, "a"), on_fenced=lambda node, msg: fenced.append((node, msg)))
    res = rpc.call("replicate_state", ["n1", "n2"], [None, None, []])
    assert sorted(n for n, _ in fenced) == ["n1", "n2"]
    assert res["n1"].fail_msg.startswith("Fenced:")


def test_other_failures_are_not_fencing():
    fenced: list[str] = []
    rpc = _runner(b'[false, "disk full"]', [], fence=lambda: (1, "a"),
                  on_fenced=lambda node, msg: fenced.append(node))
    rpc.call("upload_file", ["n1"], ["/x", "", 0o600, None, None, None])
    assert fenced == []
