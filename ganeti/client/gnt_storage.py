"""``gnt-storage``: diagnose and describe ExtStorage providers (doc/commands.md).

Both verbs submit OP_EXT_STORAGE_DIAGNOSE and print Ganeti's layouts;
the formatting is pure (:func:`format_diagnose`, :func:`format_info`).
"""

from __future__ import annotations

from ganeti import cli
from ganeti.cli.info import nice_sort
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "diagnose", "show_info", "format_diagnose", "format_info"]


def _node_message(rows: list[Any]) -> tuple[bool, str]:
    """(valid, text) of one node's rows of a provider (the first one is in effect)."""
    if not rows:
        return False, "ExtStorage provider not found"
    path, status, diag, params = rows[0][:4]
    text = "valid" if status else f"invalid - {diag}"
    text += f" (path: {path})"
    if params:
        text += f" [parameters: {', '.join(str(p[0]) for p in params)}]"
    else:
        text += " [no parameters]"
    return bool(status), text


def format_diagnose(rows: list[list[Any]]) -> list[str]:
    """The lines of ``gnt-storage diagnose`` for ``[name, node_status, nodegroup_status]``
    rows: per provider its valid nodes, then the others, then its groups (valid first),
    each part in natural order, and a blank line."""
    lines: list[str] = []
    for name, node_status, group_status in rows:
        nodes: dict[bool, dict[str, str]] = {True: {}, False: {}}
        for node, node_rows in node_status.items():
            valid, text = _node_message(node_rows)
            nodes[valid][node] = text
        lines += [f"Provider: {name}", "---"]
        for valid in (True, False):
            lines += [f"  Node: {n}, status: {nodes[valid][n]}" for n in nice_sort(nodes[valid])]
        lines.append("  --")
        for valid in (True, False):
            groups = [g for g, ok in group_status.items() if bool(ok) is valid]
            lines += [f"  For nodegroup: {g} --> {'valid' if valid else 'invalid'}"
                      for g in nice_sort(groups)]
        lines.append("")
    return lines


def format_info(rows: list[list[Any]], wanted: list[str]) -> list[str]:
    """The lines of ``gnt-storage info`` for ``[name, nodegroup_status, parameters]``
    rows, only those named in ``wanted`` when it is not empty (in the rows' order),
    then ``NAME: Not Found`` for each wanted name no row has."""
    lines: list[str] = []
    missing = list(wanted)
    for name, group_status, params in rows:
        if wanted:
            if name not in missing:
                continue
            missing.remove(name)
        valid_groups = [g for g, ok in group_status.items() if ok]
        lines.append(f"{name}:")
        if valid_groups:
            lines.append("  - Valid for nodegroups:")
            lines += [f"      {g}" for g in nice_sort(valid_groups)]
            lines.append("  - Supported parameters:")
            lines += [f"      {pname}: {pdoc}" for pname, pdoc in params]
        else:
            lines.append("  - Invalid for all nodegroups")
        lines.append("")
    for name in missing:
        lines += [f"{name}: Not Found", ""]
    return lines


def _diagnose_rows(opts: Any, fields: list[str]) -> Any:
    op = wire.ext_storage_diagnose(output_fields=fields, names=[])
    return cli.submit_opcode_and_wait(op, opts)


def diagnose(opts: Any, args: list[str]) -> int:
    """Show every ExtStorage provider's status per node and per node group."""
    rows = _diagnose_rows(opts, ["name", "node_status", "nodegroup_status"])
    if not rows:
        cli.to_stderr("Can't get the list of ExtStorage providers")
        return cli.EXIT_FAILURE
    for line in format_diagnose(rows):
        cli.to_stdout(line)
    return cli.EXIT_SUCCESS


def show_info(opts: Any, args: list[str]) -> int:
    """Show the node groups an ExtStorage provider is valid for, and its parameters."""
    rows = _diagnose_rows(opts, ["name", "nodegroup_status", "parameters"])
    if not rows:
        cli.to_stderr("Can't get the ExtStorage providers list")
        return cli.EXIT_FAILURE
    for line in format_info(rows, list(args)):
        cli.to_stdout(line)
    return cli.EXIT_SUCCESS


commands: dict[str, cli.Command] = {
    "diagnose": (diagnose, cli.ARGS_NONE, [cli.PRIORITY_OPT], "",
                 "Diagnose all ExtStorage providers on every node and node group"),
    "info": (show_info, [cli.ArgUnknown(name="PROVIDER")], [cli.PRIORITY_OPT], "[PROVIDER...]",
             "Show the node groups and parameters of ExtStorage providers"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-storage``."""
    return cli.generic_main(commands, argv, prog="gnt-storage")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
