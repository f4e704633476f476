"""Compact summaries of jobs, and the summary index kept beside the job files.

A :class:`JobSummary` holds the ``job`` query fields that list queries ask
for (:data:`SUMMARY_FIELDS`: id, status, priorities, opcode statuses and
summaries, the job's timestamps), so that ``gnt-job list`` and
``QueryJobs`` polls are answered from memory instead of reading and
parsing every job file.  The other fields (opcode input, results, logs and
per-opcode timestamps) are read from the files (doc/protocols/jobs.md,
"Job summaries").

**Integrity.**  A summary is only ever made from a job state that is
already durable: for a live job from the state the queue shows (which is
on disk first), for a finished job from its final state, once written.
A finished job's file never changes again (until it is archived), so its
summary stays true.

**The index.**  ``queue/summaries`` (:data:`INDEX_NAME`) lists, one JSON
line each, the summary of a finished job and the identity of its file
(inode, size, modification time in ns).  At start-up a job file whose
``lstat`` matches its line is not read; any other file (no line, another
identity, an unreadable line) is read and parsed as before.  The index is
a cache only: it is appended to lazily without ``fsync``, a torn or
missing file costs one full read of the queue, and start-up rewrites it
when it was stale (:func:`write_index`).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ganeti import constants, errors, serializer

if TYPE_CHECKING:
    from ganeti.jqueue.job import QueuedJob
    from ganeti.jqueue.table import JobTable

__all__ = ["JobSummary", "ArchivedSummary", "archived_summary", "SUMMARY_FIELDS", "summarize", "FileId",
           "file_id", "stat_job_file", "to_record", "from_record", "read_index", "append_index",
           "write_index", "index_path", "INDEX_NAME", "IndexKeeper"]

logger = logging.getLogger(__name__)

#: The summary index file, inside the queue directory.
INDEX_NAME = "summaries"

#: ``job`` query fields a :class:`JobSummary` answers (the others need the file).
SUMMARY_FIELDS: frozenset[str] = frozenset([
    "id", "status", "priority", "opstatus", "oppriority", "summary",
    "received_ts", "start_ts", "end_ts", "archived"])

#: The identity of a job file: ``(inode, size, mtime_ns)``.
FileId = tuple[int, int, int]

_INTERN: dict[str, str] = {}


def _intern(value: str) -> str:
    """One string object per distinct status/summary text (10,000 jobs share them)."""
    return _INTERN.setdefault(value, value)


class JobSummary:
    """The list-query fields of one job (see :data:`SUMMARY_FIELDS`).

    Also what the :class:`~ganeti.jqueue.table.JobTable` keeps of a
    finished job: ``status`` and ``end`` (end time in seconds, or None)
    serve the archive and dependency checks.  Values are shared, not
    copied: treat them as read-only.
    """

    __slots__ = ("id", "status", "priority", "opstatus", "oppriority", "summary",
                 "received_ts", "start_ts", "end_ts", "fallback_end")

    def __init__(self, job_id: int, status: str, priority: int, opstatus: list[str],
                 oppriority: list[int], summary: list[str], received_ts: list[int] | None,
                 start_ts: list[int] | None, end_ts: list[int] | None) -> None:
        self.id = job_id
        self.status = status
        self.priority = priority
        self.opstatus = opstatus
        self.oppriority = oppriority
        self.summary = summary
        self.received_ts = received_ts
        self.start_ts = start_ts
        self.end_ts = end_ts
        #: when the job has no end timestamp: when the queue learnt it ended
        self.fallback_end: float | None = None

    @property
    def end(self) -> float | None:
        """End time in whole seconds (:attr:`fallback_end` without an end
        timestamp; None: unknown)."""
        return self.end_ts[0] if self.end_ts else self.fallback_end

    @property
    def archived(self) -> bool:
        return False

    def get_field(self, name: str) -> Any:
        """The value of query field ``name``; :class:`errors.ParameterError`
        for a field a summary does not hold."""
        if name not in SUMMARY_FIELDS:
            raise errors.ParameterError(f"Job field '{name}' is not in the job summary",
                                        errors.ECODE_INVAL)
        return getattr(self, name)


class ArchivedSummary(JobSummary):
    """The summary of an archived job (its ``archived`` field is true)."""

    __slots__ = ()

    @property
    def archived(self) -> bool:
        return True


def archived_summary(summary: JobSummary) -> ArchivedSummary:
    """``summary`` as the summary of the same job once archived (values shared)."""
    copy = ArchivedSummary(summary.id, summary.status, summary.priority, summary.opstatus,
                           summary.oppriority, summary.summary, summary.received_ts,
                           summary.start_ts, summary.end_ts)
    copy.fallback_end = summary.fallback_end
    return copy


def summarize(job: QueuedJob) -> JobSummary:
    """The summary of ``job`` as it is now (call it on a state that is durable)."""
    return JobSummary(job.id, _intern(job.status()), job.priority(),
                      [_intern(op.status) for op in job.ops], [op.priority for op in job.ops],
                      [_intern(op.summary()) for op in job.ops], job.received_timestamp,
                      job.start_timestamp, job.end_timestamp)


def file_id(st: os.stat_result) -> FileId:
    """The identity of the file ``st`` describes (what an index line records)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def stat_job_file(path: str) -> FileId | None:
    """The identity of the regular file at ``path`` (never following a
    symbolic link), or None when there is none."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return file_id(st) if stat.S_ISREG(st.st_mode) else None


def to_record(summary: JobSummary, fid: FileId) -> list[Any]:
    """One index line (a JSON array, compact to read fast) for a finished job:
    ``[id, inode, size, mtime_ns, status, priority, opstatus, oppriority,
    summary, received_ts, start_ts, end_ts]``."""
    return [summary.id, fid[0], fid[1], fid[2], summary.status, summary.priority,
            summary.opstatus, summary.oppriority, summary.summary, summary.received_ts,
            summary.start_ts, summary.end_ts]


_FINAL = frozenset(constants.JOBS_FINALIZED)


def _ts(value: Any) -> list[int] | None:
    if value is None:
        return None
    if (type(value) is list and len(value) == 2
            and type(value[0]) is int and type(value[1]) is int):
        return value
    raise ValueError(f"bad timestamp {value!r}")


def _strs(value: Any) -> list[str]:
    if type(value) is not list:
        raise ValueError("expected a list of strings")
    out = []
    for v in value:
        if type(v) is not str:
            raise ValueError("expected a list of strings")
        out.append(_intern(v))
    return out


def from_record(rec: Any) -> tuple[FileId, JobSummary]:
    """Parse one index line; :class:`ValueError` when it is not a valid
    summary of a *finished* job."""
    if type(rec) is not list or len(rec) != 12:
        raise ValueError("not an index record")
    (job_id, ino, size, mtime, status, priority, opstatus, oppriority, summary,
     received, started, ended) = rec
    if type(job_id) is not int or job_id < 1:
        raise ValueError("bad id")
    if type(ino) is not int or type(size) is not int or type(mtime) is not int:
        raise ValueError("bad file identity")
    if status not in _FINAL:
        raise ValueError(f"status {status!r} is not final")
    opstatus = _strs(opstatus)
    summary = _strs(summary)
    if (type(priority) is not int or type(oppriority) is not list
            or not all(type(p) is int for p in oppriority)):
        raise ValueError("bad priorities")
    if not opstatus or not len(opstatus) == len(summary) == len(oppriority):
        raise ValueError("opcode lists differ in length")
    return ((ino, size, mtime),
            JobSummary(job_id, _intern(status), priority, opstatus, oppriority, summary,
                       _ts(received), _ts(started), _ts(ended)))


def index_path(queue_dir: str) -> str:
    """Where the summary index of ``queue_dir`` is."""
    return os.path.join(queue_dir, INDEX_NAME)


def read_index(queue_dir: str) -> tuple[dict[int, tuple[FileId, JobSummary]], int]:
    """The index lines by job id (the last line of an id wins), and how many
    lines were unreadable (a missing index is empty).

    The index is not trusted more than the queue directory: it is read
    without following a symbolic link and must be a regular file; else it
    counts as empty (and is rewritten).
    """
    found: dict[int, tuple[FileId, JobSummary]] = {}
    bad = 0
    path = index_path(queue_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return found, 0
    except OSError as exc:
        logger.warning("Cannot read the job summary index %s: %s", path, exc)
        return found, 1
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return found, 1
        with os.fdopen(fd, "rb", closefd=False) as fh:
            lines = fh.read().split(b"\n")
    finally:
        os.close(fd)
    lines = [line for line in lines if line]
    try:      # one parse for the whole file; line by line only when damaged
        records: list[Any] = serializer.loads(b"[" + b",".join(lines) + b"]")
    except errors.GanetiError:
        records = []
        for line in lines:
            try:
                records.append(serializer.loads(line))
            except errors.GanetiError:
                bad += 1      # a torn last line after a crash, or damage: that file is read
    for rec in records:
        try:
            fid, summ = from_record(rec)
        except ValueError:
            bad += 1
            continue
        found[summ.id] = (fid, summ)
    return found, bad


def _lines(entries: Iterable[tuple[FileId, JobSummary]]) -> bytes:
    return b"".join(serializer.dumps_bytes(to_record(s, fid)) + b"\n" for fid, s in entries)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def append_index(queue_dir: str, entries: Iterable[tuple[FileId, JobSummary]]) -> None:
    """Append lines to the index (no ``fsync``: a cache); OSError is the caller's."""
    data = _lines(entries)
    if not data:
        return
    fd = os.open(index_path(queue_dir),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def write_index(queue_dir: str, entries: Iterable[tuple[FileId, JobSummary]]) -> None:
    """Replace the index with ``entries`` (a temporary file renamed into place)."""
    path = index_path(queue_dir)
    tmp = path + ".new"
    data = _lines(entries)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class IndexKeeper:
    """Keeps ``queue/summaries`` up to date for one queue.

    :meth:`flush` appends the summaries of jobs finished since the last
    flush (taken from the table under its lock; each file's identity is
    read outside it), and rewrites the whole index instead when it holds
    more than twice as many lines as there are finished jobs (archived
    jobs leave lines behind), with the identities of the lines it holds.
    ``job_path(id)`` names a job file.  One thread flushes (the queue's
    index thread, and the queue at shutdown).
    """

    #: lines beyond twice the finished jobs that trigger a rewrite
    SLACK = 1024

    def __init__(self, queue_dir: str, table: JobTable, job_path: Callable[[int], str]) -> None:
        self._dir = queue_dir
        self._table = table
        self._job_path = job_path
        self._lines = 0
        #: the file identity of every job the index holds a line for: a
        #: rewrite reuses it instead of reading each file's identity again
        #: (a finished job's file changes only by leaving the queue)
        self._fids: dict[int, FileId] = {}
        self._lock = threading.Lock()

    def loaded(self, entries: list[tuple[FileId, JobSummary]], stale: bool) -> None:
        """Start-up: the index should hold ``entries``; rewritten when ``stale``."""
        with self._lock:
            self._lines = len(entries)
            self._fids = {summ.id: fid for fid, summ in entries}
            if stale:
                self._write(entries)

    def flush(self) -> int:
        """Index the newly finished jobs; how many lines were added."""
        with self._lock:
            with self._table.lock:
                taken = self._table.take_unindexed()
                finished = self._table.size() - self._table.live_count()
            if not taken:
                return 0
            if self._lines + len(taken) > 2 * finished + self.SLACK:
                with self._table.lock:
                    current = sorted(self._table.summaries().items())
                self._write(self._identify(current, self._fids))
                return len(taken)
            entries = self._identify(taken, {})
            try:
                append_index(self._dir, entries)
            except OSError as exc:
                logger.warning("Cannot append to the job summary index: %s", exc)
                return 0
            self._lines += len(entries)
            self._fids.update((summ.id, fid) for fid, summ in entries)
            return len(entries)

    def _identify(self, items: list[tuple[int, JobSummary]],
                  known: dict[int, FileId]) -> list[tuple[FileId, JobSummary]]:
        """Each job's file identity, from ``known`` or else read from its file
        (a job archived meanwhile is left out)."""
        out = []
        for job_id, summ in items:
            fid = known.get(job_id)
            if fid is None:
                fid = stat_job_file(self._job_path(job_id))
            if fid is not None:          # None: archived meanwhile
                out.append((fid, summ))
        return out

    def _write(self, entries: list[tuple[FileId, JobSummary]]) -> None:
        try:
            write_index(self._dir, entries)
        except OSError as exc:
            logger.warning("Cannot write the job summary index: %s", exc)
            return
        self._lines = len(entries)
        self._fids = {summ.id: fid for fid, summ in entries}

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Flush every ``interval`` seconds until ``stop`` is set, then once more."""
        while not stop.wait(interval):
            try:
                self.flush()
            except Exception:   # a cache: never kill the thread
                logger.exception("Flushing the job summary index failed")
        self.flush()
