"""The lock monitor: one place that lists every lock, its owners and waiters.

Locks (and other "lock-like" things such as the job queue's dependency
waits) register themselves as *providers*.  A provider is any object with a
``get_lock_info()`` method returning a list of dicts::

    {"name": "instance/inst1.example.com",
     "mode": "exclusive" | "shared" | None,
     "owner": ["thread name", ...],
     "pending": [["exclusive", ["thread name", ...]], ...]}

:meth:`LockMonitor.query` merges what every provider reports, sorted by
name.  This feeds ``gnt-debug locks`` and the ``lock`` query resource.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Protocol

from ganeti import errors

__all__ = ["LockInfo", "LockInfoProvider", "LockMonitor", "owners_by_lock"]

logger = logging.getLogger(__name__)

LockInfo = dict[str, Any]


class LockInfoProvider(Protocol):
    """Anything that can describe its locks to the monitor."""

    def get_lock_info(self) -> list[LockInfo]:
        """Return one dict per lock (see the module docstring)."""
        ...


class LockMonitor:
    """Registry of lock-information providers.

    Providers are kept by weak reference when ``weak`` is true (the default),
    so a lock that goes away disappears from the monitor; objects that cannot
    be weakly referenced are kept strongly.  Thread-safe.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._weak: weakref.WeakSet[Any] = weakref.WeakSet()
        self._strong: list[Any] = []

    def register(self, provider: LockInfoProvider, weak: bool = True) -> None:
        """Add ``provider``; registering the same object twice is harmless."""
        if not callable(getattr(provider, "get_lock_info", None)):
            raise errors.ProgrammerError(f"{provider!r} has no get_lock_info()")
        with self._mutex:
            if weak:
                try:
                    self._weak.add(provider)
                    return
                except TypeError:
                    pass
            if not any(p is provider for p in self._strong):
                self._strong.append(provider)

    def unregister(self, provider: LockInfoProvider) -> None:
        """Forget ``provider`` (no error if it was never registered)."""
        with self._mutex:
            self._weak.discard(provider)
            self._strong = [p for p in self._strong if p is not provider]

    def query(self) -> list[LockInfo]:
        """Return the lock information of every provider, sorted by name.

        Providers are called without the monitor's own mutex held, so a
        provider may take its locks' internal mutexes freely.
        """
        with self._mutex:
            providers = list(self._weak) + list(self._strong)
        result: list[LockInfo] = []
        for provider in providers:
            result.extend(provider.get_lock_info())
        result.sort(key=lambda item: item["name"])
        return result


def owners_by_lock(infos: list[LockInfo]) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(lock name, [(owner, mode), ...])`` for each entry of :meth:`LockMonitor.query`
    that has owners, in its order.

    Every owner holds the lock in the entry's mode: shared owners share it,
    an exclusive owner is alone (a whole-set owner counts on every member).
    """
    return [(info["name"], [(owner, info["mode"]) for owner in info["owner"]])
            for info in infos if info["owner"]]
