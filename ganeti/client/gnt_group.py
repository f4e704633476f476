"""``gnt-group``: add, remove, rename and list node groups, and move nodes between them.

Every verb is one opcode or one query over LUXI.  The group policies and
evacuation (``modify``, ``evacuate``, ``info``) come with placement; see
``doc/commands.md``.
"""

from __future__ import annotations

from ganeti import cli, constants
from ganeti.client import tags_common

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "add_group", "remove_group", "rename_group", "assign_nodes",
           "list_groups", "list_fields", "LIST_DEFAULT_FIELDS"]

LIST_DEFAULT_FIELDS = ["name", "node_cnt", "pinst_cnt", "alloc_policy", "ndparams"]


def add_group(opts: Any, args: list[str]) -> int:
    """Create an empty node group (``OP_GROUP_ADD``)."""
    from ganeti.client.gnt_cluster import parse_keyval
    op: dict[str, Any] = {"OP_ID": "OP_GROUP_ADD", "group_name": args[0]}
    if opts.alloc_policy:
        op["alloc_policy"] = opts.alloc_policy
    ndparams = parse_keyval(opts.ndparams, "node parameters")
    if ndparams:
        op["ndparams"] = ndparams
    cli.submit_or_send(op, opts)
    return cli.EXIT_SUCCESS


def remove_group(opts: Any, args: list[str]) -> int:
    """Remove an empty node group (``OP_GROUP_REMOVE``)."""
    cli.submit_or_send({"OP_ID": "OP_GROUP_REMOVE", "group_name": args[0]}, opts)
    return cli.EXIT_SUCCESS


def rename_group(opts: Any, args: list[str]) -> int:
    """Rename a node group (``OP_GROUP_RENAME``)."""
    cli.submit_or_send({"OP_ID": "OP_GROUP_RENAME", "group_name": args[0],
                        "new_name": args[1]}, opts)
    return cli.EXIT_SUCCESS


def assign_nodes(opts: Any, args: list[str]) -> int:
    """Move nodes into a group (``OP_GROUP_ASSIGN_NODES``)."""
    cli.submit_or_send({"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": args[0],
                        "nodes": args[1:], "force": bool(opts.force)}, opts)
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
ASSIGN_FORCE_OPT = _O("--force", dest="force", action="store_true", default=False,
                      help="Move the nodes even if that splits instances between groups")

_GROUP = cli.ArgUnknown(min=1, max=1, name="GROUP")
_JOB_OPTS = [cli.SUBMIT_OPT, cli.PRIORITY_OPT, cli.DRY_RUN_OPT]
commands: dict[str, cli.Command] = {
    "add": (add_group, [_GROUP], [ALLOC_POLICY_OPT, NDP_OPT, *_JOB_OPTS],
            "[--alloc-policy POLICY] [-N PARAMS] GROUP", "Add a new, empty node group"),
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
}

commands.update({
    "add-tags": tags_common.add_tags(constants.TAG_NODEGROUP),
    "list-tags": tags_common.list_tags(constants.TAG_NODEGROUP),
    "remove-tags": tags_common.remove_tags(constants.TAG_NODEGROUP),
})


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-group``."""
    return cli.generic_main(commands, argv, prog="gnt-group")
