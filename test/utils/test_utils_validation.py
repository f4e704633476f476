"""Tests for ganeti.utils.validation."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.utils import validation

# "node1\n": a trailing newline must not slip past the anchors.

BAD_NAMES = ["node1\n", "../x", "a/b", "", "x" * 254, "a" * 64 + ".example.com", "bad\nname",
             "tab\there", "nul\x00", ".", "..", "-lead.example.com", "trail-.example.com",
             "a..b", "space name", "a.b.", None, 42]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_hostname_validator_refuses(name: object) -> None:
    assert not validation.is_valid_hostname(name)
    with pytest.raises(errors.OpPrereqError) as info:
        validation.check_hostname(name)
    assert info.value.ecode == errors.ECODE_INVAL


@pytest.mark.parametrize("name", ["node1", "node1.example.com", "inst-01.sub.example.org",
                                  "A.EXAMPLE.COM", "x" * 63 + ".example.com", "127-0-1-1.local"])
def test_hostname_validator_accepts(name: str) -> None:
    assert validation.is_valid_hostname(name)
    assert validation.check_hostname(name) == name.lower()


@pytest.mark.parametrize("name", ["../x", "a/b", "", "a.b", "x y",
                                  "a\n"], ids=repr)
def test_script_name_refuses(name: str) -> None:
    assert not validation.is_valid_script_name(name)
    with pytest.raises(errors.OpPrereqError):
        validation.check_script_name(name)


def test_script_name_accepts() -> None:
    assert validation.check_script_name("00-check_disk-1") == "00-check_disk-1"


def test_tags() -> None:
    assert validation.check_tag("owner:jack") == "owner:jack"
    for bad in ["", "a b", "x" * 129, 5]:
        with pytest.raises(errors.TagError):
            validation.check_tag(bad)
