"""The node daemon's self-fence (doc/ha.md, "Node loss recovery").

The master's recovery thread renews every online node's self-fence lease
(``ha_lease``, :mod:`ganeti.backend.ha`) every two seconds while the
cluster's ``ha_recovery`` is on, with a length and the instances it
covers when the node has no ``oob_program`` and instances the master
would recover (none otherwise: the master powers an OOB node off, and
stopping instances nobody restarts elsewhere buys no safety).  The
node daemon's accepting parent holds a :class:`SelfFenceMonitor`: once a
second, from its loop (no thread), it reads the lease record; once the
lease is about to run out unrenewed
(:func:`ganeti.ha.recovery.self_fence_at`: two seconds before its end) it
forks one worker that stops the instances the lease names, those still
running (:func:`ganeti.backend.ha.self_fence`): the ones the master would
start elsewhere; every other instance keeps running.  The master starts
those instances elsewhere only after the lease's end plus a margin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ganeti import errors
from ganeti.backend import ha as backend_ha
from ganeti.ha import recovery
from ganeti.pathutils import Paths
from ganeti.server.parenttimer import ParentTimer

__all__ = ["SelfFenceMonitor"]

logger = logging.getLogger(__name__)


class SelfFenceMonitor(ParentTimer):
    """The parent's timer; forks :func:`ganeti.backend.ha.self_fence` when due."""

    def __init__(self, paths: Paths, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self.paths = paths
        self._fenced_for: float | None = None

    def due(self, now: float) -> dict[str, Any] | None:
        """The lease record when it is time to fence (once per record), else None."""
        record = backend_ha.read_lease(self.paths)
        if record is None or record.get("fenced") is not None:
            return None
        if record["at"] == self._fenced_for:
            return None
        if now < recovery.self_fence_at(float(record["at"]), float(record["lease"])):
            return None
        return record

    def tick(self, fork: Callable[[Callable[[], int]], int]) -> None:
        """Look (at most once a second, :class:`ParentTimer`); ``fork(fn)`` runs ``fn``
        in a child process and returns its pid."""
        now = self.look()
        if now is None or self.worker is not None:
            return
        record = self.due(now)
        if record is None:
            return
        self._fenced_for = float(record["at"])
        try:
            pairs = backend_ha.lease_instances(record.get("instances"))
        except errors.GanetiError as exc:
            logger.error("Self-fence: unreadable lease record: %s", exc)
            return
        logger.warning("Self-fence: no lease renewal from the master for %.1f s (lease %.1f s):"
                       " stopping %s", now - record["at"], record["lease"],
                       ", ".join(n for n, _ in pairs) or "nothing (no instance covered)")

        def _fence() -> int:
            stopped = backend_ha.self_fence(self.paths, pairs)
            logger.warning("Self-fence: stopped %s", ", ".join(stopped) or "nothing")
            return 0

        self.worker = fork(_fence)
