"""Query2: field tables, filters and the query engine (doc/protocols/query.md).

Pure logic, no sockets and no config access.  The master daemon's
Query/QueryFields LUXI methods and every ``gnt-* list`` use it.

Writing a resource (job, lock, instance, node, group, os, cluster)
-------------------------------------------------------------------
1. Describe each column as a :class:`FieldDef` and build the table once, at
   import time::

       FIELDS = query.make_table([
           query.simple_field("name", "Instance", constants.QFT_TEXT,
                              "Instance name", "name"),
           query.FieldDef("oper_ram", "Memory", constants.QFT_UNIT,
                          "Actual memory usage", _get_oper_ram,
                          needs=frozenset(["live"])),
           query.tags_field(), query.uuid_field("Instance"),
           query.serial_no_field("Instance"), *query.timestamp_fields("Instance"),
       ])

   A getter is ``getter(ctx, item) -> value``.  ``ctx`` is whatever the
   resource chooses (config snapshot, collected live data, ...); ``item`` is
   one object of the resource.  Return :data:`NODATA` if the needed data was
   not collected, :data:`UNAVAIL` if it could not be got (node did not
   answer), :data:`OFFLINE` for an item on an offline node.
2. To answer a Query: ``names = requested_names(qfilter)`` and raise
   ``errors.OpPrereqError(..., errors.ECODE_NOENT)`` for names that do not
   exist; ``needs = required_data(FIELDS, fields, qfilter)`` and collect
   only that (e.g. node RPC only if ``"live" in needs``); build ``ctx``;
   then ``return query(FIELDS, items, ctx, fields, qfilter)``.
3. QueryFields: ``query_fields(FIELDS, names_or_None)``.  Old-style methods
   (QueryInstances, QueryNodes, QueryJobs): ``old_style_rows(result)``.

Results are ``{"fields": [{"name", "title", "kind", "doc"}, ...],
"data": [[[status, value], ...], ...]}`` with ``constants.RS_*`` statuses.
Rows are sorted by the ``name`` field ("node2" before "node10"); pass
``namefield=`` (another field, or None for the given order) or ``sort_key=``.

Filters are lists (see :mod:`ganeti.query.filter`); the CLI text form
(``--filter``) is parsed by :func:`parse_filter_text` and command-line
arguments are turned into a filter by :func:`make_filter`.
:func:`format_table` renders results as Ganeti-style columns.
"""

from __future__ import annotations

# The names below load their submodule on first use (PEP 562): a ``gnt-*
# list`` command only formats a table (``format``), and importing the field
# tables (dataclasses, typing) would add ~10 ms to its start-up.
_SUBMODULE = {
    **dict.fromkeys(["execute", "nice_sort_key", "old_style_rows", "query", "query_fields",
                     "required_data", "resolve_fields"], "engine"),
    **dict.fromkeys(["NODATA", "OFFLINE", "UNAVAIL", "UNKNOWN", "FieldDef", "FieldTable",
                     "Getter", "dict_field", "fielddef_to_dict", "make_table",
                     "serial_no_field", "simple_field", "tags_field", "timestamp_fields",
                     "unknown_field", "uuid_field"], "fields"),
    **dict.fromkeys(["compile_filter", "filter_fields", "make_simple_filter",
                     "requested_names", "legacy_os_filter"], "filter"),
    **dict.fromkeys(["format_cell", "format_table"], "format"),
    **dict.fromkeys(["glob_to_regex", "is_filter_text", "make_filter", "parse_filter_text"],
                    "textfilter"),
}


TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:  # the same names, for the type checker (test_query_exports checks the match)
    from ganeti.query.engine import (execute, nice_sort_key, old_style_rows, query, query_fields,
                                     required_data, resolve_fields)
    from ganeti.query.fields import (NODATA, OFFLINE, UNAVAIL, UNKNOWN, FieldDef, FieldTable,
                                     Getter, dict_field, fielddef_to_dict, make_table,
                                     serial_no_field, simple_field, tags_field, timestamp_fields,
                                     unknown_field, uuid_field)
    from ganeti.query.filter import (compile_filter, filter_fields, legacy_os_filter,
                                     make_simple_filter, requested_names)
    from ganeti.query.format import format_cell, format_table
    from ganeti.query.textfilter import (glob_to_regex, is_filter_text, make_filter,
                                         parse_filter_text)


def __getattr__(name: str) -> object:
    submodule = _SUBMODULE.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULE))


__all__ = [
    "FieldDef", "FieldTable", "Getter", "make_table", "unknown_field", "fielddef_to_dict",
    "NODATA", "UNAVAIL", "OFFLINE", "UNKNOWN",
    "simple_field", "dict_field", "tags_field", "uuid_field", "serial_no_field",
    "timestamp_fields",
    "compile_filter", "filter_fields", "requested_names", "make_simple_filter",
    "legacy_os_filter",
    "parse_filter_text", "is_filter_text", "make_filter", "glob_to_regex",
    "query", "execute", "query_fields", "old_style_rows", "resolve_fields", "required_data",
    "nice_sort_key",
    "format_table", "format_cell",
]
