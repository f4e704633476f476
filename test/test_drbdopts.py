"""ganeti.drbdopts: the operator's extra drbdsetup options (doc/storage.md)."""

from __future__ import annotations

import pytest

from ganeti import drbdopts


def test_options_are_split_on_white_space_and_kept_in_order() -> None:
    assert drbdopts.parse(" --ping-int=5\t--ping-timeout=100  --discard-my-data ",
                          drbdopts.NET_OWNED) == ["--ping-int=5", "--ping-timeout=100",
                                                  "--discard-my-data"]
    assert drbdopts.parse("", drbdopts.NET_OWNED) == []
    assert drbdopts.names(["--ping-int=5", "--discard-my-data"]) == {"ping-int",
                                                                     "discard-my-data"}


@pytest.mark.parametrize("text, why", [
    ("ping-int=5", "not a drbdsetup option"),
    ("--ping-int=5;reboot", "not a drbdsetup option"),
    ("--ping-int=$(id)", "not a drbdsetup option"),
    ("-p 5", "not a drbdsetup option"),
    ("--Ping=5", "not a drbdsetup option"),
    ("--shared-secret=x", "set by Ganeti itself"),
    ("--ping-int=5 --allow-two-primaries", "set by Ganeti itself"),
])
def test_words_that_are_no_options_or_change_ganetis_own_are_refused(text: str,
                                                                    why: str) -> None:
    assert why in (drbdopts.problem(text, drbdopts.NET_OWNED) or "")


def test_the_disk_options_have_their_own_reserved_names() -> None:
    assert drbdopts.problem("--resync-rate=1", drbdopts.DISK_OWNED)
    assert drbdopts.problem("--resync-rate=1", drbdopts.NET_OWNED) is None
    assert drbdopts.problem("--al-extents=3389 --disk-barrier=no", drbdopts.DISK_OWNED) is None
