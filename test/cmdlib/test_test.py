"""LUTestDelay, LUTestJqueue and LUTestOsParams against a fake config and a fake RPC runner."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.fakerpc import FakeRpc

from ganeti import errors, opcodes
from ganeti.context import MasterContext
from ganeti.mcpu import NullCallbacks, Processor
from ganeti.opcodes.test import OpTestOsParams
from ganeti.pathutils import Paths
from test.test_mcpu import FakeConfig


def run(op: opcodes.OpCode, rpc: Any) -> Any:
    ctx = MasterContext(paths=Paths(root="/x"), cfg=FakeConfig(), rpc=rpc)
    return Processor(ctx).execute_opcode(op, NullCallbacks())


def test_delay_on_nodes_calls_rpc_by_name() -> None:
    rpc = FakeRpc()
    run(opcodes.OpTestDelay(duration=0.5, on_master=False, on_nodes=["node2", "node1"],
                            repeat=2), rpc)
    assert rpc.calls_to("test_delay") == [(["node2", "node1"], [0.5])] * 2


def test_delay_on_node_uuids() -> None:
    rpc = FakeRpc()
    run(opcodes.OpTestDelay(duration=0, on_master=False, on_node_uuids=["u2"]), rpc)
    assert rpc.calls_to("test_delay") == [(["node2"], [0.0])]


def test_node_failure_is_exec_error() -> None:
    with pytest.raises(errors.OpExecError, match="boom"):
        run(opcodes.OpTestDelay(duration=0, on_master=False, on_nodes=["node1"]),
            FakeRpc().set_failure("test_delay", "node1", "boom"))


def test_both_node_forms_refused() -> None:
    with pytest.raises(errors.OpPrereqError):
        run(opcodes.OpTestDelay(duration=0, on_nodes=["node1"], on_node_uuids=["u1"]), FakeRpc())


def test_jqueue_opcode_fails_on_request() -> None:
    with pytest.raises(errors.OpExecError):
        run(opcodes.OpTestJqueue(fail=True), None)


def _run_in_thread(op: opcodes.OpCode, cbs: NullCallbacks) -> tuple[Any, dict[str, Any]]:
    import threading
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["result"] = run_with(op, cbs)
        except Exception as exc:  # recorded for the assertions
            outcome["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, outcome


def run_with(op: opcodes.OpCode, cbs: NullCallbacks) -> Any:
    ctx = MasterContext(paths=Paths(root="/x"), cfg=FakeConfig(), rpc=FakeRpc())
    return Processor(ctx).execute_opcode(op, cbs)


def test_interruptible_delay_stops_when_interrupted() -> None:
    cbs = NullCallbacks()
    thread, outcome = _run_in_thread(
        opcodes.OpTestDelay(duration=600, on_master=True, interruptible=True), cbs)
    thread.join(0.2)
    assert thread.is_alive()          # really sleeping
    cbs.interrupted.set()
    thread.join(30)                   # far below the 600 s delay
    assert not thread.is_alive(), "interruptible delay ignored the interruption"
    assert isinstance(outcome.get("error"), errors.OpExecError)
    assert "interrupted" in str(outcome["error"])


def test_interruptible_repeat_checks_between_iterations() -> None:
    cbs = NullCallbacks()
    cbs.interrupted.set()
    with pytest.raises(errors.OpExecError, match="interrupted"):
        run_with(opcodes.OpTestDelay(duration=0, repeat=3, interruptible=True), cbs)
    assert cbs.messages == []         # no iteration started


def test_plain_delay_ends_at_a_kill_too() -> None:
    # Ganeti's kill ends the job's process, whatever the delay; ours ends the sleep
    cbs = NullCallbacks()
    thread, outcome = _run_in_thread(opcodes.OpTestDelay(duration=600, on_master=True), cbs)
    thread.join(0.2)
    assert thread.is_alive()
    cbs.interrupted.set()
    thread.join(30)
    assert not thread.is_alive(), "the delay ignored the kill"
    assert "interrupted" in str(outcome.get("error"))


def test_plain_delay_without_a_kill_runs_its_iterations() -> None:
    cbs = NullCallbacks()
    assert run_with(opcodes.OpTestDelay(duration=0.05, on_master=True, repeat=2), cbs) is None
    assert len(cbs.messages) == 2


class _MasterCfg(FakeConfig):
    def get_master_node(self) -> str:
        return "uuid-node1"


def run_jq(op: opcodes.OpCode, cbs: NullCallbacks) -> Any:
    ctx = MasterContext(paths=Paths(root="/x"), cfg=_MasterCfg(), rpc=FakeRpc())
    return Processor(ctx).execute_opcode(op, cbs)


def _answering_peer(seen: list[Any]) -> Any:
    """A feedback_fn playing gnt-debug test-jobqueue: connect to each announced socket
    and close it again (the confirmation); every entry is recorded."""
    import socket

    def feedback(*args: Any) -> None:
        seen.append(args)
        if len(args) == 2 and args[0] == "jqueue-test":
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(args[1][0])
    return feedback


def test_jqueue_protocol_notifies_and_prefixes_messages() -> None:
    seen: list[Any] = []
    cbs = NullCallbacks(feedback_fn=_answering_peer(seen))
    assert run_jq(opcodes.OpTestJqueue(notify_waitlock=True, notify_exec=True,
                                         log_messages=["a", ""]), cbs) is True
    notes = [(a[1][1], a[1][2]) for a in seen if a[0] == "jqueue-test"]
    assert notes == [("expandnames", None), ("exec", None), ("startmsg", 2), ("logmsg", 1),
                     ("logmsg", 2)]
    texts = [a[-1] for a in seen if a[0] != "jqueue-test"]
    assert [t for t in texts if t.startswith("TESTMSG=")] == ["TESTMSG=a", "TESTMSG="]


def test_jqueue_without_notifications_logs_plain_messages() -> None:
    seen: list[Any] = []
    run_with(opcodes.OpTestJqueue(log_messages=["hello", "world"]),
             NullCallbacks(feedback_fn=lambda *a: seen.append(a)))
    assert seen == [("jqueue-test", "hello"), ("jqueue-test", "world")]


def test_jqueue_notification_without_a_client_fails(monkeypatch) -> None:
    from ganeti.cmdlib.test import LUTestJqueue
    monkeypatch.setattr(LUTestJqueue, "CONNECT_TIMEOUT", 0.05)
    seen: list[Any] = []
    with pytest.raises(errors.OpExecError, match="notification 'exec' failed: no client"):
        run_jq(opcodes.OpTestJqueue(notify_exec=True),
                 NullCallbacks(feedback_fn=lambda *a: seen.append(a)))
    (path, test, arg), = [a[1] for a in seen if a[0] == "jqueue-test"]
    assert (test, arg) == ("exec", None)
    import os
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))


def test_osparams_feedback_names_the_keys_never_the_values() -> None:
    op = opcodes.from_dict({"OP_ID": "OP_TEST_OS_PARAMS",
                            "osparams_secret": {"param2": "secret2", "param1": "secret1"}})
    cbs = NullCallbacks()
    assert run_with(op, cbs) is None
    assert [text for _, text in cbs.messages] == [
        "Secret OS parameters: param1, param2 (received; values are never written to a job)"]
    assert "secret" not in repr(cbs.messages).replace("Secret", "")


@pytest.mark.parametrize("secret", [None, {}], ids=["none", "empty"])
def test_osparams_without_secrets_fails_as_ganeti(secret: Any) -> None:
    with pytest.raises(errors.OpExecError, match="^Opcode needs secret parameters$"):
        run(OpTestOsParams(osparams_secret=secret), None)
