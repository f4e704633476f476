"""Tests for ganeti.storage.lvm: the output parsers on real samples, and the LV
device against a recording command runner (no LVM needed)."""

from __future__ import annotations

import pytest

from fakes.cmdrunner import RecordingRunner

from ganeti import constants, errors, pathutils, storage
from ganeti.storage import base, lvm, tree

# `lvs --noheadings --units m --nosuffix --separator '|' -o lv_name,vg_name,lv_size,lv_attr,devices`
LVS = """\
  0f6c1d3e-6a4b-4c59-9c1a-2d4f0e8b7a10.disk0|xenvg|1024.00|-wi-ao----|/dev/vdb(0)
  0f6c1d3e-6a4b-4c59-9c1a-2d4f0e8b7a10.disk0|xenvg|1024.00|-wi-ao----|/dev/vdc(0)
  striped|xenvg|128.00|-wi-------|/dev/vdb(256),/dev/vdc(256)
  root|sysvg|8192.00|-wi-ao----|/dev/vda2(0)
  big.snap|xenvg|64.00|swi-a-s---|/dev/vdb(300)
"""
# `vgs ... -o vg_name,vg_size,vg_free,pv_count`
VGS = "  xenvg|2040.00|886.00|2\n  sysvg|9212.00|1020.00|1\n"
# `pvs ... -o pv_name,vg_name,pv_size,pv_free,pv_attr`
PVS = """\
  /dev/vda2|sysvg|9212.00|1020.00|a--
  /dev/vdb|xenvg|1020.00|0|a--
  /dev/vdc|xenvg|1020.00|886.00|u--
  /dev/vdd||2048.00|2048.00|---
"""
UUID = "0f6c1d3e-6a4b-4c59-9c1a-2d4f0e8b7a10"


def test_parse_lvs_merges_segments_and_collects_pvs():
    lvs = lvm.parse_lvs(LVS)
    first = lvs[0]
    assert (first.vg, first.name, first.size) == ("xenvg", f"{UUID}.disk0", 1024)
    assert first.pvs == ("/dev/vdb", "/dev/vdc") and first.active
    striped = [i for i in lvs if i.name == "striped"][0]
    assert striped.pvs == ("/dev/vdb", "/dev/vdc") and not striped.active
    snap = [i for i in lvs if i.name == "big.snap"][0]
    assert snap.is_snapshot and not first.is_snapshot
    assert len(lvs) == 4


def test_parse_vgs_and_pvs():
    assert lvm.parse_vgs(VGS) == [lvm.VgInfo("xenvg", 2040, 886, 2),
                                  lvm.VgInfo("sysvg", 9212, 1020, 1)]
    pvs = lvm.parse_pvs(PVS)
    assert [(p.name, p.vg, p.size, p.free, p.allocatable, p.used) for p in pvs] == [
        ("/dev/vda2", "sysvg", 9212, 1020, True, 8192),
        ("/dev/vdb", "xenvg", 1020, 0, True, 1020),
        ("/dev/vdc", "xenvg", 1020, 886, False, 134),
        ("/dev/vdd", "", 2048, 2048, False, 0)]


@pytest.mark.parametrize("text", ["  a|b|c\n", "  xenvg|lots|1|1\n", "  xenvg|1|1|x\n"],
                         ids=["columns", "size", "count"])
def test_parsers_refuse_garbage(text):
    with pytest.raises(errors.StorageError, match="Cannot parse"):
        lvm.parse_vgs(text)


def test_empty_output_is_no_rows():
    assert lvm.parse_lvs("") == [] and lvm.parse_vgs("\n") == []


@pytest.mark.parametrize("name", ["", "-x", "a b", "a/b", ".", "..", "x" * 128, 3],
                         ids=["empty", "dash", "space", "slash", "dot", "dotdot", "long", "int"])
def test_check_lvm_name_refuses(name):
    with pytest.raises(errors.StorageError, match="Invalid"):
        lvm.check_lvm_name(name, "volume group")


def test_pick_exclusive_pvs():
    pvs = [lvm.PvInfo("/dev/a", "xenvg", 100, 100, True),
           lvm.PvInfo("/dev/b", "xenvg", 200, 200, True),
           lvm.PvInfo("/dev/c", "xenvg", 300, 100, True),     # in use
           lvm.PvInfo("/dev/d", "xenvg", 500, 500, False),    # not allocatable
           lvm.PvInfo("/dev/e", "other", 900, 900, True)]
    assert lvm.pick_exclusive_pvs(pvs, "xenvg", 250, 2) == ["/dev/b", "/dev/a"]
    with pytest.raises(errors.StorageError, match="Exclusive storage"):
        lvm.pick_exclusive_pvs(pvs, "xenvg", 350, 2)
    with pytest.raises(errors.StorageError, match="Exclusive storage"):
        lvm.pick_exclusive_pvs(pvs, "xenvg", 10, 3)


# --- the device ------------------------------------------------------------

def make(runner: RecordingRunner, excl: bool = False) -> lvm.LogicalVolume:
    dev = storage.get_storage(constants.DT_PLAIN, pathutils.Paths(root="/"), runner=runner,
                              exclusive_storage=excl)
    assert isinstance(dev, lvm.LogicalVolume)
    return dev


def disk(idx: int = 0, size: int = 64, spindles: int | None = None) -> base.DiskSpec:
    return base.DiskSpec(uuid=UUID, size=size, dev_type=constants.DT_PLAIN, index=idx,
                         logical_id=("xenvg", lvm.lv_name_for(UUID, idx)), spindles=spindles)


def lv_line(idx: int = 0, size: str = "64.00", attr: str = "-wi-a-----") -> str:
    return f"  {UUID}.disk{idx}|xenvg|{size}|{attr}|/dev/vdb(0)\n"


def vg_runner(free: str = "886.00") -> RecordingRunner:
    return RecordingRunner().on("vgs", stdout=f"  xenvg|2040.00|{free}|2\n").on("lvs", rc=5)


def test_create_runs_one_lvcreate():
    runner = vg_runner()
    assert make(runner).create(disk()) == f"/dev/xenvg/{UUID}.disk0"
    assert runner.programs() == ["lvcreate"]     # each LVM command costs a device scan
    assert runner.commands("lvcreate") == [
        ["lvcreate", "-L64m", "-n", f"{UUID}.disk0", "--wipesignatures", "y", "-y", "xenvg"]]


def _refused(runner: RecordingRunner, match: str) -> None:
    """create fails with ``match``; only the failed lvcreate and read-only listings ran."""
    with pytest.raises(errors.StorageError, match=match):
        make(runner).create(disk())
    assert runner.programs()[0] == "lvcreate"
    assert set(runner.programs()[1:]) <= {"vgs", "lvs"}


def test_create_says_the_vg_is_missing():
    runner = RecordingRunner().on("vgs", rc=5, stderr='Volume group "xenvg" not found')
    runner.on("lvcreate", rc=5, stderr='  Volume group "xenvg" not found\n')
    _refused(runner, "Volume group 'xenvg' does not exist")


def test_create_says_there_is_too_little_space():
    runner = vg_runner(free="63.99").on("lvcreate", rc=5, stderr="  Insufficient free extents\n")
    _refused(runner, rf"Not enough free space in volume group xenvg for disk {UUID}"
                     r".*64 MiB needed, 63 MiB free")


def test_create_says_the_volume_exists():
    runner = vg_runner().on("lvs", stdout=lv_line())
    runner.on("lvcreate", rc=5, stderr=f'  Logical Volume "{UUID}.disk0" already exists\n')
    _refused(runner, r"already exists \(Cannot create .*lvcreate: exited with status 5:"
                     r" .*already exists\)")


def test_create_with_exclusive_storage_checks_the_room_first():
    runner = vg_runner(free="10.00")
    with pytest.raises(errors.StorageError, match="Not enough free space"):
        make(runner, excl=True).create(disk(size=100, spindles=1))
    assert "lvcreate" not in runner.programs()


def test_failed_lvcreate_names_the_disk_and_the_reason():
    runner = vg_runner().on("lvcreate", rc=5, stderr="  Insufficient free extents\n")
    with pytest.raises(errors.StorageError,
                       match=rf"Cannot create logical volume xenvg/{UUID}.disk0 for disk {UUID}"
                             r".*status 5: Insufficient free extents"):
        make(runner).create(disk())


def test_multi_disk_create_failing_halfway_removes_what_it_made():
    runner = vg_runner()
    runner.on("lvcreate", "-L64m", "-n", f"{UUID}.disk1", rc=5, stderr="no space")
    dev = make(runner)
    real = runner.__call__

    def after_create(argv):  # once disk0 is created, lvs finds it
        if argv[0] == "lvs" and argv[-1].endswith(".disk0") and runner.commands("lvcreate"):
            runner.calls.append(list(argv))
            return RecordingRunner().on("lvs", stdout=lv_line(0))(argv)
        return real(argv)
    dev.runner = after_create
    with pytest.raises(errors.StorageError, match="no space"):
        tree.create_disks(lambda _t: dev, [disk(0), disk(1)])
    assert [c[3] for c in runner.commands("lvcreate")] == [f"{UUID}.disk0", f"{UUID}.disk1"]
    assert runner.commands("lvremove") == [["lvremove", "-f", f"xenvg/{UUID}.disk0"]]


def test_exclusive_storage_gives_lvcreate_empty_pvs():
    runner = vg_runner().on("pvs", stdout=PVS + "  /dev/vde|xenvg|1020.00|1020.00|a--\n")
    make(runner, excl=True).create(disk(size=100, spindles=1))
    assert runner.commands("lvcreate")[0][-2:] == ["xenvg", "/dev/vde"]


def test_remove_is_idempotent():
    runner = vg_runner().on("lvremove", rc=5, stderr="  Failed to find logical volume\n")
    runner.on("lvs", stdout=lv_line(1))             # the group lists other volumes only
    make(runner).remove(disk())
    runner = RecordingRunner().on("vgs", stdout="  othervg|2040.00|886.00|1\n")
    runner.on("lvremove", rc=5, stderr='  Volume group "xenvg" not found\n')
    make(runner).remove(disk())                     # no such VG: nothing to remove


def test_remove_fails_when_lvm_cannot_say_the_volume_is_gone():
    runner = RecordingRunner().on("vgs", rc=5).on("lvs", rc=5)
    runner.on("lvremove", rc=127, stderr="lvremove: not found")
    with pytest.raises(errors.StorageError, match="Cannot remove logical volume"):
        make(runner).remove(disk())
    runner = vg_runner().on("lvremove", rc=5, stderr="  device-mapper: remove ioctl failed\n")
    with pytest.raises(errors.StorageError, match="remove ioctl failed"):
        make(runner).remove(disk())                 # lvs of the group fails: no proof


def test_remove_of_a_volume_in_use_fails():
    runner = vg_runner().on("lvs", stdout=lv_line())
    runner.on("lvremove", rc=5, stderr="  Logical volume xenvg/x in use.\n")
    with pytest.raises(errors.StorageError, match="Cannot remove logical volume.*in use"):
        make(runner).remove(disk())


def test_remove_existing():
    runner = vg_runner().on("lvs", stdout=lv_line())
    make(runner).remove(disk())
    assert runner.commands("lvremove") == [["lvremove", "-f", f"xenvg/{UUID}.disk0"]]


def test_grow_checks_space_and_extends():
    runner = vg_runner().on("lvs", stdout=lv_line(size="96.00"))
    assert make(runner).grow(disk(), 32) == 96
    assert runner.commands("lvextend") == [["lvextend", "-L+32m", f"xenvg/{UUID}.disk0"]]
    runner = vg_runner(free="10.00").on("lvs", stdout=lv_line())
    with pytest.raises(errors.StorageError, match="Not enough free space"):
        make(runner).grow(disk(), 32)
    assert "lvextend" not in runner.programs()


def test_grow_missing_volume():
    with pytest.raises(errors.StorageError, match="does not exist"):
        make(vg_runner()).grow(disk(), 32)


def test_rename_within_the_vg():
    runner = vg_runner().on("lvs", stdout=lv_line())
    assert make(runner).rename(disk(), ("xenvg", "new")) == ("xenvg", "new")
    assert runner.commands("lvrename") == [["lvrename", "xenvg", f"{UUID}.disk0", "new"]]
    with pytest.raises(errors.StorageError, match="another volume group"):
        make(runner).rename(disk(), ("othervg", "new"))
    with pytest.raises(errors.StorageError, match="Invalid logical volume name"):
        make(runner).rename(disk(), ("xenvg", "bad name"))
    runner = vg_runner().on("lvrename", rc=5, stderr="  Existing logical volume not found\n")
    with pytest.raises(errors.StorageError, match="does not exist"):
        make(runner).rename(disk(), ("xenvg", "new"))
    assert runner.programs()[0] == "lvrename"


def test_snapshot():
    runner = vg_runner().on("lvs", stdout=lv_line())
    assert make(runner).snapshot(disk(), 16) == ("xenvg", f"{UUID}.disk0.snap")
    assert runner.commands("lvcreate") == [
        ["lvcreate", "-s", "-L16m", "-n", f"{UUID}.disk0.snap", f"xenvg/{UUID}.disk0"]]


def test_assemble_activates_an_inactive_volume_only():
    runner = vg_runner().on("lvs", stdout=lv_line(attr="-wi-------"))
    assert make(runner).assemble(disk()) == f"/dev/xenvg/{UUID}.disk0"
    assert runner.commands("lvchange") == [["lvchange", "-ay", f"xenvg/{UUID}.disk0"]]
    runner = vg_runner().on("lvs", stdout=lv_line())
    make(runner).assemble(disk())
    assert "lvchange" not in runner.programs()


def test_status_and_size():
    runner = vg_runner().on("lvs", stdout=lv_line(size="64.00", attr="-wi-------"))
    dev = make(runner)
    assert dev.get_size(disk()) == 64
    assert dev.status(disk()) == base.DeviceStatus(path=f"/dev/xenvg/{UUID}.disk0", size=64,
                                                   active=False, spindles=1)
    assert dev.attach(disk())
    assert make(vg_runner()).status(disk()) is None
    assert make(RecordingRunner().on("vgs", rc=5).on("lvs", rc=5)).status(disk()) is None
    assert not make(vg_runner()).attach(disk())


@pytest.mark.parametrize("lid", [(), ("xenvg",), ("xenvg", "a", "b"), ("-vg", "x")],
                         ids=["empty", "one", "three", "badvg"])
def test_bad_logical_id(lid):
    spec = base.DiskSpec(uuid="d", size=1, logical_id=lid)
    runner = RecordingRunner()
    with pytest.raises(errors.StorageError, match="d"):
        make(runner).create(spec)
    assert runner.calls == []


def test_storage_unit_commands():
    runner = RecordingRunner()
    lvm.set_pv_allocatable(runner, "/dev/vdb", False)
    lvm.repair_vg(runner, "xenvg")
    assert runner.calls == [["pvchange", "-x", "n", "/dev/vdb"],
                            ["vgreduce", "--removemissing", "xenvg"]]
    with pytest.raises(errors.StorageError):
        lvm.set_pv_allocatable(runner, "vdb", True)


def test_create_tags_the_volume_with_its_instance():
    runner = vg_runner()
    make(runner).create(base.DiskSpec(uuid=UUID, size=64, dev_type=constants.DT_PLAIN,
                                      logical_id=("xenvg", f"{UUID}.disk0"),
                                      tag="originstname+inst1.example.com"))
    assert runner.commands("lvcreate")[0][3:6] == [f"{UUID}.disk0", "--addtag",
                                                   "originstname+inst1.example.com"]
    assert lvm.lvm_tag("originstname+a b\u00e9") == "originstname+a_b_"
    assert len(lvm.lvm_tag("x" * 500)) == lvm.TAG_MAX and lvm.lvm_tag("") == ""


def test_pick_grow_pvs_stays_on_the_volumes_own_pvs():
    pvs = [lvm.PvInfo("/dev/a", "xenvg", 100, 40, True),
           lvm.PvInfo("/dev/b", "xenvg", 100, 30, True),
           lvm.PvInfo("/dev/c", "xenvg", 900, 900, True)]     # empty: another volume's to take
    assert lvm.pick_grow_pvs(pvs, "xenvg", ["/dev/b", "/dev/a"], 70) == ["/dev/a", "/dev/b"]
    with pytest.raises(errors.StorageError, match="have 70 MiB free, 71 MiB needed"):
        lvm.pick_grow_pvs(pvs, "xenvg", ["/dev/a", "/dev/b"], 71)


def test_grow_with_exclusive_storage_names_the_volumes_pvs():
    runner = vg_runner().on("lvs", stdout=lv_line()).on("pvs", stdout=PVS)
    with pytest.raises(errors.StorageError, match=r"\(/dev/vdb\) have 0 MiB free"):
        make(runner, excl=True).grow(disk(), 32)     # it lies on /dev/vdb (full)
    assert "lvextend" not in runner.programs()
    runner = vg_runner().on("lvs", stdout=lv_line().replace("/dev/vdb", "/dev/vdc")) \
        .on("pvs", stdout=PVS.replace("u--", "a--"))
    make(runner, excl=True).grow(disk(), 32)
    assert runner.commands("lvextend") == [["lvextend", "-L+32m", f"xenvg/{UUID}.disk0",
                                            "/dev/vdc"]]


def test_set_info_replaces_the_instance_tag_and_keeps_the_others():
    tags = ("lvs", *lvm._REPORT, "-o", "lv_tags")
    runner = vg_runner().on("lvs", stdout=lv_line()).on(
        *tags, stdout="  originstname+old.example.com,backup-keep\n")
    make(runner).set_info(disk(), "originstname+new.example.com")
    assert runner.commands("lvchange") == [
        ["lvchange", "--deltag", "originstname+old.example.com",
         "--addtag", "originstname+new.example.com", f"xenvg/{UUID}.disk0"]]


def test_set_info_changes_nothing_when_the_tag_is_right_and_refuses_a_missing_volume():
    tags = ("lvs", *lvm._REPORT, "-o", "lv_tags")
    runner = vg_runner().on("lvs", stdout=lv_line()).on(*tags, stdout="originstname+x.example\n")
    make(runner).set_info(disk(), "originstname+x.example")
    assert runner.commands("lvchange") == []
    with pytest.raises(errors.StorageError, match="does not exist|not found|missing"):
        make(vg_runner()).set_info(disk(), "originstname+x.example")
