"""The blockdev procedures and node_info for plain (LVM) disks, with the node's
storage commands going to a recording runner (no LVM needed)."""

from __future__ import annotations

import dataclasses

import pytest

from fakes.cmdrunner import RecordingRunner

from ganeti import errors, objects, serializer
from ganeti.backend import blockdev, node

UUID = "5b0e7c55-9d2a-4a43-8f1e-0c6d2b8f4e21"
LV = f"{UUID}.disk0"
LV_LINE = f"  {LV}|xenvg|128.00|-wi-a-----|/dev/vdb(0)\n"


@pytest.fixture
def runner(ctx) -> RecordingRunner:
    rec = RecordingRunner().on("vgs", stdout="  xenvg|1020.00|500.00|1\n").on("lvs", rc=5)
    ctx.storage_runner = rec
    return rec


def plain_disk(size: int = 128, **kw) -> dict:
    kw.setdefault("logical_id", ["xenvg", LV])
    return serializer.to_data(objects.Disk(uuid=UUID, dev_type="plain", size=size, **kw))


def test_create_plain(ctx, runner) -> None:
    res = blockdev.blockdev_create(ctx, plain_disk(), 128, "inst1", True, "", False)
    assert res == {"path": f"/dev/xenvg/{LV}", "logical_id": ["xenvg", LV], "size": 128}
    assert runner.commands("lvcreate") == [
        ["lvcreate", "-L128m", "-n", LV, "--wipesignatures", "y", "-y", "xenvg"]]


def test_create_plain_refused_when_the_vg_is_full(ctx, runner) -> None:
    runner.on("lvcreate", rc=5, stderr="  Volume group \"xenvg\" has insufficient free space\n")
    with pytest.raises(errors.StorageError, match="Not enough free space in volume group xenvg"):
        blockdev.blockdev_create(ctx, plain_disk(), 600, "inst1", True, "", False)
    assert runner.programs().count("lvcreate") == 1       # the one that failed, making nothing
    assert set(runner.programs()) <= {"lvcreate", "vgs", "lvs"}


def test_exclusive_storage_only_for_plain(ctx, runner) -> None:
    runner.on("pvs", stdout="  /dev/vdb|xenvg|1020.00|1020.00|a--\n")
    blockdev.blockdev_create(ctx, plain_disk(), 128, "inst1", True, "", True)
    assert runner.commands("lvcreate")[0][-1] == "/dev/vdb"
    file_disk = serializer.to_data(objects.Disk(uuid="f", dev_type="file", size=1,
                                                logical_id=["loop", "/x/y"]))
    with pytest.raises(errors.StorageError, match="Exclusive storage"):
        blockdev.blockdev_create(ctx, file_disk, 1, "inst1", True, "", True)


def test_remove_assemble_find_grow(ctx, runner) -> None:
    runner.on("lvs", stdout=LV_LINE)
    blockdev.blockdev_remove(ctx, plain_disk())
    assert runner.commands("lvremove") == [["lvremove", "-f", f"xenvg/{LV}"]]
    found = blockdev.blockdev_find(ctx, plain_disk())
    assert found is not None and found["dev_path"] == f"/dev/xenvg/{LV}" and found["size"] == 128
    assert blockdev.blockdev_getdimensions(ctx, [plain_disk()]) == [[128 * 1024 * 1024, 1]]
    assert blockdev.blockdev_grow(ctx, plain_disk(), 64, True, False, False) == 192
    assert "lvextend" not in runner.programs()
    blockdev.blockdev_grow(ctx, plain_disk(), 64, False, False, False)
    assert runner.commands("lvextend") == [["lvextend", "-L+64m", f"xenvg/{LV}"]]


def test_missing_volume(ctx, runner) -> None:
    assert blockdev.blockdev_find(ctx, plain_disk()) is None
    assert blockdev.blockdev_getdimensions(ctx, [plain_disk()]) == [None]
    assert blockdev.blockdev_getstatus(ctx, [[plain_disk(), "inst1", 0]]) == [None]
    runner.on("lvremove", rc=5, stderr="  Failed to find logical volume\n")
    runner.on("lvs", "--noheadings", stdout="")          # the group lists no such volume
    blockdev.blockdev_remove(ctx, plain_disk())          # idempotent


def test_a_disk_tree_is_created_children_first_and_rolled_back(ctx, runner) -> None:
    """A plain disk over a plain child (no such template: it shows the walk)."""
    child = objects.Disk(uuid="c", dev_type="plain", size=64, logical_id=["xenvg", "c.disk0"])
    data = plain_disk(children=[child])
    runner.on("lvcreate", "-L128m", rc=5, stderr="no extents")
    after_child: list[str] = []
    real = runner.__call__

    def tracking(argv):
        if argv[0] == "lvs" and argv[-1] == "xenvg/c.disk0" and runner.commands("lvcreate"):
            after_child.append("lvs")
            runner.calls.append(list(argv))
            return RecordingRunner().on("lvs", stdout="  c.disk0|xenvg|64.00|-wi-a-----|x(0)\n")(
                argv)
        return real(argv)
    ctx.storage_runner = tracking
    with pytest.raises(errors.StorageError, match="no extents"):
        blockdev.blockdev_create(ctx, data, 128, "inst1", True, "", False)
    assert [c[3] for c in runner.commands("lvcreate")] == ["c.disk0", LV]
    assert runner.commands("lvremove") == [["lvremove", "-f", "xenvg/c.disk0"]]


def test_parse_disk_keeps_the_tree(ctx) -> None:
    child = objects.Disk(uuid="c", dev_type="plain", size=64, logical_id=["xenvg", "c"])
    template, spec = blockdev.parse_disk(plain_disk(children=[child], spindles=2))
    assert template == "plain" and spec.spindles == 2
    assert [dataclasses.astuple(c)[:3] for c in spec.children] == [("c", 64, ("xenvg", "c"))]


def test_node_info_reports_the_vg(ctx, runner) -> None:
    info = node.node_info(ctx, [["lvm-vg", "xenvg", {}]], [])
    assert info["storage"] == [{"type": "lvm-vg", "name": "xenvg", "storage_size": 1020,
                                "storage_free": 500, "vg_size": 1020, "vg_free": 500}]
    runner.on("vgs", rc=5, stderr='Volume group "xenvg" not found')
    info = node.node_info(ctx, [["lvm-vg", "xenvg", {}]], [])
    assert "error" in info["storage"][0] and "storage_free" not in info["storage"][0]


PVS = "  /dev/vdb|xenvg|1020.00|520.00|a--\n  /dev/vdc|xenvg|1020.00|1020.00|u--\n"


def test_storage_list_vgs_and_pvs(ctx, runner) -> None:
    from ganeti.backend import storageunits
    runner.on("pvs", stdout=PVS)
    assert storageunits.storage_list(ctx, "lvm-vg", [], None,
                                     ["name", "size", "used", "free", "allocatable"]) == \
        [["xenvg", 1020, 520, 500, True]]
    assert storageunits.storage_list(ctx, "lvm-pv", [], None, ["name", "used", "allocatable"]) \
        == [["/dev/vdb", 500, True], ["/dev/vdc", 0, False]]
    assert storageunits.storage_list(ctx, "lvm-pv", [], "/dev/vdc", ["free"]) == [[1020]]


def test_storage_modify_and_execute(ctx, runner) -> None:
    from ganeti.backend import storageunits
    storageunits.storage_modify(ctx, "lvm-pv", [], "/dev/vdb", {"allocatable": False})
    storageunits.storage_execute(ctx, "lvm-vg", [], "xenvg", "fix-consistency")
    assert runner.commands("pvchange") == [["pvchange", "-x", "n", "/dev/vdb"]]
    assert runner.commands("vgreduce") == [["vgreduce", "--removemissing", "xenvg"]]
    for call in (lambda: storageunits.storage_modify(ctx, "lvm-vg", [], "xenvg",
                                                     {"allocatable": False}),
                 lambda: storageunits.storage_modify(ctx, "lvm-pv", [], "/dev/vdb", {"size": 1}),
                 lambda: storageunits.storage_modify(ctx, "lvm-pv", [], "/dev/vdb",
                                                     {"allocatable": "no"}),
                 lambda: storageunits.storage_execute(ctx, "lvm-pv", [], "/dev/vdb",
                                                      "fix-consistency")):
        with pytest.raises(errors.StorageError):
            call()
    assert len(runner.commands("pvchange")) == 1 and len(runner.commands("vgreduce")) == 1


def test_volume_list_of_a_vg(ctx, runner) -> None:
    from ganeti.backend import storageunits
    runner.on("lvs", stdout=LV_LINE + "  other|xenvg|4.00|-wi-------|/dev/vdb(9)\n")
    assert storageunits.volume_list(ctx, [["lvm-vg", "xenvg"]]) == [
        ["xenvg", LV, 128 << 20], ["xenvg", "other", 4 << 20]]
    assert runner.commands("lvs")[-1][-1] == "xenvg"


def test_node_verify_lvlist(ctx, runner) -> None:
    runner.on("lvs", stdout=LV_LINE)     # without vg_extent_size: extent 0 (unknown)
    assert node.node_verify(ctx, {"lvlist": "xenvg"}, "c")["lvlist"] == {LV: [128, True, 0]}
    runner.on("lvs", stdout=LV_LINE.replace("\n", "|4.00\n"))
    assert node.node_verify(ctx, {"lvlist": "xenvg"}, "c")["lvlist"] == {LV: [128, True, 4]}
    runner.on("lvs", rc=5, stderr='Volume group "xenvg" not found')
    assert "not found" in node.node_verify(ctx, {"lvlist": "xenvg"}, "c")["lvlist"]
    assert "Invalid" in node.node_verify(ctx, {"lvlist": "../x"}, "c")["lvlist"]


def test_snapshot_for_an_export(ctx, runner) -> None:
    runner.on("lvs", stdout=LV_LINE)
    assert blockdev.blockdev_snapshot(ctx, plain_disk(), 128) == ["xenvg", f"{LV}.snap"]
    assert runner.commands("lvcreate") == [
        ["lvcreate", "-s", "-L128m", "-n", f"{LV}.snap", f"xenvg/{LV}"]]
    runner.on("vgs", stdout="  xenvg|1020.00|100.00|1\n")
    with pytest.raises(errors.StorageError, match="Not enough free space.*128 MiB needed"):
        blockdev.blockdev_snapshot(ctx, plain_disk(), 128)
    assert len(runner.commands("lvcreate")) == 1
    file_disk = serializer.to_data(objects.Disk(uuid="f", dev_type="file", size=1,
                                                logical_id=["loop", "/x/y"]))
    with pytest.raises(errors.StorageError, match="cannot make snapshots"):
        blockdev.blockdev_snapshot(ctx, file_disk, 1)


def test_reading_an_inactive_volume_activates_it_first(ctx, runner) -> None:
    runner.on("lvs", stdout=LV_LINE.replace("-wi-a-----", "-wi-------"))
    with pytest.raises(errors.StorageError, match="does not exist"):
        blockdev.blockdev_read_chunk(ctx, plain_disk(), 0, 4096)   # no /dev here
    assert runner.commands("lvchange") == [["lvchange", "-ay", f"xenvg/{LV}"]]


def test_a_volume_lvm_rounded_up_reports_the_size_asked_for(ctx, runner) -> None:
    """130 MiB asked, 4 MiB extents: LVM made 132 MiB; status and dimensions say 130
    (doc/storage.md, "Sizes and extents"); a volume larger than that says so."""
    runner.on("lvs", stdout=LV_LINE.replace("128.00", "132.00").replace("\n", "|4.00\n"))
    assert blockdev.blockdev_getdimensions(ctx, [plain_disk(130)]) == [[130 << 20, 1]]
    assert blockdev.blockdev_getstatus(ctx, [[plain_disk(130), "inst1", 0]])[0][0] == 130 << 20
    assert blockdev.blockdev_getdimensions(ctx, [plain_disk(128)]) == [[132 << 20, 1]]
    assert blockdev.blockdev_getdimensions(ctx, [plain_disk(124)]) == [[132 << 20, 1]]


def test_an_inactive_volume_is_not_active_for_verify_disks(ctx, runner, tmp_path) -> None:
    """After a reboot an LV is inactive: verify-disks must see it, even with the link."""
    import os
    os.makedirs(ctx.paths.instance_disks_dir, exist_ok=True)
    os.symlink(f"/dev/xenvg/{LV}", os.path.join(ctx.paths.instance_disks_dir, "inst1:0"))
    runner.on("lvs", stdout=LV_LINE)
    assert blockdev.blockdev_getstatus(ctx, [[plain_disk(), "inst1", 0]]) == [[128 << 20, True]]
    runner.on("lvs", stdout=LV_LINE.replace("-wi-a-----", "-wi-------"))
    assert blockdev.blockdev_getstatus(ctx, [[plain_disk(), "inst1", 0]]) == [[128 << 20, False]]


def test_a_batch_of_statuses_lists_each_volume_group_once(ctx, runner) -> None:
    """verify-disks asks for every disk of a node at once: one lvs of the VG serves them
    all (and a missing volume is None, a volume of a missing VG too)."""
    other = LV_LINE.replace(LV, "b2.disk0")
    runner.on("lvs", stdout=LV_LINE + other)
    entries = [[plain_disk(), "inst1", 0],
               [plain_disk(logical_id=["xenvg", "b2.disk0"]), "inst2", 0],
               [plain_disk(logical_id=["xenvg", "gone.disk0"]), "inst3", 0]]
    assert [None if r is None else r[0] for r in blockdev.blockdev_getstatus(ctx, entries)] \
        == [128 << 20, 128 << 20, None]
    assert blockdev.blockdev_getdimensions(ctx, [e[0] for e in entries])[2] is None
    assert len(runner.commands("lvs")) == 2          # one per call, not one per disk
    assert all(c[-1] == "xenvg" for c in runner.commands("lvs"))
