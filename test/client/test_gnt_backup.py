"""gnt-backup verbs build upstream's opcodes (against a fake LUXI client)."""

from __future__ import annotations

from typing import Any

from fakes import FakeLuxi

from ganeti.cli import main as climain
from ganeti.client import gnt_backup


def _query(what: str, fields: list[str], qfilter: Any) -> Any:
    return {"fields": [{"name": f, "title": f, "kind": "text", "doc": ""} for f in fields],
            "data": [[[0, "node1"], [0, "inst1"]]]}


def _run(argv: list[str]) -> tuple[int, FakeLuxi]:
    cl = FakeLuxi({"Query": _query})
    rc = climain.generic_main(gnt_backup.commands, argv, prog="gnt-backup",
                              client_factory=lambda: cl)
    return rc, cl


def test_export_options() -> None:
    rc, cl = _run(["export", "-n", "node2", "--noshutdown", "--submit", "inst1"])
    assert rc == 0
    (op,) = cl.submitted[0]
    assert (op["OP_ID"], op["instance_name"], op["target_node"], op["shutdown"], op["mode"]) \
        == ("OP_BACKUP_EXPORT", "inst1", "node2", False, "local")
    rc, cl = _run(["export", "-n", "node2", "--remove-instance", "--submit", "inst1"])
    assert cl.submitted[0][0]["remove_instance"] is True and cl.submitted[0][0]["shutdown"] is True


def test_export_needs_the_node() -> None:
    assert _run(["export", "inst1"])[0] == 2


def test_import_options() -> None:
    rc, cl = _run(["import", "-n", "node3", "--src-node", "node2", "--src-dir", "old1",
                   "-t", "file", "--disk", "0:size=1G", "--no-name-check", "--no-ip-check",
                   "--submit", "inst1"])
    assert rc == 0
    (op,) = cl.submitted[0]
    assert (op["OP_ID"], op["mode"], op["src_node"], op["src_path"], op["pnode"]) == \
        ("OP_INSTANCE_CREATE", "import", "node2", "old1", "node3")
    assert op["disks"] == [{"size": 1024}] and op["disk_template"] == "file"
    assert op["nics"] == [] and "os_type" not in op     # both from the export


def test_list_by_node_and_remove(capsys: Any) -> None:
    rc, cl = _run(["list", "--node", "node1", "--node", "node2"])
    assert rc == 0
    assert cl.args_of("Query") == [["export", ["node", "export"],
                                    ["|", ["==", "node", "node1"], ["==", "node", "node2"]]]]
    assert "inst1" in capsys.readouterr().out
    rc, cl = _run(["remove", "--submit", "inst1"])
    (op,) = cl.submitted[0]
    assert (op["OP_ID"], op["instance_name"]) == ("OP_BACKUP_REMOVE", "inst1")
