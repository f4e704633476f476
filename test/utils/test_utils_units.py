"""Tests for ganeti.utils.units."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganeti import errors
from ganeti.utils import units


@pytest.mark.parametrize("text,mib", [("128", 128), ("128M", 128), ("128m", 128), ("1G", 1024),
                                      ("1.5G", 1536), ("2T", 2 * 1024 * 1024), (" 64 MiB ", 64),
                                      (512, 512), ("0.5", 4), ("1.1M", 4), ("5.5", 8)])
def test_parse_unit(text: str | int, mib: int) -> None:
    assert units.parse_unit(text) == mib


@pytest.mark.parametrize("text", ["", "abc", "-1", "12X", "1.2.3", True], ids=repr)
def test_parse_unit_refuses(text: object) -> None:
    with pytest.raises(errors.UnitParseError):
        units.parse_unit(text)  # type: ignore[arg-type]


@pytest.mark.parametrize("mib,units_,text", [(128, "h", "128M"), (1024, "h", "1.0G"),
                                              (1536, "h", "1.5G"), (2 * 1024 * 1024, "h", "2.0T"),
                                              (2048, "m", "2048"), (2048, "g", "2.0")])
def test_format_unit(mib: int, units_: str, text: str) -> None:
    assert units.format_unit(mib, units_) == text


@given(st.integers(min_value=0, max_value=2**40))
def test_parse_format_round_trip_in_mib(mib: int) -> None:
    assert units.parse_unit(units.format_unit(mib, "m")) == mib
    assert units.parse_unit(f"{mib}M") == mib


@given(st.integers(min_value=1, max_value=2**30))
def test_bigger_units_scale(n: int) -> None:
    assert units.parse_unit(f"{n}G") == n * 1024
