"""``gnt-backup``: export instances to a node, import them back, list and remove exports.

Options and exit codes follow upstream's gnt-backup(8); doc/exports.md
describes the export format and what happens on failure.
"""

from __future__ import annotations

from ganeti import cli, constants, errors
from ganeti.client import gnt_instance as gi
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "LIST_DEFAULT_FIELDS"]

LIST_DEFAULT_FIELDS = ["node", "export"]
O = cli.Option


def _size(value: Any) -> int:
    from ganeti.utils import units
    try:
        return units.parse_unit(value)
    except (errors.GanetiError, ValueError) as exc:
        raise errors.OpPrereqError(f"Invalid disk size {value!r}: {exc}",
                                   errors.ECODE_INVAL) from None


def _disk(params: dict[str, Any]) -> dict[str, Any]:
    return {**params, "size": _size(params["size"])} if "size" in params else dict(params)


def export_instance(opts: Any, args: list[str]) -> int:
    """Export an instance to a node (exit 1 when the export failed)."""
    if not opts.node:
        return cli.usage_error(opts.command, "The target node (-n) is required")
    result = cli.submit_or_send(wire.drop_none(wire.backup_export(
        instance_name=args[0], target_node=opts.node, shutdown=opts.shutdown,
        shutdown_timeout=opts.shutdown_timeout, remove_instance=opts.remove_instance,
        ignore_remove_failures=opts.ignore_remove_failures, compress=opts.compress,
        mode=constants.EXPORT_MODE_LOCAL, long_sleep=opts.long_sleep or wire.NOT_SENT)), opts)
    if result is None:   # --submit
        return 0
    finalized, disks = result
    if not finalized:
        cli.to_stderr("Export failed: finalizing the export")
        return 1
    if not all(disks):
        cli.to_stderr("Export failed: disk(s) " + ", ".join(
            str(i) for i, ok in enumerate(disks) if not ok))
        return 2
    return 0


def import_instance(opts: Any, args: list[str]) -> int:
    """Create an instance from an export (parameters not given come from the export)."""
    if opts.disks and opts.sd_size:
        return cli.usage_error(opts.command, "Give either --disk or -s, not both")
    disks = [_disk(d) for d in gi.parse_indexed(opts.disks, "disk")]
    if opts.sd_size:
        disks = [{"size": _size(opts.sd_size)}]
    nics = [] if opts.no_nics else gi.parse_indexed(opts.nics, "NIC")
    hv, hvparams = gi.parse_hv(opts.hvparams)
    pnode, snode = opts.node, None
    if pnode and ":" in pnode:
        pnode, snode = pnode.split(":", 1)
    op = wire.drop_none(wire.instance_create(instance_name=args[0], mode=constants.INSTANCE_IMPORT,
                                             src_node=opts.src_node, src_path=opts.src_dir,
                                             os_type=opts.os, osparams=gi.parse_kv(opts.osparams),
                                             disk_template=opts.disk_template, disks=disks,
                                             nics=nics, beparams=gi.parse_kv(opts.beparams),
                                             hvparams=hvparams, hypervisor=hv, pnode=pnode,
                                             snode=snode, iallocator=opts.iallocator,
                                             start=opts.start, name_check=opts.name_check,
                                             ip_check=opts.ip_check,
                                             identify_defaults=opts.identify_defaults,
                                             tags=[t for t in (opts.tags or "").split(",") if t],
                                             file_storage_dir=opts.file_storage_dir,
                                             file_driver=opts.file_driver))
    cli.submit_or_send(op, opts)
    return 0


def list_exports(opts: Any, args: list[str]) -> int:
    """List the exports of all nodes, or of the nodes given with --node."""
    fields = cli.parse_fields(opts.output, LIST_DEFAULT_FIELDS)
    nodes = opts.nodes or []
    qfilter = ["|"] + [["==", "node", n] for n in nodes] if nodes else None
    return cli.generic_query_list(cli.get_client(opts), constants.QR_EXPORT, fields, qfilter,
                                  headers=not opts.no_headers, separator=opts.separator,
                                  units=opts.units)


def remove_export(opts: Any, args: list[str]) -> int:
    """Remove the exports of an instance."""
    cli.submit_or_send(wire.backup_remove(instance_name=args[0]), opts)
    return 0


EXPORT_NODE_OPT = O("-n", "--node", dest="node", default=None, metavar="NODE",
                    help="Target node of the export")
NOSHUTDOWN_OPT = O("--noshutdown", dest="shutdown", action="store_false", default=True,
                   help="Do not shut the instance down first (the image may be inconsistent)")
REMOVE_OPT = O("--remove-instance", dest="remove_instance", action="store_true", default=False,
               help="Remove the instance once it is exported")
IGNORE_REMOVE_OPT = O("--ignore-remove-failures", dest="ignore_remove_failures",
                      action="store_true", default=False,
                      help="Remove the instance even when removing its disks fails")
COMPRESS_OPT = O("--compress", dest="compress", default="none", choices=["none"],
                 help="Compression of the images (only 'none')")
SRC_NODE_OPT = O("--src-node", dest="src_node", default=None, metavar="NODE",
                 help="Node holding the export (default: searched on all nodes)")
SRC_DIR_OPT = O("--src-dir", dest="src_dir", default=None, metavar="DIR",
                help="Export directory below the export dir (default: the instance name)")
IALLOC_OPT = O("-I", "--iallocator", dest="iallocator", default=None, metavar="NAME",
               help="Instance allocator choosing the node")
IDENTIFY_DEFAULTS_OPT = O("--identify-defaults", dest="identify_defaults", action="store_true",
                          default=False, help="Store parameters equal to the cluster defaults"
                          " as defaults")
LIST_NODE_OPT = O("--node", dest="nodes", action="append", default=None, metavar="NODE",
                  help="Only list the exports of this node (may be repeated)")

_IMPORT_OPTS = [gi.TEMPLATE_OPT, gi.DISK_OPT, gi.SIZE_OPT, gi.NET_OPT, gi.NO_NICS_OPT, gi.BE_OPT,
                gi.HV_OPT, gi.OS_OPT, gi.OSP_OPT, gi.PNODE_OPT, IALLOC_OPT, gi.NOSTART_OPT,
                gi.NONAMECHECK_OPT, gi.NOIPCHECK_OPT, gi.TAGS_OPT, gi.FSDIR_OPT,
                gi.FDRIVER_OPT, SRC_NODE_OPT, SRC_DIR_OPT, IDENTIFY_DEFAULTS_OPT, cli.SUBMIT_OPT]

LONG_SLEEP_OPT = cli.Option("--long-sleep", dest="long_sleep", action="store_true",
                            default=False,
                            help="Allow long shutdowns when backing up instances"
                                 " (accepted for Ganeti's scripts; no effect here)")

commands: dict[str, cli.Command] = {
    "export": (export_instance, gi.ONE_INSTANCE,
               [EXPORT_NODE_OPT, NOSHUTDOWN_OPT, gi.SHUTDOWN_TIMEOUT_OPT, REMOVE_OPT,
                IGNORE_REMOVE_OPT, COMPRESS_OPT, LONG_SLEEP_OPT, cli.SUBMIT_OPT],
               "-n NODE [--noshutdown] [--remove-instance] INSTANCE",
               "Export an instance to a node"),
    "import": (import_instance, gi.ONE_INSTANCE, _IMPORT_OPTS,
               "{-n NODE | -I NAME} [--src-node NODE] [--src-dir DIR] [options] INSTANCE",
               "Import an instance from an export"),
    "list": (list_exports, cli.ARGS_NONE,
             [LIST_NODE_OPT, cli.NOHDR_OPT, cli.SEP_OPT, cli.FIELDS_OPT, cli.UNITS_OPT,
              cli.VERBOSE_OPT], "[--node NODE...]", "List the exports"),
    "list-fields": (cli.list_fields_verb(constants.QR_EXPORT), [cli.ArgUnknown(name="FIELD")],
                    [cli.NOHDR_OPT, cli.SEP_OPT], "[FIELD...]",
                    "List the fields available for the list command"),
    "remove": (remove_export, gi.ONE_INSTANCE, [cli.SUBMIT_OPT], "INSTANCE",
               "Remove the exports of an instance"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-backup``."""
    return cli.generic_main(commands, argv, prog="gnt-backup")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
