"""A short-lived cache of the nodes' live data (``node_info`` answers).

``gnt-node list`` shows live figures (free memory and disk) for every
node, so each listing fans ``node_info`` out to all nodes: one forked
request per node, about 400 ms for 50 nodes on two cores.  The master
keeps each node's last answer for at most ``max_age`` seconds
(``ganeti-masterd --node-info-max-age``, default
:data:`DEFAULT_MAX_AGE`; 0 turns the cache off) and asks only the nodes
whose answer is older.

What keeps the figures right:

* **Operations invalidate.**  When an opcode that held node locks ends
  (successfully or not), the processor drops the answers of those nodes
  (:meth:`NodeInfoCache.invalidate`), so a listing after an instance
  start, stop, migration or disk change asks those nodes again.
* **No stale store.**  An answer is only stored if its call started after
  the node's last invalidation, so a listing racing with an operation
  cannot put back figures from before the change.
* **Failures are not cached**: a node that does not answer is asked again
  by the next listing (and shown as unreachable meanwhile).
* **Nothing happens in the background**: the nodes are only asked when a
  query needs their live fields.

So the figures of a node are at most ``max_age`` seconds old, except for
changes made on the node behind the cluster's back, which show up within
that time.  Thread-safe; the clock is injectable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["NodeInfoCache", "DEFAULT_MAX_AGE"]

#: Seconds a node's live data may be reused by queries.
DEFAULT_MAX_AGE = 5.0


class NodeInfoCache:
    """Per-node ``node_info`` answers, reused for up to ``max_age`` seconds."""

    def __init__(self, max_age: float = DEFAULT_MAX_AGE, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self.clock = clock
        self._lock = threading.Lock()
        self._answers: dict[str, tuple[float, Any]] = {}    # uuid -> (call start, payload)
        self._invalidated: dict[str, float] = {}             # uuid -> time
        self._all_invalidated = float("-inf")

    def lookup(self, uuids: Iterable[str]) -> tuple[dict[str, Any], list[str], float]:
        """``(fresh answers by uuid, uuids to ask, start time to pass to store)``."""
        now = self.clock()
        fresh: dict[str, Any] = {}
        missing: list[str] = []
        with self._lock:
            for uuid in uuids:
                entry = self._answers.get(uuid)
                if entry is not None and self.max_age > 0 and now - entry[0] <= self.max_age:
                    fresh[uuid] = entry[1]
                else:
                    missing.append(uuid)
        return fresh, missing, now

    def store(self, started: float, answers: dict[str, Any]) -> None:
        """Keep ``answers`` of a call started at ``started`` (unless invalidated since)."""
        if self.max_age <= 0:
            return
        with self._lock:
            for uuid, payload in answers.items():
                if started <= max(self._all_invalidated, self._invalidated.get(uuid, float("-inf"))):
                    continue
                old = self._answers.get(uuid)
                if old is None or old[0] <= started:
                    self._answers[uuid] = (started, payload)

    def invalidate(self, uuids: Iterable[str] | None = None) -> None:
        """Forget the answers of ``uuids`` (every node when None)."""
        now = self.clock()
        with self._lock:
            if uuids is None:
                self._answers.clear()
                self._invalidated.clear()
                self._all_invalidated = now
                return
            for uuid in uuids:
                self._answers.pop(uuid, None)
                self._invalidated[uuid] = now
