"""gnt-storage: Ganeti's layouts of diagnose and info, and the opcode the verbs send."""

from __future__ import annotations

from typing import Any

import pytest

from fakes import FakeLuxi

from ganeti.cli import main as climain
from ganeti.client import gnt_storage

NODE_STATUS = {
    "node10": [["/srv/ganeti/extstorage/pool", True, "", [["size", "S"], ["pool", "P"]]]],
    "node2": [["/srv/ganeti/extstorage/pool", True, "", []]],
    "node3": [["/srv/ganeti/extstorage/pool", False, "File 'grow' under path"
               " '/srv/ganeti/extstorage/pool' is missing", []]],
    "node4": [],
}


def test_format_diagnose_valid_nodes_then_the_others_then_groups() -> None:
    rows = [["pool", NODE_STATUS, {"other": False, "default": True, "g10": True}]]
    assert gnt_storage.format_diagnose(rows) == [
        "Provider: pool",
        "---",
        "  Node: node2, status: valid (path: /srv/ganeti/extstorage/pool) [no parameters]",
        "  Node: node10, status: valid (path: /srv/ganeti/extstorage/pool)"
        " [parameters: size, pool]",
        "  Node: node3, status: invalid - File 'grow' under path '/srv/ganeti/extstorage/pool'"
        " is missing (path: /srv/ganeti/extstorage/pool) [no parameters]",
        "  Node: node4, status: ExtStorage provider not found",
        "  --",
        "  For nodegroup: default --> valid",
        "  For nodegroup: g10 --> valid",
        "  For nodegroup: other --> invalid",
        "",
    ]


INFO_ROWS = [["bad", {"default": False}, []],
             ["pool", {"g2": True, "default": True, "g1": False}, [["size", "The size"]]]]


def test_format_info_all() -> None:
    assert gnt_storage.format_info(INFO_ROWS, []) == [
        "bad:", "  - Invalid for all nodegroups", "",
        "pool:", "  - Valid for nodegroups:", "      default", "      g2",
        "  - Supported parameters:", "      size: The size", "",
    ]


def test_format_info_named_and_not_found() -> None:
    assert gnt_storage.format_info(INFO_ROWS, ["nosuch", "pool"]) == [
        "pool:", "  - Valid for nodegroups:", "      default", "      g2",
        "  - Supported parameters:", "      size: The size", "",
        "nosuch: Not Found", "",
    ]


def _client(result: Any) -> FakeLuxi:
    return FakeLuxi({"WaitForJobChange": [["success"], []],
                     "QueryJobs": [["success", ["success"], [result]]]})


@pytest.mark.parametrize("verb, fields", [
    ("diagnose", ["name", "node_status", "nodegroup_status"]),
    ("info", ["name", "nodegroup_status", "parameters"]),
])
def test_verbs_send_ganetis_opcode(verb, fields, capsys) -> None:
    cl = _client(INFO_ROWS if verb == "info" else [["pool", NODE_STATUS, {"default": True}]])
    rc = climain.generic_main(gnt_storage.commands, [verb, "--priority", "low"],
                              prog="gnt-storage", client_factory=lambda: cl)
    assert rc == 0
    ((op,),) = cl.submitted
    assert {k: op[k] for k in ("OP_ID", "output_fields", "names", "priority")} == {
        "OP_ID": "OP_EXT_STORAGE_DIAGNOSE", "output_fields": fields, "names": [],
        "priority": 10}
    assert capsys.readouterr().out.startswith("bad:" if verb == "info" else "Provider: pool\n")


@pytest.mark.parametrize("verb, message", [
    ("diagnose", "Can't get the list of ExtStorage providers"),
    ("info", "Can't get the ExtStorage providers list"),
])
def test_no_provider_at_all_fails(verb, message, capsys) -> None:
    rc = climain.generic_main(gnt_storage.commands, [verb], prog="gnt-storage",
                              client_factory=lambda: _client([]))
    assert rc == 1 and message in capsys.readouterr().err
