"""``migrate --with-disks`` (ganeti/cmdlib/instance_mirror.py) against the fake node RPC:
the order of the node calls, the config switching over only after success,
and every failure leaving the instance where it was with the target's
files removed."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import constants, errors, opcodes
from ganeti.cmdlib import instance_mirror
from ganeti.mcpu import NullCallbacks, Processor
from test.cmdlib.test_cmdlib_instance import _create, _query, env  # noqa: F401  (env: a fixture)

MIRROR_CALLS = ("blockdev_create", "accept_instance", "instance_mirror_accept",
                "instance_mirror_start", "instance_mirror_status", "instance_migrate",
                "instance_mirror_finish", "instance_mirror_release",
                "instance_finalize_migration_dst", "instance_finalize_migration_src",
                "blockdev_remove")


class MirrorNodes:
    """The node side of a disk mirror, added to test_cmdlib_instance's FakeNodes."""

    def __init__(self, fake: Any) -> None:
        self.fake = fake
        self.statuses = [{"status": "active", "disks": [{"cur": 0, "end": 128 << 20}]},
                         {"status": "ready", "disks": [{"cur": 128 << 20, "end": 128 << 20}]}]
        self.finished: list[bool] = []
        for name in ("instance_mirror_accept", "instance_mirror_start",
                     "instance_mirror_status", "instance_mirror_finish",
                     "instance_mirror_release"):
            setattr(fake, "do_" + name, getattr(self, name))

    def instance_mirror_accept(self, node: str, inst: dict, address: str) -> dict:
        return {"host": address, "port": 10809, "exports": [{"device": "disk0", "size": 1}]}

    def instance_mirror_start(self, node: str, inst: dict, target: dict) -> list:
        assert target["host"] == "10.0.0.2"
        return ["disk0"]

    def instance_mirror_status(self, node: str, inst: dict) -> dict:
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def instance_mirror_finish(self, node: str, inst: dict, success: bool) -> None:
        self.finished.append(success)

    def instance_mirror_release(self, node: str, inst: dict) -> None:
        return None


@pytest.fixture
def kvm(env, monkeypatch):  # noqa: F811
    monkeypatch.setattr(instance_mirror, "POLL", 0.0)
    env.cfg.get_cluster_info().enabled_hypervisors = ["fake", "kvm"]
    env.rpc.do_hypervisor_validate_params = lambda node, hv, params: None
    mirror = MirrorNodes(env.rpc)
    _create(env, name="local", template="file", hypervisor="kvm")
    env.rpc.calls.clear()
    env.logs = []

    def run(op_id: str, **params: Any) -> Any:
        cbs = NullCallbacks()
        try:
            return Processor(env.ctx).execute_opcode(
                opcodes.from_dict({"OP_ID": op_id, **params}), cbs)
        finally:
            env.logs += [(op_id, kind, msg) for kind, msg in cbs.messages]
    env.run = run
    return env, mirror


def _disk(cl) -> Any:
    inst = cl.cfg.get_instance_info_by_name("local")
    return cl.cfg.get_instance_disks(inst.uuid)[0]


def _calls(cl) -> list[tuple[str, str]]:
    return [c for c in cl.rpc.calls if c[0] in MIRROR_CALLS]


def test_without_with_disks_the_refusal_names_it(kvm):
    cl, _ = kvm
    with pytest.raises(errors.OpPrereqError, match="--with-disks"):
        cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2")


def test_with_disks_copies_then_switches_over(kvm):
    cl, mirror = kvm
    uuid = _disk(cl).uuid
    cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2",
            with_disks=True)
    assert _query(cl, ["pnode", "status"]) == [["node2", "running"]]
    assert _disk(cl).nodes == ["uuid-node2"]
    assert uuid in cl.rpc.disks["node2"] and uuid not in cl.rpc.disks["node1"]
    assert mirror.finished == [True]
    calls = [c for c in _calls(cl) if c[0] != "instance_mirror_status"]
    assert calls == [
        ("blockdev_create", "node2"), ("accept_instance", "node2"),
        ("instance_mirror_accept", "node2"), ("instance_mirror_start", "node1"),
        ("instance_migrate", "node1"), ("instance_mirror_finish", "node1"),
        ("instance_mirror_release", "node2"), ("instance_finalize_migration_dst", "node2"),
        ("instance_finalize_migration_src", "node1"), ("blockdev_remove", "node1")]
    # typed progress entries: the copy's, then the memory's; one final entry each
    entries = [m for _, kind, m in cl.logs if kind == constants.ELOG_PROGRESS]
    ops = [e["op"] for e in entries]
    assert ops == sorted(ops, key=["mirror", "migration"].index) and "migration" in ops
    mirror_entries = [e for e in entries if e["op"] == "mirror"]
    assert [e["done"] for e in mirror_entries].count(True) == 1
    final = mirror_entries[-1]
    assert final["done"] and final["cur"] == 128 << 20 and not final["error"]
    # the memory moved only once the mirror was ready
    names = [c[0] for c in _calls(cl)]
    assert names.index("instance_migrate") > names.index("instance_mirror_status") + 1


@pytest.mark.parametrize("failing", ["accept_instance", "instance_mirror_accept",
                                     "instance_mirror_start", "instance_migrate",
                                     "instance_mirror_finish",
                                     "instance_finalize_migration_dst"])
def test_a_failure_leaves_the_instance_on_the_source(kvm, failing):
    cl, mirror = kvm
    uuid = _disk(cl).uuid
    before = cl.raw()
    cl.rpc.fail[failing] = f"{failing} broke"
    _target_paused(cl)
    with pytest.raises(errors.OpExecError, match=f"{failing} broke"):
        cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2",
                with_disks=True)
    assert cl.raw() == before                       # the config is unchanged
    assert uuid in cl.rpc.disks["node1"]
    assert uuid not in cl.rpc.disks["node2"]        # the target's files are removed
    names = [c for c in _calls(cl)]
    assert ("instance_finalize_migration_src", "node1") in names   # the source resumes
    assert ("instance_finalize_migration_dst", "node2") in names   # the target is dropped


def _target_paused(cl) -> None:
    """The fake migration leaves the guest paused on the target (as qemu does)."""
    real = cl.rpc.do_instance_migrate

    def migrate(node, inst, tnode, *rest):
        real(node, inst, tnode, *rest)
        cl.rpc.running[tnode][inst["name"]]["hv_state"] = "paused"
    cl.rpc.do_instance_migrate = migrate


def test_a_lost_resume_answer_with_the_guest_running_is_a_success(kvm):
    cl, _ = kvm
    cl.rpc.fail["instance_finalize_migration_dst"] = "timed out"
    cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2",
           with_disks=True)
    assert _query(cl, ["pnode"]) == [["node2"]]
    assert any("runs on node2 all the same" in str(m) for _, _, m in cl.logs)
    assert ("instance_finalize_migration_src", "node1") in _calls(cl)


def test_a_failed_mirror_is_reported_with_its_reason(kvm):
    cl, mirror = kvm
    mirror.statuses = [{"status": "failed", "info": "the mirror of disk0 failed: EIO"}]
    with pytest.raises(errors.OpExecError, match="EIO"):
        cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2",
                with_disks=True)
    assert mirror.finished == [False]                # cancelled on the source
    final = [m for _, kind, m in cl.logs if kind == constants.ELOG_PROGRESS][-1]
    assert final["done"] and "EIO" in final["error"]
    assert _query(cl, ["pnode"]) == [["node1"]]
    assert "instance_migrate" not in [c[0] for c in cl.rpc.calls]


def test_a_stalled_mirror_fails(kvm, monkeypatch):
    cl, mirror = kvm
    mirror.statuses = [{"status": "active", "disks": [{"cur": 5, "end": 10}]}]
    ticks = iter(range(0, 100000, 100))
    monkeypatch.setattr(instance_mirror.DiskCopy, "__init__", _with_clock(
        instance_mirror.DiskCopy.__init__, lambda: float(next(ticks))))
    with pytest.raises(errors.OpExecError, match="no progress"):
        cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2",
                with_disks=True)
    assert _query(cl, ["pnode"]) == [["node1"]]


def _with_clock(init, clock):
    def wrapped(self, *args, **kwargs):
        kwargs["clock"] = clock
        kwargs["sleep"] = lambda s: None
        init(self, *args, **kwargs)
    return wrapped


def test_a_stopped_instance_is_copied_offline(kvm):
    cl, _ = kvm
    cl.run("OP_INSTANCE_SHUTDOWN", instance_name="local")
    cl.rpc.calls.clear()
    cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2",
            with_disks=True)
    names = [c[0] for c in cl.rpc.calls]
    assert "blockdev_read_chunk" in names and "instance_mirror_start" not in names
    assert _disk(cl).nodes == ["uuid-node2"]
    assert _query(cl, ["pnode", "status"]) == [["node2", "ADMIN_down"]]


@pytest.mark.parametrize("params,match", [
    ({"cleanup": True}, "cannot be combined"),
], ids=["cleanup"])
def test_refused_combinations(kvm, params, match):
    cl, _ = kvm
    with pytest.raises(errors.OpPrereqError, match=match):
        cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2",
                with_disks=True, **params)


def test_shared_storage_and_other_hypervisors_are_refused(env):  # noqa: F811
    _create(env, name="shared", template="sharedfile")
    with pytest.raises(errors.OpPrereqError, match="without --with-disks"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2",
                with_disks=True)
    _create(env, name="fakefile", template="file")
    assert env.cfg.get_instance_info_by_name("fakefile").hypervisor == constants.HT_FAKE
    with pytest.raises(errors.OpPrereqError, match="Hypervisor fake cannot"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="fakefile", target_node="node2",
                with_disks=True)


@pytest.mark.parametrize("src,dst,plan", [
    ("migrating", "paused", "source"),      # memory arrived, disks maybe not: the source
    (None, "paused", "leftover"),
    ("crashed", "paused", "leftover"),
    ("migrating", "running", "target"),     # resumed: the copies had completed
    ("running", None, "nothing"),
    ("running", "incoming", "source"),
], ids=["paused-target-loses", "no-source", "crashed-source", "running-target",
        "nothing", "incoming"])
def test_local_disks_cleanup_plan(src, dst, plan):
    from ganeti.cmdlib import instance_migration as im
    assert im.local_disks_cleanup_plan(src, dst) == plan


def _state(cl, node: str, hv_state: str | None) -> None:
    if hv_state is None:
        cl.rpc.running[node].pop("local", None)
    else:
        cl.rpc.running[node]["local"] = {"memory": 128, "vcpus": 1, "state": 0, "time": 1,
                                         "hv_state": hv_state}


def test_cleanup_keeps_the_source_when_the_target_is_only_paused(kvm):
    cl, mirror = kvm
    uuid = _disk(cl).uuid
    cl.rpc.disks["node2"].add(uuid)                  # a (maybe partial) copy on the target
    _state(cl, "node1", "migrating")
    _state(cl, "node2", "paused")
    cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2", cleanup=True)
    assert _query(cl, ["pnode"]) == [["node1"]]
    assert mirror.finished == [False]                # the source's mirrors are cancelled
    assert uuid in cl.rpc.disks["node1"] and uuid not in cl.rpc.disks["node2"]


def test_cleanup_switches_to_a_running_target_and_removes_the_old_disks(kvm):
    cl, _ = kvm
    uuid = _disk(cl).uuid
    cl.rpc.disks["node2"].add(uuid)
    _state(cl, "node1", "migrating")
    _state(cl, "node2", "running")
    cl.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2", cleanup=True)
    assert _query(cl, ["pnode"]) == [["node2"]] and _disk(cl).nodes == ["uuid-node2"]
    assert uuid in cl.rpc.disks["node2"] and uuid not in cl.rpc.disks["node1"]
