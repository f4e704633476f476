"""Tests for ganeti.query.format: Ganeti-style list output."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import constants
from ganeti import query as q

N = constants.RS_NORMAL
FIELDS = [
    {"name": "name", "title": "Node", "kind": "text", "doc": "d"},
    {"name": "mfree", "title": "MFree", "kind": "unit", "doc": "d"},
    {"name": "pinst", "title": "Pinst", "kind": "number", "doc": "d"},
    {"name": "offline", "title": "Offline", "kind": "bool", "doc": "d"},
    {"name": "tags", "title": "Tags", "kind": "other", "doc": "d"},
]
ROWS = [
    [[N, "node1.example.com"], [N, 512], [N, 10], [N, False], [N, ["a", "b"]]],
    [[N, "n2"], [N, 20480], [N, 2], [N, True], [N, []]],
    [[N, "n3"], [constants.RS_UNAVAIL, None], [constants.RS_NODATA, None],
     [constants.RS_OFFLINE, None], [constants.RS_UNKNOWN, None]],
]


def test_aligned_table() -> None:
    assert q.format_table(FIELDS, ROWS) == [
        "Node              MFree Pinst Offline Tags",
        "node1.example.com  512M    10 N       a,b",
        "n2                20.0G     2 Y       ",
        "n3                    -     ? *       ??",
    ]


def test_no_headers() -> None:
    lines = q.format_table(FIELDS[:3], ROWS[:2], headers=False)
    assert lines == ["node1.example.com  512M 10", "n2                20.0G  2"]


def test_separator_mode_uses_plain_mib() -> None:
    assert q.format_table(FIELDS, ROWS, separator="|") == [
        "Node|MFree|Pinst|Offline|Tags",
        "node1.example.com|512|10|N|a,b",
        "n2|20480|2|Y|",
        "n3|-|?|*|??",
    ]


@pytest.mark.parametrize(("units", "expected"), [("h", "20.0G"), ("m", "20480"), ("g", "20.0")],
                         ids=["human", "mib", "gib"])
def test_units_option(units: str, expected: str) -> None:
    lines = q.format_table(FIELDS[1:2], [[ROWS[1][1]]], headers=False, separator=",", units=units)
    assert lines == [expected]


def test_last_left_aligned_column_is_not_padded() -> None:
    lines = q.format_table(FIELDS[:1], [[[N, "long-name"]], [[N, "x"]]])
    assert lines == ["Node", "long-name", "x"]


def test_header_wider_than_values_right_aligned() -> None:
    lines = q.format_table(FIELDS[2:3], [[[N, 1]]])
    assert lines == ["Pinst", "    1"]


def test_verbose_status_text() -> None:
    lines = q.format_table(FIELDS, ROWS[2:], headers=False, separator=" ", verbose=True)
    assert lines == ["n3 (unavail) (nodata) (offline) (unknown)"]


@pytest.mark.parametrize(("kind", "cell", "expected"), [
    ("text", [N, "x"], "x"),
    ("text", [N, None], "-"),
    ("bool", [N, 1], "Y"),
    ("bool", [N, 0], "N"),
    ("number", [N, 1.5], "1.5"),
    ("unit", [N, 1023], "1023M"),
    ("unit", [N, "n/a"], "n/a"),
    ("other", [N, (1, None, "z")], "1,-,z"),
    ("other", [N, {"b": "x-", "a": 1}], "a=1, b=x-"),
    ("other", [N, {}], ""),
    ("other", [N, {"n1": [["/os", True]], "n2": None}], "n1=[[/os, True]], n2=-"),
    ("other", [N, [{"mode": "bridged"}, {}]], "{mode=bridged},{}"),
    ("other", [N, [["a", "doc a"], ("b", None)]], "[a, doc a],[b, -]"),
    ("timestamp", [N, 0], "T0"),
    ("text", [99, None], "?"),
], ids=lambda v: repr(v))
def test_format_cell(kind: str, cell: list[Any], expected: str) -> None:
    assert q.format_cell(kind, cell[0], cell[1], timefmt=lambda v: f"T{v}") == expected


def test_dict_cells_in_tables_have_no_repr() -> None:
    fdefs = [{"name": "osparams", "title": "OSParameters", "kind": "other", "doc": "d"},
             {"name": "name", "title": "Name", "kind": "text", "doc": "d"}]
    rows = [[[N, {"hostname_prefix": "x-", "fill": "zero"}], [N, "i1"]]]
    assert q.format_table(fdefs, rows, separator="|") == \
        ["OSParameters|Name", "fill=zero, hostname_prefix=x-|i1"]
    lines = q.format_table(fdefs, rows)
    assert lines[1] == "fill=zero, hostname_prefix=x- i1"
    assert "{" not in lines[1] and "'" not in lines[1]


def test_timestamp_formatting_pair_and_number() -> None:
    from ganeti.query.format import format_timestamp
    assert format_timestamp(1_000_000) == format_timestamp([1_000_000, 500])
    assert len(format_timestamp(0)) == len("1970-01-01 00:00:00")


def test_format_query_result_end_to_end(fields: Any, items: list[Any], ctx: Any) -> None:
    result = q.query(fields, items, ctx, ["name", "be/memory", "status"], ["?", "admin_up"])
    assert q.format_table(result["fields"], result["data"]) == [
        "Instance ConfigMaxMem Status",
        "db1              4.0G running",
        "web10            512M running",
    ]


def test_empty_fields() -> None:
    assert q.format_table([], [[], []], headers=True) == ["", "", ""]


def test_table_and_cell_formatting_agree() -> None:
    fdefs = [{"name": k, "title": k, "kind": k, "doc": "d"} for k in ("bool", "text", "other")]
    row = [[N, "yes"], [N, "t"], [7, None]]
    assert q.format_table(fdefs, [row], headers=False, separator="|") == ["Y|t|?"]
    assert q.format_table(fdefs, [row], headers=False, separator="|", verbose=True) == [
        "Y|t|(unknown status)"]


def _reference_table(fielddefs: list[dict[str, Any]], rows: list[Any], *, headers: bool = True,
                     separator: str | None = None, units: str | None = None,
                     verbose: bool = False) -> list[str]:
    """The table as the cells render one by one (format_cell), padded column by column."""
    if units is None:
        units = "m" if separator is not None else "h"
    kinds = [f["kind"] for f in fielddefs]
    table = [[q.format_cell(kind, status, value, units=units, verbose=verbose)
              for kind, (status, value) in zip(kinds, row)] for row in rows]
    if headers:
        table.insert(0, [f["title"] for f in fielddefs])
    if separator is not None:
        return [separator.join(line) for line in table]
    widths = [max(len(line[c]) for line in table) if table else 0 for c in range(len(kinds))]
    out = []
    for line in table:
        cells = []
        for col, text in enumerate(line):
            if kinds[col] in (constants.QFT_NUMBER, constants.QFT_UNIT):
                cells.append(text.rjust(widths[col]))
            elif col == len(kinds) - 1:
                cells.append(text)
            else:
                cells.append(text.ljust(widths[col]))
        out.append(" ".join(cells))
    return out


def test_columns_of_one_plain_type_and_mixed_columns_format_as_cell_by_cell() -> None:
    """The column short cuts (all strings, all ints, all lists of strings)
    give exactly what format_cell gives, mixed columns and odd cells too."""
    fields = [
        {"name": "id", "title": "ID", "kind": "number", "doc": "d"},
        {"name": "status", "title": "Status", "kind": "text", "doc": "d"},
        {"name": "summary", "title": "Summary", "kind": "other", "doc": "d"},
        {"name": "mem", "title": "Memory", "kind": "unit", "doc": "d"},
        {"name": "flag", "title": "F", "kind": "bool", "doc": "d"},
        {"name": "misc", "title": "Misc", "kind": "other", "doc": "d"},
        {"name": "count", "title": "Count", "kind": "number", "doc": "d"},
    ]
    plain = [[[N, 1], [N, "success"], [N, ["TEST_DELAY"]], [N, 128], [N, True], [N, "x"], [N, 3]],
             [[N, 10000], [N, "error"], [N, ["A", "B(c)"]], [N, 4096], [N, False], [N, "yy"],
              [N, 12]]]
    mixed = plain + [
        [[N, 2.5], [N, None], [N, [1, ["a"], {"k": None}]], [N, 1.5], [N, 0], [N, {"b": 1, "a": [2]}],
         [N, True]],
        [[constants.RS_UNAVAIL, None], [constants.RS_NODATA, None], [constants.RS_OFFLINE, None],
         [constants.RS_UNKNOWN, None], [7, None], [N, ("t", "u")], [N, None]],
    ]
    for rows in (plain, mixed, []):
        for kwargs in ({}, {"headers": False}, {"separator": "|"}, {"units": "g"},
                       {"verbose": True}, {"separator": ",", "headers": False}):
            assert q.format_table(fields, rows, **kwargs) == _reference_table(fields, rows, **kwargs)
    assert q.format_table([], [[], []]) == ["", "", ""]
    assert q.format_table([], [[]], separator="|", headers=False) == [""]
