"""Retry with exponential backoff; time is injectable for tests."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from ganeti import errors

__all__ = ["RetryAgain", "retry"]

T = TypeVar("T")


class RetryAgain(Exception):
    """Raised inside the retried function to ask for another attempt."""


def retry(fn: Callable[[], T], *, timeout: float, initial_delay: float = 0.01,
          factor: float = 1.5, max_delay: float = 1.0,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> T:
    """Call ``fn`` until it returns without raising :class:`RetryAgain`.

    Delays grow by ``factor`` up to ``max_delay``.  Raises
    :class:`errors.RetryTimeout` after ``timeout`` seconds (the last
    RetryAgain is chained as its cause).
    """
    deadline = clock() + timeout
    delay = initial_delay
    while True:
        try:
            return fn()
        except RetryAgain as exc:
            now = clock()
            if now >= deadline:
                raise errors.RetryTimeout(f"Gave up after {timeout}s: {exc}") from exc
            sleep(min(delay, deadline - now))
            delay = min(delay * factor, max_delay)
