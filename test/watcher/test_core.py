"""ganeti.watcher.core: the watcher's decisions, pass after pass, on a fake clock."""

from __future__ import annotations

import pytest
from fakes import FakeClock

from ganeti import constants, errors
from ganeti.watcher import core

UP, DOWN = constants.INSTST_RUNNING, constants.INSTST_ERRORDOWN
USER = constants.INSTST_USERDOWN
NODES = [core.NodeView("n1", bootid="b1"), core.NodeView("n2", bootid="b2")]


def inst(name: str = "i1", status: str = DOWN, **kw: object) -> core.InstanceView:
    fields = {"admin_up": True, "pnode": "n1", **kw}
    return core.InstanceView(name=name, status=status, **fields)  # type: ignore[arg-type]


def passes(instances, clock: FakeClock, count: int, *, step: float = 300.0,
           state: core.GroupState | None = None) -> tuple[list[core.Plan], core.GroupState]:
    """Run ``count`` passes five minutes apart; the plans and the last state."""
    state = state or core.GroupState()
    plans = []
    for _ in range(count):
        plan, state = core.plan_group(state, instances, NODES, clock())
        plans.append(plan)
        clock.advance(step)
    return plans, state


def test_error_down_instance_is_restarted_and_counted() -> None:
    plan, state = core.plan_group(core.GroupState(), [inst()], NODES, 1000.0)
    assert plan.restart == ["i1"] and plan.cleanup == []
    assert state.attempts["i1"] == core.Attempts(count=1, last=1000.0)


def test_user_down_instance_is_cleaned_up() -> None:
    plan, _ = core.plan_group(core.GroupState(), [inst(status=USER)], NODES, 1000.0)
    assert plan.cleanup == ["i1"] and plan.restart == []


@pytest.mark.parametrize("status", [UP, constants.INSTST_ADMINDOWN, constants.INSTST_NODEDOWN])
def test_other_statuses_need_nothing(status: str) -> None:
    plan, state = core.plan_group(core.GroupState(), [inst(status=status)], NODES, 1000.0)
    assert plan.idle and state.attempts == {}


def test_admin_down_instance_is_left_alone() -> None:
    plan, _ = core.plan_group(core.GroupState(), [inst(admin_up=False)], NODES, 1000.0)
    assert plan.idle


def test_five_attempts_then_gives_up_once() -> None:
    clock = FakeClock()
    plans, state = passes([inst()], clock, 8)
    assert [p.restart for p in plans] == [["i1"]] * 5 + [[]] * 3
    assert [p.give_up for p in plans] == [[]] * 5 + [["i1"]] + [[]] * 2
    assert state.attempts["i1"].gave_up


def test_attempts_expire_eight_hours_after_the_last() -> None:
    clock = FakeClock()
    _plans, state = passes([inst()], clock, 6)
    last = state.attempts["i1"].last
    clock.advance(last + core.ATTEMPT_EXPIRY - clock() - 1)
    plan, state = core.plan_group(state, [inst()], NODES, clock())
    assert plan.restart == []
    clock.advance(1)
    plan, state = core.plan_group(state, [inst()], NODES, clock())
    assert plan.restart == ["i1"] and plan.reset == ["i1"]
    assert state.attempts["i1"].count == 1


def test_counter_resets_when_seen_running() -> None:
    clock = FakeClock()
    _plans, state = passes([inst()], clock, 3)
    plan, state = core.plan_group(state, [inst(status=UP)], NODES, clock())
    assert plan.reset == ["i1"] and state.attempts == {}
    plan, state = core.plan_group(state, [inst()], NODES, clock())
    assert state.attempts["i1"].count == 1


def test_removed_instance_is_forgotten() -> None:
    _plan, state = core.plan_group(core.GroupState(), [inst()], NODES, 1000.0)
    plan, state = core.plan_group(state, [], NODES, 1300.0)
    assert plan.reset == ["i1"] and state.attempts == {}


@pytest.mark.parametrize("nodes, why", [
    ([core.NodeView("n1", offline=True)], "primary node n1 is offline"),
    ([core.NodeView("n1", bootid=None)], "primary node n1 is down"),
    ([], "primary node n1 is down"),
], ids=["offline", "not-answering", "unknown"])
def test_instances_on_bad_primaries_are_skipped_uncounted(nodes, why) -> None:
    plan, state = core.plan_group(core.GroupState(), [inst()], nodes, 1000.0)
    assert plan.idle and plan.skipped == [("i1", why)] and state.attempts == {}


def test_locked_instance_is_skipped_and_keeps_its_count() -> None:
    _plan, state = core.plan_group(core.GroupState(), [inst()], NODES, 1000.0)
    plan, state = core.plan_group(state, [inst(locked=True)], NODES, 1300.0)
    assert plan.idle and plan.skipped == [("i1", "locked by a job")]
    assert state.attempts["i1"].count == 1


def test_changed_boot_id_reactivates_disks_of_its_instances() -> None:
    insts = [inst("a", UP), inst("b", UP, pnode="n2"), inst("c", UP, pnode="n2", snodes=("n1",)),
             inst("d", UP, has_disks=False), inst("e", constants.INSTST_ADMINDOWN, admin_up=False),
             inst("f", DOWN)]
    _plan, state = core.plan_group(core.GroupState(), insts, NODES, 1000.0)
    assert state.bootids == {"n1": "b1", "n2": "b2"}
    rebooted = [core.NodeView("n1", bootid="new"), NODES[1]]
    plan, state = core.plan_group(state, insts, rebooted, 1300.0)
    assert plan.rebooted_nodes == ["n1"]
    assert plan.activate_disks == ["a", "c"]       # f is restarted, which activates them
    assert plan.restart == ["f"]
    assert state.bootids["n1"] == "new"


def test_first_sight_of_a_node_is_no_reboot() -> None:
    plan, _ = core.plan_group(core.GroupState(), [inst(status=UP)], NODES, 1000.0)
    assert plan.rebooted_nodes == [] and plan.activate_disks == []


def test_down_node_keeps_its_stored_boot_id() -> None:
    _plan, state = core.plan_group(core.GroupState(), [], NODES, 1000.0)
    _plan, state = core.plan_group(state, [], [core.NodeView("n1"), NODES[1]], 1300.0)
    assert state.bootids["n1"] == "b1"


def test_state_document_round_trips() -> None:
    clock = FakeClock()
    _plans, state = passes([inst(), inst("j", USER)], clock, 6)
    assert core.state_from_data(core.state_to_data(state)) == state


@pytest.mark.parametrize("data", [
    None, [], {"version": 99}, {"version": 1, "instances": []},
    {"version": 1, "instances": {"i": {"count": "x", "last": 1}}},
    {"version": 1, "instances": {"i": {"count": -1, "last": 1}}},
    {"version": 1, "instances": {"i": {"count": 1}}},
    {"version": 1, "bootids": {"n": 5}},
], ids=["null", "list", "version", "instances-list", "count-text", "count-negative",
        "no-last", "bootid-number"])
def test_bad_state_documents_are_refused(data) -> None:
    with pytest.raises(errors.ConfigurationError):
        core.state_from_data(data)
