"""Processor: LU phases, lock acquisition, timeouts and priority escalation."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ganeti import constants, errors, locking, opcodes
from ganeti.context import MasterContext
from ganeti.mcpu import NullCallbacks, Processor, lock_timeouts
from ganeti.pathutils import Paths


class FakeNode:
    def __init__(self, name: str, uuid: str) -> None:
        self.name, self.uuid = name, uuid


class FakeConfig:
    def __init__(self) -> None:
        self.nodes = {"u1": FakeNode("node1", "u1"), "u2": FakeNode("node2", "u2")}

    def get_node_info(self, uuid: str) -> Any:
        return self.nodes.get(uuid)

    def get_node_info_by_name(self, name: str) -> Any:
        return next((n for n in self.nodes.values() if n.name == name), None)

    def get_master_node(self) -> str:
        return "u1"


class RecordingCallbacks(NullCallbacks):
    def __init__(self, priority: int = 0) -> None:
        super().__init__(priority)
        self.started = 0
        self.priorities: list[int] = []
        self.cancel = False
        self.events: list[str] = []

    def notify_waiting(self) -> None:
        self.events.append("waiting")

    def notify_start(self) -> None:
        self.started += 1
        self.events.append("running")

    def set_priority(self, priority: int) -> None:
        self.priorities.append(priority)
        super().set_priority(priority)

    def check_cancel(self) -> bool:
        return self.cancel


def make_context(glm: bool = True) -> MasterContext:
    return MasterContext(paths=Paths(root="/nonexistent"), cfg=FakeConfig(),
                         glm=locking.GanetiLockManager(["u1", "u2"], [], []) if glm else None)


def test_lock_timeouts_grow() -> None:
    seq = lock_timeouts(first=0.1, factor=2, maximum=1.0, total=3.0)
    assert seq[0] == 0.1 and seq == sorted(seq) and max(seq) == 1.0


def test_delay_without_locks_runs_and_logs() -> None:
    cbs = RecordingCallbacks()
    proc = Processor(make_context(glm=False))
    op = opcodes.OpTestDelay(duration=0, repeat=2)
    assert proc.execute_opcode(op, cbs) is None
    assert cbs.started == 1
    assert [m for _, m in cbs.messages] == ["Test delay iteration 1/2", "Test delay iteration 2/2"]


def test_locks_are_held_during_exec_and_released() -> None:
    ctx = make_context()
    seen: list[set[str]] = []
    from ganeti.cmdlib import test as cmdlib_test
    orig = cmdlib_test.LUTestDelay.Exec

    def spy(self: Any, fb: Any) -> Any:
        seen.append(self.owned_locks(locking.LEVEL_NODE))
        return orig(self, fb)

    cmdlib_test.LUTestDelay.Exec = spy
    try:
        Processor(ctx).execute_opcode(opcodes.OpTestDelay(duration=0, on_nodes=["node1"],
                                                          on_master=True, no_locks=False,
                                                          on_node_uuids=None),
                                      RecordingCallbacks())
    except errors.OpExecError:
        pass  # no RPC in this test: the node part fails after Exec started
    finally:
        cmdlib_test.LUTestDelay.Exec = orig
    assert seen == [{"u1"}]
    for level in locking.LEVELS:
        assert not ctx.glm.is_owned(level)


@pytest.mark.parametrize("on_master, no_locks, nodes, locked", [
    (True, False, [], {"u1"}), (True, False, ["node2"], {"u1", "u2"}),
    (False, False, ["node2"], {"u2"}), (True, True, ["node2"], set())],
    ids=["master", "master-and-node", "node-only", "no-locks"])
def test_delay_locks_the_master_node_for_a_sleep_on_it(on_master: bool, no_locks: bool,
                                                        nodes: list[str],
                                                        locked: set[str]) -> None:
    # as Ganeti's LUTestDelay: a second delay on the master waits for the first (its
    # QA's TestJobCancellation cancels it meanwhile)
    from ganeti.cmdlib import test as cmdlib_test
    ctx = make_context()
    seen: list[set[str]] = []
    orig = cmdlib_test.LUTestDelay.Exec

    def spy(self: Any, fb: Any) -> Any:
        seen.append(set(self.owned_locks(locking.LEVEL_NODE)))
        return None

    cmdlib_test.LUTestDelay.Exec = spy
    try:
        Processor(ctx).execute_opcode(opcodes.OpTestDelay(
            duration=0, on_nodes=nodes, on_master=on_master, no_locks=no_locks),
            RecordingCallbacks())
    finally:
        cmdlib_test.LUTestDelay.Exec = orig
    assert seen == [locked]


def test_unknown_node_is_prereq_error() -> None:
    with pytest.raises(errors.OpPrereqError) as info:
        Processor(make_context()).execute_opcode(
            opcodes.OpTestDelay(duration=0, on_nodes=["nope"]), RecordingCallbacks())
    assert info.value.ecode == errors.ECODE_NOENT


def _hold_node_lock(ctx: MasterContext, release: threading.Event, held: threading.Event) -> None:
    ctx.glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], shared=True)
    ctx.glm.acquire(locking.LEVEL_NODE, ["u1"])
    held.set()
    release.wait(10)
    ctx.glm.release(locking.LEVEL_NODE)
    ctx.glm.release(locking.LEVEL_CLUSTER)


def test_lock_timeout_escalates_priority_then_succeeds() -> None:
    ctx = make_context()
    release, held = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_node_lock, args=(ctx, release, held))
    holder.start()
    assert held.wait(5)
    cbs = RecordingCallbacks(priority=constants.OP_PRIO_HIGHEST + 2)
    timer = threading.Timer(0.5, release.set)
    timer.start()
    try:
        proc = Processor(ctx, timeouts=[0.02, 0.04])
        op = opcodes.OpTestDelay(duration=0, on_node_uuids=["u1"], no_locks=False, on_master=True)
        with pytest.raises(errors.OpExecError):   # locks won; then no RPC for the node part
            proc.execute_opcode(op, cbs)
    finally:
        release.set()
        holder.join(5)
        timer.cancel()
    assert cbs.priorities[:2] == [constants.OP_PRIO_HIGHEST + 1, constants.OP_PRIO_HIGHEST]
    assert cbs.started == 1
    # busy locks: shown waiting once, before running
    assert cbs.events == ["waiting", "running"]


def test_free_locks_go_straight_to_running() -> None:
    ctx = make_context()
    cbs = RecordingCallbacks()
    proc = Processor(ctx, timeouts=[0.02])
    op = opcodes.OpTestDelay(duration=0, no_locks=False, on_master=True)
    proc.execute_opcode(op, cbs)
    assert cbs.events == ["running"]


def test_cancel_while_waiting_for_locks() -> None:
    ctx = make_context()
    release, held = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_node_lock, args=(ctx, release, held))
    holder.start()
    assert held.wait(5)
    cbs = RecordingCallbacks()
    threading.Timer(0.2, lambda: setattr(cbs, "cancel", True)).start()
    try:
        with pytest.raises(errors.OpExecError, match="canceled"):
            Processor(ctx, timeouts=[0.05] * 100).execute_opcode(
                opcodes.OpTestDelay(duration=0, on_node_uuids=["u1"], no_locks=False), cbs)
    finally:
        release.set()
        holder.join(5)
    assert cbs.started == 0


def test_dry_run_skips_exec() -> None:
    cbs = RecordingCallbacks()
    op = opcodes.OpTestJqueue(fail=True, dry_run=True)
    assert Processor(make_context()).execute_opcode(op, cbs) is None
