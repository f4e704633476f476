"""utils.fastjson: the same JSON as the json module, without importing it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganeti.utils import fastjson

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30)


@given(_JSON)
def test_same_text_as_json_and_round_trip(value) -> None:
    text = fastjson.dumps(value)
    assert text == json.dumps(value, separators=(",", ":"))
    assert fastjson.loads(text) == value
    assert fastjson.loads(text.encode("utf-8")) == value


@pytest.mark.parametrize("text", ["", "{", "[1,]", "1 2", "nul", '{"a" 1}', "[1] x"],
                         ids=["empty", "open", "trailing-comma", "two-values", "partial",
                              "no-colon", "garbage-after"])
def test_bad_input_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        fastjson.loads(text)


def test_whitespace_around_the_document_is_allowed() -> None:
    assert fastjson.loads(' \n{"a" : [1, 2]}\r\n\t') == {"a": [1, 2]}


def test_unencodable_values_raise_type_error() -> None:
    with pytest.raises(TypeError):
        fastjson.dumps({"x": object()})
    circular: list = []
    circular.append(circular)
    with pytest.raises(ValueError):
        fastjson.dumps(circular)
