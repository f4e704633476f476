"""Turn query results into the text tables ``gnt-* list`` prints.

Cell rendering, by field kind (normal cells):

=============  ==============================================================
``text``       as is
``bool``       ``Y`` / ``N``
``number``     ``str(value)``, right aligned
``unit``       :func:`ganeti.utils.units.format_unit` with ``units``, right aligned
``timestamp``  local time ``YYYY-MM-DD HH:MM:SS`` (a number or ``[sec, usec]``)
``other``      lists/tuples comma-joined, dicts as ``key=value, key=value``
               (sorted by key), anything else ``str(value)``
=============  ==============================================================

Containers nested in a list or dict print as ``[a, b]`` and
``{key=value, key=value}``, so no Python ``repr`` reaches the table.

A normal cell holding None prints as ``-``.  Non-normal cells print as
Ganeti does: unknown ``??``, no data ``?``, unavailable ``-``, offline ``*``;
with ``verbose=True``: ``(unknown)``, ``(nodata)``, ``(unavail)``,
``(offline)``.
"""

from __future__ import annotations

import time

from ganeti import constants
from ganeti.utils.units import format_unit

TYPE_CHECKING = False
if TYPE_CHECKING:  # the list commands import this module at start-up: no typing
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["format_table", "format_cell", "format_timestamp", "STATUS_TEXT"]

#: status -> (verbose text, short text)
STATUS_TEXT = {
    constants.RS_UNKNOWN: ("(unknown)", "??"),
    constants.RS_NODATA: ("(nodata)", "?"),
    constants.RS_UNAVAIL: ("(unavail)", "-"),
    constants.RS_OFFLINE: ("(offline)", "*"),
}
_RIGHT_ALIGNED = frozenset([constants.QFT_NUMBER, constants.QFT_FLOAT, constants.QFT_UNIT])
_CONVERTED = frozenset([constants.QFT_BOOL, constants.QFT_TIMESTAMP])


def format_timestamp(value: Any) -> str:
    """Local time ``YYYY-MM-DD HH:MM:SS`` for seconds or ``[seconds, microseconds]``."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        value = value[0] + value[1] / 1e6
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))


def format_cell(kind: str, status: int, value: Any, *, units: str = "h", verbose: bool = False,
                timefmt: Callable[[Any], str] = format_timestamp) -> str:
    """The text for one ``[status, value]`` cell of a field of ``kind``."""
    if status != constants.RS_NORMAL:
        verbose_text, short = STATUS_TEXT.get(status, ("(unknown status)", "?"))
        return verbose_text if verbose else short
    if value is None:
        return "-"
    if kind == constants.QFT_BOOL:
        return "Y" if value else "N"
    if kind == constants.QFT_UNIT and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format_unit(value, units)
    if kind == constants.QFT_TIMESTAMP:
        return timefmt(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_nested_text(elem) for elem in value)
    if isinstance(value, dict):
        return _dict_text(value)
    return str(value)


def _dict_text(value: dict[Any, Any]) -> str:
    """``key=value, key=value`` with the keys sorted (as text)."""
    items = sorted(value.items(), key=lambda kv: str(kv[0]))
    return ", ".join(f"{key}={_nested_text(val)}" for key, val in items)


def _nested_text(value: Any) -> str:
    """One element inside a list or dict cell."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return "{" + _dict_text(value) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_nested_text(elem) for elem in value) + "]"
    return str(value)


def _column_formatter(kind: str, units: str, timefmt: Callable[[Any], str]) -> Callable[[Any], str]:
    """A fast formatter for normal cells of one column: plain strings pass
    through, plain numbers and lists of strings take a short cut (the same
    text as :func:`format_cell`)."""
    if kind in _CONVERTED:
        def fmt_converted(value: Any) -> str:
            return format_cell(kind, constants.RS_NORMAL, value, units=units, timefmt=timefmt)
        return fmt_converted
    plain_int = kind != constants.QFT_UNIT

    def fmt(value: Any) -> str:
        cls = value.__class__
        if cls is str:
            return value
        if cls is int and plain_int:
            return str(value)
        if cls is list and all(elem.__class__ is str for elem in value):
            return ",".join(value)
        return format_cell(kind, constants.RS_NORMAL, value, units=units, timefmt=timefmt)
    return fmt


def format_table(fielddefs: Sequence[dict[str, Any]], rows: Sequence[Sequence[Sequence[Any]]], *,
                 headers: bool = True, separator: str | None = None, units: str | None = None,
                 verbose: bool = False,
                 timefmt: Callable[[Any], str] = format_timestamp) -> list[str]:
    """Format a query result (``result["fields"]``, ``result["data"]``) as lines.

    Without ``separator`` columns are padded to a common width and joined by
    one space; ``number``/``unit`` columns are right aligned, and the last
    column is not padded when left aligned.  With ``separator`` the cells
    (and headers) are just joined by it.  ``units`` defaults to ``"h"``
    (human) in aligned mode and ``"m"`` (plain MiB) with a separator, as
    Ganeti does.  Headers are the field titles.
    """
    if units is None:
        units = "m" if separator is not None else "h"
    kinds = [fdef["kind"] for fdef in fielddefs]
    formatters = [_column_formatter(kind, units, timefmt) for kind in kinds]
    status_text = {status: texts[0] if verbose else texts[1] for status, texts in STATUS_TEXT.items()}
    normal = constants.RS_NORMAL
    other = "(unknown status)" if verbose else "?"
    table = [[fmt(value) if status == normal else status_text.get(status, other)
              for fmt, (status, value) in zip(formatters, row)] for row in rows]
    if headers:
        table.insert(0, [fdef["title"] for fdef in fielddefs])
    if separator is not None:
        return [separator.join(line) for line in table]
    if not kinds:
        return ["" for _ in table]
    widths = [max((len(line[col]) for line in table), default=0) for col in range(len(kinds))]
    right = [kind in _RIGHT_ALIGNED for kind in kinds]
    last = len(kinds) - 1
    result = []
    for line in table:
        cells = []
        for col, text in enumerate(line):
            if right[col]:
                cells.append(text.rjust(widths[col]))
            elif col == last:
                cells.append(text)
            else:
                cells.append(text.ljust(widths[col]))
        result.append(" ".join(cells))
    return result
