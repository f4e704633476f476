"""The documents of a cloud-init NoCloud seed (pure; doc/images.md, "cloud-init").

Three texts, each a function of plain data: ``meta-data`` (instance id and
host name), ``network-config`` (version 2, one entry per NIC matched by its
MAC) and ``user-data`` (a ``#cloud-config`` document from OS parameters, or
the whole document an operator gave as the private OS parameter
:data:`USER_DATA_PARAM`).  Strings are written as JSON strings, which YAML
reads as double-quoted scalars, so no value can break the document.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SeedNic", "USER_DATA_PARAM", "SEED_PARAMS", "DNS_PARAMS", "VOLUME_ID", "meta_data",
           "network_config", "check_dns_params", "user_data", "seed_nics", "split_list"]

#: the private OS parameter holding a whole user-data document
USER_DATA_PARAM = "user_data"
#: the public OS parameters user-data is built from
SEED_PARAMS = ("user", "ssh_authorized_keys", "packages")
#: the public OS parameters of the static NICs' DNS settings in network-config
DNS_PARAMS = ("dns_servers", "dns_search")
#: the volume id cloud-init's NoCloud data source looks for
VOLUME_ID = "cidata"


@dataclass(frozen=True)
class SeedNic:
    """A NIC as the guest is told about it: static when ``address`` is set."""

    mac: str
    address: str | None = None      # "192.0.2.10/24"
    gateway: str | None = None


def _q(text: str) -> str:
    return json.dumps(text)


def meta_data(instance_uuid: str, hostname: str) -> str:
    """``meta-data``: the instance id (changes make cloud-init run again) and host name."""
    return f"instance-id: {_q(instance_uuid)}\nlocal-hostname: {_q(hostname)}\n"


def network_config(nics: Sequence[SeedNic], osparams: Mapping[str, Any] | None = None) -> str:
    """``network-config`` version 2: each NIC matched by MAC, static (with ``gateway4``
    when its network has a gateway) or DHCP.  A static NIC also gets the DNS servers
    and search domains of the OS parameters ``dns_servers`` and ``dns_search``
    (separated by spaces or ``;``); a DHCP NIC takes its DNS from the DHCP server."""
    lines = ["version: 2", "ethernets:"]
    if not nics:
        return "version: 2\nethernets: {}\n"
    params = osparams or {}
    servers = split_list(str(params.get("dns_servers", "") or ""), " ;\t\n")
    search = split_list(str(params.get("dns_search", "") or ""), " ;\t\n")
    for idx, nic in enumerate(nics):
        lines += [f"  nic{idx}:", "    match:", f"      macaddress: {_q(nic.mac.lower())}"]
        if nic.address:
            lines += ["    dhcp4: false", "    addresses:", f"      - {_q(nic.address)}"]
            if nic.gateway:
                # gateway4, not a 0.0.0.0/0 entry of routes: cloud-init's ifupdown
                # renderer (Debian's images) writes a route as "post-up route add",
                # net-tools that a minimal Debian lacks, and the default route was
                # silently missing; gateway4 becomes ifupdown's own "gateway" line
                lines.append(f"    gateway4: {_q(nic.gateway)}")
            if servers or search:
                lines.append("    nameservers:")
                if servers:
                    lines += ["      addresses:", *(f"        - {_q(a)}" for a in servers)]
                if search:
                    lines += ["      search:", *(f"        - {_q(d)}" for d in search)]
        else:
            lines.append("    dhcp4: true")
    return "\n".join(lines) + "\n"


def check_dns_params(osparams: Mapping[str, Any]) -> None:
    """Refuse a ``dns_servers`` entry that is no IP address (``ValueError`` naming it)."""
    for server in split_list(str(osparams.get("dns_servers", "") or ""), " ;\t\n"):
        try:
            ipaddress.ip_address(server)
        except ValueError:
            raise ValueError(f"dns_servers: {server!r} is not an IP address") from None


def split_list(value: str, seps: str) -> list[str]:
    """The non-empty items of ``value`` split at any character of ``seps``."""
    items = [value]
    for sep in seps:
        items = [part for item in items for part in item.split(sep)]
    return [item.strip() for item in items if item.strip()]


def user_data(osparams: Mapping[str, Any], private_document: str | None = None) -> str:
    """``user-data``: the private document as given, else a ``#cloud-config``.

    ``user`` names the default user, ``ssh_authorized_keys`` are keys
    separated by ``;`` or new lines (a key holds spaces, and ``,``
    separates ``-O`` parameters), ``packages`` names separated by spaces.
    """
    if private_document:
        return private_document
    lines = ["#cloud-config"]
    user = str(osparams.get("user", "") or "").strip()
    if user:
        lines += ["system_info:", "  default_user:", f"    name: {_q(user)}"]
    keys = split_list(str(osparams.get("ssh_authorized_keys", "") or ""), ";\n")
    if keys:
        lines.append("ssh_authorized_keys:")
        lines += [f"  - {_q(key)}" for key in keys]
    packages = split_list(str(osparams.get("packages", "") or ""), " \t\n")
    if packages:
        lines.append("packages:")
        lines += [f"  - {_q(pkg)}" for pkg in packages]
    return "\n".join(lines) + "\n"


def seed_nics(nics: Sequence[Mapping[str, Any]],
              networks: Mapping[str, Mapping[str, Any]]) -> list[SeedNic]:
    """The NICs of an instance (config dicts) with their networks' subnets and gateways.

    A NIC with an ip on a network gets that network's prefix length and
    gateway; with an ip but no network, a /32 address and no gateway.
    """
    out: list[SeedNic] = []
    for nic in nics:
        ip = nic.get("ip")
        if not ip:
            out.append(SeedNic(mac=str(nic.get("mac", ""))))
            continue
        prefix, gateway = 32, None
        net = networks.get(str(nic.get("network") or ""))
        if net is not None and net.get("network"):
            prefix = ipaddress.ip_network(str(net["network"]), strict=False).prefixlen
            gateway = net.get("gateway") or None
        out.append(SeedNic(mac=str(nic.get("mac", "")), address=f"{ip}/{prefix}",
                           gateway=gateway))
    return out
