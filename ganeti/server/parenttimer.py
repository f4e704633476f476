"""The node daemon parent's once-a-second looks that may fork one worker.

Master autopromotion (:mod:`ganeti.server.autopromote`) and the
self-fence (:mod:`ganeti.server.selffence`) run from the accepting
parent's loop, without a thread: each is a :class:`ParentTimer` whose
``tick`` looks at most every :data:`LOOK_EVERY` seconds and keeps the pid
of the one worker it forked until that worker is reaped.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ganeti.http import spare

__all__ = ["ParentTimer", "LOOK_EVERY"]

#: seconds between two looks (small file reads)
LOOK_EVERY = 1.0


class ParentTimer:
    """When to look next, and the worker forked last (None once reaped)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.worker: int | None = None
        self._next_look = float("-inf")

    def deadline(self) -> float:
        """When the parent's loop should call ``tick`` next."""
        return self._next_look

    def look(self) -> float | None:
        """The time now when a look is due (the next one scheduled, a finished
        worker reaped), else None."""
        now = self.clock()
        if now < self._next_look:
            return None
        self._next_look = now + LOOK_EVERY
        if self.worker is not None and spare.reaped(self.worker):
            self.worker = None
        return now
