"""Instance policy in the LUs: create, modify, moves, group and cluster changes, verify."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, errors, ipolicy, locking, opcodes  # noqa: E402
from ganeti.cmdlib import query as cquery  # noqa: E402
from ganeti.objects import NIC, Disk, Instance, NodeGroup  # noqa: E402

N1, N2, N3 = node_name(1), node_name(2), node_name(3)


def _small_bounds(memory_max: int = 256) -> list[dict[str, Any]]:
    low = {**ipolicy.default_min_spec(), "disk-size": 1}
    high = {**ipolicy.default_max_spec(), "memory-size": memory_max}
    return [{"min": low, "max": high}]


@pytest.fixture
def env(tmp_path):
    """3 nodes; node3 is in group 'small' (memory-size at most 256)."""
    cfg = make_config(tmp_path)
    cluster = cfg.get_cluster_info()
    cluster.enabled_disk_templates = ["diskless", "file", "sharedfile"]
    cluster.ipolicy = ipolicy.default_ipolicy(cluster.enabled_disk_templates)
    cluster.ipolicy["minmax"][0]["min"]["disk-size"] = 1
    cfg.update(cluster)
    cfg.add_nodegroup(NodeGroup(name="small", uuid="group-small",
                                ipolicy={"minmax": _small_bounds()}))
    node3 = cfg.get_node_info("uuid-node3")
    node3.group = "group-small"
    cfg.update(node3)
    rpc = FakeRpc(cfg)
    return cfg, make_cluster_context(tmp_path, cfg, rpc)


def _add(env, name: str, *, node: int = 1, maxmem: int = 512, nics: int = 1,
         template: str = constants.DT_DISKLESS) -> None:
    cfg, ctx = env
    disks = [] if template == constants.DT_DISKLESS else [
        Disk(dev_type=template, size=8, nodes=[f"uuid-node{node}"], iv_name="disk/0",
             logical_id=["loop", f"/srv/{name}/d0"])]
    cfg.add_instance(Instance(name=name, primary_node=f"uuid-node{node}", os="tinyos",
                              disk_template=template, admin_state=constants.ADMINST_DOWN,
                              beparams={"maxmem": maxmem, "minmem": maxmem},
                              nics=[NIC(mac=f"aa:00:00:00:0{node}:0{i}") for i in range(nics)]),
                     disks)
    ctx.glm.add(locking.LEVEL_INSTANCE, [name])


def _create(ctx, **kw: Any):
    params = {"instance_name": "web1", "disk_template": "diskless", "disks": [],
              "nics": [{}], "pnode": N1, "name_check": False, "ip_check": False,
              "no_install": True, "start": False, **kw}
    return run_opcode(ctx, opcodes.from_dict({"OP_ID": "OP_INSTANCE_CREATE", **params}))


# --- create -----------------------------------------------------------------------------

@pytest.mark.parametrize("kw,message", [
    ({"nics": []}, "nic-count value 0 is not in range [1, 8]"),
    ({"beparams": {"maxmem": 64, "minmem": 64}}, "memory-size value 64 is not in range"
                                                 " [128, 32768]"),
    ({"beparams": {"vcpus": 9}}, "cpu-count value 9 is not in range [1, 8]"),
    ({"pnode": N3, "beparams": {"maxmem": 512}}, "memory-size value 512 is not in range"
                                                 " [128, 256]"),
], ids=["no-nic", "memory", "vcpus", "group-policy"])
def test_create_outside_policy_is_refused(env, kw, message) -> None:
    cfg, ctx = env
    with pytest.raises(errors.OpPrereqError) as exc:
        _create(ctx, **kw)
    assert message in str(exc.value) and "violates policy" in str(exc.value)
    assert exc.value.ecode == errors.ECODE_INVAL
    assert cfg.get_instance_info_by_name("web1") is None


def test_create_disk_template_outside_group_policy(env) -> None:
    cfg, ctx = env
    group = cfg.get_nodegroup("group-small")
    group.ipolicy["disk-templates"] = ["file"]
    cfg.update(group)
    with pytest.raises(errors.OpPrereqError, match="Disk template diskless is not allowed"):
        _create(ctx, pnode=N3, beparams={"maxmem": 128})


def test_create_with_ignore_ipolicy_warns(env) -> None:
    cfg, ctx = env
    _, msgs, _ = _create(ctx, nics=[], ignore_ipolicy=True)
    assert cfg.get_instance_info_by_name("web1") is not None
    assert any("Instance policy ignored: nic-count value 0" in m for m in msgs)


# --- modify -----------------------------------------------------------------------------

def test_modify_memory_outside_policy(env) -> None:
    cfg, ctx = env
    _add(env, "web1", node=3, maxmem=256)
    op = {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1",
          "beparams": {"maxmem": 1024}}
    with pytest.raises(errors.OpPrereqError, match=r"memory-size value 1024 is not in range"
                                                   r" \[128, 256\]"):
        run_opcode(ctx, opcodes.from_dict(op))
    assert cfg.get_instance_info_by_name("web1").beparams["maxmem"] == 256
    run_opcode(ctx, opcodes.from_dict({**op, "ignore_ipolicy": True}))
    assert cfg.get_instance_info_by_name("web1").beparams["maxmem"] == 1024


def test_modify_minmem_is_checked_too(env) -> None:
    cfg, ctx = env
    _add(env, "web1", maxmem=256)
    with pytest.raises(errors.OpPrereqError, match="memory-size value 64"):
        run_opcode(ctx, opcodes.from_dict({"OP_ID": "OP_INSTANCE_SET_PARAMS",
                                           "instance_name": "web1",
                                           "beparams": {"minmem": 64}}))


def test_modify_removing_the_last_nic_is_refused(env) -> None:
    cfg, ctx = env
    _add(env, "web1")
    with pytest.raises(errors.OpPrereqError, match="nic-count value 0"):
        run_opcode(ctx, opcodes.from_dict({"OP_ID": "OP_INSTANCE_SET_PARAMS",
                                           "instance_name": "web1",
                                           "nics": [["remove", -1, {}]]}))
    assert len(cfg.get_instance_info_by_name("web1").nics) == 1


# --- moves to another group -------------------------------------------------------------

def test_failover_into_a_stricter_group_is_refused(env) -> None:
    cfg, ctx = env
    _add(env, "web1", maxmem=512)
    op = {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web1", "target_node": N3}
    with pytest.raises(errors.OpPrereqError) as exc:
        run_opcode(ctx, opcodes.from_dict(op))
    assert ("Instance web1 does not meet target node group's (small) instance policy:"
            " memory-size value 512 is not in range [128, 256]") in str(exc.value)
    assert cfg.get_instance_info_by_name("web1").primary_node == "uuid-node1"
    _, msgs, _ = run_opcode(ctx, opcodes.from_dict({**op, "ignore_ipolicy": True}))
    assert any("does not meet target node group's (small)" in m for m in msgs)
    assert cfg.get_instance_info_by_name("web1").primary_node == "uuid-node3"


def test_move_inside_the_group_is_not_checked(env) -> None:
    cfg, ctx = env
    _add(env, "web1", nics=0)   # breaks the policy already; the move is still allowed
    run_opcode(ctx, opcodes.from_dict({"OP_ID": "OP_INSTANCE_FAILOVER",
                                       "instance_name": "web1", "target_node": N2}))
    assert cfg.get_instance_info_by_name("web1").primary_node == "uuid-node2"


# --- group and cluster policy changes ---------------------------------------------------

def _set_group(ctx, **kw: Any):
    return run_opcode(ctx, opcodes.from_dict({"OP_ID": "OP_GROUP_SET_PARAMS",
                                              "group_name": "small", **kw}))


def test_group_set_params_changes_everything_asked(env) -> None:
    cfg, ctx = env
    result, _, _ = _set_group(ctx, alloc_policy="last_resort", ndparams={"ssh_port": "2222"},
                              diskparams={"file": {}}, ipolicy={"vcpu-ratio": "2",
                                                                "disk-templates": ["file"]})
    group = cfg.get_nodegroup("group-small")
    assert group.alloc_policy == "last_resort" and group.ndparams == {"ssh_port": 2222}
    assert group.ipolicy == {"minmax": _small_bounds(), "vcpu-ratio": 2.0,
                             "disk-templates": ["file"]}
    assert [name for name, _ in result] == ["alloc_policy", "ndparams", "diskparams", "ipolicy"]
    _set_group(ctx, ipolicy={"minmax": "default", "vcpu-ratio": "default"})
    assert cfg.get_nodegroup("group-small").ipolicy == {"disk-templates": ["file"]}


@pytest.mark.parametrize("kw,needle", [
    ({"ipolicy": {"std": {"memory-size": 128}}}, "'std' cannot be set in a group"),
    ({"ipolicy": {"minmax": [{"min": {"memory-size": 1}, "max": {}}]}},
     "missing instance specs"),
    ({"ipolicy": {"vcpu-ratio": "-1"}}, "'vcpu-ratio' must be a positive number"),
    ({"ipolicy": {"disk-templates": ["plain"]}}, "not enabled on the cluster: plain"),
    ({"alloc_policy": "sometimes"}, "sometimes"),
    ({}, "at least one modification"),
], ids=["std", "incomplete-bounds", "ratio", "not-enabled", "alloc-policy", "nothing"])
def test_group_set_params_refuses(env, kw, needle) -> None:
    cfg, ctx = env
    before = cfg.get_serial_no()
    with pytest.raises(errors.OpPrereqError, match=needle):
        _set_group(ctx, **kw)
    assert cfg.get_serial_no() == before


def test_group_policy_change_warns_about_instances(env) -> None:
    cfg, ctx = env
    _add(env, "web1", node=3, maxmem=256)
    _, msgs, _ = _set_group(ctx, ipolicy={"minmax": _small_bounds(memory_max=128)})
    assert any("the following instances violate it: web1" in m for m in msgs)
    assert cfg.get_nodegroup("group-small").ipolicy["minmax"] == _small_bounds(128)


def test_group_add_checks_its_policy(env) -> None:
    cfg, ctx = env
    op = {"OP_ID": "OP_GROUP_ADD", "group_name": "big", "ipolicy": {"vcpu-ratio": "8"}}
    run_opcode(ctx, opcodes.from_dict(op))
    assert cfg.get_nodegroup_by_name("big").ipolicy == {"vcpu-ratio": 8.0}
    with pytest.raises(errors.OpPrereqError, match="unknown key"):
        run_opcode(ctx, opcodes.from_dict({**op, "group_name": "bad", "ipolicy": {"x": 1}}))
    assert cfg.get_nodegroup_by_name("bad") is None


def test_cluster_policy_change(env) -> None:
    cfg, ctx = env
    _add(env, "web1", maxmem=512)
    op = {"OP_ID": "OP_CLUSTER_SET_PARAMS"}
    bounds = _small_bounds(memory_max=384)
    _, msgs, _ = run_opcode(ctx, opcodes.from_dict({**op, "ipolicy": {
        "minmax": bounds, "std": {"memory-size": "256"}, "spindle-ratio": 16}}))
    pol = cfg.get_cluster_info().ipolicy
    assert pol["minmax"] == bounds and pol["std"]["memory-size"] == 256
    assert pol["spindle-ratio"] == 16.0
    assert any("the following instances violate it: web1" in m for m in msgs)
    for bad, needle in (({"vcpu-ratio": "default"}, "cannot unset"),
                        ({"std": {"memory-size": 4096}}, "std specs"),
                        ({"disk-templates": ["plain"]}, "not enabled on the cluster")):
        with pytest.raises(errors.OpPrereqError, match=needle):
            run_opcode(ctx, opcodes.from_dict({**op, "ipolicy": bad}))
    assert cfg.get_cluster_info().ipolicy == pol


def test_group_query_fields_merged_and_custom(env) -> None:
    cfg, ctx = env
    res = cquery.run_query(ctx, "group", ["name", "ipolicy", "custom_ipolicy"],
                           ["=", "name", "small"])
    (row,) = res["data"]
    merged, custom = row[1][1], row[2][1]
    assert custom == {"minmax": _small_bounds()}
    assert merged == ipolicy.fill_ipolicy(cfg.get_cluster_info().ipolicy, custom)


# --- verify -----------------------------------------------------------------------------

def test_verify_warns_about_violating_instances(env) -> None:
    cfg, ctx = env
    _add(env, "web1", nics=0)
    _add(env, "web2", node=2)
    ctx.rpc = None
    result, msgs, _ = run_opcode(ctx, opcodes.from_dict({
        "OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "default", "error_codes": True}))
    lines = [m for m in msgs if "EINSTANCEPOLICY" in m]
    assert lines == ["  - WARNING:EINSTANCEPOLICY:instance:web1:nic-count value 0 is not in"
                     " range [1, 8]"]
