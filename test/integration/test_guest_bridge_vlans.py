"""Bridged NICs with VLANs, on a guest node's kernel (doc/kvm.md, "NIC modes").

A bridged NIC with a VLAN needs a bridge that filters VLANs, and the kernel
of the machine the suite runs on may not have that feature
(``CONFIG_BRIDGE_VLAN_FILTERING``: "Operation not supported").  The nodes of
the session's guest cluster boot Debian's kernel, which has it, so these
tests run there:

* through the daemons: kvm instances on node1 (qemu under TCG inside the
  guest; their own guest never has to boot, the taps are what is checked)
  whose NICs are on a VLAN-filtering bridge: ``vlan=.100`` makes the tap an
  untagged member of VLAN 100 only, ``:100:200`` a tagged member of both,
  a hot-added NIC gets its VLAN, a bridge that does not filter VLANs is
  refused by name, and the taps leave the bridge when the instance stops;
* with real packets: network namespaces on node1, each with one end of a
  veth pair whose other end is put on the bridge by the same function the
  node daemon runs for a tap (``taps.attach``).  Two ends on VLAN 100 reach
  each other, one on VLAN 200 reaches neither, a trunk reaches both VLANs
  through its tagged sub-interfaces, and moving the VLAN-200 port to VLAN
  100 by hand joins it (so the VLAN was what kept it apart).

A booted guest OS is not used for the packets: under TCG inside a TCG guest
the tinylinux guest takes over three minutes to boot.  The packets between
booted guests, live migration and hot-plug are tested on this machine with
Open vSwitch (test/integration/test_kvm_nic_modes.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ganeti import constants
from ganeti.hypervisor.kvm import hotplug
from test.integration.guest_cluster_harness import GuestClusterFixture

# the session's guest cluster may be made by the first test that asks (minutes under load)
pytestmark = pytest.mark.timeout(900)

NODE = "node1"
BRIDGE = "gtvlan0"          # filters VLANs
PLAIN_BRIDGE = "gtnovlan0"  # does not


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)


def _sh(gc: GuestClusterFixture, command: str, *, timeout: float = 120.0) -> str:
    res = gc.ssh(NODE, command, timeout=timeout)
    assert not res.failed, f"{command}: {res.fail_reason} {res.stdout} {res.stderr}"
    return res.stdout


def _vlans(gc: GuestClusterFixture) -> dict[str, dict[int, set[str]]]:
    """Port -> VLAN id -> flags ("PVID", "Egress Untagged") on node1's bridges."""
    out: dict[str, dict[int, set[str]]] = {}
    for port in json.loads(_sh(gc, "bridge -j vlan show") or "[]"):
        out[port["ifname"]] = {v["vlan"]: set(v.get("flags", [])) for v in port["vlans"]}
    return out


@pytest.fixture
def bridged(guest_cluster: GuestClusterFixture) -> Iterator[GuestClusterFixture]:
    """The guest cluster with kvm enabled and node1's two bridges; undone after."""
    gc = guest_cluster
    with gc.kvm_enabled():
        _sh(gc, f"ip link add {BRIDGE} type bridge vlan_filtering 1 && ip link set {BRIDGE}"
                f" up && ip link add {PLAIN_BRIDGE} type bridge && ip link set {PLAIN_BRIDGE} up")
        try:
            yield gc
        finally:
            gc.ssh(NODE, f"ip link del {BRIDGE}; ip link del {PLAIN_BRIDGE}")


def _add(gc: GuestClusterFixture, name: str, *nets: str, start: bool = True):  # type: ignore[no-untyped-def]
    argv = ["gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "--no-install",
            "-H", f"{constants.HT_KVM}", "-B", "memory=128", "-n", f"{NODE}.vcluster",
            "--no-name-check", "--no-ip-check"]
    for idx, net in enumerate(nets):
        argv += ["--net", f"{idx}:{net}"]
    if not start:
        argv.append("--no-start")
    return gc.gnt(*argv, name)


def test_taps_of_kvm_instances_join_their_vlans(bridged: GuestClusterFixture) -> None:
    gc, name = bridged, "vlans.vcluster"
    tap0, tap1, tap2 = (hotplug.tap_name(name, suffix) for suffix in ("0", "1", "h0"))
    try:
        _ok(_add(gc, name, f"mode=bridged,link={BRIDGE},vlan=.100",
                 f"mode=bridged,link={BRIDGE},vlan=:100:200"))
        ports = _vlans(gc)
        # an access port: VLAN 100 untagged and as its PVID, the bridge's default 1 gone
        assert ports[tap0] == {100: {"PVID", "Egress Untagged"}}
        # a trunk: tagged members of both, nothing untagged
        assert ports[tap1] == {100: set(), 200: set()}
        # a NIC hot-added to the running instance gets its VLAN too
        _ok(gc.gnt("gnt-instance", "modify", "--hotplug", "--net",
                   f"add:mode=bridged,link={BRIDGE},vlan=.300:400", name))
        assert _vlans(gc)[tap2] == {300: {"PVID", "Egress Untagged"}, 400: set()}
        # the taps go with the instance's qemu, and with them their VLANs
        _ok(gc.gnt("gnt-instance", "shutdown", "--timeout=0", name))
        assert not {tap0, tap1, tap2} & set(_vlans(gc))
    finally:
        gc.gnt("gnt-instance", "remove", "-f", name)


def test_a_vlan_on_a_bridge_that_does_not_filter_is_refused(
        bridged: GuestClusterFixture) -> None:
    gc, name = bridged, "novlan.vcluster"
    try:
        _ok(_add(gc, name, f"mode=bridged,link={PLAIN_BRIDGE},vlan=.100", start=False))
        res = gc.gnt("gnt-instance", "start", name)
        assert res.returncode != 0
        assert f"bridge {PLAIN_BRIDGE} does not filter VLANs" in res.stdout + res.stderr
        assert hotplug.tap_name(name, "0") not in _vlans(gc)   # nothing left on a bridge
        assert gc.kvm_info(NODE, name) is None                 # and no qemu left running
    finally:
        gc.gnt("gnt-instance", "remove", "-f", name)


#: namespace -> (VLAN parameter of its port, shell lines that address it inside)
_ENDS = {
    "gtva": (".100", ["ip addr add 10.70.0.1/24 dev eth0"]),
    "gtvb": (".100", ["ip addr add 10.70.0.2/24 dev eth0"]),
    "gtvc": (".200", ["ip addr add 10.70.0.3/24 dev eth0", "ip addr add 10.71.0.3/24 dev eth0"]),
    # a trunk: VLAN 100 and 200 tagged, on sub-interfaces
    "gtvt": (":100:200", ["ip link add link eth0 name eth0.100 type vlan id 100",
                          "ip link add link eth0 name eth0.200 type vlan id 200",
                          "ip link set eth0.100 up", "ip link set eth0.200 up",
                          "ip addr add 10.70.0.4/24 dev eth0.100",
                          "ip addr add 10.71.0.4/24 dev eth0.200"]),
    # untagged 100 and tagged 200 on one port
    "gtvm": (".100:200", ["ip link add link eth0 name eth0.200 type vlan id 200",
                          "ip link set eth0.200 up", "ip addr add 10.70.0.5/24 dev eth0",
                          "ip addr add 10.71.0.5/24 dev eth0.200"]),
}


def _attach_code() -> str:
    """Put each veth's node end on the bridge as the node daemon puts a tap."""
    calls = "; ".join(
        f"taps.attach('probe', {ns!r}, NicSpec(mac='', mode='bridged', link={BRIDGE!r},"
        f" vlan={vlan!r}))" for ns, (vlan, _) in _ENDS.items())
    return ("from ganeti.hypervisor.base import NicSpec; "
            f"from ganeti.hypervisor.kvm import taps; {calls}")


@pytest.fixture
def ends(bridged: GuestClusterFixture) -> Iterator[GuestClusterFixture]:
    """One namespace per entry of :data:`_ENDS` on node1, its veth's other end on the bridge."""
    gc = bridged
    lines = []
    for ns, (_, inside) in _ENDS.items():
        lines += [f"ip netns add {ns}", f"ip link add {ns} type veth peer name eth0 netns {ns}",
                  f"ip -n {ns} link set lo up", f"ip -n {ns} link set eth0 up"]
        lines += [f"ip netns exec {ns} {line}" for line in inside]
    try:
        _sh(gc, " && ".join(lines))
        gc.python(NODE, _attach_code())
        yield gc
    finally:
        gc.ssh(NODE, "; ".join(f"ip link del {ns}; ip netns del {ns}" for ns in _ENDS))


def _reaches(gc: GuestClusterFixture, ns: str, address: str) -> bool:
    # busybox's ping (busybox-static: make debian-deps), the host's root being the node's
    out = _sh(gc, f"ip netns exec {ns} busybox ping -c 2 -W 2 {address} >/dev/null 2>&1"
                  " && echo reached || echo lost", timeout=60)
    return out.strip() == "reached"


def test_vlans_isolate_real_packets(ends: GuestClusterFixture) -> None:
    gc = ends
    ports = _vlans(gc)
    assert ports["gtva"] == {100: {"PVID", "Egress Untagged"}}
    assert ports["gtvt"] == {100: set(), 200: set()}
    assert ports["gtvm"] == {100: {"PVID", "Egress Untagged"}, 200: set()}
    assert _reaches(gc, "gtva", "10.70.0.2")            # same VLAN
    assert not _reaches(gc, "gtva", "10.70.0.3")        # VLAN 200: isolated
    assert not _reaches(gc, "gtvc", "10.70.0.2")
    # the trunk reaches each VLAN through its tagged sub-interface
    assert _reaches(gc, "gtvt", "10.70.0.1")
    assert _reaches(gc, "gtvt", "10.71.0.3")
    assert not _reaches(gc, "gtvt", "10.70.0.3")        # c's address, but not on VLAN 100
    # untagged 100 plus tagged 200 on one port
    assert _reaches(gc, "gtvm", "10.70.0.2") and _reaches(gc, "gtvm", "10.71.0.3")
    # the VLAN was what kept c apart: its port moved to VLAN 100 by hand joins it
    _sh(gc, "bridge vlan add dev gtvc vid 100 pvid untagged")
    assert _reaches(gc, "gtvc", "10.70.0.2")
