"""``gnt-node power`` and ``health`` on the client side: the jobs they submit, the
options, and Ganeti's Node/Status tables."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeLuxi

from ganeti import cli, constants
from ganeti.client import gnt_node, node_oob

N, U = constants.RS_NORMAL, constants.RS_UNAVAIL


def _luxi(result: Any, **answers: Any) -> FakeLuxi:
    """A master whose every job succeeds, its last opcode answering ``result``."""
    def query_jobs(ids: Any, fields: Any) -> list[Any]:
        ops = next(args[0] for method, args in cl.calls if method == "SubmitJob")
        return [["success", ["success"] * len(ops), [None] * (len(ops) - 1) + [result]]]
    cl = FakeLuxi({"WaitForJobChange": [["success"], []], "QueryJobs": query_jobs, **answers})
    return cl


def _run(argv: list[str], cl: FakeLuxi) -> int:
    return cli.generic_main(gnt_node.commands, argv, "gnt-node", client_factory=lambda: cl)


def _submitted(cl: FakeLuxi) -> list[dict[str, Any]]:
    return next(args[0] for method, args in cl.calls if method == "SubmitJob")


def test_power_table_texts() -> None:
    result = [[[N, "a"], [N, {"powered": True}]], [[N, "b"], [N, {"powered": False}]],
              [[N, "c"], [U, None]], [[N, "d"], [constants.RS_NODATA, None]]]
    assert node_oob.power_table("status", result) == (
        [["a", "powered"], ["b", "unpowered"], ["c", "(unavail)"], ["d", "(nodata)"]], 2)
    assert node_oob.power_table("on", [[[N, "a"], [N, None]]]) == ([["a", "invoked"]], 0)


def test_health_table_puts_the_node_on_its_first_item_only() -> None:
    result = [[[N, "a"], [N, [["temp", "OK"], ["fan", "CRITICAL"]]]], [[N, "b"], [N, []]],
              [[N, "c"], [U, None]]]
    assert node_oob.health_table(result) == (
        [["a", "temp=OK"], ["", "fan=CRITICAL"], ["b", ""], ["c", "(unavail)"]], 1)


def test_power_off_marks_the_nodes_offline_first_and_passes_the_options(capsys) -> None:
    cl = _luxi([[[N, "n2"], [N, None]], [[N, "n3"], [N, None]]])
    code = _run(["power", "-f", "--auto-promote", "--oob-timeout", "9", "--power-delay", "0.5",
                 "off", "n2", "n3"], cl)
    assert code == 0
    ops = _submitted(cl)
    assert [(op["OP_ID"], op.get("node_name")) for op in ops] == [
        ("OP_NODE_SET_PARAMS", "n2"), ("OP_NODE_SET_PARAMS", "n3"), ("OP_OOB_COMMAND", None)]
    assert all(op["offline"] is True and op["auto_promote"] is True for op in ops[:2])
    assert {k: v for k, v in ops[2].items() if k != "reason"} == {
        "OP_ID": "OP_OOB_COMMAND", "command": "power-off", "node_names": ["n2", "n3"],
        "ignore_status": False, "timeout": 9, "power_delay": 0.5}
    assert capsys.readouterr().out.splitlines() == ["Node Status", "n2   invoked",
                                                    "n3   invoked"]


def test_power_off_with_ignore_status_sends_only_the_oob_command() -> None:
    cl = _luxi([[[N, "n2"], [N, None]]])
    assert _run(["power", "-f", "--ignore-status", "off", "n2"], cl) == 0
    (op,) = _submitted(cl)
    assert op["command"] == "power-off" and op["ignore_status"] is True


def test_power_status_failure_of_a_node_is_exit_1(capsys) -> None:
    cl = _luxi([[[N, "n1"], [N, {"powered": True}]], [[N, "n2"], [U, None]]])
    assert _run(["power", "--no-headers", "--separator=|", "status"], cl) == 1
    assert capsys.readouterr().out.splitlines() == ["n1|powered", "n2|(unavail)"]
    (op,) = _submitted(cl)
    assert op["command"] == "power-status" and op["node_names"] == []


@pytest.mark.parametrize("argv, message", [
    (["power", "off"], "Please provide at least one node or use --all"),
    (["power", "cycle", "--all", "n2"], "Please provide either nodes or use --all"),
    (["power", "up", "n2"], "power subcommand up not supported."),
    (["power", "cycle", "n2"], "Use --force to confirm"),
], ids=["no-nodes", "nodes-and-all", "unknown", "unconfirmed"])
def test_power_refusals_submit_nothing(argv, message, capsys) -> None:
    cl = FakeLuxi()
    assert _run(argv, cl) == 1
    assert message in capsys.readouterr().err
    assert cl.calls == []


def test_power_all_takes_the_nodes_with_a_program_and_not_the_master() -> None:
    nodes = {"fields": [], "data": [[[N, "n1"], [N, True], [N, True]],
                                    [[N, "n2"], [N, True], [N, False]],
                                    [[N, "n3"], [U, None], [N, False]]]}
    cl = _luxi([[[N, "n2"], [N, None]]], Query=nodes)
    assert _run(["power", "-f", "--all", "cycle"], cl) == 0
    (op,) = _submitted(cl)
    assert op["node_names"] == ["n2"] and op["command"] == "power-cycle"


def test_health_sends_the_timeout(capsys) -> None:
    cl = _luxi([[[N, "n1"], [N, [["temp", "OK"]]]]])
    assert _run(["health", "--oob-timeout", "5", "n1"], cl) == 0
    (op,) = _submitted(cl)
    assert (op["command"], op["node_names"], op["timeout"]) == ("health", ["n1"], 5)
    assert capsys.readouterr().out.splitlines() == ["Node Status", "n1   temp=OK"]


def test_modify_node_powered() -> None:
    cl = _luxi([["powered", "False"]])
    assert _run(["modify", "--node-powered", "no", "n2"], cl) == 0
    (op,) = _submitted(cl)
    assert op["powered"] is False


def test_modify_online_asks_first_as_ganeti(capsys) -> None:
    cl = _luxi([["offline", "False"]])
    assert _run(["modify", "-O", "no", "n2"], cl) == 1      # no terminal: refused, no job
    assert not [c for c in cl.calls if c[0] == "SubmitJob"]
    err = capsys.readouterr().err
    assert "Node n2 is being brought online by hand" in err and "Use --force" in err
    assert _run(["modify", "-O", "no", "--force", "n2"], cl) == 0
    (op,) = _submitted(cl)
    assert op["offline"] is False and op["force"] is True
    cl = _luxi([["offline", "True"]])
    assert _run(["modify", "-O", "yes", "n2"], cl) == 0      # offline needs no confirmation
