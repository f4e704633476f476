"""OP_OOB_COMMAND: the out-of-band answer checks (pure) and the LU with FakeRpc."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, errors  # noqa: E402
from ganeti.cmdlib import oob  # noqa: E402
from ganeti.opcodes import node as onode  # noqa: E402

PROGRAM = "/usr/lib/ganeti/oob-test"
N1, N2, N3 = node_name(1), node_name(2), node_name(3)


# --- the answer checks ----------------------------------------------------------------

@pytest.mark.parametrize("command, text, payload", [
    ("power-on", "", None),
    ("power-off", "  \n", None),
    ("power-cycle", "null", None),
    ("power-status", '{"powered": false}', {"powered": False}),
    ("health", '[["temp", "OK"], ["disk0", "CRITICAL"]]', [["temp", "OK"], ["disk0", "CRITICAL"]]),
    ("health", "[]", []),
], ids=["on-empty", "off-blank", "cycle-null", "status", "health", "health-empty"])
def test_check_output_accepts_the_command_shapes(command, text, payload) -> None:
    assert oob.check_output(command, text) == payload


@pytest.mark.parametrize("command, text, problem", [
    ("power-on", '{"powered": true}', "power-on is expected to not return payload"),
    ("power-status", "", "power-status is expected to return a dict but got NoneType"),
    ("power-status", '{"on": true}', "expected to return a boolean 'powered'"),
    ("power-status", '{"powered": "yes"}', "expected to return a boolean 'powered'"),
    ("health", "", "command 'health' is expected to return a list but got NoneType"),
    ("health", '[["temp", "HOT"]]', "health item 'temp' has invalid status \"HOT\""),
    ("health", '[["temp"]]', "is not an [item, status] pair"),
    ("health", "not json", "output that is not JSON"),
], ids=["on-data", "status-empty", "status-key", "status-type", "health-empty",
        "health-status", "health-pair", "not-json"])
def test_check_output_refuses_other_shapes(command, text, problem) -> None:
    with pytest.raises(errors.OpExecError, match="Check of out-of-band payload failed") as exc:
        oob.check_output(command, text)
    assert problem in str(exc.value)


def test_output_problems_lists_every_bad_health_item() -> None:
    assert len(oob.output_problems("health", [["a", "BAD"], ["b", "OK"], ["c", "NOPE"]])) == 2


# --- the LU ------------------------------------------------------------------------------

def _setup(tmp_path, *, offline=(), program=PROGRAM):
    cfg = make_config(tmp_path, nodes=3, offline=offline)
    if program:
        cluster = cfg.get_cluster_info()
        cluster.ndparams["oob_program"] = program
        cfg.update(cluster)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


def _answer(rpc, outputs):
    """The master answers run_oob with ``outputs[(command, node)]`` (str, or an RpcError)."""
    seen = []

    def handler(node, args):
        program, command, remote, timeout = args
        seen.append((node, program, command, remote, timeout))
        out = outputs.get((command, remote), "")
        if isinstance(out, Exception):
            raise out
        return out
    rpc.set_handler("run_oob", handler)
    return seen


def _op(command, *names, **kw):
    return onode.OpOobCommand(command=command, node_names=list(names), power_delay=0, **kw)


def test_power_status_runs_the_program_on_the_master_for_every_node(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    seen = _answer(rpc, {("power-status", n): '{"powered": true}' for n in (N1, N2, N3)})
    result, _, _ = run_opcode(ctx, _op("power-status", timeout=7))
    assert result == [[[constants.RS_NORMAL, n], [constants.RS_NORMAL, {"powered": True}]]
                      for n in (N1, N2, N3)]
    assert seen == [(N1, PROGRAM, "power-status", n, 7) for n in (N1, N2, N3)]


def test_power_off_records_the_node_unpowered(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, offline=(2,))
    _answer(rpc, {})
    result, _, _ = run_opcode(ctx, _op("power-off", N2))
    assert result == [[[constants.RS_NORMAL, N2], [constants.RS_NORMAL, None]]]
    assert cfg.get_node_info_by_name(N2).powered is False
    run_opcode(ctx, _op("power-on", N2))
    assert cfg.get_node_info_by_name(N2).powered is True


def test_power_off_records_the_node_before_the_program_runs_and_undoes_a_failure(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, offline=(2, 3))
    recorded = []

    def handler(node, args):
        recorded.append((args[2], cfg.get_node_info_by_name(args[2]).powered))
        if args[2] == N3:
            raise errors.RpcError("exit status 1; output: no board")
        return ""
    rpc.set_handler("run_oob", handler)
    result, messages, _ = run_opcode(ctx, _op("power-off", N2, N3))
    assert result == [[[constants.RS_NORMAL, N2], [constants.RS_NORMAL, None]],
                      [[constants.RS_NORMAL, N3], [constants.RS_NODATA, None]]]
    assert recorded == [(N2, False), (N3, False)]      # recorded while the nodes answer
    assert cfg.get_node_info_by_name(N2).powered is False
    assert cfg.get_node_info_by_name(N3).powered is True  # the failed one is put back


def test_power_off_of_an_online_node_needs_ignore_status(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    seen = _answer(rpc, {})
    with pytest.raises(errors.OpPrereqError, match=f"Cannot power off node {N2} because it is"
                                                   " not marked offline"):
        run_opcode(ctx, _op("power-off", N2))
    assert seen == []
    run_opcode(ctx, _op("power-off", N2, ignore_status=True))
    assert cfg.get_node_info_by_name(N2).powered is False


@pytest.mark.parametrize("command", ["power-off", "power-cycle"])
def test_the_master_is_refused_without_force_master(tmp_path, command) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    seen = _answer(rpc, {})
    with pytest.raises(errors.OpPrereqError, match=f"Operating on the master node {N1} is not"
                       f" allowed for {command}; run '{PROGRAM} {command} {N1}'"):
        run_opcode(ctx, _op(command, N1, ignore_status=True))
    assert seen == []
    # force_master: allowed, and the master goes last (it answers for the others)
    result, _, _ = run_opcode(ctx, _op(command, N1, N2, force_master=True, ignore_status=True))
    assert [entry[0][1] for entry in result] == [N2, N1]


def test_without_names_power_off_leaves_the_master_out(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, offline=(2, 3))
    seen = _answer(rpc, {})
    run_opcode(ctx, _op("power-off"))
    assert [remote for _, _, _, remote, _ in seen] == [N2, N3]


def test_a_node_without_program_is_unavail_and_failures_are_nodata(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    node3 = cfg.get_node_info_by_name(N3)
    node3.ndparams["oob_program"] = ""
    cfg.update(node3)
    _answer(rpc, {("health", N1): '[["temp", "WARNING"]]',
                  ("health", N2): errors.RpcError("exit status 1; output: no board")})
    result, messages, _ = run_opcode(ctx, _op("health"))
    assert result == [[[constants.RS_NORMAL, N1], [constants.RS_NORMAL, [["temp", "WARNING"]]]],
                      [[constants.RS_NORMAL, N2], [constants.RS_NODATA, None]],
                      [[constants.RS_NORMAL, N3], [constants.RS_UNAVAIL, None]]]
    text = "\n".join(messages)
    assert f"Item 'temp' on node '{N1}' has status 'WARNING'" in text
    assert f"Out-of-band RPC failed on node '{N2}'" in text and "no board" in text


def test_a_bad_answer_is_nodata_and_changes_no_record(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    _answer(rpc, {("power-on", N2): '{"unexpected": 1}'})
    node2 = cfg.get_node_info_by_name(N2)
    node2.powered = False
    cfg.update(node2)
    result, messages, _ = run_opcode(ctx, _op("power-on", N2))
    assert result == [[[constants.RS_NORMAL, N2], [constants.RS_NODATA, None]]]
    assert cfg.get_node_info_by_name(N2).powered is False
    assert any(f"Payload returned by node '{N2}' is not valid" in m for m in messages)


def test_an_unknown_command_or_node_is_refused(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    with pytest.raises(errors.ParameterError):
        onode.OpOobCommand(command="power-up").validate()
    with pytest.raises(errors.OpPrereqError, match="unknown"):
        run_opcode(ctx, _op("power-status", "nosuch.example.com"))


def test_modify_powered_and_online_follow_the_oob_program(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, offline=(2,))
    node2 = cfg.get_node_info_by_name(N2)
    node2.powered = False
    cfg.update(node2)
    with pytest.raises(errors.OpPrereqError, match=f"Node {N2} needs to be turned on"):
        run_opcode(ctx, onode.OpNodeSetParams(node_name=N2, offline=False))
    node2.ndparams["oob_program"] = ""
    cfg.update(node2)
    with pytest.raises(errors.OpPrereqError, match="does not support out-of-band handling"):
        run_opcode(ctx, onode.OpNodeSetParams(node_name=N2, powered=True))
