"""``gnt-os``: list, diagnose and describe OS definitions."""

from __future__ import annotations

from ganeti import cli, constants, errors
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "image_commands", "list_os", "diagnose_os", "show_os_info",
           "format_os_info", "modify_os", "modify_os_opcode", "image_add", "image_list",
           "image_remove", "image_table", "image_verbs", "IMAGE_FIELDS"]

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


# --- the image store (doc/images.md, "The image store") ---------------------------

#: field -> (title, how a store entry shows it)
IMAGE_FIELDS: dict[str, tuple[str, Any]] = {
    "name": ("Name", lambda e: e["name"]),
    "format": ("Format", lambda e: e["format"]),
    "size": ("Size", lambda e: _mib(e["size"])),
    "virtual_size": ("VirtualSize", lambda e: _mib(e["virtual_size"])),
    "checksum": ("Checksum", lambda e: f"sha256:{e['sha256'][:12]}"),
    "sha256": ("SHA256", lambda e: e["sha256"]),
    "source": ("Source", lambda e: e["source"]),
    "added": ("Added", lambda e: _stamp(e["added"])),
}
IMAGE_DEFAULT_FIELDS = ["name", "format", "size", "checksum", "added"]


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f}M"


def _stamp(ts: float) -> str:
    import time
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def image_table(entries: list[dict[str, Any]], fields: list[str], *, headers: bool = True,
                separator: str | None = None) -> list[str]:
    """The lines of ``gnt-os image list`` (times in UTC); unknown fields are an error."""
    unknown = [f for f in fields if f not in IMAGE_FIELDS]
    if unknown:
        raise errors.OpPrereqError(f"Unknown output field(s): {', '.join(unknown)} (known:"
                                   f" {', '.join(IMAGE_FIELDS)})", errors.ECODE_INVAL)
    rows = [[str(IMAGE_FIELDS[f][1](e)) for f in fields] for e in entries]
    if headers:
        rows.insert(0, [IMAGE_FIELDS[f][0] for f in fields])
    if separator is not None:
        return [separator.join(r) for r in rows]
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(len(fields))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def image_add(opts: Any, args: list[str]) -> int:
    """Add an image (a master's file or an http(s) URL) to the store."""
    op = wire.os_image_add(name=args[0], source=args[1],
                           checksum=opts.checksum or wire.NOT_SENT)
    cli.submit_or_send(op, opts)
    return cli.EXIT_SUCCESS


def image_list(opts: Any, args: list[str]) -> int:
    """List the store's images."""
    fields = cli.parse_fields(opts.output, IMAGE_DEFAULT_FIELDS)
    entries = cli.submit_opcode_and_wait(wire.os_image_list(names=list(args)), opts,
                                         feedback_fn=None)
    for line in image_table(entries, fields, headers=not opts.no_headers,
                            separator=opts.separator):
        cli.to_stdout(line)
    return cli.EXIT_SUCCESS


def image_remove(opts: Any, args: list[str]) -> int:
    """Remove an image from the store (and the nodes' cached copies)."""
    cli.submit_or_send(wire.os_image_remove(name=args[0]), opts)
    return cli.EXIT_SUCCESS


CHECKSUM_OPT = cli.Option("--checksum", dest="checksum", default=None, metavar="sha256:HEX",
                          help="The image's expected checksum, verified before it is stored")
_JOB_OPTS = [cli.SUBMIT_OPT, cli.PRINT_JOBID_OPT, cli.PRIORITY_OPT]

image_commands: dict[str, cli.Command] = {
    "add": (image_add, [cli.ArgUnknown(min=1, max=1, name="NAME"),
                        cli.ArgUnknown(min=1, max=1, name="SOURCE")],
            [CHECKSUM_OPT, *_JOB_OPTS], "[--checksum sha256:HEX] NAME SOURCE",
            "Copy an image (a file of the master or an http(s) URL) into the image store"),
    "list": (image_list, [cli.ArgUnknown(name="NAME")],
             [cli.NOHDR_OPT, cli.SEP_OPT, cli.FIELDS_OPT], "[-o FIELDS] [NAME...]",
             "List the image store's images (fields: " + ", ".join(IMAGE_FIELDS) + ")"),
    "remove": (image_remove, [cli.ArgUnknown(min=1, max=1, name="NAME")], _JOB_OPTS, "NAME",
               "Remove an image from the image store"),
}

def image_verbs(opts: Any, args: list[str]) -> int:
    """``gnt-os image VERB ...`` (:func:`main` dispatches before option parsing)."""
    return cli.generic_main(image_commands, list(args), prog="gnt-os image")


commands["image"] = (image_verbs, [cli.ArgUnknown(name="VERB")], [],
                     "add|list|remove ...", "Manage the OS image store (gnt-os image add|list|"
                     "remove)")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-os``; ``gnt-os image VERB`` runs the image store's verbs."""
    import sys
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["image"]:
        return cli.generic_main(image_commands, args[1:], prog="gnt-os image")
    return cli.generic_main(commands, args, prog="gnt-os")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
