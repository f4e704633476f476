"""NICs on networks: what an instance's NIC takes from its network (doc/networks.md,
"NICs on networks").

A NIC spec that names a ``network`` gets the mode, link and VLAN of that
network's connection to the node group of the instance's primary node,
and its ``ip``: ``pool`` takes the lowest free address of the network, an
address is reserved as given (refused when an instance holds it or a
running job was given it; when it is reserved externally, unless
``--no-conflicts-check``, as in Ganeti).  The addresses are handed out by the
configuration writer until the logical unit ends; the pool itself
changes in the same write as the instance (:mod:`ganeti.config.netusers`).
A NIC without a network may not take ``ip=pool``, nor (with the conflicts
check) an address inside a network connected to the group.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ganeti import constants, errors, parameters
from ganeti.config import ConfigReader, ConfigWriter
from ganeti.config.netusers import Holding
from ganeti.objects import NIC, Cluster, Network, NodeGroup

__all__ = ["IP_POOL", "find_network", "attach_networks", "check_routed", "network_env",
           "netinfo_list"]

#: the ``ip`` value asking for a free address of the NIC's network
IP_POOL = "pool"


def find_network(cfg: ConfigReader, name: str) -> Network | None:
    """The network called ``name``, or with that UUID; None when there is none."""
    return cfg.get_network_by_name(name) or cfg.get_network(name)


def attach_networks(cfg: ConfigWriter, nics: list[NIC], specs: list[dict[str, Any]],
                    group: NodeGroup, *, check: bool, held: list[Holding],
                    first: int = 0, generated: list[str] | None = None) -> None:
    """Resolve the networks of ``nics`` (built from ``specs``, index ``first`` on).

    ``nic.network`` holds the name (or UUID) given and becomes the
    network's UUID; the NIC's parameters become the group connection's.
    Addresses handed out are appended to ``held`` as they are (the caller
    releases them: :meth:`ConfigWriter.release_ips`).  A MAC generated for
    the NIC (in ``generated``) is made again with the network's MAC prefix
    when it has one, as Ganeti does.  Raises :class:`errors.OpPrereqError`
    naming the NIC.
    """
    connected = [net for uuid in group.networks
                 if (net := cfg.get_network(uuid)) is not None]
    for idx, (nic, spec) in enumerate(zip(nics, specs), first):
        if not nic.network:
            _check_plain_nic(idx, nic, connected, group, check)
            continue
        net = find_network(cfg, nic.network)
        if net is None:
            raise errors.OpPrereqError(f"NIC {idx}: network '{nic.network}' not found",
                                       errors.ECODE_NOENT)
        given = [key for key in ("mode", "link", "bridge", "vlan") if spec.get(key)]
        if given:
            raise errors.OpPrereqError(
                f"NIC {idx}: with a network ({net.name}) the NIC's {', '.join(given)} come"
                f" from the network's connection to group {group.name}; do not give them",
                errors.ECODE_INVAL)
        conn = group.networks.get(net.uuid)
        if conn is None:
            raise errors.OpPrereqError(
                f"NIC {idx}: network {net.name} is not connected to node group {group.name}"
                " (gnt-network connect)", errors.ECODE_INVAL)
        nic.network = net.uuid
        nic.nicparams = {key: conn[key] for key in ("mode", "link", "vlan")
                         if conn.get(key) not in (None, "")}
        if net.mac_prefix and generated is not None and nic.mac in generated \
                and not nic.mac.startswith(net.mac_prefix.lower() + ":"):
            old, nic.mac = nic.mac, cfg.generate_mac(net.mac_prefix)
            generated.append(nic.mac)
            cfg.release_macs([old])
            generated.remove(old)
        if nic.ip is None:
            continue
        try:
            nic.ip = cfg.reserve_ip(net.uuid, None if nic.ip == IP_POOL else nic.ip,
                                    check=check)
        except errors.OpPrereqError as exc:
            raise errors.OpPrereqError(f"NIC {idx}: {exc.args[0]}", exc.args[1]) from None
        held.append((net.uuid, nic.ip))


def check_routed(cluster: Cluster, nics: list[NIC], first: int = 0) -> None:
    """Refuse a routed NIC without an address (the node routes that address to it),
    as Ganeti does."""
    for idx, nic in enumerate(nics, first):
        mode = parameters.fill_nicparams(cluster, nic.nicparams).get("mode")
        if mode == constants.NIC_MODE_ROUTED and not nic.ip:
            raise errors.OpPrereqError(f"NIC {idx}: a routed NIC needs an IP address (the"
                                       " node routes it to the NIC)", errors.ECODE_INVAL)


def _check_plain_nic(idx: int, nic: NIC, connected: list[Network], group: NodeGroup,
                     check: bool) -> None:
    if nic.ip == IP_POOL:
        raise errors.OpPrereqError(f"NIC {idx}: ip=pool needs a network (network=NAME)",
                                   errors.ECODE_INVAL)
    if not nic.ip or not check:
        return
    try:
        addr = ipaddress.ip_address(nic.ip)
    except ValueError:
        return
    for net in connected:
        if addr.version == 4 and addr in ipaddress.IPv4Network(net.network):
            raise errors.OpPrereqError(
                f"NIC {idx}: the address {nic.ip} belongs to network {net.name}, connected"
                f" to group {group.name}, but the NIC is not on it (give network={net.name},"
                " or --no-conflicts-check)", errors.ECODE_STATE)


def network_env(net: Network, prefix: str = "") -> dict[str, str]:
    """A network's variables for hooks and OS scripts, Ganeti's names after ``prefix``:
    ``NETWORK_NAME``, ``_UUID``, ``_TAGS``, and when set ``_SUBNET``, ``_GATEWAY``,
    ``_SUBNET6``, ``_GATEWAY6``, ``_MAC_PREFIX``."""
    env = {f"{prefix}NETWORK_NAME": net.name, f"{prefix}NETWORK_UUID": net.uuid,
           f"{prefix}NETWORK_TAGS": " ".join(sorted(net.tags))}
    for key, value in (("SUBNET", net.network), ("GATEWAY", net.gateway),
                       ("SUBNET6", net.network6), ("GATEWAY6", net.gateway6),
                       ("MAC_PREFIX", net.mac_prefix)):
        if value:
            env[f"{prefix}NETWORK_{key}"] = value
    return env


def netinfo_list(cfg: ConfigReader, nics: list[NIC]) -> list[dict[str, str] | None] | None:
    """``nics_netinfo`` of an instance RPC dict: per NIC, the :func:`network_env` of
    its network (the node gives it to the OS scripts as ``NIC_n_NETWORK_*``); None
    when no NIC is on a network."""
    infos = [network_env(net) if nic.network and (net := cfg.get_network(nic.network))
             else None for nic in nics]
    return infos if any(infos) else None
