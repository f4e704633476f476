"""Cluster verify of plain volumes: a missing volume group, missing, wrong-sized and
orphan volumes (the nodes' lvlist answers planted through the fake node_verify)."""

from __future__ import annotations

from cmdlib.test_cmdlib_verify import _setup, _verify_group
from fakes.fakeconfig import node_name

from ganeti import objects
from ganeti.cmdlib import lvm


def _plain_cluster(tmp_path):
    cfg, rpc, ctx, _, answers = _setup(tmp_path, nodes=2)
    cluster = cfg.get_cluster_info()
    cluster.enabled_disk_templates = ["plain", "diskless"]
    cluster.volume_group_name = "xenvg"
    cfg.update(cluster)
    node1 = cfg.get_node_info_by_name(node_name(1))
    disks = [objects.Disk(uuid=f"d{i}", dev_type="plain", size=128,
                          logical_id=["xenvg", f"d{i}.disk{i}"], nodes=[node1.uuid])
             for i in range(3)]
    cfg.add_instance(objects.Instance(name="inst1.example.com", uuid="i1",
                                      primary_node=node1.uuid, disk_template="plain"), disks)
    return cfg, rpc, ctx, answers


def test_volume_findings(tmp_path) -> None:
    cfg, rpc, ctx, answers = _plain_cluster(tmp_path)
    answers[node_name(1)] = {"lvlist": {"d0.disk0": [128, True], "d1.disk1": [64, True],
                                        "stray": [4, False]}}
    answers[node_name(2)] = {"lvlist": "Cannot list the volumes of volume group xenvg:"
                                       " vgs: exited with status 5"}
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    joined = "\n".join(msgs)
    assert result is False
    assert ("ERROR:EINSTANCEMISSINGDISK:instance:inst1.example.com:volume xenvg/d2.disk2 is"
            f" missing on node {node_name(1)}") in joined
    assert ("ERROR:EINSTANCEFAULTYDISK:instance:inst1.example.com:volume xenvg/d1.disk1 on"
            f" node {node_name(1)} has 64 MiB, the configuration says 128 MiB") in joined
    assert f"ERROR:ENODEORPHANLV:node:{node_name(1)}:volume xenvg/stray is unknown" in joined
    assert f"ERROR:ENODELVM:node:{node_name(2)}:LVM problem on node" in joined
    checks = rpc.calls_to("node_verify")[0][1][0]
    assert checks["lvlist"] == "xenvg"


def test_matching_volumes_verify_clean(tmp_path) -> None:
    cfg, rpc, ctx, answers = _plain_cluster(tmp_path)
    answers[node_name(1)] = {"lvlist": {f"d{i}.disk{i}": [128, True] for i in range(3)}}
    answers[node_name(2)] = {"lvlist": {}}
    result, msgs, _ = _verify_group(ctx)
    assert result is True, msgs


def test_volume_problems_larger_is_a_warning() -> None:
    (p,) = lvm.volume_problems("n1", "vg", {"a": ("i", 10)}, {"a": [12, True]})
    assert p.warning and p.code == "EINSTANCEFAULTYDISK"
    assert lvm.volume_problems("n1", "vg", {}, {}) == []


def test_volume_problems_a_size_rounded_up_to_whole_extents_is_right() -> None:
    """130 MiB asked in a VG of 4 MiB extents is a 132 MiB volume: not wrong-sized."""
    assert lvm.volume_problems("n1", "vg", {"a": ("i", 130)}, {"a": [132, True, 4]}) == []
    (p,) = lvm.volume_problems("n1", "vg", {"a": ("i", 130)}, {"a": [136, True, 4]})
    assert p.warning and "136 MiB" in p.message
    (p,) = lvm.volume_problems("n1", "vg", {"a": ("i", 130)}, {"a": [132, True, 0]})
    assert p.warning                           # extent unknown: the plain comparison
    assert lvm.size_matches(128, 128, 0) and lvm.size_matches(1, 32, 32)
    assert not lvm.size_matches(130, 128, 4) and not lvm.size_matches(130, 132, True)
