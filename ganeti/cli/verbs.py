"""Ready-made verbs for the commands tables of several ``gnt-*`` tools.

``list`` and ``list-fields`` of a query resource (nodes, instances, ...):
the verb asks the master over LUXI (:func:`ganeti.cli.jobs.get_client`)
and prints with :mod:`ganeti.cli.output`.
"""

from __future__ import annotations

from ganeti.cli.jobs import get_client
from ganeti.cli.options import (FIELDS_OPT, FILTER_OPT, NOHDR_OPT, SEP_OPT, UNITS_OPT,
                                 VERBOSE_OPT, parse_fields)
from ganeti.cli.output import (build_query_filter, generic_query_list, to_stdout,
                               warn_unknown_fields)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    #: A verb of a commands table: ``(opts, args) -> exit code``.
    Verb: TypeAlias = Callable[[Any, list[str]], int]

__all__ = ["query_list_verb", "list_fields_verb", "LIST_OPTS", "LIST_FIELDS_OPTS"]

#: the options of a ``list`` verb made by :func:`query_list_verb`
LIST_OPTS = [NOHDR_OPT, SEP_OPT, FIELDS_OPT, VERBOSE_OPT, UNITS_OPT, FILTER_OPT]
#: the options of a ``list-fields`` verb made by :func:`list_fields_verb`
LIST_FIELDS_OPTS = [NOHDR_OPT, SEP_OPT]


def query_list_verb(resource: str, default_fields: list[str],
                    cells: dict[str, Callable[[Any], Any]] | None = None, *,
                    namefield: str = "name") -> Verb:
    """The ``list`` verb of a resource: default fields or ``-o``, names or ``-F``
    (``cells``: see :func:`ganeti.cli.output.generic_query_list`; ``namefield``:
    the field the arguments name, such as a filter rule's ``uuid``)."""

    def verb(opts: Any, args: list[str]) -> int:
        fields = parse_fields(opts.output, default_fields)
        qfilter = build_query_filter(args, opts.force_filter, namefield=namefield)
        return generic_query_list(get_client(opts), resource, fields, qfilter,
                                  headers=not opts.no_headers, separator=opts.separator,
                                  units=opts.units, verbose=bool(getattr(opts, "verbose", 0)),
                                  cells=cells)
    verb.__doc__ = f"List {resource}s (the default fields, or those given with -o)."
    return verb


def list_fields_verb(resource: str) -> Verb:
    """The ``list-fields`` verb of a resource: name, type, title and description.

    Asked for a field the resource does not have, it warns and exits 14
    (Ganeti's ``EXIT_UNKNOWN_FIELD``), as ``list`` does.
    """

    def verb(opts: Any, args: list[str]) -> int:
        result = get_client(opts).QueryFields(resource, args or None)
        rows = [[f.get("name", ""), f.get("kind", ""), f.get("title", ""), f.get("doc", "")]
                for f in result.get("fields", [])]
        header = ["Name", "Type", "Title", "Description"]
        if opts.separator is not None:
            lines = [] if opts.no_headers else [opts.separator.join(header)]
            lines += [opts.separator.join(r) for r in rows]
        else:
            table = rows if opts.no_headers else [header] + rows
            widths = [max((len(r[i]) for r in table), default=0) for i in range(3)]
            lines = [" ".join(r[i].ljust(widths[i]) for i in range(3)) + " " + r[3]
                     for r in table]
        for line in lines:
            to_stdout(line.rstrip())
        return warn_unknown_fields(result.get("fields", []))
    verb.__doc__ = f"List the fields of the {resource} resource (for list -o)."
    return verb
