"""The replication plan: what goes to whom, in which order, and when.

Pure decision logic of the master's replication (doc/design/replication.md,
"Core and driver"): no threads, sockets, files or sleeps; time comes from
the ``clock`` given to :class:`ReplicationPlan`.  The thread driver
(:mod:`ganeti.replication.driver`) calls the plan under its own lock,
executes what it hands out (RPC calls, queue-file reads) and reports the
outcome back.

The plan keeps:

* **targets**: the online master candidates and the other online nodes,
  never the master (:func:`replication_targets`);
* **config pushes**: only the newest pending :class:`ConfigPush` is kept
  (a serial not newer than one already queued is ignored), one push is
  handed out at a time, and the ssconf values go along only when they
  differ from the last ones delivered everywhere;
* **the job-file stream**: an ordered log of :class:`Segment`, where
  consecutive operations of the same kind merge (:func:`merge_op`) until
  a candidate's lane takes them, and every other order is kept.  Each
  online candidate has a *lane* (:class:`LaneBatch`): its own position in
  the log and at most one batch on the wire, so a candidate gets every
  file's versions in order, the next batch goes out as soon as the lane's
  previous one was answered, and a slow or paused candidate delays only
  its own lane;
* **stale candidates**: nodes that missed a job-file operation get the
  whole queue in their lane one resync interval later (5 s, doubling per
  node while it keeps failing, up to 60 s), and are forgotten once they
  are no longer candidates;
* **held updates**: a file update nobody waits for (a job's status
  changes, see :data:`LAZY_DELAY`) may wait up to that long in the log
  for company; anything due in a lane's pending work (a new job's files,
  a rename, a due resync) takes the held updates along, in order;
* **flush marks**: what "everything queued so far was sent" means, as
  counters (:meth:`ReplicationPlan.flush_mark`, :meth:`ReplicationPlan.flushed`);
* **the quorum of job-file updates**: for every file update, which of the
  candidates it was meant for confirmed or failed it; it is decided as
  soon as a strict majority of the master candidates (the master counting
  as one) holds it, or can no longer hold it (:func:`quorum_needed`,
  :meth:`ReplicationPlan.quorum_outcome`): a new job is acknowledged only
  then (doc/design/replication.md, Invariant 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ganeti.objects import ConfigData, Node

__all__ = ["ReplicationPlan", "ConfigPush", "ConfigSend", "PushOutcome", "LaneBatch",
           "Segment", "FileUpdate", "Renames", "DrainFlag", "QueueCopy", "JobOp",
           "FlushMark", "merge_op", "replication_targets", "plan_queue_copy", "quorum_needed",
           "REPLICATION_TIMEOUT", "QUEUE_RESYNC_INTERVAL", "LAZY_DELAY",
           "QUEUE_RESYNC_MAX_INTERVAL", "QUEUE_COPY_CHUNK"]

#: Seconds a replication fan-out may take: jobs wait for config replication
#: before reporting success, so a hung candidate must not stall them for a
#: full RPC timeout.
REPLICATION_TIMEOUT = 15.0
#: seconds before resynchronising a candidate that missed job-file updates; it
#: doubles while the node keeps failing, up to QUEUE_RESYNC_MAX_INTERVAL
QUEUE_RESYNC_INTERVAL = 5.0
QUEUE_RESYNC_MAX_INTERVAL = 60.0
#: seconds a file update nobody waits for (a job's status change) may wait in
#: the log before its lane sends it: a new job's files, queued meanwhile,
#: take it along in the same request, so a job's updates cost the
#: candidates about one request each instead of one per status change
#: (doc/design/replication.md, "Held updates")
LAZY_DELAY = 0.02
#: bytes of job files per request when a whole queue is copied to a candidate
QUEUE_COPY_CHUNK = 4 << 20
#: file updates whose quorum failed that the plan remembers (a waiter asks
#: right after its update was sent, so a short history is enough)
QUORUM_FAILURES_KEPT = 64


def quorum_needed(candidates: int) -> int:
    """How many of ``candidates`` other master candidates must hold a job file
    so that, with the master's own copy, a strict majority of all
    ``candidates + 1`` master candidates holds it (0 with none)."""
    return (candidates + 1) // 2


# --- targets ----------------------------------------------------------------------

def _online_names(nodes: Iterable[Node]) -> list[str]:
    return sorted(n.name for n in nodes if not n.offline)


def replication_targets(data: ConfigData) -> tuple[list[str], list[str]]:
    """``(candidates, nodes)``: sorted names of the online master candidates
    and of every online node, both without the master."""
    master = data.cluster.master_node
    others = [n for n in data.nodes.values() if n.uuid != master]
    return _online_names(n for n in others if n.master_candidate), _online_names(others)


# --- config pushes ----------------------------------------------------------------

@dataclass(frozen=True)
class ConfigPush:
    """One config state to replicate: the bytes of ``serial`` and its targets."""

    serial: int
    data: bytes
    candidates: list[str]
    nodes: list[str]
    ssconf: dict[str, str]


@dataclass(frozen=True)
class ConfigSend:
    """A config push as handed out: what goes to whom.

    The candidates get the config bytes and the ssconf values when
    ``ssconf_changed``; ``ssconf_nodes`` (the other online nodes, only
    when the values changed) get the ssconf values alone.  Job files go
    in the candidates' lanes, never with a push.
    """

    push: ConfigPush
    ssconf_changed: bool
    ssconf_nodes: list[str]


@dataclass(frozen=True)
class PushOutcome:
    """What became of a :class:`ConfigSend`.

    ``candidates_failed``: the candidates whose push failed;
    ``ssconf_nodes_failed``: whether the ssconf-only fan-out failed
    anywhere (or did not finish in time).
    """

    candidates_failed: list[str]
    ssconf_nodes_failed: bool = False


# --- job-file operations ----------------------------------------------------------

@dataclass
class FileUpdate:
    """Job queue files to write on the candidates, ``{path: content}``."""

    files: dict[str, bytes]


@dataclass
class Renames:
    """Job queue files to rename (archiving), ``[(old, new)]`` in order."""

    pairs: list[tuple[str, str]]


@dataclass
class DrainFlag:
    """The queue drain flag to set (True) or clear (False) on the candidates."""

    flag: bool


@dataclass
class QueueCopy:
    """Nodes that get the master's whole unarchived queue (new candidates)."""

    nodes: list[str]


JobOp = FileUpdate | Renames | DrainFlag | QueueCopy


def merge_op(into: JobOp, later: JobOp) -> bool:
    """Merge ``later`` into ``into`` if they are of the same kind; whether it did.

    File updates: the latest content of a file wins; renames and copies
    append; drain flags: the last setting wins.
    """
    if isinstance(into, FileUpdate) and isinstance(later, FileUpdate):
        into.files.update(later.files)
    elif isinstance(into, Renames) and isinstance(later, Renames):
        into.pairs.extend(later.pairs)
    elif isinstance(into, QueueCopy) and isinstance(later, QueueCopy):
        into.nodes.extend(later.nodes)
    elif isinstance(into, DrainFlag) and isinstance(later, DrainFlag):
        into.flag = later.flag
    else:
        return False
    return True


@dataclass
class Segment:
    """A run of merged operations of one kind in the job-file stream.

    ``first`` and ``upto`` are the sequence numbers of the first and the
    last operation merged into it; ``due`` is when a lane must send it (0:
    at once; a held update's is later, see :data:`LAZY_DELAY`).  A file
    update also records its quorum:
    the candidates it is meant for (``targets``, those of its time) and
    which of them confirmed or failed it so far.
    """

    op: JobOp
    upto: int
    first: int = 0
    due: float = 0.0
    targets: tuple[str, ...] = ()
    confirmed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class LaneBatch:
    """What one candidate's lane sends next, in order: ``segments`` (maybe
    none), then, with ``resync``, the whole queue (it was stale).

    ``upto`` is the lane's position in the stream once it is sent.
    """

    node: str
    segments: list[Segment]
    upto: int
    resync: bool = False


@dataclass(frozen=True)
class FlushMark:
    """Everything queued when the mark was taken: a config serial and a job sequence."""

    serial: int
    job_seq: int


def plan_queue_copy(files: list[tuple[str, bytes]],
                    chunk: int = QUEUE_COPY_CHUNK) -> list[list[tuple[str, bytes]]]:
    """Split a whole queue into requests of about ``chunk`` bytes (at least one).

    Files keep their order; a part holds at least one file even when that
    file alone is larger.  The last part goes in ``jobqueue_sync``, the
    others in ``jobqueue_update_many``.
    """
    parts: list[list[tuple[str, bytes]]] = [[]]
    size = 0
    for path, data in files:
        if parts[-1] and size + len(data) > chunk:
            parts.append([])
            size = 0
        parts[-1].append((path, data))
        size += len(data)
    return parts


# --- the plan -----------------------------------------------------------------------

class ReplicationPlan:
    """The state of the master's replication, and every decision about it.

    Not thread-safe: the driver calls it under one lock.  Work is handed
    out by :meth:`take_config` and :meth:`take_lane` and must be reported
    back with :meth:`config_done` and :meth:`lane_done`; until then the
    same kind of work is not handed out again for the same target, so
    config pushes never overlap and each candidate has at most one
    job-file batch on the wire (it gets each file's versions in order).
    """

    def __init__(self, clock: Callable[[], float], *,
                 resync_interval: float = QUEUE_RESYNC_INTERVAL,
                 resync_max_interval: float = QUEUE_RESYNC_MAX_INTERVAL) -> None:
        self._clock = clock
        self._resync_interval = resync_interval
        self._resync_max_interval = resync_max_interval
        self._candidates: list[str] = []
        self._nodes: list[str] = []
        # config
        self._last_ssconf: dict[str, str] | None = None
        self._cfg_pending: ConfigPush | None = None
        self._cfg_queued = 0
        self._cfg_done = 0
        self._cand_serial: dict[str, int] = {}   # candidate -> newest serial it got
        self._cfg_busy = False
        self._cfg_wanted = 0                     # holders waiting for the config lane
        # job files: the log (segments some lane has still to take), and the lanes
        self._log: list[Segment] = []
        self._job_queued = 0
        self._taken = 0                          # newest sequence number any lane took
        self._lane_at: dict[str, int] = {}       # candidate -> position in the stream
        self._lane_busy: set[str] = set()
        self._lane_sent: dict[str, int] = {}     # candidate -> position reported back
        # file updates whose quorum is not decided yet, oldest first
        self._undecided: list[Segment] = []
        #: how many file updates' quorums were decided so far (a waiter for a
        #: quorum need only look again when it grew)
        self.decisions = 0
        # file updates whose quorum failed: (first, upto, why)
        self._quorum_failed: list[tuple[int, int, str]] = []
        # candidates that missed a job-file operation
        self._stale: set[str] = set()
        self._resync_at: dict[str, float] = {}     # stale node -> when its resync is due
        self._backoff: dict[str, float] = {}       # node -> its current resync interval

    # targets ---------------------------------------------------------------------
    def set_targets(self, candidates: list[str], nodes: list[str]) -> None:
        """Replace the targets (see :func:`replication_targets`).

        A new candidate's lane starts after everything queued so far (it
        gets the queue by a :class:`QueueCopy`); a node that is no longer
        a candidate loses its lane and counts as failed for the file
        updates still waiting for it.
        """
        self._candidates = list(candidates)
        self._nodes = list(nodes)
        for gone in set(self._lane_at) - set(candidates):
            del self._lane_at[gone]
            del self._lane_sent[gone]
            self._skip(gone, self._job_queued)
        for name in candidates:
            if name not in self._lane_at:
                self._lane_at[name] = self._lane_sent[name] = self._job_queued
        self.forget_stale()
        self._trim()

    def targets(self) -> tuple[list[str], list[str]]:
        """``(candidates, all other online nodes)`` as node names."""
        return list(self._candidates), list(self._nodes)

    def candidates(self) -> list[str]:
        """The current candidates: the targets of every job-file operation."""
        return list(self._candidates)

    def still_candidates(self, names: list[str]) -> list[str]:
        """The nodes of ``names`` that are still candidates (order kept)."""
        current = set(self._candidates)
        return [name for name in names if name in current]

    # config ------------------------------------------------------------------------
    def queue_config(self, serial: int, data: bytes, ssconf_values: dict[str, str]) -> bool:
        """Record ``data`` (config ``serial``) as the newest pending push, to the current targets.

        Replaces an older pending push.  Returns False (and keeps
        everything) when ``serial`` is not newer than one already queued:
        stale bytes never replace newer ones.
        """
        if serial <= self._cfg_queued:
            return False
        self._cfg_pending = ConfigPush(serial, data, list(self._candidates),
                                       list(self._nodes), ssconf_values)
        self._cfg_queued = serial
        return True

    @property
    def config_pending(self) -> bool:
        """Whether a config push waits to be handed out."""
        return self._cfg_pending is not None

    @property
    def config_busy(self) -> bool:
        """Whether a config push is handed out and not reported back yet."""
        return self._cfg_busy

    def queued_serial(self) -> int:
        """The newest config serial queued."""
        return self._cfg_queued

    def replicated_serial(self) -> int:
        """The newest config serial whose push was attempted."""
        return self._cfg_done

    def candidate_lag(self) -> dict[str, int]:
        """Per current candidate: how many config serials the newest queued one
        is ahead of the newest it received (0 for one never pushed to yet)."""
        queued = self._cfg_queued
        return {c: max(0, queued - self._cand_serial.get(c, queued)) for c in self._candidates}

    def take_config(self) -> ConfigSend | None:
        """Hand out the newest pending push, or None (nothing pending, one under
        way, or the config lane held or wanted: :meth:`want_config`)."""
        push = self._cfg_pending
        if push is None or self._cfg_busy or self._cfg_wanted:
            return None
        self._cfg_pending = None
        self._cfg_busy = True
        changed = push.ssconf != self._last_ssconf
        others = [n for n in push.nodes if n not in push.candidates] if changed else []
        return ConfigSend(push, changed, others)

    def want_config(self) -> None:
        """Announce a :meth:`hold_config` to come: from now until
        :meth:`unwant_config`, :meth:`take_config` hands out nothing, so the
        push under way is the last before the holder's turn (config writes
        arriving faster than pushes end cannot starve it)."""
        self._cfg_wanted += 1

    def unwant_config(self) -> None:
        """Withdraw one :meth:`want_config` (taken, or given up)."""
        self._cfg_wanted -= 1

    @property
    def config_wanted(self) -> bool:
        """Whether a holder waits for the config lane."""
        return self._cfg_wanted > 0

    def hold_config(self) -> bool:
        """Take the config lane for a push made outside the plan; False when a
        push is under way (the lane is not taken then).

        While held, :meth:`take_config` hands out nothing: pushes queued
        meanwhile wait and go after :meth:`release_config`, so a caller
        that writes the config on nodes itself (``gnt-cluster
        redist-conf``) cannot land older bytes after a newer push.
        """
        if self._cfg_busy:
            return False
        self._cfg_busy = True
        return True

    def release_config(self) -> None:
        """Give back the lane taken by :meth:`hold_config`."""
        self._cfg_busy = False

    def config_done(self, send: ConfigSend, outcome: PushOutcome | None) -> None:
        """Report a push handed out by :meth:`take_config` as attempted.

        ``outcome`` None means it broke off (an unexpected error): nothing
        is known about the nodes, and the last delivered ssconf values are
        kept.  Otherwise a failed ssconf delivery makes the next push send
        the values again.  The serial counts as replicated either way:
        per-node failures are only logged.
        """
        self._cfg_busy = False
        before = self._cfg_done
        self._cfg_done = max(self._cfg_done, send.push.serial)
        failed_now = set(send.push.candidates if outcome is None else outcome.candidates_failed)
        for cand in send.push.candidates:
            if cand in failed_now:
                # (the first push since start-up: it lacks at least this serial)
                self._cand_serial.setdefault(cand, before or send.push.serial - 1)
            else:
                self._cand_serial[cand] = max(self._cand_serial.get(cand, 0), send.push.serial)
        if outcome is None:
            return
        failed = send.ssconf_changed and bool(outcome.candidates_failed
                                              or outcome.ssconf_nodes_failed)
        self._last_ssconf = None if failed else send.push.ssconf

    # job files -------------------------------------------------------------------------
    def queue_job_op(self, op: JobOp, *, hold: bool = False) -> int:
        """Append ``op`` to the job-file stream; its sequence number (for
        :meth:`quorum_outcome`).

        It is merged into the last segment of the log when that is of the
        same kind and no lane has taken it yet.  A file update is meant
        for the current candidates; with none, its quorum (the master
        alone) is there at once.  With ``hold`` (a file update nobody
        waits for) it may wait :data:`LAZY_DELAY` for company.
        """
        self._job_queued += 1
        seq = self._job_queued
        if not self._lane_at:
            return seq      # nobody to send it to
        due = self._clock() + LAZY_DELAY if hold and isinstance(op, FileUpdate) else 0.0
        last = self._log[-1] if self._log else None
        if last is not None and last.upto > self._taken and merge_op(last.op, op):
            last.upto = seq
            last.due = min(last.due, due)
            return seq
        segment = Segment(op, seq, seq, due)
        if isinstance(op, FileUpdate):
            segment.targets = tuple(self._candidates)
            self._undecided.append(segment)
        self._log.append(segment)
        return seq

    def lane_nodes(self) -> list[str]:
        """The candidates that have a lane (sorted)."""
        return sorted(self._lane_at)

    def has_lane(self, node: str) -> bool:
        """Whether ``node`` (still) has a lane: it is a candidate."""
        return node in self._lane_at

    def _pending_for(self, node: str) -> list[Segment]:
        at = self._lane_at[node]
        return [seg for seg in self._log if seg.upto > at
                and (not isinstance(seg.op, QueueCopy) or node in seg.op.nodes)]

    def lane_pending(self, node: str) -> bool:
        """Whether ``node``'s lane has something to send now (segments of
        which one is due, or a due resync)."""
        if node not in self._lane_at or node in self._lane_busy:
            return False
        return self._due(self._pending_for(node)) or self.resync_due(node)

    def _due(self, segments: list[Segment]) -> bool:
        """Whether ``segments`` (pending in a lane) must go now: one of them is due."""
        if not segments:
            return False
        now = self._clock()
        return any(seg.due <= now for seg in segments)

    def lane_wait(self, node: str) -> float | None:
        """Seconds an idle lane of ``node`` may sleep: until its held updates
        or its resync are due; None when it has nothing coming."""
        waits = []
        resync = self.resync_wait(node)
        if resync is not None:
            waits.append(resync)
        if node in self._lane_at:
            pending = self._pending_for(node)
            if pending:
                waits.append(max(0.001, min(seg.due for seg in pending) - self._clock()))
        return min(waits) if waits else None

    def lane_busy(self, node: str) -> bool:
        """Whether ``node``'s lane has a batch on the wire."""
        return node in self._lane_busy

    def take_lane(self, node: str, resync_alone: bool = True,
                  hold: bool = True) -> LaneBatch | None:
        """Hand out everything ``node``'s lane has to send now, or None.

        None while the lane has a batch on the wire, for a node without a
        lane, and when nothing is pending unless ``resync_alone`` and the
        node is stale with its resync due: then the batch has no segments
        and only resynchronises (and flushes wait for it like for an
        operation).  A due resync also follows a batch's segments.  With
        ``hold``, pending segments none of which is due yet (held updates,
        see :data:`LAZY_DELAY`) wait, unless a resync is due.
        """
        if node not in self._lane_at or node in self._lane_busy:
            return None
        segments = self._pending_for(node)
        resync = self.resync_due(node)
        if segments and hold and not resync and not self._due(segments):
            return None
        if segments:
            upto = self._log[-1].upto
        elif resync and resync_alone:
            self._job_queued += 1
            upto = self._job_queued
        else:
            return None
        if resync:
            self._stale.discard(node)
            del self._resync_at[node]
        self._lane_busy.add(node)
        self._lane_at[node] = upto
        self._taken = max(self._taken, upto)
        return LaneBatch(node, segments, upto, resync)

    def lane_done(self, batch: LaneBatch, sent: int, resync_failed: bool = False) -> list[str]:
        """Report a batch handed out by :meth:`take_lane`; why the file updates
        whose quorum failed with this report failed (usually none).

        The first ``sent`` segments were confirmed by the node; the others
        failed or were not tried.  A failure makes the node stale, and its
        lane skips what was queued meanwhile (its resync brings the whole
        queue), counting as failed for those file updates; not when the
        batch's resync (sent after the segments, reading the master's
        files then) worked.  A failed resync (``resync_failed``) keeps it
        stale, with a longer backoff.
        """
        node = batch.node
        failures_before = len(self._quorum_failed)
        self._lane_busy.discard(node)
        if node in self._lane_at:
            self._lane_sent[node] = batch.upto
        for idx, segment in enumerate(batch.segments):
            if idx < sent:
                segment.confirmed.add(node)
            else:
                segment.failed.add(node)
            self._decide(segment)
        if batch.resync:
            self.resync_done(node, resync_failed)
        caught_up = batch.resync and not resync_failed   # the copy, read later, has it all
        if sent < len(batch.segments) and node in self._lane_at and not caught_up:
            self._skip(node, self._job_queued)
            self._lane_at[node] = self._lane_sent[node] = self._job_queued
            self.mark_stale([node])
        self._trim()
        return [why for _, _, why in self._quorum_failed[failures_before:]]

    def _skip(self, node: str, upto: int) -> None:
        """``node`` will not confirm the undecided file updates up to ``upto``."""
        for segment in list(self._undecided):
            if segment.first <= upto and node in segment.targets \
                    and node not in segment.confirmed:
                segment.failed.add(node)
                self._decide(segment)

    def _decide(self, segment: Segment) -> None:
        """Decide a file update's quorum once a majority holds it or no longer can."""
        if segment not in self._undecided:
            return
        targets = set(segment.targets)
        confirmed = len(segment.confirmed & targets)
        bad = segment.failed & targets
        need = quorum_needed(len(targets))
        if confirmed >= need:
            self._undecided.remove(segment)
            self.decisions += 1
        elif len(targets) - len(bad) < need:
            self._undecided.remove(segment)
            self.decisions += 1
            why = (f"stored on {confirmed + 1} of {len(targets) + 1} master candidates, a"
                   f" strict majority ({need + 1}) is needed; not stored on"
                   f" {', '.join(sorted(bad))}")
            kept = self._quorum_failed[-(QUORUM_FAILURES_KEPT - 1):]
            self._quorum_failed = [*kept, (segment.first or segment.upto, segment.upto, why)]

    def _trim(self) -> None:
        """Drop the segments every lane has taken."""
        if not self._lane_at:
            self._log = []
            return
        low = min(self._lane_at.values())
        while self._log and self._log[0].upto <= low:
            self._log.pop(0)

    # quorum of file updates ---------------------------------------------------------
    def quorum_outcome(self, seq: int) -> tuple[bool, str | None]:
        """``(known, failure)`` for the job-file operation numbered ``seq``.

        ``known`` is False while a strict majority of the candidates has
        neither confirmed the operation's file update nor become unable
        to; then ``failure`` is None when a majority confirmed it, else
        why not.  A failure forgotten meanwhile (more than
        :data:`QUORUM_FAILURES_KEPT` later ones) reads as success:
        waiters ask right after theirs was decided.
        """
        if seq > self._job_queued:
            return False, None
        for segment in self._undecided:
            if segment.first <= seq <= segment.upto:
                return False, None
        for first, upto, why in self._quorum_failed:
            if first <= seq <= upto:
                return True, why
        return True, None

    # stale candidates ----------------------------------------------------------------
    def mark_stale(self, node_names: Iterable[str]) -> None:
        """Remember candidates that missed a job-file operation.

        A node's first resync comes one backoff interval later (an
        immediate one would most likely fail the same way, and could cross
        a request of the failed operation still running on the node);
        more failures before it do not postpone it.
        """
        now = self._clock()
        for name in node_names:
            if name not in self._stale:
                self._stale.add(name)
                self._resync_at[name] = now + self._backoff.get(name, self._resync_interval)

    def stale(self) -> set[str]:
        """The candidates waiting for a resync."""
        return set(self._stale)

    def resync_due(self, node: str | None = None) -> bool:
        """Whether ``node``'s resync (any stale node's, without one) is due now."""
        now = self._clock()
        nodes = self._stale if node is None else self._stale & {node}
        return any(now >= self._resync_at[name] for name in nodes)

    def resync_wait(self, node: str | None = None) -> float | None:
        """Seconds until ``node``'s (without one: the next) resync; None when not stale."""
        nodes = self._stale if node is None else self._stale & {node}
        if not nodes:
            return None
        return max(0.05, min(self._resync_at[name] for name in nodes) - self._clock())

    def forget_stale(self) -> None:
        """Forget stale nodes that are no longer candidates."""
        for name in self._stale - set(self._lane_at):
            self._stale.discard(name)
            self._resync_at.pop(name, None)
            self._backoff.pop(name, None)

    def resync_done(self, node: str, failed: bool) -> None:
        """After ``node``'s resync: when it failed the node stays stale and its
        interval doubles (up to the maximum); else the interval starts over."""
        if not failed:
            self._backoff.pop(node, None)
            return
        backoff = min(self._backoff.get(node, self._resync_interval) * 2,
                      self._resync_max_interval)
        self._backoff[node] = backoff
        if node in self._lane_at:
            self._stale.add(node)
            self._resync_at[node] = self._clock() + backoff

    # flush -------------------------------------------------------------------------------
    def flush_mark(self) -> FlushMark:
        """A mark of everything queued so far (config and job files)."""
        return FlushMark(self._cfg_queued, self._job_queued)

    def _lane_done_upto(self, node: str) -> int:
        if node in self._lane_busy or self._pending_for(node):
            return self._lane_sent[node]
        return self._job_queued

    def flushed(self, mark: FlushMark) -> bool:
        """Whether everything queued up to ``mark`` was attempted on every lane."""
        return self._cfg_done >= mark.serial and all(
            self._lane_done_upto(node) >= mark.job_seq for node in self._lane_at)
