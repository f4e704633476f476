"""Tests for ganeti.query.filter: the list language."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors
from ganeti import query as q


@pytest.fixture
def names(fields: q.FieldTable, items: list[Any], ctx: Any) -> Any:
    def run(qfilter: Any, ctx: Any = ctx) -> list[str]:
        pred = q.compile_filter(fields, qfilter)
        return [item.name for item in items if pred(ctx, item)]
    return run


ALL = ["web10", "web2", "db1", "Mail"]

MATCHES = [
    ("none", None, ALL),
    ("eq", ["==", "name", "db1"], ["db1"]),
    ("eq-legacy", ["=", "name", "db1"], ["db1"]),
    ("eq-tuple", ("==", "name", "db1"), ["db1"]),
    ("ne", ["!=", "name", "db1"], ["web10", "web2", "Mail"]),
    ("lt", ["<", "vcpus", 2], ["web10", "Mail"]),
    ("gt", [">", "vcpus", 1], ["web2", "db1"]),
    ("le", ["<=", "vcpus", 2], ["web10", "web2", "Mail"]),
    ("ge", [">=", "vcpus", 4], ["db1"]),
    ("lt-float", ["<", "vcpus", 1.5], ["web10", "Mail"]),
    ("lt-text", ["<", "name", "Z"], ["Mail"]),
    ("unit-size-string", ["==", "be/memory", "2G"], ["web2"]),
    ("unit-number", [">", "be/memory", 1024], ["web2", "db1"]),
    ("bool-eq", ["==", "admin_up", True], ["web10", "db1"]),
    ("bool-ne", ["!=", "admin_up", True], ["web2", "Mail"]),
    ("true-bool", ["?", "admin_up"], ["web10", "db1"]),
    ("true-list", ["?", "tags"], ["web10", "web2", "db1"]),
    ("true-status-cells", ["?", "status"], ["web10", "db1"]),
    ("regex", ["=~", "name", "^web"], ["web10", "web2"]),
    ("regex-flag", ["=~", "name", "(?i)^mail"], ["Mail"]),
    ("regex-search-not-match", ["=~", "name", "1"], ["web10", "db1"]),
    ("regex-on-other-nonstring", ["=~", "note", "x"], ["web2"]),
    ("contains", ["=[]", "tags", "prod"], ["web10", "db1"]),
    ("contains-nonlist", ["=[]", "note", 1], ["web10"]),
    ("and-empty", ["&"], ALL),
    ("or-empty", ["|"], []),
    ("and-single", ["&", ["==", "name", "db1"]], ["db1"]),
    ("and-not", ["&", ["=[]", "tags", "web"], ["!", ["==", "name", "web2"]]], ["web10"]),
    ("or-and", ["|", ["==", "name", "db1"], ["&", ["?", "admin_up"], [">", "vcpus", 0]]],
     ["web10", "db1"]),
    ("or-three", ["|", ["==", "name", "db1"], ["==", "name", "Mail"], ["==", "name", "x"]],
     ["db1", "Mail"]),
    ("deep-nesting", ["!", ["!", ["!", ["!", ["==", "name", "web2"]]]]], ["web2"]),
    ("eq-status-nonnormal-false", ["!=", "status", "running"], []),
    ("not-of-nonnormal-true", ["!", ["==", "status", "running"]], ["web2", "Mail"]),
    ("timestamp", ["==", "ctime", 1000.0], ["web10", "web2", "db1"]),
    ("other-none", ["==", "note", None], ["db1", "Mail"]),
    ("other-list", ["==", "tags", ["web"]], ["web2"]),
    ("other-ordering-incomparable", [">", "note", "a"], ["web2"]),
]


@pytest.mark.parametrize(("qfilter", "expected"), [m[1:] for m in MATCHES], ids=[m[0] for m in MATCHES])
def test_filter_matches(names: Any, qfilter: Any, expected: list[str]) -> None:
    assert names(qfilter) == expected


def test_status_field_without_live_data_never_matches(names: Any) -> None:
    assert names(["==", "status", "running"], ctx={}) == []
    assert names(["!", ["?", "status"]], ctx={}) == ALL


ERRORS = [
    ("empty-list", [], "non-empty list"),
    ("string", "name", "non-empty list"),
    ("number", 5, "non-empty list"),
    ("unknown-op", ["~~", "name", "x"], "Unknown filter operator"),
    ("op-not-string", [1, "name", "x"], "Unknown filter operator"),
    ("not-no-arg", ["!"], "exactly one filter"),
    ("not-two-args", ["!", ["?", "name"], ["?", "name"]], "exactly one filter"),
    ("not-of-string", ["!", "name"], "non-empty list"),
    ("true-no-field", ["?"], "exactly one field"),
    ("true-field-number", ["?", 5], "field name"),
    ("binary-one-arg", ["==", "name"], "field name and a value"),
    ("binary-three-args", ["==", "name", "a", "b"], "field name and a value"),
    ("unknown-field", ["==", "nosuch", "a"], "Unknown field 'nosuch'"),
    ("unknown-field-in-true", ["?", "nosuch"], "Unknown field 'nosuch'"),
    ("field-not-string", ["==", ["name"], "x"], "field name"),
    ("text-vs-number", ["==", "name", 5], "needs a string"),
    ("number-vs-string", ["<", "vcpus", "2"], "needs a number"),
    ("number-vs-bool", ["==", "vcpus", True], "needs a number"),
    ("timestamp-vs-string", ["<", "ctime", "yesterday"], "needs a number"),
    ("bool-ordering", ["<", "admin_up", True], "cannot be used on bool"),
    ("bool-vs-int", ["==", "admin_up", 1], "needs a boolean"),
    ("unit-bad-size", ["==", "be/memory", "lots"], "needs a size"),
    ("unit-vs-list", ["==", "be/memory", [1]], "number or a size"),
    ("other-ordering-list", [">", "note", [1]], "number or a string"),
    ("bad-regex", ["=~", "name", "("], "Invalid regular expression"),
    ("regex-not-string", ["=~", "name", 5], "regular expression string"),
    ("regex-on-number", ["=~", "vcpus", "1"], "needs a text field"),
    ("contains-on-text", ["=[]", "name", "x"], "needs a list field"),
    ("nested-error", ["&", ["==", "name", "a"], ["|", ["bogus"]]], "Unknown filter operator"),
]


@pytest.mark.parametrize(("qfilter", "match"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_filter_errors(fields: q.FieldTable, qfilter: Any, match: str) -> None:
    with pytest.raises(errors.QueryFilterParseError, match=match):
        q.compile_filter(fields, qfilter)


def test_too_deep_filter_is_rejected(fields: q.FieldTable) -> None:
    flt: Any = ["?", "name"]
    for _ in range(150):
        flt = ["!", flt]
    with pytest.raises(errors.QueryFilterParseError, match="nested deeper"):
        q.compile_filter(fields, flt)


def test_filter_fields_collects_all_referenced(fields: q.FieldTable) -> None:
    flt = ["|", ["==", "name", "a"], ["&", ["?", "status"], ["!", ["=[]", "tags", "x"]]]]
    assert q.filter_fields(fields, flt) == {"name", "status", "tags"}
    assert q.filter_fields(fields, None) == set()
    with pytest.raises(errors.QueryFilterParseError):
        q.filter_fields(fields, ["==", "nosuch", 1])


NAMES = [
    ("none", None, "name", None),
    ("single-eq", ["==", "name", "a"], "name", ["a"]),
    ("single-legacy", ["=", "name", "a"], "name", ["a"]),
    ("or-of-eq", ["|", ["==", "name", "a"], ["=", "name", "b"]], "name", ["a", "b"]),
    ("duplicates", ["|", ["==", "name", "b"], ["==", "name", "a"], ["==", "name", "b"]], "name",
     ["b", "a"]),
    ("numeric-ids", ["|", ["==", "id", 5], ["==", "id", 7]], "id", [5, 7]),
    ("other-field", ["==", "pnode", "a"], "name", None),
    ("other-op", ["|", ["==", "name", "a"], ["=~", "name", "b"]], "name", None),
    ("and", ["&", ["==", "name", "a"]], "name", None),
    ("empty-or", ["|"], "name", None),
    ("bool-value", ["==", "name", True], "name", None),
    ("list-value", ["==", "name", ["a"]], "name", None),
    ("nested-or", ["|", ["|", ["==", "name", "a"]]], "name", None),
    ("garbage", "junk", "name", None),
]


@pytest.mark.parametrize(("qfilter", "namefield", "expected"), [n[1:] for n in NAMES],
                         ids=[n[0] for n in NAMES])
def test_requested_names(qfilter: Any, namefield: str, expected: Any) -> None:
    assert q.requested_names(qfilter, namefield) == expected


def test_make_simple_filter_round_trips(names: Any) -> None:
    assert q.make_simple_filter("name", []) is None
    assert q.make_simple_filter("name", None) is None
    flt = q.make_simple_filter("name", ["db1", "web2"])
    assert flt == ["|", ["==", "name", "db1"], ["==", "name", "web2"]]
    assert q.requested_names(flt) == ["db1", "web2"]
    assert names(flt) == ["web2", "db1"]


def test_legacy_os_filter_hides_what_is_not_asked_for():
    from ganeti.cmdlib.os import OS_FIELDS
    from ganeti.query.filter import legacy_os_filter
    rows = [{"name": "a", "valid": True, "hidden": False, "blacklisted": False},
            {"name": "h", "valid": True, "hidden": True, "blacklisted": False},
            {"name": "b", "valid": True, "hidden": False, "blacklisted": True},
            {"name": "x", "valid": False, "hidden": False, "blacklisted": False}]

    def kept(fields, names=None):
        pred = q.compile_filter(OS_FIELDS, legacy_os_filter(fields, names))
        return [r["name"] for r in rows if pred(None, r)]

    assert kept(["name"]) == ["a"]
    assert kept(["name", "hidden"]) == ["a", "h"]
    assert kept(["name", "valid", "hidden", "blacklisted"]) == ["a", "h", "b", "x"]
    assert legacy_os_filter(["name", "valid", "hidden", "blacklisted"]) is None
    assert kept(["name", "hidden"], ["h", "b"]) == ["h"]
