"""The master's lease and job id reservation: pure state, driven by a clock.

doc/design/failover.md, "Master lease and job id reservation": the master
accepts jobs and writes its configuration only while a strict majority of
nodes confirmed it within the last ``duration`` seconds (counted from when
the confirmation was *sent*), and hands out job ids and config serials
only up to what such a majority reserved.
Once a majority of the nodes refused its epoch, the master is fenced for good.

Master epochs are distinct per taker: :func:`next_epoch` encodes the pair
(number, taker rank) as ``number * EPOCH_STRIDE + rank``, so two nodes
taking over at once never claim the same epoch and the nodes order them
(doc/design/failover.md, "Concurrent takers").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ganeti import errors

__all__ = ["MasterLease", "Renewal", "LEASE_DURATION", "RESERVE_BLOCK", "SYNC", "ASYNC",
           "EPOCH_STRIDE", "next_epoch", "taker_rank", "epoch_parts"]

#: seconds a majority confirmation lets the master accept jobs
LEASE_DURATION = 6.0
#: job ids reserved beyond the last one by each renewal
RESERVE_BLOCK = 1000
SYNC = "sync"
ASYNC = "async"
#: epochs per epoch number: the rank of a taker (its place among the
#: configuration's node names) is the low part of its epoch
EPOCH_STRIDE = 1 << 16


def taker_rank(names: Sequence[str], me: str) -> int:
    """``me``'s rank (1-based) among the sorted node names; 0 when it is not one of them."""
    ordered = sorted(set(names))
    return ordered.index(me) + 1 if me in ordered else 0


def next_epoch(highest_seen: int, rank: int) -> int:
    """The epoch a taker of ``rank`` claims: the next epoch number above
    ``highest_seen``, with ``rank`` as the low part.

    Two takers that saw the same epochs claim different epochs; the one of
    higher rank wins where both reach a node.  Raises
    :class:`errors.ProgrammerError` for a rank outside ``[0, EPOCH_STRIDE)``.
    """
    if not 0 <= rank < EPOCH_STRIDE:
        raise errors.ProgrammerError(f"Taker rank {rank} outside 0..{EPOCH_STRIDE - 1}")
    return (max(highest_seen, 0) // EPOCH_STRIDE + 1) * EPOCH_STRIDE + rank


def epoch_parts(epoch: int) -> tuple[int, int]:
    """``(number, rank)`` of an epoch made by :func:`next_epoch`."""
    return divmod(epoch, EPOCH_STRIDE)


@dataclass(frozen=True)
class Renewal:
    """One renewal to send: when it was started, the job id and config serial
    to reserve up to."""

    sent_at: float
    reserve: int
    reserve_serial: int = 0


class MasterLease:
    """Whether the master may accept ``count`` more jobs now, and when to renew.

    Not thread-safe: the caller holds a lock.  ``clock`` is monotonic.
    """

    def __init__(self, clock: Callable[[], float], *, duration: float = LEASE_DURATION,
                 block: int = RESERVE_BLOCK) -> None:
        self._clock = clock
        self.duration = duration
        self.block = block
        self.valid_until = float("-inf")
        self.reserved = 0
        self.reserved_serial = 0
        self.fenced: str | None = None
        self.last_failure: str | None = None

    def now(self) -> float:
        """The lease's clock."""
        return self._clock()

    def start_renewal(self, last_id: int, count: int = 0, serial: int = 0) -> Renewal:
        """A renewal to send now: job ids up to a block above ``last_id + count``
        and config serials up to a block above ``serial`` stay reserved (the
        reservations never shrink)."""
        return Renewal(self._clock(), max(self.reserved, last_id + count + self.block),
                       max(self.reserved_serial, serial + self.block))

    def confirmed(self, renewal: Renewal) -> None:
        """A majority confirmed ``renewal``."""
        self.valid_until = max(self.valid_until, renewal.sent_at + self.duration)
        self.reserved = max(self.reserved, renewal.reserve)
        self.reserved_serial = max(self.reserved_serial, renewal.reserve_serial)
        self.last_failure = None

    def failed(self, why: str) -> None:
        """A renewal found no majority (the lease runs out on its own)."""
        self.last_failure = why

    def fence(self, why: str) -> None:
        """A node refused our epoch: never accept jobs again."""
        if self.fenced is None:
            self.fenced = why

    def need(self, last_id: int, count: int, serial: int = 0, *,
             timed: bool = True) -> str | None:
        """:data:`SYNC` (renew before going on), :data:`ASYNC` (renew soon) or None.

        For ``count`` more jobs after ``last_id``, or a config write of
        ``serial``.  ``timed=False`` (a ``--no-voting`` master) looks at the
        reservations only.
        """
        now = self._clock() if timed else float("-inf")
        if now >= self.valid_until or last_id + count > self.reserved \
                or serial > self.reserved_serial:
            return SYNC
        if now >= self.valid_until - self.duration / 2 \
                or last_id + count > self.reserved - self.block // 2 \
                or serial > self.reserved_serial - self.block // 2:
            return ASYNC
        return None

    def refusal(self, last_id: int, count: int, serial: int = 0, *,
                timed: bool = True) -> str | None:
        """Why ``count`` more jobs (or a config write of ``serial``) may not
        go ahead now (None: they may); ``timed=False`` ignores the lease's
        expiry (the reservations still hold)."""
        if self.fenced is not None:
            return self.fenced
        if timed and self._clock() >= self.valid_until:
            if self.last_failure:
                why = self.last_failure
            elif self.valid_until == float("-inf"):
                why = "no confirmation yet"
            else:
                why = (f"confirmations come back later than the {self.duration:g} s lease"
                       " after their renewal was sent: the master or the nodes are too slow")
            return ("The master lease has expired: a majority of the nodes has not confirmed"
                    f" this master recently ({why}); refusing jobs and configuration changes"
                    " until it can reach them")
        if last_id + count > self.reserved:
            return (f"Job ids are reserved only up to {self.reserved} on a majority of the"
                    " nodes; refusing jobs until the reservation is renewed")
        if serial > self.reserved_serial:
            return (f"Configuration serials are reserved only up to {self.reserved_serial}"
                    f" on a majority of the nodes; refusing to write serial {serial}")
        return None
