"""``gnt-os``: list, diagnose and describe OS definitions."""

from __future__ import annotations

from ganeti import cli, constants, errors
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "list_os", "diagnose_os", "show_os_info", "format_os_info",
           "modify_os", "modify_os_opcode"]

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


def _yes_no(value: str | None, flag: str) -> bool | None:
    if value is None:
        return None
    if value not in ("yes", "no"):
        raise errors.ParameterError(f"{flag} takes yes or no, not {value!r}",
                                    errors.ECODE_INVAL)
    return value == "yes"


def modify_os_opcode(opts: Any, os_name: str) -> dict[str, Any] | None:
    """The OP_CLUSTER_SET_PARAMS dict of ``gnt-os modify`` (as Ganeti's: the OS's
    hypervisor parameters ``os_hvp``, its parameters ``osparams`` and
    ``osparams_private_cluster``, and ``[add|remove, OS]`` changes of
    ``hidden_os``/``blacklisted_os``), or None when no change was given.

    Raises :class:`errors.ParameterError` for a malformed option value.
    """
    from ganeti.client.gnt_cluster import parse_hvparams, parse_keyval
    if not os_name or not os_name[0].isalnum() or not all(
            c.isascii() and (c.isalnum() or c in "_.+-") for c in os_name):
        raise errors.ParameterError(f"Invalid OS name {os_name!r} (letters, digits, '_',"
                                    " '.', '+' and '-')", errors.ECODE_INVAL)
    op: dict[str, Any] = {}
    hvp = parse_hvparams(opts.hvparams)
    if hvp:
        op["os_hvp"] = {os_name: hvp}
    osp = parse_keyval(opts.osparams, "OS parameters")
    if osp:
        op["osparams"] = {os_name: osp}
    private = parse_keyval(opts.osparams_private, "private OS parameters")
    if private:
        op["osparams_private_cluster"] = {os_name: private}
    for key, flag, value in (("hidden_os", "--hidden", opts.hidden),
                             ("blacklisted_os", "--blacklisted", opts.blacklisted)):
        wanted = _yes_no(value, flag)
        if wanted is not None:
            op[key] = [["add" if wanted else "remove", os_name]]
    return wire.cluster_set_params(**op) if op else None


def modify_os(opts: Any, args: list[str]) -> int:
    """Change the cluster's settings for one OS: hidden, blacklisted, OS-specific
    hypervisor parameters (-H) and OS parameters (-O); OP_CLUSTER_SET_PARAMS."""
    op = modify_os_opcode(opts, args[0])
    if op is None:
        cli.to_stderr("At least one of OS parameters or hypervisor parameters must be passed")
        return cli.EXIT_FAILURE
    cli.submit_or_send(op, opts)
    return cli.EXIT_SUCCESS


HIDDEN_OPT = cli.Option("--hidden", dest="show_hidden", action="store_true", default=False,
                        help="Also list hidden OSes")

_YN = ["yes", "no"]
MODIFY_OPTS = [
    cli.Option("-H", "--hypervisor-parameters", dest="hvparams", action="append", default=[],
               metavar="HV:key=val,...", help="Hypervisor parameters for instances of this"
               " OS (repeatable; key=default removes one)"),
    cli.Option("-O", "--os-parameters", dest="osparams", default=None, metavar="key=val,...",
               help="OS parameters (key=default removes one)"),
    cli.Option("--os-parameters-private", dest="osparams_private", default=None,
               metavar="key=val,...", help="Private OS parameters (not supported here:"
               " refused, doc/compat.md)"),
    cli.Option("--hidden", dest="hidden", default=None, choices=_YN,
               help="Hide the OS from 'gnt-os list' (yes) or show it again (no)"),
    cli.Option("--blacklisted", dest="blacklisted", default=None, choices=_YN,
               help="Refuse new instances of the OS (yes) or allow them again (no)"),
    cli.SUBMIT_OPT, cli.PRINT_JOBID_OPT, cli.PRIORITY_OPT, cli.DRY_RUN_OPT,
]

commands: dict[str, cli.Command] = {
    "list": (list_os, cli.ARGS_NONE, [cli.NOHDR_OPT, HIDDEN_OPT], "", "List the valid OSes"),
    "diagnose": (diagnose_os, cli.ARGS_NONE, [], "", "Diagnose the OSes on all nodes"),
    "info": (show_os_info, [cli.ArgUnknown(name="OS")], [], "[OS...]",
             "Show information about OSes"),
    "modify": (modify_os, [cli.ArgUnknown(min=1, max=1, name="OS")], MODIFY_OPTS,
               "[options] OS", "Change the cluster's settings for an OS: hidden,"
               " blacklisted, hypervisor parameters (-H) and OS parameters (-O)"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-os``."""
    return cli.generic_main(commands, argv, prog="gnt-os")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
