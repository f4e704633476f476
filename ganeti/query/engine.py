"""Run a query over items: select fields, filter, sort, and build result cells."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ganeti import constants, errors
from ganeti.query.fields import FieldDef, FieldTable, Sentinel, fielddef_to_dict, unknown_field
from ganeti.query.filter import compile_filter, filter_fields, requested_names

__all__ = ["query", "execute", "query_fields", "old_style_rows", "resolve_fields",
           "required_data", "nice_sort_key"]

_RS_NORMAL = constants.RS_NORMAL
_DIGITS_RE = re.compile(r"(\d+)")


def _check_names(field_names: Any) -> None:
    if isinstance(field_names, str) or not isinstance(field_names, Sequence):
        raise errors.ParameterError(f"Field names must be a list of strings, got {field_names!r}",
                                    errors.ECODE_INVAL)
    for name in field_names:
        if not isinstance(name, str):
            raise errors.ParameterError(f"Field names must be strings, got {name!r}",
                                        errors.ECODE_INVAL)


def resolve_fields(table: FieldTable, field_names: Sequence[str]) -> list[FieldDef]:
    """The definitions for ``field_names``, in order; unknown names get kind ``unknown``.

    Raises :class:`errors.ParameterError` if the names are not a list of strings.
    """
    _check_names(field_names)
    get = table.get
    return [get(name) or unknown_field(name) for name in field_names]


def required_data(table: FieldTable, field_names: Sequence[str], qfilter: Any = None) -> set[str]:
    """Union of ``needs`` of the requested fields and the fields the filter uses.

    Lets the caller collect only the data that is asked for (for instance,
    skip node RPC unless a ``"live"`` field is requested or filtered on).
    Raises :class:`errors.QueryFilterParseError` for an invalid filter.
    """
    needed: set[str] = set()
    for fdef in resolve_fields(table, field_names):
        needed |= fdef.needs
    for name in filter_fields(table, qfilter):
        needed |= table[name].needs
    return needed


@functools.lru_cache(maxsize=1 << 16)
def _text_sort_key(value: str) -> tuple[Any, ...]:
    """:func:`nice_sort_key` of a string, memoised: the same names (10,000
    instances) are sorted by every list (the key is only compared, never changed)."""
    parts: list[Any] = _DIGITS_RE.split(value)
    parts[1::2] = [int(p) for p in parts[1::2]]
    return (1, tuple(parts))


def nice_sort_key(value: Any) -> tuple[Any, ...]:
    """Sort key for names: numbers first, then strings with digit runs compared
    as numbers ("node2" < "node10"), then anything else; sentinels last."""
    if value.__class__ is Sentinel:
        return (3,)
    if value.__class__ is str:
        return _text_sort_key(value)
    if isinstance(value, str):
        return _text_sort_key(str(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (2, str(value))


def _cell_sort_key(cell: list[Any]) -> tuple[Any, ...]:
    return nice_sort_key(cell[1]) if cell[0] == _RS_NORMAL else (3,)


def query(table: FieldTable, items: Iterable[Any], ctx: Any, field_names: Sequence[str],
          qfilter: Any = None, *, namefield: str | None = "name",
          sort_key: Callable[[Any], Any] | None = None,
          order_field: str | None = None) -> dict[str, Any]:
    """Evaluate a query; returns ``{"fields": [fielddef dicts], "data": [rows]}``.

    Each row holds one ``[status, value]`` cell per requested field, where
    status is a ``constants.RS_*`` value and only ``RS_NORMAL`` cells carry a
    value (others carry None); unknown field names give ``RS_UNKNOWN`` cells.
    Items are kept when ``qfilter`` (list language, may use fields that are not
    requested) matches.  Row order: by ``sort_key(item)`` if given; otherwise
    by the ``namefield`` value with :func:`nice_sort_key` when the table has
    that field; otherwise (``namefield=None`` or not in the table) the order
    of ``items``.  A simple name filter (names given on the command line,
    :func:`requested_names`) on ``order_field`` (default: ``namefield``; job
    ids: ``"id"``) puts the rows in the order of its names, as Ganeti does.
    Getters are called with ``(ctx, item)``.

    Raises :class:`errors.QueryFilterParseError` for an invalid filter and
    :class:`errors.ParameterError` for malformed field names.
    """
    fdefs = resolve_fields(table, field_names)
    if qfilter is None:
        selected = list(items)
    else:
        pred = compile_filter(table, qfilter)
        selected = [item for item in items if pred(ctx, item)]
    name_col = None
    if sort_key is not None:
        selected.sort(key=sort_key)
    elif namefield is not None and namefield in table:
        if namefield in field_names:
            name_col = list(field_names).index(namefield)  # sort the rows, no second getter call
        else:
            name_getter = table[namefield].getter
            selected.sort(key=lambda item: nice_sort_key(name_getter(ctx, item)))
    order_field = namefield if order_field is None else order_field
    if order_field is not None and order_field in table:
        wanted = _ordering_names(qfilter, order_field)
        if wanted:
            selected = _in_requested_order(selected, wanted, table[order_field].getter, ctx,
                                           name_col is not None)
            name_col = None

    getters = [fdef.getter for fdef in fdefs]
    data: list[list[list[Any]]] = []
    append_row = data.append
    for item in selected:
        row: list[list[Any]] = []
        append = row.append
        for getter in getters:
            value = getter(ctx, item)
            if value.__class__ is Sentinel:
                append([value.status, None])
            else:
                append([_RS_NORMAL, value])
        append_row(row)
    if name_col is not None:
        data.sort(key=lambda row: _cell_sort_key(row[name_col]))
    return {"fields": [fielddef_to_dict(fdef) for fdef in fdefs], "data": data}


def _ordering_names(qfilter: Any, field: str) -> list[Any] | None:
    """The names of a simple name filter, also as one conjunct of an ``&``
    (``gnt-job list 3 1`` adds "not archived" to its id filter)."""
    names = requested_names(qfilter, field)
    if names is None and isinstance(qfilter, list) and qfilter[:1] == ["&"]:
        found = [n for n in (requested_names(sub, field) for sub in qfilter[1:]) if n]
        names = found[0] if len(found) == 1 else None
    return names


def _in_requested_order(selected: list[Any], wanted: list[Any], getter: Callable[..., Any],
                        ctx: Any, unsorted: bool) -> list[Any]:
    """``selected`` in the order of ``wanted`` (names not in it last, in name order)."""
    position = {name: idx for idx, name in enumerate(wanted)}
    names = [getter(ctx, item) for item in selected]
    order = sorted(range(len(selected)),
                   key=lambda i: (position.get(names[i], len(position)),
                                  nice_sort_key(names[i]) if unsorted else 0))
    return [selected[i] for i in order]


#: The name used in doc/design/contracts.md for :func:`query`.
execute = query


def query_fields(table: FieldTable, field_names: Sequence[str] | None = None) -> dict[str, Any]:
    """Field definitions: ``{"fields": [...]}``; all listed ones (not the
    extensions, ``FieldDef.listed``) in :func:`nice_sort_key` order of their
    names when ``field_names`` is None, else those named in order (unknown
    ones with kind ``unknown``)."""
    if field_names is None:
        fdefs = [table[name] for name in sorted(table, key=nice_sort_key) if table[name].listed]
    else:
        fdefs = resolve_fields(table, field_names)
    return {"fields": [fielddef_to_dict(fdef) for fdef in fdefs]}


def old_style_rows(result: dict[str, Any]) -> list[list[Any]]:
    """Values only (None for non-normal cells), for QueryInstances/QueryNodes/QueryJobs."""
    return [[value if status == _RS_NORMAL else None for status, value in row]
            for row in result["data"]]
