"""Durable job queue files: job files, serial, version, drain flag, archive.

Writes go through a *group commit* writer thread: callers hand over
``{path: bytes}`` and (usually) wait; the writer takes everything pending,
writes temporary files, makes them durable (one ``fsync`` each, or one
``syncfs`` of the filesystem), renames them into place and fsyncs each
touched directory once.  Many concurrent writers thus share one commit.
A job file is rewritten at least three times; instead of a new inode per
write, the replaced inodes are recycled (``RENAME_EXCHANGE`` with a spare
``.scratch-*`` file, see ``utils.io.ScratchPool``).

A failed commit (``ENOSPC``, any ``OSError``) is retried with a bounded
backoff until it succeeds; meanwhile :attr:`JobStorage.write_error` says
why, and callers that must not wait (new jobs) fail at once instead (see
``_GroupWriter``; doc/protocols/jobs.md, "Full disk").

The queue ``serial`` (last job id handed out) is written in the same
commit as the job files using it, so an acknowledged job id is never
reused, even after a crash; on load the serial is also raised to the
highest job id found on disk.

Replication (to master candidates) uses callbacks called after a file is
durable: ``replicate_batch({file_name: content}, urgent)`` once per
committed batch (when given; a batch holding new jobs, ``quorum``
writes, is handed over just *before* its local write instead, so that
both writes run at once, see ``_GroupWriter``; ``urgent`` when a caller of the batch waits
for its quorum, so the replicator sends it at once, while a batch of
status updates only may wait a moment for company, see
``ganeti.replication.core.LAZY_DELAY``; otherwise ``replicate(file_name, content)`` per file;
what ``replicate_batch`` returns is handed to ``wait_replicated`` by a
``write_jobs(..., quorum=True)``, which returns only when the new job
files are on a majority of the master candidates),
``replicate_drain(flag)`` when the drain flag is set or cleared (without
it, ``replicate(file_name, b"")`` when it is set) and
``replicate_renames([(old, new), ...])`` once per archiving; the defaults
do nothing.  The callbacks run in the writer thread (``replicate_drain``:
in the caller's), so they must return quickly (the master's replicator
only queues the work, see ``ganeti.replication.Replicator``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable

from ganeti import constants, errors
from ganeti.pathutils import Paths, archived_job_file_name, job_file_name
from ganeti.utils import io as uio

__all__ = ["JobStorage", "SYNC_FSYNC", "SYNC_SYNCFS", "SYNC_NONE"]

logger = logging.getLogger(__name__)

SYNC_FSYNC = uio.SYNC_FSYNC
SYNC_SYNCFS = uio.SYNC_SYNCFS
SYNC_NONE = uio.SYNC_NONE

ReplicateFn = Callable[[str, bytes], None]
ReplicateRenamesFn = Callable[[list[tuple[str, str]]], None]
ReplicateDrainFn = Callable[[bool], None]
#: returns a token for ``wait_replicated`` (the master's replicator: the
#: batch's sequence number); the flag: whether a caller waits for its quorum
ReplicateBatchFn = Callable[[dict[str, bytes], bool], object]
WaitReplicatedFn = Callable[[object], None]


#: Bounded backoff of the writer's retries after a failed commit: the first
#: retry after RETRY_FIRST seconds, each later one twice as late, at most
#: RETRY_MAX apart (see :func:`retry_delay`).
RETRY_FIRST = 0.5
RETRY_MAX = 10.0

WaitFn = Callable[[threading.Condition, float], object]
WriteFilesFn = Callable[..., None]


def retry_delay(attempt: int) -> float:
    """Seconds before retry number ``attempt`` (1, 2, ...) of a failed commit."""
    return min(RETRY_MAX, RETRY_FIRST * 2.0 ** max(0, min(attempt - 1, 30)))


def _cond_wait(cond: threading.Condition, timeout: float) -> object:
    return cond.wait(timeout)


class _Ticket:
    """One :meth:`_GroupWriter.submit`: its files, and how it ends.

    A *retry* ticket stays until its files are durable (the writer retries
    failed commits, see :class:`_GroupWriter`); another one ends with the
    first commit that holds it, in error if that commit failed.  ``dirs``:
    directories whose renames, made before the ticket was handed over,
    the commit makes durable too (archiving).
    """

    __slots__ = ("event", "error", "files", "serial", "retry", "waited", "quorum", "urgent",
                 "replication", "replication_error", "sent_early", "dirs")

    def __init__(self, files: dict[str, bytes], serial: bool, retry: bool, waited: bool,
                 quorum: bool = False, urgent: bool = False,
                 dirs: tuple[str, ...] = ()) -> None:
        self.event = threading.Event()
        self.error: BaseException | None = None
        # what the after-commit callback returned for the commit that held
        # the ticket (or how it failed): set before the event
        self.replication: object = None
        self.replication_error: BaseException | None = None
        # handed to replication before the local write of its commit
        self.sent_early = False
        self.files = files
        self.serial = serial
        self.retry = retry
        self.waited = waited
        self.quorum = quorum
        self.urgent = urgent or quorum
        self.dirs = dirs

    def done(self, error: BaseException | None = None) -> None:
        self.error = error
        self.event.set()


class _GroupWriter:
    """A thread committing batches of atomic file replacements.

    Tickets are committed in the order they were submitted (a later
    ticket's content for a path wins in a batch), so writes of one file
    reach the disk in the order they were handed over.

    **Failed commits** (``OSError``: a full disk, an I/O error) are retried:
    the failed batch's *retry* tickets stay, ahead of newer ones, and the
    whole batch is tried again after :func:`retry_delay` (``clock`` and
    ``wait``, injected, measure the delay) until it succeeds; the other
    tickets end in error at once.  While the writer is failing,
    :attr:`error` holds the failure and a non-retry ticket fails without
    an attempt.  A newer retry ticket for a path supersedes the older
    pending content for it (memory stays bounded while failing).

    **Replication**: each batch goes to ``after_commit(batch, urgent)``
    once, in commit order.  A batch without new jobs goes once it is
    durable here.  With ``early`` (the storage replicates batches), a
    batch holding a *quorum* ticket (new jobs, whose
    submitters wait for the candidates too) goes just before its local
    write, so that the candidates write it while this disk does: a
    submitter waits for the slower of the two writes, not for their sum
    (doc/design/replication.md, "New jobs: the quorum write").  Should that
    local write fail, its tickets say so (``sent_early``): the candidates
    may hold files this disk does not, which the queue withdraws
    (:meth:`JobStorage.replicate_ahead`).
    """

    def __init__(self, sync_mode: str, after_commit: Callable[[dict[str, bytes], bool], object],
                 serial_data: Callable[[], tuple[str, bytes]],
                 scratch: uio.ScratchPool | None = None, *,
                 write_files: WriteFilesFn = uio.write_files_atomic,
                 clock: Callable[[], float] = time.monotonic,
                 wait: WaitFn = _cond_wait, early: bool = True) -> None:
        self._sync_mode = sync_mode
        self._early = early
        self._scratch = scratch
        self._after_commit = after_commit
        self._serial_data = serial_data
        self._write_files = write_files
        self._clock = clock
        self._wait = wait
        self._cond = threading.Condition()
        self._tickets: list[_Ticket] = []
        self._stop = False
        self._error: OSError | None = None
        self._attempts = 0
        self._retry_at = 0.0
        self._thread = threading.Thread(target=self._run, name="jqueue-writer", daemon=True)
        self._thread.start()

    @property
    def error(self) -> OSError | None:
        """The failure of the last commit while the writer retries, else None."""
        with self._cond:
            return self._error

    def submit(self, files: dict[str, bytes], serial: bool = False, *,
               retry: bool = False, waited: bool = True, quorum: bool = False,
               urgent: bool = False, dirs: tuple[str, ...] = ()) -> _Ticket:
        ticket = _Ticket(files, serial, retry, waited, quorum, urgent, dirs)
        with self._cond:
            if self._stop:
                raise errors.JobQueueError("Job queue writer is stopped")
            if self._error is not None and not retry:
                ticket.done(self._error)
                return ticket
            if retry:
                self._supersede(files)
            self._tickets.append(ticket)
            self._cond.notify()
        return ticket

    def _supersede(self, files: dict[str, bytes]) -> None:
        """(lock held) drop ``files``' paths from older pending retry tickets."""
        kept = []
        for old in self._tickets:
            if old.retry:
                for path in files:
                    old.files.pop(path, None)
                if not old.files and not old.serial and not old.waited and not old.dirs:
                    continue      # nothing left to write, nobody waits for it
            kept.append(old)
        self._tickets = kept

    def stop(self) -> None:
        """Commit what is pending (one last attempt) and stop; tickets
        still not durable then end in error."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop:
                    if self._error is not None:
                        left = self._retry_at - self._clock()
                        if left <= 0:
                            break
                        self._wait(self._cond, left)
                    elif self._tickets:
                        break
                    else:
                        self._cond.wait()
                tickets, self._tickets = self._tickets, []
                stopping = self._stop
                # while failing, a retry with nothing pending still probes
                # (the serial file) so that the storage notices space back
                probe = self._error is not None and not stopping
            if not tickets and not probe:
                return
            batch: dict[str, bytes] = {}
            if probe or any(t.serial for t in tickets):
                path, data = self._serial_data()
                batch[path] = data
            dirs: dict[str, None] = {}
            for t in tickets:
                batch.update(t.files)
                dirs.update(dict.fromkeys(t.dirs))
            # replication is queued before the waiters wake up, so that a
            # waiter can wait for its quorum with the callback's answer; a
            # batch holding new jobs goes before its local write (early)
            early = self._early and any(t.quorum for t in tickets)
            token, hook_error = self._hand_over(batch, True) if early else (None, None)
            try:
                self._commit(batch, list(dirs))
            except OSError as exc:
                for t in tickets:
                    t.sent_early = early
                self._failed(tickets, exc, stopping)
                if stopping:
                    return
                continue
            if not early:
                token, hook_error = self._hand_over(batch, any(t.urgent for t in tickets))
            for t in tickets:
                t.replication, t.replication_error = token, hook_error
            self._succeeded(tickets)

    def _hand_over(self, batch: dict[str, bytes],
                   urgent: bool) -> tuple[object, BaseException | None]:
        """``after_commit(batch, urgent)``: its answer, or how it failed (logged)."""
        try:
            return self._after_commit(batch, urgent), None
        except Exception as exc:  # replication must never stop the writer
            logger.exception("Job queue replication callback failed")
            return None, exc

    def _failed(self, tickets: list[_Ticket], exc: OSError, stopping: bool) -> None:
        with self._cond:
            first = self._error is None
            self._error = exc
            self._attempts += 1
            self._retry_at = self._clock() + retry_delay(self._attempts)
            if stopping:
                keep: list[_Ticket] = []
                dropped = tickets + self._tickets
                self._tickets = []
            else:
                pending = tickets + self._tickets
                keep = [t for t in pending if t.retry]
                dropped = [t for t in pending if not t.retry]
                self._tickets = keep
        for t in dropped:
            t.done(exc)
        if stopping:
            logger.critical("Job queue writer stopped with %d writes not durable: %s",
                            len(dropped), exc)
        elif first:
            logger.critical("Cannot write job queue files (%s): the queue refuses new jobs"
                            " and retries the %d pending writes every %.1f s at most",
                            exc, len(keep), RETRY_MAX)
        else:
            logger.debug("Job queue write retry %d failed: %s", self._attempts, exc)

    def _succeeded(self, tickets: list[_Ticket]) -> None:
        with self._cond:
            recovered = self._error is not None
            attempts = self._attempts
            self._error = None
            self._attempts = 0
        for t in tickets:
            t.done()
        if recovered:
            logger.warning("Job queue files written again after %d failed attempts:"
                           " the queue accepts new jobs", attempts)

    def _commit(self, batch: dict[str, bytes], dirs: list[str]) -> None:
        """Write ``batch`` durably, then make the renames in ``dirs`` durable
        (a ``syncfs`` of the batch's filesystem covers them: it ran after them)."""
        if batch:
            self._write_files(batch, mode=0o640, sync=self._sync_mode, scratch=self._scratch)
        if dirs:
            uio.sync_dirs(dirs, self._sync_mode,
                          synced=os.path.dirname(next(iter(batch))) if batch else None)


class JobStorage:
    """The files of one job queue directory.

    Thread-safe.  :meth:`open` must be called first (creates the
    directories, checks the version, reads the serial); :meth:`close`
    flushes and stops the writer.
    """

    def __init__(self, paths: Paths, *, sync_mode: str = SYNC_FSYNC,
                 replicate: ReplicateFn | None = None,
                 replicate_renames: ReplicateRenamesFn | None = None,
                 replicate_batch: ReplicateBatchFn | None = None,
                 replicate_drain: ReplicateDrainFn | None = None,
                 wait_replicated: WaitReplicatedFn | None = None,
                 write_files: WriteFilesFn = uio.write_files_atomic,
                 clock: Callable[[], float] = time.monotonic,
                 wait: WaitFn = _cond_wait) -> None:
        self.paths = paths
        self._write_files = write_files
        self._clock = clock
        self._wait = wait
        self.queue_dir = paths.queue_dir
        self.archive_dir = paths.queue_archive_dir
        self._sync_mode = sync_mode
        self._replicate = replicate
        self._replicate_renames = replicate_renames
        self._replicate_batch = replicate_batch
        self._replicate_drain = replicate_drain
        self._wait_replicated = wait_replicated
        self._drain_lock = threading.Lock()
        self._lock = threading.Lock()
        self._last_id = 0
        self._writer: _GroupWriter | None = None

    # setup -----------------------------------------------------------------
    def open(self) -> None:
        """Create the queue layout if needed and start the writer.

        Raises :class:`errors.JobQueueError` for an unknown queue version.
        """
        os.makedirs(self.archive_dir, mode=0o750, exist_ok=True)
        version_file = self.paths.queue_version_file
        try:
            with open(version_file, "rb") as fh:
                text = fh.read().decode("ascii", "replace").strip()
            if text and int(text) != constants.JOB_QUEUE_VERSION:
                raise errors.JobQueueError(f"Unsupported job queue version {text}")
        except FileNotFoundError:
            uio.write_file_atomic(version_file, f"{constants.JOB_QUEUE_VERSION}\n")
        except ValueError as exc:
            raise errors.JobQueueError(f"Invalid job queue version file: {exc}") from exc
        serial = 0
        try:
            with open(self.paths.queue_serial_file, "rb") as fh:
                serial = int(fh.read().strip() or b"0")
        except FileNotFoundError:
            pass
        except ValueError:
            logger.error("Invalid queue serial file, recovering from the job files")
        # a lost or damaged serial file must not let archived ids come back
        self._last_id = max(serial, self._max_archived_id())
        # recycled inodes for the job files (see utils.io.ScratchPool): each
        # job is written three times or more, and a new inode per write is
        # what a busy filesystem makes expensive
        scratch = uio.ScratchPool(self.queue_dir)
        scratch.adopt_leftovers()
        self._writer = _GroupWriter(self._sync_mode, self._after_commit, self._serial_data,
                                    scratch, write_files=self._write_files, clock=self._clock,
                                    wait=self._wait, early=self._replicate_batch is not None)

    def _max_archived_id(self) -> int:
        """Highest job id in the archive (only its highest bucket is read)."""
        buckets = []
        for name in os.listdir(self.archive_dir):
            if name.isdigit():
                buckets.append(int(name))
        for bucket in sorted(buckets, reverse=True):
            ids = [int(n[4:]) for n in os.listdir(os.path.join(self.archive_dir, str(bucket)))
                   if n.startswith("job-") and n[4:].isdigit()]
            if ids:
                return max(ids)
        return 0

    def close(self) -> None:
        """Flush pending writes and stop the writer thread."""
        if self._writer is not None:
            self._writer.stop()
            self._writer = None

    def note_existing_id(self, job_id: int) -> None:
        """Raise the serial to at least ``job_id`` (found on disk at load)."""
        with self._lock:
            self._last_id = max(self._last_id, job_id)

    @property
    def last_id(self) -> int:
        return self._last_id

    # ids and writes ----------------------------------------------------------
    def allocate_ids(self, count: int) -> list[int]:
        """Reserve ``count`` new job ids (durable with the next commit)."""
        with self._lock:
            first = self._last_id + 1
            self._last_id += count
            return list(range(first, first + count))

    def _serial_data(self) -> tuple[str, bytes]:
        with self._lock:
            return self.paths.queue_serial_file, f"{self._last_id}\n".encode("ascii")

    def job_path(self, job_id: int) -> str:
        return job_file_name(self.queue_dir, job_id)

    def archived_path(self, job_id: int) -> str:
        return archived_job_file_name(self.archive_dir, job_id)

    def write_jobs(self, items: Iterable[tuple[int, bytes]], *, wait: bool = True,
                   serial: bool = False, retry: bool = False, quorum: bool = False,
                   urgent: bool = False) -> None:
        """Write job files durably (and the serial when ``serial``).

        With ``wait`` the call returns once the data is durable.  A failed
        write raises :class:`errors.JobQueueError` at once, unless
        ``retry``: then the writer retries it (with the other pending
        writes, see :class:`_GroupWriter`) and the call returns only when it
        succeeded, or raises when the storage is closed first.  Without
        ``wait`` the write is only scheduled, and retried until it succeeds
        (used for batched log messages).  Writes of one file reach the disk
        in the order of the calls.

        With ``quorum`` (new jobs; needs ``wait``) the call returns only
        once ``wait_replicated`` (when given) confirmed that the commit's
        files reached a strict majority of the master candidates; else
        :class:`errors.JobQueueQuorumError` (the files stay written here).
        The commit holding a ``quorum`` or ``urgent`` write is handed to
        replication as urgent (sent at once); one of status changes only
        may be held a moment (``replicate_batch``'s flag, module docstring).
        """
        writer = self._writer
        if writer is None:
            raise errors.JobQueueError("Job queue storage is not open")
        files = {self.job_path(jid): data for jid, data in items}
        ticket = writer.submit(files, serial=serial, retry=retry or not wait, waited=wait,
                               quorum=quorum and wait, urgent=urgent)
        if wait:
            ticket.event.wait()
            if ticket.error is not None and ticket.sent_early:
                raise errors.JobQueueUnwrittenError(
                    f"Cannot write job file: {ticket.error} (it may have reached master"
                    " candidates already)") from ticket.error
            if ticket.error is not None:
                raise errors.JobQueueError(
                    f"Cannot write job file: {ticket.error}") from ticket.error
            if quorum and self._wait_replicated is not None:
                if ticket.replication_error is not None:
                    raise errors.JobQueueQuorumError(
                        f"The new job files could not be handed to replication"
                        f" ({ticket.replication_error}); not acknowledged, submit again"
                    ) from ticket.replication_error
                self._wait_replicated(ticket.replication)

    @property
    def write_error(self) -> str | None:
        """Why job files cannot be written now (the writer retries), or None."""
        writer = self._writer
        error = writer.error if writer is not None else None
        return None if error is None else str(error)

    def replicate_ahead(self, items: Iterable[tuple[int, bytes]]) -> None:
        """Hand job files to replication (urgent) without writing them here.

        Only to withdraw new jobs whose files went to the candidates before
        their local write failed (:class:`errors.JobQueueUnwrittenError`):
        their failed state follows them there at once, ahead of the local
        disk, where the same state is written (retried) by the caller.
        """
        files = {self.job_path(jid): data for jid, data in items}
        if files and self._replicate_batch is not None:
            self._replicate_batch(files, True)

    def _after_commit(self, batch: dict[str, bytes], urgent: bool) -> object:
        if self._replicate_batch is not None:
            return self._replicate_batch(batch, urgent)
        if self._replicate is not None:
            for path, data in batch.items():
                self._replicate(path, data)
        return None

    # reads -----------------------------------------------------------------
    def list_job_ids(self) -> list[int]:
        """Ids of the unarchived job files, sorted."""
        ids = []
        for name in os.listdir(self.queue_dir):
            if name.startswith("job-"):
                try:
                    ids.append(int(name[4:]))
                except ValueError:
                    continue
        return sorted(ids)

    def read_job(self, job_id: int) -> bytes | None:
        """Content of an unarchived job file, or None.

        The queue directory is not trusted: a symbolic link is not followed
        and the entry must be a regular file, else
        :class:`errors.UntrustedFileError`
        (:func:`ganeti.utils.io.read_regular_file`).
        """
        return uio.read_regular_file(self.job_path(job_id))

    def read_archived_job(self, job_id: int) -> bytes | None:
        """Content of an archived job file, or None (read as :meth:`read_job`)."""
        return uio.read_regular_file(self.archived_path(job_id))

    # archive -----------------------------------------------------------------
    def archive_jobs(self, job_ids: Iterable[int]) -> list[int]:
        """Move job files into ``archive/<id // 10000>/``; returns the moved ids.

        The moves are made durable by the writer's next commit (which is
        due at once: a ticket of their directories is handed to it, see
        :class:`_GroupWriter`), not here under the caller's queue lock: a
        ``syncfs`` there covers them (doc/protocols/jobs.md, "Queue size").
        After a crash before that, a moved file may be found at its old
        name again.  After :meth:`close`, they are synced here.
        """
        moved = []
        pairs: list[tuple[str, str]] = []
        dirs: dict[str, None] = {}
        buckets: dict[int, str] = {}      # archive directory number -> its path, made
        for job_id in job_ids:
            old, new = self.job_path(job_id), self.archived_path(job_id)
            number = job_id // constants.JOB_QUEUE_ARCHIVE_DIRS
            try:
                bucket = buckets.get(number)
                if bucket is None:
                    bucket = os.path.dirname(new)
                    os.makedirs(bucket, mode=0o750, exist_ok=True)
                    buckets[number] = bucket
                os.replace(old, new)
            except OSError as exc:
                logger.error("Cannot archive job %s: %s", job_id, exc)
                continue
            moved.append(job_id)
            pairs.append((old, new))
            if bucket not in dirs:
                dirs[bucket] = None
                dirs[self.queue_dir] = None
        if pairs and self._replicate_renames is not None:
            try:
                self._replicate_renames(pairs)
            except Exception:
                logger.exception("Replicating the archive of jobs %s-%s failed",
                                 moved[0], moved[-1])
        if dirs and self._sync_mode != SYNC_NONE:
            writer = self._writer
            try:
                if writer is None:
                    raise errors.JobQueueError("Job queue writer is closed")
                writer.submit({}, retry=True, waited=False, dirs=tuple(dirs))
            except errors.JobQueueError:      # closed or stopping: no next commit
                uio.sync_dirs(dirs, self._sync_mode)
        return moved

    # drain flag --------------------------------------------------------------
    def is_drained(self) -> bool:
        return os.path.exists(self.paths.queue_drain_file)

    def set_drained(self, flag: bool) -> None:
        """Set or clear the drain flag; replicated in the order of the changes."""
        path = self.paths.queue_drain_file
        with self._drain_lock:   # the file and the replication order agree
            if flag:
                with open(path, "wb"):
                    pass
            else:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            uio.fsync_dir(self.queue_dir)
            if self._replicate_drain is not None:
                self._replicate_drain(flag)
            elif self._replicate is not None and flag:
                self._replicate(path, b"")
