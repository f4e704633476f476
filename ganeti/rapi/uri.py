"""Request paths and ids as RAPI reads them (pure).

A path is split at ``/`` *before* each segment is percent-decoded, so an
encoded slash (``%2F``) is part of a segment, never a separator: ``PUT
/2/instances/web%2Fstartup`` names an instance ``web/startup`` (which
cannot exist: 404), not the ``startup`` resource of ``web``.  Numeric ids are
ASCII digits of bounded length (``"²".isdigit()`` holds in Python, and
``int()`` of 5,000 digits raises).  See doc/rapi.md, "Paths and ids".
"""

from __future__ import annotations

import urllib.parse

from ganeti import errors

__all__ = ["split_path", "template_segments", "match_segments", "parse_id", "MAX_ID_DIGITS",
           "MAX_SHOWN", "shown"]

#: the most digits an id may have (every id fits a signed 64-bit word)
MAX_ID_DIGITS = 19
_ID_MAX = 2 ** 63 - 1
#: how much of a bad value an error message shows
MAX_SHOWN = 40


def shown(text: str) -> str:
    """``text`` for an error message: at most :data:`MAX_SHOWN` characters, quoted."""
    if len(text) > MAX_SHOWN:
        return repr(text[:MAX_SHOWN]) + f"... ({len(text)} characters)"
    return repr(text)


def split_path(raw: str) -> list[str]:
    """The segments of a raw (still percent-encoded) request path, each decoded.

    ``/`` gives no segment; ``/2/instances/a%2Fb`` gives ``["2",
    "instances", "a/b"]``.  Raises :class:`errors.HttpError` 400 for a
    path not starting with ``/`` or a segment that does not decode to
    UTF-8, and 404 for a segment holding a control character.
    """
    if not raw.startswith("/"):
        raise errors.HttpError(f"Invalid path {shown(raw)}: it must start with '/'", 400)
    if raw == "/":
        return []
    segments = []
    for part in raw[1:].split("/"):
        try:
            segment = urllib.parse.unquote(part, errors="strict")
        except UnicodeDecodeError as exc:
            raise errors.HttpError(f"Invalid path (not UTF-8): {exc}", 400) from exc
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in segment):
            raise errors.HttpError(f"Resource not found: path segment {shown(segment)}"
                                   " holds a control character", 404)
        segments.append(segment)
    return segments


def template_segments(template: str) -> tuple[str, ...]:
    """The segments of a row's path template (``/2/instances/{instance}``)."""
    return tuple(template.strip("/").split("/")) if template != "/" else ()


def match_segments(template: tuple[str, ...], segments: list[str]) -> dict[str, str] | None:
    """The path arguments when ``segments`` fit ``template``, else None.

    A ``{name}`` segment takes any non-empty decoded segment without a
    slash (no name or id holds one: ``a%2Fb`` names nothing, so its path
    matches no row and is a 404); any other template segment must equal
    the decoded one.
    """
    if len(template) != len(segments):
        return None
    args: dict[str, str] = {}
    for want, got in zip(template, segments):
        if want.startswith("{") and want.endswith("}"):
            if not got or "/" in got:
                return None
            args[want[1:-1]] = got
        elif want != got:
            return None
    return args


def parse_id(text: str, what: str) -> int:
    """A numeric id from a path or parameter: ASCII digits, at most :data:`MAX_ID_DIGITS`.

    Raises :class:`errors.HttpError` 400 for anything else (the message
    shows at most :data:`MAX_SHOWN` characters of it) and 404 for a number
    no id can have (above a signed 64-bit word).
    """
    if not (text and text.isascii() and text.isdigit()):
        raise errors.HttpError(f"Invalid {what} {shown(text)}: expected a number of ASCII"
                               " digits", 400)
    digits = text.lstrip("0") or "0"         # int() refuses 4,300 digits and more
    if len(digits) > MAX_ID_DIGITS or int(digits) > _ID_MAX:
        raise errors.HttpError(f"{what[:1].upper()}{what[1:]} {shown(text)} not found:"
                               " no such number exists", 404)
    return int(digits)
