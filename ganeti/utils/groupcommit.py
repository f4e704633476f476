"""Group commit: many changes, one durable write.

Producers hand numbered snapshots (``serial``, a payload: bytes, or an
object the writer serialises itself) to
:meth:`GroupCommitter.queue` -- in increasing serial order, e.g. while
holding the lock that protects the data -- and then, *without* that lock,
call :meth:`GroupCommitter.wait` for their serial.  The first waiter that
finds no write in progress becomes the *leader*: it writes the newest
queued snapshot (which may carry the serials of many producers), runs the
``after_write`` callback, marks the serial durable and wakes the others.
So one write (and fsync) serves every change that arrived meanwhile, and
writes and ``after_write`` calls happen one at a time, in serial order.
A payload that is expensive to turn into bytes is best queued as is and
encoded in ``write``: only the newest of those queued meanwhile is ever
encoded (the config writer queues its published trees that way).

A failing write makes the committer *broken*: the waiters whose serial it
carried, and every later waiter, get the exception (the caller must stop
producing; see :attr:`GroupCommitter.broken`).  An exception from
``after_write`` is raised in the waiters whose serials that write carried
(the data is durable then); the committer stays usable.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Generic, TypeVar

from ganeti import errors

__all__ = ["GroupCommitter"]

logger = logging.getLogger(__name__)

_KEPT_HOOK_ERRORS = 16

#: what a snapshot is: handed from :meth:`GroupCommitter.queue` to ``write`` unchanged
Payload = TypeVar("Payload")


class GroupCommitter(Generic[Payload]):
    """Leader-based group commit of serial-numbered snapshots; see the module docstring."""

    def __init__(self, write: Callable[[int, Payload], None], *,
                 after_write: Callable[[int, Payload], None] | None = None,
                 durable_serial: int = 0) -> None:
        self._write = write
        self._after_write = after_write
        self._cond = threading.Condition(threading.Lock())
        self._queued: tuple[int, Payload] | None = None
        self._durable = durable_serial
        self._last_queued = durable_serial
        self._writing = False
        self._broken: BaseException | None = None
        self._hook_errors: list[tuple[int, int, BaseException]] = []
        self.writes = 0

    @property
    def broken(self) -> BaseException | None:
        """The exception of the failed write, or None while usable."""
        return self._broken

    def durable_serial(self) -> int:
        """The newest serial known to be written."""
        with self._cond:
            return self._durable

    def queue(self, serial: int, data: Payload) -> None:
        """Offer the snapshot ``data`` of ``serial`` (newer than any queued before)."""
        with self._cond:
            if serial <= self._last_queued:
                raise errors.ProgrammerError(f"serial {serial} queued after {self._last_queued}")
            self._last_queued = serial
            self._queued = (serial, data)

    def wait(self, serial: int) -> None:
        """Return once a write including ``serial`` is durable; may lead that write.

        Raises the write's exception (the committer is broken then) or the
        ``after_write`` exception of the write that carried ``serial``.
        """
        while True:
            with self._cond:
                while True:
                    for low, high, exc in self._hook_errors:
                        if low < serial <= high:
                            raise exc
                    if self._durable >= serial:
                        return
                    if self._broken is not None:
                        raise self._broken
                    if not self._writing and self._queued is not None:
                        break
                    if not self._writing:
                        raise errors.ProgrammerError(f"serial {serial} was never queued")
                    self._cond.wait()
                new_serial, data = self._queued
                self._queued = None
                self._writing = True
                previous = self._durable
            self._lead(previous, new_serial, data)

    def _lead(self, previous: int, serial: int, data: Payload) -> None:
        try:
            self._write(serial, data)
        except BaseException as exc:
            with self._cond:
                self._broken = exc
                self._writing = False
                self._cond.notify_all()
            return
        hook_error: BaseException | None = None
        if self._after_write is not None:
            try:
                self._after_write(serial, data)
            except Exception as exc:  # raised in the waiters this write carried
                logger.exception("after_write for serial %s failed", serial)
                hook_error = exc
        with self._cond:
            self.writes += 1
            if hook_error is not None:
                kept = self._hook_errors[-(_KEPT_HOOK_ERRORS - 1):]
                self._hook_errors = [*kept, (previous, serial, hook_error)]
            self._durable = serial
            self._writing = False
            self._cond.notify_all()
