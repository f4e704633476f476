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
* **the job-file stream**: an ordered list of :class:`Segment`, where
  consecutive operations of the same kind merge (:func:`merge_op`) and
  every other order is kept; one batch is handed out at a time, and a
  config push may carry the first segment when it is a file update;
* **stale candidates**: nodes that missed a job-file operation get the
  whole queue one resync interval later (5 s, doubling while they keep
  failing, up to 60 s), and are forgotten once they are no longer
  candidates;
* **flush marks**: what "everything queued so far was sent" means, as
  counters (:meth:`ReplicationPlan.flush_mark`, :meth:`ReplicationPlan.flushed`);
* **the quorum of job-file updates**: for every file update sent, whether
  a strict majority of the master candidates (the master counting as one)
  now holds it (:func:`quorum_needed`, :meth:`ReplicationPlan.quorum_outcome`):
  a new job is acknowledged only then (doc/design/replication.md,
  Invariant 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ganeti.objects import ConfigData, Node

__all__ = ["ReplicationPlan", "ConfigPush", "ConfigSend", "PushOutcome", "JobBatch",
           "Segment", "FileUpdate", "Renames", "DrainFlag", "QueueCopy", "JobOp",
           "FlushMark", "merge_op", "replication_targets", "plan_queue_copy", "quorum_needed",
           "REPLICATION_TIMEOUT", "JOB_LINGER", "QUEUE_RESYNC_INTERVAL",
           "QUEUE_RESYNC_MAX_INTERVAL", "QUEUE_COPY_CHUNK"]

#: Seconds a replication fan-out may take: jobs wait for config replication
#: before reporting success, so a hung candidate must not stall them for a
#: full RPC timeout.
REPLICATION_TIMEOUT = 15.0
#: How long the job replication thread leaves freshly queued job files for a
#: config push (already pending or in flight) to carry in the same RPC.
JOB_LINGER = 0.05
#: seconds before resynchronising a candidate that missed job-file updates; it
#: doubles while the node keeps failing, up to QUEUE_RESYNC_MAX_INTERVAL
QUEUE_RESYNC_INTERVAL = 5.0
QUEUE_RESYNC_MAX_INTERVAL = 60.0
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

    The candidates get the config bytes, the ssconf values when
    ``ssconf_changed``, and ``files`` (the job-file update it carries, or
    none); ``ssconf_nodes`` (the other online nodes, only when the values
    changed) get the ssconf values alone.
    """

    push: ConfigPush
    ssconf_changed: bool
    ssconf_nodes: list[str]
    carried: Segment | None

    @property
    def files(self) -> dict[str, bytes]:
        """The job files carried along (``{path: content}``, maybe empty)."""
        if self.carried is not None and isinstance(self.carried.op, FileUpdate):
            return self.carried.op.files
        return {}


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
    last operation merged into it.
    """

    op: JobOp
    upto: int
    first: int = 0


@dataclass(frozen=True)
class JobBatch:
    """The job-file segments handed out to be sent in order (maybe none:
    a resync on its own), then the resync of stale candidates."""

    segments: list[Segment]
    upto: int


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
    out by :meth:`take_config` and :meth:`take_jobs` and must be reported
    back with :meth:`config_done` and :meth:`jobs_done`; until then the
    same kind of work is not handed out again, so config pushes never
    overlap and job-file sends never overlap (a candidate gets each
    file's versions in order).  A config push that carries a job segment
    counts as a job-file send.
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
        # job files
        self._segments: list[Segment] = []
        self._job_queued = 0
        self._job_done = 0
        self._job_busy = False
        # file updates sent to fewer candidates than a quorum: (first, upto, why)
        self._quorum_failed: list[tuple[int, int, str]] = []
        # candidates that missed a job-file operation
        self._stale: set[str] = set()
        self._resync_at = 0.0
        self._resync_backoff = resync_interval

    # targets ---------------------------------------------------------------------
    def set_targets(self, candidates: list[str], nodes: list[str]) -> None:
        """Replace the targets (see :func:`replication_targets`)."""
        self._candidates = list(candidates)
        self._nodes = list(nodes)

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

    @property
    def config_active(self) -> bool:
        """A config push is pending or under way (it may carry job files)."""
        return self._cfg_pending is not None or self._cfg_busy

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

    def take_config(self, carry_jobs: bool = True) -> ConfigSend | None:
        """Hand out the newest pending push, or None (nothing pending, or one under way).

        With ``carry_jobs``, when no job-file send is under way and the
        first pending job segment is a file update, the push carries it.
        """
        push = self._cfg_pending
        if push is None or self._cfg_busy:
            return None
        self._cfg_pending = None
        self._cfg_busy = True
        carried = None
        if carry_jobs and not self._job_busy and self._segments \
                and isinstance(self._segments[0].op, FileUpdate):
            carried = self._segments.pop(0)
            self._job_busy = True
        changed = push.ssconf != self._last_ssconf
        others = [n for n in push.nodes if n not in push.candidates] if changed else []
        return ConfigSend(push, changed, others, carried)

    def config_done(self, send: ConfigSend, outcome: PushOutcome | None) -> None:
        """Report a push handed out by :meth:`take_config` as attempted.

        ``outcome`` None means it broke off (an unexpected error): nothing
        is known about the nodes, so every candidate of the push owes the
        job files it carried (all become stale) and the last delivered
        ssconf values are kept.  Otherwise candidates that missed the
        carried job files become stale, and a failed ssconf delivery makes
        the next push send the values again.  The serial counts as
        replicated either way: per-node failures are only logged.
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
        if send.carried is not None:
            if isinstance(send.carried.op, FileUpdate):
                self.file_update_done(send.carried, send.push.candidates,
                                      None if outcome is None else outcome.candidates_failed)
            self._job_busy = False
            self._job_done = max(self._job_done, send.carried.upto)
        if outcome is None:
            if send.files:
                self.mark_stale(send.push.candidates)
            return
        if send.files:
            self.mark_stale(outcome.candidates_failed)
        failed = send.ssconf_changed and bool(outcome.candidates_failed
                                              or outcome.ssconf_nodes_failed)
        self._last_ssconf = None if failed else send.push.ssconf

    # job files -------------------------------------------------------------------------
    def queue_job_op(self, op: JobOp) -> int:
        """Append ``op`` to the job-file stream, merged into the last pending
        segment when that is of the same kind; its sequence number (for
        :meth:`quorum_outcome`)."""
        self._job_queued += 1
        if self._segments and merge_op(self._segments[-1].op, op):
            self._segments[-1].upto = self._job_queued
        else:
            self._segments.append(Segment(op, self._job_queued, self._job_queued))
        return self._job_queued

    @property
    def jobs_pending(self) -> bool:
        """Whether job-file segments wait to be handed out."""
        return bool(self._segments)

    @property
    def jobs_busy(self) -> bool:
        """Whether a job-file send (or a push carrying one) is under way."""
        return self._job_busy

    def take_jobs(self, resync_alone: bool = True) -> JobBatch | None:
        """Hand out every pending segment, in order, or None.

        None while a job-file send is under way, and when nothing is
        pending unless ``resync_alone`` and a resync is due: then the
        batch has no segments and only resynchronises (and flushes wait
        for it like for an operation).
        """
        if self._job_busy:
            return None
        if self._segments:
            segments, self._segments = self._segments, []
            upto = segments[-1].upto
        elif resync_alone and self.resync_due():
            segments = []
            self._job_queued += 1
            upto = self._job_queued
        else:
            return None
        self._job_busy = True
        return JobBatch(segments, upto)

    def jobs_done(self, batch: JobBatch) -> None:
        """Report a batch handed out by :meth:`take_jobs` (and its resync) as sent."""
        self._job_busy = False
        self._job_done = max(self._job_done, batch.upto)

    # quorum of file updates ---------------------------------------------------------
    def file_update_done(self, segment: Segment, targets: list[str],
                         failed: Iterable[str] | None) -> None:
        """Record how the file update ``segment`` sent to ``targets`` went.

        ``failed`` lists the targets that did not confirm it (None: nothing
        is known, all count as failed).  Fewer confirmations than
        :func:`quorum_needed` make every operation of the segment fail its
        quorum (see :meth:`quorum_outcome`).  Call before the segment's
        batch is reported done.
        """
        bad = set(targets) if failed is None else set(failed) & set(targets)
        confirmed = len(targets) - len(bad)
        need = quorum_needed(len(targets))
        if confirmed >= need:
            return
        why = (f"stored on {confirmed + 1} of {len(targets) + 1} master candidates, a strict"
               f" majority ({need + 1}) is needed; not stored on {', '.join(sorted(bad))}")
        kept = self._quorum_failed[-(QUORUM_FAILURES_KEPT - 1):]
        self._quorum_failed = [*kept, (segment.first or segment.upto, segment.upto, why)]

    def quorum_outcome(self, seq: int) -> tuple[bool, str | None]:
        """``(known, failure)`` for the job-file operation numbered ``seq``.

        ``known`` is False while the operation has not been sent; then
        ``failure`` is None when a strict majority of the candidates
        confirmed it, else why not.  A failure forgotten meanwhile (more
        than :data:`QUORUM_FAILURES_KEPT` later ones) reads as success:
        waiters ask right after their send.
        """
        if self._job_done < seq:
            return False, None
        for first, upto, why in self._quorum_failed:
            if first <= seq <= upto:
                return True, why
        return True, None

    # stale candidates ----------------------------------------------------------------
    def mark_stale(self, node_names: Iterable[str]) -> None:
        """Remember candidates that missed a job-file operation.

        The first resync comes one backoff interval later (an immediate one
        would most likely fail the same way, and could cross a request of
        the failed operation still running on the node).
        """
        names = set(node_names)
        if not names:
            return
        if not self._stale:
            self._resync_at = self._clock() + self._resync_backoff
        self._stale.update(names)

    def stale(self) -> set[str]:
        """The candidates waiting for a resync."""
        return set(self._stale)

    def resync_due(self) -> bool:
        """Whether a stale candidate's resync is due now."""
        return bool(self._stale) and self._clock() >= self._resync_at

    def resync_wait(self) -> float | None:
        """Seconds until a stale candidate's next resync (None: nobody is stale)."""
        if not self._stale:
            return None
        return max(0.05, self._resync_at - self._clock())

    def take_resync(self) -> list[str]:
        """The stale nodes to send the whole queue to now (sorted), or [].

        [] before the resync is due.  Once due, the stale set is emptied;
        nodes no longer candidates are forgotten.  A non-empty answer must
        be followed by :meth:`resync_done` once the copy was attempted.
        """
        if not self.resync_due():
            return []
        stale = sorted(self._stale & set(self._candidates))
        self._stale.clear()
        return stale

    def resync_done(self) -> None:
        """After a resync: if a node is stale again, back off (doubling, bounded)."""
        if self._stale:
            self._resync_backoff = min(self._resync_backoff * 2, self._resync_max_interval)
            self._resync_at = self._clock() + self._resync_backoff
        else:
            self._resync_backoff = self._resync_interval

    # flush -------------------------------------------------------------------------------
    def flush_mark(self) -> FlushMark:
        """A mark of everything queued so far (config and job files)."""
        return FlushMark(self._cfg_queued, self._job_queued)

    def flushed(self, mark: FlushMark) -> bool:
        """Whether everything queued up to ``mark`` was attempted."""
        return self._cfg_done >= mark.serial and self._job_done >= mark.job_seq
