"""The plain (LVM) template on the master side: --vg-name, the rule that plain needs
a VG, disk generation (<uuid>.disk<N> in the cluster's VG) and the VG space checks
before anything is created; against a real ConfigWriter and the fake nodes of
test_cmdlib_instance."""

from __future__ import annotations

from typing import Any

import pytest
from cmdlib.test_cmdlib_instance import FakeNodes, _create, env  # noqa: F401 - env: a fixture

from ganeti import constants, errors
from ganeti.cmdlib import lvm


class LvmNodes(FakeNodes):
    """FakeNodes with a volume group per node: ``vgs[node] = {vg: free MiB}``."""

    def __init__(self) -> None:
        super().__init__()
        self.vgs: dict[str, dict[str, int]] = {}
        self.created: list[dict[str, Any]] = []

    def do_node_info(self, node: str, storage_units: list, hv_specs: list) -> dict:
        units = []
        for stype, key, _params in storage_units:
            free = self.vgs.get(node, {}).get(key)
            if stype != constants.ST_LVM_VG:
                units.append({"type": stype, "name": key, "error": "not a VG"})
            elif free is None:
                units.append({"type": stype, "name": key,
                              "error": f"Volume group '{key}' does not exist on this node"})
            else:
                units.append({"type": stype, "name": key, "storage_size": 4096,
                              "storage_free": free, "vg_size": 4096, "vg_free": free})
        return {"name": node, "storage": units, "hv": []}

    def do_blockdev_find(self, node: str, disk: dict) -> dict | None:
        if disk["uuid"] not in self.disks[node]:
            return None
        return {"dev_path": "/dev/" + "/".join(disk["logical_id"]), "size": disk["size"]}

    def do_blockdev_create(self, node: str, disk: dict, size: int, *rest: Any) -> dict:
        self.created.append({"disk": disk, "size": size, "excl_stor": rest[-1]})
        return super().do_blockdev_create(node, disk, size, *rest)


@pytest.fixture
def lenv(env: Any) -> Any:  # noqa: F811 - the imported fixture
    nodes = LvmNodes()
    env.ctx.rpc = nodes
    env.rpc = nodes
    nodes.vgs = {n: {"xenvg": 1024} for n in ("node1", "node2", "node3")}
    env.run("OP_CLUSTER_SET_PARAMS", vg_name="xenvg",
            enabled_disk_templates=["plain", "diskless", "file", "sharedfile"])
    return env


def test_plain_needs_a_volume_group(env: Any) -> None:  # noqa: F811
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="plain need a volume group.*--vg-name"):
        env.run("OP_CLUSTER_SET_PARAMS", enabled_disk_templates=["plain", "file"])
    assert env.raw() == before


@pytest.mark.parametrize("vg", ["-bad", "a b", "a/b", ".."], ids=["dash", "space", "slash",
                                                                  "dotdot"])
def test_invalid_vg_name_is_refused(env: Any, vg: str) -> None:  # noqa: F811
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="Invalid volume group name"):
        env.run("OP_CLUSTER_SET_PARAMS", vg_name=vg)
    assert env.raw() == before


def test_vg_name_set_and_removed(lenv: Any) -> None:
    assert lenv.cfg.get_cluster_info().volume_group_name == "xenvg"
    with pytest.raises(errors.OpPrereqError, match="plain need a volume group"):
        lenv.run("OP_CLUSTER_SET_PARAMS", vg_name="")
    lenv.run("OP_CLUSTER_SET_PARAMS", vg_name="", enabled_disk_templates=["file"])
    assert lenv.cfg.get_cluster_info().volume_group_name is None


def test_a_new_vg_must_exist_on_the_nodes(lenv: Any) -> None:
    lenv.rpc.vgs["node1"]["newvg"] = 10
    before = lenv.raw()
    with pytest.raises(errors.OpPrereqError,
                       match="Node node2: Volume group 'newvg' does not exist"):
        lenv.run("OP_CLUSTER_SET_PARAMS", vg_name="newvg")
    assert lenv.raw() == before
    lenv.rpc.vgs["node2"]["newvg"] = lenv.rpc.vgs["node3"]["newvg"] = 10
    lenv.run("OP_CLUSTER_SET_PARAMS", vg_name="newvg")
    assert lenv.cfg.get_cluster_info().volume_group_name == "newvg"


def test_create_plain_makes_lvs_named_by_disk_uuid(lenv: Any) -> None:
    _create(lenv, template="plain", disks=[{"size": 128}, {"size": 256}], start=False)
    inst = lenv.cfg.get_instance_info_by_name("inst1")
    disks = lenv.cfg.get_instance_disks(inst.uuid)
    assert [d.dev_type for d in disks] == ["plain", "plain"]
    assert [d.logical_id for d in disks] == [["xenvg", f"{disks[0].uuid}.disk0"],
                                             ["xenvg", f"{disks[1].uuid}.disk1"]]
    assert [c["disk"]["logical_id"] for c in lenv.rpc.created] == [d.logical_id for d in disks]
    assert [c["excl_stor"] for c in lenv.rpc.created] == [False, False]


def test_create_plain_with_a_disk_in_another_vg_and_spindles(lenv: Any) -> None:
    lenv.rpc.vgs["node1"]["fastvg"] = 512
    lenv.run("OP_CLUSTER_SET_PARAMS", ndparams={"exclusive_storage": True})
    _create(lenv, template="plain", disks=[{"size": 128, "vg": "fastvg", "spindles": 2}],
            start=False)
    disk = lenv.cfg.get_instance_disks(lenv.cfg.get_instance_info_by_name("inst1").uuid)[0]
    assert disk.logical_id[0] == "fastvg" and disk.spindles == 2


@pytest.mark.parametrize("vgs,disks,match", [
    ({}, [{"size": 128}], "Volume group 'xenvg' does not exist"),
    ({"xenvg": 300}, [{"size": 128}, {"size": 256}],
     "Not enough disk space on target node node1 vg xenvg: required 384 MiB, available 300"),
], ids=["missing-vg", "too-little-space"])
def test_create_plain_refused_before_anything_is_made(lenv: Any, vgs: dict, disks: list,
                                                      match: str) -> None:
    lenv.rpc.vgs["node1"] = vgs
    before = lenv.raw()
    with pytest.raises(errors.OpPrereqError, match=match):
        _create(lenv, template="plain", disks=disks)
    assert lenv.raw() == before
    assert lenv.rpc.created == [] and not lenv.rpc.disks["node1"]


def test_grow_plain_checks_the_vg(lenv: Any) -> None:
    _create(lenv, template="plain", start=False)
    lenv.rpc.vgs["node1"]["xenvg"] = 100
    with pytest.raises(errors.OpPrereqError, match="required 200 MiB, available 100"):
        lenv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=200)
    lenv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    disk = lenv.cfg.get_instance_disks(lenv.cfg.get_instance_info_by_name("inst1").uuid)[0]
    assert disk.size == 128 + 64


@pytest.mark.parametrize("template", ["plain", "file"])
def test_spindles_are_refused_without_exclusive_storage(lenv: Any, template: str) -> None:
    # as Ganeti's (its QA's TestInstanceModifyDisks, TestRecreateDisks)
    before = lenv.raw()
    with pytest.raises(errors.OpPrereqError, match="exclusive storage"):
        _create(lenv, template=template, disks=[{"size": 128, "spindles": 1}])
    assert lenv.raw() == before and lenv.rpc.created == []
    _create(lenv, template=template, start=False)
    with pytest.raises(errors.OpPrereqError, match="exclusive storage"):
        lenv.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
                 disks=[["add", -1, {"size": 64, "spindles": 1}]])
    assert _query_sizes(lenv) == [128]
    node = lenv.cfg.get_node_info_by_name("node1")      # exclusive storage on one node
    node.ndparams = {"exclusive_storage": True}
    lenv.cfg.update(node)
    lenv.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
             disks=[["add", -1, {"size": 64, "spindles": 1}]])
    assert _query_sizes(lenv) == [128, 64]


def _query_sizes(lenv: Any) -> list[int]:
    return [d.size for d in _disks(lenv)]


def test_exclusive_storage_is_passed_to_the_node(lenv: Any) -> None:
    lenv.run("OP_CLUSTER_SET_PARAMS", ndparams={"exclusive_storage": True})
    _create(lenv, template="plain", start=False, disks=[{"size": 128, "spindles": 1}])
    assert [c["excl_stor"] for c in lenv.rpc.created] == [True]


def test_exclusive_storage_needs_spindles_for_new_lvm_disks(lenv: Any) -> None:
    # as Ganeti's (its QA's TestInstanceModifyDisks with spindles supported)
    lenv.run("OP_CLUSTER_SET_PARAMS", ndparams={"exclusive_storage": True})
    before = lenv.raw()
    with pytest.raises(errors.OpPrereqError, match="spindles must be given"):
        _create(lenv, template="plain", start=False)
    assert lenv.raw() == before and lenv.rpc.created == []
    _create(lenv, template="plain", start=False, disks=[{"size": 128, "spindles": 1}])
    with pytest.raises(errors.OpPrereqError, match="spindles must be given"):
        lenv.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
                 disks=[["add", -1, {"size": 64}]])
    lenv.rpc.disks["node1"].clear()          # recreated disks keep theirs: not required
    lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", disks=[[0, {"size": 96}]])
    assert [(d.size, d.spindles) for d in _disks(lenv)] == [(96, 1)]


def test_rename_keeps_the_volumes(lenv: Any) -> None:
    _create(lenv, template="plain", start=False)
    before = [d.logical_id for d in lenv.cfg.get_instance_disks(
        lenv.cfg.get_instance_info_by_name("inst1").uuid)]
    lenv.run("OP_INSTANCE_RENAME", instance_name="inst1", new_name="inst2",
             name_check=False, ip_check=False)
    after = [d.logical_id for d in lenv.cfg.get_instance_disks(
        lenv.cfg.get_instance_info_by_name("inst2").uuid)]
    assert after == before
    assert ("blockdev_rename", "node1") not in lenv.rpc.calls
    disks = lenv.cfg.get_instance_disks(lenv.cfg.get_instance_info_by_name("inst2").uuid)
    assert {d.uuid: lenv.rpc.disk_info.get(d.uuid) for d in disks} == {
        d.uuid: "originstname+inst2" for d in disks}      # the volumes' tags follow the name


def test_vg_free_of_reads_the_node_info_payload() -> None:
    payload = {"storage": [{"type": "file", "name": "/x", "storage_free": 5},
                           {"type": "lvm-vg", "name": "xenvg", "vg_free": 77}]}
    assert lvm.vg_free_of(payload, "xenvg") == 77
    assert "not reported" in str(lvm.vg_free_of(payload, "other"))
    assert lvm.required_vg_sizes([("a", 1), ("b", 2), ("a", 3)]) == {"a": 4, "b": 2}
    assert lvm.lv_logical_id("xenvg", "u", 3) == ["xenvg", "u.disk3"]


def test_node_list_dfree_comes_from_the_vg(lenv: Any) -> None:
    from ganeti.cmdlib import query as cquery
    lenv.rpc.vgs["node2"]["xenvg"] = 700
    res = cquery.run_query(lenv.ctx, "node", ["name", "dtotal", "dfree"], None)
    rows = {r[0][1]: [c[1] for c in r[1:]] for r in res["data"]}
    assert rows["node1"] == [4096, 1024] and rows["node2"] == [4096, 700]


@pytest.mark.parametrize("enabled,vg,first", [
    (["plain", "file"], "xenvg", "lvm-vg"),
    (["file", "plain"], "xenvg", "file"),
    (["plain", "file"], None, "file"),
    (["diskless"], "xenvg", None),
], ids=["plain-first", "file-first", "no-vg", "no-lvm"])
def test_storage_units_order(enabled: list, vg: str | None, first: str | None) -> None:
    from ganeti.cmdlib.node import _storage_units
    from ganeti.objects import Cluster
    units = _storage_units(Cluster(enabled_disk_templates=enabled, volume_group_name=vg,
                                   file_storage_dir="/srv/f"))
    assert (units[0][0] if units else None) == first


def _disks(e: Any, name: str = "inst1") -> list:
    return e.cfg.get_instance_disks(e.cfg.get_instance_info_by_name(name).uuid)


def test_recreate_disks_makes_the_missing_volumes_again(lenv: Any) -> None:
    _create(lenv, template="plain", disks=[{"size": 128}, {"size": 64}], start=False)
    disks = _disks(lenv)
    lenv.rpc.disks["node1"].discard(disks[1].uuid)          # the LV of disk 1 is lost
    lenv.rpc.created.clear()
    lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", disks=[1])
    assert [c["disk"]["logical_id"] for c in lenv.rpc.created] == [disks[1].logical_id]
    assert disks[1].uuid in lenv.rpc.disks["node1"]


@pytest.mark.parametrize("disks", [[], [1], [0, [1, {}]]], ids=["all", "one", "pairs"])
def test_recreate_disks_of_an_existing_disk_is_refused(lenv: Any, disks: list) -> None:
    # as Ganeti's (its QA's TestRecreateDisks: "Disks exist: this should fail")
    _create(lenv, template="plain", disks=[{"size": 128}, {"size": 64}], start=False)
    lenv.rpc.disks["node1"].discard(_disks(lenv)[0].uuid)    # disk 0 is lost, 1 is not
    lenv.rpc.created.clear()
    before = lenv.raw()
    with pytest.raises(errors.OpPrereqError, match="Disk 1 of instance inst1 exists on node node1"):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", disks=disks)
    assert lenv.rpc.created == [] and lenv.raw() == before
    lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", disks=[0])
    assert [c["disk"]["uuid"] for c in lenv.rpc.created] == [_disks(lenv)[0].uuid]


@pytest.mark.parametrize("params,match", [
    ({"disks": [2]}, "Invalid disk index 2"),
    ({"disks": [0, 0]}, "given twice"),
    ({"disks": [[0, {"vg": "other"}]]}, "only mode, size, spindles can be changed"),
    ({"disks": [[0, {"size": 0}]]}, "invalid size"),
    ({"disks": [[0, {"spindles": 2}]]}, "exclusive storage"),
    ({"nodes": ["node2", "node3"]}, "recreated on one node"),
    ({"nodes": ["node2"], "disks": [0]}, "leave out --disk"),
], ids=["index", "twice", "params", "size", "spindles", "nodes", "nodes-and-disks"])
def test_recreate_disks_refusals(lenv: Any, params: dict, match: str) -> None:
    _create(lenv, template="plain", start=False)
    lenv.rpc.disks["node1"].clear()
    lenv.rpc.created.clear()
    before = lenv.raw()
    with pytest.raises(errors.OpPrereqError, match=match):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", **params)
    assert lenv.rpc.created == [] and lenv.raw() == before


def test_recreate_disks_with_a_new_size_and_mode(lenv: Any) -> None:
    # as Ganeti's (its QA's TestRecreateDisks: "Recreate resized disks")
    _create(lenv, template="plain", disks=[{"size": 128}, {"size": 64}], start=False)
    lenv.rpc.disks["node1"].clear()
    lenv.rpc.created.clear()
    lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1",
             disks=[[0, {"size": 256}], [1, {"mode": "ro"}]])
    assert [c["size"] for c in lenv.rpc.created] == [256, 64]
    assert [(d.size, d.mode) for d in _disks(lenv)] == [(256, "rw"), (64, "ro")]


def test_recreate_disks_failing_keeps_the_old_parameters(lenv: Any) -> None:
    _create(lenv, template="plain", disks=[{"size": 128}], start=False)
    lenv.rpc.disks["node1"].clear()
    lenv.rpc.vgs["node1"]["xenvg"] = 200
    before = lenv.raw()
    with pytest.raises(errors.OpPrereqError, match="required 256 MiB, available 200"):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", disks=[[0, {"size": 256}]])
    assert lenv.raw() == before
    lenv.rpc.vgs["node1"]["xenvg"] = 4096
    lenv.rpc.fail["blockdev_create"] = "lvcreate failed"
    with pytest.raises(errors.OpExecError, match="Cannot recreate disk 0"):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", disks=[[0, {"size": 256}]])
    assert [d.size for d in _disks(lenv)] == [128]


def test_recreate_disks_on_another_node_makes_it_the_primary(lenv: Any) -> None:
    # as Ganeti's (its QA's TestRecreateDisks: -n OTHER, then back with -n ORIG)
    _create(lenv, template="plain", disks=[{"size": 128}, {"size": 64}], start=False)
    node1 = lenv.cfg.get_node_info_by_name("node1")
    node1.offline = True                       # the primary is lost
    lenv.cfg.update(node1)
    lenv.rpc.created.clear()
    lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", nodes=["node2"])
    disks = _disks(lenv)
    assert {d.uuid for d in disks} <= lenv.rpc.disks["node2"]
    assert [d.nodes for d in disks] == [["uuid-node2"], ["uuid-node2"]]
    assert lenv.cfg.get_instance_info_by_name("inst1").primary_node == "uuid-node2"
    with pytest.raises(errors.OpPrereqError, match="exists on node node2"):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1")


@pytest.mark.parametrize("name", ["hail", "."])
def test_recreate_disks_where_an_allocator_says(lenv: Any, name: str) -> None:
    # as Ganeti's (its QA's TestRecreateDisks: -I hail, then -I .)
    real = lenv.rpc.do_node_info

    def node_info(node: str, storage_units: list, hv_specs: list) -> dict:
        return {**real(node, storage_units, hv_specs), "memory_total": 8192,
                "memory_free": 8192, "memory_dom0": 512, "cpu_total": 4}
    lenv.rpc.do_node_info = node_info
    _create(lenv, template="plain", start=False)
    node1 = lenv.cfg.get_node_info_by_name("node1")
    node1.offline = True                # lost: the allocator takes another node
    lenv.cfg.update(node1)
    lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", iallocator=name)
    inst = lenv.cfg.get_instance_info_by_name("inst1")
    assert inst.primary_node in ("uuid-node2", "uuid-node3")
    assert _disks(lenv)[0].nodes == [inst.primary_node]
    assert _disks(lenv)[0].uuid in lenv.rpc.disks[inst.primary_node[len("uuid-"):]]
    with pytest.raises(errors.OpPrereqError, match="not both"):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", iallocator=name,
                 nodes=["node1"])


def test_recreate_disks_refuses_a_running_instance_and_a_full_vg(lenv: Any) -> None:
    _create(lenv, template="plain")
    with pytest.raises(errors.OpPrereqError, match="marked to be up"):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1")
    lenv.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    lenv.rpc.disks["node1"].clear()
    lenv.rpc.vgs["node1"]["xenvg"] = 100
    lenv.rpc.created.clear()
    with pytest.raises(errors.OpPrereqError, match="required 128 MiB, available 100"):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1")
    assert lenv.rpc.created == []


def test_recreate_disks_failing_removes_what_it_made(lenv: Any) -> None:
    _create(lenv, template="plain", disks=[{"size": 8}, {"size": 8}], start=False)
    lenv.rpc.disks["node1"].clear()
    disks = _disks(lenv)
    real = lenv.rpc.do_blockdev_create

    def second_fails(node: str, disk: dict, size: int, *rest: Any) -> dict:
        if disk["uuid"] == disks[1].uuid:
            raise errors.StorageError("lvcreate failed")
        return real(node, disk, size, *rest)
    lenv.rpc.do_blockdev_create = second_fails
    with pytest.raises(errors.OpExecError, match="Cannot recreate disk 1"):
        lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1")
    assert lenv.rpc.disks["node1"] == set()
