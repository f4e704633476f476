"""``gnt-filter``: job filter rules (doc/jobfilters.md).

Rules decide whether the job queue accepts, pauses, rejects or
rate-limits a job; they are part of the cluster configuration and are
changed over LUXI (``ReplaceFilter``, ``DeleteFilter``), not by jobs.
"""

from __future__ import annotations

import time

from ganeti import cli, constants, errors, serializer
from ganeti.cli import verbs

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "parse_predicates", "parse_action", "format_info"]

#: The default fields of ``list``, Ganeti's.
LIST_FIELDS = ["uuid", "watermark", "priority", "predicates", "action", "reason_trail"]


def parse_predicates(text: str | None) -> list[Any]:
    """``--predicates``: a JSON list of predicates (doc/jobfilters.md)."""
    if text is None:
        return []
    try:
        value = serializer.loads(text)
    except errors.GanetiError as exc:
        raise errors.ParameterError(f"--predicates is not valid JSON: {exc}",
                                    errors.ECODE_INVAL) from None
    if not isinstance(value, list):
        raise errors.ParameterError("--predicates must be a JSON list of predicates",
                                    errors.ECODE_INVAL)
    return value


def parse_action(text: str) -> Any:
    """``--action``: ACCEPT, PAUSE, REJECT, CONTINUE or ``RATE_LIMIT n``."""
    from ganeti.jqueue import filters
    return filters.parse_action_text(text)


def _reason(opts: Any) -> list[list[Any]]:
    return [["gnt:user", opts.reason, time.time_ns()]] if opts.reason else []


def _replace(opts: Any, uuid: str | None) -> int:
    predicates = parse_predicates(opts.predicates)
    action = parse_action(opts.action)
    result = cli.get_client(opts).ReplaceFilter(uuid, opts.priority, predicates, action,
                                                _reason(opts))
    cli.to_stdout(str(result))
    return cli.EXIT_SUCCESS


def add_filter(opts: Any, args: list[str]) -> int:
    """Add a job filter rule; prints its UUID."""
    return _replace(opts, None)


def replace_filter(opts: Any, args: list[str]) -> int:
    """Replace the rule with the given UUID (or add it); prints the UUID."""
    return _replace(opts, args[0])


def delete_filter(opts: Any, args: list[str]) -> int:
    """Remove a job filter rule."""
    cli.get_client(opts).DeleteFilter(args[0])
    return cli.EXIT_SUCCESS


def format_info(row: list[Any]) -> list[str]:
    """``gnt-filter info`` lines of one rule, Ganeti's layout (the watermark
    on the second line)."""
    from ganeti.jqueue import filters
    uuid, watermark, priority, predicates, action, trail = row
    return [f"UUID: {uuid}", f"  Watermark: {watermark}", f"  Priority: {priority}",
            f"  Predicates: {serializer.dumps(predicates)}",
            f"  Action: {filters.action_text(action)}",
            f"  Reason trail: {serializer.dumps(trail)}"]


def show_filter(opts: Any, args: list[str]) -> int:
    """Show the rules with the given UUIDs (all without one)."""
    rows = cli.get_client(opts).QueryFilters(list(args), LIST_FIELDS)
    found = {row[0] for row in rows}
    missing = [uuid for uuid in args if uuid not in found]
    if missing:
        raise errors.OpPrereqError(f"Filter rule(s) not found: {', '.join(missing)}",
                                   errors.ECODE_NOENT)
    for row in rows:
        for line in format_info(row):
            cli.to_stdout(line)
    return cli.EXIT_SUCCESS


_RULE_OPTS = [
    cli.Option("--priority", dest="priority", type=int, default=0, metavar="N",
               help="Priority of the rule: rules are looked at from 0 (the first) up;"
                    " default 0"),
    cli.Option("--predicates", dest="predicates", default=None, metavar="JSON",
               help="JSON list of predicates, e.g. '[[\"opcode\", [\"=\", \"OP_ID\","
                    " \"OP_INSTANCE_CREATE\"]]]' (jobid, opcode, reason); default: [],"
                    " every job"),
    cli.Option("--action", dest="action", default="CONTINUE", metavar="ACTION",
               help="ACCEPT, PAUSE, REJECT, CONTINUE (default) or 'RATE_LIMIT n'"),
]
_UUID: list[cli.Arg] = [cli.ArgUnknown(min=1, max=1, name="filter-uuid")]

commands: dict[str, cli.Command] = {
    "add": (add_filter, cli.ARGS_NONE, _RULE_OPTS, "[--priority N] [--predicates JSON]"
            " [--action ACTION]", "Add a job filter rule (prints its UUID)"),
    "replace": (replace_filter, _UUID, _RULE_OPTS, "[--priority N] [--predicates JSON]"
                " [--action ACTION] <filter-uuid>",
                "Replace a job filter rule, or add it with that UUID; the watermark is"
                " set anew"),
    "delete": (delete_filter, _UUID, [], "<filter-uuid>", "Remove a job filter rule"),
    "list": (verbs.query_list_verb(constants.QR_FILTER, LIST_FIELDS, namefield="uuid"),
             [cli.ArgUnknown(name="filter-uuid")],
             verbs.LIST_OPTS,
             "[-o FIELDS] [filter-uuid...]",
             "List the job filter rules; default fields: " + ", ".join(LIST_FIELDS)),
    "list-fields": (verbs.list_fields_verb(constants.QR_FILTER), [cli.ArgUnknown(name="FIELD")],
                    verbs.LIST_FIELDS_OPTS, "[field...]",
                    "List the fields of job filter rules"),
    "info": (show_filter, [cli.ArgUnknown(name="filter-uuid")], [], "[filter-uuid...]",
             "Show job filter rules"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-filter``."""
    return cli.generic_main(commands, argv, prog="gnt-filter")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
