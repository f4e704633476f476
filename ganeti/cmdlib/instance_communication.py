"""Instance communication, as Ganeti's (doc/networks.md, "Instance communication").

The cluster parameter ``instance_communication_network`` names a network
that instances can be given a NIC on: ``ganeti:communication:<instance>``,
its MAC generated with the network's prefix, its address taken from the
network's pool.  Setting the parameter creates that network when it is
missing (169.254.0.0/16 and fe80::/10, no gateways, MAC prefix 52:54:00)
and connects it to every node group in routed mode with the link
``communication_rt``; a new node group is connected to it too.  Both are
done by follow-up jobs (OP_NETWORK_ADD, OP_NETWORK_CONNECT), as Ganeti
does, so their checks and hooks are those of ``gnt-network``.

Pure: the functions take configuration objects and return opcodes,
messages and NIC specs; the logical units submit and apply them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ganeti import constants, errors, opcodes
from ganeti.objects import Instance, Network, NodeGroup
from ganeti.opcodes import OpCode
from ganeti.opcodes.instance import DDM_ADD, DDM_REMOVE
from ganeti.opcodes.network import OpNetworkAdd, OpNetworkConnect

__all__ = ["nic_name", "is_communication_nic", "network_warnings", "add_network_op",
           "connect_op", "ensure_network_ops", "one_job", "change_messages", "nic_spec",
           "create_nics", "nic_change"]

#: the value of ``mac`` and ``ip`` asking for a generated MAC, a pool address
_GENERATE, _POOL = "generate", "pool"


def nic_name(instance_name: str) -> str:
    """The name of the instance communication NIC of ``instance_name``."""
    return constants.INSTANCE_COMMUNICATION_NIC_PREFIX + instance_name


def is_communication_nic(name: str | None) -> bool:
    """Whether a NIC called ``name`` is an instance communication NIC."""
    return bool(name) and str(name).startswith(constants.INSTANCE_COMMUNICATION_NIC_PREFIX)


def network_warnings(net: Network) -> list[str]:
    """Ganeti's security warnings about an existing network chosen for instance
    communication: each setting that differs from what Ganeti would create."""
    checks = (("has an IPv4 gateway", net.gateway, None),
              ("has a non-standard IPv4 network address", net.network,
               constants.INSTANCE_COMMUNICATION_NETWORK4),
              ("has an IPv6 gateway", net.gateway6, None),
              ("has a non-standard IPv6 network address", net.network6,
               constants.INSTANCE_COMMUNICATION_NETWORK6),
              ("has a non-standard MAC prefix", net.mac_prefix,
               constants.INSTANCE_COMMUNICATION_MAC_PREFIX))
    return [f"Supplied instance communication network '{net.name}' {what} '{value}', this"
            f" might pose a security risk (default is '{default}')."
            for what, value, default in checks if value != default]


def add_network_op(name: str) -> OpNetworkAdd:
    """The opcode creating the instance communication network ``name``."""
    return OpNetworkAdd(network_name=name, network=constants.INSTANCE_COMMUNICATION_NETWORK4,
                        gateway=None, network6=constants.INSTANCE_COMMUNICATION_NETWORK6,
                        gateway6=None, mac_prefix=constants.INSTANCE_COMMUNICATION_MAC_PREFIX,
                        add_reserved_ips=None, conflicts_check=True, tags=[])


def connect_op(group: str, network_name: str) -> OpNetworkConnect:
    """The opcode connecting node group ``group`` (its UUID, as Ganeti's) to the
    network, routed."""
    return OpNetworkConnect(group_name=group, network_name=network_name,
                            network_mode=constants.INSTANCE_COMMUNICATION_NETWORK_MODE,
                            network_link=constants.INSTANCE_COMMUNICATION_NETWORK_LINK,
                            network_vlan="", conflicts_check=True)


def ensure_network_ops(name: str, net: Network | None,
                       groups: Iterable[NodeGroup]) -> list[OpCode]:
    """The opcodes (one job) that create the network ``name`` when ``net`` is None
    and connect it to each of ``groups`` not connected yet; [] when nothing is to do."""
    ops: list[OpCode] = [] if net is not None else [add_network_op(name)]
    ops += [connect_op(group.uuid, name)
            for group in sorted(groups, key=lambda g: g.name)
            if net is None or net.uuid not in group.networks]
    return ops


def one_job(ops: list[OpCode]) -> list[list[dict[str, Any]]]:
    """``ops`` as the single job :meth:`Processor.submit_many_jobs` takes ([] for none)."""
    return [[opcodes.to_dict(op) for op in ops]] if ops else []


def change_messages(old: str, new: str, old_exists: bool) -> list[str]:
    """The feedback of changing the cluster's instance communication network from
    ``old`` to ``new`` ('' for none), Ganeti's words; ``old_exists``: whether
    the old network is still in the configuration."""
    if new == old:
        return [f"Instance communication network already is '{new}', nothing to do."]
    messages = []
    if old and old_exists:
        messages.append(f"Previous instance communication network '{old}' should be removed"
                        " manually.")
    if new:
        messages.append(f"Changing instance communication network to '{new}', only new"
                        " instances will be affected.")
    else:
        messages.append("Disabling instance communication network, only new instances will"
                        " be affected.")
    return messages


def _need_network(network: str) -> str:
    if not network:
        raise errors.OpPrereqError(
            "Instance communication needs the cluster's instance communication network;"
            " set one first (gnt-cluster modify --instance-communication-network NAME)",
            errors.ECODE_STATE)
    return network


def nic_spec(instance_name: str, network: str) -> dict[str, Any]:
    """The NIC spec (as ``nics`` of OP_INSTANCE_CREATE) of the instance communication
    NIC: a generated MAC and an address of ``network``'s pool.  Raises
    :class:`errors.OpPrereqError` (ECODE_STATE) when ``network`` is '' (none set)."""
    return {"name": nic_name(instance_name), "mac": _GENERATE, "ip": _POOL,
            "network": _need_network(network)}


def create_nics(nics: list[dict[str, Any]], instance_name: str,
                network: str) -> list[dict[str, Any]]:
    """``nics`` of a creation with the instance communication NIC at the end, unless
    a NIC of that name is given already (as Ganeti does)."""
    name = nic_name(instance_name)
    if any(isinstance(nic, dict) and nic.get("name") == name for nic in nics):
        return nics
    return [*nics, nic_spec(instance_name, network)]


def nic_change(inst: Instance, enable: bool,
               network: str) -> tuple[str, int | str, dict[str, Any]] | None:
    """The NIC modification (``[op, index, params]``) that adds (``enable``) or
    removes the instance communication NIC of ``inst`` (named by its name); None
    when it already has it, or has none to remove.  Adding with no network set raises
    :class:`errors.OpPrereqError`."""
    name = nic_name(inst.name)
    present = any(nic.name == name for nic in inst.nics)
    if enable and not present:
        return (DDM_ADD, -1, nic_spec(inst.name, network))
    if not enable and present:
        return (DDM_REMOVE, name, {})
    return None
