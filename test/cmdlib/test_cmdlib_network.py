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


def test_a_gateway_or_release_never_frees_the_bounds_or_a_reservation(ctx):
    add(ctx, gateway="10.1.0.1", add_reserved_ips=["10.1.0.9"])
    net = ctx.cfg.get_network_by_name("net1")
    for gateway in ("10.1.0.0", "10.1.0.255", "10.1.0.9"):
        with pytest.raises(errors.OpPrereqError, match="already reserved"):
            run_opcode(ctx, opcodes.OpNetworkSetParams(network_name="net1", gateway=gateway))
    for addr in ("10.1.0.0", "10.1.0.255", "10.1.0.1"):
        with pytest.raises(errors.OpPrereqError, match="Cannot release"):
            run_opcode(ctx, opcodes.OpNetworkSetParams(network_name="net1",
                                                       remove_reserved_ips=[addr]))
    assert pool_of(net).external_reservations() == ["10.1.0.0", "10.1.0.1", "10.1.0.9",
                                                     "10.1.0.255"]
    with pytest.raises(errors.OpPrereqError, match="Please give at least one change"):
        run_opcode(ctx, opcodes.OpNetworkSetParams(network_name="net1", add_reserved_ips=[]))


def test_ipv6_gateway_stays_inside_the_ipv6_subnet(ctx):
    add(ctx, network6="2001:db8:1::/64", gateway6="2001:db8:1::1")
    with pytest.raises(errors.OpPrereqError, match="not in 2001:db8:2::/64"):
        run_opcode(ctx, opcodes.OpNetworkSetParams(network_name="net1",
                                                   network6="2001:db8:2::/64"))


def test_add_reserves_the_cluster_addresses_and_checks_tags(ctx):
    node = next(iter(ctx.cfg.get_all_nodes_info().values()))
    base = ".".join(node.primary_ip.split(".")[:3]) + ".0/24"
    add(ctx, "near", network=base)
    assert node.primary_ip in pool_of(ctx.cfg.get_network_by_name("near")).external_reservations()
    add(ctx, "free", network=base, conflicts_check=False)
    assert node.primary_ip not in \
        pool_of(ctx.cfg.get_network_by_name("free")).external_reservations()
    with pytest.raises(errors.TagError, match="invalid characters"):
        add(ctx, "badtags", tags=["no spaces allowed"])
    assert ctx.cfg.get_network_by_name("badtags") is None


def test_an_existing_connection_is_kept(ctx):
    add(ctx)
    group = ctx.cfg.get_nodegroup(ctx.cfg.get_default_nodegroup())
    op = opcodes.OpNetworkConnect(group_name=group.name, network_name="net1",
                                  network_mode="bridged", network_link="br1",
                                  network_vlan=".100")
    run_opcode(ctx, op)
    other = opcodes.OpNetworkConnect(group_name=group.name, network_name="net1",
                                     network_mode="routed", network_link="rt1")
    _, feedback, _ = run_opcode(ctx, other)
    assert any("disconnect it first" in msg for msg in feedback)
    assert list(group.networks.values()) == [{"mode": "bridged", "link": "br1", "vlan": ".100"}]
    with pytest.raises(errors.OpPrereqError, match="Invalid VLAN"):
        run_opcode(ctx, opcodes.OpNetworkConnect(group_name=group.name, network_name="net1",
                                                 network_mode="bridged", network_link="b",
                                                 network_vlan="bogus vlan!"))


# -- NICs on networks (doc/networks.md, "NICs on networks") --------------------------

def _connect(ctx, net: str = "net1", **params) -> None:
    group = ctx.cfg.get_nodegroup(ctx.cfg.get_default_nodegroup())
    run_opcode(ctx, opcodes.OpNetworkConnect(
        network_name=net, group_name=group.name,
        network_mode=params.get("mode", "bridged"), network_link=params.get("link", "br100"),
        network_vlan=params.get("vlan", "")))


def _create(ctx, name: str, *nics: dict, conflicts_check: bool = True):
    from ganeti.opcodes.instance import OpInstanceCreate
    node = ctx.cfg.get_node_info(ctx.cfg.get_master_node()).name
    return run_opcode(ctx, OpInstanceCreate(
        instance_name=name, disk_template="diskless", nics=list(nics), os_type="tinyos",
        pnode=node, name_check=False, ip_check=False, no_install=True, start=False,
        conflicts_check=conflicts_check))


def _ips(ctx, name: str) -> list[tuple[str | None, str | None]]:
    inst = ctx.cfg.get_instance_info_by_name(name)
    nets = {n.uuid: n.name for n in ctx.cfg.get_all_networks_info().values()}
    return [(nic.ip, nets.get(nic.network or "")) for nic in inst.nics]


def test_nics_take_addresses_and_parameters_from_their_network(ctx):
    add(ctx, gateway="10.1.0.1")
    _connect(ctx, mode="bridged", link="br100", vlan=".100")
    _create(ctx, "web1", {"network": "net1", "ip": "pool"}, {"network": "net1", "ip": "pool"},
            {"ip": "192.168.7.7"})
    assert _ips(ctx, "web1") == [("10.1.0.2", "net1"), ("10.1.0.3", "net1"),
                                 ("192.168.7.7", None)]
    inst = ctx.cfg.get_instance_info_by_name("web1")
    assert inst.nics[0].nicparams == {"mode": "bridged", "link": "br100", "vlan": ".100"}
    pool = pool_of(ctx.cfg.get_network_by_name("net1"))
    assert pool.is_reserved("10.1.0.2") and pool.is_reserved("10.1.0.3")
    _create(ctx, "web2", {"network": "net1", "ip": "10.1.0.20"})
    assert _ips(ctx, "web2") == [("10.1.0.20", "net1")]
    assert ctx.cfg._reserved_ips == set()     # handed-out addresses end with the LU


@pytest.mark.parametrize("nic,message", [
    ({"network": "net1", "ip": "10.1.0.1"}, "10.1.0.1 of network net1 is reserved externally"),
    ({"network": "net1", "ip": "10.9.0.1"}, "not inside"),
    ({"network": "nope", "ip": "pool"}, "network 'nope' not found"),
    ({"network": "net1", "ip": "pool", "link": "br0"}, "do not give them"),
    ({"ip": "pool"}, "ip=pool needs a network"),
    ({"ip": "10.1.0.50"}, "belongs to network net1"),
    ({"network": "net2", "ip": "pool"}, "not connected to node group"),
], ids=["taken", "outside", "unknown", "link-given", "pool-without-network", "conflict",
        "not-connected"])
def test_bad_nics_on_networks_are_refused_and_change_nothing(ctx, nic, message):
    add(ctx, gateway="10.1.0.1")
    add(ctx, "net2", network="10.2.0.0/24")
    _connect(ctx)
    before = ctx.cfg.get_serial_no()
    with pytest.raises(errors.OpPrereqError, match=message):
        _create(ctx, "bad", nic)
    assert ctx.cfg.get_instance_info_by_name("bad") is None
    assert ctx.cfg.get_serial_no() == before and ctx.cfg._reserved_ips == set()


def test_no_conflicts_check_allows_an_external_address_never_a_taken_one(ctx):
    """(Removal through the daemons: test/integration/test_networks.py.)"""
    add(ctx, gateway="10.1.0.1", add_reserved_ips=["10.1.0.9"])
    _connect(ctx)
    _create(ctx, "web1", {"network": "net1", "ip": "10.1.0.5"})
    with pytest.raises(errors.OpPrereqError, match="10.1.0.5 of network net1 is already in"):
        _create(ctx, "web2", {"network": "net1", "ip": "10.1.0.5"}, conflicts_check=False)
    with pytest.raises(errors.OpPrereqError, match="reserved externally"):
        _create(ctx, "web2", {"network": "net1", "ip": "10.1.0.9"})
    _create(ctx, "web2", {"network": "net1", "ip": "10.1.0.9"}, {"ip": "10.1.0.77"},
            conflicts_check=False)
    ctx.cfg.remove_instance(ctx.cfg.get_instance_info_by_name("web2").uuid)
    pool = pool_of(ctx.cfg.get_network_by_name("net1"))
    assert pool.is_reserved("10.1.0.9", external=True) and not pool.is_reserved("10.1.0.9")
    ctx.cfg.remove_instance(ctx.cfg.get_instance_info_by_name("web1").uuid)
    pool = pool_of(ctx.cfg.get_network_by_name("net1"))
    assert not pool.is_reserved("10.1.0.5") and pool.free_count == 252


def _modify(ctx, name: str, *mods, conflicts_check: bool = True):
    from ganeti.opcodes.instance import OpInstanceSetParams
    return run_opcode(ctx, OpInstanceSetParams(instance_name=name, nics=list(mods),
                                               conflicts_check=conflicts_check))


def test_modify_moves_nics_between_networks_with_the_connections_parameters(ctx):
    add(ctx, gateway="10.1.0.1", mac_prefix="aa:11:22")
    add(ctx, "net2", network="10.2.0.0/24")
    _connect(ctx, vlan=".100")
    _connect(ctx, "net2", link="br200")
    _create(ctx, "web1", {"network": "net1", "ip": "pool"})
    inst = ctx.cfg.get_instance_info_by_name("web1")
    assert inst.nics[0].mac.startswith("aa:11:22:")      # the network's MAC prefix
    _modify(ctx, "web1", ["modify", 0, {"network": "net2", "ip": "pool"}])
    assert _ips(ctx, "web1") == [("10.2.0.1", "net2")]
    # net2 has no MAC prefix of its own: a new MAC with the cluster's
    cluster_prefix = ctx.cfg.get_cluster_info().mac_prefix
    assert inst.nics[0].mac.startswith(cluster_prefix + ":")
    # the old connection's VLAN is not kept
    assert inst.nics[0].nicparams == {"mode": "bridged", "link": "br200"}
    assert not pool_of(ctx.cfg.get_network_by_name("net1")).is_reserved("10.1.0.2")
    with pytest.raises(errors.OpPrereqError, match="come from the network's connection"):
        _modify(ctx, "web1", ["modify", 0, {"link": "br9"}])
    # an add then a modify of the added NIC in one change: the second sees the first
    _modify(ctx, "web1", ["add", 0, {"mode": "bridged", "link": "br0"}],
            ["modify", 1, {"ip": "10.2.0.50"}])
    assert _ips(ctx, "web1") == [(None, None), ("10.2.0.50", "net2")]
    assert ctx.cfg._reserved_ips == set()


def test_hooks_and_os_scripts_see_the_network(ctx):
    from ganeti.cmdlib.instance import instance_hook_env, instance_rpc_dict
    add(ctx, gateway="10.1.0.1", mac_prefix="aa:00:01", tags=["lab"])
    _connect(ctx, vlan=".7")
    _create(ctx, "web1", {"network": "net1", "ip": "pool"})
    inst = ctx.cfg.get_instance_info_by_name("web1")
    env = instance_hook_env(ctx.cfg, inst)
    net = ctx.cfg.get_network_by_name("net1")
    assert {k: v for k, v in env.items() if "NETWORK" in k or k.endswith("VLAN")} == {
        "INSTANCE_NIC0_NETWORK_NAME": "net1", "INSTANCE_NIC0_NETWORK_UUID": net.uuid,
        "INSTANCE_NIC0_NETWORK_TAGS": "lab", "INSTANCE_NIC0_NETWORK_SUBNET": "10.1.0.0/24",
        "INSTANCE_NIC0_NETWORK_GATEWAY": "10.1.0.1",
        "INSTANCE_NIC0_NETWORK_MAC_PREFIX": "aa:00:01", "INSTANCE_NIC0_VLAN": ".7"}
    data = instance_rpc_dict(ctx.cfg, inst)
    assert data["nics_netinfo"][0]["NETWORK_GATEWAY"] == "10.1.0.1"


def test_a_routed_nic_needs_an_address(ctx):
    with pytest.raises(errors.OpPrereqError, match="NIC 1: a routed NIC needs an IP"):
        _create(ctx, "r1", {"mode": "bridged", "link": "br0"}, {"mode": "routed", "link": "100"})
    _create(ctx, "r1", {"mode": "routed", "link": "100", "ip": "192.0.2.44"})
    assert ctx.cfg.get_instance_info_by_name("r1").nics[0].nicparams == {
        "mode": "routed", "link": "100"}


@pytest.mark.parametrize("mode,vlan,message", [
    ("bridged", ".5000", "VLAN ids 1-4094"), ("bridged", ".1.2", "Invalid VLAN"),
    ("routed", ".5", "routed connection takes no VLAN")])
def test_connect_refuses_bad_vlans(ctx, mode, vlan, message):
    add(ctx)
    with pytest.raises(errors.ParameterError, match=message):
        _connect(ctx, mode=mode, vlan=vlan)
    assert ctx.cfg.get_nodegroup(ctx.cfg.get_default_nodegroup()).networks == {}
