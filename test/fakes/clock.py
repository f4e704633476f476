"""One fake clock for every test that steps time instead of sleeping.

``FakeClock()`` is a callable returning the current fake time (pass it
wherever code takes ``clock=time.monotonic`` or ``clock=time.time``).
Time moves only when a test says so: ``advance(seconds)``, or ``sleep``
(which records the requested delay, for code that takes ``sleep=``).
``tick`` makes every reading advance by that much first, for code that
must see time pass between two readings.

``wait`` is a timed ``Condition.wait`` in fake time, for code that takes
``wait=`` (the locks): the waiting thread sleeps until its condition is
notified or the clock is advanced (a wake-up the code must handle, as
after any ``Condition.wait``: it re-reads the clock).  A test first lets
the waiters get there (``wait_for_waiters(n)``), then advances.
"""

from __future__ import annotations

import threading
import time


class _Sleeper:
    """One thread in :meth:`FakeClock.wait`: its condition and fake deadline."""

    __slots__ = ("cond", "deadline")

    def __init__(self, cond: threading.Condition, deadline: float) -> None:
        self.cond = cond
        self.deadline = deadline


class FakeClock:
    """A manually driven clock: ``clock()`` reads it, ``advance`` moves it."""

    #: Real seconds a ``wait`` gives up after (a test that forgot to
    #: advance fails instead of hanging).
    REAL_BOUND = 30.0

    def __init__(self, now: float = 1000.0, *, tick: float = 0.0) -> None:
        self.now = now
        self.tick = tick
        self.sleeps: list[float] = []
        self._sleepers: list[_Sleeper] = []
        self._sleepers_changed = threading.Condition()

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def time(self) -> float:
        """The same reading as calling the clock (for ``time``-like objects)."""
        return self()

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``.

        Every thread in :meth:`wait` is woken and has left it when this
        returns: it has re-read the clock and either finished waiting or
        is about to call :meth:`wait` again (:meth:`wait_for_waiters`).
        """
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._sleepers_changed:
            self.now += seconds
            woken = list(self._sleepers)
        # Not under _sleepers_changed: a waiter holds its cond's lock while
        # it registers (lock order: cond, then _sleepers_changed).
        for sleeper in woken:
            with sleeper.cond:
                sleeper.cond.notify_all()
        deadline = time.monotonic() + self.REAL_BOUND
        with self._sleepers_changed:
            while any(sleeper in self._sleepers for sleeper in woken):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("a woken waiter did not leave FakeClock.wait")
                self._sleepers_changed.wait(left)

    def sleep(self, seconds: float) -> None:
        """Record a sleep of ``seconds`` and advance by it (no real waiting)."""
        self.sleeps.append(seconds)
        self.advance(max(seconds, 0.0))

    def wait(self, cond: threading.Condition, timeout: float) -> bool:
        """``cond.wait(timeout)`` with ``timeout`` in fake seconds.

        Called with ``cond``'s lock held.  Returns True when ``cond`` was
        notified (by its owner, or by :meth:`advance`), False after
        :attr:`REAL_BOUND` real seconds.  ``timeout`` only shows in
        :attr:`deadlines`: the caller re-reads the clock after waking.
        """
        sleeper = _Sleeper(cond, self.now + timeout)
        with self._sleepers_changed:
            self._sleepers.append(sleeper)
            self._sleepers_changed.notify_all()
        try:
            return cond.wait(self.REAL_BOUND)
        finally:
            with self._sleepers_changed:
                self._sleepers.remove(sleeper)
                self._sleepers_changed.notify_all()

    @property
    def deadlines(self) -> list[float]:
        """The fake deadlines of the threads in :meth:`wait` now, sorted."""
        with self._sleepers_changed:
            return sorted(s.deadline for s in self._sleepers)

    def wait_for_waiters(self, count: int, timeout: float = 10.0) -> None:
        """Block until ``count`` threads are in :meth:`wait` (AssertionError after
        ``timeout`` real seconds)."""
        deadline = time.monotonic() + timeout
        with self._sleepers_changed:
            while len(self._sleepers) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{len(self._sleepers)} of {count} waiters reached the fake clock")
                self._sleepers_changed.wait(left)
