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


@pytest.mark.parametrize("change", ["first", "middle", "last", "all", "mtime-only", "new-object",
                                    "add", "remove-last", "reorder", "empty", "none"])
def test_fragment_cache_is_byte_identical_after_each_kind_of_change(change: str) -> None:
    from ganeti.objects import ConfigData, Instance

    data = ConfigData(instances={f"u{i}": Instance(name=f"i{i}", uuid=f"u{i}", serial_no=1)
                                 for i in range(5)})
    cache = serializer.FragmentCache(("instances",))
    assert cache.dumps_bytes(data) == serializer.dumps_bytes(data)
    insts = data.instances
    picks = {"first": ["u0"], "middle": ["u2"], "last": ["u4"], "all": list(insts)}
    for key in picks.get(change, []):
        insts[key].os = f"changed-{key}"
        insts[key].serial_no += 1
    if change == "mtime-only":
        insts["u3"].os, insts["u3"].mtime = "touched", 5.0
    elif change == "new-object":
        insts["u1"] = Instance(name="other", uuid="u1", serial_no=1)
    elif change == "add":
        insts["u9"] = Instance(name="new", uuid="u9")
    elif change == "remove-last":
        del insts["u4"]
    elif change == "reorder":
        data.instances = dict(reversed(list(insts.items())))
    elif change == "empty":
        data.instances = {}
    assert cache.dumps_bytes(data) == serializer.dumps_bytes(data)
    # and once more from what was just kept
    assert cache.dumps_bytes(data) == serializer.dumps_bytes(data)


def test_fragment_cache_refuses_non_dataclass() -> None:
    with pytest.raises(errors.SerializationError):
        serializer.FragmentCache(("x",)).dumps_bytes({"x": {}})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")],
                         ids=["nan", "inf", "-inf"])
def test_non_finite_floats_are_refused_by_every_writer(value: float) -> None:
    from ganeti.objects import ConfigData, Instance
    with pytest.raises(errors.SerializationError, match="not JSON compliant"):
        serializer.dumps({"a": [1, value]})
    with pytest.raises(errors.SerializationError):
        serializer.dumps({"a": value}, pretty=True)
    with pytest.raises(errors.SerializationError):
        serializer.dumps(Inner("x", value))
    data = ConfigData(instances={"u1": Instance(uuid="u1", beparams={"ratio": value})})
    with pytest.raises(errors.SerializationError):
        serializer.FragmentCache(("instances",)).dumps_bytes(data)


@pytest.mark.parametrize("text", ["NaN", "[1, Infinity]", '{"a": -Infinity}'],
                         ids=["nan", "inf", "-inf"])
def test_non_finite_constants_are_refused_when_reading(text: str) -> None:
    with pytest.raises(errors.SerializationError, match="not valid JSON"):
        serializer.loads(text)


@pytest.mark.parametrize("text", ["[1] x", "{} {}", "1 2"], ids=["word", "two-objects", "two-ints"])
def test_data_after_the_document_is_refused(text: str) -> None:
    with pytest.raises(errors.SerializationError, match="Extra data"):
        serializer.loads(text)


def test_surrounding_whitespace_is_accepted() -> None:
    assert serializer.loads(' \n{"a" : [1, 2]}\r\n\t') == {"a": [1, 2]}
    assert serializer.loads(b"[true]\n") == [True]


def test_unencodable_values_are_a_serialization_error() -> None:
    circular: list[object] = []
    circular.append(circular)
    for value in ({"x": object()}, circular, {(1, 2): "tuple key"}):
        with pytest.raises(errors.SerializationError):
            serializer.dumps(value)


def test_output_is_compact_ascii_in_insertion_order() -> None:
    # the on-disk and on-wire format (config.data, job files, LUXI, RPC)
    data = {"b": 1, "a": [1.5, None, True, "é\x03"], "c": {"z": (1, 2)}, 7: "int key"}
    assert serializer.dumps(data) == \
        '{"b":1,"a":[1.5,null,true,"\\u00e9\\u0003"],"c":{"z":[1,2]},"7":"int key"}'
    assert serializer.dumps_bytes(data) == serializer.dumps(data).encode("ascii")


def test_pretty_output_is_indented_and_sorted() -> None:
    assert serializer.dumps({"b": 1, "a": Inner("n", 2.0)}, pretty=True) == \
        '{\n  "a": {\n    "name": "n",\n    "size": 2.0\n  },\n  "b": 1\n}'


@dataclass
class _WithPrivate:
    shown: int = 1
    _hidden: int = 2
    items: set[str] = field(default_factory=set)


def test_dataclasses_sets_and_tuples_encode_like_to_data() -> None:
    obj = {"o": Outer(id=1, items=[Inner("x", 1)], pair=(2, "two")),
           "p": _WithPrivate(items={"only"}), "s": frozenset([3]), "t": (Inner(),)}
    assert serializer.dumps(obj) == serializer.dumps(serializer.to_data(obj))
    assert serializer.loads(serializer.dumps(obj))["p"] == {"shown": 1, "items": ["only"]}


def test_from_data_converts_nested_containers_and_reports_where() -> None:
    @dataclass
    class Shapes:
        by_name: dict[str, list[Inner]] = field(default_factory=dict)
        fixed: tuple[Inner, int] | None = None
        many: tuple[Inner, ...] = ()
        names: frozenset[str] = frozenset()
        either: Inner | Outer | None = None
        ratio: float = 0.0

    back = serializer.from_data(Shapes, {
        "by_name": {"k": [{"name": "a", "size": 1}]}, "fixed": [{"name": "f"}, 3],
        "many": [{"name": "m"}], "names": ["x", "x"], "either": {"name": "e"}, "ratio": 2})
    assert back.by_name == {"k": [Inner("a", 1.0)]} and isinstance(back.by_name["k"][0].size, float)
    assert back.fixed == (Inner("f"), 3) and back.many == (Inner("m"),)
    assert back.names == frozenset(["x"]) and back.either == Inner("e")
    assert isinstance(back.ratio, float)
    with pytest.raises(errors.SerializationError, match=r"Shapes\.by_name\.k\[0\]: expected an object"):
        serializer.from_data(Shapes, {"by_name": {"k": [7]}})
    with pytest.raises(errors.SerializationError, match=r"Shapes\.names: expected a list"):
        serializer.from_data(Shapes, {"names": "x"})


def test_importing_the_serializer_stays_lean() -> None:
    # every gnt-* command loads it (through luxi): no json, re, typing...
    import subprocess
    import sys
    code = ("import sys; from ganeti import serializer; "
            "assert serializer.loads(serializer.dumps({'a': [1]})) == {'a': [1]}; "
            "print([m for m in ('json', 're', 'enum', 'typing', 'dataclasses', 'hashlib', "
            "'hmac', 'simplejson') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         timeout=60, check=False, env={"PYTHONPATH": _repo_root()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_bad_json_is_a_serialization_error_before_json_is_imported() -> None:
    # the C scanner needs json.decoder for most of its errors; a gnt-* process
    # has not imported it when a malformed reply arrives
    import subprocess
    import sys
    code = ("import sys; from ganeti import errors, serializer\n"
            "for text in ('{garbage', '{\"a\": 1,', '[1 2]', '\"open'):\n"
            "    try:\n"
            "        serializer.loads(text)\n"
            "    except errors.SerializationError as exc:\n"
            "        print(str(exc).split(':')[1].strip())\n")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         timeout=60, check=False, env={"PYTHONPATH": _repo_root()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "Expecting property name enclosed in double quotes", "Expecting property name enclosed"
        " in double quotes", "Expecting ',' delimiter", "Unterminated string starting at"]


def _repo_root() -> str:
    import os
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("text", ["1e400", "[-1e400]", '{"duration": 1E999}'],
                         ids=["inf", "-inf", "in-object"])
def test_numbers_beyond_the_float_range_are_refused(text: str) -> None:
    # Python's float() would read them as infinities, which no writer can store
    with pytest.raises(errors.SerializationError, match="out of range"):
        serializer.loads(text)


def test_large_finite_numbers_still_decode() -> None:
    assert serializer.loads("[1e308, -1.5e-320, 18446744073709551616]") == [
        1e308, -1.5e-320, 2 ** 64]


@pytest.mark.parametrize("text", [b'{"comment": "x\\ud800"}', b'["ok", "\\udfff"]',
                                  b'{"\\udc00": 1}', '"\ud800"'],
                         ids=["value", "list-item", "key", "raw-str"])
def test_valid_unicode_refuses_lone_surrogates(text: str | bytes) -> None:
    with pytest.raises(errors.SerializationError, match="lone surrogate"):
        serializer.loads(text, valid_unicode=True)
    assert serializer.loads(text) is not None     # stored data stays readable


def test_valid_unicode_keeps_surrogate_pairs_and_other_text() -> None:
    text = '{"a": "\\ud83d\\ude00", "b": "caf\u00e9", "c": ["\\u00e9"]}'
    assert serializer.loads(text, valid_unicode=True) == {"a": "\U0001f600", "b": "caf\u00e9",
                                                          "c": ["\u00e9"]}
