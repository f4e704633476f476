"""Tests for ganeti.query.fields: field definitions and tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from ganeti import constants, errors
from ganeti import query as q


def _fd(name: str = "name", title: str = "Name", kind: str = constants.QFT_TEXT,
        doc: str = "Doc", getter: Any = lambda ctx, item: item) -> q.FieldDef:
    return q.FieldDef(name, title, kind, doc, getter)


def test_make_table_is_read_only_mapping() -> None:
    table = q.make_table([_fd("a"), _fd("b")])
    assert list(table) == ["a", "b"]
    assert table["a"].name == "a"
    with pytest.raises(TypeError):
        table["c"] = _fd("c")  # type: ignore[index]


@pytest.mark.parametrize(("fdefs", "match"), [
    ([_fd("a"), _fd("a")], "Duplicate query field name 'a'"),
    ([_fd("Name")], "Invalid query field name"),
    ([_fd("a b")], "Invalid query field name"),
    ([_fd("")], "Invalid query field name"),
    ([_fd(kind="string")], "invalid kind"),
    ([_fd(kind=constants.QFT_UNKNOWN)], "invalid kind"),
    ([_fd(title="")], "title and a doc"),
    ([_fd(doc="")], "title and a doc"),
    ([_fd(getter=None)], "callable getter"),
    (["name"], "Not a FieldDef"),
], ids=["duplicate", "upper-case", "space", "empty-name", "bad-kind", "unknown-kind",
        "no-title", "no-doc", "no-getter", "not-fielddef"])
def test_make_table_rejects(fdefs: list[Any], match: str) -> None:
    with pytest.raises(errors.ProgrammerError, match=match):
        q.make_table(fdefs)


def test_make_table_accepts_ganeti_style_names() -> None:
    table = q.make_table([_fd("disk.size/0"), _fd("nic.mac/1"), _fd("be/memory"), _fd("ctime")])
    assert len(table) == 4


def test_unknown_field() -> None:
    fdef = q.unknown_field("foo")
    assert q.fielddef_to_dict(fdef) == {"name": "foo", "title": "foo", "kind": "unknown",
                                        "doc": "Unknown field 'foo'"}
    assert fdef.getter(None, None) is q.UNKNOWN


def test_sentinel_statuses() -> None:
    assert (q.NODATA.status, q.UNAVAIL.status, q.OFFLINE.status, q.UNKNOWN.status) == (
        constants.RS_NODATA, constants.RS_UNAVAIL, constants.RS_OFFLINE, constants.RS_UNKNOWN)
    assert "NODATA" in repr(q.NODATA)


@dataclass
class _Obj:
    name: str
    tags: Any
    uuid: str = "uuid-1"
    serial_no: int = 3
    ctime: float | None = 5.0
    mtime: float | None = None
    inner: Any = None


def test_common_field_helpers() -> None:
    table = q.make_table([
        q.simple_field("name", "Name", constants.QFT_TEXT, "Name", "name"),
        q.simple_field("inner.x", "X", constants.QFT_NUMBER, "Nested", "inner.name"),
        q.tags_field(), q.uuid_field("Node"), q.serial_no_field("Node"),
        *q.timestamp_fields("Node"),
    ])
    obj = _Obj("n1", {"b", "a"}, inner=_Obj("deep", None))
    values = {name: fdef.getter(None, obj) for name, fdef in table.items()}
    assert values == {"name": "n1", "inner.x": "deep", "tags": ["a", "b"], "uuid": "uuid-1",
                      "serial_no": 3, "ctime": 5.0, "mtime": q.UNAVAIL}
    assert table["tags"].kind == constants.QFT_OTHER
    assert table["ctime"].kind == constants.QFT_TIMESTAMP
    assert table["uuid"].doc == "Node UUID"
    assert table["tags"].getter(None, _Obj("x", None)) == []


def test_simple_field_needs() -> None:
    fdef = q.simple_field("x", "X", constants.QFT_TEXT, "Doc", "name", needs=frozenset(["live"]))
    assert fdef.needs == frozenset(["live"])
    assert q.simple_field("y", "Y", constants.QFT_TEXT, "Doc", "name").needs == frozenset()


def test_dict_field_missing_key_is_nodata() -> None:
    fdef = q.dict_field("x", "X", constants.QFT_TEXT, "Doc", "k")
    assert fdef.getter(None, {"k": "v"}) == "v"
    assert fdef.getter(None, {}) is q.NODATA
