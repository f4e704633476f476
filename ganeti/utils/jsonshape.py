"""How deep and how large a JSON text is, measured before it is decoded (pure).

Decoding JSON costs far more memory than the text: ``[{},{},...]`` takes
about 3 bytes per element as text and some 60 as Python objects.  A server
that decodes what any client sends (ganeti-rapi's anonymous reads) first
checks the text's shape with :func:`check_shape`: the nesting depth and an
upper bound of the number of values, both in C-speed passes over the bytes
(strings are blanked first, so brackets and commas inside them do not
count).  The text is not validated here; the decoder does that after.
"""

from __future__ import annotations

import re

from ganeti import errors

__all__ = ["check_shape", "count_values", "max_depth"]

# a JSON string, escapes included; an unterminated one is left as it is
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def _blank_strings(text: bytes) -> bytes:
    return _STRING.sub(b'""', text)


def count_values(text: bytes) -> int:
    """An upper bound of the number of values in ``text`` (strings blanked first):
    one per comma, per container and one for the top level."""
    return _count(_blank_strings(text))


def _count(bare: bytes) -> int:
    return bare.count(b",") + bare.count(b"[") + bare.count(b"{") + 1


def max_depth(text: bytes, limit: int) -> int:
    """The deepest nesting of ``[``/``{`` in ``text``, counted up to ``limit + 1``
    (the scan stops there)."""
    return _depth(_blank_strings(text), limit)


def _depth(bare: bytes, limit: int) -> int:
    depth = deepest = 0
    for m in _BRACKETS.finditer(bare):
        if m.group() in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


def check_shape(text: bytes, *, depth: int, values: int) -> None:
    """Refuse ``text`` nested deeper than ``depth`` or with more than ``values`` values.

    The value count and the brackets' balance are checked first, so the
    depth scan (a Python loop over the brackets) runs at most ``2 * values``
    steps.  Raises
    :class:`errors.SerializationError` naming the limit.
    """
    # every string is a key or a value: at most two of them per value, four quotes
    # (escaped quotes count too); this bounds the blanking pass's matches
    if text.count(b'"') > 4 * values + 4:
        raise errors.SerializationError(f"JSON document too large: more than {2 * values}"
                                        " strings")
    bare = _blank_strings(text)
    count = _count(bare)
    if count > values:
        raise errors.SerializationError(f"JSON document too large: about {count} values,"
                                        f" at most {values} are accepted")
    if bare.count(b"]") + bare.count(b"}") > bare.count(b"[") + bare.count(b"{"):
        raise errors.SerializationError("Invalid JSON: more closing than opening brackets")
    found = _depth(bare, depth)
    if found > depth:
        raise errors.SerializationError(f"JSON document nested too deep: more than {depth}"
                                        " levels")
