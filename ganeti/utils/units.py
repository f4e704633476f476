"""Sizes: parse "10G"/"512M" into MiB, and format MiB for humans."""

from __future__ import annotations

import functools

from ganeti import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

__all__ = ["parse_unit", "format_unit"]


@functools.lru_cache(maxsize=1)
def _unit_re() -> re.Pattern[str]:
    # compiled on first use: list commands import this module only to format
    # sizes, and importing re costs a CLI process ~10 ms
    import re
    return re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")

_FACTORS = {"": 1, "m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024,
            "t": 1024 * 1024, "tb": 1024 * 1024, "tib": 1024 * 1024}


def parse_unit(text: str | int | float) -> int:
    """Parse a size into MiB; plain numbers are MiB, M/G/T suffixes allowed.

    Fractions are rounded up to a multiple of 4 MiB as Ganeti does.
    Raises :class:`errors.UnitParseError`.
    """
    if isinstance(text, bool):
        raise errors.UnitParseError(f"Invalid size {text!r}")
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    else:
        match = _unit_re().match(text)
        if not match:
            raise errors.UnitParseError(f"Invalid size {text!r}")
        value, unit = float(match.group(1)), match.group(2).lower()
    if unit not in _FACTORS:
        raise errors.UnitParseError(f"Unknown unit {unit!r} in {text!r}")
    mib = value * _FACTORS[unit]
    if mib != mib or mib in (float("inf"), float("-inf")):
        raise errors.UnitParseError(f"Invalid size {text!r}")
    result = int(mib)
    if mib != result:
        result = int(mib) + 1
        if result % 4:
            result += 4 - result % 4
    return result


def format_unit(mib: int | float, units: str = "h") -> str:
    """Format MiB: units 'h' (human: M/G/T), 'm', 'g' or 't'."""
    if units == "m":
        return f"{int(mib)}"
    if units == "g":
        return f"{mib / 1024:.1f}"
    if units == "t":
        return f"{mib / 1024 / 1024:.1f}"
    if mib < 1024:
        return f"{int(mib)}M"
    if mib < 1024 * 1024:
        return f"{mib / 1024:.1f}G"
    return f"{mib / 1024 / 1024:.1f}T"
