"""``gnt-network`` through the real daemons (doc/networks.md).

A 2-node virtual cluster: networks are added with their pools, listed and
shown, changed, connected to and disconnected from node groups, tagged and
removed; bad input is refused and changes nothing.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import time

import pytest

from ganeti import constants, daemonctl, luxi
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


def test_connect_without_parameters_and_tags(vc):
    vc.ok("gnt-network", "add", "--network", "203.0.113.0/24", "nicnet")
    try:
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


# -- NICs on networks ---------------------------------------------------------------

ADD = ("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "--no-start",
       "--no-name-check", "--no-ip-check")


def _nics(vc: VirtualCluster, name: str) -> list[str]:
    out = vc.ok("gnt-instance", "list", "--no-headers", "--separator", "|", "-o",
                "nic.ips,nic.networks.names,nic.modes,nic.links,nic.vlans", name)
    return out.strip().split("|")


def _pool(vc: VirtualCluster, net: str) -> tuple[int, str]:
    free, mapping = field(vc, net, "free_count,map")
    return int(free), mapping


def test_nics_take_their_address_and_link_from_the_network(vc):
    vc.ok("gnt-network", "add", "--network", "198.51.100.0/29", "--gateway", "198.51.100.1",
          "--add-reserved-ips", "198.51.100.6", "lan")
    vc.ok("gnt-network", "connect", "-N", "mode=bridged,link=br7,vlan=.7", "lan", "default")
    try:
        assert _pool(vc, "lan") == (4, "XX....XX")
        vc.ok(*ADD, "--net", "0:network=lan,ip=pool", "--net", "1:network=lan,ip=198.51.100.5",
              "nic1.example.com")
        assert _nics(vc, "nic1.example.com") == [
            "198.51.100.2,198.51.100.5", "lan,lan", "bridged,bridged", "br7,br7", ".7,.7"]
        assert _pool(vc, "lan") == (2, "XXX..XXX")
        assert field(vc, "lan", "inst_list") == ["nic1.example.com"]
        # an address an instance holds is refused, even with --no-conflicts-check
        for extra in ((), ("--no-conflicts-check",)):
            res = vc.run(*ADD, *extra, "--net", "0:network=lan,ip=198.51.100.5",
                         "nic2.example.com")
            assert res.returncode != 0 and "already in use" in res.stdout + res.stderr
        res = vc.run(*ADD, "--net", "0:ip=198.51.100.4", "nic2.example.com")
        assert res.returncode != 0 and "belongs to network lan" in res.stdout + res.stderr
        # an externally reserved one only with --no-conflicts-check
        res = vc.run(*ADD, "--net", "0:network=lan,ip=198.51.100.6", "nic2.example.com")
        assert res.returncode != 0 and "reserved externally" in res.stdout + res.stderr
        assert _pool(vc, "lan") == (2, "XXX..XXX")
        vc.ok(*ADD, "--no-conflicts-check", "--net", "0:network=lan,ip=198.51.100.6",
              "nic2.example.com")
        # modify: a NIC added from the pool, then unplugged; removal releases
        vc.ok("gnt-instance", "modify", "--net", "add:network=lan,ip=pool", "nic2.example.com")
        assert _nics(vc, "nic2.example.com")[0] == "198.51.100.6,198.51.100.3"
        assert _pool(vc, "lan") == (1, "XXXX.XXX")
        res = vc.run("gnt-instance", "modify", "--net", "1:link=br9", "nic2.example.com")
        assert res.returncode != 0 and "connection" in res.stdout + res.stderr
        vc.ok("gnt-instance", "modify", "--net", "1:remove", "nic2.example.com")
        assert _pool(vc, "lan") == (2, "XXX..XXX")
        res = vc.run("gnt-network", "remove", "lan")
        assert res.returncode != 0
        vc.ok("gnt-instance", "remove", "-f", "nic1.example.com")
        assert _pool(vc, "lan") == (4, "XX....XX")
        vc.ok("gnt-instance", "remove", "-f", "nic2.example.com")
        assert _pool(vc, "lan") == (4, "XX....XX")        # .6 stays reserved externally
        res = vc.run(*ADD, "--net", "0:ip=pool", "nic3.example.com")
        assert res.returncode != 0 and "needs a network" in res.stdout + res.stderr
    finally:
        for name in ("nic1.example.com", "nic2.example.com"):
            vc.run("gnt-instance", "remove", "-f", name)
        vc.run("gnt-network", "disconnect", "lan", "default")
        vc.ok("gnt-network", "remove", "lan")


def _create_op(name: str, node: str) -> dict:
    # (the instances' virtual CPUs are past the policy's ratio on two nodes: ignored)
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create",
            "disk_template": "diskless", "disks": [], "os_type": "tinyos", "no_install": True,
            "start": False, "name_check": False, "ip_check": False, "pnode": node,
            "ignore_ipolicy": True, "nics": [{"network": "pool100", "ip": "pool"}]}


def _holders(vc: VirtualCluster, names: list[str]) -> dict[str, str]:
    """``{instance: its address}`` of the instances of ``names`` that exist."""
    out = vc.ok("gnt-instance", "list", "--no-headers", "--separator", "|", "-o",
                "name,nic.ips,nic.networks.names")
    rows = [line.split("|") for line in out.splitlines()]
    found = {r[0]: r[1] for r in rows if r[0] in names}
    assert all(r[2] == "pool100" for r in rows if r[0] in names)
    return found


def _reserved(vc: VirtualCluster) -> set[str]:
    mapping = _pool(vc, "pool100")[1]
    # .0 (network) and .255 (broadcast) are reserved externally
    return {f"10.77.0.{i}" for i, c in enumerate(mapping) if c == "X" and 0 < i < 255}


def _submit(vc: VirtualCluster, names: list[str]) -> list[int]:
    """Create ``pNNN`` instances, even numbers on the first node, odd on the second
    (by the name, so that a resubmission places an instance where the first would
    have: the test removes the even ones, and an allocation needs an empty node)."""
    client = luxi.Client(vc.paths(vc.names[0]).master_socket)
    answers = client.SubmitManyJobs([[_create_op(n, vc.names[int(n[1:4]) % len(vc.names)])]
                                     for n in names])
    assert all(ok for ok, _ in answers), answers
    return [job_id for _, job_id in answers]


def test_a_hundred_parallel_creates_get_each_address_once(vc):
    """100 creations with ip=pool submitted at once; the master daemon is killed while
    they run and started again: every address is given once, and the pool holds exactly
    the addresses of the instances that exist (nothing leaked, nothing given twice);
    the ones that did not happen are submitted again."""
    master = vc.names[0]
    vc.ok("gnt-network", "add", "--network", "10.77.0.0/24", "pool100")
    vc.ok("gnt-network", "connect", "pool100")
    names = [f"p{i:03d}.example.com" for i in range(100)]
    try:
        _submit(vc, names)
        deadline = time.monotonic() + 120
        while len(_holders(vc, names)) < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = daemonctl.daemon_pid(vc.paths(master), constants.MASTERD)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while daemonctl.daemon_pid(vc.paths(master), constants.MASTERD) == pid \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        daemonctl.start_masterd(vc.paths(master), env=vc.env(master))
        daemonctl.wait_for_masterd(vc.paths(master))
        _wait_idle(vc)
        held = _holders(vc, names)
        assert 10 <= len(held) <= 100
        assert len(set(held.values())) == len(held)              # never given twice
        assert _reserved(vc) == set(held.values())               # nothing leaked
        missing = [n for n in names if n not in held]
        if missing:
            for job_id in _submit(vc, missing):
                res = vc.run("gnt-job", "wait", str(job_id))
                assert res.returncode == 0, res.stdout + res.stderr
        held = _holders(vc, names)
        assert len(held) == 100
        assert set(held.values()) == {f"10.77.0.{i}" for i in range(1, 101)}
        assert _reserved(vc) == set(held.values())
        # half of them go; the pool gives their addresses again, lowest first
        for name in names[::2]:
            vc.ok("gnt-instance", "remove", "-f", name)
        assert _reserved(vc) == {held[n] for n in names[1::2]}
        lowest = min((held[n] for n in names[::2]), key=ipaddress.IPv4Address)
        vc.ok(*ADD, "--net", "0:network=pool100,ip=pool", "again.example.com")
        assert _nics(vc, "again.example.com")[0] == lowest
        vc.ok("gnt-instance", "remove", "-f", "again.example.com")
    finally:
        for name in [*names, "again.example.com"]:
            vc.run("gnt-instance", "remove", "-f", "--submit", name)
        _wait_idle(vc)
        vc.run("gnt-network", "disconnect", "pool100")
        vc.ok("gnt-network", "remove", "pool100")


def _wait_idle(vc: VirtualCluster) -> None:
    """Wait for every job of the queue to end."""
    out = vc.ok("gnt-job", "list", "--no-headers", "-o", "id,status")
    for line in out.splitlines():
        job_id, status = line.split()[:2]
        if status in ("queued", "waiting", "running", "canceling"):
            vc.run("gnt-job", "wait", job_id)


def _env_file(path: str) -> dict[str, str]:
    with open(path) as fh:
        return dict(line.split("=", 1) for line in fh.read().splitlines() if "=" in line)


def test_hooks_and_os_scripts_get_the_networks_variables(vc, tmp_path):
    from instance_helpers import install_os
    out = str(tmp_path)
    install_os(vc, "envos", {"create": f"#!/bin/sh\nenv > '{out}/os-create.env'\nexit 0\n"})
    for node in vc.names:
        hook_dir = vc.paths(node).hooks_dir("instance-add", "post")
        os.makedirs(hook_dir, exist_ok=True)
        script = os.path.join(hook_dir, "50-env")
        with open(script, "w") as fh:
            fh.write(f"#!/bin/sh\nenv > '{out}/hook-{node}.env'\n")
        os.chmod(script, 0o755)
    vc.ok("gnt-network", "add", "--network", "192.0.2.0/28", "--gateway", "192.0.2.1",
          "--mac-prefix", "aa:0e:0f", "--tags", "lab", "envnet")
    vc.ok("gnt-network", "connect", "-N", "mode=bridged,link=br3,vlan=.3", "envnet")
    name = "envinst.example.com"
    try:
        vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "envos", "--no-start", "-n",
              vc.names[0], "--no-name-check", "--no-ip-check",
              "--net", "0:network=envnet,ip=pool", name)
        hook = _env_file(f"{out}/hook-{vc.names[0]}.env")
        net_uuid = field(vc, "envnet", "uuid")[0]
        assert {k: v for k, v in hook.items() if k.startswith("GANETI_INSTANCE_NIC0_")
                and ("NETWORK" in k or k.endswith(("_IP", "_VLAN", "_LINK")))} == {
            "GANETI_INSTANCE_NIC0_IP": "192.0.2.2", "GANETI_INSTANCE_NIC0_LINK": "br3",
            "GANETI_INSTANCE_NIC0_VLAN": ".3", "GANETI_INSTANCE_NIC0_NETWORK_NAME": "envnet",
            "GANETI_INSTANCE_NIC0_NETWORK_UUID": net_uuid,
            "GANETI_INSTANCE_NIC0_NETWORK_TAGS": "lab",
            "GANETI_INSTANCE_NIC0_NETWORK_SUBNET": "192.0.2.0/28",
            "GANETI_INSTANCE_NIC0_NETWORK_GATEWAY": "192.0.2.1",
            "GANETI_INSTANCE_NIC0_NETWORK_MAC_PREFIX": "aa:0e:0f"}
        osenv = _env_file(f"{out}/os-create.env")
        assert osenv["NIC_0_IP"] == "192.0.2.2" and osenv["NIC_0_NETWORK_NAME"] == "envnet"
        assert osenv["NIC_0_NETWORK_GATEWAY"] == "192.0.2.1"
        assert osenv["NIC_0_NETWORK_SUBNET"] == "192.0.2.0/28"
        assert osenv["NIC_0_MAC"].startswith("aa:0e:0f:")
    finally:
        vc.run("gnt-instance", "remove", "-f", name)
        vc.run("gnt-network", "disconnect", "envnet")
        vc.ok("gnt-network", "remove", "envnet")
        for node in vc.names:
            os.remove(os.path.join(vc.paths(node).hooks_dir("instance-add", "post"), "50-env"))
