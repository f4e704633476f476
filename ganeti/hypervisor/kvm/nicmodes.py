"""What a kvm NIC's tap device needs on the node, per NIC mode (pure; doc/kvm.md,
"NIC modes").

qemu creates the tap (``ifname``, no scripts); the node then runs the steps
of :func:`plan_up` for the NIC's mode, and those of :func:`plan_down` when
the instance stops (the tap itself goes with qemu, and with it its bridge
membership and its routes):

* ``bridged``: the tap joins the bridge ``link``.  A VLAN (``vlan``)
  needs a bridge with VLAN filtering: ``.N`` makes the port an untagged
  member of VLAN N (its PVID, instead of VLAN 1), ``:N:M`` a tagged member
  of VLANs N and M (a trunk), ``.N:M`` both.
* ``openvswitch``: the tap becomes a port of the Open vSwitch switch
  ``link`` (a port of that name left from before is replaced, in the same
  transaction); ``.N`` an access port of VLAN N (``tag``), ``:N:M`` a trunk of
  N and M (``trunks``), ``.N:M`` untagged N plus tagged M
  (``vlan_mode=native-untagged``).  :func:`plan_down` removes the port
  (Open vSwitch keeps it in its database otherwise).
* ``routed``: the tap answers ARP for the addresses routed to it (proxy
  ARP), forwards, and the NIC's address gets a host route through the tap
  in the routing table ``link`` (the main table when empty), as Ganeti's
  ``kvm-ifup`` does.  The NIC of instance communication (a routed NIC named
  ``ganeti:communication:...``, doc/networks.md) instead gets the address
  169.254.169.254/32 on its tap (broadcast 169.254.255.255) and a host route
  in the main table, as Ganeti's ``ifup-os`` does: the guest reaches its
  node at that address, and the node the guest at the NIC's.

Steps are data: an argv tuple to run, or ``("write", path, text)`` for a
``/proc/sys`` setting, so that tests read them without a node.
"""

from __future__ import annotations

import ipaddress
import json
import re

from ganeti import constants, errors

__all__ = ["Step", "Vlan", "parse_vlan", "plan_up", "plan_down", "bridge_vlan_pvid", "WRITE",
           "is_communication"]

#: a step: an argv, or (:data:`WRITE`, path, text)
Step = tuple[str, ...]
#: the first word of a step that writes a file instead of running a command
WRITE = "write"

_VLAN_RE = re.compile(r"^(\.\d+)?((:\d+)*)$")
_MAX_VID = 4094


class Vlan:
    """A NIC's ``vlan`` parameter: the untagged VLAN (or None) and the tagged ones."""

    def __init__(self, untagged: int | None, tagged: tuple[int, ...]) -> None:
        self.untagged = untagged
        self.tagged = tagged

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vlan) and (self.untagged, self.tagged) == (other.untagged,
                                                                             other.tagged)

    def __repr__(self) -> str:
        return f"Vlan({self.untagged}, {self.tagged})"

    @property
    def empty(self) -> bool:
        """Whether no VLAN is asked for."""
        return self.untagged is None and not self.tagged


def parse_vlan(text: str | None) -> Vlan:
    """``""``, ``.N``, ``:N[:M...]`` or ``.N:M[...]`` (VLAN ids 1-4094).

    A bare number ``N`` is read as ``.N``, as Ganeti does.  Raises
    :class:`errors.HypervisorError` naming the value otherwise.
    """
    value = (text or "").strip()
    if value.isdigit():
        value = "." + value
    match = _VLAN_RE.match(value)
    if match is None:
        raise errors.HypervisorError(f"Invalid NIC VLAN {text!r} (use .N for an untagged"
                                     " VLAN, :N:M for tagged ones, or both)")
    untagged = int(match.group(1)[1:]) if match.group(1) else None
    tagged = tuple(int(v) for v in match.group(2).split(":") if v)
    for vid in ([untagged] if untagged is not None else []) + list(tagged):
        if not 1 <= vid <= _MAX_VID:
            raise errors.HypervisorError(f"Invalid NIC VLAN {text!r}: VLAN {vid} is outside"
                                         f" 1-{_MAX_VID}")
    return Vlan(untagged, tagged)


def _sysctl(ifname: str, family: str, key: str, value: str) -> Step:
    return (WRITE, f"/proc/sys/net/{family}/conf/{ifname}/{key}", value)


def is_communication(name: str | None, mode: str) -> bool:
    """Whether the NIC called ``name`` with ``mode`` is one of instance communication
    (routed, its name with Ganeti's prefix)."""
    return mode == constants.NIC_MODE_ROUTED and bool(name) and str(name).startswith(
        constants.INSTANCE_COMMUNICATION_NIC_PREFIX)


def _communication_steps(ifname: str, ip: str | None) -> list[Step]:
    """A communication tap: the node's link-local address on it, the guest's route."""
    if not ip:
        raise errors.HypervisorError("An instance communication NIC needs an IP address")
    try:
        addr = ipaddress.IPv4Address(ip)
    except ValueError:
        raise errors.HypervisorError(f"Invalid instance communication address {ip!r}"
                                     " (IPv4)") from None
    return [("ip", "link", "set", ifname, "up"),
            ("ip", "address", "replace", f"{constants.INSTANCE_COMMUNICATION_TAP_ADDRESS}/32",
             "broadcast", constants.INSTANCE_COMMUNICATION_TAP_BROADCAST, "dev", ifname),
            ("ip", "route", "replace", f"{addr}/32", "dev", ifname)]


def plan_up(mode: str, link: str, vlan: str | None, ifname: str, ip: str | None, *,
            default_pvid: int = 1, communication: bool = False) -> list[Step]:
    """The steps that put the tap ``ifname`` of a NIC on its network.

    ``default_pvid``: the VLAN a new port of the bridge ``link`` gets
    (bridged NICs with a VLAN leave it).  ``communication``: a routed NIC of
    instance communication (:func:`is_communication`; ``link`` is not used).

    Raises :class:`errors.HypervisorError` for an unknown mode, a missing
    link (bridged, openvswitch), a bad VLAN, or a VLAN on a routed NIC.
    """
    parsed = parse_vlan(vlan)
    if mode == constants.NIC_MODE_BRIDGED:
        if not link:
            raise errors.HypervisorError("A bridged NIC needs a link (the bridge)")
        steps: list[Step] = [("ip", "link", "set", ifname, "master", link)]
        if not parsed.empty:
            if default_pvid:
                steps.append(("bridge", "vlan", "del", "dev", ifname, "vid",
                              str(default_pvid)))
            if parsed.untagged is not None:
                steps.append(("bridge", "vlan", "add", "dev", ifname, "vid",
                              str(parsed.untagged), "pvid", "untagged"))
            steps += [("bridge", "vlan", "add", "dev", ifname, "vid", str(vid))
                      for vid in parsed.tagged]
        return steps + [("ip", "link", "set", ifname, "up")]
    if mode == constants.NIC_MODE_OVS:
        if not link:
            raise errors.HypervisorError("An openvswitch NIC needs a link (the switch)")
        settings: list[str] = []
        if parsed.untagged is not None and parsed.tagged:
            settings = [f"tag={parsed.untagged}", "vlan_mode=native-untagged",
                        f"trunks={','.join(map(str, parsed.tagged))}"]
        elif parsed.untagged is not None:
            settings = [f"tag={parsed.untagged}", "vlan_mode=access"]
        elif parsed.tagged:
            settings = ["vlan_mode=trunk", f"trunks={','.join(map(str, parsed.tagged))}"]
        # one transaction: a port left from before (a crash, a node reboot) goes
        # first, with whatever VLAN settings it had
        command: Step = ("ovs-vsctl", "--if-exists", "del-port", ifname, "--", "add-port",
                         link, ifname)
        if settings:
            command += ("--", "set", "port", ifname, *settings)
        return [command, ("ip", "link", "set", ifname, "up")]
    if mode == constants.NIC_MODE_ROUTED:
        if not parsed.empty:
            raise errors.HypervisorError(f"A routed NIC takes no VLAN (got {vlan!r})")
        if communication:
            return _communication_steps(ifname, ip)
        steps = [("ip", "link", "set", ifname, "up"),
                 _sysctl(ifname, "ipv4", "proxy_arp", "1"),
                 _sysctl(ifname, "ipv4", "forwarding", "1")]
        if ip:
            try:
                addr = ipaddress.ip_address(ip)
            except ValueError:
                raise errors.HypervisorError(f"Invalid NIC address {ip!r}") from None
            table = ("table", link) if link else ()
            if addr.version == 6:
                steps += [_sysctl(ifname, "ipv6", "proxy_ndp", "1"),
                          _sysctl(ifname, "ipv6", "forwarding", "1"),
                          ("ip", "-6", "route", "replace", f"{addr}/128", "dev", ifname,
                           *table)]
            else:
                steps.append(("ip", "route", "replace", f"{addr}/32", "dev", ifname, *table))
        return steps
    raise errors.HypervisorError(f"Unknown NIC mode {mode!r}")


def plan_down(mode: str, link: str, ifname: str) -> list[Step]:
    """The steps that undo :func:`plan_up` beyond what removing the tap undoes."""
    if mode == constants.NIC_MODE_OVS and link:
        return [("ovs-vsctl", "--if-exists", "del-port", link, ifname)]
    return []


def bridge_vlan_pvid(link: str, details: str) -> int:
    """The VLAN a new port of the bridge ``link`` joins (0: none), from ``details``,
    the output of ``ip -details -json link show dev LINK``; raises
    :class:`errors.HypervisorError` when ``link`` is not a bridge that filters
    VLANs (a VLAN there would silently not isolate the NIC)."""
    try:
        info = (json.loads(details) or [{}])[0].get("linkinfo") or {}
    except (ValueError, AttributeError, IndexError, KeyError, TypeError) as exc:
        raise errors.HypervisorError(f"Cannot read the settings of {link}: {exc}") from None
    if info.get("info_kind") != "bridge":
        raise errors.HypervisorError(f"{link} is not a bridge, so it cannot carry VLANs")
    data = info.get("info_data") or {}
    if data.get("vlan_filtering") != 1:
        raise errors.HypervisorError(
            f"bridge {link} does not filter VLANs (vlan_filtering is off), so a VLAN"
            f" would not isolate the NIC; turn it on (ip link set {link} type bridge"
            " vlan_filtering 1)")
    pvid = data.get("vlan_default_pvid", 1)
    return pvid if isinstance(pvid, int) and pvid >= 0 else 1
