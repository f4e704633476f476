"""Instance communication (doc/networks.md, "Instance communication"): the pure
helpers, then cluster modify, group add, instance create and modify against a
real configuration and processor (the follow-up jobs run here by hand)."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import make_cluster_context, make_config, run_opcode  # noqa: E402

from ganeti import constants, errors, opcodes  # noqa: E402
from ganeti.cmdlib import instance_communication as comm  # noqa: E402
from ganeti.objects import NIC, Instance, Network, NodeGroup  # noqa: E402
from ganeti.opcodes.cluster import OpClusterSetParams  # noqa: E402
from ganeti.opcodes.group import OpGroupAdd  # noqa: E402
from ganeti.opcodes.instance import OpInstanceCreate, OpInstanceSetParams  # noqa: E402
from ganeti.opcodes.network import OpNetworkAdd  # noqa: E402

NET = "mynetwork"
PREFIX = constants.INSTANCE_COMMUNICATION_NIC_PREFIX


# --- pure helpers ---------------------------------------------------------------------

def _standard(name: str = NET) -> Network:
    return Network(name=name, network="169.254.0.0/16", network6="fe80::/10",
                   mac_prefix="52:54:00")


def test_the_nic_name_is_ganetis() -> None:
    assert comm.nic_name("web1.example.com") == "ganeti:communication:web1.example.com"
    assert comm.is_communication_nic("ganeti:communication:x")
    assert not comm.is_communication_nic("eth0") and not comm.is_communication_nic(None)


def test_a_standard_network_gets_no_warning_others_one_per_setting() -> None:
    assert comm.network_warnings(_standard()) == []
    odd = Network(name="odd", network="10.0.0.0/24", gateway="10.0.0.1", mac_prefix=None)
    warnings = comm.network_warnings(odd)
    assert [w.split("' ", 1)[1].split(" '")[0] for w in warnings] == [
        "has an IPv4 gateway", "has a non-standard IPv4 network address",
        "has a non-standard IPv6 network address", "has a non-standard MAC prefix"]
    assert all("might pose a security risk" in w for w in warnings)


def test_a_missing_network_is_added_then_connected_to_every_group() -> None:
    groups = [NodeGroup(name="default", uuid="g1"), NodeGroup(name="a", uuid="g2")]
    ops = comm.ensure_network_ops(NET, None, groups)
    add, *connects = ops
    assert isinstance(add, OpNetworkAdd)
    assert (add.network, add.gateway, add.network6, add.gateway6, add.mac_prefix) == (
        "169.254.0.0/16", None, "fe80::/10", None, "52:54:00")
    assert [(c.group_name, c.network_mode, c.network_link, c.network_vlan)
            for c in connects] == [("g2", "routed", "communication_rt", ""),
                                   ("g1", "routed", "communication_rt", "")]


def test_an_existing_network_is_connected_where_it_is_not() -> None:
    net = _standard()
    groups = [NodeGroup(name="default", uuid="g1", networks={net.uuid: {}}),
              NodeGroup(name="new", uuid="g2")]
    assert [op.group_name for op in comm.ensure_network_ops(NET, net, groups)] == ["g2"]
    groups[1].networks = {net.uuid: {}}
    assert comm.ensure_network_ops(NET, net, groups) == []
    assert comm.one_job([]) == []


@pytest.mark.parametrize("old,new,exists,expected", [
    ("n", "n", True, ["already is 'n', nothing to do"]),
    ("", "n", False, ["Changing instance communication network to 'n'"]),
    ("o", "n", True, ["Previous instance communication network 'o' should be removed",
                      "Changing instance communication network to 'n'"]),
    ("o", "", False, ["Disabling instance communication network"]),
], ids=["same", "first", "replaced", "disabled"])
def test_change_messages_are_ganetis(old, new, exists, expected) -> None:
    messages = comm.change_messages(old, new, exists)
    assert len(messages) == len(expected)
    assert all(part in message for part, message in zip(expected, messages))


def test_the_creation_nic_is_added_once_and_needs_a_network() -> None:
    nics = comm.create_nics([{}], "i1", NET)
    assert nics == [{}, {"name": PREFIX + "i1", "mac": "generate", "ip": "pool",
                         "network": NET}]
    assert comm.create_nics(nics, "i1", NET) == nics
    with pytest.raises(errors.OpPrereqError, match="--instance-communication-network"):
        comm.create_nics([], "i1", "")


def test_the_modification_adds_or_removes_the_nic_by_name() -> None:
    inst = Instance(name="i1", nics=[NIC(mac="aa:00:00:00:00:01")])
    assert comm.nic_change(inst, False, NET) is None
    assert comm.nic_change(inst, True, NET) == (
        "add", -1, {"name": PREFIX + "i1", "mac": "generate", "ip": "pool", "network": NET})
    inst.nics.append(NIC(mac="52:54:00:00:00:01", name=PREFIX + "i1"))
    assert comm.nic_change(inst, True, "") is None
    assert comm.nic_change(inst, False, "") == ("remove", PREFIX + "i1", {})
    with pytest.raises(errors.OpPrereqError, match="instance communication network"):
        comm.nic_change(Instance(name="i2"), True, "")


# --- through the logical units --------------------------------------------------------

@pytest.fixture
def ctx(tmp_path):
    return make_cluster_context(tmp_path, make_config(tmp_path, nodes=2))


def _run_jobs(ctx, jobs) -> None:
    """What the job queue would do with the follow-up jobs."""
    for job in jobs:
        for op in job:
            run_opcode(ctx, opcodes.from_dict(op))


def _groups(ctx) -> dict[str, dict]:
    net = ctx.cfg.get_network_by_name(NET)
    return {g.name: g.networks.get(net.uuid) for g in
            ctx.cfg.get_all_nodegroups_info().values()}


def _enable(ctx) -> list[str]:
    result, feedback, jobs = run_opcode(ctx, OpClusterSetParams(
        instance_communication_network=NET))
    assert result == {"jobs": [[True, 100 + i] for i in range(len(jobs))]}
    _run_jobs(ctx, jobs)
    return feedback


def test_cluster_modify_creates_and_connects_the_network(ctx) -> None:
    feedback = _enable(ctx)
    assert any("Changing instance communication network to 'mynetwork'" in m for m in feedback)
    net = ctx.cfg.get_network_by_name(NET)
    assert (net.network, net.gateway, net.network6, net.gateway6, net.mac_prefix) == (
        "169.254.0.0/16", None, "fe80::/10", None, "52:54:00")
    assert _groups(ctx) == {"default": {"mode": "routed", "link": "communication_rt",
                                        "vlan": ""}}
    assert ctx.cfg.get_cluster_info().instance_communication_network == NET
    # the same value again: nothing to do, no job
    result, feedback, jobs = run_opcode(ctx, OpClusterSetParams(
        instance_communication_network=NET))
    assert (result, jobs) == (None, [])
    assert any("already is 'mynetwork', nothing to do" in m for m in feedback)
    # a new group is connected by a follow-up job of its creation
    result, _, jobs = run_opcode(ctx, OpGroupAdd(group_name="mygroup"))
    assert result == {"jobs": [[True, 100]]}
    _run_jobs(ctx, jobs)
    assert _groups(ctx)["mygroup"] == {"mode": "routed", "link": "communication_rt",
                                       "vlan": ""}
    # unset: the network stays, as Ganeti
    _, feedback, jobs = run_opcode(ctx, OpClusterSetParams(instance_communication_network=""))
    assert jobs == [] and ctx.cfg.get_network_by_name(NET) is not None
    assert any("Disabling instance communication network" in m for m in feedback)
    assert ctx.cfg.get_cluster_info().instance_communication_network == ""
    _, _, jobs = run_opcode(ctx, OpGroupAdd(group_name="other"))
    assert jobs == []


def test_an_existing_odd_network_is_used_with_warnings(ctx) -> None:
    run_opcode(ctx, OpNetworkAdd(network_name=NET, network="10.9.0.0/24", gateway="10.9.0.1"))
    _, feedback, jobs = run_opcode(ctx, OpClusterSetParams(instance_communication_network=NET))
    assert sum("might pose a security risk" in m for m in feedback) == 4
    assert [[op["OP_ID"] for op in job] for job in jobs] == [["OP_NETWORK_CONNECT"]]


def _create(ctx, name: str, **kw):
    node = ctx.cfg.get_node_info(ctx.cfg.get_master_node()).name
    return run_opcode(ctx, OpInstanceCreate(
        instance_name=name, disk_template="diskless", nics=[{}], os_type="tinyos",
        pnode=node, name_check=False, ip_check=False, no_install=True, start=False, **kw))


def _comm_nic(ctx, name: str) -> NIC | None:
    inst = ctx.cfg.get_instance_info_by_name(name)
    return next((nic for nic in inst.nics if nic.name == PREFIX + name), None)


def test_create_and_modify_add_and_remove_the_nic(ctx) -> None:
    with pytest.raises(errors.OpPrereqError, match="--instance-communication-network"):
        _create(ctx, "i1", instance_communication=True)
    assert ctx.cfg.get_instance_info_by_name("i1") is None
    _enable(ctx)
    _create(ctx, "i1", instance_communication=True)
    nic = _comm_nic(ctx, "i1")
    assert nic is not None and nic.mac.startswith("52:54:00:")
    assert ipaddress.IPv4Address(nic.ip) in ipaddress.IPv4Network("169.254.0.0/16")
    assert nic.network == ctx.cfg.get_network_by_name(NET).uuid
    assert nic.nicparams == {"mode": "routed", "link": "communication_rt"}
    # modify -c no removes it (its address back in the pool), -c yes adds it again
    result, _, _ = run_opcode(ctx, OpInstanceSetParams(instance_name="i1",
                                                       instance_communication=False))
    assert result == [["nic.1", "remove"]] and _comm_nic(ctx, "i1") is None
    assert ctx.cfg.get_network_by_name(NET).reservations.count("1") == 0
    run_opcode(ctx, OpInstanceSetParams(instance_name="i1", instance_communication=True))
    assert _comm_nic(ctx, "i1") is not None
    # asking for what is already there changes nothing
    result, _, _ = run_opcode(ctx, OpInstanceSetParams(instance_name="i1",
                                                       instance_communication=True))
    assert result == []
    _create(ctx, "i2")
    assert _comm_nic(ctx, "i2") is None
    run_opcode(ctx, OpClusterSetParams(instance_communication_network=""))
    with pytest.raises(errors.OpPrereqError, match="--instance-communication-network"):
        run_opcode(ctx, OpInstanceSetParams(instance_name="i2", instance_communication=True))
    run_opcode(ctx, OpInstanceSetParams(instance_name="i1", instance_communication=False))
    assert _comm_nic(ctx, "i1") is None
