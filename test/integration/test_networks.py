"""``gnt-network`` through the real daemons (doc/networks.md).

A 2-node virtual cluster: networks are added with their pools, listed and
shown, changed, connected to and disconnected from node groups, tagged and
removed; bad input is refused and changes nothing.
"""

from __future__ import annotations

import pytest

from ganeti import constants
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(600)

FIELDS = ["ctime", "external_reservations", "free_count", "gateway", "gateway6", "group_cnt",
          "group_list", "inst_cnt", "inst_list", "mac_prefix", "map", "mtime", "name",
          "network", "network6", "reserved_count", "serial_no", "tags", "uuid"]


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcnet"), nodes=2, use_ssh=False) as cluster:
        yield cluster


def field(vc: VirtualCluster, name: str, fields: str) -> list[str]:
    out = vc.ok("gnt-network", "list", "--no-headers", "--separator", "|", "-o", fields, name)
    return out.strip().split("|")


def names(vc: VirtualCluster) -> list[str]:
    return vc.ok("gnt-network", "list", "--no-headers", "-o", "name").split()


def test_add_list_info_and_the_pool(vc):
    vc.ok("gnt-network", "add", "--network", "192.0.2.0/28", "--gateway", "192.0.2.1",
          "--add-reserved-ips", "192.0.2.5,192.0.2.6", "--mac-prefix", "aa:00:01",
          "--network6", "2001:db8::/64", "--tags", "lab,blue", "net1")
    assert "net1" in names(vc)
    free, reserved, pool_map, ext = field(vc, "net1",
                                          "free_count,reserved_count,map,external_reservations")
    # 16 addresses: network, broadcast, gateway and two reserved ones are taken
    assert (free, reserved) == ("11", "5")
    assert pool_map == "XX...XX........X"
    assert ext == "192.0.2.0, 192.0.2.1, 192.0.2.5, 192.0.2.6, 192.0.2.15"
    assert field(vc, "net1", "gateway,mac_prefix,network6,tags") == [
        "192.0.2.1", "aa:00:01", "2001:db8::/64", "blue,lab"]
    info = vc.ok("gnt-network", "info", "net1").splitlines()
    assert info[0] == "Network name: net1"
    assert "  Subnet: 192.0.2.0/28" in info and "  Size: 16" in info
    assert "  Free: 11 (68.75%)" in info
    assert "  not connected to any node group" in info
    fields = vc.ok("gnt-network", "list-fields", "--no-headers").splitlines()
    assert sorted(f.split()[0] for f in fields) == FIELDS
    assert vc.ok("gnt-network", "list-tags", "net1").split() == ["blue", "lab"]


@pytest.mark.parametrize("args, words", [
    (("--network", "10.0.0.0/15", "big"), "/16"),
    (("--network", "10.0.0.0/31", "small"), "/30"),
    (("--network", "10.0.0.0/24", "--gateway", "10.0.1.1", "gwout"), "10.0.1.1"),
    (("--network", "10.0.0.0/24", "--add-reserved-ips", "10.9.9.9", "rsvout"), "10.9.9.9"),
    (("--network", "10.0.0.0/24", "--mac-prefix", "zz:00:00", "badmac"), "MAC prefix"),
    (("--network", "not-a-net", "badnet"), "not-a-net"),
    (("--network", "10.0.0.0/24", "net1"), "already exists"),
    (("--network", "10.0.0.0/24", "bad name"), "Invalid network name"),
])
def test_bad_input_is_refused_and_changes_nothing(vc, args, words):
    before = names(vc)
    res = vc.run("gnt-network", "add", *args)
    assert res.returncode != 0
    assert words in res.stdout + res.stderr
    assert names(vc) == before


def test_modify_gateway_reservations_and_prefix(vc):
    vc.ok("gnt-network", "modify", "--gateway", "192.0.2.14", "--add-reserved-ips", "192.0.2.7",
          "--remove-reserved-ips", "192.0.2.5", "--mac-prefix", "none", "net1")
    gateway, prefix, pool_map = field(vc, "net1", "gateway,mac_prefix,map")
    assert (gateway, prefix) == ("192.0.2.14", "-")
    # the old gateway (.1) and .5 are free again; .7 and the new gateway (.14) are taken
    assert pool_map == "X.....XX......XX"
    res = vc.run("gnt-network", "modify", "--remove-reserved-ips", "192.0.2.9", "net1")
    assert res.returncode != 0 and "192.0.2.9" in res.stdout + res.stderr
    assert field(vc, "net1", "map") == ["X.....XX......XX"]
    res = vc.run("gnt-network", "modify", "net1")
    assert res.returncode != 0


def test_connect_disconnect_and_remove(vc):
    vc.ok("gnt-network", "connect", "-N", "mode=bridged,link=br100,vlan=.100", "net1")
    assert field(vc, "net1", "group_cnt,group_list") == ["1", "default (bridged, br100, .100)"]
    info = vc.ok("gnt-network", "info", "net1")
    assert "    default (mode:bridged link:br100 vlan:.100)" in info
    res = vc.run("gnt-network", "remove", "net1")
    assert res.returncode != 0 and "disconnect it first" in res.stdout + res.stderr
    # connecting again with the same parameters changes nothing
    vc.ok("gnt-network", "connect", "-N", "mode=bridged,link=br100,vlan=.100", "net1",
          "default")
    res = vc.run("gnt-network", "connect", "-N", "mode=bogus,link=x", "net1")
    assert res.returncode != 0
    vc.ok("gnt-network", "disconnect", "net1", "default")
    assert field(vc, "net1", "group_cnt") == ["0"]
    vc.ok("gnt-network", "remove", "net1")
    assert "net1" not in names(vc)
    res = vc.run("gnt-network", "remove", "net1")
    assert res.returncode != 0 and "not found" in res.stdout + res.stderr


def test_nics_on_networks_are_refused_until_supported(vc):
    vc.ok("gnt-network", "add", "--network", "203.0.113.0/24", "nicnet")
    try:
        res = vc.run("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "--no-start",
                     "--no-name-check", "--no-ip-check", "--net", "0:network=nicnet",
                     "nicinst.example.com")
        assert res.returncode != 0 and "not supported yet" in res.stdout + res.stderr
        # without -N: bridged, on the cluster's default link (as Ganeti)
        vc.ok("gnt-network", "connect", "nicnet")
        # (the virtual cluster keeps Ganeti's default NIC link)
        assert field(vc, "nicnet", "group_list") == [
            f"default (bridged, {constants.DEFAULT_BRIDGE}, )"]
        vc.ok("gnt-network", "disconnect", "nicnet")
        vc.ok("gnt-network", "add-tags", "nicnet", "blue")
        assert "/network/nicnet\tblue" in vc.ok("gnt-cluster", "search-tags", "blu") \
            .replace(" ", "\t")
    finally:
        vc.ok("gnt-network", "remove", "nicnet")
