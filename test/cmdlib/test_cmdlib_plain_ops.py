"""plain instances on the master side: export of a running instance from an LVM
snapshot, gnt-instance move, and wiping; against a real ConfigWriter and the fake
nodes of test_cmdlib_plain (volume groups per node)."""

from __future__ import annotations

from typing import Any

import pytest
from cmdlib.test_cmdlib_instance import _create, env  # noqa: F401 - env: a fixture
from cmdlib.test_cmdlib_plain import LvmNodes, lenv  # noqa: F401 - lenv: a fixture

from ganeti import constants, errors, objects
from ganeti.cmdlib.backup import snapshot_disk


class ExportNodes(LvmNodes):
    """LvmNodes that also stage exports and run transfers (recording their sources)."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[dict[str, Any]] = []
        self.snapshots: dict[str, set[str]] = {}
        self.send_error: str | None = None

    @staticmethod
    def resolver(names: list[str]) -> list[tuple[str, str, int, bool]]:
        return [(n, "192.0.2.1", 1811, False) for n in names]

    def do_blockdev_snapshot(self, node: str, disk: dict, snap_size: int) -> list[str]:
        vg, lv = disk["logical_id"]
        self.snapshots.setdefault(node, set()).add(f"{lv}.snap")
        return [vg, f"{lv}.snap"]

    def do_blockdev_remove(self, node: str, disk: dict) -> None:
        lv = disk["logical_id"][-1]
        if lv.endswith(".snap"):
            self.snapshots.get(node, set()).discard(lv)
            return
        super().do_blockdev_remove(node, disk)

    def do_export_stage(self, node: str, instance_name: str, create: bool) -> None:
        return None

    def do_impexp_send(self, node: str, source: dict, dest: dict, host: str, port: int) -> str:
        if self.send_error:
            raise errors.OpExecError(self.send_error)
        self.sources.append(source)
        return f"t-{len(self.sources)}"

    def do_impexp_status(self, node: str, ids: list) -> list:
        return [{"state": "done", "done": 1, "total": 1, "elapsed": 1.0,
                 "sha256": "ab" * 32, "size": 1}]

    def do_impexp_cleanup(self, node: str, transfer_id: str) -> None:
        return None

    def do_finalize_export(self, node: str, instance_name: str, config: str) -> str:
        return f"/export/{instance_name}"

    def do_export_list(self, node: str) -> list:
        return []


@pytest.fixture
def xenv(lenv: Any) -> Any:  # noqa: F811 - the imported fixture
    nodes = ExportNodes()
    nodes.vgs = lenv.rpc.vgs
    lenv.ctx.rpc = lenv.rpc = nodes
    return lenv


def _export(e: Any, **kw: Any) -> Any:
    return e.run("OP_BACKUP_EXPORT", instance_name="inst1", target_node="node2",
                   mode="local", **kw)


def test_noshutdown_export_of_a_running_plain_instance_reads_a_snapshot(xenv: Any) -> None:
    _create(xenv, template="plain", disks=[{"size": 128}, {"size": 64}])
    disks = xenv.cfg.get_instance_disks(xenv.cfg.get_instance_info_by_name("inst1").uuid)
    _export(xenv, shutdown=False)
    snaps = [f"{d.uuid}.disk{i}.snap" for i, d in enumerate(disks)]
    # each disk read from its snapshot (in the disk dict and the instance's disks_info)
    assert [s["disk"]["logical_id"] for s in xenv.rpc.sources] == [["xenvg", n] for n in snaps]
    assert [s["instance"]["disks_info"][i]["logical_id"][1]
            for i, s in enumerate(xenv.rpc.sources)] == snaps
    # the snapshots are gone, the disks were linked back, the instance never stopped
    assert xenv.rpc.snapshots["node1"] == set()
    assert [c for c in xenv.rpc.calls if c[0] in ("blockdev_assemble",
                                                  "instance_shutdown")][-2:] == \
        [("blockdev_assemble", "node1")] * 2
    assert ("instance_shutdown", "node1") not in xenv.rpc.calls
    assert "inst1" in xenv.rpc.running["node1"]


@pytest.mark.parametrize("params,start", [({"shutdown": True}, True),
                                          ({"shutdown": False}, False)],
                         ids=["shutdown", "stopped-instance"])
def test_export_reads_the_volume_itself_when_the_instance_is_stopped(
        xenv: Any, params: dict, start: bool) -> None:
    _create(xenv, template="plain", start=start)
    disk = xenv.cfg.get_instance_disks(xenv.cfg.get_instance_info_by_name("inst1").uuid)[0]
    _export(xenv, **params)
    assert [s["disk"]["logical_id"] for s in xenv.rpc.sources] == [disk.logical_id]
    assert ("blockdev_snapshot", "node1") not in xenv.rpc.calls


def test_the_snapshot_is_removed_when_the_export_fails(xenv: Any) -> None:
    _create(xenv, template="plain")
    xenv.rpc.send_error = "the target went away"
    with pytest.raises(errors.OpExecError, match="the target went away"):
        _export(xenv, shutdown=False)
    assert ("blockdev_snapshot", "node1") in xenv.rpc.calls
    assert xenv.rpc.snapshots["node1"] == set()


def test_a_failed_snapshot_fails_the_export_and_removes_the_earlier_ones(xenv: Any) -> None:
    _create(xenv, template="plain", disks=[{"size": 128}, {"size": 64}])
    real = xenv.rpc.do_blockdev_snapshot

    def snapshot(node: str, disk: dict, snap_size: int) -> list[str]:
        if disk["logical_id"][1].endswith("disk1"):
            raise errors.StorageError("Not enough free space in volume group xenvg")
        return real(node, disk, snap_size)
    xenv.rpc.do_blockdev_snapshot = snapshot
    with pytest.raises(errors.OpExecError, match="Cannot snapshot disk/1.*Not enough free"):
        _export(xenv, shutdown=False)
    assert xenv.rpc.snapshots["node1"] == set() and xenv.rpc.sources == []


def test_snapshot_disk_is_the_disk_on_another_volume() -> None:
    disk = objects.Disk(uuid="d1", dev_type="plain", size=128, logical_id=["xenvg", "d1.disk0"])
    snap = snapshot_disk(disk, ["xenvg", "d1.disk0.snap"])
    assert (snap["dev_type"], snap["size"], snap["logical_id"], snap["mode"]) == \
        ("plain", 128, ["xenvg", "d1.disk0.snap"], constants.DISK_RDONLY)
    with pytest.raises(errors.OpExecError, match="Invalid snapshot"):
        snapshot_disk(disk, None)


def test_move_a_plain_instance(lenv: Any) -> None:  # noqa: F811
    _create(lenv, template="plain", disks=[{"size": 128}])
    inst = lenv.cfg.get_instance_info_by_name("inst1")
    disk = lenv.cfg.get_instance_disks(inst.uuid)[0]
    lenv.run("OP_INSTANCE_MOVE", instance_name="inst1", target_node="node2")
    inst = lenv.cfg.get_instance_info_by_name("inst1")
    assert lenv.cfg.get_node_info(inst.primary_node).name == "node2"
    # created on the target (same volume name), copied, removed from the source
    assert lenv.rpc.created[-1]["disk"]["logical_id"] == disk.logical_id
    assert disk.uuid in lenv.rpc.disks["node2"] and disk.uuid not in lenv.rpc.disks["node1"]
    assert ("blockdev_checksum", "node2") in lenv.rpc.calls
    assert "inst1" in lenv.rpc.running["node2"]


def _copied(cenv: Any, template: str, size_mib: int, data_at: list[int]
            ) -> list[tuple[str, int, int]]:
    """Move inst1 (one disk of ``size_mib``) to node2, the source holding data in
    the 4 MiB chunks at ``data_at`` (MiB) and zeros elsewhere; -> what node2
    got, in order: ("write"|"wipe", offset MiB, length MiB)."""
    _create(cenv, template=template, disks=[{"size": size_mib}], start=False)
    got: list[tuple[str, int, int]] = []

    def read(node: str, disk: dict, offset: int, length: int) -> dict:
        zero = offset >> 20 not in data_at
        return {"data": "" if zero else "eA==", "length": length, "zero": zero,
                "size": size_mib << 20, "eof": offset + length >= size_mib << 20}

    def write(node: str, disk: dict, offset: int, data: str) -> int:
        got.append(("write", offset >> 20, 4))
        return 4 << 20

    def wipe(node: str, disk: dict, offset: int, size: int) -> int:
        got.append(("wipe", offset >> 20, size >> 20))
        return size
    cenv.rpc.do_blockdev_read_chunk = read
    cenv.rpc.do_blockdev_write_chunk = write
    cenv.rpc.do_blockdev_wipe = wipe
    cenv.run("OP_INSTANCE_MOVE", instance_name="inst1", target_node="node2")
    return got


def test_a_move_zeroes_the_new_volumes_ranges_it_skips(lenv: Any) -> None:  # noqa: F811
    """A new logical volume holds what its extents held: the zero chunks not sent
    are zeroed on the target, runs of them in one wipe of at most 256 MiB."""
    got = _copied(lenv, "plain", 600, [8])
    assert got == [("wipe", 0, 8), ("write", 8, 4), ("wipe", 12, 256), ("wipe", 268, 256),
                   ("wipe", 524, 76)]
    # every byte of the volume written once, in order
    assert [(o, o + n) for _, o, n in got] == list(zip([0, 8, 12, 268, 524],
                                                       [8, 12, 268, 524, 600], strict=True))
    lenv.run("OP_INSTANCE_REMOVE", instance_name="inst1")
    assert _copied(lenv, "plain", 16, [0]) == [("write", 0, 4), ("wipe", 4, 12)]


def test_a_move_of_a_file_disk_skips_the_zero_chunks(env: Any) -> None:  # noqa: F811
    """A new file disk is a sparse file: nothing to zero there."""
    assert _copied(env, "file", 600, [8, 500]) == [("write", 8, 4), ("write", 500, 4)]


def test_move_refused_when_the_target_vg_is_too_small(lenv: Any) -> None:  # noqa: F811
    _create(lenv, template="plain", disks=[{"size": 128}])
    lenv.rpc.vgs["node2"]["xenvg"] = 100
    before = lenv.raw()
    with pytest.raises(errors.OpPrereqError, match="node node2 vg xenvg: required 128 MiB"):
        lenv.run("OP_INSTANCE_MOVE", instance_name="inst1", target_node="node2")
    assert lenv.raw() == before and not lenv.rpc.disks["node2"]


def test_move_passes_the_targets_exclusive_storage(lenv: Any) -> None:  # noqa: F811
    _create(lenv, template="plain", start=False)
    node2 = lenv.cfg.get_node_info_by_name("node2")
    node2.ndparams = {"exclusive_storage": True}
    lenv.cfg.update(node2)
    lenv.run("OP_INSTANCE_MOVE", instance_name="inst1", target_node="node2")
    assert [c["excl_stor"] for c in lenv.rpc.created] == [False, True]


def test_plain_disks_are_wiped_when_the_cluster_asks(lenv: Any) -> None:  # noqa: F811
    cluster = lenv.cfg.get_cluster_info()
    cluster.prealloc_wipe_disks = True
    lenv.cfg.update(cluster)
    wiped: list[tuple[str, str, int, int]] = []

    def wipe(node: str, disk: dict, offset: int, size: int) -> int:
        wiped.append((node, disk["logical_id"][1], offset, size))
        return size
    lenv.rpc.do_blockdev_wipe = wipe
    lenv.rpc.do_instance_resize_disk = lambda node, inst, idx: False
    _create(lenv, template="plain", disks=[{"size": 16}])
    disk = lenv.cfg.get_instance_disks(lenv.cfg.get_instance_info_by_name("inst1").uuid)[0]
    assert wiped == [("node1", f"{disk.uuid}.disk0", 0, 16 << 20)]
    lenv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=8)
    assert wiped[-1] == ("node1", f"{disk.uuid}.disk0", 16 << 20, 8 << 20)


def test_grow_passes_exclusive_storage(lenv: Any) -> None:  # noqa: F811
    grows: list[bool] = []
    real = lenv.rpc.do_blockdev_grow

    def grow(node: str, disk: dict, amount: int, dryrun: bool, backing: bool,
             excl: bool) -> int:
        grows.append(excl)
        return real(node, disk, amount, dryrun, backing, excl)
    lenv.rpc.do_blockdev_grow = grow
    _create(lenv, template="plain", start=False)
    lenv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=8)
    lenv.run("OP_CLUSTER_SET_PARAMS", ndparams={"exclusive_storage": True})
    lenv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=8)
    assert grows == [False, False, True, True]      # dry run, then the grow
