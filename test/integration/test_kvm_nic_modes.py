"""kvm NIC modes with real packets between tinylinux guests (doc/kvm.md, "NIC modes").

Everything runs in a network namespace the test makes (its own loopback,
taps, routes and switch; the host's network is never touched): a 2-node
kvm virtual cluster and an Open vSwitch the test starts there itself,
``ovsdb-server`` and ``ovs-vswitchd`` from Debian's ``openvswitch-switch``
with a private run directory (``OVS_RUNDIR``, which the node daemons'
``ovs-vsctl`` follows) and a switch on the userspace datapath (no kernel
module needed).

* ``openvswitch`` with VLANs: two guests on VLAN 100 reach each other, a
  third on VLAN 200 reaches neither; one of the VLAN-100 guests migrates
  live to the other node, and its port is on the switch with its VLAN
  before it resumes there: the other guest still reaches it (the failure of
  Ganeti's issue 944), and the source's port is gone.
* ``routed``: the node routes the guest's address to its tap and answers
  ARP for it; the guest reaches the namespace's own address.
* instance communication (``gnt-instance add -c yes``): the tap of the NIC
  on the instance communication network has 169.254.169.254/32 (broadcast
  169.254.255.255) and the guest's address is routed to it, what Ganeti's
  QA checks with ``ip route show`` and ``ip address show``; the guest
  reaches 169.254.169.254; ``modify -c no`` and a reboot take it away.

Skips (naming the reason) only when qemu cannot run or Open vSwitch is
missing (``make debian-deps`` installs it) or the test is not root.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest
from guest_helpers import SerialConsole, wait_for, wait_for_line
from instance_helpers import NOCHECK
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers
from tools.harness import tinylinux


def _ovs_reason() -> str:
    if os.geteuid() != 0:
        return "Open vSwitch and tap devices need root"
    missing = [b for b in ("ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovsdb-tool")
               if shutil.which(b) is None and not os.path.exists(f"/usr/sbin/{b}")]
    if missing:
        return (f"{', '.join(missing)} not installed (make debian-deps installs"
                " openvswitch-switch)")
    return ""


pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs"),
              pytest.mark.skipif(bool(_ovs_reason()), reason=_ovs_reason() or "ovs runs")]

N1, N2 = "node1.vcluster", "node2.vcluster"
SWITCH = "gtovs0"
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class Switch:
    """A private Open vSwitch: its database, its daemon, one userspace switch."""

    def __init__(self) -> None:
        self.rundir = tempfile.mkdtemp(prefix="gtovs", dir="/tmp")
        self.db = f"unix:{self.rundir}/db.sock"

    def vsctl(self, *args: str) -> str:
        res = subprocess.run([_sbin("ovs-vsctl"), f"--db={self.db}", "--timeout=30", *args],
                             capture_output=True, text=True, check=False, timeout=60)
        assert res.returncode == 0, f"ovs-vsctl {args}: {res.stderr}"
        return res.stdout.strip()

    def start(self) -> None:
        d = self.rundir
        env = {**os.environ, "OVS_RUNDIR": d, "OVS_LOGDIR": d, "OVS_DBDIR": d}
        subprocess.run([_sbin("ovsdb-tool"), "create", f"{d}/conf.db", SCHEMA], check=True,
                       env=env, timeout=60)
        subprocess.run([_sbin("ovsdb-server"), f"{d}/conf.db", f"--remote=punix:{d}/db.sock",
                        f"--pidfile={d}/ovsdb-server.pid", "--detach",
                        f"--log-file={d}/ovsdb-server.log"], check=True, env=env, timeout=60)
        self.vsctl("--no-wait", "init")
        subprocess.run([_sbin("ovs-vswitchd"), self.db, f"--pidfile={d}/ovs-vswitchd.pid",
                        "--detach", f"--log-file={d}/ovs-vswitchd.log"], check=True, env=env,
                       timeout=60)
        self.vsctl("--may-exist", "add-br", SWITCH, "--", "set", "bridge", SWITCH,
                   "datapath_type=netdev")

    def stop(self) -> None:
        try:
            self.vsctl("--if-exists", "del-br", SWITCH)
        finally:
            for daemon in ("ovs-vswitchd", "ovsdb-server"):
                try:
                    with open(f"{self.rundir}/{daemon}.pid") as fh:
                        os.kill(int(fh.read().strip()), signal.SIGTERM)
                except (OSError, ValueError):
                    pass
            time.sleep(0.5)
            shutil.rmtree(self.rundir, ignore_errors=True)

    def ports(self) -> list[str]:
        return sorted(self.vsctl("list-ports", SWITCH).split())

    def tag(self, port: str) -> str:
        return self.vsctl("get", "port", port, "tag")


#: the host's address in the namespace (on its loopback) that a routed guest reaches
HOST_ADDRESS = "10.62.0.1"


@pytest.fixture(scope="module")
def netns() -> Iterator[None]:
    """This thread (and what it starts: the cluster's daemons, qemu, Open vSwitch) in a
    new network namespace, with its loopback up; back to the original one after."""
    tinylinux.build()       # first, while packages can still be fetched (cached after)
    with host_helpers.network_namespace(HOST_ADDRESS):
        yield


@pytest.fixture(scope="module")
def switch(netns) -> Iterator[Switch]:
    sw = Switch()
    sw.start()
    saved = os.environ.get("OVS_RUNDIR")
    os.environ["OVS_RUNDIR"] = sw.rundir      # the node daemons' ovs-vsctl finds it
    try:
        yield sw
    finally:
        if saved is None:
            os.environ.pop("OVS_RUNDIR", None)
        else:
            os.environ["OVS_RUNDIR"] = saved
        sw.stop()


@pytest.fixture(scope="module")
def vc(tmp_path_factory, switch) -> Iterator[VirtualCluster]:
    with VirtualCluster(tmp_path_factory.mktemp("vnicm"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


def _hv(vc: VirtualCluster, node: str) -> KvmHypervisor:
    return KvmHypervisor(vc.paths(node))


def _add(vc: VirtualCluster, name: str, node: str, net: str) -> None:
    vc.ok("gnt-instance", "add", "-t", "sharedfile", "-s", "64M", "-o", "tinylinux", "-n", node,
          "--net", f"0:{net}", *NOCHECK, name)
    wait_for_line(_hv(vc, node).serial_log(name))


def _taps(vc: VirtualCluster, node: str, name: str) -> list[str]:
    runtime = _hv(vc, node).read_runtime(name) or {}
    argv = [str(w) for w in runtime.get("argv") or []]
    return [part.split("=", 1)[1] for word in argv for part in word.split(",")
            if part.startswith("ifname=")]


def _console(vc: VirtualCluster, node: str, name: str) -> SerialConsole:
    return SerialConsole(_hv(vc, node).serial_socket(name))


def _ping(con: SerialConsole, address: str) -> bool:
    out = con.run(f"ping -c 3 -W 2 {address} >/dev/null 2>&1 && echo reached || echo lost",
                  timeout=60)
    return out.endswith("reached")


def _up(con: SerialConsole, address: str) -> None:
    con.run(f"ip link set eth0 up && ip addr add {address} dev eth0")


def test_openvswitch_vlans_isolate_and_survive_a_live_migration(vc, switch):
    a, b, c = "ovsa.example.com", "ovsb.example.com", "ovsc.example.com"
    ovs = f"mode=openvswitch,link={SWITCH}"
    try:
        _add(vc, a, N1, f"{ovs},vlan=.100")
        _add(vc, b, N2, f"{ovs},vlan=.100")
        _add(vc, c, N1, f"{ovs},vlan=.200")
        (tap_a,), (tap_b,), (tap_c,) = (_taps(vc, N1, a), _taps(vc, N2, b), _taps(vc, N1, c))
        assert switch.ports() == sorted([tap_a, tap_b, tap_c])
        assert (switch.tag(tap_a), switch.tag(tap_b), switch.tag(tap_c)) == ("100", "100", "200")
        for node, name, address in ((N1, a, "10.60.0.1/24"), (N2, b, "10.60.0.2/24"),
                                    (N1, c, "10.60.0.3/24")):
            with _console(vc, node, name) as con:
                _up(con, address)
        with _console(vc, N1, a) as con:
            assert _ping(con, "10.60.0.2")          # same VLAN
            assert not _ping(con, "10.60.0.3")      # VLAN 200: isolated
        with _console(vc, N1, c) as con:
            assert not _ping(con, "10.60.0.2")
            # the VLAN was what kept them apart: c's port on VLAN 100 reaches them
            switch.vsctl("set", "port", tap_c, "tag=100")
            assert _ping(con, "10.60.0.2")
            switch.vsctl("set", "port", tap_c, "tag=200")
            assert not _ping(con, "10.60.0.1")
        # b moves to node1 while it runs; its port is there, on VLAN 100, before it resumes
        vc.ok("gnt-instance", "migrate", "-f", b)
        (tap_b2,) = _taps(vc, N1, b)
        assert tap_b2 != tap_b              # both nodes on one host: the alternative name
        assert switch.ports() == sorted([tap_a, tap_b2, tap_c])
        assert switch.tag(tap_b2) == "100"
        with _console(vc, N1, a) as con:
            assert _ping(con, "10.60.0.2")
        with _console(vc, N1, b) as con:
            assert con.run("ip -4 addr show eth0 | grep -c 10.60.0.2") == "1"
            assert _ping(con, "10.60.0.1") and not _ping(con, "10.60.0.3")
        # a NIC hotplugged on the switch gets its port and VLAN; unplugged, the port goes
        vc.ok("gnt-instance", "modify", "--hotplug", "--net",
              f"add:{ovs},vlan=:300:301", a)
        (hot,) = [p for p in switch.ports() if p not in (tap_a, tap_b2, tap_c)]
        assert switch.vsctl("get", "port", hot, "trunks") == "[300, 301]"
        vc.ok("gnt-instance", "modify", "--hotplug", "--net", "1:remove", a)
        assert switch.ports() == sorted([tap_a, tap_b2, tap_c])
    finally:
        for name in (a, b, c):
            vc.run("gnt-instance", "remove", "-f", name)
    assert switch.ports() == []             # every port went with its instance


def test_a_routed_nic_is_reached_through_its_host_route(vc):
    name, address = "routed.example.com", "10.61.0.5"
    try:
        _add(vc, name, N1, f"mode=routed,link=,ip={address}")
        (tap,) = _taps(vc, N1, name)
        route = subprocess.run(["ip", "-4", "route", "show", f"{address}/32"],
                               capture_output=True, text=True, check=True, timeout=30).stdout
        assert f"dev {tap}" in route
        with open(f"/proc/sys/net/ipv4/conf/{tap}/proxy_arp") as fh:
            assert fh.read().strip() == "1"
        host = HOST_ADDRESS            # the namespace's own address
        with _console(vc, N1, name) as con:
            con.run(f"ip link set eth0 up && ip addr add {address}/32 dev eth0"
                    " && ip route add default dev eth0")
            assert _ping(con, host), host
        res = vc.run("gnt-instance", "add", "-t", "file", "-s", "64M", "-o", "tinylinux",
                     "-n", N1, "--net", "0:mode=routed,link=", *NOCHECK, "noip.example.com")
        assert res.returncode != 0 and "routed NIC needs an IP" in res.stdout + res.stderr
    finally:
        vc.run("gnt-instance", "remove", "-f", name)
    wait_for(lambda: not subprocess.run(["ip", "-4", "route", "show", f"{address}/32"],
                                        capture_output=True, text=True, check=False,
                                        timeout=30).stdout.strip(), "the route gone")


def _ip(*argv: str) -> str:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def test_the_instance_communication_tap_has_the_link_local_address(vc):
    name, net = "comm.example.com", "commnet"
    vc.ok("gnt-cluster", "modify", f"--instance-communication-network={net}")
    try:
        vc.ok("gnt-instance", "add", "-t", "sharedfile", "-s", "64M", "-o", "tinylinux", "-n",
              N1, "--net", "0:mode=routed,link=,ip=10.61.0.9", "-c", "yes", *NOCHECK, name)
        wait_for_line(_hv(vc, N1).serial_log(name))
        address = vc.ok("gnt-instance", "list", "--no-headers", "-o", "nic.ip/1", name).strip()
        plain, tap = _taps(vc, N1, name)
        # Ganeti's QA: "IP dev TAP scope link", and the tap's inet line
        assert _ip("route", "show", address).split() == [address, "dev", tap, "scope", "link"]
        assert "inet " not in _ip("address", "show", "dev", plain)
        inet = [line.split() for line in _ip("address", "show", "dev", tap).splitlines()
                if line.split()[:1] == ["inet"]]
        assert len(inet) == 1 and len(inet[0]) == 7
        assert (inet[0][1], inet[0][3]) == ("169.254.169.254/32", "169.254.255.255")
        with _console(vc, N1, name) as con:
            con.run(f"ip link set eth1 up && ip addr add {address}/16 dev eth1")
            assert _ping(con, "169.254.169.254")
        vc.ok("gnt-instance", "modify", "-c", "no", name)
        vc.ok("gnt-instance", "reboot", name)
        assert len(_taps(vc, N1, name)) == 1
        assert _ip("route", "show", address).strip() == ""
    finally:
        vc.run("gnt-instance", "remove", "-f", name)
        vc.run("gnt-cluster", "modify", "--instance-communication-network=")
        vc.run("gnt-network", "disconnect", net)
        vc.run("gnt-network", "remove", net)
