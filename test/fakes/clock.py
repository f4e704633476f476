"""One fake clock for every test that steps time instead of sleeping.

``FakeClock()`` is a callable returning the current fake time (pass it
wherever code takes ``clock=time.monotonic`` or ``clock=time.time``).
Time moves only when a test says so: ``advance(seconds)``, or ``sleep``
(which records the requested delay, for code that takes ``sleep=``).
``tick`` makes every reading advance by that much first, for code that
must see time pass between two readings.
"""

from __future__ import annotations


class FakeClock:
    """A manually driven clock: ``clock()`` reads it, ``advance`` moves it."""

    def __init__(self, now: float = 1000.0, *, tick: float = 0.0) -> None:
        self.now = now
        self.tick = tick
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def time(self) -> float:
        """The same reading as calling the clock (for ``time``-like objects)."""
        return self()

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        """Record a sleep of ``seconds`` and advance by it (no real waiting)."""
        self.sleeps.append(seconds)
        self.advance(max(seconds, 0.0))
