"""OP_EXT_STORAGE_DIAGNOSE and the extstorage resource: the per-provider summaries
(pure) and the LU against a fake config and FakeRpc."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, errors  # noqa: E402
from ganeti.cmdlib import extstorage as ces  # noqa: E402
from ganeti.cmdlib import query as cquery  # noqa: E402
from ganeti.objects import NodeGroup  # noqa: E402
from ganeti.opcodes.os import OpExtStorageDiagnose  # noqa: E402

N1, N2, N3 = node_name(1), node_name(2), node_name(3)
PATH = "/srv/ganeti/extstorage/"
GOOD = ["/p", True, "", [["size", "d"]]]
BAD = ["/p", False, "File 'grow' under path '/p' is missing", []]


def _row(name: str, valid: bool = True, params: list | None = None) -> list:
    if not valid:
        return [name, PATH + name, False, "missing", []]
    return [name, PATH + name, True, "", params if params is not None else [["size", "d"]]]


# --- the pure summaries ----------------------------------------------------------------

def test_by_provider_gives_every_answering_node_an_entry() -> None:
    answers = {N1: [_row("a"), _row("b", valid=False)], N2: [_row("a")], N3: []}
    result = ces.by_provider(answers)
    assert list(result) == ["a", "b"]
    assert result["a"] == {N1: [[PATH + "a", True, "", [["size", "d"]]]],
                           N2: [[PATH + "a", True, "", [["size", "d"]]]], N3: []}
    assert result["b"] == {N1: [[PATH + "b", False, "missing", []]], N2: [], N3: []}


def test_by_provider_keeps_shadowed_rows_after_the_one_in_effect() -> None:
    answers = {N1: [_row("a"), ["a", "/usr/share/ganeti/extstorage/a", False, "x", []]]}
    assert [r[0] for r in ces.by_provider(answers)["a"][N1]] == [
        PATH + "a", "/usr/share/ganeti/extstorage/a"]


@pytest.mark.parametrize("status, expected", [
    ({N1: [GOOD], N2: [GOOD], N3: [GOOD]}, {"g1": True, "g2": True}),
    ({N1: [GOOD], N2: [BAD], N3: [GOOD]}, {"g1": False, "g2": True}),
    ({N1: [GOOD], N2: [], N3: [GOOD]}, {"g1": False, "g2": True}),
    ({N1: [GOOD], N3: [BAD]}, {"g1": True, "g2": False}),
    ({N1: [GOOD, BAD], N2: [GOOD], N3: [BAD, GOOD]}, {"g1": True, "g2": False}),
], ids=["all-valid", "one-invalid", "one-missing", "no-answer-not-counted", "first-row-counts"])
def test_nodegroup_status(status, expected) -> None:
    assert ces.nodegroup_status(status, {"g1": [N1, N2], "g2": [N3]}) == expected


def test_nodegroup_status_of_a_group_without_answering_nodes_is_valid() -> None:
    assert ces.nodegroup_status({N1: [BAD]}, {"empty": [], "offline": [N3]}) == \
        {"empty": True, "offline": True}


def test_common_parameters_are_those_on_every_valid_node_in_first_order() -> None:
    status = {N1: [["/p", True, "", [["b", "B"], ["a", "A"], ["c", "C"]]]],
              N2: [["/p", True, "", [["a", "A"], ["b", "B"]]]],
              N3: [BAD]}
    assert ces.common_parameters(status) == [["b", "B"], ["a", "A"]]


def test_common_parameters_when_valid_nowhere() -> None:
    assert ces.common_parameters({N1: [BAD], N2: []}) == []


# --- the LU -------------------------------------------------------------------------------

def _setup(tmp_path, *, offline=()):
    cfg = make_config(tmp_path, nodes=3, offline=offline)
    cfg.add_nodegroup(NodeGroup(name="other", uuid="group-other"))
    node3 = cfg.get_node_info_by_name(N3)
    node3.group = "group-other"
    cfg.update(node3)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


def _answers(rpc, table):
    rpc.set_handler("extstorage_diagnose", lambda node, args: table.get(node, []))


def _op(*fields, names=()):
    return OpExtStorageDiagnose(output_fields=list(fields), names=list(names))


def test_lu_rows_of_the_requested_fields(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    _answers(rpc, {N1: [_row("ok"), _row("half")], N2: [_row("ok")],
                   N3: [_row("ok"), _row("half", valid=False)]})
    result, _, _ = run_opcode(ctx, _op("name", "nodegroup_status", "parameters"))
    assert result == [["half", {"default": False, "other": False}, [["size", "d"]]],
                      ["ok", {"default": True, "other": True}, [["size", "d"]]]]
    result, _, _ = run_opcode(ctx, _op("node_status", names=["half"]))
    assert result == [[{N1: [[PATH + "half", True, "", [["size", "d"]]]], N2: [],
                        N3: [[PATH + "half", False, "missing", []]]}]]


def test_lu_skips_offline_nodes_and_failed_answers(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, offline=(3,))
    _answers(rpc, {N1: [_row("ok")]})
    rpc.set_failure("extstorage_diagnose", N2, "connection refused")
    result, _, _ = run_opcode(ctx, _op("name", "node_status", "nodegroup_status"))
    assert result == [["ok", {N1: [[PATH + "ok", True, "", [["size", "d"]]]]},
                       {"default": True, "other": True}]]
    assert rpc.nodes_called("extstorage_diagnose") == {N1, N2}


def test_lu_unknown_name_and_field(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    _answers(rpc, {N1: [_row("ok")]})
    with pytest.raises(errors.OpPrereqError, match="nosuch") as exc:
        run_opcode(ctx, _op("name", names=["nosuch"]))
    assert exc.value.args[1] == errors.ECODE_NOENT
    with pytest.raises(errors.OpPrereqError, match="Unknown output fields selected: bogus"):
        run_opcode(ctx, _op("name", "bogus"))


def test_extstorage_is_a_query_resource_with_ganetis_fields() -> None:
    res = cquery.RESOURCES[constants.QR_EXTSTORAGE]
    assert list(res.table) == ["name", "node_status", "nodegroup_status", "parameters"]
