"""Field definitions: what a query resource can report, and how to get it.

A :class:`FieldDef` names one column (``name``, ``title``, ``kind``, ``doc``)
and carries a ``getter(ctx, item)`` that computes the cell value for one item.
A resource is described by a :data:`FieldTable` (name -> FieldDef) built once,
at import time, with :func:`make_table`.

Getters return the plain value for a normal cell (status 0), or one of the
sentinels :data:`NODATA` (2), :data:`UNAVAIL` (3), :data:`OFFLINE` (4) to set
the cell status; the engine turns those into ``[status, None]``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ganeti import constants, errors

__all__ = [
    "FieldDef", "FieldTable", "Getter", "make_table", "unknown_field",
    "NODATA", "UNAVAIL", "OFFLINE", "UNKNOWN", "Sentinel", "ALL_KINDS",
    "simple_field", "dict_field", "tags_field", "uuid_field", "serial_no_field",
    "timestamp_fields", "fielddef_to_dict",
]

Getter = Callable[[Any, Any], Any]

ALL_KINDS = frozenset([
    constants.QFT_UNKNOWN, constants.QFT_TEXT, constants.QFT_BOOL,
    constants.QFT_NUMBER, constants.QFT_UNIT, constants.QFT_TIMESTAMP,
    constants.QFT_OTHER, constants.QFT_FLOAT,
])

# Ganeti's field names: lower case, digits, and "._/" (e.g. "disk.size/0").
_FIELD_NAME_RE = re.compile(r"^[a-z0-9/._]+$")


class Sentinel:
    """A getter result that is not a value but a cell status."""

    __slots__ = ("status", "label")

    def __init__(self, status: int, label: str) -> None:
        self.status = status
        self.label = label

    def __repr__(self) -> str:
        return f"<query {self.label}>"


#: The data needed for this field was not collected (status 2).
NODATA = Sentinel(constants.RS_NODATA, "NODATA")
#: The data could not be obtained, e.g. the node did not answer (status 3).
UNAVAIL = Sentinel(constants.RS_UNAVAIL, "UNAVAIL")
#: The item lives on an offline node; nothing was asked (status 4).
OFFLINE = Sentinel(constants.RS_OFFLINE, "OFFLINE")
#: Used by the engine for unknown field names (status 1); getters need not use it.
UNKNOWN = Sentinel(constants.RS_UNKNOWN, "UNKNOWN")


@dataclass(frozen=True)
class FieldDef:
    """One query field.

    ``needs`` names the data the getter relies on (for instance ``"live"``
    for runtime data from node RPC); :func:`ganeti.query.required_data`
    unions it over the requested and filtered fields so the caller collects
    only what is used.

    ``listed`` False marks an extension of ours (a field Ganeti 3.0 does not
    have): answered when named, left out of the full field list so that
    ``gnt-* list-fields`` shows Ganeti's set (doc/compat.md, "Query fields").
    """

    name: str
    title: str
    kind: str
    doc: str
    getter: Getter = field(compare=False, repr=False)
    needs: frozenset[str] = frozenset()
    listed: bool = True


FieldTable = Mapping[str, FieldDef]


def _unknown_getter(ctx: Any, item: Any) -> Any:
    return UNKNOWN


def unknown_field(name: str) -> FieldDef:
    """The definition reported for a field name the table does not know."""
    return FieldDef(name, name, constants.QFT_UNKNOWN, f"Unknown field '{name}'", _unknown_getter)


def make_table(fields: Iterable[FieldDef]) -> FieldTable:
    """Build a read-only field table, checking every definition.

    Raises :class:`errors.ProgrammerError` for duplicate names, invalid names
    (``[a-z0-9/._]+``), unknown kinds, or an empty title/doc.
    """
    table: dict[str, FieldDef] = {}
    for fdef in fields:
        if not isinstance(fdef, FieldDef):
            raise errors.ProgrammerError(f"Not a FieldDef: {fdef!r}")
        if fdef.name in table:
            raise errors.ProgrammerError(f"Duplicate query field name '{fdef.name}'")
        if not _FIELD_NAME_RE.match(fdef.name):
            raise errors.ProgrammerError(f"Invalid query field name '{fdef.name}'")
        if fdef.kind not in ALL_KINDS or fdef.kind == constants.QFT_UNKNOWN:
            raise errors.ProgrammerError(f"Field '{fdef.name}' has invalid kind '{fdef.kind}'")
        if not fdef.title or not fdef.doc:
            raise errors.ProgrammerError(f"Field '{fdef.name}' needs a title and a doc")
        if not callable(fdef.getter):
            raise errors.ProgrammerError(f"Field '{fdef.name}' has no callable getter")
        table[fdef.name] = fdef
    return MappingProxyType(table)


def fielddef_to_dict(fdef: FieldDef) -> dict[str, str]:
    """The wire form of a field definition: ``{"name", "title", "kind", "doc"}``."""
    return {"name": fdef.name, "title": fdef.title, "kind": fdef.kind, "doc": fdef.doc}


# --- helpers for common fields -------------------------------------------------

def simple_field(name: str, title: str, kind: str, doc: str, attr: str,
                 needs: frozenset[str] = frozenset()) -> FieldDef:
    """A field reading attribute ``attr`` of the item (dotted paths allowed)."""
    get = operator.attrgetter(attr)
    return FieldDef(name, title, kind, doc, lambda ctx, item: get(item), needs)


def dict_field(name: str, title: str, kind: str, doc: str, key: str,
               needs: frozenset[str] = frozenset()) -> FieldDef:
    """A field reading ``item[key]`` from dict items; a missing key gives NODATA."""
    def getter(ctx: Any, item: Mapping[str, Any]) -> Any:
        return item.get(key, NODATA)
    return FieldDef(name, title, kind, doc, getter, needs)


def tags_field(attr: str = "tags") -> FieldDef:
    """The ``tags`` field: the item's tags as a sorted list."""
    get = operator.attrgetter(attr)
    return FieldDef("tags", "Tags", constants.QFT_OTHER, "Tags",
                    lambda ctx, item: sorted(get(item) or ()))


def uuid_field(what: str, attr: str = "uuid") -> FieldDef:
    """The ``uuid`` field; ``what`` names the object type ("Instance", "Node")."""
    return simple_field("uuid", "UUID", constants.QFT_TEXT, f"{what} UUID", attr)


def serial_no_field(what: str, attr: str = "serial_no") -> FieldDef:
    """The ``serial_no`` field."""
    return simple_field("serial_no", "SerialNo", constants.QFT_NUMBER,
                        f"{what} object serial number, incremented on each modification", attr)


def _timestamp_getter(attr: str) -> Getter:
    get = operator.attrgetter(attr)

    def getter(ctx: Any, item: Any) -> Any:
        value = get(item)
        return UNAVAIL if value is None else value
    return getter


def timestamp_fields(what: str) -> list[FieldDef]:
    """The ``ctime`` and ``mtime`` fields; a missing (None) time is UNAVAIL."""
    return [
        FieldDef("ctime", "CTime", constants.QFT_TIMESTAMP,
                 f"Creation timestamp of the {what.lower()}", _timestamp_getter("ctime")),
        FieldDef("mtime", "MTime", constants.QFT_TIMESTAMP,
                 f"Modification timestamp of the {what.lower()}", _timestamp_getter("mtime")),
    ]
