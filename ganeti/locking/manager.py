"""The Ganeti lock manager: one :class:`LockSet` per level, used in order.

Levels, acquired in increasing number: ``cluster`` (only the Big Ganeti
Lock, :data:`BGL`), ``instance``, ``nodegroup``, ``node``, ``node-res``.
New levels get new numbers at the end (or in between, renumbering the
constants); nothing else depends on the values.

Rules enforced at once with :class:`errors.LockError`:

* Acquiring (or adding to) a level while owning a higher-numbered level.
* Acquiring any non-cluster level without owning the BGL (shared or
  exclusive), as in Ganeti.
* Releasing a whole level (``names=None``) while owning a higher-numbered
  level, and releasing the BGL while owning any other level.  Releasing an
  explicit list of names of a lower level is allowed while holding higher
  levels (Ganeti's "release what we turned out not to need" pattern);
  releasing never causes a deadlock.
* Everything :class:`LockSet` checks (acquiring twice at a level, unknown
  names, removing what is not held exclusively, ...).

The ``node-res`` level starts with the node names; :meth:`add` and
:meth:`remove` act on one level only, so callers adding a node add it at
both ``node`` and ``node-res``.  The owner of every lock is the calling
thread, i.e. one job's execution thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from ganeti import errors
from ganeti.locking.lockset import ALL_SET, LockSet
from ganeti.locking.monitor import LockMonitor
from ganeti.locking.sharedlock import Clock, TimedWait

__all__ = ["ALL_SET", "LEVEL_CLUSTER", "LEVEL_INSTANCE", "LEVEL_NODEGROUP", "LEVEL_NODE",
           "LEVEL_NODE_RES", "LEVELS", "LEVEL_NAMES", "BGL", "GanetiLockManager"]

LEVEL_CLUSTER = 0
LEVEL_INSTANCE = 1
LEVEL_NODEGROUP = 2
LEVEL_NODE = 3
LEVEL_NODE_RES = 4

LEVELS = [LEVEL_CLUSTER, LEVEL_INSTANCE, LEVEL_NODEGROUP, LEVEL_NODE, LEVEL_NODE_RES]
LEVEL_NAMES = {
    LEVEL_CLUSTER: "cluster",
    LEVEL_INSTANCE: "instance",
    LEVEL_NODEGROUP: "nodegroup",
    LEVEL_NODE: "node",
    LEVEL_NODE_RES: "node-res",
}

#: The one lock of the cluster level.
BGL = "BGL"

Names = str | Iterable[str] | None


class GanetiLockManager:
    """All the locks of the master daemon, by level.

    Built once (in the master daemon's context) from the configuration's
    node, node group and instance names.  Every set registers with
    ``monitor`` when one is given.  ``clock`` and ``wait`` measure and
    sleep out the timeouts of every lock (see
    :mod:`ganeti.locking.sharedlock`).
    """

    def __init__(self, nodes: Iterable[str], nodegroups: Iterable[str],
                 instances: Iterable[str], monitor: LockMonitor | None = None, *,
                 clock: Clock = time.monotonic,
                 wait: TimedWait = threading.Condition.wait) -> None:
        nodes = list(nodes)
        names = {LEVEL_CLUSTER: [BGL], LEVEL_INSTANCE: instances,
                 LEVEL_NODEGROUP: nodegroups, LEVEL_NODE: nodes, LEVEL_NODE_RES: nodes}
        self._sets: dict[int, LockSet] = {
            level: LockSet(names[level], LEVEL_NAMES[level], monitor, clock=clock, wait=wait)
            for level in LEVELS
        }

    def _set(self, level: int) -> LockSet:
        try:
            return self._sets[level]
        except (KeyError, TypeError):
            raise errors.ProgrammerError(f"Unknown lock level {level!r}") from None

    def _upper_owned(self, level: int) -> list[int]:
        thread = threading.current_thread()
        return [lvl for lvl, lset in self._sets.items() if lvl > level and lset.held_by(thread)]

    def _check_order(self, level: int, action: str) -> None:
        upper = self._upper_owned(level)
        if upper:
            raise errors.LockError(
                f"Cannot {action} level {LEVEL_NAMES[level]} while owning level(s) "
                f"{', '.join(LEVEL_NAMES[lvl] for lvl in upper)}")

    # -- queries -------------------------------------------------------------

    def names(self, level: int) -> set[str]:
        """Return the lock names of ``level``."""
        return self._set(level).names()

    def is_owned(self, level: int) -> bool:
        """Whether the calling thread owns anything at ``level``."""
        return self._set(level).is_owned()

    def owning_all(self, level: int) -> bool:
        """Whether the calling thread owns the whole ``level``."""
        return self._set(level).owning_all()

    def list_owned(self, level: int) -> set[str]:
        """Return the names the calling thread owns at ``level``."""
        return self._set(level).list_owned()

    def check_owned(self, level: int, names: str | Iterable[str],
                    shared: bool | None = None) -> bool:
        """Whether the calling thread owns all ``names`` at ``level`` (in mode)."""
        lset = self._set(level)
        if isinstance(names, str):
            names = [names]
        return all(lset.is_owned_name(name, shared) for name in names)

    # -- acquire / release ---------------------------------------------------

    def acquire(self, level: int, names: Names, shared: bool = False,
                timeout: float | None = None, priority: int = 0) -> set[str] | None:
        """Acquire ``names`` (or :data:`ALL_SET`) at ``level``.

        Returns the set of names held, or ``None`` on timeout (nothing held
        at that level then).  Raises :class:`errors.LockError` for order
        violations, a missing BGL, or unknown names.
        """
        lset = self._set(level)
        self._check_order(level, "acquire")
        if level != LEVEL_CLUSTER and not self._sets[LEVEL_CLUSTER].is_owned():
            raise errors.LockError(
                f"Cannot acquire level {LEVEL_NAMES[level]} without owning the BGL")
        return lset.acquire(names, shared=shared, timeout=timeout, priority=priority)

    def release(self, level: int, names: Names = None) -> None:
        """Release ``names`` (default: all) at ``level``; see the order rules."""
        lset = self._set(level)
        if names is None or level == LEVEL_CLUSTER:
            self._check_order(level, "release")
        lset.release(names)

    def release_all(self) -> None:
        """Release everything the calling thread owns, highest level first
        (so the level order holds at every step without checking it)."""
        thread = threading.current_thread()
        for level in reversed(LEVELS):
            lset = self._sets[level]
            if lset.held_by(thread):
                lset.release(None)

    def downgrade(self, level: int, names: Names = None) -> None:
        """Turn exclusive holds at ``level`` into shared ones (default: all)."""
        self._set(level).downgrade(names)

    # -- add / remove --------------------------------------------------------

    def add(self, level: int, names: str | Iterable[str], acquired: bool = False,
            shared: bool = False) -> None:
        """Add lock names at ``level`` (not the cluster level).

        May wait while another thread owns the whole level; unless the
        calling thread already owns something there, the level order is
        checked as for :meth:`acquire`.
        """
        if level == LEVEL_CLUSTER:
            raise errors.ProgrammerError("Cannot add locks at the cluster level")
        lset = self._set(level)
        if not lset.is_owned():
            self._check_order(level, "add to")
        lset.add(names, acquired=acquired, shared=shared)

    def remove(self, level: int, names: str | Iterable[str]) -> list[str]:
        """Remove lock names at ``level``; they must be held exclusively.

        Returns the names that existed and were removed.
        """
        if level == LEVEL_CLUSTER:
            raise errors.ProgrammerError("Cannot remove locks at the cluster level")
        return self._set(level).remove(names)

    def release_ended_owners(self) -> list[tuple[str, str]]:
        """Release the locks of threads that have ended while holding them
        (Ganeti's stale lock owners, ``gnt-debug wconfd cleanuplocks``).

        A job's thread releases its locks when its opcode ends, so normally
        there are none.  Returns ``(lock name, owner thread name)`` per hold
        released, highest level first.
        """
        return [pair for level in reversed(LEVELS)
                for pair in self._sets[level].release_ended_owners()]
