"""The YAML layout of every ``gnt-* info`` command (doc/commands.md, "Common behaviour").

Ganeti prints ``gnt-instance info``, ``gnt-node info``, ``gnt-cluster info``...
as YAML that scripts (and Ganeti's own QA) read with a YAML parser:
``- Instance name: inst1`` list items, two spaces per level.
:func:`format_info` turns nested data into that text; it is pure (no I/O).

The data model:

* a ``dict``: a mapping, keys in sorted order (parameter dicts);
* a ``list`` whose items are all ``(key, value)`` tuples: a mapping in
  the given order (the usual shape of an object's description);
* any other ``list``: a block sequence (``- item`` lines);
* a ``tuple`` of scalars: a flow sequence on one line (``[1, message, text]``);
* scalars: ``str``, ``int``, ``float``, ``bool`` (``True``/``False``) and
  ``None`` (written ``None`` as Ganeti does, which a YAML parser reads as
  the string ``"None"``).

A string is written plain when a YAML 1.1 or 1.2 parser reads it back as
the same string, else quoted: ``'...'`` (quotes doubled), or ``"..."`` with
escapes when it holds line breaks or control characters.  So ``a: b``
(a colon and a space), ``#x``, ``- x``, ``''``, ``yes``, ``null``, ``123``,
``1.5``, ``12:30`` or ``2026-01-01`` (anything that starts like a number)
come back as strings, never as mappings, booleans, nulls, numbers or dates.
No regular expressions: the module is on the start-up path of the info verbs
(doc/cli-startup.md).
"""

from __future__ import annotations

import functools

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["format_info", "print_info", "quote_scalar", "params_info", "grouped_params_info",
           "param_value", "nice_sort"]

_INDENT = "  "

#: Words YAML 1.1 reads as booleans or null (any case where the spec allows it).
_SPECIAL_WORDS = frozenset(
    w for base in ("y", "yes", "n", "no", "true", "false", "on", "off", "null", "~")
    for w in (base, base.capitalize(), base.upper()))

#: Characters that may not start a plain scalar.
_BAD_FIRST = frozenset("[]{},#&*!|>'\"%@`")

#: Characters that end a plain scalar in a flow sequence (``[a, b]``).
_FLOW_CHARS = frozenset(",[]{}")

#: Characters written as escapes inside double quotes: control characters,
#: line and paragraph separators, byte order mark, non-characters (a tab too).
_ESCAPED = frozenset([chr(c) for c in range(0x20)] + [chr(c) for c in range(0x7f, 0xa0)]
                     + ["\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff"])

_DIGITS = frozenset("0123456789")


def _needs_escapes(text: str) -> bool:
    # fast path: every escaped character is unprintable for str.isprintable
    if text.isprintable():
        return False
    return any(c in _ESCAPED or "\ud800" <= c <= "\udfff" for c in text)


def _number_like(text: str) -> bool:
    """True if a YAML 1.1 or 1.2 parser may read ``text`` as a number or a date.

    Conservative (no regular expressions: CLI start-up): anything starting
    with a digit, or with a sign or dot and then a digit or dot, and the
    special floats ``.inf``/``.nan``.
    """
    first = text[0]
    if first in _DIGITS:
        return True
    if first in "+-." and len(text) > 1 and (text[1] in _DIGITS or text[1] == "."):
        return True
    return text.lower() in (".", "+", ".inf", "+.inf", "-.inf", ".nan")


def _plain_ok(text: str, flow: bool) -> bool:
    """True if ``text`` written unquoted reads back as the same string."""
    if not text or text != text.strip(" ") or text in _SPECIAL_WORDS or text in ("=", "<<"):
        return False
    if _needs_escapes(text):
        return False
    first = text[0]
    if first in _BAD_FIRST or _number_like(text):
        return False
    if first in "-?:" and (len(text) == 1 or text[1] == " "):
        return False
    if text.startswith(("---", "...")):
        return False
    if ": " in text or text.endswith(":") or " #" in text:
        return False
    if flow and (any(c in _FLOW_CHARS for c in text) or ":" in text):
        return False
    return True


def _double_quoted(text: str) -> str:
    out = []
    for char in text:
        code = ord(char)
        if char in "\\\"":
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char in _ESCAPED or "\ud800" <= char <= "\udfff":
            out.append(f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def quote_scalar(value: Any, *, flow: bool = False) -> str:
    """One scalar as YAML text (``flow``: inside ``[...]``); see the module doc."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    return _quote_text(str(value), flow)


@functools.lru_cache(maxsize=4096)
def _quote_text(text: str, flow: bool) -> str:
    """A text as YAML (memoised: keys and default values repeat a lot on a page)."""
    if _plain_ok(text, flow):
        return text
    if _needs_escapes(text):
        return _double_quoted(text)
    return "'" + text.replace("'", "''") + "'"


def _float_text(value: float) -> str:
    """A float as YAML 1.1 reads it (a dot in the mantissa: ``1.0e-05``)."""
    text = repr(value)
    if value != value or text in ("inf", "-inf"):
        return "'" + text + "'"
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + (e + exponent if e else "")


def _is_pairs(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(item, tuple) and len(item) == 2 for item in value))


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list, tuple))


def _entries(value: Any) -> list[tuple[Any, Any]] | None:
    """The ``(key, value)`` entries of a mapping, or None if ``value`` is none."""
    if isinstance(value, dict):
        return sorted(value.items(), key=lambda kv: str(kv[0]))
    if _is_pairs(value):
        return list(value)
    return None


def _inline(value: Any) -> str | None:
    """The text of a value that fits after ``key: `` or ``- `` (None: it needs lines)."""
    if _is_scalar(value):
        return quote_scalar(value)
    if isinstance(value, tuple) and all(_is_scalar(v) for v in value):
        return "[" + ", ".join(quote_scalar(v, flow=True) for v in value) + "]"
    if not value:
        return "{}" if isinstance(value, dict) else "[]"
    return None


def _block(value: Any, level: int) -> list[str]:
    """The lines of a non-empty mapping or sequence, indented ``level`` steps."""
    pad = _INDENT * level
    lines: list[str] = []
    entries = _entries(value)
    if entries is not None:
        for key, item in entries:
            head = f"{pad}{quote_scalar(key)}:"
            text = _inline(item)
            if text is not None:
                lines.append(f"{head} {text}")
            else:
                lines.append(head)
                lines.extend(_block(item, level + 1))
        return lines
    for item in value:
        text = _inline(item)
        if text is not None:
            lines.append(f"{pad}- {text}")
            continue
        sub = _block(item, level + 1)
        sub[0] = f"{pad}- {sub[0][len(pad) + len(_INDENT):]}"
        lines.extend(sub)
    return lines


def format_info(data: Any) -> str:
    """The YAML text of ``data`` (see the module doc), without a final newline."""
    text = _inline(data)
    if text is not None:
        return text
    return "\n".join(_block(data, 0))


def print_info(data: Any) -> None:
    """Print :func:`format_info` of ``data`` on stdout."""
    from ganeti.cli.output import to_stdout
    to_stdout(format_info(data))


def params_info(custom: dict[str, Any] | None, actual: dict[str, Any] | None) -> dict[str, Any]:
    """Parameters for an info page: the own value, or ``default (VALUE)`` when inherited.

    Own values keep their type (a boolean reads back as a boolean); nested
    dicts (per-template disk parameters) are handled level by level.
    """
    custom = custom or {}
    result: dict[str, Any] = {}
    for key, value in (actual or {}).items():
        if isinstance(value, dict) and value:
            result[key] = params_info(custom.get(key) or {}, value)
        elif key in custom:
            result[key] = param_value(custom[key])
        else:
            result[key] = f"default ({param_value(value)})"
    return result


def grouped_params_info(params: dict[str, Any] | None) -> dict[str, Any]:
    """A dict of parameter dicts (hypervisor -> params...) ready for :func:`format_info`."""
    result: dict[str, Any] = {}
    for key, value in (params or {}).items():
        result[key] = grouped_params_info(value) if isinstance(value, dict) else param_value(value)
    return result


def param_value(value: Any) -> Any:
    """A parameter value for an info page: lists become comma separated text."""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return value


def nice_sort(names: Any) -> list[str]:
    """Names in natural order (``node2`` before ``node10``), as Ganeti lists them."""
    from itertools import groupby

    def key(name: Any) -> list[tuple[int, int, str]]:
        return [(0, int(part), "") if digits else (1, 0, part)
                for digits, chars in groupby(str(name), key=str.isdigit)
                for part in ["".join(chars)]]
    return sorted(names, key=key)
