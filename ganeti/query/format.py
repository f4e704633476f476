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
from itertools import repeat
from operator import itemgetter

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
_STATUS, _VALUE = itemgetter(0), itemgetter(1)


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
    status_text = {status: texts[0] if verbose else texts[1] for status, texts in STATUS_TEXT.items()}
    other = "(unknown status)" if verbose else "?"
    # column by column: most columns are all normal cells of one plain type
    cells_by_column = list(zip(*rows)) if rows else [() for _ in kinds]
    columns = [_column_texts(cells, kind, units, timefmt, status_text, other)
               for cells, kind in zip(cells_by_column, kinds)]
    if headers:
        for column, fdef in zip(columns, fielddefs):
            column.insert(0, fdef["title"])
    nlines = len(rows) + (1 if headers else 0)
    if separator is not None:
        return [separator.join(line) for line in zip(*columns)] if kinds else [""] * nlines
    if not kinds:
        return [""] * nlines
    last = len(kinds) - 1
    for col, (kind, column) in enumerate(zip(kinds, columns)):
        width = max(map(len, column), default=0)
        if kind in _RIGHT_ALIGNED:
            columns[col] = list(map(str.rjust, column, repeat(width)))
        elif col != last:
            columns[col] = list(map(str.ljust, column, repeat(width)))
    return [" ".join(line) for line in zip(*columns)]


def _column_texts(cells: Sequence[Sequence[Any]], kind: str, units: str,
                  timefmt: Callable[[Any], str], status_text: dict[int, str],
                  other: str) -> list[str]:
    """The texts of one column's ``[status, value]`` cells (as
    :func:`format_cell`), with short cuts for a column of normal cells all
    holding strings, plain ints or lists of strings, and each distinct
    size of a column of ints formatted once."""
    normal = constants.RS_NORMAL
    statuses = set(map(_STATUS, cells))
    if not statuses or statuses == {normal}:
        values = list(map(_VALUE, cells))
        classes = set(map(type, values))
        if kind not in _CONVERTED and len(classes) == 1:
            cls = classes.pop()
            if cls is str:
                return values
            if cls is int and kind != constants.QFT_UNIT:
                return list(map(str, values))
            if cls is list and all(elem.__class__ is str for value in values for elem in value):
                return list(map(",".join, values))
            if cls is int:   # a unit column: few distinct sizes
                fmt = _column_formatter(kind, units, timefmt)
                texts = {value: fmt(value) for value in set(values)}
                return list(map(texts.__getitem__, values))
        fmt = _column_formatter(kind, units, timefmt)
        return [fmt(value) for value in values]
    fmt = _column_formatter(kind, units, timefmt)
    return [fmt(value) if status == normal else status_text.get(status, other)
            for status, value in cells]
