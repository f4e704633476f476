"""Tests for ganeti.serializer: JSON, dataclasses, signed messages."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganeti import errors, serializer


@dataclass
class Inner:
    name: str = ""
    size: float = 0.0


@dataclass
class Outer:
    id: int = 0
    inner: Inner = field(default_factory=Inner)
    maybe: Inner | None = None
    items: list[Inner] = field(default_factory=list)
    by_key: dict[str, Inner] = field(default_factory=dict)
    pair: tuple[int, str] = (0, "")
    tags: list[str] = field(default_factory=list)


def test_dataclass_round_trip_through_json() -> None:
    obj = Outer(id=7, inner=Inner("a", 1.5), maybe=Inner("m", 2),
                items=[Inner("x", 1), Inner("y", 2)], by_key={"k": Inner("v", 3)},
                pair=(1, "one"), tags=["t1"])
    text = serializer.dumps(obj)
    back = serializer.from_data(Outer, serializer.loads(text))
    assert back == obj
    assert isinstance(back.by_key["k"], Inner)
    assert isinstance(back.maybe, Inner)
    assert isinstance(back.inner.size, float) and back.maybe.size == 2.0


def test_missing_keys_take_defaults_and_unknown_keys_are_ignored() -> None:
    back = serializer.from_data(Outer, {"id": 3, "future_field": 1})
    assert back == Outer(id=3)


def test_strict_mode_refuses_unknown_keys() -> None:
    with pytest.raises(errors.SerializationError, match="future_field"):
        serializer.from_data(Outer, {"id": 3, "future_field": 1}, strict=True)


@pytest.mark.parametrize("data", [[1], {"items": 3}, {"by_key": [1]}], ids=["list", "items", "dict"])
def test_wrong_shape_is_refused(data: object) -> None:
    with pytest.raises(errors.SerializationError):
        serializer.from_data(Outer, data)


@pytest.mark.parametrize("text", [b"{", b"\xff\xfe", "[1,", ""], ids=["open", "utf8", "list", "empty"])
def test_invalid_json_is_a_serialization_error(text: str | bytes) -> None:
    with pytest.raises(errors.SerializationError):
        serializer.loads(text)


def test_signed_round_trip() -> None:
    key = b"secret-key"
    text = serializer.dumps_signed({"a": [1, 2]}, key, salt="s1")
    assert serializer.loads_signed(text, key) == ({"a": [1, 2]}, "s1")


def test_tampered_message_is_refused() -> None:
    key = b"secret-key"
    env = serializer.loads(serializer.dumps_signed({"amount": 1}, key))
    env["msg"] = env["msg"].replace("1", "9")
    with pytest.raises(errors.SerializationError, match="signature"):
        serializer.loads_signed(serializer.dumps(env), key)


def test_tampered_salt_and_wrong_key_are_refused() -> None:
    key = b"secret-key"
    env = serializer.loads(serializer.dumps_signed({"x": 1}, key, salt="a"))
    env["salt"] = "b"
    with pytest.raises(errors.SerializationError):
        serializer.loads_signed(serializer.dumps(env), key)
    with pytest.raises(errors.SerializationError):
        serializer.loads_signed(serializer.dumps_signed({"x": 1}, key), b"other-key")


def test_signed_envelope_missing_fields_is_refused() -> None:
    with pytest.raises(errors.SerializationError):
        serializer.loads_signed(serializer.dumps({"msg": "1"}), b"k")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**53, max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20)


@given(_JSON)
def test_plain_data_round_trip(data: object) -> None:
    assert serializer.loads(serializer.dumps(data)) == data
    assert serializer.loads(serializer.dumps_bytes(data)) == data


def test_fragment_cache_matches_full_encoding_and_tracks_changes() -> None:
    from ganeti.objects import NIC, ConfigData, Instance

    data = ConfigData(instances={
        f"u{i}": Instance(name=f"i{i}", uuid=f"u{i}", nics=[NIC(mac=f"aa:00:00:00:00:0{i}")],
                          serial_no=1)
        for i in range(3)})
    cache = serializer.FragmentCache(("instances", "disks"))
    assert cache.dumps_bytes(data) == serializer.dumps_bytes(data)
    # a change with a serial bump is picked up
    data.instances["u1"].name = "renamed"
    data.instances["u1"].serial_no += 1
    assert b"renamed" in cache.dumps_bytes(data)
    assert cache.dumps_bytes(data) == serializer.dumps_bytes(data)
    # removal, addition and replacement by another object with the same serial
    del data.instances["u0"]
    data.instances["u9"] = Instance(name="new", uuid="u9")
    data.instances["u2"] = Instance(name="replaced", uuid="u2", serial_no=1)
    assert cache.dumps_bytes(data) == serializer.dumps_bytes(data)
    # a change without a serial/mtime bump is not seen (documented contract)
    data.instances["u1"].os = "sneaky"
    assert b"sneaky" not in cache.dumps_bytes(data)
    cache.clear()
    assert b"sneaky" in cache.dumps_bytes(data)


def test_fragment_cache_refuses_non_dataclass() -> None:
    with pytest.raises(errors.SerializationError):
        serializer.FragmentCache(("x",)).dumps_bytes({"x": {}})
