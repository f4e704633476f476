"""Network logical units (add, remove, change, connect, disconnect) and the
``network`` resource (doc/networks.md).

A network is an IPv4 subnet with an address pool (:mod:`ganeti.netpool`),
optionally an IPv6 subnet and gateways, and a MAC prefix.  It is
*connected* to node groups, each connection with the NIC mode, link and
VLAN that NICs on that network get in that group (``NodeGroup.networks``,
``{network uuid: {"mode", "link", "vlan"}}``).  The logical units take the
Big Ganeti Lock exclusively (there is no network lock level yet).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, TypeVar

from ganeti import constants, errors, query
from ganeti.utils import validation
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.instance_networks import find_network, network_env
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.common import cluster_hooks_nodes, expand_group, select_named
from ganeti.config import ConfigReader
from ganeti.context import MasterContext
from ganeti.netpool import AddressPool, check_address_in, check_network6
from ganeti.objects import Instance, Network, NodeGroup, instance_all_nodes
from ganeti.opcodes.network import (OpNetworkAdd, OpNetworkConnect, OpNetworkDisconnect,
                                    OpNetworkRemove, OpNetworkSetParams)

__all__ = ["LUNetworkAdd", "LUNetworkRemove", "LUNetworkSetParams", "LUNetworkConnect",
           "LUNetworkDisconnect", "NETWORK_FIELDS", "collect_networks", "expand_network",
           "pool_of"]

_MAC_PREFIX_RE = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
#: a VLAN of a connection: "" (none), ".N" (untagged/access) then ":N" (trunk) parts
_VLAN_RE = re.compile(r"^(\.\d+)?(:\d+)*$")


def expand_network(cfg: ConfigReader, name: str) -> Network:
    """The network called ``name`` (or with that UUID); ECODE_NOENT if unknown."""
    net = find_network(cfg, name)
    if net is None:
        raise errors.OpPrereqError(f"Network '{name}' not found", errors.ECODE_NOENT)
    return net


def pool_of(net: Network) -> AddressPool:
    """The address pool of a stored network."""
    return AddressPool(net.network, net.reservations, net.ext_reservations)


def _mac_prefix(value: str) -> str:
    prefix = value.lower()
    if not _MAC_PREFIX_RE.match(prefix):
        raise errors.ParameterError(f"Invalid MAC prefix {value!r} (three hex octets, e.g."
                                    " aa:00:00)", errors.ECODE_INVAL)
    return prefix


def _gateway6(value: str, network6: str | None) -> str:
    try:
        addr = ipaddress.IPv6Address(value)
    except ValueError:
        raise errors.ParameterError(f"Invalid IPv6 gateway {value!r}", errors.ECODE_INVAL) \
            from None
    if network6 is not None and addr not in ipaddress.IPv6Network(network6):
        raise errors.ParameterError(f"IPv6 gateway {value} is not in {network6}",
                                    errors.ECODE_INVAL)
    return str(addr)


def _none(value: str | None) -> bool:
    """Whether a change asks to clear a value (Ganeti's ``none``)."""
    return value is not None and value.lower() == "none"


def _nics_in(inst: Instance, network: ipaddress.IPv4Network) -> list[str]:
    """``nic/N: IP`` of the NICs of ``inst`` without a network whose IP is in ``network``."""
    found = []
    for idx, nic in enumerate(inst.nics):
        if nic.ip and not nic.network:
            try:
                inside = ipaddress.IPv4Address(nic.ip) in network
            except ValueError:
                continue
            if inside:
                found.append(f"nic/{idx}: {nic.ip}")
    return found


def _group_instances(cfg: ConfigReader, group: NodeGroup) -> list[Instance]:
    """Instances with a node (primary or secondary) in ``group``."""
    nodes = {uuid for uuid, node in cfg.get_all_nodes_info().items() if node.group == group.uuid}
    return [inst for inst in cfg.get_all_instances_info().values()
            if nodes.intersection(instance_all_nodes(inst, cfg.get_instance_disks(inst.uuid)))]


def _node_addresses(cfg: ConfigReader) -> list[str]:
    """The master IP and every node's primary and secondary IP."""
    found = [cfg.get_cluster_info().master_ip]
    for node in cfg.get_all_nodes_info().values():
        found += [node.primary_ip, node.secondary_ip]
    return [addr for addr in found if addr]


_NetOpT = TypeVar("_NetOpT", OpNetworkAdd, OpNetworkRemove, OpNetworkSetParams,
                   OpNetworkConnect, OpNetworkDisconnect)


class _NetworkLU(LogicalUnit[_NetOpT]):
    """What the network LUs share: the Big Ganeti Lock alone (exclusively:
    ``REQ_BGL``), hooks of type NETWORK on the cluster's hook nodes."""

    HTYPE = constants.HTYPE_NETWORK

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)


class LUNetworkAdd(_NetworkLU[OpNetworkAdd]):
    """Add a network: its subnet, pool, gateways and MAC prefix."""

    HPATH = "network-add"

    def CheckArguments(self) -> None:
        if not _NAME_RE.match(self.op.network_name):
            raise errors.ParameterError(
                f"Invalid network name {self.op.network_name!r} (letters, digits, '_', '.',"
                " '+', '-')", errors.ECODE_INVAL)

    def CheckPrereq(self) -> None:
        if self.cfg.get_network_by_name(self.op.network_name) is not None:
            raise errors.OpPrereqError(f"Network '{self.op.network_name}' already exists",
                                       errors.ECODE_EXISTS)
        self.pool = AddressPool.initialize(self.op.network, self.op.gateway)
        for addr in self.op.add_reserved_ips or []:
            self.pool.reserve(addr, external=True)
        self.network6 = check_network6(self.op.network6)
        self.gateway6 = (_gateway6(self.op.gateway6, self.network6)
                         if self.op.gateway6 else None)
        self.mac_prefix = _mac_prefix(self.op.mac_prefix) if self.op.mac_prefix else None
        self.tags = sorted({validation.check_tag(tag) for tag in self.op.tags})
        if len(self.tags) > constants.MAX_TAGS_PER_OBJ:
            raise errors.ParameterError(f"Too many tags ({len(self.tags)}, at most"
                                        f" {constants.MAX_TAGS_PER_OBJ})", errors.ECODE_INVAL)
        if self.op.conflicts_check:
            # as Ganeti: the cluster's own addresses inside the subnet are never given out
            for addr in _node_addresses(self.cfg):
                try:
                    inside = ipaddress.IPv4Address(addr) in self.pool.network
                except ValueError:
                    continue
                if inside and not self.pool.is_reserved(addr, external=True):
                    self.pool.reserve(addr, external=True)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.op.network_name, "NETWORK_NAME": self.op.network_name,
                "NETWORK_SUBNET": str(self.pool.network),
                "NETWORK_GATEWAY": self.op.gateway or "",
                "NETWORK_SUBNET6": self.network6 or "", "NETWORK_GATEWAY6": self.gateway6 or "",
                "NETWORK_MAC_PREFIX": self.mac_prefix or "",
                "NETWORK_TAGS": " ".join(self.op.tags)}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        gateway = (check_address_in(self.op.gateway, self.pool.network, "gateway")
                   if self.op.gateway else None)
        net = Network(name=self.op.network_name, network=str(self.pool.network),
                      gateway=gateway, network6=self.network6, gateway6=self.gateway6,
                      mac_prefix=self.mac_prefix,
                      reservations=self.pool.reservations_text(),
                      ext_reservations=self.pool.ext_reservations_text(),
                      tags=self.tags)
        self.cfg.add_network(net)
        return None


class LUNetworkRemove(_NetworkLU[OpNetworkRemove]):
    """Remove a network no node group is connected to."""

    HPATH = "network-remove"

    def CheckPrereq(self) -> None:
        self.net = expand_network(self.cfg, self.op.network_name)
        groups = sorted(g.name for g in self.cfg.get_all_nodegroups_info().values()
                        if self.net.uuid in g.networks)
        if groups:
            raise errors.OpPrereqError(
                f"Network '{self.net.name}' is connected to node group(s) {', '.join(groups)};"
                " disconnect it first (gnt-network disconnect)", errors.ECODE_STATE)
        users = sorted(inst.name for inst in self.cfg.get_all_instances_info().values()
                       if any(nic.network == self.net.uuid for nic in inst.nics))
        if users:
            raise errors.OpPrereqError(
                f"Network '{self.net.name}' is used by the NICs of instance(s)"
                f" {', '.join(users)}", errors.ECODE_STATE)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.net.name, **network_env(self.net)}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        self.cfg.remove_network(self.net.uuid)
        return None


class LUNetworkSetParams(_NetworkLU[OpNetworkSetParams]):
    """Change a network's gateways, IPv6 subnet, MAC prefix and external reservations.

    ``none`` clears the gateways, the IPv6 subnet and the MAC prefix.
    """

    HPATH = "network-modify"

    def CheckPrereq(self) -> None:
        op = self.op
        self.net = expand_network(self.cfg, op.network_name)
        if not any(v for v in (op.gateway, op.network6, op.gateway6, op.mac_prefix,
                               op.add_reserved_ips, op.remove_reserved_ips)):
            raise errors.OpPrereqError("Please give at least one change", errors.ECODE_INVAL)
        self.pool = pool_of(self.net)
        bounds = {str(self.pool.network.network_address),
                  str(self.pool.network.broadcast_address)}
        self.gateway = self.net.gateway
        if op.gateway:
            new = None if _none(op.gateway) else check_address_in(op.gateway, self.pool.network,
                                                                 "gateway")
            if new != self.gateway:
                if new is not None and (new in bounds or self.pool.is_reserved(new)
                                        or self.pool.is_reserved(new, external=True)):
                    raise errors.OpPrereqError(
                        f"Gateway {new} is already reserved (the network or broadcast"
                        " address, an instance's NIC or an external reservation)",
                        errors.ECODE_STATE)
                if self.gateway and self.pool.is_reserved(self.gateway, external=True):
                    self.pool.release(self.gateway, external=True)
                if new is not None:
                    self.pool.reserve(new, external=True)
                self.gateway = new
        for addr in op.add_reserved_ips or []:
            self.pool.reserve(addr, external=True)
        for addr in op.remove_reserved_ips or []:
            if addr == self.gateway or addr in bounds:
                raise errors.OpPrereqError(
                    f"Cannot release {addr}: it is the gateway, the network or the broadcast"
                    " address", errors.ECODE_INVAL)
            self.pool.release(addr, external=True)
        self.network6 = self.net.network6
        if op.network6:
            self.network6 = None if _none(op.network6) else check_network6(op.network6)
        self.gateway6 = self.net.gateway6
        if op.gateway6:
            self.gateway6 = None if _none(op.gateway6) else op.gateway6
        if self.gateway6 is not None:
            self.gateway6 = _gateway6(self.gateway6, self.network6)
        self.mac_prefix = self.net.mac_prefix
        if op.mac_prefix:
            self.mac_prefix = None if _none(op.mac_prefix) else _mac_prefix(op.mac_prefix)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.net.name, "NETWORK_NAME": self.net.name,
                "NETWORK_SUBNET": self.net.network, "NETWORK_GATEWAY": self.gateway or "",
                "NETWORK_SUBNET6": self.network6 or "", "NETWORK_GATEWAY6": self.gateway6 or "",
                "NETWORK_MAC_PREFIX": self.mac_prefix or ""}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        net = self.net
        net.gateway, net.network6, net.gateway6 = self.gateway, self.network6, self.gateway6
        net.mac_prefix = self.mac_prefix
        net.reservations = self.pool.reservations_text()
        net.ext_reservations = self.pool.ext_reservations_text()
        self.cfg.update(net)
        return None


class LUNetworkConnect(_NetworkLU[OpNetworkConnect]):
    """Connect a network to a node group: NICs on it there get this mode, link and VLAN."""

    HPATH = "network-connect"

    def CheckPrereq(self) -> None:
        self.net = expand_network(self.cfg, self.op.network_name)
        self.group = expand_group(self.cfg, self.op.group_name)
        if not self.op.network_link:
            raise errors.ParameterError("A network needs a link to connect it (the bridge,"
                                        " routing table or switch)", errors.ECODE_INVAL)
        vids = [int(v) for v in re.split(r"[.:]", self.op.network_vlan) if v.isdigit()]
        if not _VLAN_RE.match(self.op.network_vlan) or any(not 1 <= v <= 4094 for v in vids):
            raise errors.ParameterError(
                f"Invalid VLAN {self.op.network_vlan!r} ('.N' for one VLAN, ':N:M...' for a"
                " trunk, or both; VLAN ids 1-4094)", errors.ECODE_INVAL)
        if self.op.network_vlan and self.op.network_mode == constants.NIC_MODE_ROUTED:
            raise errors.ParameterError("A routed connection takes no VLAN",
                                        errors.ECODE_INVAL)
        self.params = {"mode": self.op.network_mode, "link": self.op.network_link,
                       "vlan": self.op.network_vlan}
        subnet = ipaddress.IPv4Network(self.net.network)
        conflicts = [f"{inst.name} ({', '.join(nics)})"
                     for inst in _group_instances(self.cfg, self.group)
                     if (nics := _nics_in(inst, subnet))]
        self.conflicts = conflicts
        if conflicts and self.op.conflicts_check:
            raise errors.OpPrereqError(
                f"Instances of group '{self.group.name}' have NICs with addresses in"
                f" {self.net.network} but not on network '{self.net.name}':"
                f" {'; '.join(sorted(conflicts))} (--no-conflicts-check to connect anyway)",
                errors.ECODE_STATE)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.net.name, **network_env(self.net),
                "GROUP_NAME": self.group.name, "GROUP_NETWORK_MODE": self.op.network_mode,
                "GROUP_NETWORK_LINK": self.op.network_link,
                "GROUP_NETWORK_VLAN": self.op.network_vlan}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        for conflict in self.conflicts:
            feedback_fn(f"WARNING: {conflict}: an address in {self.net.network} outside the"
                        " network's pool")
        current = self.group.networks.get(self.net.uuid)
        if current is not None:   # as Ganeti: an existing connection is kept
            feedback_fn(f"Network '{self.net.name}' is already connected to group"
                        f" '{self.group.name}'"
                        + ("" if current == self.params else
                           " with other parameters; disconnect it first to change them"))
            return None
        self.group.networks = {**self.group.networks, self.net.uuid: dict(self.params)}
        self.cfg.update(self.group)
        return None


class LUNetworkDisconnect(_NetworkLU[OpNetworkDisconnect]):
    """Disconnect a network from a node group no instance there uses it in."""

    HPATH = "network-disconnect"

    def CheckPrereq(self) -> None:
        self.net = expand_network(self.cfg, self.op.network_name)
        self.group = expand_group(self.cfg, self.op.group_name)
        users = sorted(inst.name for inst in _group_instances(self.cfg, self.group)
                       if any(nic.network == self.net.uuid for nic in inst.nics))
        if users:
            raise errors.OpPrereqError(
                f"Instances of group '{self.group.name}' use network '{self.net.name}':"
                f" {', '.join(users)}", errors.ECODE_STATE)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.net.name, **network_env(self.net),
                "GROUP_NAME": self.group.name}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        if self.net.uuid not in self.group.networks:
            feedback_fn(f"Network '{self.net.name}' is not connected to group"
                        f" '{self.group.name}'")
            return None
        self.group.networks = {u: p for u, p in self.group.networks.items()
                               if u != self.net.uuid}
        self.cfg.update(self.group)
        return None


# -- the network resource ---------------------------------------------------------

class NetworkQueryData:
    """What the network fields read: the configuration and the pools, made once."""

    def __init__(self, cfg: ConfigReader) -> None:
        self.groups = list(cfg.get_all_nodegroups_info().values())
        self.instances = list(cfg.get_all_instances_info().values())
        self._pools: dict[str, AddressPool] = {}

    def pool(self, net: Network) -> AddressPool:
        found = self._pools.get(net.uuid)
        if found is None:
            found = self._pools[net.uuid] = pool_of(net)
        return found

    def group_list(self, net: Network) -> list[list[str]]:
        rows = []
        for group in self.groups:
            params = group.networks.get(net.uuid)
            if params is not None:
                rows.append([group.name, *(str(params.get(key, "-"))
                                           for key in ("mode", "link", "vlan"))])
        return sorted(rows)

    def inst_list(self, net: Network) -> list[str]:
        return sorted(inst.name for inst in self.instances
                      if any(nic.network == net.uuid for nic in inst.nics))


def _field(name: str, title: str, kind: str, doc: str, get: Any) -> query.FieldDef:
    return query.FieldDef(name, title, kind, doc, get)


NETWORK_FIELDS = query.make_table([
    _field("name", "Network", constants.QFT_TEXT, "Name", lambda c, n: n.name),
    _field("network", "Subnet", constants.QFT_TEXT, "IPv4 subnet", lambda c, n: n.network),
    _field("gateway", "Gateway", constants.QFT_OTHER, "IPv4 gateway", lambda c, n: n.gateway),
    _field("network6", "IPv6Subnet", constants.QFT_OTHER, "IPv6 subnet",
           lambda c, n: n.network6),
    _field("gateway6", "IPv6Gateway", constants.QFT_OTHER, "IPv6 gateway",
           lambda c, n: n.gateway6),
    _field("mac_prefix", "MacPrefix", constants.QFT_OTHER, "MAC address prefix",
           lambda c, n: n.mac_prefix),
    _field("free_count", "FreeCount", constants.QFT_NUMBER, "Number of available addresses",
           lambda c, n: c.pool(n).free_count),
    _field("reserved_count", "ReservedCount", constants.QFT_NUMBER,
           "Number of reserved addresses", lambda c, n: c.pool(n).reserved_count),
    _field("map", "Map", constants.QFT_TEXT, "Actual mapping", lambda c, n: c.pool(n).map),
    _field("external_reservations", "ExternalReservations", constants.QFT_TEXT,
           "External reservations", lambda c, n: ", ".join(c.pool(n).external_reservations())),
    _field("group_list", "GroupList", constants.QFT_OTHER,
           "List of nodegroups (group name, NIC mode, NIC link, NIC VLAN)",
           lambda c, n: c.group_list(n)),
    _field("group_cnt", "NodeGroups", constants.QFT_NUMBER, "Number of nodegroups",
           lambda c, n: len(c.group_list(n))),
    _field("inst_list", "InstanceList", constants.QFT_OTHER, "List of instances",
           lambda c, n: c.inst_list(n)),
    _field("inst_cnt", "Instances", constants.QFT_NUMBER, "Number of instances",
           lambda c, n: len(c.inst_list(n))),
    _field("tags", "Tags", constants.QFT_OTHER, "Tags", lambda c, n: list(n.tags)),
    _field("uuid", "UUID", constants.QFT_TEXT, "Network UUID", lambda c, n: n.uuid),
    _field("serial_no", "SerialNo", constants.QFT_NUMBER,
           "Network object serial number, incremented on each modification",
           lambda c, n: n.serial_no),
    _field("ctime", "CTime", constants.QFT_TIMESTAMP, "Creation timestamp",
           lambda c, n: n.ctime),
    _field("mtime", "MTime", constants.QFT_TIMESTAMP, "Modification timestamp",
           lambda c, n: n.mtime),
])


def collect_networks(context: MasterContext, qfilter: Any,
                     needs: set[str]) -> tuple[list[Any], Any]:
    """The ``network`` resource; unknown explicitly named networks raise ECODE_NOENT."""
    cfg = context.committed_cfg()
    nets = select_named(cfg.get_all_networks_info().values(),
                        query.requested_names(qfilter, "name"), "Network(s)")
    return nets, NetworkQueryData(cfg)
