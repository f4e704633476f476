"""The LVM storage units on the master side (list-storage -t lvm-vg|lvm-pv,
modify-storage --allocatable, repair-storage, gnt-node volumes) with FakeRpc."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, objects  # noqa: E402
from ganeti.cmdlib.node_storage import default_storage_type, volume_rows  # noqa: E402
from ganeti.opcodes import node_storage as ops  # noqa: E402


def _setup(tmp_path, templates=("plain", "file", "diskless")):
    cfg = make_config(tmp_path, nodes=3, offline=(3,))
    cluster = cfg.get_cluster_info()
    cluster.enabled_disk_templates = list(templates)
    cluster.volume_group_name = "xenvg"
    cfg.update(cluster)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


def test_list_vgs_by_default_when_plain_is_enabled_first(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)

    def vgs(node, args):
        su_name, su_args, name, fields = args
        assert (su_name, su_args) == ("lvm-vg", [])
        values = {"name": "xenvg", "size": 2040, "used": 1000, "free": 1040, "allocatable": True}
        return [[values[f] for f in fields]]
    rpc.set_handler("storage_list", vgs)
    rows, _, _ = run_opcode(ctx, ops.OpNodeQueryStorage(output_fields=["node", "type", "name",
                                                                       "free"]))
    assert rows == [[node_name(i), "lvm-vg", "xenvg", 1040] for i in (1, 2)]


def test_default_storage_type_follows_the_template_order() -> None:
    assert default_storage_type(objects.Cluster(enabled_disk_templates=["plain", "file"])) \
        == "lvm-vg"
    assert default_storage_type(objects.Cluster(enabled_disk_templates=["file", "plain"])) \
        == "file"


def test_modify_pv_allocatable_calls_the_node(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    run_opcode(ctx, ops.OpNodeModifyStorage(node_name=node_name(2), storage_type="lvm-pv",
                                            name="/dev/vdb", changes={"allocatable": False}))
    assert rpc.calls_to("storage_modify") == [
        ([node_name(2)], ["lvm-pv", [], "/dev/vdb", {"allocatable": False}])]


def test_repair_vg_calls_the_node(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path)
    run_opcode(ctx, ops.OpRepairNodeStorage(node_name=node_name(1), storage_type="lvm-vg",
                                            name="xenvg"))
    assert rpc.calls_to("storage_execute") == [
        ([node_name(1)], ["lvm-vg", [], "xenvg", constants.SO_FIX_CONSISTENCY])]


def test_volumes_lists_lvs_with_their_instance(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, templates=("plain",))
    node1 = cfg.get_node_info_by_name(node_name(1))
    disk = objects.Disk(uuid="d-1", dev_type="plain", size=128,
                        logical_id=["xenvg", "d-1.disk0"], nodes=[node1.uuid])
    inst = objects.Instance(name="inst1.example.com", uuid="i-1", primary_node=node1.uuid,
                            disk_template="plain")
    cfg.add_instance(inst, [disk])
    rpc.set_handler("volume_list", lambda node, args: [["xenvg", "d-1.disk0", 128 << 20],
                                                       ["xenvg", "orphan", 1 << 20]])
    rows, _, _ = run_opcode(ctx, ops.OpNodeQueryvols(
        output_fields=["node", "phys", "vg", "name", "size", "instance"], nodes=[node_name(1)]))
    assert rows == [[node_name(1), "/dev/xenvg/d-1.disk0", "xenvg", "d-1.disk0", "128",
                     "inst1.example.com"],
                    [node_name(1), "/dev/xenvg/orphan", "xenvg", "orphan", "1", "-"]]
    assert rpc.calls_to("volume_list")[0][1] == [[["lvm-vg", "xenvg"]]]


def test_volume_rows_of_files_unchanged() -> None:
    assert volume_rows("n1", [["/srv/f", "i/d0", 2 << 20]], {"/srv/f/i/d0": "i"},
                       ["phys", "vg", "name", "size", "instance"]) == \
        [["/srv/f/i/d0", "/srv/f", "i/d0", "2", "i"]]
