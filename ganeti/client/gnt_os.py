"""``gnt-os``: list, diagnose and describe OS definitions."""

from __future__ import annotations

from ganeti import cli, constants, errors

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "list_os", "diagnose_os", "show_os_info", "format_os_info"]

_FIELDS = ["name", "valid", "variants", "parameters", "api_versions", "node_status",
           "hidden", "blacklisted"]


def _query(opts: Any, names: list[str]) -> list[dict[str, Any]]:
    qfilter = ["|"] + [["==", "name", n] for n in names] if names else None
    result = cli.get_client(opts).Query(constants.QR_OS, _FIELDS, qfilter)
    return [{f: cell[1] for f, cell in zip(_FIELDS, row)} for row in result["data"]]


def list_os(opts: Any, args: list[str]) -> int:
    """List the valid OSes (with their variants)."""
    if not opts.no_headers:
        cli.to_stdout("Name")
    for os_ in _query(opts, []):
        if not os_["valid"] or (os_["hidden"] and not opts.show_hidden) or os_["blacklisted"]:
            continue
        if os_["variants"]:
            for v in os_["variants"]:
                cli.to_stdout(f"{os_['name']}+{v}")
        else:
            cli.to_stdout(os_["name"])
    return 0


def diagnose_os(opts: Any, args: list[str]) -> int:
    """Show the OS status on every node; exit 1 if some OS is not valid everywhere."""
    bad = False
    for os_ in _query(opts, []):
        status = "valid" if os_["valid"] else "invalid"
        if not os_["valid"]:
            bad = True
        cli.to_stdout(f"OS: {os_['name']} [global status: {status}]")
        for node, rows in sorted(os_["node_status"].items()):
            if not rows:
                cli.to_stdout(f"  Node: {node}, status: missing")
                bad = True
                continue
            path, ok, diag, _variants, _params, api = rows[0][:6]
            text = "valid" if ok else f"invalid - {diag}"
            cli.to_stdout(f"  Node: {node}, status: {text} (path: {path}, API: "
                          f"{','.join(str(a) for a in api)})")
            for other in rows[1:]:
                cli.to_stdout(f"    [hidden] path: {other[0]}, status: "
                              f"{'valid' if other[1] else 'invalid - ' + other[2]}")
        cli.to_stdout("")
    return 1 if bad else 0


def format_os_info(os_: dict[str, Any]) -> list[Any]:
    """One OS's ``gnt-os info`` entries, Ganeti's layout: ``- valid: True`` items."""
    items: list[Any] = [[("valid", os_["valid"])], [("hidden", os_["hidden"])],
                        [("blacklisted", os_["blacklisted"])]]
    if os_["valid"]:
        items += [[("API versions", sorted(os_["api_versions"] or []))],
                  [("variants", list(os_["variants"] or []))],
                  [("parameters", [[(name, doc)] for name, doc in os_["parameters"] or []])]]
    return items


def show_os_info(opts: Any, args: list[str]) -> int:
    """Show details of OSes (YAML: OS name -> list of properties; doc/commands.md)."""
    from ganeti.cli import info
    found = _query(opts, list(args))
    missing = [name for name in args if name not in {o["name"] for o in found}]
    if missing:
        raise errors.OpPrereqError(f"OS(es) not found: {', '.join(missing)}",
                                   errors.ECODE_NOENT)
    info.print_info([(os_["name"], format_os_info(os_)) for os_ in found])
    return 0


HIDDEN_OPT = cli.Option("--hidden", dest="show_hidden", action="store_true", default=False,
                        help="Also list hidden OSes")

commands: dict[str, cli.Command] = {
    "list": (list_os, cli.ARGS_NONE, [cli.NOHDR_OPT, HIDDEN_OPT], "", "List the valid OSes"),
    "diagnose": (diagnose_os, cli.ARGS_NONE, [], "", "Diagnose the OSes on all nodes"),
    "info": (show_os_info, [cli.ArgUnknown(name="OS")], [], "[OS...]",
             "Show information about OSes"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-os``."""
    return cli.generic_main(commands, argv, prog="gnt-os")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
