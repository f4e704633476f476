"""The checker of the master-role fault-injection suite: a pure function over a recorded history.

doc/design/failover.md, "Fault injection".  A round of
``test/integration/master_nemesis.py`` records every job a client got
acknowledged (:class:`Ack`: its unique marker, id, the node that answered,
the master epoch that node's configuration held around the call, and when
the call was sent and answered on one monotonic clock), what the job files
on the working master's disk hold after recovery, and how long recovery
took.  :func:`check` then lists every broken promise as a
:class:`Violation` of one of the :data:`KINDS`:

* ``lost``: an acknowledged job id has no job file;
* ``changed``: its job file carries another marker than the acknowledged one;
* ``duplicated``: one marker is in more than one job file;
* ``id_reused``: one job id was acknowledged for two different markers;
* ``ids_not_increasing``: a job acknowledged in a later epoch has an id not
  above one acknowledged in an earlier epoch;
* ``two_masters``: two nodes acknowledged jobs in the same epoch, or a
  master acknowledged a job sent after a master of a newer epoch had
  already acknowledged one (both accepted writes at one moment);
* ``stale_master``: a node acknowledged a job while its own configuration,
  before and after the call, named another node the master;
* ``no_master``: no working master within the stated time after the faults
  stopped.

No I/O, no clock: unit-tested with hand-made histories
(``test/tools/test_master_history.py``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Ack", "History", "Violation", "KINDS", "check", "count_by_kind"]

KINDS = ("lost", "changed", "duplicated", "id_reused", "ids_not_increasing", "two_masters",
         "stale_master", "no_master")


@dataclass(frozen=True)
class Ack:
    """One acknowledged submission, as the client saw it.

    ``epoch`` is the ``master_epoch`` of the answering node's configuration
    read just before the call and again just after it, when both reads
    agree (None otherwise: a failover touched that node meanwhile, the ack
    then takes no part in the epoch checks).  ``named_master`` says whether
    that configuration named the answering node the master.
    """

    marker: str
    job_id: int
    node: str
    epoch: int | None
    named_master: bool
    sent: float
    acked: float


@dataclass
class History:
    """What one round recorded.

    ``jobs`` maps every job id found on the working master's disk after
    recovery (queue and archive) to the marker in its file (None: no
    marker, e.g. a job of another client).  ``recovered_after`` is the
    seconds from the end of the faults to the first job a master
    acknowledged (None: none within the round).
    """

    acks: list[Ack] = field(default_factory=list)
    jobs: dict[int, str | None] = field(default_factory=dict)
    #: job id -> marker acknowledged in earlier rounds on the same cluster
    earlier: dict[int, str] = field(default_factory=dict)
    recovered_after: float | None = None
    recovery_limit: float = 45.0


@dataclass(frozen=True)
class Violation:
    """One broken promise: its kind (one of :data:`KINDS`) and what shows it."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def _content_violations(acks: Sequence[Ack], jobs: Mapping[int, str | None]) -> list[Violation]:
    found: list[Violation] = []
    copies: dict[str, list[int]] = {}
    for job_id, marker in jobs.items():
        if marker is not None:
            copies.setdefault(marker, []).append(job_id)
    for ack in acks:
        if ack.job_id not in jobs:
            found.append(Violation("lost", f"job {ack.job_id} ({ack.marker}, acknowledged by"
                                           f" {ack.node}) has no job file"))
        elif jobs[ack.job_id] != ack.marker:
            found.append(Violation("changed", f"job {ack.job_id} was acknowledged for"
                                              f" {ack.marker} but its file holds"
                                              f" {jobs[ack.job_id]}"))
    for marker, ids in sorted(copies.items()):
        if len(ids) > 1:
            found.append(Violation("duplicated", f"{marker} is in jobs {sorted(ids)}"))
    return found


def _reuse_violations(acks: Sequence[Ack], earlier: Mapping[int, str]) -> list[Violation]:
    first: dict[int, Ack] = {}
    found: list[Violation] = []
    for ack in acks:
        if ack.job_id in earlier and earlier[ack.job_id] != ack.marker:
            found.append(Violation("id_reused", f"job id {ack.job_id} acknowledged for"
                                                f" {ack.marker} by {ack.node} was"
                                                f" acknowledged for {earlier[ack.job_id]}"
                                                " in an earlier round"))
            continue
        other = first.setdefault(ack.job_id, ack)
        if other is not ack and other.marker != ack.marker:
            found.append(Violation("id_reused", f"job id {ack.job_id} acknowledged for"
                                                f" {other.marker} by {other.node} and for"
                                                f" {ack.marker} by {ack.node}"))
    return found


def _epoch_violations(acks: Sequence[Ack]) -> list[Violation]:
    known = [a for a in acks if a.epoch is not None and a.named_master]
    found: list[Violation] = []
    by_epoch: dict[int, list[Ack]] = {}
    for ack in known:
        by_epoch.setdefault(ack.epoch or 0, []).append(ack)
    epochs = sorted(by_epoch)
    for epoch in epochs:
        nodes = sorted({a.node for a in by_epoch[epoch]})
        if len(nodes) > 1:
            found.append(Violation("two_masters", f"epoch {epoch} acknowledged jobs on"
                                                  f" {', '.join(nodes)}"))
    highest_before: int | None = None
    for epoch in epochs:
        ids = [a.job_id for a in by_epoch[epoch]]
        if highest_before is not None and min(ids) <= highest_before:
            found.append(Violation("ids_not_increasing", f"epoch {epoch} acknowledged job"
                                                         f" {min(ids)}, not above job"
                                                         f" {highest_before} of an earlier"
                                                         " epoch"))
        highest_before = max(ids + ([highest_before] if highest_before is not None else []))
    # the newest epoch that had acknowledged a job by each moment
    ordered = sorted(known, key=lambda a: a.acked)
    times = [a.acked for a in ordered]
    newest: list[Ack] = []
    for ack in ordered:
        newest.append(ack if not newest or (ack.epoch or 0) > (newest[-1].epoch or 0)
                      else newest[-1])
    for ack in known:
        idx = bisect.bisect_left(times, ack.sent) - 1
        if idx >= 0 and (newest[idx].epoch or 0) > (ack.epoch or 0):
            later = newest[idx]
            found.append(Violation("two_masters", f"{ack.node} (epoch {ack.epoch})"
                                                  f" acknowledged job {ack.job_id} sent after"
                                                  f" {later.node} (epoch {later.epoch}) had"
                                                  f" acknowledged job {later.job_id}"))
    for ack in acks:
        if ack.epoch is not None and not ack.named_master:
            found.append(Violation("stale_master", f"{ack.node} acknowledged job {ack.job_id}"
                                                   " while its configuration (epoch"
                                                   f" {ack.epoch}) named another master"))
    return found


def check(history: History) -> list[Violation]:
    """Every violation the history shows (empty: the round kept every promise)."""
    found = _reuse_violations(history.acks, history.earlier)
    found += _content_violations(history.acks, history.jobs)
    found += _epoch_violations(history.acks)
    if history.recovered_after is None or history.recovered_after > history.recovery_limit:
        found.append(Violation("no_master", "no master acknowledged a job within"
                                            f" {history.recovery_limit:g}s after the faults"
                                            " stopped"
                                            + (f" (first after {history.recovered_after:.1f}s)"
                                               if history.recovered_after is not None else "")))
    return found


def count_by_kind(violations: Sequence[Violation]) -> dict[str, int]:
    """``{kind: count}`` for every kind in :data:`KINDS` (zeros included)."""
    counts = dict.fromkeys(KINDS, 0)
    for violation in violations:
        counts[violation.kind] = counts.get(violation.kind, 0) + 1
    return counts
