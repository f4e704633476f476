"""Instance communication through the real daemons (doc/networks.md, "Instance
communication"), the checks of Ganeti's QA ``TestInstanceCommunication`` (cluster and
instance) on a 2-node virtual cluster with the fake hypervisor: ``gnt-cluster modify
--instance-communication-network`` creates the network and connects it to every node
group (a new group too), ``gnt-instance add/modify -c yes|no`` and RAPI add and remove
the NIC.  The node side (the tap's address and route) is checked with real taps in
test_kvm_nic_modes.py.
"""

from __future__ import annotations

import ipaddress

import pytest
from instance_helpers import NOCHECK
from test_rapi import USERS, submit_ok, write_users
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(600)

NET = "mynetwork"
NIC_PREFIX = "ganeti:communication:"
ROUTED = "(routed, communication_rt, )"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcicomm"), nodes=2, use_ssh=False) as cluster:
        write_users(cluster, USERS)
        yield cluster


def _net(vc: VirtualCluster, fieldname: str) -> str:
    return vc.ok("gnt-network", "list", "--no-headers", "-o", fieldname, NET).strip()


def _field(vc: VirtualCluster, name: str, fieldname: str) -> str:
    return vc.ok("gnt-instance", "list", "--no-headers", "-o", fieldname, name).strip()


def test_cluster_modify_creates_the_network_and_connects_every_group(vc):
    assert vc.ok("gnt-group", "list", "--no-headers", "-o", "name").strip() == "default"
    assert vc.ok("gnt-network", "list", "--no-headers", "-o", "name").strip() == ""
    out = vc.ok("gnt-cluster", "modify", f"--instance-communication-network={NET}")
    assert f"Changing instance communication network to '{NET}'" in out
    assert _net(vc, "name") == NET
    assert _net(vc, "group_list") == f"default {ROUTED}"
    assert (_net(vc, "gateway"), _net(vc, "gateway6")) == ("-", "-")
    assert (_net(vc, "network"), _net(vc, "network6")) == ("169.254.0.0/16", "fe80::/10")
    assert _net(vc, "mac_prefix") == "52:54:00"
    # a new group is connected before gnt-group add returns
    vc.ok("gnt-group", "add", "mygroup")
    assert _net(vc, "group_list") in (f"default {ROUTED}, mygroup {ROUTED}",
                                      f"mygroup {ROUTED}, default {ROUTED}")
    out = vc.ok("gnt-cluster", "modify", f"--instance-communication-network={NET}")
    assert f"Instance communication network already is '{NET}', nothing to do." in out
    out = vc.ok("gnt-cluster", "modify", "--instance-communication-network=")
    assert "Disabling instance communication network" in out
    assert _net(vc, "name") == NET            # unset: the network stays, as Ganeti
    vc.ok("gnt-network", "disconnect", NET)
    vc.ok("gnt-network", "remove", NET)
    vc.ok("gnt-group", "remove", "mygroup")
    assert vc.ok("gnt-network", "list", "--no-headers", "-o", "name").strip() == ""


def _comm_nic(vc: VirtualCluster, name: str) -> int | None:
    names = [x.strip(" '") for x in _field(vc, name, "nic.names").strip("[]").split(",")]
    return names.index(NIC_PREFIX + name) if NIC_PREFIX + name in names else None


def _check_comm_nic(vc: VirtualCluster, name: str) -> None:
    idx = _comm_nic(vc, name)
    assert idx is not None
    ip = _field(vc, name, f"nic.ip/{idx}")
    assert ipaddress.IPv4Address(ip) in ipaddress.IPv4Network("169.254.0.0/16")
    assert _field(vc, name, f"nic.network.name/{idx}") == NET
    assert _field(vc, name, f"nic.mode/{idx}") == "routed"
    assert _field(vc, name, f"nic.mac/{idx}").startswith("52:54:00:")


def test_instances_get_and_lose_the_nic(vc):
    add = ("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", *NOCHECK)
    res = vc.run(*add, "--no-start", "-c", "yes", "nonet.example.com")
    assert res.returncode != 0
    assert "--instance-communication-network" in res.stdout + res.stderr
    vc.ok("gnt-cluster", "modify", f"--instance-communication-network={NET}")
    name = "comm1.example.com"
    try:
        vc.ok(*add, name)
        assert _comm_nic(vc, name) is None
        out = vc.ok("gnt-instance", "modify", "-c", "yes", name)
        assert "add:mac=52:54:00:" in out
        vc.ok("gnt-instance", "reboot", name)
        _check_comm_nic(vc, name)
        assert _net(vc, "inst_list") == name
        vc.ok("gnt-instance", "modify", "-c", "no", name)
        vc.ok("gnt-instance", "reboot", name)
        assert _comm_nic(vc, name) is None
        assert _net(vc, "inst_list") == ""
        res = vc.run("gnt-instance", "modify", "-c", "maybe", name)
        assert res.returncode != 0
        vc.ok(*add, "--no-start", "-c", "yes", "comm2.example.com")
        _check_comm_nic(vc, "comm2.example.com")
        assert _field(vc, "comm2.example.com", "nic.count") == "2"
    finally:
        for inst in (name, "comm2.example.com"):
            vc.run("gnt-instance", "remove", "-f", inst)


def test_rapi_creates_and_modifies_with_instance_communication(vc):
    vc.ok("gnt-cluster", "modify", f"--instance-communication-network={NET}")
    name = "rapicomm.example.com"
    try:
        submit_ok(vc, "POST", "/2/instances", {
            "__version__": 1, "instance_name": name, "disk_template": "diskless",
            "disks": [], "nics": [{}], "os_type": "tinyos", "mode": "create",
            "name_check": False, "ip_check": False, "start": False,
            "instance_communication": True})
        _check_comm_nic(vc, name)
        submit_ok(vc, "PUT", f"/2/instances/{name}/modify", {"instance_communication": False})
        assert _comm_nic(vc, name) is None
    finally:
        vc.run("gnt-instance", "remove", "-f", name)
