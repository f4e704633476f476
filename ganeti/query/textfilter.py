"""The CLI text form of query filters (``--filter``), parsed into the list form.

Grammar (keywords are case-insensitive; ``not`` binds tighter than ``and``,
which binds tighter than ``or``; chains of ``and``/``or`` become one list)::

    expr      := term ("or" term)*
    term      := factor ("and" factor)*
    factor    := "not" factor | "(" expr ")" | condition
    condition := FIELD                          -> ["?", FIELD]
               | FIELD ("=="|"!="|"<"|"<="|">"|">=") VALUE
               | FIELD ("=~"|"!~") REGEX        -> ["=~", ...] / ["!", ["=~", ...]]
               | FIELD ("=*"|"!*") STRING       -> DNS-name glob, as a regex
               | VALUE ["not"] "in" FIELD       -> ["=[]", FIELD, VALUE]
    VALUE     := "double" or 'single' quoted string (backslash escapes),
                 integer or decimal number (optional sign), true, false
    REGEX     := /re/flags or m<d>re<d>flags with <d> one of / # ^ |, or a
                 quoted string; flags are i, s, m, x; "\\<d>" stands for <d>,
                 other backslashes are kept for the regex engine
    FIELD     := a letter or "_", then letters, digits, "_", ".", "/"

Examples: ``name == "inst1"``, ``status != "running" and pnode =~ /node1/``,
``not admin_up``, ``mtotal > 1024``, ``"foo" in tags``, ``name =~ m/^web/i``.

Errors raise :class:`errors.QueryFilterParseError` whose message names the
0-based character position.  :func:`make_filter` is the CLI helper that
turns command-line arguments into a filter (names, globs or one filter text).
"""

from __future__ import annotations

import re
from typing import Any

from ganeti import errors
from ganeti.query import filter as qfilter_mod

__all__ = ["parse_filter_text", "is_filter_text", "make_filter", "glob_to_regex",
           "FILTER_DETECTION_CHARS", "GLOB_DETECTION_CHARS"]

#: A command-line argument with any of these is taken as filter text.
FILTER_DETECTION_CHARS = frozenset("()=/!~'\"\\<> \t\n\r\f\v")
#: A name argument with any of these is a glob pattern.
GLOB_DETECTION_CHARS = frozenset("*?")

_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_./]*")
_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?![A-Za-z0-9_.])")
_OPERATORS = ("==", "!=", "<=", ">=", "=~", "!~", "=*", "!*", "<", ">")
_COMPARISONS = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_KEYWORDS = frozenset(["and", "or", "not", "in", "true", "false"])
_REGEX_DELIMS = "/#^|"
_REGEX_FLAGS = frozenset("isxm")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}

# token kinds
_EOF, _LPAREN, _RPAREN, _OP, _STRING, _NUMBER, _WORD = range(7)


class _Parser:
    """Recursive descent over the text, lexing on demand (regex literals
    need the parser's context)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.tok: tuple[int, Any, int] = (_EOF, None, 0)
        self._advance()

    # --- errors and lexing ---------------------------------------------------

    def error(self, msg: str, pos: int | None = None) -> errors.QueryFilterParseError:
        pos = self.tok[2] if pos is None else pos
        near = self.text[pos:pos + 15]
        where = f"near {near!r}" if near else "at end of text"
        exc = errors.QueryFilterParseError(
            f"Invalid filter at position {pos} ({where}): {msg}")
        return exc

    def _skip_ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos].isspace():
            pos += 1
        self.pos = pos

    def _advance(self) -> None:
        self._skip_ws()
        text, pos = self.text, self.pos
        if pos >= len(text):
            self.tok = (_EOF, None, pos)
            return
        char = text[pos]
        if char == "(":
            self.tok, self.pos = (_LPAREN, "(", pos), pos + 1
            return
        if char == ")":
            self.tok, self.pos = (_RPAREN, ")", pos), pos + 1
            return
        if char in "\"'":
            text_value, self.pos = self._read_string(pos)
            self.tok = (_STRING, text_value, pos)
            return
        for op in _OPERATORS:
            if text.startswith(op, pos):
                self.tok, self.pos = (_OP, op, pos), pos + len(op)
                return
        match = _NUMBER_RE.match(text, pos)
        if match:
            number = match.group()
            value: Any = float(number) if "." in number else int(number)
            self.tok, self.pos = (_NUMBER, value, pos), match.end()
            return
        match = _WORD_RE.match(text, pos)
        if match:
            self.tok, self.pos = (_WORD, match.group(), pos), match.end()
            return
        if char.isdigit() or (char in "+-" and text[pos + 1:pos + 2].isdigit()):
            junk = re.match(r"[-+]?[A-Za-z0-9_.]+", text[pos:])
            raise self.error(f"invalid number {junk.group() if junk else char!r}"
                             " (numbers are plain integers or decimals)", pos)
        raise self.error(f"unexpected character {char!r}", pos)

    def _read_string(self, start: int) -> tuple[str, int]:
        text, quote = self.text, self.text[start]
        out: list[str] = []
        pos = start + 1
        while pos < len(text):
            char = text[pos]
            if char == quote:
                return "".join(out), pos + 1
            if char == "\\" and pos + 1 < len(text):
                nxt = text[pos + 1]
                out.append(_ESCAPES.get(nxt, "\\" + nxt))
                pos += 2
                continue
            out.append(char)
            pos += 1
        raise self.error("unterminated string", start)

    def _read_regex(self) -> str:
        """Read a regex literal at the current text position (after =~ / !~)."""
        self._skip_ws()
        text, start = self.text, self.pos
        if start < len(text) and text[start] in "\"'":
            body, pos = self._read_string(start)
        else:
            pos = start
            if text.startswith("m", pos) and pos + 1 < len(text) and text[pos + 1] in _REGEX_DELIMS:
                pos += 1
            if pos >= len(text) or text[pos] not in _REGEX_DELIMS or (pos == start and text[pos] != "/"):
                raise self.error("expected a regular expression such as /re/ or m/re/i", start)
            delim = text[pos]
            pos += 1
            out: list[str] = []
            while True:
                if pos >= len(text):
                    raise self.error("unterminated regular expression", start)
                char = text[pos]
                if char == delim:
                    pos += 1
                    break
                if char == "\\" and pos + 1 < len(text):
                    nxt = text[pos + 1]
                    out.append(nxt if nxt == delim else "\\" + nxt)
                    pos += 2
                    continue
                out.append(char)
                pos += 1
            body = "".join(out)
        flag_start = pos
        while pos < len(text) and text[pos].isalpha():
            pos += 1
        flags = text[flag_start:pos]
        bad = set(flags) - _REGEX_FLAGS
        if bad:
            raise self.error(f"unknown regular expression flag(s) {''.join(sorted(bad))!r}", flag_start)
        if flags:
            body = f"(?{''.join(sorted(set(flags)))})" + body
        try:
            re.compile(body)
        except re.error as exc:
            raise self.error(f"invalid regular expression {body!r}: {exc}", start) from exc
        self.pos = pos
        self._advance()
        return body

    def _keyword(self, word: str) -> bool:
        kind, value, _ = self.tok
        return kind == _WORD and value.lower() == word

    # --- grammar ---------------------------------------------------------------

    def parse(self) -> list[Any]:
        if self.tok[0] == _EOF:
            raise self.error("empty filter")
        result = self._expr()
        if self.tok[0] != _EOF:
            raise self.error("expected 'and', 'or' or the end of the filter")
        return result

    def _expr(self) -> list[Any]:
        terms = [self._term()]
        while self._keyword("or"):
            self._advance()
            terms.append(self._term())
        return terms[0] if len(terms) == 1 else [qfilter_mod.OP_OR, *terms]

    def _term(self) -> list[Any]:
        factors = [self._factor()]
        while self._keyword("and"):
            self._advance()
            factors.append(self._factor())
        return factors[0] if len(factors) == 1 else [qfilter_mod.OP_AND, *factors]

    def _factor(self) -> list[Any]:
        kind = self.tok[0]
        if self._keyword("not"):
            self._advance()
            return [qfilter_mod.OP_NOT, self._factor()]
        if kind == _LPAREN:
            self._advance()
            inner = self._expr()
            if self.tok[0] != _RPAREN:
                raise self.error("expected ')'")
            self._advance()
            return inner
        return self._condition()

    def _value(self) -> Any | None:
        """The current token as a value, or None if it is not one."""
        kind, value, _ = self.tok
        if kind in (_STRING, _NUMBER):
            return value
        if self._keyword("true"):
            return True
        if self._keyword("false"):
            return False
        return None

    def _field(self, what: str) -> str:
        kind, value, _ = self.tok
        if kind != _WORD or value.lower() in _KEYWORDS:
            raise self.error(f"expected a field name {what}")
        self._advance()
        return value

    def _condition(self) -> list[Any]:
        value = self._value()
        if value is not None:
            self._advance()
            negate = self._keyword("not")
            if negate:
                self._advance()
            if not self._keyword("in"):
                raise self.error("expected 'in' or 'not in' after a value")
            self._advance()
            field = self._field("after 'in'")
            cond = [qfilter_mod.OP_CONTAINS, field, value]
            return [qfilter_mod.OP_NOT, cond] if negate else cond
        if self.tok[0] != _WORD or self.tok[1].lower() in _KEYWORDS:
            raise self.error("expected a condition (field name, value or '(')")
        field = self._field("")
        kind, op, _ = self.tok
        if kind != _OP:
            return [qfilter_mod.OP_TRUE, field]
        if op in ("=~", "!~"):
            cond = [qfilter_mod.OP_REGEXP, field, self._read_regex()]
            return [qfilter_mod.OP_NOT, cond] if op == "!~" else cond
        self._advance()
        rhs = self._value()
        if rhs is None:
            hint = " (quote strings)" if self.tok[0] == _WORD else ""
            raise self.error(f"expected a value after '{op}'{hint}")
        self._advance()
        if op in ("=*", "!*"):
            if not isinstance(rhs, str):
                raise self.error(f"'{op}' needs a quoted glob pattern")
            cond = [qfilter_mod.OP_REGEXP, field, glob_to_regex(rhs)]
            return [qfilter_mod.OP_NOT, cond] if op == "!*" else cond
        return [_COMPARISONS[op], field, rhs]


def parse_filter_text(text: str) -> list[Any]:
    """Parse the CLI text form into the list form (see the module docstring).

    Raises :class:`errors.QueryFilterParseError` with the error position.
    Field names are not checked here; :func:`compile_filter` does that.
    """
    if not isinstance(text, str):
        raise errors.QueryFilterParseError(f"Filter text must be a string, got {text!r}")
    return _Parser(text).parse()


def is_filter_text(text: str) -> bool:
    """Whether a lone command-line argument looks like filter text rather than
    a name: it has whitespace or one of ``()=/!~'"\\<>``."""
    return bool(FILTER_DETECTION_CHARS.intersection(text))


def glob_to_regex(pattern: str) -> str:
    """A regex for a DNS-name glob: ``*`` matches within one name part (no
    dot), ``?`` one such character; ``"node1"`` also matches
    ``"node1.example.com"`` (a pattern matches the leading name parts)."""
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(r"[^.]*")
        elif char == "?":
            parts.append(r"[^.]")
        else:
            parts.append(re.escape(char))
    return "^" + "".join(parts) + r"(\..*)?$"


def make_filter(args: list[str], *, force_filter: bool = False, namefield: str = "name",
                isnumeric: bool = False) -> list[Any] | None:
    """Turn CLI arguments into a filter, as ``gnt-* list`` does.

    With ``force_filter`` (``--filter``), or a single argument that
    :func:`is_filter_text`, that argument is parsed as filter text (exactly
    one argument is then required).  Otherwise the arguments are names: an
    ``|`` of ``["==", namefield, name]`` (ints when ``isnumeric``, e.g. job
    ids), with glob names (``*``, ``?``) turned into ``=~`` regexes; no
    arguments give None.  Raises :class:`errors.QueryFilterParseError` for bad
    text and :class:`errors.OpPrereqError` (``ECODE_INVAL``) for bad arguments.
    """
    if force_filter or (len(args) == 1 and is_filter_text(args[0])):
        if len(args) != 1:
            raise errors.OpPrereqError("Exactly one argument must be given as a filter",
                                       errors.ECODE_INVAL)
        return parse_filter_text(args[0])
    if not args:
        return None
    parts: list[Any] = [qfilter_mod.OP_OR]
    for arg in args:
        if isnumeric:
            try:
                parts.append([qfilter_mod.OP_EQUAL, namefield, int(arg)])
            except ValueError:
                raise errors.OpPrereqError(f"Invalid number '{arg}'", errors.ECODE_INVAL) from None
        elif GLOB_DETECTION_CHARS.intersection(arg):
            parts.append([qfilter_mod.OP_REGEXP, namefield, glob_to_regex(arg)])
        else:
            parts.append([qfilter_mod.OP_EQUAL, namefield, arg])
    return parts
