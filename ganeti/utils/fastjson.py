"""JSON for the CLI start-up path, without importing :mod:`json`.

``import json`` pulls in :mod:`re` (and with it :mod:`enum`), which costs
about 13 ms on this project's machines: a quarter of a whole ``gnt-*``
command.  The C accelerator module ``_json`` that :mod:`json` itself uses
has everything needed; this module drives it directly and falls back to
:mod:`json` where ``_json`` is missing (other Python implementations).

Only the LUXI client uses it; everything else goes through
:mod:`ganeti.serializer`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["dumps", "loads"]

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _default(obj: Any) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


class _ScanContext:
    """The attributes ``_json.make_scanner`` reads from a decoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_CONSTANTS.__getitem__)
    memo: dict[str, str] = {}


_SCAN = _json.make_scanner(_ScanContext()) if _json is not None else None


def dumps(obj: Any) -> str:
    """Compact JSON text (ASCII, no spaces) like ``json.dumps(obj, separators=(",", ":"))``.

    Raises :class:`TypeError` for values JSON cannot represent and
    :class:`ValueError` for circular structures.
    """
    if _json is None:  # pragma: no cover
        import json
        return json.dumps(obj, separators=(",", ":"))
    # a fresh encoder per call: its markers dict detects circular structures
    encode = _json.make_encoder({}, _default, _json.encode_basestring_ascii, None,
                                ":", ",", False, False, True)
    return "".join(encode(obj, 0))


def _skip(text: str, idx: int) -> int:
    end = len(text)
    while idx < end and text[idx] in _WHITESPACE:
        idx += 1
    return idx


def loads(text: str | bytes) -> Any:
    """Decode one JSON document; raises :class:`ValueError` on bad input."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if _SCAN is None:  # pragma: no cover
        import json
        return json.loads(text)
    idx = _skip(text, 0)
    try:
        obj, end = _SCAN(text, idx)
    except StopIteration as exc:
        raise ValueError(f"Expecting value at character {exc.value}") from None
    end = _skip(text, end)
    if end != len(text):
        raise ValueError(f"Extra data at character {end}")
    return obj
