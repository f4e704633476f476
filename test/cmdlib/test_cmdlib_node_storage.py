"""Node storage LUs (list/modify/repair) with FakeRpc, and the node side's listing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, errors  # noqa: E402
from ganeti.backend import storageunits  # noqa: E402
from ganeti.backend.context import NodeContext  # noqa: E402
from ganeti.opcodes import node_storage as ops  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402

ALL = list(constants.VALID_STORAGE_FIELDS)


def _setup(tmp_path, templates=("file", "diskless")):
    cfg = make_config(tmp_path, nodes=3, offline=(3,))
    cluster = cfg.get_cluster_info()
    cluster.enabled_disk_templates = list(templates)
    cfg.update(cluster)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


def _units(node, args):
    su_name, su_args, name, fields = args
    values = {"name": su_args[0], "size": 1000, "used": 10, "free": 900, "allocatable": True}
    return [[values[f] for f in fields]]


def test_query_storage_rows_in_field_order_skipping_offline_nodes(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    rpc.set_handler("storage_list", _units)
    rows, _, _ = run_opcode(ctx, ops.OpNodeQueryStorage(output_fields=ALL))
    assert rows == [[node_name(i), "file", "/srv/ganeti/file-storage", 1000, 10, 900, True]
                    for i in (1, 2)]
    ((_, nodes, args),) = [c for c in rpc.calls if c[0] == "storage_list"]
    assert sorted(nodes) == [node_name(1), node_name(2)]
    assert args[0] == "file" and args[3] == ["name", "size", "used", "free", "allocatable"]


def test_query_storage_one_node_by_short_name_and_failing_node_warns(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    rpc.set_failure("storage_list", node_name(2), "disk on fire")
    rows, messages, _ = run_opcode(ctx, ops.OpNodeQueryStorage(
        output_fields=["node", "free"], nodes=[node_name(2).split(".")[0]]))
    assert rows == []
    assert any("disk on fire" in m for m in messages)


@pytest.mark.parametrize(("params", "match"), [
    ({"output_fields": ["name", "bogus"]}, "Unknown output field"),
    ({"output_fields": ["name"], "storage_type": "rados"}, "not supported"),
    ({"output_fields": ["name"], "storage_type": "lvm-vg"}, "'plain' is not among"),
    ({"output_fields": ["name"], "storage_type": "sharedfile"}, "not enabled"),
    ({"output_fields": ["name"], "nodes": ["nosuch"]}, "unknown"),
], ids=["field", "unsupported", "lvm-not-enabled", "not-enabled", "node"])
def test_query_storage_refusals(tmp_path, params, match) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    with pytest.raises(errors.OpPrereqError, match=match):
        run_opcode(ctx, ops.OpNodeQueryStorage(**params))
    assert not [c for c in rpc.calls if c[0] == "storage_list"]


def test_default_type_needs_a_file_based_template(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, templates=("diskless",))
    with pytest.raises(errors.OpPrereqError, match="No storage type"):
        run_opcode(ctx, ops.OpNodeQueryStorage(output_fields=["name"]))


@pytest.mark.parametrize(("op", "match"), [
    (ops.OpNodeModifyStorage(node_name="node2", storage_type="file", name="/x",
                             changes={"allocatable": False}), "can not be modified"),
    (ops.OpNodeModifyStorage(node_name="node2", storage_type="lvm-pv", name="/dev/sda",
                             changes={"allocatable": False}), "not enabled"),
    (ops.OpNodeModifyStorage(node_name="node2", storage_type="lvm-pv", name="/dev/sda",
                             changes={"size": 1}), "no modifiable field"),
    (ops.OpRepairNodeStorage(node_name="node2", storage_type="sharedfile", name="/x"),
     "can not be repaired"),
    (ops.OpRepairNodeStorage(node_name="node2", storage_type="lvm-vg", name="xenvg"),
     "not enabled"),
], ids=["modify-file", "modify-lvm-pv", "modify-field", "repair-sharedfile", "repair-lvm-vg"])
def test_modify_and_repair_are_refused_clearly(tmp_path, op, match) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    with pytest.raises(errors.OpPrereqError, match=match):
        run_opcode(ctx, op)
    assert rpc.calls == []


# --- node side ------------------------------------------------------------------------

@pytest.fixture
def nctx(tmp_path) -> NodeContext:
    return NodeContext(paths=Paths(root=str(tmp_path / "node")), hostname="node1",
                       noded_port=1811, clock=lambda: 0.0, sleep=lambda s: None)


def test_storage_list_measures_the_directory(nctx) -> None:
    directory = nctx.local_path("/srv/ganeti/file-storage")
    os.makedirs(os.path.join(directory, "inst1"))
    with open(os.path.join(directory, "inst1", "disk0"), "wb") as fh:
        fh.write(b"x" * (3 * 1024 * 1024))
    (row,) = storageunits.storage_list(nctx, "file", ["/srv/ganeti/file-storage"], None,
                                       ["name", "used", "allocatable", "size", "free"])
    name, used, allocatable, size, free = row
    assert (name, used, allocatable) == ("/srv/ganeti/file-storage", 3, True)
    assert size >= free > 0
    assert storageunits.storage_list(nctx, "file", ["/srv/ganeti/file-storage"], "/other",
                                     ["name"]) == []


def test_storage_list_missing_directory_holds_nothing(nctx) -> None:
    os.makedirs(nctx.paths.root)
    assert storageunits.storage_list(nctx, "sharedfile", ["/srv/ganeti/shared"], None,
                                     ["used"]) == [[0]]


@pytest.mark.parametrize(("stype", "args", "fields", "match"), [
    ("rados", [], ["name"], "not supported"),
    ("lvm-vg", ["xenvg"], ["name"], "takes no arguments"),
    ("file", ["/srv"], ["node"], "Unknown storage field"),
    ("file", ["relative"], ["name"], "directory"),
], ids=["type", "lvm-args", "field", "args"])
def test_storage_list_refusals(nctx, stype, args, fields, match) -> None:
    with pytest.raises(errors.StorageError, match=match):
        storageunits.storage_list(nctx, stype, args, None, fields)
