"""Granular locking for the master daemon.

* :class:`SharedLock`: a fair shared/exclusive lock with priorities,
  timeouts, downgrade and deletion (:mod:`ganeti.locking.sharedlock`).
* :class:`LockSet`: a named set of locks whose whole-set acquire is O(1)
  thanks to a set-level lock with intention modes
  (:mod:`ganeti.locking.lockset`).
* :class:`GanetiLockManager`: one lock set per level, acquired in level
  order (:mod:`ganeti.locking.manager`).
* :class:`LockMonitor`: every lock's owners and waiters, for
  ``gnt-debug locks`` and the ``lock`` query resource
  (:mod:`ganeti.locking.monitor`).

The owner of a lock is always the calling thread.
"""

from __future__ import annotations

from ganeti.locking.lockset import ALL_SET, LockSet
from ganeti.locking.manager import (
    BGL,
    LEVEL_CLUSTER,
    LEVEL_INSTANCE,
    LEVEL_NAMES,
    LEVEL_NODE,
    LEVEL_NODE_RES,
    LEVEL_NODEGROUP,
    LEVELS,
    GanetiLockManager,
)
from ganeti.locking.monitor import LockMonitor
from ganeti.locking.sharedlock import EXCLUSIVE, SHARED, SharedLock

__all__ = [
    "ALL_SET", "BGL", "EXCLUSIVE", "SHARED",
    "LEVEL_CLUSTER", "LEVEL_INSTANCE", "LEVEL_NODEGROUP", "LEVEL_NODE", "LEVEL_NODE_RES",
    "LEVELS", "LEVEL_NAMES",
    "SharedLock", "LockSet", "GanetiLockManager", "LockMonitor",
]
