"""Network opcodes: add, remove, change, connect to and disconnect from a
node group (doc/networks.md; Ganeti's parameter names)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ganeti import constants
from ganeti.opcodes.base import OpCode, param

__all__ = ["OpNetworkAdd", "OpNetworkRemove", "OpNetworkSetParams", "OpNetworkConnect",
           "OpNetworkDisconnect", "ALL_OPCODES"]


@dataclass(kw_only=True)
class OpNetworkAdd(OpCode):
    """Add an IP network with its address pool."""

    OP_DSC_FIELD = "network_name"

    network_name: str
    network: str
    gateway: str | None = None
    network6: str | None = None
    gateway6: str | None = None
    mac_prefix: str | None = None
    add_reserved_ips: list[str] | None = None
    conflicts_check: bool = True
    tags: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class OpNetworkRemove(OpCode):
    """Remove a network connected to no node group."""

    OP_DSC_FIELD = "network_name"

    network_name: str
    force: bool = False


@dataclass(kw_only=True)
class OpNetworkSetParams(OpCode):
    """Change a network's gateways, IPv6 network, MAC prefix and reserved addresses."""

    OP_DSC_FIELD = "network_name"

    network_name: str
    gateway: str | None = None
    network6: str | None = None
    gateway6: str | None = None
    mac_prefix: str | None = None
    add_reserved_ips: list[str] | None = None
    remove_reserved_ips: list[str] | None = None


@dataclass(kw_only=True)
class OpNetworkConnect(OpCode):
    """Connect a network to a node group with a NIC mode, link and VLAN."""

    OP_DSC_FIELD = "network_name"

    group_name: str
    network_name: str
    network_mode: str = param(choices=constants.NIC_VALID_MODES)
    network_link: str
    network_vlan: str = ""
    conflicts_check: bool = True


@dataclass(kw_only=True)
class OpNetworkDisconnect(OpCode):
    """Disconnect a network from a node group (no instance there may use it)."""

    OP_DSC_FIELD = "network_name"

    group_name: str
    network_name: str


ALL_OPCODES: list[type[OpCode]] = [OpNetworkAdd, OpNetworkRemove, OpNetworkSetParams,
                                   OpNetworkConnect, OpNetworkDisconnect]
