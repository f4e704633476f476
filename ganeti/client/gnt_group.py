"""``gnt-group``: add, modify, remove, rename, list and show node groups, move nodes.

Every verb is one opcode or one query over LUXI (doc/commands.md).  The
instance policy options are shared with ``gnt-cluster``
(:mod:`ganeti.cli.ipolicy_opts`, doc/ipolicy.md).
"""

from __future__ import annotations

from ganeti import cli, constants, errors
from ganeti.cli import ipolicy_opts
from ganeti.client import relocation, tags_common
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "add_group", "modify_group", "remove_group", "rename_group",
           "assign_nodes", "show_group_info", "format_group_info",
           "list_groups", "list_fields", "show_ispecs_cmd", "LIST_DEFAULT_FIELDS"]

LIST_DEFAULT_FIELDS = ["name", "node_cnt", "pinst_cnt", "alloc_policy", "ndparams"]


def _group_params(opts: Any, op: dict[str, Any], current: Any = None) -> dict[str, Any]:
    from ganeti.client.gnt_cluster import parse_diskparams, parse_keyval
    if opts.alloc_policy:
        op["alloc_policy"] = opts.alloc_policy
    ndparams = parse_keyval(opts.ndparams, "node parameters")
    if ndparams:
        op["ndparams"] = ndparams
    diskparams = parse_diskparams(opts.diskparams)
    if diskparams:
        op["diskparams"] = diskparams
    policy = ipolicy_opts.ipolicy_changes(opts, group=True, current=current)
    if policy:
        op["ipolicy"] = policy
    return op


def _effective_policy(opts: Any, name: str) -> Any:
    def fetch() -> dict[str, Any]:
        result = cli.get_client(opts).Query(constants.QR_GROUP, ["ipolicy"],
                                            ["==", "name", name])
        return result["data"][0][0][1]
    return fetch


def _cluster_policy(opts: Any) -> Any:
    return lambda: cli.get_client(opts).QueryClusterInfo()["ipolicy"]


def add_group(opts: Any, args: list[str]) -> int:
    """Create an empty node group (``OP_GROUP_ADD``)."""
    op = _group_params(opts, wire.group_add(group_name=args[0]),
                       _cluster_policy(opts))
    cl = cli.get_client(opts)
    # the connection to the instance communication network is a follow-up job
    failed = cli.follow_result_jobs(cli.submit_or_send(op, opts, cl), cl)
    return cli.EXIT_FAILURE if failed else cli.EXIT_SUCCESS


def modify_group(opts: Any, args: list[str]) -> int:
    """Change a group's allocation policy and parameters (``OP_GROUP_SET_PARAMS``)."""
    op = _group_params(opts, wire.group_set_params(group_name=args[0]),
                       _effective_policy(opts, args[0]))
    if len(op) == 2:
        cli.to_stderr("Please give at least one of the parameters.")
        return cli.EXIT_FAILURE
    result = cli.submit_or_send(op, opts)
    if isinstance(result, list) and result:
        cli.to_stdout(f"Modified node group {args[0]}")
        for param, _ in result:
            cli.to_stdout(f" - {param}")
    return cli.EXIT_SUCCESS


def remove_group(opts: Any, args: list[str]) -> int:
    """Remove an empty node group (``OP_GROUP_REMOVE``)."""
    cli.submit_or_send(wire.group_remove(group_name=args[0]), opts)
    return cli.EXIT_SUCCESS


def rename_group(opts: Any, args: list[str]) -> int:
    """Rename a node group (``OP_GROUP_RENAME``)."""
    cli.submit_or_send(wire.group_rename(group_name=args[0], new_name=args[1]), opts)
    return cli.EXIT_SUCCESS


def assign_nodes(opts: Any, args: list[str]) -> int:
    """Move nodes into a group (``OP_GROUP_ASSIGN_NODES``)."""
    cli.submit_or_send(wire.group_assign_nodes(group_name=args[0], nodes=args[1:],
                                               force=bool(opts.force)), opts)
    return cli.EXIT_SUCCESS


INFO_FIELDS = ["name", "uuid", "alloc_policy", "node_cnt", "pinst_cnt", "ndparams",
               "custom_ndparams", "diskparams", "custom_diskparams", "ipolicy",
               "custom_ipolicy", "tags"]


def format_group_info(group: dict[str, Any]) -> list[tuple[str, Any]]:
    """One group's ``gnt-group info`` entry: Ganeti's keys (``Node group``, ``Node
    parameters``, ``Disk parameters``, ``Instance policy``) and ours (UUID, counts,
    allocation policy, tags)."""
    from ganeti.cli import info   # lazy: CLI start-up
    return [
        ("Node group", group["name"]),
        ("UUID", group["uuid"]),
        ("Number of nodes", group["node_cnt"]),
        ("Number of primary instances", group["pinst_cnt"]),
        ("Allocation policy", group["alloc_policy"]),
        ("Tags", ", ".join(group.get("tags") or [])),
        ("Node parameters", info.params_info(group.get("custom_ndparams"),
                                             group.get("ndparams"))),
        ("Disk parameters", info.params_info(group.get("custom_diskparams"),
                                             group.get("diskparams"))),
        ("Instance policy", ipolicy_opts.ipolicy_info(group.get("ipolicy") or {},
                                                      group.get("custom_ipolicy") or {})),
    ]


def show_group_info(opts: Any, args: list[str]) -> int:
    """Show the parameters and policy of node groups (all, or the given ones)."""
    qfilter = ["|"] + [["==", "name", name] for name in args] if args else None
    result = cli.get_client(opts).Query(constants.QR_GROUP, INFO_FIELDS, qfilter)
    groups = [{f: cell[1] for f, cell in zip(INFO_FIELDS, row)} for row in result["data"]]
    missing = sorted(set(args) - {g["name"] for g in groups})
    if missing:
        raise errors.OpPrereqError(f"Node group(s) not found: {', '.join(missing)}",
                                   errors.ECODE_NOENT)
    from ganeti.cli import info
    info.print_info([format_group_info(group) for group in sorted(groups, key=lambda g: g["name"])])
    return cli.EXIT_SUCCESS


def show_ispecs_cmd(opts: Any, args: list[str]) -> int:
    """Print the ``gnt-group add`` command line re-creating each group's instance specs
    (its own ones; with --include-defaults the effective ones), as Ganeti's."""
    field = "ipolicy" if opts.include_defaults else "custom_ipolicy"
    qfilter = ["|"] + [["==", "name", name] for name in args] if args else None
    result = cli.get_client(opts).Query(constants.QR_GROUP, ["name", field], qfilter)
    rows = [(row[0][1], row[1][1] or {}) for row in result["data"]]
    missing = sorted(set(args) - {name for name, _ in rows})
    if missing:
        raise errors.OpPrereqError(f"Node group(s) not found: {', '.join(missing)}",
                                   errors.ECODE_NOENT)
    order = {name: idx for idx, name in enumerate(args)}
    for name, policy in sorted(rows, key=lambda r: (order.get(r[0], 0), r[0])):
        cli.to_stdout(f"gnt-group add{ipolicy_opts.ipolicy_command(policy, group=True)}"
                      f" {name}")
    return cli.EXIT_SUCCESS


list_groups = cli.query_list_verb(constants.QR_GROUP, LIST_DEFAULT_FIELDS)
list_fields = cli.list_fields_verb(constants.QR_GROUP)

_O = cli.Option
ALLOC_POLICY_OPT = _O("--alloc-policy", dest="alloc_policy", default=None,
                      choices=sorted(constants.VALID_ALLOC_POLICIES),
                      help="Allocation policy of the group (preferred, last_resort,"
                           " unallocable)")
NDP_OPT = _O("-N", "--node-parameters", dest="ndparams", default=None, metavar="KEY=VAL,...",
             help="Node parameters of the group")
DISKP_OPT = _O("-D", "--disk-parameters", dest="diskparams", action="append", default=[],
               metavar="TEMPLATE:KEY=VAL,...",
               help="Disk parameters of the group for a template (repeatable)")
ASSIGN_FORCE_OPT = _O("--force", dest="force", action="store_true", default=False,
                      help="Move the nodes even if that splits instances between groups")

_GROUP = cli.ArgUnknown(min=1, max=1, name="GROUP")
_JOB_OPTS = [cli.SUBMIT_OPT, cli.PRIORITY_OPT, cli.DRY_RUN_OPT]
commands: dict[str, cli.Command] = {
    "add": (add_group, [_GROUP], [ALLOC_POLICY_OPT, NDP_OPT, DISKP_OPT,
                                  *ipolicy_opts.GROUP_IPOLICY_OPTS, *_JOB_OPTS],
            "[--alloc-policy POLICY] [-N PARAMS] [-D TEMPLATE:PARAMS] [ipolicy options] GROUP",
            "Add a new, empty node group"),
    "modify": (modify_group, [_GROUP], [ALLOC_POLICY_OPT, NDP_OPT, DISKP_OPT,
                                        *ipolicy_opts.GROUP_IPOLICY_OPTS, *_JOB_OPTS],
               "[--alloc-policy POLICY] [-N PARAMS] [-D TEMPLATE:PARAMS] [ipolicy options]"
               " GROUP",
               "Change the allocation policy, node and disk parameters or instance policy"
               " of a group ('default' resets a policy value to the cluster's)"),
    "info": (show_group_info, [cli.ArgUnknown(name="GROUP")], [], "[GROUP...]",
             "Show the parameters and instance policy of node groups"),
    "remove": (remove_group, [_GROUP], _JOB_OPTS, "GROUP",
               "Remove an empty node group"),
    "rename": (rename_group, [_GROUP, cli.ArgUnknown(min=1, max=1, name="NEW_NAME")],
               _JOB_OPTS, "GROUP NEW_NAME", "Rename a node group"),
    "assign-nodes": (assign_nodes, [_GROUP, cli.ArgNode(min=1)],
                     [ASSIGN_FORCE_OPT, *_JOB_OPTS], "[--force] GROUP NODE...",
                     "Move nodes into a node group"),
    "list": (list_groups, [cli.ArgUnknown(name="GROUP")],
             [cli.NOHDR_OPT, cli.SEP_OPT, cli.FIELDS_OPT, cli.UNITS_OPT, cli.FILTER_OPT],
             "[options] [GROUP...]",
             "List node groups (default fields: name, node_cnt, pinst_cnt, alloc_policy,"
             " ndparams)"),
    "list-fields": (list_fields, [cli.ArgUnknown(name="FIELD")], [cli.NOHDR_OPT, cli.SEP_OPT],
                    "[FIELD...]", "List the fields available for 'list -o'"),
    "show-ispecs-cmd": (show_ispecs_cmd, [cli.ArgUnknown(name="GROUP")],
                        [_O("--include-defaults", dest="include_defaults",
                            action="store_true", default=False,
                            help="Show the effective specs (with the cluster's defaults)")],
                        "[--include-defaults] [GROUP...]",
                        "Show the command line to re-create the groups' instance specs"),
}

commands.update(relocation.GROUP_ROWS)
commands.update({
    "add-tags": tags_common.add_tags(constants.TAG_NODEGROUP),
    "list-tags": tags_common.list_tags(constants.TAG_NODEGROUP),
    "remove-tags": tags_common.remove_tags(constants.TAG_NODEGROUP),
})


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-group``."""
    return cli.generic_main(commands, argv, prog="gnt-group")
