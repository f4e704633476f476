"""``gnt-cluster rename``, ``repair-disk-sizes`` and ``show-ispecs-cmd``.

Merged into ``gnt-cluster``'s table (``gnt_cluster.commands``); the names,
arguments and output are Ganeti's (doc/commands.md, doc/compat.md).
"""

from __future__ import annotations

from ganeti import cli
from ganeti.cli import ipolicy_opts
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["commands", "rename_cluster", "repair_disk_sizes", "show_ispecs_cmd",
           "create_command"]


def rename_cluster(opts: Any, args: list[str]) -> int:
    """Rename the cluster (OP_CLUSTER_RENAME); asks first unless --force."""
    cl = cli.get_client(opts)
    old_name = cl.QueryConfigValues(["cluster_name"])[0]
    new_name = args[0]
    if not cli.confirm(f"This will rename the cluster from '{old_name}' to '{new_name}'. If"
                       " you are connected over the network to the cluster name, the"
                       " operation is very dangerous as the IP address will be removed from"
                       " the node and the change may not go through.",
                       forced=opts.force):
        return cli.EXIT_FAILURE
    result = cli.submit_or_send(wire.cluster_rename(new_name), opts, cl)
    if result:
        cli.to_stdout(f"Cluster renamed from '{old_name}' to '{result}'")
    return cli.EXIT_SUCCESS


def repair_disk_sizes(opts: Any, args: list[str]) -> int:
    """Record the real sizes of instance disks (OP_CLUSTER_REPAIR_DISK_SIZES)."""
    result = cli.submit_or_send(wire.cluster_repair_disk_sizes(instances=list(args)), opts)
    for change in result if isinstance(result, list) else []:
        if isinstance(change, list) and len(change) == 4:
            cli.to_stdout(f"Disk {change[1]} of instance {change[0]}: {change[2]} is now"
                          f" {change[3]}")
    return cli.EXIT_SUCCESS


def create_command(info: dict[str, Any]) -> str:
    """The ``gnt-cluster init`` command line re-creating the cluster's instance
    policy specs (Ganeti's ``show-ispecs-cmd``), from a QueryClusterInfo dict."""
    return (f"gnt-cluster init{ipolicy_opts.ipolicy_command(info.get('ipolicy') or {}, group=False)}"
            f" {info['name']}")


def show_ispecs_cmd(opts: Any, args: list[str]) -> int:
    """Print the command line re-creating the cluster's instance specs."""
    cli.to_stdout(create_command(cli.get_client(opts).QueryClusterInfo()))
    return cli.EXIT_SUCCESS


commands: dict[str, cli.Command] = {
    "rename": (rename_cluster, [cli.ArgUnknown(min=1, max=1, name="NEW_NAME")],
               [cli.FORCE_OPT, cli.DRY_RUN_OPT, cli.SUBMIT_OPT, cli.PRIORITY_OPT],
               "[-f] NEW_NAME", "Rename the cluster (the master IP becomes the new name's"
               " address)"),
    "repair-disk-sizes": (repair_disk_sizes, [cli.ArgUnknown(name="INSTANCE")],
                          [cli.DRY_RUN_OPT, cli.PRIORITY_OPT, cli.SUBMIT_OPT],
                          "[INSTANCE...]", "Record the real sizes of instance disks where"
                          " the configuration differs"),
    "show-ispecs-cmd": (show_ispecs_cmd, cli.ARGS_NONE, [], "",
                        "Show the command line to re-create the cluster's instance specs"),
}
