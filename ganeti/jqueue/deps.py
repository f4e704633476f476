"""Job dependencies (doc/protocols/jobs.md, "Dependencies"): evaluation and the waiting list.

:func:`evaluate` decides, from the dependency's status, whether an opcode
continues, waits, is canceled or fails.  :class:`DependencyManager` keeps
which jobs wait for which; the queue calls :meth:`DependencyManager.job_finished`
when a job is finalized and reschedules the returned waiters (no polling).
It is also a lock-monitor provider: each awaited job shows as a pseudo-lock
``job/<id>`` whose pending entries are the waiting jobs, grouped by the
statuses they want (``[["success", ["job/457"]]]``, rendered
``success:job/457``).

Cycles: a job that starts waiting for a job which (through the jobs it
waits for in turn) waits for it would wait forever.
:meth:`DependencyManager.add_waiter_or_cycle` refuses that wait and
returns the cycle instead; the queue then fails every job in it
(:func:`cycle_message`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ganeti import constants

__all__ = ["DEP_CONTINUE", "DEP_WAIT", "DEP_CANCEL", "DEP_WRONGSTATUS", "DEP_ERROR",
           "evaluate", "find_cycle", "cycle_message", "DependencyManager"]

DEP_CONTINUE = "continue"
DEP_WAIT = "wait"
DEP_CANCEL = "cancel"
DEP_WRONGSTATUS = "wrongstatus"
DEP_ERROR = "error"

StatusLookup = Callable[[int], "str | None"]


def evaluate(job_id: int, dep_id: int, wanted: list[str],
             dep_status: str | None) -> tuple[str, str]:
    """Evaluate one dependency of job ``job_id`` on ``dep_id``.

    ``dep_status`` is the dependency's status, or None when it is unknown
    (neither in the queue nor in the archive).  Returns ``(result, message)``.
    """
    if dep_id == job_id:
        return DEP_ERROR, f"Job {job_id} can't depend on itself"
    if dep_status is None:
        return DEP_ERROR, f"Dependency job {dep_id} not found"
    if dep_status not in constants.JOBS_FINALIZED:
        return DEP_WAIT, f"Need to wait for job {dep_id}, wanted status '{_fmt(wanted)}'"
    if dep_status == constants.JOB_STATUS_CANCELED and constants.JOB_STATUS_CANCELED not in wanted:
        return DEP_CANCEL, f"Dependency job {dep_id} was canceled"
    if (not wanted and dep_status != constants.JOB_STATUS_CANCELED) or dep_status in wanted:
        return DEP_CONTINUE, f"Dependency job {dep_id} finished with status '{dep_status}'"
    return DEP_WRONGSTATUS, (f"Dependency job {dep_id} finished with status '{dep_status}',"
                             f" wanted '{_fmt(wanted)}'")


def _fmt(wanted: list[str]) -> str:
    return ",".join(wanted) if wanted else "any except canceled"


def find_cycle(waits_for: Callable[[int], "list[int]"], job_id: int,
               dep_id: int) -> list[int] | None:
    """The cycle closed by ``job_id`` waiting for ``dep_id``, or None.

    ``waits_for(j)`` gives the jobs ``j`` waits for now.  The answer is the
    path ``[job_id, dep_id, ..., job_id]`` through waiting jobs (the first
    one found, depth first); the walk visits each job at most once.
    """
    path = [job_id, dep_id]
    seen = {dep_id}
    stack = [iter(sorted(waits_for(dep_id)))]
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            path.pop()
            continue
        if nxt == job_id:
            return path + [job_id]
        if nxt in seen:
            continue
        seen.add(nxt)
        path.append(nxt)
        stack.append(iter(sorted(waits_for(nxt))))
    return None


def cycle_message(cycle: list[int]) -> str:
    """Error text of a job in ``cycle`` (``[5, 6, 5]``: 5 waits for 6, 6 for 5)."""
    chain = " -> ".join(str(j) for j in cycle)
    return f"Job dependency cycle: jobs {chain} wait for each other"


class DependencyManager:
    """Who waits for whom; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # dependency job id -> {waiting job id: wanted statuses}
        self._waiters: dict[int, dict[int, tuple[str, ...]]] = {}

    def add_waiter(self, dep_id: int, job_id: int, wanted: list[str]) -> None:
        with self._lock:
            self._waiters.setdefault(dep_id, {})[job_id] = tuple(wanted)

    def add_waiter_or_cycle(self, dep_id: int, job_id: int,
                            wanted: list[str]) -> list[int] | None:
        """Let ``job_id`` wait for ``dep_id``, unless that closes a cycle.

        Returns None when the wait was registered, else the cycle (see
        :func:`find_cycle`; nothing is registered then).
        """
        with self._lock:
            waits: dict[int, list[int]] = {}
            for dep, waiters in self._waiters.items():
                for waiter in waiters:
                    waits.setdefault(waiter, []).append(dep)
            cycle = find_cycle(lambda j: waits.get(j, []), job_id, dep_id)
            if cycle is None:
                self._waiters.setdefault(dep_id, {})[job_id] = tuple(wanted)
            return cycle

    def remove_job(self, job_id: int) -> None:
        """Forget every wait of ``job_id`` (e.g. when it is canceled)."""
        with self._lock:
            for dep_id in list(self._waiters):
                self._waiters[dep_id].pop(job_id, None)
                if not self._waiters[dep_id]:
                    del self._waiters[dep_id]

    def is_waiting(self, job_id: int) -> bool:
        with self._lock:
            return any(job_id in w for w in self._waiters.values())

    def job_finished(self, dep_id: int) -> list[int]:
        """``dep_id`` was finalized: return (and forget) the jobs waiting for it."""
        with self._lock:
            waiters = self._waiters.pop(dep_id, {})
        return sorted(waiters)

    def get_lock_info(self) -> list[dict[str, Any]]:
        """Lock-monitor entries: one pseudo-lock per awaited job."""
        with self._lock:
            snapshot = {dep: dict(w) for dep, w in self._waiters.items()}
        result = []
        for dep_id in sorted(snapshot):
            by_mode: dict[str, list[str]] = {}
            for job_id, wanted in sorted(snapshot[dep_id].items()):
                mode = ",".join(wanted) if wanted else "any"
                by_mode.setdefault(mode, []).append(f"job/{job_id}")
            result.append({"name": f"job/{dep_id}", "mode": None, "owner": [],
                           "pending": [[mode, owners] for mode, owners in sorted(by_mode.items())]})
        return result
