"""The taker's catch-up decision (ganeti.failover.joblog): logs compared, not maxima."""

from __future__ import annotations

import pytest

from ganeti.failover import joblog
from ganeti.failover.joblog import NodeLog
from ganeti.utils import idranges

CANDS = ["node1", "node2", "node3"]


def _log(node: str, ids: set[int] | range, serial: int = 0) -> NodeLog:
    return NodeLog(node, frozenset(ids), serial)


@pytest.mark.parametrize("ids, ranges", [
    (set(), []), ({5}, [[5, 5]]), ({1, 2, 3, 7, 8, 10}, [[1, 3], [7, 8], [10, 10]]),
], ids=["empty", "one", "gaps"])
def test_ranges_round_trip(ids: set[int], ranges: list[list[int]]) -> None:
    assert idranges.to_ranges(ids) == ranges
    assert idranges.from_ranges(ranges) == ids


@pytest.mark.parametrize("data", [None, [[3, 1]], [[0, 2]], [[1]], [["1", 2]], [[True, 2]],
                                  [[1, idranges.MAX_IDS + 1]]],
                         ids=["none", "reversed", "zero", "short", "text", "bool", "huge"])
def test_invalid_ranges_are_refused_with_a_reason(data: object) -> None:
    assert isinstance(idranges.from_ranges(data), str)
    assert isinstance(joblog.log_from_data("node2", {"ids": data, "serial": 1}), str)


def test_a_gap_below_the_highest_id_is_fetched() -> None:
    # same highest id everywhere: comparing maxima would see nothing missing
    logs = {"node2": _log("node2", {1, 2, 4}), "node1": _log("node1", {1, 2, 3, 4}),
            "node3": _log("node3", {1, 2, 4})}
    plan = joblog.plan_catch_up("node2", CANDS, logs)
    assert plan.ok and plan.fetch == {"node1": [3]} and plan.lacking == 1


def test_missing_jobs_come_from_as_few_nodes_as_possible() -> None:
    logs = {"node2": _log("node2", {1}), "node1": _log("node1", {1, 2, 3, 4}),
            "node3": _log("node3", {1, 2, 5})}
    plan = joblog.plan_catch_up("node2", CANDS, logs)
    assert plan.fetch == {"node1": [2, 3, 4], "node3": [5]}


def test_the_queue_serial_is_raised_to_every_id_seen_or_handed_out() -> None:
    logs = {"node2": _log("node2", {1}, serial=1), "node1": _log("node1", {1}, serial=1002),
            "node3": _log("node3", {1, 7}, serial=3)}
    plan = joblog.plan_catch_up("node2", CANDS, logs)
    assert plan.ok and plan.serial == 1002


def test_a_minority_of_candidates_answering_is_refused() -> None:
    logs = {"node2": _log("node2", {1}), "node1": "connection refused", "node3": "timeout"}
    plan = joblog.plan_catch_up("node2", CANDS, logs)
    assert not plan.ok and "1 of 3" in plan.reason and "node1 (connection refused)" in plan.reason
    assert plan.fetch == {}


def test_a_majority_answering_is_enough_and_the_silent_one_is_named() -> None:
    logs = {"node2": _log("node2", {1, 2}), "node1": _log("node1", {1, 2, 3}),
            "node3": "timeout"}
    plan = joblog.plan_catch_up("node2", CANDS, logs)
    assert plan.ok and plan.fetch == {"node1": [3]} and plan.missing == {"node3": "timeout"}


def test_without_its_own_log_the_taker_compares_nothing() -> None:
    plan = joblog.plan_catch_up("node2", CANDS, {"node1": _log("node1", {1}),
                                                  "node3": _log("node3", {1})})
    assert not plan.ok and "own job log" in plan.reason


def test_a_lone_candidate_is_its_own_majority() -> None:
    plan = joblog.plan_catch_up("node1", ["node1"], {"node1": _log("node1", {1, 2}, 2)})
    assert plan.ok and plan.fetch == {} and plan.serial == 2
