"""The shape of a JSON text (depth, number of values) measured before decoding."""

from __future__ import annotations

import json

import pytest

from ganeti import errors
from ganeti.utils import jsonshape


@pytest.mark.parametrize("value", [
    0, "x", [], {}, [1, 2, 3], {"a": [1, {"b": 2}]}, ["[,{", "\\\"]]]", ",,,"],
], ids=["int", "str", "list", "dict", "ints", "nested", "brackets-in-strings"])
def test_count_is_an_upper_bound_and_depth_exact(value):
    text = json.dumps(value).encode()

    def count(v):
        inner = v if isinstance(v, list) else list(v.values()) if isinstance(v, dict) else []
        return 1 + sum(count(x) for x in inner)

    def depth(v, d=0):
        if isinstance(v, (list, dict)):
            inner = v if isinstance(v, list) else list(v.values())
            return max([d + 1] + [depth(x, d + 1) for x in inner])
        return d

    assert jsonshape.count_values(text) >= count(value)
    assert jsonshape.max_depth(text, 100) == depth(value)
    jsonshape.check_shape(text, depth=10, values=100)


def test_too_many_values():
    with pytest.raises(errors.SerializationError, match="too large"):
        jsonshape.check_shape(b"[" + b"0," * 1000 + b"0]", depth=10, values=1000)


def test_too_deep():
    with pytest.raises(errors.SerializationError, match="nested too deep"):
        jsonshape.check_shape(b"[" * 65 + b"]" * 65, depth=64, values=1000)
    jsonshape.check_shape(b"[" * 64 + b"]" * 64, depth=64, values=1000)


def test_unbalanced_closers_and_many_strings_are_refused_early():
    with pytest.raises(errors.SerializationError, match="closing"):
        jsonshape.check_shape(b"]" * 100_000, depth=64, values=1000)
    with pytest.raises(errors.SerializationError, match="strings"):
        jsonshape.check_shape(b'""' * 10_000, depth=64, values=1000)
