"""``gnt-instance modify`` of mirrors: plain <-> drbd conversions of a stopped
instance (ganeti.cmdlib.instance_convert) and disks added to and removed from a
drbd instance, step by step on fake nodes and a real ConfigWriter."""

from __future__ import annotations

from typing import Any

import pytest
from cmdlib.test_cmdlib_drbd import ReplaceNodes, denv  # noqa: F401 - denv: a fixture
from cmdlib.test_cmdlib_instance import _create, env  # noqa: F401 - env: a fixture

from ganeti import constants, errors, serializer


class ConvertNodes(ReplaceNodes):
    """ReplaceNodes that record the adoption of a primary's data and can fail a rename
    (``fail_at``) or the creations on some nodes (``fail_create_on``; ``ports``
    records the DRBD port of every creation asked for)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_create_on: set[str] = set()
        self.ports: list[int] = []

    def do_blockdev_create(self, node: str, disk: dict, *args: Any) -> dict:
        if disk["dev_type"] == "drbd":
            self.ports.append(disk["logical_id"][2])
        if node in self.fail_create_on:
            raise errors.StorageError("lvcreate failed")
        return super().do_blockdev_create(node, disk, *args)

    def do_drbd_adopt_local(self, node: str, disks: list) -> None:
        self.disks[node].update(d["uuid"] for d in disks)
        self.events.append(("adopt", node, tuple(d["logical_id"][1] for d in
                                                 (x["children"][0] for x in disks))))

    def do_blockdev_remove(self, node: str, disk: dict) -> None:
        if disk["dev_type"] in ("file", "sharedfile"):
            self.events.append(("remove", node, disk["logical_id"][1]))
            return
        super().do_blockdev_remove(node, disk)

    def do_blockdev_convert(self, node: str, src: dict, dst: dict) -> int:
        self.events.append(("convert", node, (src["logical_id"][1], dst["logical_id"][1])))
        if "convert" in self.fail_at:
            raise errors.StorageError("No space left on device")
        return int(src["size"]) << 20

    def do_blockdev_rename(self, node: str, devlist: list) -> list:
        if "rename" in self.fail_at:
            raise errors.StorageError("lvrename failed")
        return super().do_blockdev_rename(node, devlist)


@pytest.fixture
def cenv(denv: Any) -> Any:  # noqa: F811 - the imported fixture
    nodes = ConvertNodes()
    nodes.vgs = denv.rpc.vgs
    denv.ctx.rpc = nodes
    denv.rpc = nodes
    return denv


def _instance(cenv: Any, name: str = "inst1") -> tuple[Any, list[Any]]:
    inst = cenv.cfg.get_instance_info_by_name(name)
    return inst, cenv.cfg.get_instance_disks(inst.uuid)


def _modify(cenv: Any, **kw: Any) -> Any:
    return cenv.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", **kw)


def _uuid(cenv: Any, node: str) -> str:
    return cenv.cfg.get_node_info_by_name(node).uuid


def test_plain_to_drbd_keeps_the_data_volume_and_mirrors_it(cenv: Any) -> None:
    _create(cenv, template="plain", start=False, disks=[{"size": 128}, {"size": 64}])
    _, before = _instance(cenv)
    uuids = [d.uuid for d in before]
    cenv.rpc.events.clear()
    changes = _modify(cenv, disk_template="drbd", remote_node="node2")
    assert changes == [["disk_template", "drbd"]]
    inst, disks = _instance(cenv)
    assert inst.disk_template == "drbd"
    assert [d.uuid for d in disks] == uuids                  # the disks stay the same disks
    p, s = _uuid(cenv, "node1"), _uuid(cenv, "node2")
    for idx, disk in enumerate(disks):
        assert disk.dev_type == "drbd" and disk.logical_id[:2] == [p, s]
        assert disk.nodes == [p, s] and disk.iv_name == f"disk/{idx}"
        assert [c.logical_id[1] for c in disk.children] == [f"{disk.uuid}.disk{idx}_data",
                                                            f"{disk.uuid}.disk{idx}_meta"]
    ev = cenv.rpc.events
    # the secondary first (whole mirrors), then the primary's metadata, the renames,
    # the adoption of the data, and the mirrors taken down again (the instance is stopped)
    assert ev[:2] == [("create", "node2", False)] * 2
    assert ev[2:4] == [("create-lv", "node1", f"{uuids[0]}.disk0_meta"),
                       ("create-lv", "node1", f"{uuids[1]}.disk1_meta")]
    assert ev[4:6] == [("rename", "node1", (f"{uuids[0]}.disk0", f"{uuids[0]}.disk0_data")),
                       ("rename", "node1", (f"{uuids[1]}.disk1", f"{uuids[1]}.disk1_data"))]
    assert ev[6] == ("adopt", "node1", (f"{uuids[0]}.disk0_data", f"{uuids[1]}.disk1_data"))
    assert ("shutdown", "node1", None) in ev[7:] and ("shutdown", "node2", None) in ev[7:]
    assert any("in sync" in line or "disk/0" in line for line in cenv.feedback)
    assert cenv.cfg.get_instance_secondary_nodes(inst.uuid) == [s]


def test_plain_to_drbd_with_the_secondary_chosen_by_the_allocator(cenv: Any) -> None:
    _create(cenv, template="plain", start=False)
    changes = _modify(cenv, disk_template="drbd", iallocator="ganeti-iallocator")
    assert changes == [["disk_template", "drbd"]]
    inst, disks = _instance(cenv)
    chosen = cenv.cfg.get_instance_secondary_nodes(inst.uuid)
    assert inst.disk_template == "drbd" and len(chosen) == 1
    name = cenv.cfg.get_node_info(chosen[0]).name
    assert name in ("node2", "node3") and disks[0].nodes == [_uuid(cenv, "node1"), chosen[0]]
    assert any(f"Selected secondary node {name} via the iallocator" in line
               for line in cenv.feedback)


def test_drbd_to_plain_keeps_the_primary_data_volume(cenv: Any) -> None:
    _create(cenv, template="drbd", pnode="node1", snode="node2", start=False)
    _, before = _instance(cenv)
    disk = before[0]
    port = disk.logical_id[2]
    cenv.rpc.events.clear()
    assert _modify(cenv, disk_template="plain") == [["disk_template", "plain"]]
    inst, disks = _instance(cenv)
    assert inst.disk_template == "plain" and disks[0].uuid == disk.uuid
    assert disks[0].dev_type == "plain" and disks[0].children == []
    assert disks[0].logical_id == ["xenvg", f"{disk.uuid}.disk0"]
    assert disks[0].nodes == [_uuid(cenv, "node1")]
    assert cenv.cfg.get_instance_secondary_nodes(inst.uuid) == []
    ev = cenv.rpc.events
    assert ev[:2] == [("shutdown", "node1", None), ("shutdown", "node2", None)]
    assert ev[2] == ("rename", "node1", (f"{disk.uuid}.disk0_data", f"{disk.uuid}.disk0"))
    assert sorted(ev[3:]) == sorted([("remove-lv", "node1", f"{disk.uuid}.disk0_meta"),
                                     ("remove-lv", "node2", f"{disk.uuid}.disk0_data"),
                                     ("remove-lv", "node2", f"{disk.uuid}.disk0_meta")])
    # the port is free again: a new mirror may take it
    _create(cenv, "inst2", template="drbd", pnode="node1", snode="node3", start=False)
    _, again = _instance(cenv, "inst2")
    assert again[0].logical_id[2] == port


def test_a_failed_rename_undoes_the_conversion(cenv: Any) -> None:
    _create(cenv, template="plain", start=False)
    _, before = _instance(cenv)
    cenv.rpc.events.clear()
    cenv.rpc.fail_at.add("rename")
    with pytest.raises(errors.OpExecError, match="Cannot rename"):
        _modify(cenv, disk_template="drbd", remote_node="node2")
    inst, disks = _instance(cenv)
    assert inst.disk_template == "plain" and disks[0].logical_id == before[0].logical_id
    removed = [e for e in cenv.rpc.events if e[0] in ("remove", "remove-lv")]
    assert ("remove-lv", "node1", f"{before[0].uuid}.disk0_meta") in removed
    assert ("remove", "node2", None) in removed                # the secondary's mirror


@pytest.mark.parametrize("params, match", [
    ({"disk_template": "drbd"}, "needs the secondary node"),
    ({"disk_template": "drbd", "remote_node": "node1"}, "is the instance's primary"),
    ({"disk_template": "plain"}, "already has disk template plain"),
    ({"disk_template": "file"}, "Cannot convert instance inst1 from plain to file"),
    ({"disk_template": "plain", "remote_node": "node2"}, "goes only with -t drbd"),
    ({"remote_node": "node2", "beparams": {"vcpus": 2}}, "goes only with a conversion"),
    ({"disk_template": "drbd", "remote_node": "node2", "disks": [["add", -1, {"size": 8}]]},
     "cannot be combined"),
    ({"disk_template": "drbd", "iallocator": "hail", "remote_node": "node2"}, "not both"),
    ({"disk_template": "plain", "iallocator": "hail"}, "goes only with -t drbd"),
    ({"disk_template": "drbd", "iallocator": "no-such-allocator"}, "no-such-allocator"),
])
def test_bad_conversions_are_refused_and_change_nothing(cenv: Any, params: dict[str, Any],
                                                        match: str) -> None:
    _create(cenv, template="plain", start=False)
    cenv.rpc.events.clear()
    with pytest.raises(errors.OpPrereqError, match=match):
        _modify(cenv, **params)
    inst, disks = _instance(cenv)
    assert inst.disk_template == "plain" and disks[0].dev_type == "plain"
    assert not [e for e in cenv.rpc.events if e[0] not in ("assemble",)]


def test_a_running_instance_is_not_converted(cenv: Any) -> None:
    _create(cenv, template="plain")
    with pytest.raises(errors.OpPrereqError, match="stop it before converting"):
        _modify(cenv, disk_template="drbd", remote_node="node2")
    cenv.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    cenv.run("OP_INSTANCE_ACTIVATE_DISKS", instance_name="inst1")
    with pytest.raises(errors.OpPrereqError, match="deactivate them first"):
        _modify(cenv, disk_template="drbd", remote_node="node2")
    cenv.run("OP_INSTANCE_DEACTIVATE_DISKS", instance_name="inst1")
    _modify(cenv, disk_template="drbd", remote_node="node2")
    assert _instance(cenv)[0].disk_template == constants.DT_DRBD8


def test_no_room_for_the_mirror_on_the_secondary(cenv: Any) -> None:
    _create(cenv, template="plain", start=False, disks=[{"size": 1024}])
    cenv.rpc.vgs["node2"]["xenvg"] = 1100          # < 1024 + 128 of metadata
    cenv.rpc.events.clear()
    with pytest.raises(errors.OpPrereqError, match="node2"):
        _modify(cenv, disk_template="drbd", remote_node="node2")
    assert not [e for e in cenv.rpc.events if e[0].startswith(("create", "rename"))]


def test_a_disk_added_to_a_mirror_is_made_on_both_nodes(cenv: Any) -> None:
    _create(cenv, template="drbd", pnode="node1", snode="node2", start=False)
    first = _instance(cenv)[1][0]
    cenv.rpc.events.clear()
    changes = _modify(cenv, disks=[["add", -1, {"size": 64}]])
    assert changes == [["disk/1", "add:size=64,mode=rw"]]
    _, disks = _instance(cenv)
    new = disks[1]
    assert new.dev_type == "drbd" and new.size == 64 and new.iv_name == "disk/1"
    assert new.logical_id[:2] == first.logical_id[:2]
    assert new.logical_id[2] != first.logical_id[2]                 # its own port
    assert new.logical_id[3] != first.logical_id[3]                 # and minors
    assert [c.logical_id[1] for c in new.children] == [f"{new.uuid}.disk1_data",
                                                       f"{new.uuid}.disk1_meta"]
    ev = cenv.rpc.events
    assert ev[:2] == [("create", "node2", False), ("create", "node1", True)]
    # the instance is stopped: the new mirror is synced, then taken down on both
    assert ("shutdown", "node1", None) in ev[2:] and ("shutdown", "node2", None) in ev[2:]
    cenv.rpc.events.clear()
    assert _modify(cenv, disks=[["remove", 1, {}]]) == [["disk/1", "remove"]]
    assert len(_instance(cenv)[1]) == 1
    assert sorted(e[1] for e in cenv.rpc.events if e[0] == "remove") == ["node1", "node2"]


def test_a_disk_that_cannot_be_made_on_the_primary_is_removed_from_both(cenv: Any) -> None:
    _create(cenv, template="drbd", pnode="node1", snode="node2", start=False)
    before = [serializer.to_data(d) for d in _instance(cenv)[1]]
    cenv.rpc.fail_create_on = {"node1"}
    cenv.rpc.ports.clear()
    cenv.rpc.events.clear()
    with pytest.raises(errors.OpExecError, match="Cannot create disk disk/1 on node1"):
        _modify(cenv, disks=[["add", -1, {"size": 64}]])
    assert [serializer.to_data(d) for d in _instance(cenv)[1]] == before
    assert sorted(e[1] for e in cenv.rpc.events if e[0] == "remove") == ["node1", "node2"]
    # the reservation went too: the next disk takes the same port
    cenv.rpc.fail_create_on = set()
    _modify(cenv, disks=[["add", -1, {"size": 64}]])
    assert _instance(cenv)[1][1].logical_id[2] == cenv.rpc.ports[0]


@pytest.mark.parametrize("source, target", [("file", "sharedfile"), ("sharedfile", "file")])
def test_file_based_conversion_copies_each_disk_on_the_primary(cenv: Any, source: str,
                                                                target: str) -> None:
    _create(cenv, template=source, start=False, disks=[{"size": 128}, {"size": 64}])
    _, before = _instance(cenv)
    old_paths = [d.logical_id[1] for d in before]
    cenv.rpc.events.clear()
    assert _modify(cenv, disk_template=target) == [["disk_template", target]]
    inst, disks = _instance(cenv)
    assert inst.disk_template == target
    assert [d.uuid for d in disks] == [d.uuid for d in before]
    base = {"file": "/srv/ganeti/file-storage",
            "sharedfile": "/srv/ganeti/shared-file-storage"}[target]
    for idx, disk in enumerate(disks):
        assert disk.dev_type == target and disk.size == (128, 64)[idx]
        assert disk.logical_id == ["loop", f"{base}/inst1/{disk.uuid}.file.disk{idx}"]
    ev = cenv.rpc.events
    assert [e[:2] for e in ev] == [("create", "node1")] * 2 + [("convert", "node1")] * 2 + \
        [("remove", "node1")] * 2
    assert [e[2] for e in ev if e[0] == "convert"] == [
        (o, d.logical_id[1]) for o, d in zip(old_paths, disks)]
    assert [e[2] for e in ev if e[0] == "remove"] == old_paths


def test_a_failed_copy_leaves_the_file_disks_as_they_were(cenv: Any) -> None:
    _create(cenv, template="file", start=False)
    _, before = _instance(cenv)
    cenv.rpc.events.clear()
    cenv.rpc.fail_at.add("convert")
    with pytest.raises(errors.OpExecError, match="Cannot copy disk 0"):
        _modify(cenv, disk_template="sharedfile")
    inst, disks = _instance(cenv)
    assert inst.disk_template == "file" and disks[0].logical_id == before[0].logical_id
    new_path = f"/srv/ganeti/shared-file-storage/inst1/{before[0].uuid}.file.disk0"
    assert cenv.rpc.events[1:] == [
        ("convert", "node1", (before[0].logical_id[1], new_path)),
        ("remove", "node1", new_path)]         # the new file only, the old one stays
