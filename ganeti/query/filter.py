"""The query2 filter list language: validation and compilation to a predicate.

A filter is ``None`` (everything matches) or a prefix list:

===================================  =========================================
``["&", f1, f2, ...]``               all sub-filters match (``["&"]`` is true)
``["|", f1, f2, ...]``               any sub-filter matches (``["|"]`` is false)
``["!", f]``                         ``f`` does not match
``["?", field]``                     the field's value is truthy
``["==", field, value]``             equal (legacy spelling ``"="``)
``["!=", field, value]``             not equal
``["<"|">"|"<="|">=", field, v]``    ordering
``["=~", field, regex]``             Python ``re.search`` on a text value
``["=[]", listfield, value]``        the list value contains ``value``
===================================  =========================================

Values are checked against the field kind when the filter is compiled: text
fields take strings, number and timestamp fields take numbers, unit fields
take numbers (MiB) or size strings such as ``"1G"``, bool fields take
booleans, ``other`` fields take any JSON value.  Ordering is not allowed on
bool fields, ``=~`` only on text/other fields and ``=[]`` only on other
(list) fields.

A comparison, ``?``, ``=~`` or ``=[]`` on a cell whose status is not normal
(the getter returned NODATA/UNAVAIL/OFFLINE) is false; so ``["!", ...]`` of
it is true.  A comparison between incomparable runtime values (``None < 3``)
is false too.  Every problem raises :class:`errors.QueryFilterParseError`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

from ganeti import constants, errors
from ganeti.query.fields import FieldTable, Sentinel
from ganeti.utils import units

__all__ = ["compile_filter", "filter_fields", "requested_names", "make_simple_filter",
           "Predicate", "legacy_os_filter", "OP_AND", "OP_OR", "OP_NOT", "OP_TRUE", "OP_EQUAL",
           "OP_EQUAL_LEGACY", "OP_NOT_EQUAL", "OP_LT", "OP_LE", "OP_GT", "OP_GE",
           "OP_REGEXP", "OP_CONTAINS", "ALL_OPERATORS"]

Predicate = Callable[[Any, Any], bool]

OP_AND = "&"
OP_OR = "|"
OP_NOT = "!"
OP_TRUE = "?"
OP_EQUAL = "=="
OP_EQUAL_LEGACY = "="
OP_NOT_EQUAL = "!="
OP_LT = "<"
OP_LE = "<="
OP_GT = ">"
OP_GE = ">="
OP_REGEXP = "=~"
OP_CONTAINS = "=[]"

_ORDERING = {OP_LT: operator.lt, OP_LE: operator.le, OP_GT: operator.gt, OP_GE: operator.ge}
_EQUALITY = {OP_EQUAL: operator.eq, OP_EQUAL_LEGACY: operator.eq, OP_NOT_EQUAL: operator.ne}
ALL_OPERATORS = frozenset([OP_AND, OP_OR, OP_NOT, OP_TRUE, OP_REGEXP, OP_CONTAINS,
                           *_ORDERING, *_EQUALITY])

_MAX_DEPTH = 100
_NUMERIC_KINDS = (constants.QFT_NUMBER, constants.QFT_FLOAT, constants.QFT_TIMESTAMP)


def _true(ctx: Any, item: Any) -> bool:
    return True


def _false(ctx: Any, item: Any) -> bool:
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Compiler:
    """Turns one filter into nested closures, recording the fields it uses."""

    def __init__(self, table: FieldTable) -> None:
        self.table = table
        self.fields: set[str] = set()

    def compile(self, flt: Any, depth: int = 0) -> Predicate:
        if depth > _MAX_DEPTH:
            raise errors.QueryFilterParseError(f"Filter nested deeper than {_MAX_DEPTH} levels")
        if not isinstance(flt, (list, tuple)) or not flt:
            raise errors.QueryFilterParseError(f"Filter must be a non-empty list, got {flt!r}")
        op, args = flt[0], flt[1:]
        if not isinstance(op, str) or op not in ALL_OPERATORS:
            raise errors.QueryFilterParseError(f"Unknown filter operator {op!r}")
        if op in (OP_AND, OP_OR):
            return self._logic(op, [self.compile(sub, depth + 1) for sub in args])
        if op == OP_NOT:
            if len(args) != 1:
                raise errors.QueryFilterParseError(
                    f"Operator '!' takes exactly one filter, got {len(args)}")
            inner = self.compile(args[0], depth + 1)
            return lambda ctx, item: not inner(ctx, item)
        if op == OP_TRUE:
            if len(args) != 1:
                raise errors.QueryFilterParseError(
                    f"Operator '?' takes exactly one field name, got {len(args)} arguments")
            return self._truth(self._field(op, args[0]).getter)
        if len(args) != 2:
            raise errors.QueryFilterParseError(
                f"Operator '{op}' takes a field name and a value, got {len(args)} arguments")
        fdef = self._field(op, args[0])
        return self._binary(op, fdef.name, fdef.kind, fdef.getter, args[1])

    def _field(self, op: str, name: Any) -> Any:
        if not isinstance(name, str):
            raise errors.QueryFilterParseError(
                f"Operator '{op}' needs a field name (a string), got {name!r}")
        fdef = self.table.get(name)
        if fdef is None:
            raise errors.QueryFilterParseError(f"Unknown field '{name}' in filter")
        self.fields.add(name)
        return fdef

    @staticmethod
    def _logic(op: str, subs: list[Predicate]) -> Predicate:
        if not subs:
            return _true if op == OP_AND else _false
        if len(subs) == 1:
            return subs[0]
        if op == OP_AND:
            def and_fn(ctx: Any, item: Any) -> bool:
                for sub in subs:
                    if not sub(ctx, item):
                        return False
                return True
            return and_fn

        def or_fn(ctx: Any, item: Any) -> bool:
            for sub in subs:
                if sub(ctx, item):
                    return True
            return False
        return or_fn

    @staticmethod
    def _truth(getter: Callable[[Any, Any], Any]) -> Predicate:
        def fn(ctx: Any, item: Any) -> bool:
            value = getter(ctx, item)
            return value.__class__ is not Sentinel and bool(value)
        return fn

    def _binary(self, op: str, name: str, kind: str, getter: Callable[[Any, Any], Any],
                value: Any) -> Predicate:
        if op == OP_REGEXP:
            return self._regexp(name, kind, getter, value)
        if op == OP_CONTAINS:
            if kind != constants.QFT_OTHER:
                raise errors.QueryFilterParseError(
                    f"Operator '=[]' needs a list field, '{name}' is of kind '{kind}'")

            def contains(ctx: Any, item: Any) -> bool:
                cell = getter(ctx, item)
                if cell.__class__ is Sentinel or not isinstance(cell, (list, tuple, set, frozenset)):
                    return False
                return value in cell
            return contains
        if op in _ORDERING and kind == constants.QFT_BOOL:
            raise errors.QueryFilterParseError(f"Operator '{op}' cannot be used on bool field '{name}'")
        value = self._check_value(op, name, kind, value)
        cmp = _EQUALITY.get(op) or _ORDERING[op]

        def compare(ctx: Any, item: Any) -> bool:
            cell = getter(ctx, item)
            if cell.__class__ is Sentinel:
                return False
            try:
                return bool(cmp(cell, value))
            except TypeError:
                return False
        return compare

    @staticmethod
    def _check_value(op: str, name: str, kind: str, value: Any) -> Any:
        def bad(expected: str) -> errors.QueryFilterParseError:
            return errors.QueryFilterParseError(
                f"Operator '{op}' on {kind} field '{name}' needs {expected}, got {value!r}")
        if kind == constants.QFT_TEXT:
            if not isinstance(value, str):
                raise bad("a string")
        elif kind in _NUMERIC_KINDS:
            if not _is_number(value):
                raise bad("a number")
        elif kind == constants.QFT_UNIT:
            if isinstance(value, str):
                try:
                    return units.parse_unit(value)
                except errors.UnitParseError as exc:
                    raise bad("a size") from exc
            if not _is_number(value):
                raise bad("a number or a size")
        elif kind == constants.QFT_BOOL:
            if not isinstance(value, bool):
                raise bad("a boolean")
        elif op in _ORDERING and not (_is_number(value) or isinstance(value, str)):
            raise bad("a number or a string")
        return value

    @staticmethod
    def _regexp(name: str, kind: str, getter: Callable[[Any, Any], Any], pattern: Any) -> Predicate:
        if kind not in (constants.QFT_TEXT, constants.QFT_OTHER):
            raise errors.QueryFilterParseError(
                f"Operator '=~' needs a text field, '{name}' is of kind '{kind}'")
        if not isinstance(pattern, str):
            raise errors.QueryFilterParseError(
                f"Operator '=~' needs a regular expression string, got {pattern!r}")
        try:
            search = re.compile(pattern).search
        except re.error as exc:
            raise errors.QueryFilterParseError(
                f"Invalid regular expression {pattern!r} for field '{name}': {exc}") from exc

        def match(ctx: Any, item: Any) -> bool:
            cell = getter(ctx, item)
            return cell.__class__ is str and search(cell) is not None
        return match


def compile_filter(table: FieldTable, qfilter: Any) -> Predicate:
    """Validate ``qfilter`` against ``table`` and return ``predicate(ctx, item)``.

    ``None`` gives a predicate that is always true.  Raises
    :class:`errors.QueryFilterParseError` for any invalid filter.
    """
    if qfilter is None:
        return _true
    return _Compiler(table).compile(qfilter)


def filter_fields(table: FieldTable, qfilter: Any) -> set[str]:
    """The field names a (valid) filter refers to; validates like :func:`compile_filter`."""
    if qfilter is None:
        return set()
    compiler = _Compiler(table)
    compiler.compile(qfilter)
    return compiler.fields


def _name_of(flt: Any, namefield: str) -> Any:
    """The value of ``["==", namefield, value]``, or None if ``flt`` is not that."""
    if (isinstance(flt, (list, tuple)) and len(flt) == 3
            and flt[0] in (OP_EQUAL, OP_EQUAL_LEGACY) and flt[1] == namefield
            and isinstance(flt[2], (str, int)) and not isinstance(flt[2], bool)):
        return flt[2]
    return None


def requested_names(qfilter: Any, namefield: str = "name") -> list[Any] | None:
    """The names a simple name filter asks for, or None for any other filter.

    A simple name filter is ``["==", namefield, n]`` or an ``|`` of such
    (what :func:`make_simple_filter` builds).  The names come back in order,
    without duplicates, so the caller can report those that do not exist
    (``errors.ECODE_NOENT``).  An empty ``["|"]`` gives None.
    """
    if qfilter is None or not isinstance(qfilter, (list, tuple)) or not qfilter:
        return None
    single = _name_of(qfilter, namefield)
    if single is not None:
        return [single]
    if qfilter[0] != OP_OR or len(qfilter) < 2:
        return None
    names: list[Any] = []
    seen: set[Any] = set()
    for sub in qfilter[1:]:
        name = _name_of(sub, namefield)
        if name is None:
            return None
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def make_simple_filter(namefield: str, names: Any) -> list[Any] | None:
    """``["|", ["==", namefield, n1], ...]`` for the given names; None if there are none."""
    if not names:
        return None
    return [OP_OR] + [[OP_EQUAL, namefield, name] for name in names]


def legacy_os_filter(fields: list[str], names: list[str] | None = None) -> Any:
    """The filter of the legacy OS listings (OP_OS_DIAGNOSE, RAPI ``/2/os``), as in
    Ganeti: hidden, blacklisted and invalid OSes are left out unless the field
    saying so is asked for; ``names`` restricts it to those."""
    parts: list[Any] = [[OP_NOT, [OP_TRUE, f]] for f in ("hidden", "blacklisted")
                        if f not in fields]
    if "valid" not in fields:
        parts.append([OP_TRUE, "valid"])
    if names:
        parts.insert(0, make_simple_filter("name", names))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else [OP_AND, *parts]
