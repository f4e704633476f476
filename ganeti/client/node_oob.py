"""``gnt-node power`` and ``gnt-node health``: out-of-band management (doc/oob.md).

Both submit ``OP_OOB_COMMAND`` and print Ganeti's two-column table (Node,
Status).  ``power off`` first marks the nodes offline in the same job (one
``OP_NODE_SET_PARAMS`` each, as Ganeti does) unless ``--ignore-status``.
:data:`NODE_ROWS` are merged into ``gnt-node``'s commands table; the table
builders (:func:`power_table`, :func:`health_table`) are pure.
"""

from __future__ import annotations

from ganeti import cli, constants
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["power_node", "node_health", "power_table", "health_table", "result_text",
           "POWER_COMMANDS", "ASK_COMMANDS", "NODE_ROWS", "OOB_TIMEOUT_OPT", "POWER_DELAY_OPT"]

#: ``gnt-node power`` subcommands (the program's command is ``power-<subcommand>``)
POWER_COMMANDS = ("on", "off", "cycle", "status")
#: the subcommands that need node names (or --all) and a confirmation
ASK_COMMANDS = ("off", "cycle")


def result_text(status: int) -> str:
    """The text of a node's non-normal result, as Ganeti's verbose ones."""
    from ganeti.query.format import STATUS_TEXT
    return STATUS_TEXT.get(status, ("(unknown status)",))[0]


def power_table(command: str, result: list[Any]) -> tuple[list[list[str]], int]:
    """``(rows, errors)`` of ``gnt-node power COMMAND`` for an ``OP_OOB_COMMAND`` result.

    A node's status is ``powered``/``unpowered`` for ``status``, ``invoked`` for
    the others, and the result's text (``(nodata)``, ``(unavail)``) when its
    command failed or it has no out-of-band program (an error).
    """
    rows: list[list[str]] = []
    errs = 0
    for (_, name), (status, data) in result:
        if status != constants.RS_NORMAL:
            errs += 1
            rows.append([name, result_text(status)])
        elif command == "status":
            powered = data[constants.OOB_POWER_STATUS_POWERED]
            rows.append([name, "powered" if powered else "unpowered"])
        else:
            rows.append([name, "invoked"])
    return rows, errs


def health_table(result: list[Any]) -> tuple[list[list[str]], int]:
    """``(rows, errors)`` of ``gnt-node health``: ``item=status``, one per line, the
    node's name on its first line only."""
    rows: list[list[str]] = []
    errs = 0
    for (_, name), (status, data) in result:
        if status != constants.RS_NORMAL:
            errs += 1
            rows.append([name, result_text(status)])
            continue
        items = [f"{item}={state}" for item, state in data] or [""]
        rows.append([name, items[0]])
        rows.extend(["", text] for text in items[1:])
    return rows, errs


def _print_table(opts: Any, rows: list[list[str]]) -> None:
    from ganeti import query
    fdefs = [{"name": "node", "title": "Node", "kind": constants.QFT_TEXT},
             {"name": "status", "title": "Status", "kind": constants.QFT_TEXT}]
    cells = [[[constants.RS_NORMAL, value] for value in row] for row in rows]
    for line in query.format_table(fdefs, cells, headers=not opts.no_headers,
                                   separator=opts.separator):
        cli.to_stdout(line)


def _all_oob_nodes(opts: Any, with_master: bool) -> list[str]:
    """``--all``: every node with an out-of-band program (the master only if asked)."""
    cl = cli.get_client(opts)
    result = cl.Query(constants.QR_NODE, ["name", "powered", "master"], None)
    names = []
    for (_, name), (powered_status, _), (_, master) in result.get("data", []):
        if powered_status == constants.RS_NORMAL and (with_master or not master):
            names.append(name)
    return names


def power_node(opts: Any, args: list[str]) -> int:
    """``power on|off|cycle|status [NODE...]``: run the power command of the nodes'
    out-of-band program and print each node's status."""
    command, nodes = args[0], list(args[1:])
    if command not in POWER_COMMANDS:
        cli.to_stderr(f"power subcommand {command} not supported.")
        return cli.EXIT_FAILURE
    if nodes and opts.show_all:
        cli.to_stderr("Please provide either nodes or use --all, can not use both at the"
                      " same time")
        return cli.EXIT_FAILURE
    if opts.show_all:
        nodes = _all_oob_nodes(opts, opts.force_master)
        if not nodes:
            cli.to_stderr("No node has an out-of-band program")
            return cli.EXIT_FAILURE
    oob_command = f"power-{command}"
    if command in ASK_COMMANDS:
        if not nodes:
            cli.to_stderr("Please provide at least one node or use --all for this command")
            return cli.EXIT_FAILURE
        if not cli.confirm(f"The power {command} will operate on {len(nodes)} node(s):"
                           f" {', '.join(nodes)}.", forced=opts.force):
            return cli.EXIT_FAILURE
    ops: list[dict[str, Any]] = []
    if oob_command == constants.OOB_POWER_OFF and not opts.ignore_status:
        master = _master_name(opts) if opts.force_master else None
        ops += [wire.node_set_params(node_name=node, offline=True,
                                     auto_promote=opts.auto_promote)
                for node in nodes if node != master]
    ops.append(wire.oob_command(oob_command, node_names=nodes, ignore_status=opts.ignore_status,
                                timeout=opts.oob_timeout, power_delay=opts.power_delay,
                                force_master=opts.force_master or wire.NOT_SENT))
    result = cli.submit_opcodes_and_wait(ops, opts)[-1]
    rows, errs = power_table(command, result)
    _print_table(opts, rows)
    return cli.EXIT_FAILURE if errs else cli.EXIT_SUCCESS


def _master_name(opts: Any) -> str | None:
    info = cli.get_client(opts).QueryClusterInfo()
    return info.get("master") if isinstance(info, dict) else None


def node_health(opts: Any, args: list[str]) -> int:
    """``health [NODE...]``: the health items reported by the nodes' out-of-band program."""
    op = wire.oob_command(constants.OOB_HEALTH, node_names=list(args), timeout=opts.oob_timeout)
    result = cli.submit_opcode_and_wait(op, opts)
    rows, errs = health_table(result)
    _print_table(opts, rows)
    return cli.EXIT_FAILURE if errs else cli.EXIT_SUCCESS


_O = cli.Option
OOB_TIMEOUT_OPT = _O("--oob-timeout", dest="oob_timeout", type=int,
                     default=constants.OOB_TIMEOUT, metavar="SECONDS",
                     help="Maximum time to wait for out-of-band helper")
POWER_DELAY_OPT = _O("--power-delay", dest="power_delay", type=float,
                     default=constants.OOB_POWER_DELAY, metavar="SECONDS",
                     help="Time in seconds to wait between power-ons")
IGNORE_STATUS_OPT = _O("--ignore-status", dest="ignore_status", action="store_true",
                       default=False, help="Ignore the Node(s) offline status (potentially"
                       " DANGEROUS)")
ALL_OPT = _O("--all", dest="show_all", action="store_true", default=False,
             help="Operate on every node with an out-of-band program (not the master"
                  " unless --force-master)")
FORCE_MASTER_OPT = _O("--force-master", dest="force_master", action="store_true",
                      default=False, help="Operate on the master node too (potentially"
                      " DANGEROUS)")
AUTO_PROMOTE_OPT = _O("--auto-promote", dest="auto_promote", action="store_true",
                      default=False, help="Promote other nodes if powering off demotes a"
                                          " master candidate")

NODE_ROWS: dict[str, cli.Command] = {
    "power": (power_node, [cli.ArgUnknown(min=1, max=1, name="on|off|cycle|status"),
                           cli.ArgNode()],
              [cli.FORCE_OPT, IGNORE_STATUS_OPT, ALL_OPT, FORCE_MASTER_OPT, POWER_DELAY_OPT,
               OOB_TIMEOUT_OPT, AUTO_PROMOTE_OPT, cli.NOHDR_OPT, cli.SEP_OPT, cli.PRIORITY_OPT],
              "[--force] [--ignore-status] [--all] [--power-delay SECONDS]"
              " on|off|cycle|status [NODE...]",
              "Change or show the power state of nodes through their out-of-band program"),
    "health": (node_health, [cli.ArgNode()],
               [OOB_TIMEOUT_OPT, cli.NOHDR_OPT, cli.SEP_OPT, cli.PRIORITY_OPT], "[NODE...]",
               "Show the health of nodes reported by their out-of-band program"),
}
