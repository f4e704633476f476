"""Tag verbs shared by the ``gnt-*`` tools: add-tags, list-tags, remove-tags, search-tags.

Each factory returns a ``commands`` table row for one tag kind
(``constants.TAG_*``); for the cluster there is no object name argument.
"""

from __future__ import annotations

from ganeti import cli, constants
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["add_tags", "list_tags", "remove_tags", "search_tags", "FROM_FILE_OPT"]

FROM_FILE_OPT = cli.Option("--from", dest="tags_source", default=None, metavar="FILE",
                           help="Read the tags from FILE (one a line, '-' for stdin)")


def _split(kind: str, args: list[str]) -> tuple[str | None, list[str]]:
    if kind == constants.TAG_CLUSTER:
        return None, list(args)
    return args[0], list(args[1:])


def _extend_from_file(opts: Any, tags: list[str]) -> list[str]:
    source = getattr(opts, "tags_source", None)
    if not source:
        return tags
    import sys
    if source == "-":
        text = sys.stdin.read()
    else:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    return tags + [line.strip() for line in text.splitlines() if line.strip()]


def _name_args(kind: str, extra_min: int) -> list[cli.Arg]:
    if kind == constants.TAG_CLUSTER:
        return [cli.ArgUnknown(min=extra_min, name="TAG")]
    return [cli.ArgUnknown(min=1, max=1, name=kind.upper()),
            cli.ArgUnknown(min=extra_min, name="TAG")]


def _change_tags(kind: str, build: Callable[..., dict[str, Any]],
                 description: str) -> cli.Command:
    """An ``add-tags``/``remove-tags`` row: the opcode of ``build`` with the given tags."""
    def verb(opts: Any, args: list[str]) -> int:
        name, tags = _split(kind, args)
        tags = _extend_from_file(opts, tags)
        if not tags:
            return cli.usage_error(opts.command, "No tags given")
        cli.submit_or_send(build(kind=kind, name=name, tags=tags), opts)
        return 0
    return (verb, _name_args(kind, 0), [FROM_FILE_OPT, cli.SUBMIT_OPT], "", description)


def add_tags(kind: str) -> cli.Command:
    """The ``add-tags`` row for ``kind``."""
    return _change_tags(kind, wire.tags_set, f"Add tags to the {kind}")


def list_tags(kind: str) -> cli.Command:
    """The ``list-tags`` row for ``kind``."""
    def verb(opts: Any, args: list[str]) -> int:
        name, _ = _split(kind, args)
        result = cli.submit_opcode_and_wait(wire.tags_get(kind=kind, name=name), opts)
        for tag in sorted(result or []):
            cli.to_stdout(tag)
        return 0
    args: list[cli.Arg] = [] if kind == constants.TAG_CLUSTER else \
        [cli.ArgUnknown(min=1, max=1, name=kind.upper())]
    return (verb, args, [], "", f"List the tags of the {kind}")


def remove_tags(kind: str) -> cli.Command:
    """The ``remove-tags`` row for ``kind``."""
    return _change_tags(kind, wire.tags_del, f"Remove tags from the {kind}")


def search_tags() -> cli.Command:
    """The ``search-tags PATTERN`` row (gnt-cluster)."""
    def verb(opts: Any, args: list[str]) -> int:
        result = cli.submit_opcode_and_wait(wire.tags_search(pattern=args[0]), opts)
        if not result:
            return 1
        for path, tag in result:
            cli.to_stdout(f"{path} {tag}")
        return 0
    return (verb, [cli.ArgUnknown(min=1, max=1, name="PATTERN")], [], "PATTERN",
            "Search the tags of the cluster and its objects for a regex")
