"""The YAML layout of ``gnt-* info`` (ganeti.cli.info): text, quoting, and read back by PyYAML."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ganeti.cli import info


def _load(text: str) -> Any:
    return yaml.safe_load(text)


def test_instance_like_layout() -> None:
    data = [[("Instance name", "inst1.example.com"),
             ("Serial number", 3),
             ("Nodes", [[("primary", "node1"), ("group", "default (UUID abc)")],
                        [("secondaries", "")]]),
             ("Hypervisor parameters", {"acpi": True, "kernel_args": "default (ro)"}),
             ("NICs", []),
             ("Disks", [[("disk/0", "file, size 1.0G"), ("access mode", "rw"),
                         ("child devices", [[("child 0", "plain, size 1.0G")]])]])]]
    text = info.format_info(data)
    assert text.splitlines() == [
        "- Instance name: inst1.example.com",
        "  Serial number: 3",
        "  Nodes:",
        "    - primary: node1",
        "      group: default (UUID abc)",
        "    - secondaries: ''",
        "  Hypervisor parameters:",
        "    acpi: True",
        "    kernel_args: default (ro)",
        "  NICs: []",
        "  Disks:",
        "    - disk/0: file, size 1.0G",
        "      access mode: rw",
        "      child devices:",
        "        - child 0: plain, size 1.0G",
    ]
    parsed = _load(text)
    assert parsed[0]["Nodes"][0]["primary"] == "node1"
    assert parsed[0]["Hypervisor parameters"]["acpi"] is True
    assert parsed[0]["Disks"][0]["child devices"][0]["child 0"] == "plain, size 1.0G"


@pytest.mark.parametrize("text", [
    "a: b", "key:", "#comment", "x #y", "- item", "-", "? q", ": x", "", " lead", "trail ",
    "yes", "No", "ON", "null", "~", "Null", "y", "N", "123", "-1", "+1", "1.5", ".5", ".inf",
    "-.inf", ".NaN", "0x1f", "0o17", "12:30", "12:34:56:11:22:33", "2026-01-01",
    "2026-01-01 10:00:00.123456", "1e3", "[a]", "{a}", "*ref", "&anchor", "!tag", "|", ">",
    "'q'", '"d"', "%x", "@x", "`x", "---", "...", "=", "<<", "line\nbreak", "tab\there",
    "bell\x07", "10.0.0.1", "1.0G", "2026-01-01 10:00:00.0 (delta 0.5s)", ".", "+", "1_000", "0b101", "1:20.5", "2026-01-01T10:00:00Z", "+.inf", "-.5e3", "it's", 'say "hi"', "back\\slash", "ünïcode: ü", "True", "False", "None",
], ids=repr)
def test_strings_read_back_as_the_same_string(text: str) -> None:
    out = info.format_info([("key", text), ("list", [text]), ("flow", (1, text, "x"))])
    parsed = _load(out)
    if text == "None":      # Ganeti writes None as None, so the string None too
        assert parsed["key"] == "None"
        return
    assert parsed == {"key": text, "list": [text], "flow": [1, text, "x"]}


def test_plain_where_it_reads_back_plain() -> None:
    for text in ("node1.example.com", "default (True)", "drbd, size 1.0G", "a:b",
                 "aa:00:00:00:00:01", "/dev/drbd0 (147:0) in sync, status ok",
                 "x - y", "a#b", "nic/0", "-x", "unknown (None)"):
        assert info.quote_scalar(text) == text


def test_typed_scalars() -> None:
    assert _load(info.format_info([("a", True), ("b", False), ("c", 3), ("d", 2.5),
                                   ("e", None)])) == {
        "a": True, "b": False, "c": 3, "d": 2.5, "e": "None"}


def test_keys_are_quoted_too() -> None:
    assert _load(info.format_info({"a: b": 1, "yes": 2})) == {"a: b": 1, "yes": 2}


def test_dict_keys_sorted_pairs_in_order() -> None:
    assert info.format_info({"b": 1, "a": 2}) == "a: 2\nb: 1"
    assert info.format_info([("b", 1), ("a", 2)]) == "b: 1\na: 2"


def test_nested_sequences() -> None:
    text = info.format_info([["a", "b"], [], {}])
    assert text == "- - a\n  - b\n- []\n- {}"
    assert _load(text) == [["a", "b"], [], {}]


def test_params_info_marks_inherited_values() -> None:
    result = info.params_info({"acpi": False, "sub": {"x": 1}},
                              {"acpi": False, "kernel": "/boot/vmlinuz", "tags": ["a", "b"],
                               "sub": {"x": 1, "y": 2}})
    assert result == {"acpi": False, "kernel": "default (/boot/vmlinuz)",
                      "tags": "default (a, b)", "sub": {"x": 1, "y": "default (2)"}}
    assert _load(info.format_info(result))["acpi"] is False


_scalars = st.one_of(st.text(), st.integers(), st.booleans(),
                     st.floats(allow_nan=False, allow_infinity=False))
_keys = st.text(min_size=1)
_trees = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_keys, children, max_size=4),
        st.lists(st.tuples(_keys, children), min_size=1, max_size=4,
                 unique_by=lambda kv: kv[0])),
    max_leaves=12)


def _expected(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _expected(v) for k, v in value.items()}
    if info._is_pairs(value):
        return {k: _expected(v) for k, v in value}
    if isinstance(value, list):
        return [_expected(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(_trees)
def test_any_tree_reads_back_the_same(tree: Any) -> None:
    assert _load(info.format_info(tree)) == _expected(tree)
