"""The node steps of each kvm NIC mode (pure; doc/kvm.md, "NIC modes")."""

from __future__ import annotations

import json

import pytest

from ganeti import errors
from ganeti.hypervisor.kvm import nicmodes
from ganeti.hypervisor.kvm.nicmodes import Vlan, parse_vlan, plan_down, plan_up


@pytest.mark.parametrize("text,untagged,tagged", [
    ("", None, ()), (None, None, ()), (".100", 100, ()), ("100", 100, ()),
    (":100:200", None, (100, 200)), (".7:8:9", 7, (8, 9)), (":4094", None, (4094,)),
])
def test_parse_vlan(text, untagged, tagged):
    assert parse_vlan(text) == Vlan(untagged, tagged)


@pytest.mark.parametrize("text", [".", "x", ".1.2", ":0", ".4095", "1:", "-5", ":a"])
def test_parse_vlan_refuses(text):
    with pytest.raises(errors.HypervisorError, match="Invalid NIC VLAN"):
        parse_vlan(text)


def test_bridged():
    assert plan_up("bridged", "br0", "", "tap0", None) == [
        ("ip", "link", "set", "tap0", "master", "br0"), ("ip", "link", "set", "tap0", "up")]
    # the port leaves the bridge's default VLAN (none to leave when it has none)
    assert plan_up("bridged", "br0", ":20", "tap0", None, default_pvid=7)[1] == (
        "bridge", "vlan", "del", "dev", "tap0", "vid", "7")
    assert ("bridge", "vlan", "del", "dev", "tap0", "vid", "1") not in plan_up(
        "bridged", "br0", ":20", "tap0", None, default_pvid=0)
    assert plan_up("bridged", "br0", ".10:20", "tap0", None) == [
        ("ip", "link", "set", "tap0", "master", "br0"),
        ("bridge", "vlan", "del", "dev", "tap0", "vid", "1"),
        ("bridge", "vlan", "add", "dev", "tap0", "vid", "10", "pvid", "untagged"),
        ("bridge", "vlan", "add", "dev", "tap0", "vid", "20"),
        ("ip", "link", "set", "tap0", "up")]
    assert plan_down("bridged", "br0", "tap0") == []


@pytest.mark.parametrize("vlan,settings", [
    ("", []),
    (".100", ["tag=100", "vlan_mode=access"]),
    (":100:200", ["vlan_mode=trunk", "trunks=100,200"]),
    (".5:6", ["tag=5", "vlan_mode=native-untagged", "trunks=6"]),
])
def test_openvswitch(vlan, settings):
    # one transaction: a port left from before goes, with its old VLAN settings
    steps = plan_up("openvswitch", "sw0", vlan, "tap1", "192.0.2.5")
    assert steps == [("ovs-vsctl", "--if-exists", "del-port", "tap1", "--", "add-port", "sw0",
                      "tap1", *(("--", "set", "port", "tap1", *settings) if settings else ())),
                     ("ip", "link", "set", "tap1", "up")]
    assert plan_down("openvswitch", "sw0", "tap1") == [
        ("ovs-vsctl", "--if-exists", "del-port", "sw0", "tap1")]


def test_routed():
    w = nicmodes.WRITE
    assert plan_up("routed", "100", "", "tap2", "192.0.2.9") == [
        ("ip", "link", "set", "tap2", "up"),
        (w, "/proc/sys/net/ipv4/conf/tap2/proxy_arp", "1"),
        (w, "/proc/sys/net/ipv4/conf/tap2/forwarding", "1"),
        ("ip", "route", "replace", "192.0.2.9/32", "dev", "tap2", "table", "100")]
    assert plan_up("routed", "", "", "tap2", "2001:db8::5")[-3:] == [
        (w, "/proc/sys/net/ipv6/conf/tap2/proxy_ndp", "1"),
        (w, "/proc/sys/net/ipv6/conf/tap2/forwarding", "1"),
        ("ip", "-6", "route", "replace", "2001:db8::5/128", "dev", "tap2")]
    assert plan_up("routed", "", "", "tap2", None) == [
        ("ip", "link", "set", "tap2", "up"),
        (w, "/proc/sys/net/ipv4/conf/tap2/proxy_arp", "1"),
        (w, "/proc/sys/net/ipv4/conf/tap2/forwarding", "1")]
    assert plan_down("routed", "100", "tap2") == []


def test_instance_communication_tap_gets_the_link_local_address_and_a_main_route():
    # as Ganeti's ifup-os: the link (communication_rt) names no routing table here
    assert plan_up("routed", "communication_rt", "", "tap3", "169.254.0.7",
                   communication=True) == [
        ("ip", "link", "set", "tap3", "up"),
        ("ip", "address", "replace", "169.254.169.254/32", "broadcast", "169.254.255.255",
         "dev", "tap3"),
        ("ip", "route", "replace", "169.254.0.7/32", "dev", "tap3")]
    for ip, message in ((None, "needs an IP"), ("fe80::1", "IPv4")):
        with pytest.raises(errors.HypervisorError, match=message):
            plan_up("routed", "communication_rt", "", "tap3", ip, communication=True)


@pytest.mark.parametrize("name,mode,expected", [
    ("ganeti:communication:web1", "routed", True),
    ("ganeti:communication:web1", "bridged", False),
    ("eth0", "routed", False), (None, "routed", False),
])
def test_is_communication(name, mode, expected):
    assert nicmodes.is_communication(name, mode) is expected


@pytest.mark.parametrize("args,message", [
    (("routed", "", ".5", "t", "192.0.2.1"), "takes no VLAN"),
    (("routed", "", "", "t", "nope"), "Invalid NIC address"),
    (("bridged", "", "", "t", None), "needs a link"),
    (("openvswitch", "", "", "t", None), "needs a link"),
    (("macvtap", "x", "", "t", None), "Unknown NIC mode"),
    (("bridged", "br0", ".x", "t", None), "Invalid NIC VLAN"),
])
def test_refusals(args, message):
    with pytest.raises(errors.HypervisorError, match=message):
        plan_up(*args)


def _details(kind: str | None, **data: object) -> str:
    info: dict[str, object] = {"info_data": data}
    if kind:
        info["info_kind"] = kind
    return json.dumps([{"ifname": "br0", "linkinfo": info}])


def test_bridge_vlan_pvid():
    assert nicmodes.bridge_vlan_pvid("br0", _details("bridge", vlan_filtering=1,
                                                      vlan_default_pvid=1)) == 1
    assert nicmodes.bridge_vlan_pvid("br0", _details("bridge", vlan_filtering=1,
                                                      vlan_default_pvid=0)) == 0
    with pytest.raises(errors.HypervisorError, match=r"bridge br0 does not filter VLANs"
                       r".*ip link set br0 type bridge vlan_filtering 1"):
        nicmodes.bridge_vlan_pvid("br0", _details("bridge", vlan_filtering=0))
    with pytest.raises(errors.HypervisorError, match="br0 is not a bridge"):
        nicmodes.bridge_vlan_pvid("br0", _details("veth"))
    with pytest.raises(errors.HypervisorError, match="br0 is not a bridge"):
        nicmodes.bridge_vlan_pvid("br0", json.dumps([{"ifname": "br0"}]))
    with pytest.raises(errors.HypervisorError, match="Cannot read the settings of br0"):
        nicmodes.bridge_vlan_pvid("br0", "not json")
    with pytest.raises(errors.HypervisorError, match="Cannot read the settings of br0"):
        nicmodes.bridge_vlan_pvid("br0", '{"a": 1}')
