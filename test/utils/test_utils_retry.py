"""Tests for ganeti.utils.retry with a fake clock (no real sleeping)."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.utils.retry import RetryAgain, retry
from fakes.clock import FakeClock


def test_retries_until_success_with_growing_delays() -> None:
    clock = FakeClock(100.0)
    calls = []

    def fn() -> str:
        calls.append(clock.now)
        if len(calls) < 4:
            raise RetryAgain("not yet")
        return "done"

    assert retry(fn, timeout=10, initial_delay=0.1, factor=2, max_delay=0.3,
                 clock=clock.time, sleep=clock.sleep) == "done"
    assert len(calls) == 4
    assert clock.sleeps == pytest.approx([0.1, 0.2, 0.3])


def test_gives_up_after_timeout() -> None:
    clock = FakeClock(100.0)

    def fn() -> None:
        raise RetryAgain("still busy")

    with pytest.raises(errors.RetryTimeout, match="still busy") as info:
        retry(fn, timeout=5, initial_delay=1, factor=1, clock=clock.time, sleep=clock.sleep)
    assert isinstance(info.value.__cause__, RetryAgain)
    assert clock.now == pytest.approx(105)
    assert len(clock.sleeps) == 5


def test_other_exceptions_propagate_at_once() -> None:
    clock = FakeClock(100.0)

    def fn() -> None:
        raise ValueError("bug")

    with pytest.raises(ValueError):
        retry(fn, timeout=5, clock=clock.time, sleep=clock.sleep)
    assert clock.sleeps == []
