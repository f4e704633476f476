"""``gnt-cluster epo`` on the client side: the plan (pure), the refusals, the jobs."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeLuxi

from ganeti import cli, constants
from ganeti.client import cluster_epo, gnt_cluster

N, U = constants.RS_NORMAL, constants.RS_UNAVAIL
# name, master, pinst_list, sinst_list, powered, offline, pip
MASTER = ["m", True, ["im"], [], True, False, "10.0.0.1"]
A = ["a", False, ["i1"], ["i2"], True, False, "10.0.0.2"]
B = ["b", False, ["i2"], [], True, False, "10.0.0.3"]
NO_OOB = ["c", False, ["i3"], [], None, False, "10.0.0.4"]
OFF = ["d", False, [], [], False, False, "10.0.0.5"]
OFFLINE = ["e", False, ["i4"], [], False, True, "10.0.0.6"]


def test_plan_off_lists_the_instances_and_the_nodes_to_power() -> None:
    plan = cluster_epo.plan([A, B, NO_OOB, OFF, OFFLINE], on=False, show_all=False)
    assert plan.error is None
    assert plan.nodes == ["a", "b"]
    assert plan.instances == {"i1": {"a"}, "i2": {"a", "b"}, "i3": {"c"}}
    assert plan.messages == [
        "Node c does not support out-of-band handling, it can not be handled in a fully"
        " automated manner", "Node d is already in desired power state, skipping",
        "Node e is already in desired power state, skipping"]


def test_plan_on_skips_the_master_and_brings_back_offline_unpowered_nodes() -> None:
    plan = cluster_epo.plan([MASTER, A, OFF, OFFLINE], on=True, show_all=True)
    assert plan.nodes == ["d", "e"] and plan.offline == ["e"]
    assert plan.instances == {"im": set(), "i1": {"a"}, "i2": {"a"}, "i4": {"e"}}
    assert plan.all_nodes == ["m", "a", "d", "e"]


def test_plan_off_of_the_master() -> None:
    assert "m is the master node, please do a master-failover" in str(
        cluster_epo.plan([MASTER, A], on=False, show_all=False).error)
    kept = cluster_epo.plan([MASTER, A], on=False, show_all=True)
    assert kept.nodes == ["a"] and "use --force-master" in kept.messages[0]
    assert cluster_epo.plan([MASTER, A], on=False, show_all=True,
                            force_master=True).nodes == ["m", "a"]


def _run(argv: list[str], cl: FakeLuxi) -> int:
    return cli.generic_main(gnt_cluster.commands, argv, "gnt-cluster", client_factory=lambda: cl)


@pytest.mark.parametrize("argv, message", [
    (["epo", "--groups", "--all"], "Only one of --groups or --all are allowed"),
    (["epo", "--all", "a"], "Arguments in combination with --all are not allowed"),
], ids=["groups-and-all", "args-and-all"])
def test_epo_refusals(argv, message, capsys) -> None:
    cl = FakeLuxi()
    assert _run(argv, cl) == 1
    assert message in capsys.readouterr().err
    assert cl.calls == []


def _cells(row: list[Any]) -> list[list[Any]]:
    return [[U, None] if value is None else [N, value] for value in row]


def test_epo_off_stops_the_instances_then_powers_the_nodes_off(capsys) -> None:
    oob_result = [[[N, "a"], [N, None]]]
    cl = FakeLuxi({
        "Query": {"fields": [], "data": [_cells(A)]},
        "SubmitManyJobs": [[True, 1], [True, 2]],
        "WaitForJobChange": [["success"], []],
        "QueryJobs": lambda ids, fields: [["success", ["success"],
                                           [oob_result if ids == [3] else None]]],
        "SubmitJob": 3,
    })
    assert _run(["epo", "-f", "--shutdown-timeout", "7", "--oob-timeout", "9", "a"], cl) == 0
    (jobs,) = [args[0] for method, args in cl.calls if method == "SubmitManyJobs"]
    assert [(op["OP_ID"], op["instance_name"], op["timeout"], op["no_remember"])
            for (op,) in jobs] == [("OP_INSTANCE_SHUTDOWN", "i1", 7, True),
                                   ("OP_INSTANCE_SHUTDOWN", "i2", 7, True)]
    ((offline, oob),) = [args[0] for method, args in cl.calls if method == "SubmitJob"]
    assert (offline["OP_ID"], offline["node_name"], offline["offline"],
            offline["auto_promote"]) == ("OP_NODE_SET_PARAMS", "a", True, True)
    assert (oob["command"], oob["node_names"], oob["ignore_status"], oob["timeout"]) == (
        "power-off", ["a"], True, 9)
    out = capsys.readouterr().out
    assert "Submit shutdown of instance i1" in out
    assert "All instances have been stopped successfully" in out


def test_epo_on_starts_what_is_back_and_gives_up_after_the_timeout(capsys) -> None:
    now = [0.0]
    cl = FakeLuxi({"SubmitManyJobs": [[True, 5]], "WaitForJobChange": [["success"], []],
                   "QueryJobs": [["success", ["success"], [None]]], "SubmitJob": 6})

    def sleep(seconds: float) -> None:
        now[0] += seconds
    opts = type("Opts", (), {"command": "gnt-cluster epo"})()
    ok = cluster_epo._wait_and_start(
        opts, cl, {"a": "10.0.0.2", "b": "10.0.0.3"}, {"i1": {"a"}, "i2": {"a", "b"}}, ["a"],
        probe=lambda address: address == "10.0.0.2", clock=lambda: now[0], sleep=sleep)
    assert ok is False
    submitted = [(method, args[0]) for method, args in cl.calls
                 if method in ("SubmitJob", "SubmitManyJobs")]
    assert [(m, [op["OP_ID"] for op in (ops if m == "SubmitJob" else [j[0] for j in ops])])
            for m, ops in submitted] == [("SubmitJob", ["OP_NODE_SET_PARAMS"]),
                                        ("SubmitManyJobs", ["OP_INSTANCE_STARTUP"])]
    captured = capsys.readouterr()
    assert "Node a became available" in captured.out
    assert "Submit startup of instance i1" in captured.out and "i2" not in captured.out
    assert "Time exceeded while waiting for nodes to become reachable again:\n  - b" in captured.err
    assert now[0] >= cluster_epo.REACHABLE_TIMEOUT
