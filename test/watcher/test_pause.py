"""The watcher pause file (ganeti.watcher.pause)."""

from __future__ import annotations

import os

import pytest

from ganeti import errors
from ganeti.watcher import pause as watcherpause


def test_round_trip_and_expiry(tmp_path) -> None:
    path = str(tmp_path / "watcher.pause")
    assert watcherpause.read_pause(path, 100.0) is None            # no file
    watcherpause.write_pause(path, 200.7)
    with open(path) as fh:
        assert fh.read() == "200\n"                                 # whole seconds, as Ganeti
    assert watcherpause.read_pause(path, 100.0) == 200
    assert watcherpause.read_pause(path, 200.0) is None            # expired
    watcherpause.write_pause(path, None)
    assert not os.path.exists(path)
    watcherpause.write_pause(path, None)                           # idempotent


@pytest.mark.parametrize("content", [b"", b"soon\n", b"nan\n", b"inf\n"])
def test_garbage_means_not_paused(tmp_path, content: bytes) -> None:
    path = tmp_path / "watcher.pause"
    path.write_bytes(content)
    assert watcherpause.read_pause(str(path), 0.0) is None


@pytest.mark.parametrize("value", ["1h", True, float("nan"), float("inf"), [1]])
def test_check_until_refuses_non_timestamps(value) -> None:
    with pytest.raises(errors.ParameterError, match="watcher pause"):
        watcherpause.check_until(value)
    assert watcherpause.check_until(None) is None
    assert watcherpause.check_until(5) == 5.0
