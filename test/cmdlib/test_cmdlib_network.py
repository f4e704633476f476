"""Network LUs against a real configuration and processor (doc/networks.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import make_cluster_context, make_config, run_opcode  # noqa: E402

from ganeti import errors  # noqa: E402
from ganeti.cmdlib.network import pool_of  # noqa: E402
from ganeti.objects import NIC, Instance  # noqa: E402
from ganeti.opcodes import network as opcodes  # noqa: E402


@pytest.fixture
def ctx(tmp_path):
    return make_cluster_context(tmp_path, make_config(tmp_path, nodes=2))


def add(ctx, name: str = "net1", **kw) -> None:
    run_opcode(ctx, opcodes.OpNetworkAdd(network_name=name, network=kw.pop("network",
                                                                           "10.1.0.0/24"), **kw))


def test_add_stores_the_pool_with_gateway_and_reservations(ctx):
    add(ctx, gateway="10.1.0.1", add_reserved_ips=["10.1.0.9"], mac_prefix="AA:00:01",
        tags=["b", "a", "b"])
    net = ctx.cfg.get_network_by_name("net1")
    assert net is not None and net.gateway == "10.1.0.1" and net.mac_prefix == "aa:00:01"
    assert net.tags == ["a", "b"]
    pool = pool_of(net)
    assert pool.external_reservations() == ["10.1.0.0", "10.1.0.1", "10.1.0.9", "10.1.0.255"]
    assert pool.free_count == 252


def test_a_refused_change_changes_nothing(ctx):
    add(ctx, gateway="10.1.0.1")
    net = ctx.cfg.get_network_by_name("net1")
    before = (net.gateway, net.ext_reservations, ctx.cfg.get_serial_no())
    # the new gateway is fine, but a reserved address to release is not reserved
    with pytest.raises(errors.OpPrereqError, match="10.1.0.77"):
        run_opcode(ctx, opcodes.OpNetworkSetParams(network_name="net1", gateway="10.1.0.2",
                                                   remove_reserved_ips=["10.1.0.77"]))
    assert (net.gateway, net.ext_reservations, ctx.cfg.get_serial_no()) == before
    run_opcode(ctx, opcodes.OpNetworkSetParams(network_name="net1", gateway="none"))
    assert net.gateway is None
    assert pool_of(net).external_reservations() == ["10.1.0.0", "10.1.0.255"]


def test_connect_checks_conflicting_addresses_and_disconnect_checks_users(ctx):
    add(ctx)
    group = ctx.cfg.get_nodegroup(ctx.cfg.get_default_nodegroup())
    node = next(iter(ctx.cfg.get_all_nodes_info()))
    ctx.cfg.add_instance(Instance(name="web1", primary_node=node, os="tinyos",
                                  disk_template="diskless",
                                  nics=[NIC(mac="aa:00:00:00:00:01", ip="10.1.0.20")]), [])
    connect = opcodes.OpNetworkConnect(group_name=group.name, network_name="net1",
                                       network_mode="bridged", network_link="br1")
    with pytest.raises(errors.OpPrereqError, match=r"web1 \(nic/0: 10.1.0.20\)"):
        run_opcode(ctx, connect)
    assert group.networks == {}
    connect.conflicts_check = False
    _, feedback, _ = run_opcode(ctx, connect)
    assert any("web1" in msg for msg in feedback)
    net = ctx.cfg.get_network_by_name("net1")
    assert group.networks == {net.uuid: {"mode": "bridged", "link": "br1", "vlan": ""}}
    inst = next(i for i in ctx.cfg.get_all_instances_info().values() if i.name == "web1")
    inst.nics[0].network = net.uuid
    ctx.cfg.update(inst)
    with pytest.raises(errors.OpPrereqError, match="use network 'net1': web1"):
        run_opcode(ctx, opcodes.OpNetworkDisconnect(group_name=group.name, network_name="net1"))
    with pytest.raises(errors.OpPrereqError, match="disconnect it first"):
        run_opcode(ctx, opcodes.OpNetworkRemove(network_name="net1"))
