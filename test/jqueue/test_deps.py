"""Dependency evaluation rules (doc/protocols/jobs.md, "Dependencies") and the waiting list."""

from __future__ import annotations

import pytest

from ganeti.jqueue import deps


@pytest.mark.parametrize("status,wanted,expected", [
    ("running", ["success"], deps.DEP_WAIT),
    ("queued", [], deps.DEP_WAIT),
    ("success", ["success"], deps.DEP_CONTINUE),
    ("error", [], deps.DEP_CONTINUE),
    ("success", [], deps.DEP_CONTINUE),
    ("canceled", [], deps.DEP_CANCEL),
    ("canceled", ["success"], deps.DEP_CANCEL),
    ("canceled", ["canceled"], deps.DEP_CONTINUE),
    ("error", ["success"], deps.DEP_WRONGSTATUS),
    ("success", ["error", "canceled"], deps.DEP_WRONGSTATUS),
    (None, ["success"], deps.DEP_ERROR),
])
def test_evaluate(status: str | None, wanted: list[str], expected: str) -> None:
    assert deps.evaluate(10, 5, wanted, status)[0] == expected


def test_wrong_status_message_names_both() -> None:
    _, msg = deps.evaluate(10, 5, ["success"], "error")
    assert "status 'error'" in msg and "wanted 'success'" in msg


def test_self_dependency_is_an_error() -> None:
    assert deps.evaluate(5, 5, [], "running")[0] == deps.DEP_ERROR


def test_manager_wakes_and_reports() -> None:
    mgr = deps.DependencyManager()
    mgr.add_waiter(4, 6, ["success"])
    mgr.add_waiter(4, 7, [])
    mgr.add_waiter(5, 7, ["error"])
    info = mgr.get_lock_info()
    assert info[0] == {"name": "job/4", "mode": None, "owner": [],
                       "pending": [["any", ["job/7"]], ["success", ["job/6"]]]}
    assert mgr.is_waiting(6)
    assert mgr.job_finished(4) == [6, 7]
    assert mgr.job_finished(4) == []
    mgr.remove_job(7)
    assert mgr.get_lock_info() == []


def test_find_cycle_follows_waits_back_to_the_new_waiter() -> None:
    waits = {6: [7], 7: [5], 8: [6]}
    assert deps.find_cycle(lambda j: waits.get(j, []), 5, 6) == [5, 6, 7, 5]
    assert deps.find_cycle(lambda j: waits.get(j, []), 9, 6) is None
    assert deps.find_cycle(lambda j: {1: [2], 2: [1]}.get(j, []), 3, 1) is None  # cycle not through 3


def test_cycle_is_refused_and_not_registered() -> None:
    mgr = deps.DependencyManager()
    assert mgr.add_waiter_or_cycle(6, 5, ["success"]) is None
    assert mgr.add_waiter_or_cycle(7, 6, []) is None
    cycle = mgr.add_waiter_or_cycle(5, 7, [])
    assert cycle == [7, 5, 6, 7]
    assert not mgr.is_waiting(7)
    assert "jobs 7 -> 5 -> 6 -> 7" in deps.cycle_message(cycle)
