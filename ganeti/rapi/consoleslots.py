"""The cap on open consoles of the broker (pure; doc/rapi.md, "Consoles").

An open console holds a thread of ``ganeti-rapi`` and a request slot of
the primary node's daemon for as long as it lasts (up to 12 hours), so the
broker bounds how many are open at once: at most :data:`PER_INSTANCE` for
one instance (serial and VNC counted together) and :data:`TOTAL` in all.
:meth:`ConsoleSlots.check` tells early, when a token is asked for, that
none is free; :meth:`ConsoleSlots.take` holds one for the console's life
and gives the callable that frees it.  Both raise
:class:`errors.HttpError` 503 with a message saying which bound was met.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ganeti import errors

__all__ = ["PER_INSTANCE", "TOTAL", "ConsoleSlots"]

#: consoles open at once for one instance
PER_INSTANCE = 4
#: consoles open at once through one broker
TOTAL = 64


class ConsoleSlots:
    """The open consoles of one broker, counted per instance (thread safe)."""

    def __init__(self, *, per_instance: int = PER_INSTANCE, total: int = TOTAL) -> None:
        self.per_instance = per_instance
        self.total = total
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}

    def __len__(self) -> int:
        with self._lock:
            return sum(self._open.values())

    def open_for(self, instance: str) -> int:
        """How many consoles of ``instance`` are open."""
        with self._lock:
            return self._open.get(instance, 0)

    def _refusal(self, instance: str) -> errors.HttpError | None:
        if self._open.get(instance, 0) >= self.per_instance:
            return errors.HttpError(
                f"Too many open consoles of {instance[:80]}: {self.per_instance} at most;"
                " close one and try again", 503)
        if sum(self._open.values()) >= self.total:
            return errors.HttpError(
                f"Too many open consoles on this server: {self.total} at most;"
                " try again later", 503)
        return None

    def check(self, instance: str) -> None:
        """Raise :class:`errors.HttpError` 503 when no console of ``instance``
        could be opened now (nothing is held)."""
        with self._lock:
            refusal = self._refusal(instance)
        if refusal is not None:
            raise refusal

    def take(self, instance: str) -> Callable[[], None]:
        """Hold one console slot of ``instance``: the callable frees it (once;
        later calls do nothing).  Raises :class:`errors.HttpError` 503 when
        either bound is met."""
        with self._lock:
            refusal = self._refusal(instance)
            if refusal is not None:
                raise refusal
            self._open[instance] = self._open.get(instance, 0) + 1
        freed = threading.Event()

        def free() -> None:
            with self._lock:
                if freed.is_set():
                    return
                freed.set()
                left = self._open.get(instance, 0) - 1
                if left > 0:
                    self._open[instance] = left
                else:
                    self._open.pop(instance, None)
        return free
