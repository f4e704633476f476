"""Master autopromotion: when is the master gone, and which candidate takes over.

Pure decision logic, no sockets and no sleeps (doc/ha.md, "Master
autopromotion").  With the cluster parameter ``auto_promote`` on, the
master daemon renews its lease every :func:`heartbeat_interval` seconds
even when idle, and every node records when it last confirmed a renewal.
On each master candidate the node daemon feeds :class:`Watch` with what it
sees locally (timers in, actions out); when no renewal came for
:func:`master_timeout` seconds, :meth:`Watch.tick` says :data:`CHECK`: the
node daemon asks every candidate (``master_vote_info``, which reports each
node's time since its last confirmation) and :func:`elect` decides:

* the master is gone only when a strict majority of the master candidates
  of the configuration (the master counted, it never confirms) report no
  renewal for at least half the timeout (the asking node waited the whole
  timeout; the others' timers run a little behind or ahead of it), and
  name the same master;
* among the candidates that confirmed, the winner has the highest config
  serial, then the highest job id (what the master vote compares,
  doc/design/failover.md, "The vote"), then comes first in the sorted
  node names (a fixed order every candidate computes alike);
* only the winner acts: it runs the ordinary takeover (vote, claim,
  epoch, push), which stays the safety net: two candidates that both
  believe they won cannot both take over (doc/design/failover.md,
  "Concurrent takers").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ganeti.failover.vote import NodeAnswer

__all__ = ["IDLE", "CHECK", "LocalView", "Watch", "Election", "elect", "rank_key",
           "master_timeout", "heartbeat_interval", "MIN_TIMEOUT", "RETRY_INTERVAL"]

IDLE = "idle"
CHECK = "check"
#: the master is declared gone after this many lease durations without a renewal
TIMEOUT_LEASES = 1.5
#: ... but never after less than this many seconds
MIN_TIMEOUT = 5.0
#: seconds between two checks of one candidate while the master stays gone
RETRY_INTERVAL = 2.0


def master_timeout(lease: float) -> float:
    """Seconds without a lease renewal after which a candidate asks the others."""
    return max(MIN_TIMEOUT, TIMEOUT_LEASES * lease)


def heartbeat_interval(lease: float) -> float:
    """Seconds between the master's renewals while ``auto_promote`` is on
    (several fit in :func:`master_timeout`, so a late one is not a death)."""
    return max(0.2, lease / 3.0)


@dataclass(frozen=True)
class LocalView:
    """What a node sees without asking anybody.

    ``enabled``: ``auto_promote`` in its configuration; ``candidate``: it is
    an online master candidate there; ``master``: its configuration names it
    the master; ``contact``: when (monotonic) it last confirmed a master's
    lease renewal, None if never; ``epoch``: the master epoch of its
    configuration (a new master restarts the timer).
    """

    enabled: bool
    candidate: bool
    master: bool
    contact: float | None
    epoch: int = 0


class Watch:
    """One candidate's timer: :meth:`tick` with the clock and the local view,
    :data:`CHECK` when it is time to ask the other candidates.

    The timer starts when the node becomes an enabled candidate (turning
    ``auto_promote`` on never counts the time before as silence), and again
    when its configuration names a new master epoch; a check
    is not repeated for :attr:`retry` seconds, nor while the previous one
    runs (``busy``).
    """

    def __init__(self, timeout: float, *, retry: float = RETRY_INTERVAL) -> None:
        self.timeout = timeout
        self.retry = retry
        self.armed_since: float | None = None
        self.last_check: float | None = None
        self.epoch: int | None = None

    def silence(self, now: float, view: LocalView) -> float:
        """Seconds without a renewal as this node counts them (0 when not armed)."""
        if self.armed_since is None:
            return 0.0
        start = self.armed_since if view.contact is None else max(view.contact,
                                                                   self.armed_since)
        return max(0.0, now - start)

    def tick(self, now: float, view: LocalView, *, busy: bool = False) -> str:
        """:data:`CHECK` or :data:`IDLE`."""
        if not view.enabled or not view.candidate or view.master:
            self.armed_since = None
            self.last_check = None
            return IDLE
        if self.armed_since is None or view.epoch != self.epoch:
            self.armed_since = now
            self.epoch = view.epoch
        if busy or self.silence(now, view) < self.timeout:
            return IDLE
        if self.last_check is not None and now - self.last_check < self.retry:
            return IDLE
        self.last_check = now
        return CHECK

    def next_due(self, now: float, view: LocalView) -> float | None:
        """When :meth:`tick` could next say :data:`CHECK` (None: not armed)."""
        if self.armed_since is None:
            return None
        due = now + max(0.0, self.timeout - self.silence(now, view))
        if self.last_check is not None:
            due = max(due, self.last_check + self.retry)
        return due


@dataclass(frozen=True)
class Election:
    """The outcome of :func:`elect`: whether the master is gone, who should take
    over (None: nobody may), and why, in one line."""

    gone: bool
    winner: str | None
    reason: str


def rank_key(answer: NodeAnswer) -> tuple[int, int]:
    """How candidates compare (higher wins): config serial, then highest job id."""
    return (answer.config_serial or 0, answer.highest_job_id)


def elect(master: str, candidates: Sequence[str],
          answers: Mapping[str, NodeAnswer | str], timeout: float) -> Election:
    """Decide on the master's death and the winner (see the module docstring).

    ``candidates``: the master candidates of the asking node's
    configuration (the master included); ``answers``: each one's
    ``master_vote_info`` answer or why it gave none.
    """
    names = sorted(set(candidates) | {master})
    need = len(names) // 2 + 1
    confirming: list[NodeAnswer] = []
    alive: list[str] = []
    for name in names:
        ans = answers.get(name)
        if name == master or not isinstance(ans, NodeAnswer):
            continue
        if ans.master != master:
            alive.append(f"{name} names {ans.master or 'no master'}")
        elif ans.contact_age is not None and ans.contact_age < timeout / 2:
            alive.append(f"{name} heard from {master} {ans.contact_age:.1f}s ago")
        elif ans.candidate:
            confirming.append(ans)
    if len(confirming) < need:
        why = "; ".join(alive) or "too few candidates answered"
        return Election(False, None, f"{len(confirming)} of {len(names)} master candidates"
                        f" confirm that {master} is gone, {need} needed ({why})")
    # max() keeps the first of equals: the first in name order
    best = max(sorted(confirming, key=lambda a: a.node), key=rank_key)
    return Election(True, best.node, f"{len(confirming)} of {len(names)} master candidates"
                    f" confirm that {master} is gone; {best.node} takes over (config serial"
                    f" {best.config_serial or 0}, job id {best.highest_job_id})")
