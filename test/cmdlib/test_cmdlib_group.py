"""Group LUs: verify disks (and the cluster-wide job fan-out) against a fake node RPC."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, errors, opcodes  # noqa: E402
from ganeti.objects import Disk, Instance, NodeGroup  # noqa: E402

MIB = 1024 * 1024
N1, N2, N3 = node_name(1), node_name(2), node_name(3)


def _add(cfg, name: str, node: int, *, disks: int = 1, up: bool = True,
         template: str = constants.DT_FILE, active: bool = False) -> None:
    objs = [Disk(dev_type=template, size=8, logical_id=["loop", f"/srv/{name}/d{i}"],
                 nodes=[f"uuid-node{node}"], iv_name=f"disk/{i}") for i in range(disks)]
    cfg.add_instance(Instance(name=name, primary_node=f"uuid-node{node}", os="tinyos",
                              disk_template=template, disks_active=active,
                              admin_state=constants.ADMINST_UP if up else constants.ADMINST_DOWN),
                     [] if template == constants.DT_DISKLESS else objs)


class Disks:
    """The node side of ``blockdev_getstatus``: per ``(node, path)`` a size and a state."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], tuple[int, bool]] = {}

    def put(self, node: str, name: str, idx: int = 0, *, size: int = 8 * MIB,
            active: bool = True) -> None:
        self.files[(node, f"/srv/{name}/d{idx}")] = (size, active)

    def __call__(self, node: str, args: list[Any]) -> list[Any]:
        (entries,) = args
        out = []
        for disk, _inst, _idx in entries:
            found = self.files.get((node, disk["logical_id"][1]))
            out.append(None if found is None else list(found))
        return out


def _setup(tmp_path, build, *, offline: tuple[int, ...] = ()):
    cfg = make_config(tmp_path, offline=offline)
    build(cfg)
    rpc = FakeRpc(cfg)
    disks = Disks()
    rpc.set_handler("blockdev_getstatus", disks)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc), disks


def _verify(ctx, group: str = "default") -> tuple[Any, list[str]]:
    result, msgs, _ = run_opcode(ctx, opcodes.OP_REGISTRY["OP_GROUP_VERIFY_DISKS"](
        group_name=group))
    return result, msgs


def test_healthy_group_gives_empty_result_and_asks_each_node_once(tmp_path) -> None:
    def build(cfg):
        _add(cfg, "a", 1, disks=2)
        _add(cfg, "b", 2)
        _add(cfg, "c", 2, template=constants.DT_DISKLESS)
    cfg, rpc, ctx, disks = _setup(tmp_path, build)
    disks.put(N1, "a", 0)
    disks.put(N1, "a", 1)
    disks.put(N2, "b")
    result, msgs = _verify(ctx)
    assert result == [{}, [], {}], msgs
    calls = rpc.calls_to("blockdev_getstatus")
    assert sorted(nodes[0] for nodes, _ in calls) == [N1, N2]       # node3 has no disks
    (entries,) = next(args for nodes, args in calls if nodes == [N1])
    assert [(e[1], e[2]) for e in entries] == [("a", 0), ("a", 1)]


def test_missing_and_inactive_disks_are_reported(tmp_path) -> None:
    def build(cfg):
        _add(cfg, "gone", 1, disks=2)
        _add(cfg, "idle", 2)
        _add(cfg, "stopped", 3, up=False)                  # inactive is fine: it is down
        _add(cfg, "stopped-active", 3, up=False, active=True)
    cfg, rpc, ctx, disks = _setup(tmp_path, build)
    disks.put(N1, "gone", 0)
    disks.put(N2, "idle", active=False)
    disks.put(N3, "stopped", active=False)
    disks.put(N3, "stopped-active", active=False)
    result, msgs = _verify(ctx)
    assert result == [{}, ["idle", "stopped-active"], {"gone": [[N1, 1]]}]
    assert any(f"Disk 1 of instance gone is missing on node {N1}" in m for m in msgs), msgs


def test_wrong_size_is_a_warning_not_a_missing_disk(tmp_path) -> None:
    cfg, rpc, ctx, disks = _setup(tmp_path, lambda cfg: _add(cfg, "small", 2))
    disks.put(N2, "small", size=MIB)
    result, msgs = _verify(ctx)
    assert result == [{}, [], {}]
    assert any("WARNING: Disk 0 of instance small on node node2.example.com has the wrong"
               " size: 1048576 bytes, expected 8 MiB (8388608 bytes)" in m for m in msgs), msgs


def test_failing_node_is_listed_and_offline_node_is_skipped(tmp_path) -> None:
    def build(cfg):
        _add(cfg, "a", 2)
        _add(cfg, "b", 3)
    cfg, rpc, ctx, disks = _setup(tmp_path, build, offline=(3,))
    rpc.set_failure("blockdev_getstatus", N2, "connection refused")
    result, msgs = _verify(ctx)
    assert result == [{N2: "connection refused"}, [], {}]
    assert N3 not in rpc.nodes_called("blockdev_getstatus")


def test_only_the_named_groups_instances_are_checked(tmp_path) -> None:
    def build(cfg):
        cfg.add_nodegroup(NodeGroup(name="other", uuid="group-other"))
        node3 = cfg.get_node_info("uuid-node3")
        node3.group = "group-other"
        cfg.update(node3)
        _add(cfg, "here", 1)
        _add(cfg, "there", 3)
    cfg, rpc, ctx, disks = _setup(tmp_path, build)
    result, _ = _verify(ctx, "other")
    assert result == [{}, [], {"there": [[N3, 0]]}]
    assert rpc.nodes_called("blockdev_getstatus") == {N3}
    with pytest.raises(errors.OpPrereqError, match="unknown"):
        _verify(ctx, "nosuchgroup")


def test_locks_are_shared(tmp_path) -> None:
    cfg, rpc, ctx, disks = _setup(tmp_path, lambda cfg: _add(cfg, "a", 1))
    from ganeti.cmdlib.group import LUGroupVerifyDisks
    lu = LUGroupVerifyDisks.__new__(LUGroupVerifyDisks)
    lu.cfg, lu.op = cfg, opcodes.OP_REGISTRY["OP_GROUP_VERIFY_DISKS"](group_name="default")
    lu.needed_locks, lu.share_locks = {}, {}
    lu.ExpandNames()
    assert set(lu.share_locks.values()) == {1} and set(lu.share_locks) == set(lu.needed_locks)


def test_cluster_verify_disks_submits_one_job_per_group(tmp_path) -> None:
    def build(cfg):
        cfg.add_nodegroup(NodeGroup(name="other", uuid="group-other"))
    cfg, rpc, ctx, disks = _setup(tmp_path, build)
    result, _, jobs = run_opcode(ctx, opcodes.OP_REGISTRY["OP_CLUSTER_VERIFY_DISKS"]())
    assert result == {"jobs": [[True, 100], [True, 101]]}
    assert [(j[0]["OP_ID"], j[0]["group_name"]) for j in jobs] == [
        ("OP_GROUP_VERIFY_DISKS", "default"), ("OP_GROUP_VERIFY_DISKS", "other")]
    result, _, jobs = run_opcode(ctx, opcodes.OP_REGISTRY["OP_CLUSTER_VERIFY_DISKS"](
        group_name="other"))
    assert [j[0]["group_name"] for j in jobs] == ["other"]
