"""Tests for ganeti.query.textfilter: the CLI --filter text form."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ganeti import errors
from ganeti import query as q

PARSES = [
    ("eq-double", 'name == "inst1"', ["==", "name", "inst1"]),
    ("eq-single", "name == 'inst1'", ["==", "name", "inst1"]),
    ("no-spaces", 'name=="inst1"', ["==", "name", "inst1"]),
    ("ne", 'status != "running"', ["!=", "status", "running"]),
    ("lt", "mtotal < 10", ["<", "mtotal", 10]),
    ("le", "mtotal <= 10", ["<=", "mtotal", 10]),
    ("gt", "mtotal > 1024", [">", "mtotal", 1024]),
    ("ge", "mtotal >= 1024", [">=", "mtotal", 1024]),
    ("negative", "x > -5", [">", "x", -5]),
    ("plus-sign", "x > +5", [">", "x", 5]),
    ("float", "x < 1.5", ["<", "x", 1.5]),
    ("true", "admin_up == true", ["==", "admin_up", True]),
    ("false-caps", "admin_up == False", ["==", "admin_up", False]),
    ("bare-field", "admin_state", ["?", "admin_state"]),
    ("not-field", "not admin_state", ["!", ["?", "admin_state"]]),
    ("not-not", "not not x", ["!", ["!", ["?", "x"]]]),
    ("and", 'status != "running" and pnode =~ /node1/',
     ["&", ["!=", "status", "running"], ["=~", "pnode", "node1"]]),
    ("and-chain-flat", "a and b and c", ["&", ["?", "a"], ["?", "b"], ["?", "c"]]),
    ("or-chain-flat", "a or b or c", ["|", ["?", "a"], ["?", "b"], ["?", "c"]]),
    ("precedence", "a or b and not c",
     ["|", ["?", "a"], ["&", ["?", "b"], ["!", ["?", "c"]]]]),
    ("parens", "(a or b) and c", ["&", ["|", ["?", "a"], ["?", "b"]], ["?", "c"]]),
    ("nested-parens", "((a))", ["?", "a"]),
    ("not-parens", "not (a and b)", ["!", ["&", ["?", "a"], ["?", "b"]]]),
    ("keywords-any-case", "a AND b Or NOT c",
     ["|", ["&", ["?", "a"], ["?", "b"]], ["!", ["?", "c"]]]),
    ("in", '"foo" in tags', ["=[]", "tags", "foo"]),
    ("not-in", '"foo" not in tags', ["!", ["=[]", "tags", "foo"]]),
    ("number-in", "5 in ids", ["=[]", "ids", 5]),
    ("regex-slash", "name =~ /^web/", ["=~", "name", "^web"]),
    ("regex-m", "name =~ m/^web/", ["=~", "name", "^web"]),
    ("regex-flag-i", "name =~ m/^web/i", ["=~", "name", "(?i)^web"]),
    ("regex-flags-si", "name =~ /a.b/si", ["=~", "name", "(?is)a.b"]),
    ("regex-hash-delim", "name =~ m#a/b#", ["=~", "name", "a/b"]),
    ("regex-pipe-delim", "name =~ m|x|", ["=~", "name", "x"]),
    ("regex-caret-delim", "name =~ m^x^", ["=~", "name", "x"]),
    ("regex-escaped-delim", r"name =~ /a\/b/", ["=~", "name", "a/b"]),
    ("regex-keeps-backslashes", r"name =~ /\d+\./", ["=~", "name", r"\d+\."]),
    ("regex-quoted", 'name =~ "^w"', ["=~", "name", "^w"]),
    ("regex-no-space", "name=~/x/ and y", ["&", ["=~", "name", "x"], ["?", "y"]]),
    ("not-regex", "name !~ /^web/", ["!", ["=~", "name", "^web"]]),
    ("glob", 'name =* "web*"', ["=~", "name", r"^web[^.]*(\..*)?$"]),
    ("not-glob", 'name !* "w?b"', ["!", ["=~", "name", r"^w[^.]b(\..*)?$"]]),
    ("field-with-slash-dot", 'disk.size/0 > 100', [">", "disk.size/0", 100]),
    ("string-escapes", r'name == "a\"b\\c\n"', ["==", "name", 'a"b\\c\n']),
    ("string-with-keyword", 'name == "and or not"', ["==", "name", "and or not"]),
    ("whitespace", "  \tname   ==\n 'x'  ", ["==", "name", "x"]),
]


@pytest.mark.parametrize(("text", "expected"), [p[1:] for p in PARSES], ids=[p[0] for p in PARSES])
def test_parse_filter_text(text: str, expected: Any) -> None:
    assert q.parse_filter_text(text) == expected


ERRORS = [
    ("empty", "", 0, "empty filter"),
    ("blank", "   ", 3, "empty filter"),
    ("missing-value", "name ==", 7, "expected a value after '=='"),
    ("bare-word-value", "name == running", 8, "quote strings"),
    ("unterminated-string", 'name == "abc', 8, "unterminated string"),
    ("unterminated-regex", "name =~ /abc", 8, "unterminated regular expression"),
    ("bad-regex", "name =~ /(/", 8, "invalid regular expression"),
    ("regex-bad-flag", "name =~ /a/q", 11, "flag"),
    ("regex-missing", "name =~ 5", 8, "expected a regular expression"),
    ("regex-bad-delim-without-m", "name =~ #a#", 8, "expected a regular expression"),
    ("unbalanced-open", "(a and b", 8, "expected '\\)'"),
    ("unbalanced-close", "a and b)", 7, "expected 'and', 'or'"),
    ("dangling-and", "a and", 5, "expected a condition"),
    ("leading-op", "== 5", 0, "expected a condition"),
    ("two-fields", "a b", 2, "expected 'and', 'or'"),
    ("value-without-in", '"foo" tags', 6, "expected 'in'"),
    ("in-without-field", '"foo" in', 8, "field name"),
    ("keyword-as-field", "and == 1", 0, "expected a condition"),
    ("bad-char", "name == 5 & x", 10, "unexpected character '&'"),
    ("glob-number", "name =* 5", 9, "glob pattern"),
    ("number-glued-to-word", "x > 10G", 4, "invalid number '10G'"),
    ("empty-parens", "()", 1, "expected a condition"),
]


@pytest.mark.parametrize(("text", "pos", "match"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_parse_errors_name_the_position(text: str, pos: int, match: str) -> None:
    with pytest.raises(errors.QueryFilterParseError, match=match) as info:
        q.parse_filter_text(text)
    assert f"at position {pos} " in str(info.value)


def test_parse_rejects_non_string() -> None:
    with pytest.raises(errors.QueryFilterParseError):
        q.parse_filter_text(["==", "name", "x"])  # type: ignore[arg-type]


def test_parsed_filter_compiles_and_runs(fields: q.FieldTable, items: list[Any], ctx: Any) -> None:
    flt = q.parse_filter_text('(name =~ m/^WEB/i and not admin_up) or "db" in tags')
    pred = q.compile_filter(fields, flt)
    assert [i.name for i in items if pred(ctx, i)] == ["web2", "db1"]


@pytest.mark.parametrize(("text", "expected"), [
    ("inst1", False), ("inst1.example.com", False), ("web*", False), ("node-1_a", False),
    ("name == 'x'", True), ("a=b", True), ("(x)", True), ("not x", True), ("x!", True),
    ("/re/", True), ('"q"', True), ("a<b", True), ("tag~", True),
], ids=lambda v: repr(v))
def test_is_filter_text(text: str, expected: bool) -> None:
    assert q.is_filter_text(text) is expected


@pytest.mark.parametrize(("pattern", "yes", "no"), [
    ("web*", ["web", "web1", "web1.example.com"], ["xweb1", "we"]),
    ("*.site", ["a.site", "a.site.com"], ["a.b.site", "site"]),
    ("n?de", ["node", "nXde.x"], ["nde", "n.de"]),
    ("a+b", ["a+b"], ["aab"]),
], ids=["star", "star-dot", "question", "escaped"])
def test_glob_to_regex(pattern: str, yes: list[str], no: list[str]) -> None:
    rx = re.compile(q.glob_to_regex(pattern))
    assert all(rx.search(name) for name in yes)
    assert not any(rx.search(name) for name in no)


MAKE = [
    ("no-args", [], {}, None),
    ("names", ["a", "b"], {}, ["|", ["==", "name", "a"], ["==", "name", "b"]]),
    ("one-name", ["a"], {}, ["|", ["==", "name", "a"]]),
    ("namefield", ["5"], {"namefield": "id"}, ["|", ["==", "id", "5"]]),
    ("numeric", ["5", "7"], {"namefield": "id", "isnumeric": True},
     ["|", ["==", "id", 5], ["==", "id", 7]]),
    ("glob", ["web*", "db1"], {}, ["|", ["=~", "name", r"^web[^.]*(\..*)?$"], ["==", "name", "db1"]]),
    ("auto-filter", ["name == 'a'"], {}, ["==", "name", "a"]),
    ("forced-filter", ["admin_up"], {"force_filter": True}, ["?", "admin_up"]),
]


@pytest.mark.parametrize(("args", "kwargs", "expected"), [m[1:] for m in MAKE], ids=[m[0] for m in MAKE])
def test_make_filter(args: list[str], kwargs: dict[str, Any], expected: Any) -> None:
    assert q.make_filter(args, **kwargs) == expected


def test_make_filter_errors() -> None:
    with pytest.raises(errors.OpPrereqError, match="Exactly one"):
        q.make_filter(["a", "b"], force_filter=True)
    with pytest.raises(errors.OpPrereqError, match="Invalid number 'x'") as info:
        q.make_filter(["x"], namefield="id", isnumeric=True)
    assert info.value.ecode == errors.ECODE_INVAL
    with pytest.raises(errors.QueryFilterParseError):
        q.make_filter(["name =="])


def test_make_filter_names_are_requested_names() -> None:
    assert q.requested_names(q.make_filter(["b", "a"])) == ["b", "a"]
    assert q.requested_names(q.make_filter(["b", "a*"])) is None
