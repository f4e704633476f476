"""Fair multi-mode locks: the shared/exclusive :class:`SharedLock`.

The machinery is one class, :class:`ModeLock`, parameterised by a table of
compatible modes.  :class:`SharedLock` uses the two modes ``shared`` and
``exclusive``; the lock set uses four (intent-shared, intent-exclusive,
shared, exclusive) for its set-level lock, see :mod:`ganeti.locking.lockset`.

Rules common to every mode lock:

* The owner is the calling thread.  A thread holds a lock in at most one
  mode; acquiring again raises :class:`errors.LockError` at once.
* Waiters queue by priority (lower number first, ``-20..19``), FIFO inside
  a priority.  A new request is granted at once only if it is compatible
  with the current holders *and* nobody of equal or higher priority waits,
  so a stream of shared acquirers never starves a queued exclusive one.
* When the lock changes, waiters are granted from the head of the queue for
  as long as they are compatible: consecutive shared waiters are granted
  together.  Grants are handed over under the internal mutex, so a woken
  waiter never has to race for the lock.
* ``timeout`` is in seconds; ``None`` waits forever, ``0`` only tries.  A
  timeout makes ``acquire`` return ``False``; it never raises for it.
  Deadlines are read from the lock's ``clock`` (default
  :func:`time.monotonic`) and a timed wait sleeps through its ``wait``
  (default :meth:`threading.Condition.wait`), so that tests can pass a
  fake clock's pair and step time instead of sleeping.
* ``delete`` makes every waiter and every later acquirer fail with
  :class:`errors.LockError`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from ganeti import errors
from ganeti.locking.monitor import LockMonitor

__all__ = ["SHARED", "EXCLUSIVE", "PRIO_MIN", "PRIO_MAX", "Clock", "TimedWait", "ModeLock",
           "SharedLock", "check_priority"]

SHARED = "shared"
EXCLUSIVE = "exclusive"

#: Valid priorities: lower number = higher priority (as OP_PRIO_*).
PRIO_MIN = -20
PRIO_MAX = 19

#: Seconds, monotonic: what lock timeouts are measured on.
Clock = Callable[[], float]
#: ``wait(cond, seconds)``: a timed :meth:`threading.Condition.wait`, called
#: with ``cond``'s lock held; returns early when ``cond`` is notified.
TimedWait = Callable[[threading.Condition, float], bool]


def check_priority(priority: int) -> None:
    """Raise :class:`errors.ProgrammerError` unless ``priority`` is in -20..19."""
    if not isinstance(priority, int) or not PRIO_MIN <= priority <= PRIO_MAX:
        raise errors.ProgrammerError(f"Invalid lock priority {priority!r}")


class _Waiter:
    """One pending request; granted under the lock's mutex."""

    __slots__ = ("thread", "mode", "priority", "cond", "granted")

    def __init__(self, thread: threading.Thread, mode: str, priority: int,
                 cond: threading.Condition) -> None:
        self.thread = thread
        self.mode = mode
        self.priority = priority
        self.cond = cond
        self.granted = False


class ModeLock:
    """A fair lock whose modes and their compatibility come from ``COMPAT``.

    Subclasses set ``COMPAT`` (mode -> modes it can be held together with)
    and ``DISPLAY`` (mode -> "shared"/"exclusive" for the monitor).  The
    underscore methods take the owning thread explicitly so that the lock
    set can act for the calling thread; public wrappers live in subclasses.
    ``clock`` and ``wait`` measure and sleep out timeouts (module docstring).
    """

    COMPAT: Mapping[str, frozenset[str]] = {}
    DISPLAY: Mapping[str, str] = {}

    __slots__ = ("name", "_mutex", "_holders", "_counts", "_queues", "_deleted",
                 "_clock", "_wait", "__weakref__")

    def __init__(self, name: str, clock: Clock = time.monotonic,
                 wait: TimedWait = threading.Condition.wait) -> None:
        self.name = name
        self._clock = clock
        self._wait = wait
        self._mutex = threading.Lock()
        self._holders: dict[threading.Thread, str] = {}
        self._counts: dict[str, int] = {}
        self._queues: dict[int, deque[_Waiter]] = {}
        self._deleted = False

    # -- internal helpers, called with self._mutex held ---------------------

    def _compatible(self, mode: str) -> bool:
        ok = self.COMPAT[mode]
        for held in self._counts:
            if held not in ok:
                return False
        return True

    def _add_holder(self, thread: threading.Thread, mode: str) -> None:
        self._holders[thread] = mode
        self._counts[mode] = self._counts.get(mode, 0) + 1

    def _drop_holder(self, thread: threading.Thread) -> str | None:
        mode = self._holders.pop(thread, None)
        if mode is not None:
            left = self._counts[mode] - 1
            if left:
                self._counts[mode] = left
            else:
                del self._counts[mode]
        return mode

    def _grant_pending(self) -> None:
        queues = self._queues
        while queues:
            prio = min(queues)
            queue = queues[prio]
            waiter = queue[0]
            if not self._compatible(waiter.mode):
                return
            queue.popleft()
            if not queue:
                del queues[prio]
            self._add_holder(waiter.thread, waiter.mode)
            waiter.granted = True
            waiter.cond.notify()

    def _dequeue(self, waiter: _Waiter) -> None:
        queue = self._queues.get(waiter.priority)
        if queue is None:
            return
        try:
            queue.remove(waiter)
        except ValueError:
            return
        if not queue:
            del self._queues[waiter.priority]

    def _raise_deleted(self) -> None:
        raise errors.LockError(f"Lock {self.name} has been deleted")

    # -- operations ----------------------------------------------------------

    def _acquire(self, thread: threading.Thread, mode: str, timeout: float | None,
                 priority: int) -> bool:
        """Acquire in ``mode`` for ``thread``; ``False`` on timeout."""
        with self._mutex:
            if self._deleted:
                self._raise_deleted()
            if thread in self._holders:
                raise errors.LockError(f"Lock {self.name} is already held by {thread.name}")
            if self._compatible(mode) and (not self._queues or min(self._queues) > priority):
                self._add_holder(thread, mode)
                return True
            if timeout is not None and timeout <= 0:
                return False
            waiter = _Waiter(thread, mode, priority, threading.Condition(self._mutex))
            queue = self._queues.get(priority)
            if queue is None:
                queue = self._queues[priority] = deque()
            queue.append(waiter)
            deadline = None if timeout is None else self._clock() + timeout
            try:
                while not waiter.granted:
                    if self._deleted:
                        self._raise_deleted()
                    if deadline is None:
                        waiter.cond.wait()
                        continue
                    remaining = deadline - self._clock()
                    if remaining <= 0:
                        self._dequeue(waiter)
                        # The head may have left: later waiters may now fit.
                        self._grant_pending()
                        return False
                    self._wait(waiter.cond, remaining)
            except BaseException:
                if not waiter.granted:
                    self._dequeue(waiter)
                    if not self._deleted:
                        self._grant_pending()
                raise
            return True

    def _release(self, thread: threading.Thread) -> None:
        with self._mutex:
            if self._drop_holder(thread) is None:
                raise errors.LockError(f"Lock {self.name} is not held by {thread.name}")
            if self._queues:
                self._grant_pending()

    def _drop_ended_holders(self) -> list[str]:
        """Drop the holds of threads that have ended (waiters get the lock);
        returns those threads' names."""
        with self._mutex:
            ended = [t for t in self._holders if not t.is_alive()]
            for thread in ended:
                self._drop_holder(thread)
            if ended and self._queues:
                self._grant_pending()
        return [t.name for t in ended]

    def _convert(self, thread: threading.Thread, mode: str) -> None:
        """Switch ``thread``'s hold to a *weaker* ``mode`` (never blocks)."""
        with self._mutex:
            old = self._holders.get(thread)
            if old is None:
                raise errors.LockError(f"Lock {self.name} is not held by {thread.name}")
            if old == mode:
                return
            if not self.COMPAT[old] <= self.COMPAT[mode]:
                raise errors.ProgrammerError(f"Cannot convert {old} to {mode} on {self.name}")
            self._drop_holder(thread)
            self._add_holder(thread, mode)
            if self._queues:
                self._grant_pending()

    def _grant_now(self, thread: threading.Thread, mode: str) -> None:
        """Give a hold that the caller knows to be free of conflicts.

        Used by the lock set when it turns a whole-set hold into per-name
        holds; raises :class:`errors.ProgrammerError` if the premise is wrong.
        """
        with self._mutex:
            if self._deleted or thread in self._holders or not self._compatible(mode):
                raise errors.ProgrammerError(f"Lock {self.name} cannot be granted directly")
            self._add_holder(thread, mode)

    def _delete(self, thread: threading.Thread, exclusive: str, timeout: float | None,
                priority: int) -> bool:
        with self._mutex:
            if self._deleted:
                self._raise_deleted()
            held = self._holders.get(thread)
        if held is None:
            if not self._acquire(thread, exclusive, timeout, priority):
                return False
        elif held != exclusive:
            raise errors.LockError(f"Lock {self.name} must be held exclusively to delete it")
        self._mark_deleted()
        return True

    def _mark_deleted(self) -> None:
        with self._mutex:
            self._deleted = True
            self._holders.clear()
            self._counts.clear()
            for queue in self._queues.values():
                for waiter in queue:
                    waiter.cond.notify()
            self._queues.clear()

    def mode_of(self, thread: threading.Thread) -> str | None:
        """Return the mode ``thread`` holds this lock in, or ``None``."""
        return self._holders.get(thread)

    @property
    def deleted(self) -> bool:
        """True once the lock was deleted."""
        return self._deleted

    def lock_info(self, name: str | None = None) -> dict[str, object]:
        """Describe the lock for the monitor (``name`` overrides our name)."""
        with self._mutex:
            holders = list(self._holders.items())
            pending: list[tuple[str, list[str]]] = []   # runs of waiters in one mode
            for prio in sorted(self._queues):
                for waiter in self._queues[prio]:
                    shown = self.DISPLAY[waiter.mode]
                    if pending and pending[-1][0] == shown:
                        pending[-1][1].append(waiter.thread.name)
                    else:
                        pending.append((shown, [waiter.thread.name]))
        mode = None
        if holders:
            shown_modes = {self.DISPLAY[m] for _, m in holders}
            mode = EXCLUSIVE if EXCLUSIVE in shown_modes else SHARED
        return {
            "name": name if name is not None else self.name,
            "mode": mode,
            "owner": sorted(t.name for t, _ in holders),
            "pending": [list(run) for run in pending],
        }


class SharedLock(ModeLock):
    """A fair shared/exclusive lock; see the module docstring for the rules.

    ``monitor``, when given, is a :class:`~ganeti.locking.monitor.LockMonitor`
    this lock registers itself with (weakly).  ``clock`` and ``wait``
    measure and sleep out timeouts (see the module docstring).
    """

    COMPAT = {SHARED: frozenset([SHARED]), EXCLUSIVE: frozenset()}
    DISPLAY = {SHARED: SHARED, EXCLUSIVE: EXCLUSIVE}

    __slots__ = ()

    def __init__(self, name: str, monitor: LockMonitor | None = None, *,
                 clock: Clock = time.monotonic,
                 wait: TimedWait = threading.Condition.wait) -> None:
        ModeLock.__init__(self, name, clock, wait)
        if monitor is not None:
            monitor.register(self)

    def acquire(self, shared: bool = False, timeout: float | None = None,
                priority: int = 0) -> bool:
        """Acquire the lock; return ``False`` if ``timeout`` expired first.

        Raises :class:`errors.LockError` if the calling thread already holds
        the lock or the lock is (or gets, while waiting) deleted.
        """
        check_priority(priority)
        return self._acquire(threading.current_thread(), SHARED if shared else EXCLUSIVE,
                             timeout, priority)

    def release(self) -> None:
        """Release the calling thread's hold (LockError if it holds none)."""
        self._release(threading.current_thread())

    def downgrade(self) -> None:
        """Turn the calling thread's exclusive hold into a shared one.

        Shared waiters at the head of the queue are granted at once.  Raises
        :class:`errors.LockError` if the thread does not hold it exclusively.
        """
        thread = threading.current_thread()
        if self._holders.get(thread) != EXCLUSIVE:
            raise errors.LockError(f"Lock {self.name} is not held exclusively")
        self._convert(thread, SHARED)

    def delete(self, timeout: float | None = None, priority: int = 0) -> bool:
        """Delete the lock; every waiter and later acquirer gets LockError.

        The caller must hold the lock exclusively, or it is first acquired
        exclusively (``False`` if ``timeout`` expires; nothing changes then).
        A shared holder gets :class:`errors.LockError`.
        """
        check_priority(priority)
        return self._delete(threading.current_thread(), EXCLUSIVE, timeout, priority)

    def is_owned(self, shared: bool | None = None) -> bool:
        """Whether the calling thread holds the lock (in the given mode)."""
        mode = self._holders.get(threading.current_thread())
        if mode is None:
            return False
        if shared is None:
            return True
        return mode == (SHARED if shared else EXCLUSIVE)

    def get_lock_info(self) -> list[dict[str, object]]:
        """Monitor provider interface: a one-element list."""
        return [self.lock_info()]
