"""``gnt-network``: IP networks with address pools, connected to node groups
(doc/networks.md)."""

from __future__ import annotations

from ganeti import cli, constants, errors
from ganeti.cli import verbs
from ganeti.client import tags_common
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "parse_nic_params", "format_info"]

#: The default fields of ``list``, Ganeti's.
LIST_FIELDS = ["name", "network", "gateway", "mac_prefix", "group_list", "tags"]
_INFO_FIELDS = ["name", "network", "gateway", "network6", "gateway6", "mac_prefix",
                "free_count", "reserved_count", "map", "group_list", "inst_list",
                "external_reservations", "serial_no", "uuid"]


def _addresses(text: str | None) -> list[str] | None:
    return [a.strip() for a in text.split(",") if a.strip()] if text else None


def add_network(opts: Any, args: list[str]) -> int:
    """Add a network (OP_NETWORK_ADD)."""
    if not opts.network:
        raise errors.ParameterError("--network is required (the IPv4 subnet, e.g."
                                    " 192.0.2.0/24)", errors.ECODE_INVAL)
    op = wire.network_add(
        network_name=args[0], network=opts.network, gateway=opts.gateway,
        network6=opts.network6, gateway6=opts.gateway6, mac_prefix=opts.mac_prefix,
        add_reserved_ips=_addresses(opts.add_reserved_ips),
        conflicts_check=opts.conflicts_check,
        tags=[t for t in (opts.tags or "").split(",") if t])
    cli.submit_or_send(op, opts)
    return cli.EXIT_SUCCESS


def modify_network(opts: Any, args: list[str]) -> int:
    """Change a network (OP_NETWORK_SET_PARAMS); ``none`` clears a value."""
    changes = {"gateway": opts.gateway, "network6": opts.network6, "gateway6": opts.gateway6,
               "mac_prefix": opts.mac_prefix,
               "add_reserved_ips": _addresses(opts.add_reserved_ips),
               "remove_reserved_ips": _addresses(opts.remove_reserved_ips)}
    if all(value is None for value in changes.values()):
        cli.to_stderr("Please give at least one of the parameters.")
        return cli.EXIT_FAILURE
    cli.submit_or_send(wire.drop_none(wire.network_set_params(network_name=args[0], **changes)),
                       opts)
    return cli.EXIT_SUCCESS


def remove_network(opts: Any, args: list[str]) -> int:
    """Remove a network connected to no node group (OP_NETWORK_REMOVE)."""
    cli.submit_or_send(wire.network_remove(network_name=args[0], force=opts.force), opts)
    return cli.EXIT_SUCCESS


def parse_nic_params(values: list[str] | None) -> dict[str, str]:
    """``-N mode=MODE,link=LINK,vlan=VLAN`` (repeatable); mode defaults to bridged."""
    params = {"mode": constants.NIC_MODE_BRIDGED, "link": "", "vlan": ""}
    for value in values or []:
        for item in value.split(","):
            key, sep, val = item.partition("=")
            if not sep or key not in params:
                raise errors.ParameterError(
                    f"Invalid NIC parameter {item!r} (mode=, link= or vlan=)", errors.ECODE_INVAL)
            params[key] = val
    return params


def _groups(opts: Any, names: list[str]) -> list[str]:
    """The groups named, or every node group."""
    if names:
        return names
    rows = cli.get_client(opts).QueryGroups(None, ["name"], False)
    return [row[0] for row in rows]


def connect_network(opts: Any, args: list[str]) -> int:
    """Connect a network to node groups (all without names): one job per group."""
    params = parse_nic_params(opts.nicparams)
    if not params["link"]:       # as Ganeti: the cluster's default NIC link
        nic_defaults = cli.get_client(opts).QueryClusterInfo().get("nicparams", {})
        params["link"] = str(nic_defaults.get("default", nic_defaults).get("link") or "")
    # Ganeti 2.x's positional form: NETWORK MODE LINK [GROUP...]
    names = list(args[1:])
    if not opts.nicparams and len(names) >= 2 and names[0] in constants.NIC_VALID_MODES:
        params["mode"], params["link"] = names[0], names[1]
        names = names[2:]
    for group in _groups(opts, names):
        cli.submit_or_send(wire.network_connect(
            group_name=group, network_name=args[0], network_mode=params["mode"],
            network_link=params["link"], network_vlan=params["vlan"],
            conflicts_check=opts.conflicts_check), opts)
    return cli.EXIT_SUCCESS


def disconnect_network(opts: Any, args: list[str]) -> int:
    """Disconnect a network from node groups (all without names)."""
    for group in _groups(opts, list(args[1:])):
        cli.submit_or_send(wire.network_disconnect(group_name=group, network_name=args[0]),
                           opts)
    return cli.EXIT_SUCCESS


def format_info(row: dict[str, Any]) -> list[str]:
    """``gnt-network info`` lines of one network, Ganeti's layout."""
    size = len(row["map"])
    free = row["free_count"]
    lines = [f"Network name: {row['name']}", f"UUID: {row['uuid']}",
             f"Serial number: {row['serial_no']}", f"  Subnet: {row['network']}",
             f"  Gateway: {row['gateway']}", f"  IPv6 Subnet: {row['network6']}",
             f"  IPv6 Gateway: {row['gateway6']}", f"  Mac Prefix: {row['mac_prefix']}",
             f"  Size: {size}", f"  Free: {free} ({free * 100.0 / size if size else 0:.2f}%)",
             "  Usage map:"]
    for idx in range(0, size, 64):
        lines.append(f"     {str(idx).rjust(4)} {row['map'][idx:idx + 64].ljust(64)}"
                     f" {idx + 63}")
    lines.append("         (X) used    (.) free")
    if row["external_reservations"]:
        lines.append("  externally reserved IPs:")
        lines.extend(f"    {line}" for line in _wrapped(row["external_reservations"]))
    if row["group_list"]:
        lines.append("  connected to node groups:")
        for group, mode, link, vlan in row["group_list"]:
            lines.append(f"    {group} (mode:{mode} link:{link} vlan:{vlan})")
    else:
        lines.append("  not connected to any node group")
    if row["inst_list"]:
        lines.append(f"  used by {len(row['inst_list'])} instances:")
        for name in row["inst_list"]:
            lines.append(f"    {name}")
    else:
        lines.append("  not used by any instances")
    return lines


def _group_list_text(groups: Any) -> Any:
    """Ganeti's list cell of ``group_list``: ``name (mode, link, vlan)``, comma-joined."""
    if not isinstance(groups, list):
        return groups
    return ", ".join(f"{g[0]} ({g[1]}, {g[2]}, {g[3]})" for g in groups)


def _wrapped(text: str, width: int = 64) -> list[str]:
    """``text`` (comma-separated items) cut into lines of at most ``width`` characters."""
    lines: list[str] = []
    for item in text.split(", "):
        if lines and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += ", " + item
        else:
            lines.append(item)
    return lines


def show_network_info(opts: Any, args: list[str]) -> int:
    """Show networks (all without names)."""
    qfilter = ["|"] + [["==", "name", n] for n in args] if args else None
    result = cli.get_client(opts).Query(constants.QR_NETWORK, _INFO_FIELDS, qfilter)
    for cells in result["data"]:
        for line in format_info({f: cell[1] for f, cell in zip(_INFO_FIELDS, cells)}):
            cli.to_stdout(line)
    return cli.EXIT_SUCCESS


_NO_CONFLICTS = cli.Option("--no-conflicts-check", dest="conflicts_check", action="store_false",
                           default=True, help="Do not refuse addresses that conflict with"
                           " existing NICs")
_JOB_OPTS = [cli.SUBMIT_OPT, cli.PRINT_JOBID_OPT, cli.PRIORITY_OPT, cli.DRY_RUN_OPT]
_PARAM_OPTS = [
    cli.Option("--gateway", dest="gateway", default=None, metavar="ADDRESS",
               help="IPv4 gateway (in the network; 'none' removes it on modify)"),
    cli.Option("--network6", dest="network6", default=None, metavar="SUBNET",
               help="IPv6 subnet"),
    cli.Option("--gateway6", dest="gateway6", default=None, metavar="ADDRESS",
               help="IPv6 gateway"),
    cli.Option("--mac-prefix", dest="mac_prefix", default=None, metavar="PREFIX",
               help="MAC prefix of NICs on this network (three octets, e.g. aa:00:00)"),
    cli.Option("--add-reserved-ips", dest="add_reserved_ips", default=None,
               metavar="ADDRESS,...", help="Addresses no instance may get (comma-separated)"),
]
_NET: list[cli.Arg] = [cli.ArgUnknown(min=1, max=1, name="NETWORK")]
_NET_GROUPS: list[cli.Arg] = [cli.ArgUnknown(min=1, max=1, name="NETWORK"),
                              cli.ArgUnknown(name="GROUP")]

commands: dict[str, cli.Command] = {
    "add": (add_network, _NET, [cli.Option("--network", dest="network", default=None,
                                           metavar="SUBNET",
                                           help="IPv4 subnet, /16 to /30 (required)"),
                                *_PARAM_OPTS, _NO_CONFLICTS,
                                cli.Option("--tags", dest="tags", default=None,
                                           metavar="TAG,...", help="Tags of the network"),
                                *_JOB_OPTS],
            "--network SUBNET [--gateway ADDRESS] [...] NETWORK", "Add a network"),
    "modify": (modify_network, _NET,
               [*_PARAM_OPTS,
                cli.Option("--remove-reserved-ips", dest="remove_reserved_ips", default=None,
                           metavar="ADDRESS,...",
                           help="Addresses to give back to the pool (comma-separated)"),
                *_JOB_OPTS],
               "[--gateway ADDRESS] [...] NETWORK", "Change a network"),
    "remove": (remove_network, _NET, [cli.FORCE_OPT, *_JOB_OPTS], "NETWORK",
               "Remove a network connected to no node group"),
    "connect": (connect_network, _NET_GROUPS,
                [cli.Option("-N", "--nic-parameters", dest="nicparams", action="append",
                            default=[], metavar="mode=MODE,link=LINK,vlan=VLAN",
                            help="NIC mode, link and VLAN of the network in the groups"),
                 _NO_CONFLICTS, *_JOB_OPTS],
                "-N mode=MODE,link=LINK[,vlan=VLAN] NETWORK [GROUP...]",
                "Connect a network to node groups (every group without names)"),
    "disconnect": (disconnect_network, _NET_GROUPS, _JOB_OPTS, "NETWORK [GROUP...]",
                   "Disconnect a network from node groups (every group without names)"),
    "list": (verbs.query_list_verb(constants.QR_NETWORK, LIST_FIELDS,
                                   {"group_list": _group_list_text}),
             [cli.ArgUnknown(name="NETWORK")],
             verbs.LIST_OPTS,
             "[-o FIELDS] [NETWORK...]",
             "List networks; default fields: " + ", ".join(LIST_FIELDS)),
    "list-fields": (verbs.list_fields_verb(constants.QR_NETWORK), [cli.ArgUnknown(name="FIELD")],
                    verbs.LIST_FIELDS_OPTS, "[field...]", "List the fields of networks"),
    "info": (show_network_info, [cli.ArgUnknown(name="NETWORK")], [], "[NETWORK...]",
             "Show networks: subnet, pool usage map, groups and instances"),
    "add-tags": tags_common.add_tags(constants.TAG_NETWORK),
    "list-tags": tags_common.list_tags(constants.TAG_NETWORK),
    "remove-tags": tags_common.remove_tags(constants.TAG_NETWORK),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-network``."""
    return cli.generic_main(commands, argv, prog="gnt-network")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
