"""Tests for ganeti.query.engine: running queries and building cells."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import constants, errors
from ganeti import query as q

N, U, ND, UA, OFF = (constants.RS_NORMAL, constants.RS_UNKNOWN, constants.RS_NODATA,
                     constants.RS_UNAVAIL, constants.RS_OFFLINE)


def test_query_result_shape_and_cells(fields: q.FieldTable, items: list[Any], ctx: Any) -> None:
    result = q.query(fields, items, ctx, ["name", "be/memory", "status", "nosuch"])
    assert result["fields"] == [
        {"name": "name", "title": "Instance", "kind": "text", "doc": "Instance name"},
        {"name": "be/memory", "title": "ConfigMaxMem", "kind": "unit", "doc": "Memory"},
        {"name": "status", "title": "Status", "kind": "text", "doc": "Runtime status"},
        {"name": "nosuch", "title": "nosuch", "kind": "unknown", "doc": "Unknown field 'nosuch'"},
    ]
    assert result["data"] == [
        [[N, "Mail"], [N, 128], [OFF, None], [U, None]],
        [[N, "db1"], [N, 4096], [N, "running"], [U, None]],
        [[N, "web2"], [N, 2048], [UA, None], [U, None]],
        [[N, "web10"], [N, 512], [N, "running"], [U, None]],
    ]


def test_nodata_without_collected_data(fields: q.FieldTable, items: list[Any]) -> None:
    result = q.query(fields, items, {}, ["status"])
    assert {tuple(row[0]) for row in result["data"]} == {(ND, None)}


def test_filter_may_use_unrequested_fields(fields: q.FieldTable, items: list[Any], ctx: Any) -> None:
    result = q.query(fields, items, ctx, ["name"], ["=[]", "tags", "prod"])
    assert result["data"] == [[[N, "db1"]], [[N, "web10"]]]


def test_empty_field_list_gives_empty_rows(fields: q.FieldTable, items: list[Any], ctx: Any) -> None:
    result = q.query(fields, items, ctx, [], ["==", "name", "db1"])
    assert result == {"fields": [], "data": [[]]}


def test_items_may_be_a_generator(fields: q.FieldTable, items: list[Any], ctx: Any) -> None:
    result = q.query(fields, (i for i in items), ctx, ["vcpus"], [">", "vcpus", 1])
    assert result["data"] == [[[N, 4]], [[N, 2]]]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({}, ["Mail", "db1", "web2", "web10"]),
    ({"namefield": None}, ["web10", "web2", "db1", "Mail"]),
    ({"namefield": "not-in-table"}, ["web10", "web2", "db1", "Mail"]),
    ({"namefield": "vcpus"}, ["web10", "Mail", "web2", "db1"]),
    ({"sort_key": lambda item: -item.mem}, ["db1", "web2", "web10", "Mail"]),
], ids=["by-name-nice", "given-order", "namefield-missing", "other-namefield", "sort-key"])
def test_row_order(fields: q.FieldTable, items: list[Any], ctx: Any, kwargs: dict[str, Any],
                   expected: list[str]) -> None:
    result = q.query(fields, items, ctx, ["name"], **kwargs)
    assert [row[0][1] for row in result["data"]] == expected


def test_sorted_by_name_when_name_not_first_or_not_requested(
        fields: q.FieldTable, items: list[Any], ctx: Any) -> None:
    with_name = q.query(fields, items, ctx, ["vcpus", "name"])
    without = q.query(fields, items, ctx, ["vcpus"])
    assert [row[1][1] for row in with_name["data"]] == ["Mail", "db1", "web2", "web10"]
    assert [row[0][1] for row in without["data"]] == [1, 4, 2, 1]


@pytest.mark.parametrize(("values", "expected"), [
    (["node10", "node2", "node1"], ["node1", "node2", "node10"]),
    (["a10b2", "a10b10", "a9"], ["a9", "a10b2", "a10b10"]),
    ([10, 9, 100], [9, 10, 100]),
    (["b", 3, None, "a"], [3, "a", "b", None]),
    (["x", q.NODATA, "a"], ["a", "x", q.NODATA]),
], ids=["digits", "multi-digit-runs", "ints", "mixed-types", "sentinel-last"])
def test_nice_sort_key(values: list[Any], expected: list[Any]) -> None:
    assert sorted(values, key=q.nice_sort_key) == expected


def test_invalid_filter_raises(fields: q.FieldTable, items: list[Any], ctx: Any) -> None:
    with pytest.raises(errors.QueryFilterParseError, match="Unknown field"):
        q.query(fields, items, ctx, ["name"], ["==", "nosuch", "x"])


@pytest.mark.parametrize("names", ["name", ["name", 5], None, [None]], ids=repr)
def test_invalid_field_names(fields: q.FieldTable, items: list[Any], names: Any) -> None:
    with pytest.raises(errors.ParameterError, match="Field names must be"):
        q.query(fields, items, {}, names)


def test_execute_is_query() -> None:
    assert q.execute is q.query


def test_query_fields_all_sorted(fields: q.FieldTable) -> None:
    result = q.query_fields(fields)
    names = [f["name"] for f in result["fields"]]
    assert names == sorted(fields)
    assert set(result["fields"][0]) == {"name", "title", "kind", "doc"}


def test_query_fields_named_keeps_order_and_unknown(fields: q.FieldTable) -> None:
    result = q.query_fields(fields, ["vcpus", "bogus", "name"])
    assert [(f["name"], f["kind"]) for f in result["fields"]] == [
        ("vcpus", "number"), ("bogus", "unknown"), ("name", "text")]


def test_old_style_rows(fields: q.FieldTable, items: list[Any], ctx: Any) -> None:
    result = q.query(fields, items, ctx, ["name", "status", "nosuch", "tags"],
                     ["|", ["==", "name", "web2"], ["==", "name", "db1"]])
    # names given: rows in their order (Ganeti's), not sorted
    assert q.old_style_rows(result) == [["web2", None, None, ["web"]],
                                        ["db1", "running", None, ["db", "prod"]]]


@pytest.mark.parametrize(("names", "qfilter", "expected"), [
    (["name"], None, set()),
    (["name", "status"], None, {"live"}),
    (["name", "bogus"], None, set()),
    (["name"], ["==", "status", "running"], {"live"}),
    (["name"], ["!", ["?", "tags"]], set()),
], ids=["plain", "live-field", "unknown-field", "live-in-filter", "plain-filter"])
def test_required_data(fields: q.FieldTable, names: list[str], qfilter: Any, expected: set[str]) -> None:
    assert q.required_data(fields, names, qfilter) == expected


def test_required_data_rejects_bad_filter(fields: q.FieldTable) -> None:
    with pytest.raises(errors.QueryFilterParseError):
        q.required_data(fields, ["name"], ["==", "bogus", 1])


def test_getters_receive_ctx_and_item() -> None:
    seen: list[tuple[Any, Any]] = []

    def getter(ctx: Any, item: Any) -> Any:
        seen.append((ctx, item))
        return item * 2
    table = q.make_table([q.FieldDef("name", "N", constants.QFT_NUMBER, "Doc", getter)])
    marker = object()
    result = q.query(table, [2, 1], marker, ["name"], namefield=None)
    assert result["data"] == [[[N, 4]], [[N, 2]]]
    assert seen == [(marker, 2), (marker, 1)]


def test_dict_items(fields: q.FieldTable) -> None:
    table = q.make_table([
        q.dict_field("id", "ID", constants.QFT_NUMBER, "Job ID", "id"),
        q.dict_field("status", "Status", constants.QFT_TEXT, "Job status", "status"),
    ])
    jobs = [{"id": 10, "status": "running"}, {"id": 9}]
    result = q.query(table, jobs, None, ["id", "status"], namefield="id")
    assert result["data"] == [[[N, 9], [ND, None]], [[N, 10], [N, "running"]]]


def test_names_come_back_in_the_order_given(fields: q.FieldTable, items: list[Any],
                                            ctx: Any) -> None:
    names = ["web2", "db1"]
    qfilter = ["|"] + [["==", "name", n] for n in names]
    for wanted in (["name"], ["status"], ["status", "name"]):   # name column or not
        result = q.query(fields, items, ctx, wanted + ["name"], qfilter)
        assert [row[-1][1] for row in result["data"]] == names
    other = q.query(fields, items, ctx, ["name"],
                    ["|", ["==", "name", "web2"], ["==", "status", "running"]])
    assert [row[0][1] for row in other["data"]] == ["db1", "web2", "web10"]   # not names: sorted


def test_order_field_and_a_conjunct_of_names(fields: q.FieldTable, items: list[Any],
                                             ctx: Any) -> None:
    names = ["web10", "db1"]
    simple = ["|"] + [["==", "name", n] for n in names]
    result = q.query(fields, items, ctx, ["name"], ["&", simple, ["!", ["==", "name", "x"]]])
    assert [row[0][1] for row in result["data"]] == names
    # no namefield (jobs): order_field names the field the given values order
    result = q.query(fields, items, ctx, ["name"], simple, namefield=None, order_field="name")
    assert [row[0][1] for row in result["data"]] == names
