"""Output: printing, timestamps and query tables.

Tables come from :func:`ganeti.query.format_table` (Ganeti's layout: a
header line of field titles unless ``--no-headers``, aligned columns or
``--separator``); :mod:`ganeti.query` is imported lazily so that verbs that
print no table start fast.
"""

from __future__ import annotations

import sys
import time

from ganeti import constants

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "to_stdout", "lines_to_stdout", "to_stderr", "confirm", "format_query_table", "format_timestamp", "merge_time",
    "build_query_filter", "generic_query_list", "warn_unknown_fields",
]


def _write_line(stream: Any, text: str) -> None:
    """Write ``text`` and a newline; characters the stream cannot encode
    (a lone surrogate in stored data) are written as backslash escapes."""
    line = text + "\n"
    try:
        stream.write(line)
    except UnicodeEncodeError:   # raised before anything is written
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(line.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


def to_stdout(text: str = "") -> None:
    """Print one line on stdout (flushed: progress must show at once)."""
    _write_line(sys.stdout, text)


def lines_to_stdout(lines: list[str]) -> None:
    """Print lines on stdout in one write (a table of 10,000 rows: one flush, not 10,000)."""
    if lines:
        _write_line(sys.stdout, "\n".join(lines))


def to_stderr(text: str = "") -> None:
    """Print one line on stderr."""
    _write_line(sys.stderr, text)


def confirm(text: str, *, forced: bool = False, flag: str = "--force") -> bool:
    """Ask the user to confirm ``text``; True at once when ``forced``.

    Without a terminal on stdin nothing is asked: the refusal says which
    option (``flag``) confirms.
    """
    if forced:
        return True
    if not sys.stdin.isatty():
        to_stderr(f"{text} Use {flag} to confirm.")
        return False
    answer = input(f"{text} Continue? y/[n]: ")
    return answer.strip().lower() in ("y", "yes")


def merge_time(ts: Any) -> float | None:
    """``[sec, usec]`` (or a number) -> float seconds; None stays None."""
    if ts is None:
        return None
    if isinstance(ts, (list, tuple)) and len(ts) == 2:
        return ts[0] + ts[1] / 1e6
    return float(ts)


def format_timestamp(ts: Any) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM:SS.uuuuuu`` (local time), or ``-``."""
    value = merge_time(ts)
    if value is None:
        return "-"
    usec = int(round((value - int(value)) * 1e6))
    if usec >= 1000000:
        value, usec = int(value) + 1, 0
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(value))) + f".{usec:06d}"


def build_query_filter(args: list[str], force_filter: bool, *, namefield: str = "name",
                       isnumeric: bool = False) -> Any:
    """Turn list arguments into a query filter (None for no filter).

    With ``force_filter`` (``-F``), or a single argument that looks like an
    expression, the argument is parsed as filter text; otherwise the
    arguments are names (ids when ``isnumeric``) ORed together.
    """
    if not args and not force_filter:
        return None  # no filter: spares a list command the import of the filter code
    from ganeti import query  # lazy: only list verbs need it
    return query.make_filter(list(args), force_filter=force_filter, namefield=namefield,
                             isnumeric=isnumeric)


def format_query_table(result: dict[str, Any], *, headers: bool = True,
                       separator: str | None = None, units: str | None = None,
                       verbose: bool = False) -> list[str]:
    """Format a Query result (``fields`` + ``data``) as Ganeti-style table lines
    (``verbose``: cells without a value say why, e.g. ``(offline)``, not ``*``)."""
    from ganeti import query
    return query.format_table(result["fields"], result["data"], headers=headers,
                              separator=separator, units=units, verbose=verbose)


def generic_query_list(cl: Any, resource: str, fields: list[str], qfilter: Any, *,
                       headers: bool = True, separator: str | None = None,
                       units: str | None = None, verbose: bool = False,
                       cells: dict[str, Callable[[Any], Any]] | None = None) -> int:
    """Run ``Query`` and print the table; returns the exit code.

    ``cells``: per field, a function turning a value into what the table
    shows (Ganeti's list format overrides, e.g. a network's group list).
    Unknown fields print a warning on stderr (the table is printed all the
    same, their cells empty) and give exit code 14, Ganeti's
    ``EXIT_UNKNOWN_FIELD``.
    """
    result = cl.Query(resource, fields, qfilter)
    for name, shown in (cells or {}).items():
        if name in fields:
            col = fields.index(name)
            for row in result["data"]:
                row[col] = [row[col][0], shown(row[col][1])]
    lines_to_stdout(format_query_table(result, headers=headers, separator=separator, units=units,
                                       verbose=verbose))
    return warn_unknown_fields(result["fields"])


def warn_unknown_fields(fdefs: list[dict[str, Any]]) -> int:
    """Warn on stderr about fields of kind ``unknown``; 14 if there are any, else 0."""
    unknown = [f["name"] for f in fdefs if f.get("kind") == constants.QFT_UNKNOWN]
    if unknown:
        to_stderr(f"Warning: Queried for unknown fields {', '.join(unknown)}")
        return constants.EXIT_UNKNOWN_FIELD
    return 0
