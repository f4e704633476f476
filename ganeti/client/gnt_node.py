"""``gnt-node``: add, remove, list, inspect and modify cluster nodes.

``add`` first prepares the new node over SSH (cluster certificate and key,
node daemon started; see :func:`ganeti.bootstrap.setup_node_ssh`) and then
submits ``OP_NODE_ADD``; everything else is opcodes and queries over LUXI.
"""

from __future__ import annotations

import os

from ganeti import cli, constants, errors
from ganeti.client import node_oob, relocation, tags_common
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "add_node", "remove_node", "list_nodes", "list_fields",
           "show_node_info", "format_node_info", "modify_node", "powercycle_node", "list_storage", "list_volumes", "list_drbd", "modify_storage",
           "repair_storage", "LIST_DEFAULT_FIELDS", "INFO_FIELDS", "STORAGE_FIELDS"]

LIST_DEFAULT_FIELDS = ["name", "dtotal", "dfree", "mtotal", "mnode", "mfree",
                       "pinst_cnt", "sinst_cnt"]
INFO_FIELDS = ["name", "pip", "sip", "master_candidate", "drained", "offline",
               "master_capable", "vm_capable", "group", "pinst_list", "sinst_list",
               "ndparams", "powered", "custom_ndparams"]


def _yes_no(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.lower() in ("yes", "true", "1", "on")


def add_node(opts: Any, args: list[str]) -> int:
    """Add a node: SSH setup of the node daemon, then OP_NODE_ADD."""
    from ganeti import bootstrap, pathutils
    from ganeti.client.gnt_cluster import parse_keyval
    from ganeti.utils import validation

    name = validation.check_hostname(args[0], "node name")
    paths = pathutils.get_paths()
    cl = cli.get_client(opts)
    primary_ip = opts.primary_ip or bootstrap.resolve_host(name)
    ndparams = parse_keyval(opts.ndparams, "node parameters")
    if not opts.no_node_setup:
        cluster_nd = cl.QueryClusterInfo().get("ndparams") or {}
        ssh_port = int((ndparams or {}).get("ssh_port") or cluster_nd.get("ssh_port") or 22)
        noded_port = int(os.environ.get(constants.ENV_NODED_PORT)
                         or constants.DEFAULT_NODED_PORT)
        cli.to_stdout(f"-- Setting up node {name} ({primary_ip}) over SSH")
        bootstrap.setup_node_ssh(paths, primary_ip, ssh_port=ssh_port, noded_port=noded_port)
    op: dict[str, Any] = wire.node_add(node_name=name, primary_ip=primary_ip, readd=bool(opts.readd))
    if opts.secondary_ip:
        op["secondary_ip"] = opts.secondary_ip
    if opts.nodegroup:
        op["group"] = opts.nodegroup
    for key in ("master_capable", "vm_capable"):
        value = _yes_no(getattr(opts, key))
        if value is not None:
            op[key] = value
    if ndparams:
        op["ndparams"] = ndparams
    cli.submit_or_send(op, opts, cl)
    return cli.EXIT_SUCCESS


def remove_node(opts: Any, args: list[str]) -> int:
    """Remove a node from the cluster (its node daemon stops and forgets the cluster)."""
    cli.submit_or_send(wire.node_remove(node_name=args[0]), opts)
    return cli.EXIT_SUCCESS


def powercycle_node(opts: Any, args: list[str]) -> int:
    """Hard-reset a node through its hypervisor (asks first; the master needs --force)."""
    name = args[0]
    if not cli.confirm(f"Are you sure you want to hard powercycle node {name}?",
                       forced=opts.confirm, flag="--yes"):
        return 2
    result = cli.submit_or_send(wire.node_powercycle(node_name=name, force=bool(opts.force)), opts)
    if result:
        cli.to_stderr(str(result))
    return cli.EXIT_SUCCESS


list_nodes = cli.query_list_verb(constants.QR_NODE, LIST_DEFAULT_FIELDS)
list_fields = cli.list_fields_verb(constants.QR_NODE)


def _value(row: list[Any], idx: int) -> Any:
    status, value = row[idx]
    return value if status == constants.RS_NORMAL else None


def show_node_info(opts: Any, args: list[str]) -> int:
    """Show details of the given nodes (all nodes without arguments)."""
    cl = cli.get_client(opts)
    qfilter = cli.build_query_filter(args, False) if args else None
    result = cl.Query(constants.QR_NODE, INFO_FIELDS, qfilter)
    rows = result.get("data", [])
    if args and len(rows) < len(set(args)):
        found = {_value(r, 0) for r in rows}
        missing = [a for a in args if a not in found]
        raise errors.OpPrereqError(f"Node(s) not found: {', '.join(missing)}",
                                   errors.ECODE_NOENT)
    from ganeti.cli import info   # lazy: CLI start-up
    info.print_info([format_node_info(dict(zip(INFO_FIELDS, (_value(row, i)
                                                            for i in range(len(INFO_FIELDS))))))
                     for row in rows])
    return cli.EXIT_SUCCESS


def format_node_info(node: dict[str, Any]) -> list[tuple[str, Any]]:
    """One node's ``gnt-node info`` entry (Ganeti's keys; ``group`` is ours)."""
    from ganeti.cli import info
    data: list[tuple[str, Any]] = [
        ("Node name", node["name"]), ("primary ip", node["pip"]),
        ("secondary ip", node["sip"]), ("master candidate", node["master_candidate"]),
        ("drained", node["drained"]), ("offline", node["offline"])]
    if node.get("powered") is not None:
        data.append(("powered", node["powered"]))
    data += [("master_capable", node["master_capable"]), ("vm_capable", node["vm_capable"]),
             ("group", node.get("group"))]
    if node["vm_capable"]:
        data += [("primary for instances", info.nice_sort(node.get("pinst_list") or [])),
                 ("secondary for instances", info.nice_sort(node.get("sinst_list") or []))]
    data.append(("node parameters", info.params_info(node.get("custom_ndparams"),
                                                     node.get("ndparams"))))
    return data


def modify_node(opts: Any, args: list[str]) -> int:
    """Change a node's roles and parameters (candidate, drained, offline...)."""
    from ganeti.client.gnt_cluster import parse_keyval
    op: dict[str, Any] = wire.node_set_params(node_name=args[0])
    for key in ("master_candidate", "drained", "offline", "master_capable", "vm_capable",
                "powered"):
        value = _yes_no(getattr(opts, key))
        if value is not None:
            op[key] = value
    ndparams = parse_keyval(opts.ndparams, "node parameters")
    if ndparams:
        op["ndparams"] = ndparams
    if opts.secondary_ip:
        op["secondary_ip"] = opts.secondary_ip
    if len(op) == 2:
        cli.to_stderr("Please give at least one of the parameters.")
        return cli.EXIT_FAILURE
    # as Ganeti's: bringing a node online by hand asks first (doc/commands.md)
    if op.get("offline") is False and not cli.confirm(
            f"Node {args[0]} is being brought online by hand. If the cluster's configuration"
            " changed while it was offline, it can act on stale data (a split brain);"
            " 'gnt-node add --readd' brings a node back safely.", forced=opts.force):
        return cli.EXIT_FAILURE
    if opts.auto_promote:
        op["auto_promote"] = True
    if opts.force:
        op["force"] = True
    result = cli.submit_or_send(op, opts)
    if result:
        cli.to_stdout(f"Modified node {args[0]}")
        for change in result if isinstance(result, list) else []:
            if isinstance(change, (list, tuple)) and len(change) == 2:
                cli.to_stdout(f" - {change[0]} -> {change[1]}")
    return cli.EXIT_SUCCESS


#: ``list-storage`` columns (Ganeti's): field -> (title, query field kind)
STORAGE_FIELDS = {
    constants.SF_NODE: ("Node", constants.QFT_TEXT),
    constants.SF_TYPE: ("Type", constants.QFT_TEXT),
    constants.SF_NAME: ("Name", constants.QFT_TEXT),
    constants.SF_SIZE: ("Size", constants.QFT_UNIT),
    constants.SF_USED: ("Used", constants.QFT_UNIT),
    constants.SF_FREE: ("Free", constants.QFT_UNIT),
    constants.SF_ALLOCATABLE: ("Allocatable", constants.QFT_BOOL),
}


def list_storage(opts: Any, args: list[str]) -> int:
    """List the storage units of nodes (OP_NODE_QUERY_STORAGE)."""
    from ganeti import query
    fields = cli.parse_fields(opts.output, list(constants.VALID_STORAGE_FIELDS))
    unknown = [f for f in fields if f not in STORAGE_FIELDS]
    if unknown:
        raise errors.OpPrereqError(f"Unknown storage field(s): {', '.join(unknown)} (valid:"
                                   f" {', '.join(constants.VALID_STORAGE_FIELDS)})",
                                   errors.ECODE_INVAL)
    op = wire.node_query_storage(nodes=list(args), output_fields=fields, storage_type=opts.storage_type)
    rows = cli.submit_opcode_and_wait(op, opts) or []
    fdefs = [{"name": f, "title": STORAGE_FIELDS[f][0], "kind": STORAGE_FIELDS[f][1]}
             for f in fields]
    cells = [[[constants.RS_NORMAL, value] for value in row] for row in rows]
    for line in query.format_table(fdefs, cells, headers=not opts.no_headers,
                                   separator=opts.separator, units=opts.units):
        cli.to_stdout(line)
    return cli.EXIT_SUCCESS


#: ``volumes`` columns (Ganeti's titles; ``size`` in MiB, shown with --units)
VOLUME_TITLES = {"node": "Node", "phys": "PhysDev", "vg": "VG", "name": "Name",
                 "size": "Size", "instance": "Instance"}


def list_volumes(opts: Any, args: list[str]) -> int:
    """List the volumes of nodes (OP_NODE_QUERYVOLS): here the disk files below the
    file storage directories, with the instance each belongs to."""
    from ganeti import query
    fields = cli.parse_fields(opts.output, list(VOLUME_TITLES))
    unknown = [f for f in fields if f not in VOLUME_TITLES]
    if unknown:
        raise errors.OpPrereqError(f"Unknown output fields selected: {', '.join(unknown)}"
                                   f" (valid: {', '.join(VOLUME_TITLES)})", errors.ECODE_INVAL)
    rows = cli.submit_opcode_and_wait(wire.node_queryvols(fields, nodes=list(args)),
                                      opts) or []
    fdefs = [{"name": f, "title": VOLUME_TITLES[f],
              "kind": constants.QFT_UNIT if f == "size" else constants.QFT_TEXT}
             for f in fields]
    cells = [[[constants.RS_NORMAL, int(v) if f == "size" else v]
              for f, v in zip(fields, row)] for row in rows]
    for line in query.format_table(fdefs, cells, headers=not opts.no_headers,
                                   separator=opts.separator, units=opts.units):
        cli.to_stdout(line)
    return cli.EXIT_SUCCESS


#: ``list-drbd`` columns (Ganeti's titles)
DRBD_TITLES = {"node": "Node", "minor": "Minor", "instance": "Instance", "disk": "Disk",
               "role": "Role", "peer": "PeerNode"}


def list_drbd(opts: Any, args: list[str]) -> int:
    """List the DRBD minors the configuration gives one node (LUXI ``QueryNodeDrbd``)."""
    from ganeti import query
    rows = cli.get_client(opts).QueryNodeDrbd(args[0])
    fdefs = [{"name": f, "title": title,
              "kind": constants.QFT_NUMBER if f == "minor" else constants.QFT_TEXT}
             for f, title in DRBD_TITLES.items()]
    cells = [[[constants.RS_NORMAL, v] for v in row] for row in rows]
    for line in query.format_table(fdefs, cells, headers=not opts.no_headers,
                                   separator=opts.separator):
        cli.to_stdout(line)
    return cli.EXIT_SUCCESS


def modify_storage(opts: Any, args: list[str]) -> int:
    """Change a storage unit: NODE STORAGE_TYPE NAME (OP_NODE_MODIFY_STORAGE)."""
    node, stype, name = args
    changes: dict[str, Any] = {}
    if opts.allocatable is not None:
        changes[constants.SF_ALLOCATABLE] = _yes_no(opts.allocatable)
    if not changes:             # as Ganeti: nothing to do is not an error
        cli.to_stderr("No changes to perform, exiting.")
        return cli.EXIT_SUCCESS
    cli.submit_or_send(wire.node_modify_storage(node_name=node, storage_type=stype, name=name,
                                                changes=changes), opts)
    return cli.EXIT_SUCCESS


def repair_storage(opts: Any, args: list[str]) -> int:
    """Repair a storage unit: NODE STORAGE_TYPE NAME (OP_REPAIR_NODE_STORAGE)."""
    node, stype, name = args
    cli.submit_or_send(wire.repair_node_storage(node_name=node, storage_type=stype, name=name,
                                                ignore_consistency=bool(opts.ignore_consistency)), opts)
    return cli.EXIT_SUCCESS


_O = cli.Option
_YN = ["yes", "no"]
STORAGE_TYPE_OPT = _O("-t", "--storage-type", dest="storage_type", default=None,
                      choices=sorted(constants.STORAGE_TYPES), metavar="STORAGE_TYPE",
                      help="Storage type (default: that of the first enabled file based"
                           " disk template)")
ALLOCATABLE_OPT = _O("--allocatable", dest="allocatable", default=None, choices=_YN,
                     help="Whether new disks may be placed on the storage unit")
IGNORE_CONSIST_OPT = _O("--ignore-consistency", dest="ignore_consistency",
                        action="store_true", default=False,
                        help="Ignore the consistency of the disks on the unit")
SIP_OPT = _O("-s", "--secondary-ip", dest="secondary_ip", default=None, metavar="IP",
             help="Secondary IP of the node (default: the primary IP)")
SIP_MODIFY_OPT = _O("-s", "--secondary-ip", dest="secondary_ip", default=None, metavar="IP",
                    help="New secondary IP of the node (IPv4, used by no other node)")
PIP_OPT = _O("--primary-ip", dest="primary_ip", default=None, metavar="IP",
             help="Primary IP of the node (default: resolve the name through"
                  " $GANETI_HOSTS_FILE or DNS)")
READD_OPT = _O("--readd", dest="readd", action="store_true", default=False,
               help="Re-add a node that is still in the configuration")
GROUP_OPT = _O("-g", "--node-group", dest="nodegroup", default=None, metavar="GROUP",
               help="Node group to put the node in")
MC_OPT = _O("--master-capable", dest="master_capable", default=None, choices=_YN,
            help="Whether the node may become master (candidate)")
VMC_OPT = _O("--vm-capable", dest="vm_capable", default=None, choices=_YN,
             help="Whether the node may run instances")
NDP_OPT = _O("--node-parameters", dest="ndparams", default=None, metavar="key=val,...",
             help="Node parameters (e.g. ssh_port=2222)")
NOSSH_KEYCHECK_OPT = _O("--no-ssh-key-check", dest="ssh_key_check", action="store_false",
                       default=True, help="Accepted for compatibility: the node's SSH host"
                       " key is always taken on first use (doc/compat.md)")
NOSETUP_OPT = _O("--no-node-setup", dest="no_node_setup", action="store_true", default=False,
                 help="Do not prepare the node over SSH (its node daemon already runs with"
                      " the cluster certificate)")
CAND_OPT = _O("-C", "--master-candidate", dest="master_candidate", default=None, choices=_YN,
              help="Make the node a master candidate (yes) or demote it (no)")
DRAIN_OPT = _O("-D", "--drained", dest="drained", default=None, choices=_YN,
               help="Mark the node drained (no new instances) or undrain it")
OFFLINE_OPT = _O("-O", "--offline", dest="offline", default=None, choices=_YN,
                 help="Mark the node offline (skipped by RPC) or online")
POWERED_OPT = _O("--node-powered", dest="powered", default=None, choices=_YN,
                 help="Record the node as powered on or off (only for a node with an"
                      " out-of-band program; doc/oob.md)")
CONFIRM_OPT = _O("--yes", dest="confirm", action="store_true", default=False,
                 help="Do not ask for confirmation")
POWERCYCLE_FORCE_OPT = _O("-f", "--force", dest="force", action="store_true", default=False,
                          help="Allow power-cycling the master node")
AUTOPROMOTE_OPT = _O("--auto-promote", dest="auto_promote", action="store_true",
                     default=False, help="Promote other nodes if this change demotes"
                                         " a master candidate")

_JOB_OPTS = [cli.SUBMIT_OPT, cli.PRIORITY_OPT, cli.DRY_RUN_OPT]
commands: dict[str, cli.Command] = {
    "add": (add_node, [cli.ArgNode(min=1, max=1)],
            [SIP_OPT, PIP_OPT, READD_OPT, GROUP_OPT, MC_OPT, VMC_OPT, NDP_OPT, NOSETUP_OPT,
             NOSSH_KEYCHECK_OPT,
             *_JOB_OPTS], "[options] NODE",
            "Add a node: set it up over SSH (certificate, key, node daemon), then add it"
            " to the configuration"),
    "remove": (remove_node, [cli.ArgNode(min=1, max=1)], _JOB_OPTS, "[options] NODE",
               "Remove a node from the cluster"),
    "list": (list_nodes, [cli.ArgNode()],
             [cli.NOHDR_OPT, cli.SEP_OPT, cli.FIELDS_OPT, cli.UNITS_OPT, cli.FILTER_OPT,
              cli.VERBOSE_OPT],
             "[options] [NODE...]",
             "List nodes (default fields: name, dtotal, dfree, mtotal, mnode, mfree,"
             " pinst_cnt, sinst_cnt; roles with -o name,role: M master, C candidate,"
             " R regular, D drained, O offline)"),
    "list-fields": (list_fields, [cli.ArgUnknown(name="FIELD")], [cli.NOHDR_OPT, cli.SEP_OPT],
                    "[FIELD...]", "List the fields available for 'list -o'"),
    "info": (show_node_info, [cli.ArgNode()], [], "[NODE...]",
             "Show details of nodes (IPs, roles, instances, parameters)"),
    "powercycle": (powercycle_node, [cli.ArgNode(min=1, max=1)],
                   [CONFIRM_OPT, POWERCYCLE_FORCE_OPT, *_JOB_OPTS], "[--yes] [--force] NODE",
                   "Hard-reset a node through its hypervisor (its instances go down;"
                   " --force is needed for the master node)"),
    "list-storage": (list_storage, [cli.ArgNode()],
                     [cli.NOHDR_OPT, cli.SEP_OPT, cli.UNITS_OPT, cli.FIELDS_OPT,
                      STORAGE_TYPE_OPT, cli.PRIORITY_OPT], "[options] [NODE...]",
                     "List the storage units of nodes (fields: node, type, name, size,"
                     " used, free, allocatable)"),
    "volumes": (list_volumes, [cli.ArgNode()],
                [cli.NOHDR_OPT, cli.SEP_OPT, cli.UNITS_OPT, cli.FIELDS_OPT, cli.PRIORITY_OPT],
                "[options] [NODE...]", "List the volumes of nodes: the disk files of the"
                " file storage directories (fields: node, phys, vg, name, size, instance)"),
    "list-drbd": (list_drbd, [cli.ArgNode(min=1, max=1)], [cli.NOHDR_OPT, cli.SEP_OPT],
                  "[--no-headers] [--separator=SEP] NODE",
                  "List the DRBD minors of a node from the configuration (node, minor,"
                  " instance, disk, role, peer)"),
    "modify-storage": (modify_storage, [cli.ArgUnknown(min=3, max=3,
                                                       name="NODE STORAGE_TYPE NAME")],
                       [ALLOCATABLE_OPT, *_JOB_OPTS], "[--allocatable yes|no] NODE"
                       " STORAGE_TYPE NAME", "Change a storage unit"),
    "repair-storage": (repair_storage, [cli.ArgUnknown(min=3, max=3,
                                                       name="NODE STORAGE_TYPE NAME")],
                       [IGNORE_CONSIST_OPT, *_JOB_OPTS], "[--ignore-consistency] NODE"
                       " STORAGE_TYPE NAME", "Repair a storage unit"),
    "modify": (modify_node, [cli.ArgNode(min=1, max=1)],
               [CAND_OPT, DRAIN_OPT, OFFLINE_OPT, MC_OPT, VMC_OPT, NDP_OPT, AUTOPROMOTE_OPT,
                SIP_MODIFY_OPT, POWERED_OPT, cli.FORCE_OPT, *_JOB_OPTS], "[options] NODE",
               "Change a node's roles (-C/-D/-O, --master-capable, --vm-capable),"
               " secondary IP (-s) and parameters"),
}


commands.update(relocation.NODE_ROWS)
commands.update(node_oob.NODE_ROWS)
commands.update({
    "add-tags": tags_common.add_tags(constants.TAG_NODE),
    "list-tags": tags_common.list_tags(constants.TAG_NODE),
    "remove-tags": tags_common.remove_tags(constants.TAG_NODE),
})


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-node``."""
    return cli.generic_main(commands, argv, prog="gnt-node")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
