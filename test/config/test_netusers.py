"""NIC addresses on networks and the networks' pools (doc/networks.md, "NICs on networks").

The pool changes in the same configuration write as the instance: a write
that fails (a full disk, :class:`fakes.flakydisk.FlakyDisk`) undoes both,
so no address is leaked or given twice.
"""

from __future__ import annotations

import random
from functools import partial

import pytest

from fakes.clock import FakeClock
from fakes.flakydisk import FlakyDisk

from ganeti import constants, errors
from ganeti.config import ConfigWriter
from ganeti.config.netusers import NetUsers, apply_to_pools, nic_holdings, pick_address
from ganeti.netpool import AddressPool
from ganeti.objects import NIC, Cluster, ConfigData, Instance, Network, Node, NodeGroup

Clock = partial(FakeClock, 1000.0, tick=1.0)


def _network(uuid: str = "net1", cidr: str = "192.0.2.0/29") -> Network:
    pool = AddressPool.initialize(cidr, "192.0.2.1")
    return Network(name=uuid.replace("net", "lan"), uuid=uuid, network=cidr, gateway="192.0.2.1",
                   reservations=pool.reservations_text(),
                   ext_reservations=pool.ext_reservations_text())


def _initial() -> ConfigData:
    cluster = Cluster(cluster_name="cluster.example.com", uuid="cluster-uuid",
                      master_node="n1", master_ip="127.0.0.254", master_netdev="lo",
                      enabled_hypervisors=[constants.HT_FAKE])
    node = Node(name="node1.example.com", uuid="n1", primary_ip="127.0.1.1", group="g1",
                master_candidate=True)
    return ConfigData(cluster=cluster, nodes={"n1": node},
                      nodegroups={"g1": NodeGroup(name="default", uuid="g1")},
                      networks={"net1": _network()})


@pytest.fixture
def disk() -> FlakyDisk:
    return FlakyDisk()


@pytest.fixture
def cfg(tmp_path, disk) -> ConfigWriter:
    return disk.writer(str(tmp_path / "config.data"), _initial(), clock=Clock(),
                       rng=random.Random(3))


def _inst(name: str, *ips: str | None, network: str | None = "net1") -> Instance:
    nics = [NIC(mac=f"aa:00:00:00:{i:02x}:{len(name):02x}", ip=ip, network=network)
            for i, ip in enumerate(ips)]
    return Instance(name=name, primary_node="n1", os="debian", hypervisor=constants.HT_FAKE,
                    disk_template="diskless", nics=nics)


def _reserved(cfg: ConfigWriter, net: str = "net1") -> list[str]:
    stored = cfg.get_network(net)
    assert stored is not None
    pool = AddressPool(stored.network, stored.reservations, stored.ext_reservations)
    return [str(a) for a in pool.network if pool.is_reserved(str(a))]


def _on_disk(tmp_path) -> list[str]:
    reread = ConfigWriter(str(tmp_path / "config.data"))
    return _reserved(reread)


def test_the_pool_follows_the_instance_in_the_same_write(cfg, tmp_path) -> None:
    serial = cfg.get_config_data().serial_no
    cfg.add_instance(_inst("a.example.com", "192.0.2.2", "192.0.2.3"), [])
    assert cfg.get_config_data().serial_no == serial + 1
    assert _reserved(cfg) == _on_disk(tmp_path) == ["192.0.2.2", "192.0.2.3"]
    inst = cfg.get_instance_info_by_name("a.example.com")
    assert inst is not None
    inst.nics = [inst.nics[0], NIC(mac="aa:00:00:00:09:09", ip="192.0.2.4", network="net1")]
    cfg.update(inst)
    assert _reserved(cfg) == _on_disk(tmp_path) == ["192.0.2.2", "192.0.2.4"]
    inst.nics[0].network = None           # the NIC leaves the network, keeping its address
    cfg.update(inst)
    assert _reserved(cfg) == ["192.0.2.4"]
    cfg.remove_instance(inst.uuid)
    assert _reserved(cfg) == _on_disk(tmp_path) == []


def test_an_address_two_nics_hold_stays_reserved_until_both_let_go(cfg) -> None:
    # (jobs never give one address twice; a hand-edited configuration may)
    cfg.add_instance(_inst("a.example.com", "192.0.2.5"), [])
    cfg.add_instance(_inst("bb.example.com", "192.0.2.5"), [])
    a = cfg.get_instance_info_by_name("a.example.com")
    assert a is not None
    cfg.remove_instance(a.uuid)
    assert _reserved(cfg) == ["192.0.2.5"]
    b = cfg.get_instance_info_by_name("bb.example.com")
    assert b is not None
    cfg.remove_instance(b.uuid)
    assert _reserved(cfg) == []


def test_a_failed_write_undoes_the_instance_and_its_addresses(cfg, disk, tmp_path) -> None:
    cfg.add_instance(_inst("a.example.com", "192.0.2.2"), [])
    disk.full = True
    with pytest.raises(errors.ConfigurationError, match="Cannot write"):
        cfg.add_instance(_inst("bb.example.com", "192.0.2.3"), [])
    assert cfg.get_instance_info_by_name("bb.example.com") is None
    assert _reserved(cfg) == _on_disk(tmp_path) == ["192.0.2.2"]
    a = cfg.get_instance_info_by_name("a.example.com")
    assert a is not None
    with pytest.raises(errors.ConfigurationError, match="Cannot write"):
        cfg.remove_instance(a.uuid)
    assert _reserved(cfg) == _on_disk(tmp_path) == ["192.0.2.2"]
    disk.full = False
    # the index was rebuilt with the restored tree: the next changes are right
    cfg.add_instance(_inst("bb.example.com", "192.0.2.3"), [])
    cfg.remove_instance(a.uuid)
    assert _reserved(cfg) == _on_disk(tmp_path) == ["192.0.2.3"]


def test_handing_out_addresses(cfg) -> None:
    assert cfg.reserve_ip("net1") == "192.0.2.2"
    assert cfg.reserve_ip("net1") == "192.0.2.3"          # handed out: skipped
    with pytest.raises(errors.OpPrereqError, match="already in use") as exc:
        cfg.reserve_ip("net1", "192.0.2.3")
    assert exc.value.args[1] == errors.ECODE_NOTUNIQUE
    with pytest.raises(errors.OpPrereqError, match="already in use"):
        cfg.reserve_ip("net1", "192.0.2.3", check=False)   # never twice, as in Ganeti
    with pytest.raises(errors.OpPrereqError, match="reserved externally"):
        cfg.reserve_ip("net1", "192.0.2.1")               # the gateway
    assert cfg.reserve_ip("net1", "192.0.2.1", check=False) == "192.0.2.1"
    with pytest.raises(errors.OpPrereqError, match="not inside"):
        cfg.reserve_ip("net1", "198.51.100.7")
    with pytest.raises(errors.OpPrereqError, match="not found"):
        cfg.reserve_ip("nope")
    cfg.release_ips([("net1", "192.0.2.2")])
    assert cfg.reserve_ip("net1") == "192.0.2.2"
    for expected in ("192.0.2.4", "192.0.2.5", "192.0.2.6"):
        assert cfg.reserve_ip("net1") == expected
    with pytest.raises(errors.OpPrereqError, match="no free IP address") as exc:
        cfg.reserve_ip("net1")
    assert exc.value.args[1] == errors.ECODE_NORES


def test_an_unknown_network_is_refused_and_changes_nothing(cfg) -> None:
    with pytest.raises(errors.ConfigurationError, match="unknown network"):
        cfg.add_instance(_inst("a.example.com", "192.0.2.2", network="net9"), [])
    assert cfg.get_instance_info_by_name("a.example.com") is None


def test_a_network_in_use_cannot_be_removed(cfg) -> None:
    cfg.add_instance(_inst("a.example.com", None), [])     # on the network, no address
    with pytest.raises(errors.ConfigurationError, match="used by instance"):
        cfg.remove_network("net1")
    assert cfg.get_network("net1") is not None


def test_a_rollback_rebuilds_the_index_from_the_document(cfg, disk, tmp_path) -> None:
    """An LU's unsaved in-place edit of a NIC survives another change's failed write;
    its own update() afterwards still moves the pool (review finding)."""
    cfg.add_instance(_inst("a.example.com", "192.0.2.2"), [])
    a = cfg.get_instance_info_by_name("a.example.com")
    assert a is not None
    a.nics[0].ip = "192.0.2.6"                  # edited in place, not saved yet
    disk.full = True
    with pytest.raises(errors.ConfigurationError, match="Cannot write"):
        cfg.add_instance(_inst("bb.example.com", "192.0.2.3"), [])
    disk.full = False
    assert a.nics[0].ip == "192.0.2.6"          # the unsaved edit stays
    cfg.update(a)
    assert _reserved(cfg) == _on_disk(tmp_path) == ["192.0.2.6"]


def test_the_index_alone() -> None:
    users = NetUsers([_inst("a", "192.0.2.2")])
    uuid_a = "ua"
    assert users.replace(uuid_a, {("net1", "192.0.2.2")}) == {}   # "a" holds it already
    assert users.replace(uuid_a, set()) == {}
    assert nic_holdings([NIC(ip="192.0.2.9", network="n"), NIC(ip="192.0.2.8"),
                         NIC(network="n")]) == {("n", "192.0.2.9")}
    net = _network()
    assert apply_to_pools({"net1": net}, {("net1", "192.0.2.6"): True,
                                          ("net1", "10.0.0.1"): True,
                                          ("net9", "192.0.2.2"): True}) == [net]
    assert AddressPool(net.network, net.reservations).is_reserved("192.0.2.6")
    assert pick_address(net, {"192.0.2.2"}, None) == "192.0.2.3"
