"""LockSet: a named, growable set of shared locks with an O(1) "whole set".

Every name has its own :class:`SharedLock` (the *member* lock).  On top
sits one set-level lock with four modes:

===================  ==============================  =====================
mode                 held by                         compatible with
===================  ==============================  =====================
intent-shared (IS)   owners of some names, shared    IS, IX, S
intent-exclusive     owners of some names, excl.     IS, IX
shared (S)           owner of the whole set, shared  IS, S
exclusive (X)        owner of the whole set, excl.   nothing
===================  ==============================  =====================

Acquiring names takes IS/IX first, then the member locks in sorted order.
Acquiring :data:`ALL_SET` takes only S or X, so it costs the same for ten
or ten thousand names, and it blocks :meth:`LockSet.add` (which needs IX).
The monitor still shows the whole-set owner on every member.

Rules:

* A thread acquires at most once per set: acquiring while it owns anything
  in the set raises :class:`errors.LockError` (acquire everything you need
  in one call; this keeps the sorted order that prevents deadlocks).
* One overall ``timeout``, measured on the set's ``clock`` (which, with
  ``wait``, every lock of the set shares; see
  :mod:`ganeti.locking.sharedlock`); on timeout ``None`` is returned and
  nothing stays held.
* Unknown (or removed) names make ``acquire`` raise :class:`errors.LockError`
  and leave nothing held; so does a name removed while we wait for it.
* ``release(names)`` after acquiring the whole set keeps the other names
  (the whole-set hold turns into per-name holds; costs O(names kept)).
* ``add`` waits while another thread owns the whole set; the whole-set
  owner itself (exclusive) may add, and new names are then owned by it too.
  Adding while owning names or the whole set *shared* raises LockError.
* ``remove`` needs the names held exclusively, or the whole set held
  exclusively; names not in the set are skipped.  Waiters on removed
  names get :class:`errors.LockError`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from ganeti import errors
from ganeti.locking.monitor import LockMonitor
from ganeti.locking.sharedlock import (EXCLUSIVE, SHARED, Clock, ModeLock, SharedLock, TimedWait,
                                       check_priority)

__all__ = ["ALL_SET", "LockSet"]

#: Pass as ``names`` to acquire every name of a set.
ALL_SET = None

_IS = "intent-shared"
_IX = "intent-exclusive"
_S = SHARED
_X = EXCLUSIVE


class _SetLock(ModeLock):
    """The set-level lock with intention modes (see the module docstring)."""

    COMPAT = {
        _IS: frozenset([_IS, _IX, _S]),
        _IX: frozenset([_IS, _IX]),
        _S: frozenset([_IS, _S]),
        _X: frozenset(),
    }
    DISPLAY = {_IS: SHARED, _IX: EXCLUSIVE, _S: SHARED, _X: EXCLUSIVE}

    __slots__ = ()


def _as_list(names: str | Iterable[str]) -> list[str]:
    if isinstance(names, str):
        return [names]
    result = list(names)
    for name in result:
        if not isinstance(name, str):
            raise errors.ProgrammerError(f"Lock names must be strings, not {name!r}")
    return result


class LockSet:
    """A set of named shared locks; see the module docstring for the rules.

    ``name`` qualifies member names in the monitor (``"instance/inst1"``).
    The set registers itself with ``monitor`` (weakly) when one is given.
    ``clock`` and ``wait`` measure and sleep out timeouts, for the set and
    every member lock.
    """

    def __init__(self, names: Iterable[str], name: str, monitor: LockMonitor | None = None, *,
                 clock: Clock = time.monotonic,
                 wait: TimedWait = threading.Condition.wait) -> None:
        self.name = name
        self._clock = clock
        self._wait = wait
        # Lock order: self._mutex, then a member's or the set lock's mutex.
        self._mutex = threading.Lock()
        self._setlock = _SetLock(f"{name}/[lockset]", clock=clock, wait=wait)
        self._locks: dict[str, SharedLock] = {}
        for member in _as_list(names):
            self._locks[member] = SharedLock(f"{name}/{member}", clock=clock, wait=wait)
        self._owned: dict[threading.Thread, set[str]] = {}
        if monitor is not None:
            monitor.register(self)

    def _new_member(self, member: str) -> SharedLock:
        return SharedLock(f"{self.name}/{member}", clock=self._clock, wait=self._wait)

    # -- queries -------------------------------------------------------------

    def names(self) -> set[str]:
        """Return the current names of the set."""
        with self._mutex:
            return set(self._locks)

    def is_owned(self) -> bool:
        """Whether the calling thread owns anything in this set."""
        return self._setlock.mode_of(threading.current_thread()) is not None

    def held_by(self, thread: threading.Thread) -> bool:
        """Whether ``thread`` owns anything in this set (:meth:`is_owned` for
        a thread the caller already looked up)."""
        return self._setlock.mode_of(thread) is not None

    def owning_all(self) -> bool:
        """Whether the calling thread owns the whole set (shared or exclusive)."""
        return self._setlock.mode_of(threading.current_thread()) in (_S, _X)

    def list_owned(self) -> set[str]:
        """Return the names the calling thread owns (all names for ALL_SET)."""
        thread = threading.current_thread()
        mode = self._setlock.mode_of(thread)
        with self._mutex:
            if mode in (_S, _X):
                return set(self._locks)
            return set(self._owned.get(thread, ()))

    def is_owned_name(self, name: str, shared: bool | None = None) -> bool:
        """Whether the calling thread owns ``name`` (in the given mode)."""
        thread = threading.current_thread()
        mode = self._setlock.mode_of(thread)
        with self._mutex:
            if name not in self._locks:
                return False
            held: str | None
            if mode in (_S, _X):
                held = mode
            else:
                held = self._locks[name].mode_of(thread)
        if held is None:
            return False
        return shared is None or held == (_S if shared else _X)

    # -- acquire / release ---------------------------------------------------

    def acquire(self, names: str | Iterable[str] | None, shared: bool = False,
                timeout: float | None = None, priority: int = 0) -> set[str] | None:
        """Acquire ``names`` (or :data:`ALL_SET`); return the names now held.

        Returns ``None`` if ``timeout`` expired (nothing is held then).
        Raises :class:`errors.LockError` for unknown/removed names or if the
        thread already owns something in this set.
        """
        check_priority(priority)
        thread = threading.current_thread()
        if self._setlock.mode_of(thread) is not None:
            raise errors.LockError(f"Already owning locks in set {self.name}")
        if names is ALL_SET:
            if not self._setlock._acquire(thread, _S if shared else _X, timeout, priority):
                return None
            with self._mutex:
                return set(self._locks)
        wanted = sorted(set(_as_list(names)))
        if not wanted:
            return set()
        deadline = None if timeout is None else self._clock() + timeout
        if not self._setlock._acquire(thread, _IS if shared else _IX, timeout, priority):
            return None
        mode = _S if shared else _X
        acquired: list[SharedLock] = []
        try:
            with self._mutex:
                missing = [n for n in wanted if n not in self._locks]
                if missing:
                    raise errors.LockError(
                        f"Unknown lock(s) in set {self.name}: {', '.join(missing)}")
                members = [self._locks[n] for n in wanted]
            for member in members:
                remaining = None if deadline is None else deadline - self._clock()
                if not member._acquire(thread, mode, remaining, priority):
                    self._rollback(thread, acquired)
                    return None
                acquired.append(member)
        except BaseException:
            self._rollback(thread, acquired)
            raise
        with self._mutex:
            self._owned[thread] = set(wanted)
        return set(wanted)

    def _rollback(self, thread: threading.Thread, acquired: list[SharedLock]) -> None:
        for member in reversed(acquired):
            if not member.deleted:
                member._release(thread)
        self._setlock._release(thread)

    def release(self, names: str | Iterable[str] | None = None) -> None:
        """Release ``names`` (default: everything the thread owns here).

        Raises :class:`errors.LockError` if the thread owns nothing here or
        names something it does not own.  Releasing part of a whole-set hold
        keeps the other names, held in the same mode.
        """
        thread = threading.current_thread()
        setmode = self._setlock.mode_of(thread)
        if setmode is None:
            raise errors.LockError(f"Releasing set {self.name} which is not owned")
        if setmode in (_S, _X):
            if names is None:
                self._setlock._release(thread)
                return
            self._split_whole(thread, setmode, set(_as_list(names)))
            return
        with self._mutex:
            owned = self._owned.get(thread, set())
            if names is None:
                drop = set(owned)
            else:
                drop = set(_as_list(names))
                if not drop <= owned:
                    raise errors.LockError(
                        f"Releasing unowned lock(s) in set {self.name}: "
                        f"{', '.join(sorted(drop - owned))}")
            members = [self._locks[n] for n in sorted(drop, reverse=True)]
            owned -= drop
            if not owned:
                self._owned.pop(thread, None)
            keep = [self._locks[n] for n in owned]
        for member in members:
            member._release(thread)
        if not keep:
            self._setlock._release(thread)
        elif setmode == _IX and all(m.mode_of(thread) == _S for m in keep):
            self._setlock._convert(thread, _IS)

    def _split_whole(self, thread: threading.Thread, setmode: str, drop: set[str]) -> None:
        """Turn a whole-set hold into per-name holds on all names but ``drop``.

        While we hold S or X nobody holds a member in a conflicting mode or
        waits for one (they would need IX), and no name can be added or
        removed, so every grant below succeeds without waiting.
        """
        with self._mutex:
            unknown = drop - self._locks.keys()
            if unknown:
                raise errors.LockError(
                    f"Releasing unknown lock(s) in set {self.name}: {', '.join(sorted(unknown))}")
            keep = sorted(self._locks.keys() - drop)
            for name in keep:
                self._locks[name]._grant_now(thread, setmode)
            if keep:
                self._owned[thread] = set(keep)
        if keep:
            self._setlock._convert(thread, _IS if setmode == _S else _IX)
        else:
            self._setlock._release(thread)

    def downgrade(self, names: str | Iterable[str] | None = None) -> None:
        """Turn exclusive holds into shared ones (default: all owned here).

        Raises :class:`errors.LockError` if a named lock is not held
        exclusively by the calling thread.
        """
        thread = threading.current_thread()
        setmode = self._setlock.mode_of(thread)
        if setmode == _X:
            if names is None:
                self._setlock._convert(thread, _S)
                return
            self._split_whole(thread, _X, set())
            setmode = _IX
        if setmode == _S and names is None:
            return
        if setmode not in (_IX, _IS):
            raise errors.LockError(f"Set {self.name} is not owned (or not exclusively)")
        with self._mutex:
            owned = self._owned.get(thread, set())
            targets = set(owned) if names is None else set(_as_list(names))
            if not targets <= owned:
                raise errors.LockError(f"Downgrading unowned lock(s) in set {self.name}")
            members = [self._locks[n] for n in sorted(targets)]
            keep = [self._locks[n] for n in owned]
        for member in members:
            if member.mode_of(thread) == _X:
                member._convert(thread, _S)
            elif names is not None:
                raise errors.LockError(f"Lock {member.name} is not held exclusively")
        if setmode == _IX and all(m.mode_of(thread) == _S for m in keep):
            self._setlock._convert(thread, _IS)

    # -- add / remove --------------------------------------------------------

    def add(self, names: str | Iterable[str], acquired: bool = False, shared: bool = False) -> None:
        """Add new names, optionally owned at once by the calling thread.

        Waits while another thread owns the whole set.  Raises
        :class:`errors.LockError` if a name already exists, or if the thread
        owns names or the whole set in shared mode.
        """
        thread = threading.current_thread()
        new = _as_list(names)
        if len(set(new)) != len(new):
            raise errors.LockError(f"Duplicate names added to set {self.name}")
        setmode = self._setlock.mode_of(thread)
        if setmode in (_IS, _S):
            raise errors.LockError(f"Cannot add to set {self.name} while owning it shared")
        took = False
        if setmode is None:
            self._setlock._acquire(thread, _IX, None, 0)
            took = True
        keep_intent = False
        try:
            with self._mutex:
                dup = [n for n in new if n in self._locks]
                if dup:
                    raise errors.LockError(
                        f"Lock(s) already exist in set {self.name}: {', '.join(dup)}")
                own = acquired and setmode != _X
                for name in new:
                    member = self._new_member(name)
                    if own:
                        member._grant_now(thread, _S if shared else _X)
                    self._locks[name] = member
                if own and new:
                    self._owned.setdefault(thread, set()).update(new)
                    keep_intent = True
        finally:
            if took and not keep_intent:
                self._setlock._release(thread)
        if took and keep_intent and shared:
            self._setlock._convert(thread, _IS)

    def remove(self, names: str | Iterable[str]) -> list[str]:
        """Remove names; return those that existed and were removed.

        The calling thread must hold each existing name exclusively, or the
        whole set exclusively; otherwise :class:`errors.LockError` and
        nothing is removed.  Removing one's last owned name ends the
        ownership of the set.
        """
        thread = threading.current_thread()
        setmode = self._setlock.mode_of(thread)
        targets = _as_list(names)
        with self._mutex:
            present = [n for n in dict.fromkeys(targets) if n in self._locks]
            if setmode == _X:
                for name in present:
                    self._locks.pop(name)._mark_deleted()
                return present
            owned = self._owned.get(thread, set())
            bad = [n for n in present
                   if n not in owned or self._locks[n].mode_of(thread) != _X]
            if bad:
                raise errors.LockError(
                    f"Removing lock(s) not held exclusively in set {self.name}: {', '.join(bad)}")
            for name in present:
                self._locks.pop(name)._mark_deleted()
                owned.discard(name)
            release_intent = bool(present) and not owned
            if release_intent:
                self._owned.pop(thread, None)
        if release_intent:
            self._setlock._release(thread)
        return present

    def release_ended_owners(self) -> list[tuple[str, str]]:
        """Release every hold of a thread that has ended without releasing it.

        Returns ``(lock name, owner thread name)`` per released hold (the
        set-level entry included); their waiters are granted as on release.
        """
        with self._mutex:
            for thread in [t for t in self._owned if not t.is_alive()]:
                del self._owned[thread]
            members = list(self._locks.values())
        freed = [(lock.name, owner) for lock in members for owner in lock._drop_ended_holders()]
        return freed + [(self._setlock.name, owner)
                        for owner in self._setlock._drop_ended_holders()]

    # -- monitor -------------------------------------------------------------

    def get_lock_info(self) -> list[dict[str, object]]:
        """Monitor provider interface: the set-level lock and every member.

        Whole-set owners are shown as owners of every member.  Pending
        requests for the set-level entry include intent waiters (threads
        waiting to start acquiring names while the whole set is owned).
        """
        with self._mutex:
            setinfo = self._setlock.lock_info()
            with self._setlock._mutex:
                whole = [(t, m) for t, m in self._setlock._holders.items() if m in (_S, _X)]
            members = sorted(self._locks.items())
            infos = [member.lock_info() for _, member in members]
        whole_names = sorted(t.name for t, _ in whole)
        whole_mode = None
        if whole:
            whole_mode = _X if any(m == _X for _, m in whole) else _S
        setinfo["owner"] = whole_names
        setinfo["mode"] = whole_mode
        result = [setinfo]
        for info in infos:
            if whole:
                info["owner"] = sorted(info["owner"] + whole_names)  # type: ignore[operator]
                info["mode"] = _X if _X in (whole_mode, info["mode"]) else _S
            result.append(info)
        return result
