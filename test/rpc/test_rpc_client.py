"""Tests for ganeti.rpc.client with fake transports (no network)."""

from __future__ import annotations

import inspect
import threading
from types import SimpleNamespace

import pytest
from fakes.clock import FakeClock

from ganeti import constants, errors, serializer
from ganeti.rpc import client, defs
from ganeti.rpc.transport import FunctionTransport


def _resolver(offline=()):
    return client.StaticResolver(
        {f"n{i}": (f"10.0.0.{i}", 1811, f"n{i}" in offline) for i in range(1, 6)},
        default_port=1811)


def _echo(address, port, procedure, body, timeout):
    return serializer.dumps_bytes([True, {"addr": address, "proc": procedure,
                                          "args": serializer.loads(body)}])


def test_call_returns_payload_per_node() -> None:
    runner = client.RpcRunner(_resolver(), FunctionTransport(_echo))
    res = runner.call("version", ["n1", "n2"], [])
    assert list(res) == ["n1", "n2"]
    assert res["n2"].payload == {"addr": "10.0.0.2", "proc": "version", "args": []}
    assert res["n2"].fail_msg is None and not res["n2"].failed
    assert res["n2"].call == "version"


def test_generated_stub_binds_named_args() -> None:
    runner = client.RpcRunner(_resolver(), FunctionTransport(_echo))
    res = runner.call_hooks_runner(["n1"], hpath="node-add", phase="pre", env={"A": "1"})
    assert res["n1"].payload["args"] == ["node-add", "pre", {"A": "1"}]
    params = list(inspect.signature(client.RpcRunner.call_upload_file).parameters)
    assert params == ["self", "node_or_nodes", *defs.CALLS["upload_file"].arg_names, "rpc_timeout"]
    with pytest.raises(TypeError):
        runner.call_test_delay(["n1"])          # missing duration


def test_every_row_has_a_stub() -> None:
    for name in defs.CALLS:
        assert callable(getattr(client.RpcRunner, f"call_{name}"))


def test_offline_nodes_skipped_without_traffic() -> None:
    seen = []

    def fn(address, port, procedure, body, timeout):
        seen.append(address)
        return b"[true, 1]"

    runner = client.RpcRunner(_resolver(offline=("n2",)), FunctionTransport(fn))
    res = runner.call_version(["n1", "n2"])
    assert res["n2"].offline and res["n2"].fail_msg == client.OFFLINE_MSG
    assert seen == ["10.0.0.1"]
    with pytest.raises(errors.OpExecError, match="^Cannot: Node is marked offline$"):
        res["n2"].raise_on_failure("Cannot")


def test_the_master_lease_reaches_offline_nodes_too() -> None:
    seen = []

    def fn(address, port, procedure, body, timeout):
        seen.append((address, procedure))
        return b'[true, {"master": "n1", "epoch": 0}]'

    runner = client.RpcRunner(_resolver(offline=("n2",)), FunctionTransport(fn))
    res = runner.call_master_lease(["n1", "n2"], master="n1", epoch=0, reserve_job_id=5,
                                   reserve_serial=5)
    assert res["n2"].fail_msg is None and res["n2"].payload == {"master": "n1", "epoch": 0}
    assert sorted(a for a, _ in seen) == ["10.0.0.1", "10.0.0.2"]
    assert defs.OFFLINE_CALLS == {"master_lease"}


def test_remote_failure_message() -> None:
    runner = client.RpcRunner(_resolver(), FunctionTransport(
        lambda *a: b'[false, "disk on fire"]'))
    res = runner.call_version(["n1"])["n1"]
    assert res.fail_msg == "disk on fire" and res.payload is None
    with pytest.raises(errors.OpExecError, match="Prefix: disk on fire"):
        res.raise_on_failure("Prefix")


def test_transport_error_names_node_and_reason() -> None:
    def fn(address, port, procedure, body, timeout):
        raise errors.RpcTransportError("connection refused")

    res = client.RpcRunner(_resolver(), FunctionTransport(fn)).call_version(["n3"])["n3"]
    assert "n3" in res.fail_msg and "10.0.0.3:1811" in res.fail_msg
    assert "connection refused" in res.fail_msg


@pytest.mark.parametrize("body", [b"not json", b"[1, 2, 3]", b'{"a": 1}', b'["yes", 1]'],
                         ids=["garbage", "triple", "dict", "non-bool"])
def test_malformed_reply_is_a_failure(body: bytes) -> None:
    res = client.RpcRunner(_resolver(), FunctionTransport(lambda *a: body)).call_version(["n1"])
    assert "invalid reply" in res["n1"].fail_msg


def test_unexpected_transport_exception_does_not_break_fanout() -> None:
    def fn(address, port, procedure, body, timeout):
        if address.endswith(".2"):
            raise RuntimeError("boom")
        return b"[true, 7]"

    res = client.RpcRunner(_resolver(), FunctionTransport(fn)).call_version(["n1", "n2", "n3"])
    assert res["n1"].payload == 7 and res["n3"].payload == 7
    assert "boom" in res["n2"].fail_msg


def test_fanout_calls_every_node_at_once() -> None:
    # All five calls must be in flight together to pass the barrier; one
    # at a time, the first would wait for the others and break it.
    barrier = threading.Barrier(5, timeout=10)

    def fn(address, port, procedure, body, timeout):
        barrier.wait()
        return serializer.dumps_bytes([True, address])

    res = client.RpcRunner(_resolver(), FunctionTransport(fn)).call_version(
        ["n1", "n2", "n3", "n4", "n5"])
    assert {name: r.payload for name, r in res.items()} == {
        f"n{i}": f"10.0.0.{i}" for i in range(1, 6)}


def test_hung_node_times_out_on_the_runner_clock() -> None:
    # n1 does not answer while the call runs; the others answer at once.
    # The call returns when the runner's clock passes the deadline (an
    # hour of fake time, no real waiting) with the answers it has.
    release = threading.Event()
    answers = threading.Semaphore(0)
    answered: list[threading.Thread] = []

    def fn(address, port, procedure, body, timeout):
        if address.endswith(".1"):
            release.wait(30)
            return b"[true, 0]"
        answered.append(threading.current_thread())
        answers.release()
        return b"[true, 1]"

    clock = FakeClock()
    readings: list[float] = []

    def read_clock() -> float:
        if readings:
            clock.advance(3600 + 1 + 1)   # past the hour and the grace second
        else:
            # The first reading starts the wait: let the four answers
            # arrive before it, so that only n1 can be the one timed out.
            for _ in range(4):
                assert answers.acquire(timeout=10)
            for thread in answered:
                thread.join(10)
        readings.append(clock())
        return readings[-1]

    runner = client.RpcRunner(_resolver(), FunctionTransport(fn), timeouts={"urgent": 3600},
                              clock=read_clock)
    try:
        res = runner.call_version(["n1", "n2", "n3", "n4", "n5"])
        assert not release.is_set()
    finally:
        release.set()
    assert "timed out after 3600s" in (res["n1"].fail_msg or "")
    assert all(res[n].payload == 1 for n in ("n2", "n3", "n4", "n5"))


def test_timeout_classes_overridable() -> None:
    got = []
    runner = client.RpcRunner(_resolver(), FunctionTransport(
        lambda a, p, proc, b, timeout: got.append(timeout) or b"[true, null]"),
        timeouts={"normal": 2.5})
    runner.call_test_delay(["n1"], duration=0.0)
    runner.call_version(["n1"])
    runner.call("version", ["n1"], [], timeout=0.1)
    assert got == [2.5, defs.TIMEOUTS["urgent"], 0.1]


def test_call_map_per_node_args() -> None:
    runner = client.RpcRunner(_resolver(), FunctionTransport(_echo))
    res = runner.call_map("test_delay", {"n1": [1.0], "n2": [2.0]})
    assert res["n1"].payload["args"] == [1.0] and res["n2"].payload["args"] == [2.0]


def test_unknown_procedure_and_bad_arg_count_are_programmer_errors() -> None:
    runner = client.RpcRunner(_resolver(), FunctionTransport(_echo))
    with pytest.raises(errors.ProgrammerError):
        runner.call("no_such_call", ["n1"], [])
    with pytest.raises(errors.ProgrammerError):
        runner.call("test_delay", ["n1"], [])


def test_duplicate_names_called_once() -> None:
    calls = []
    runner = client.RpcRunner(_resolver(), FunctionTransport(
        lambda a, *rest: calls.append(a) or b"[true, 1]"))
    assert list(runner.call_version(["n1", "n1"])) == ["n1"]
    assert calls == ["10.0.0.1"]


def test_static_resolver_defaults() -> None:
    res = client.StaticResolver({"a": "1.2.3.4"}, default_port=99)
    assert res(["a", "b"]) == [("a", "1.2.3.4", 99, False), ("b", "b", 99, False)]


def test_config_resolver() -> None:
    nodes = {"u1": SimpleNamespace(name="node1", primary_ip="192.0.2.1", offline=False),
             "u2": SimpleNamespace(name="node2", primary_ip="192.0.2.2", offline=True)}
    cfg = SimpleNamespace(get_all_nodes_info=lambda: nodes)
    res = client.ConfigResolver(cfg, port=4242)
    assert res(["node1", "u2", "new.example.com"]) == [
        ("node1", "192.0.2.1", 4242, False), ("u2", "192.0.2.2", 4242, True),
        ("new.example.com", "new.example.com", 4242, False)]


def test_default_noded_port() -> None:
    assert client.default_noded_port({}) == constants.DEFAULT_NODED_PORT
    assert client.default_noded_port({"GANETI_NODED_PORT": "2000"}) == 2000
    with pytest.raises(errors.ProgrammerError):
        client.default_noded_port({"GANETI_NODED_PORT": "x"})


def test_fan_out_keeps_at_most_max_parallel_calls_in_flight() -> None:
    """A fan-out to many nodes runs at most MAX_PARALLEL calls at once, and all answer."""
    import threading as _threading

    from ganeti.rpc import client as rpc_client
    lock = _threading.Lock()
    state = {"now": 0, "peak": 0}
    gate = _threading.Barrier(rpc_client.MAX_PARALLEL, timeout=10)

    def post(address: str, port: int, procedure: str, body: bytes, timeout: float) -> bytes:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        try:
            gate.wait()          # the first wave only passes once it is full
        except _threading.BrokenBarrierError:
            pass
        with lock:
            state["now"] -= 1
        return b'[true, "ok"]'

    class Transport:
        pass

    transport = Transport()
    transport.post = post  # type: ignore[attr-defined]
    names = [f"n{i}" for i in range(3 * rpc_client.MAX_PARALLEL)]
    table = {n: f"10.0.0.{i}" for i, n in enumerate(names)}
    runner = rpc_client.RpcRunner(rpc_client.StaticResolver(table), transport)
    results = runner.call("version", names)
    assert all(r.payload == "ok" for r in results.values()) and len(results) == len(names)
    assert state["peak"] == rpc_client.MAX_PARALLEL
