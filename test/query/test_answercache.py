"""AnswerCache (ganeti/query/answercache.py): frames per slot, kept per key and source
object; and the JSON envelope around kept rows is the serializer's, byte for byte."""

from __future__ import annotations

import pytest

from ganeti import errors, luxi, serializer
from ganeti.query.answercache import AnswerCache


class _Tree:
    """Stands for a committed configuration tree (weakly referenced)."""


def _counting(text: bytes) -> tuple[list[int], object]:
    made: list[int] = []

    def make() -> bytes:
        made.append(1)
        return text

    return made, make


def test_a_frame_is_made_once_per_key() -> None:
    cache = AnswerCache()
    made, make = _counting(b"A")
    assert cache.frame("info", (1, 2), make) == b"A"
    assert cache.frame("info", (1, 2), make) == b"A"
    assert len(made) == 1
    assert cache.frame("info", (1, 3), make) == b"A"
    assert len(made) == 2


def test_slots_are_independent() -> None:
    cache = AnswerCache()
    cache.frame("one", 1, lambda: b"1")
    assert cache.frame("two", 1, lambda: b"2") == b"2"
    assert cache.frame("one", 1, lambda: b"other") == b"1"


def test_a_frame_with_a_source_is_kept_only_for_that_very_object() -> None:
    cache = AnswerCache()
    tree, twin = _Tree(), _Tree()
    assert cache.frame("q", "args", lambda: b"old", source=tree) == b"old"
    assert cache.frame("q", "args", lambda: b"new", source=tree) == b"old"
    assert cache.frame("q", "args", lambda: b"twin", source=twin) == b"twin"
    del tree
    assert cache.frame("q", "args", lambda: b"again", source=twin) == b"twin"


@pytest.mark.parametrize("result", [
    {"fields": [{"name": "id", "title": "ID", "kind": "number", "doc": "Job ID"}], "data": []},
    {"fields": [], "data": [[[0, 1], [0, "success"]], [[0, 2], [0, "caf\u00e9"]]]},
], ids=["empty", "rows"])
def test_the_spliced_envelope_is_the_plain_one(result: dict) -> None:
    rows = serializer.Encoded(serializer.dumps(result["data"]))
    spliced = luxi.encode_response(True, {"fields": result["fields"], "data": rows},
                                   spliced=True)
    assert spliced == luxi.encode_response(True, result)


def test_spliced_refuses_a_key_that_is_not_a_string() -> None:
    with pytest.raises(errors.SerializationError):
        serializer.dumps_spliced({1: serializer.Encoded("[]")})
