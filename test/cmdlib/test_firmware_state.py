"""The master moving a kvm instance's UEFI NVRAM and TPM state (ganeti/cmdlib/firmware_state.py).

A minimal LU stand-in (config, FakeRpc, warnings) and real node-side
functions behind the FakeRpc handlers, on two temporary node roots; then
the LUs on the simulated nodes of test_cmdlib_instance (where the copy
happens in failover, migration and remove).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from fakes.fakerpc import FakeRpc
from ganeti import constants, errors, pathutils
from ganeti.backend import firmware as bfirmware
from ganeti.backend.context import NodeContext
from ganeti.cmdlib import firmware_state
from ganeti.objects import Cluster, Instance
from test.cmdlib.test_cmdlib_instance import _create, _query, env  # noqa: F401  (env: a fixture)

UUID = "8d7c1e52-41b6-4c59-9f0e-1f2a3b4c5d6e"


class _Cfg:
    def __init__(self) -> None:
        self.cluster = Cluster(enabled_hypervisors=[constants.HT_KVM])

    def get_cluster_info(self) -> Cluster:
        return self.cluster


class _LU:
    def __init__(self, rpc: FakeRpc) -> None:
        self.cfg = _Cfg()
        self.rpc = rpc
        self.warnings: list[str] = []

    def require_rpc(self) -> FakeRpc:
        return self.rpc

    def LogWarning(self, message: str) -> None:  # noqa: N802 (Ganeti's name)
        self.warnings.append(message)


def _inst(**hvp: Any) -> Instance:
    return Instance(name="u1.example.com", uuid=UUID, hypervisor=constants.HT_KVM,
                    os="tinylinux", hvparams=hvp)


@pytest.fixture
def nodes(tmp_path) -> dict[str, NodeContext]:
    return {n: NodeContext(paths=pathutils.Paths(str(tmp_path / n)), hostname=n)
            for n in ("node1", "node2")}


@pytest.fixture
def lu(nodes) -> _LU:
    rpc = FakeRpc()
    rpc.set_handler("instance_firmware_get",
                    lambda node, args: bfirmware.instance_firmware_get(nodes[node], *args))
    rpc.set_handler("instance_firmware_put",
                    lambda node, args: bfirmware.instance_firmware_put(nodes[node], *args))
    rpc.set_handler("instance_firmware_remove",
                    lambda node, args: bfirmware.instance_firmware_remove(nodes[node], *args))
    return _LU(rpc)


def _nvram(ctx: NodeContext) -> str:
    return os.path.join(ctx.paths.kvm_firmware_dir, UUID, "OVMF_VARS.fd")


def test_needs_come_from_the_filled_hvparams():
    assert firmware_state.kvm_firmware_needs({"firmware": "uefi", "tpm": "tpm2"}) == \
        ["uefi", "tpm2"]
    assert firmware_state.kvm_firmware_needs({"firmware": "bios", "tpm": "none"}) == []


def test_carry_copies_the_state_to_the_target(lu, nodes):
    os.makedirs(os.path.dirname(_nvram(nodes["node1"])))
    with open(_nvram(nodes["node1"]), "wb") as fh:
        fh.write(b"vars of node1")
    seen: list[str] = []
    firmware_state.carry(lu, _inst(firmware="uefi"), "node1", "node2", seen.append)
    with open(_nvram(nodes["node2"]), "rb") as fh:
        assert fh.read() == b"vars of node1"
    assert seen and "UEFI/TPM state" in seen[0] and not lu.warnings
    firmware_state.remove(lu, _inst(firmware="uefi"), ["node1", "node2"])
    assert not os.path.exists(_nvram(nodes["node1"])) and not os.path.exists(_nvram(nodes["node2"]))


def test_nothing_is_sent_for_bios_or_when_the_source_has_none(lu):
    firmware_state.carry(lu, _inst(), "node1", "node2", lambda m: None)
    assert lu.rpc.calls == []
    firmware_state.carry(lu, _inst(tpm="tpm2"), "node1", "node2", lambda m: None)
    assert [c[0] for c in lu.rpc.calls] == ["instance_firmware_get"]


def test_a_failure_warns_or_fails_a_migration(lu):
    lu.rpc.set_failure("instance_firmware_get", "node1", "node down")
    firmware_state.carry(lu, _inst(firmware="uefi"), "node1", "node2", lambda m: None)
    assert lu.warnings and "node down" in lu.warnings[0]
    with pytest.raises(errors.OpExecError, match="node down"):
        firmware_state.carry(lu, _inst(firmware="uefi"), "node1", "node2", lambda m: None,
                             required=True)


def test_settle_drops_the_other_copy_only_when_the_keeping_node_has_one(lu, nodes):
    for node in ("node1", "node2"):
        os.makedirs(os.path.dirname(_nvram(nodes[node])))
        with open(_nvram(nodes[node]), "wb") as fh:
            fh.write(f"vars of {node}".encode())
    firmware_state.settle(lu, _inst(firmware="uefi"), "node2", "node1")
    assert not os.path.exists(_nvram(nodes["node1"])) and not lu.warnings
    with open(_nvram(nodes["node2"]), "rb") as fh:
        assert fh.read() == b"vars of node2"
    # node1 keeps it now but has none: node2's may be the only copy, it stays
    firmware_state.settle(lu, _inst(firmware="uefi"), "node1", "node2")
    assert os.path.exists(_nvram(nodes["node2"]))
    assert lu.warnings and "no UEFI/TPM state" in lu.warnings[0]
    # a keeping node that does not answer: nothing is removed either
    lu.rpc.set_failure("instance_firmware_get", "node1", "node down")
    firmware_state.settle(lu, _inst(firmware="uefi"), "node1", "node2")
    assert os.path.exists(_nvram(nodes["node2"])) and "node down" in lu.warnings[-1]
    lu.rpc.calls.clear()
    firmware_state.settle(lu, _inst(), "node1", "node2")
    assert lu.rpc.calls == []


def test_settle_without_state_on_either_node_says_nothing(lu, nodes):
    firmware_state.settle(lu, _inst(tpm="tpm2"), "node1", "node2")
    assert not lu.warnings


def test_orphans_are_states_of_no_instance_placed_on_the_node():
    insts = {"u-a": Instance(name="a", uuid="u-a"), "u-b": Instance(name="b", uuid="u-b")}
    placed = {"u-a": ["n1", "n2"], "u-b": ["n3"]}    # a: primary n1, secondary n2
    keys = ["u-a", "u-b", "u-gone", "b"]              # "b": keyed by name (no UUID then)
    assert firmware_state.orphans(keys, "n1", insts, placed) == [
        ("u-b", "instance b is not on this node"), ("u-gone", "no such instance"),
        ("b", "instance b is not on this node")]
    assert firmware_state.orphans(["u-a"], "n2", insts, placed) == []
    assert firmware_state.orphans(["u-b", "b"], "n3", insts, placed) == []


# --- the LUs: where the copy happens (the simulated nodes of test_cmdlib_instance) ----


@pytest.fixture
def uefi_env(env):  # noqa: F811  (the imported fixture)
    env.cfg.get_cluster_info().enabled_hypervisors = ["fake", "kvm"]
    env.rpc.do_hypervisor_validate_params = lambda node, hv, params: None
    held = {"node1": "STATE-OF-NODE1"}
    env.rpc.do_instance_firmware_get = lambda node, uuid: held.get(node)
    env.rpc.do_instance_firmware_put = lambda node, uuid, data: held.__setitem__(node, data)
    env.rpc.do_instance_firmware_remove = lambda node, uuid: held.pop(node, None)
    _create(env, name="u1", template="sharedfile", hypervisor="kvm",
            hvparams={"firmware": "uefi"})
    env.rpc.calls.clear()
    env.held = held
    return env


def _order(cluster, procs) -> list[tuple[str, str]]:
    return [c for c in cluster.rpc.calls if c[0] in procs]


def test_failover_copies_the_state_before_starting_on_the_target(uefi_env):
    uefi_env.run("OP_INSTANCE_FAILOVER", instance_name="u1", target_node="node2")
    assert _order(uefi_env, {"instance_shutdown", "instance_firmware_get",
                             "instance_firmware_put", "instance_start"}) == [
        ("instance_shutdown", "node1"), ("instance_firmware_get", "node1"),
        ("instance_firmware_put", "node2"), ("instance_start", "node2")]
    assert uefi_env.held["node2"] == "STATE-OF-NODE1"


def test_migration_copies_the_state_before_the_target_accepts(uefi_env):
    uefi_env.run("OP_INSTANCE_MIGRATE", instance_name="u1", target_node="node2")
    assert _order(uefi_env, {"instance_firmware_get", "instance_firmware_put",
                             "accept_instance"}) == [
        ("instance_firmware_get", "node1"), ("instance_firmware_put", "node2"),
        ("accept_instance", "node2")]
    assert _query(uefi_env, ["pnode"]) == [["node2"]]


def test_a_failed_copy_fails_the_migration_and_the_guest_stays(uefi_env):
    uefi_env.rpc.fail["instance_firmware_put"] = "disk full"
    with pytest.raises(errors.OpExecError, match="disk full"):
        uefi_env.run("OP_INSTANCE_MIGRATE", instance_name="u1", target_node="node2")
    assert ("accept_instance", "node2") not in uefi_env.rpc.calls
    assert _query(uefi_env, ["pnode"]) == [["node1"]]
    assert uefi_env.held == {"node1": "STATE-OF-NODE1"}


def test_remove_removes_the_state_from_every_node(uefi_env):
    uefi_env.held["node3"] = "STALE"     # left there while node3 did not answer
    uefi_env.run("OP_INSTANCE_REMOVE", instance_name="u1")
    assert uefi_env.held == {}
    assert {n for p, n in uefi_env.rpc.calls if p == "instance_firmware_remove"} == \
        {"node1", "node2", "node3"}


@pytest.mark.parametrize("op_id", ["OP_INSTANCE_FAILOVER", "OP_INSTANCE_MIGRATE",
                                   "OP_INSTANCE_MOVE"])
def test_the_node_left_loses_its_copy_once_the_instance_runs_elsewhere(uefi_env, op_id):
    uefi_env.run(op_id, instance_name="u1", target_node="node2")
    assert _query(uefi_env, ["pnode", "status"]) == [["node2", "running"]]
    assert uefi_env.held == {"node2": "STATE-OF-NODE1"}
    started = uefi_env.rpc.calls.index(("instance_start", "node2")) \
        if op_id != "OP_INSTANCE_MIGRATE" else uefi_env.rpc.calls.index(
            ("instance_finalize_migration_src", "node1"))
    assert uefi_env.rpc.calls.index(("instance_firmware_remove", "node1")) > started


def test_a_stopped_instance_failed_over_leaves_no_copy_behind(uefi_env):
    uefi_env.run("OP_INSTANCE_SHUTDOWN", instance_name="u1")
    uefi_env.run("OP_INSTANCE_MIGRATE", instance_name="u1", target_node="node2",
                 allow_failover=True)
    assert uefi_env.held == {"node2": "STATE-OF-NODE1"}


def test_a_failover_whose_copy_failed_keeps_the_only_copy(uefi_env):
    uefi_env.rpc.fail["instance_firmware_put"] = "disk full"
    uefi_env.run("OP_INSTANCE_FAILOVER", instance_name="u1", target_node="node2")
    assert _query(uefi_env, ["pnode"]) == [["node2"]]
    assert uefi_env.held == {"node1": "STATE-OF-NODE1"}
    assert ("instance_firmware_remove", "node1") not in uefi_env.rpc.calls


def test_a_failed_start_on_the_target_keeps_the_source_copy(uefi_env):
    uefi_env.rpc.fail["instance_start"] = "no memory"
    with pytest.raises(errors.OpExecError, match="no memory"):
        uefi_env.run("OP_INSTANCE_FAILOVER", instance_name="u1", target_node="node2")
    assert uefi_env.held == {"node1": "STATE-OF-NODE1", "node2": "STATE-OF-NODE1"}


def test_a_move_whose_copy_fails_fails_and_the_source_keeps_its_copy(uefi_env):
    uefi_env.rpc.fail["instance_firmware_put"] = "disk full"
    with pytest.raises(errors.OpExecError, match="disk full"):
        uefi_env.run("OP_INSTANCE_MOVE", instance_name="u1", target_node="node2")
    assert _query(uefi_env, ["pnode"]) == [["node1"]]
    assert uefi_env.held == {"node1": "STATE-OF-NODE1"}
    assert ("instance_start", "node2") not in uefi_env.rpc.calls
    assert ("instance_firmware_remove", "node1") not in uefi_env.rpc.calls


def test_export_carries_the_state_and_import_restores_it(uefi_env):
    rpc = uefi_env.rpc
    uefi_env.cfg.get_cluster_info().enabled_disk_templates.append("diskless")
    _create(uefi_env, name="u2", template="diskless", hypervisor="kvm",
            hvparams={"firmware": "uefi", "tpm": "tpm2"})
    uuid2 = uefi_env.cfg.get_instance_info_by_name("u2").uuid
    rpc.do_instance_firmware_get = lambda node, uuid: "U1U2" if uuid == uuid2 else None
    written: dict[str, str] = {}
    rpc.do_export_stage = lambda node, name, create: None
    rpc.do_finalize_export = lambda node, name, config: written.setdefault(name, config) and \
        f"/export/{name}"
    rpc.do_export_list = lambda node: ["u2"] if written else []
    rpc.do_export_remove = lambda node, name: None
    rpc.do_export_info = lambda node, path: written["u2"]
    uefi_env.run("OP_BACKUP_EXPORT", instance_name="u2", target_node="node2", mode="local",
                 shutdown=False)
    assert "firmware_state = U1U2" in written["u2"].splitlines()
    put: list = []
    rpc.do_instance_firmware_put = lambda node, uuid, data: put.append((node, uuid, data))
    uefi_env.run("OP_INSTANCE_CREATE", instance_name="u3", mode="import", src_node="node2",
                 src_path="u2", disk_template="diskless", pnode="node1", nics=[{}],
                 name_check=False, ip_check=False, disks=[])
    uuid3 = uefi_env.cfg.get_instance_info_by_name("u3").uuid
    assert put == [("node1", uuid3, "U1U2")]
    calls = [c for c in rpc.calls if c[0] in ("instance_firmware_put", "instance_start")]
    assert calls[-2:] == [("instance_firmware_put", "node1"), ("instance_start", "node1")]


@pytest.mark.parametrize("running", [True, False])
def test_a_migration_with_disks_leaves_no_copy_on_the_source(uefi_env, monkeypatch, running):
    from ganeti.cmdlib import instance_mirror
    from test.cmdlib.test_cmdlib_instance_mirror import MirrorNodes
    monkeypatch.setattr(instance_mirror, "POLL", 0.0)
    MirrorNodes(uefi_env.rpc)
    _create(uefi_env, name="local", template="file", hypervisor="kvm",
            hvparams={"tpm": "tpm2"})
    uuid = uefi_env.cfg.get_instance_info_by_name("local").uuid
    held = {"node1": "LOCAL-STATE"}
    uefi_env.rpc.do_instance_firmware_get = \
        lambda node, u: held.get(node) if u == uuid else uefi_env.held.get(node)
    uefi_env.rpc.do_instance_firmware_put = lambda node, u, data: held.__setitem__(node, data)
    uefi_env.rpc.do_instance_firmware_remove = lambda node, u: held.pop(node, None)
    if not running:
        uefi_env.run("OP_INSTANCE_SHUTDOWN", instance_name="local")
    uefi_env.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2",
                 with_disks=True)
    assert _query(uefi_env, ["pnode"], ["=", "name", "local"]) == [["node2"]]
    assert held == {"node2": "LOCAL-STATE"}
