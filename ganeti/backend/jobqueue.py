"""Job queue replication on master candidates: only inside the queue directory.

File names arrive either canonical (``/var/lib/ganeti/queue/job-7``) or
relative to the queue directory (``job-7``, ``archive/0/job-7``).  Anything
resolving outside this node's queue directory (``..``, absolute paths
elsewhere, symbolic links leading out) is refused.
"""

from __future__ import annotations

import logging
import os
import re
import shutil

from ganeti import errors
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, procedure
from ganeti.pathutils import archived_job_file_name
from ganeti.utils import io as uio

__all__ = [
    "jobqueue_update", "jobqueue_update_many", "jobqueue_rename", "jobqueue_purge",
    "jobqueue_sync", "jobqueue_set_drain_flag",
]

logger = logging.getLogger(__name__)

_JOB_FILE_MODE = 0o640
# Files that stay when the queue is purged.
_KEEP_ON_PURGE = ("lock",)
_JOB_FILE_RE = re.compile(r"job-([0-9]+)")
# Recycled inodes for the job files of this process, per queue directory
# (utils.io.ScratchPool); keyed by process too: a node daemon child must
# not use a pool it inherited from its parent.
_SCRATCH: dict[tuple[int, str], uio.ScratchPool] = {}


def _scratch_pool(queue_dir: str) -> uio.ScratchPool:
    """This process's pool of spare inodes in the (resolved) ``queue_dir``.

    As on the master (jqueue/storage.py): a replicated job file is
    rewritten three times or more, and replacing it by a rename frees its
    old inode, which on a busy filesystem waits for the journal.  The first
    use adopts the spares left by earlier processes (claimed by rename, so
    two children never share one).
    """
    key = (os.getpid(), queue_dir)
    pool = _SCRATCH.get(key)
    if pool is None:
        for stale in [k for k in _SCRATCH if k[0] != key[0]]:
            del _SCRATCH[stale]
        pool = uio.ScratchPool(queue_dir)
        try:
            pool.adopt_leftovers()
        except OSError:
            pass                           # no queue directory yet: nothing to adopt
        _SCRATCH[key] = pool
    return pool


def queue_file_path(ctx: NodeContext, file_name: str,
                    resolved: dict[str, str] | None = None) -> str:
    """This node's path for a queue file name, refusing names escaping the queue.

    ``resolved`` (one dict per request) remembers the real path of each
    directory seen, so that a batch of files in one directory resolves it
    once; a name whose last part is a symbolic link, ``.`` or ``..`` is
    resolved in full every time.  Raises :class:`errors.OpExecError`.
    """
    if not file_name or "\x00" in file_name:
        raise errors.OpExecError(f"Invalid queue file name {file_name!r}")
    queue_dir = ctx.paths.queue_dir
    if file_name.startswith("/"):
        candidate = ctx.local_path(file_name)
    else:
        candidate = os.path.join(queue_dir, file_name)
    if resolved is None:
        if not os.path.isdir(queue_dir):
            os.makedirs(queue_dir, mode=0o750, exist_ok=True)
        return ctx.inside(queue_dir, candidate, "queue file")
    if "" not in resolved:
        if not os.path.isdir(queue_dir):
            os.makedirs(queue_dir, mode=0o750, exist_ok=True)
        resolved[""] = os.path.realpath(queue_dir)
    parent, base = os.path.split(candidate)
    if base in ("", ".", "..") or os.path.islink(candidate):
        return ctx.inside(queue_dir, candidate, "queue file")
    if parent not in resolved:
        resolved[parent] = os.path.realpath(parent)
    real = os.path.join(resolved[parent], base)
    top = resolved[""]
    if real == top or not real.startswith(top.rstrip(os.sep) + os.sep):
        raise errors.OpExecError(f"Refusing queue file {candidate!r}: not inside {queue_dir}")
    return real


@procedure(FAST, fenced=True)
def jobqueue_update(ctx: NodeContext, file_name: str, content: str) -> None:
    """Write a file inside the node's job queue directory.

    Write ``content`` to a queue file atomically (creating archive subdirs).
    """
    _write_queue_file(ctx, file_name, queue_file_path(ctx, file_name), content)


def _write_queue_file(ctx: NodeContext, file_name: str, path: str, content: str) -> None:
    """Atomically replace the checked queue path ``path`` (named ``file_name``)."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
        # the parent may itself be a link: check again after creating it
        ctx.inside(ctx.paths.queue_dir, path, "queue file")
        uio.write_file_atomic(path, content, mode=_JOB_FILE_MODE)
    except OSError as exc:
        raise errors.OpExecError(f"Cannot write queue file {file_name}: {exc}") from exc


@procedure(FAST, fenced=True, keepalive=True)
def jobqueue_update_many(ctx: NodeContext, files: list) -> None:
    """Write [[file_name, content], ...] inside the node's job queue directory (all names
    checked first; each file atomically, in order).

    Write ``[[file_name, content], ...]`` like :func:`jobqueue_update`, in order.

    The master replicates a whole committed batch with one call.  Every
    entry is checked (shape and location inside the queue directory) before
    anything is written, so a bad name writes nothing.  Each file is
    replaced atomically and the batch shares one durability barrier
    (:func:`ganeti.utils.io.write_files_atomic`): a failed write (a full
    disk) replaces none of them.
    """
    if not isinstance(files, list):
        raise errors.OpExecError("files must be a list of [file_name, content]")
    checked: list[tuple[str, str, str]] = []
    resolved: dict[str, str] = {}
    for entry in files:
        if not isinstance(entry, (list, tuple)) or len(entry) != 2 \
                or not isinstance(entry[0], str) or not isinstance(entry[1], str):
            raise errors.OpExecError(f"Invalid queue file entry {entry!r}:"
                                     " expected [file_name, content]")
        checked.append((entry[0], queue_file_path(ctx, entry[0], resolved), entry[1]))
    batch: dict[str, bytes] = {}
    present: set[str] = set()
    for file_name, path, content in checked:
        parent = os.path.dirname(path)
        if parent not in present:
            if not os.path.isdir(parent):
                try:
                    os.makedirs(parent, mode=0o750, exist_ok=True)
                except OSError as exc:
                    raise errors.OpExecError(
                        f"Cannot write queue file {file_name}: {exc}") from exc
                # the parent may itself be a link: check again after creating it
                ctx.inside(ctx.paths.queue_dir, path, "queue file")
            present.add(parent)
        batch.pop(path, None)      # a later entry for the same file wins, in its place
        batch[path] = content.encode("utf-8")
    # a new job is acknowledged only once this returns on a quorum of the
    # candidates (doc/design/replication.md, Invariant 1): one syncfs for a
    # batch of several files instead of an fsync each, as the master's own
    # queue writer does
    sync = uio.SYNC_SYNCFS if len(batch) > 1 else uio.SYNC_FSYNC
    try:
        uio.write_files_atomic(batch, mode=_JOB_FILE_MODE, sync=sync,
                               scratch=_scratch_pool(resolved.get("") or
                                                     os.path.realpath(ctx.paths.queue_dir)))
    except OSError as exc:
        raise errors.OpExecError(f"Cannot write queue files: {exc}") from exc


@procedure(FAST, fenced=True, keepalive=True)
def jobqueue_rename(ctx: NodeContext, rename: list) -> None:
    """Rename [[old, new], ...] inside the node's job queue directory.

    Rename ``[[old, new], ...]`` inside the queue directory, in order.

    All names are checked before anything is renamed.
    """
    pairs = []
    resolved: dict[str, str] = {}     # each directory resolved once per request
    for entry in rename:
        if not isinstance(entry, (list, tuple)) or len(entry) != 2 \
                or not all(isinstance(x, str) for x in entry):
            raise errors.OpExecError(f"Invalid rename entry {entry!r}: expected [old, new]")
        pairs.append((queue_file_path(ctx, entry[0], resolved),
                      queue_file_path(ctx, entry[1], resolved)))
    buckets: set[str] = set()     # archive directories made (once per request)
    for old, new in pairs:
        if not os.path.lexists(old):
            # a queue copy (jobqueue_sync) already archived it, or this node
            # never had it: nothing to do on a replica
            logger.info("Rename of %s: not here (already %s)", old,
                        "there" if os.path.lexists(new) else "gone")
            continue
        try:
            bucket = os.path.dirname(new)
            if bucket not in buckets:
                os.makedirs(bucket, mode=0o750, exist_ok=True)
                buckets.add(bucket)
            os.replace(old, new)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise errors.OpExecError(f"Cannot rename {old} to {new}: {exc}") from exc


@procedure(FAST, fenced=True)
def jobqueue_sync(ctx: NodeContext, files: list, names: list, serial: int) -> list[str]:
    """Write [[file_name, content], ...] (the rest of the master's unarchived queue), then
    archive top-level job files with ids up to serial that are not in names (all the master's
    top-level file names) and clear a drain flag not in names; returns the archived names.

    Make this candidate's unarchived queue the master's.

    Writes ``files`` (``[[file_name, content], ...]``) as
    :func:`jobqueue_update_many` does; ``names`` are the base names of every
    top-level file the master had when it read its queue, ``serial`` its
    queue serial read just before (a large queue comes in several requests:
    earlier ``jobqueue_update_many`` calls, then this one with the last part
    of the files, all the names and the serial).  Then every top-level
    ``job-<id>`` file with an id up to ``serial`` that is not named is
    archived (the master archived it while this node missed the rename; a
    higher id is a job created after the master's read, which this request
    must not touch) and the drain flag is cleared unless named.  Used for a
    new candidate and for one that missed updates.  Returns the names of
    the files archived.
    """
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise errors.OpExecError("names must be a list of file names")
    jobqueue_update_many(ctx, files)
    keep = set(names) | {os.path.basename(queue_file_path(ctx, entry[0])) for entry in files}
    queue_dir = ctx.paths.queue_dir
    if "drain" not in keep:
        try:
            uio.remove_file(ctx.paths.queue_drain_file)
        except OSError as exc:
            raise errors.OpExecError(f"Cannot clear the drain flag: {exc}") from exc
    archived = []
    for name in sorted(os.listdir(queue_dir)):
        match = _JOB_FILE_RE.fullmatch(name)
        if match is None or name in keep or int(match.group(1)) > serial:
            continue
        new = archived_job_file_name(ctx.paths.queue_archive_dir, int(match.group(1)))
        try:
            os.makedirs(os.path.dirname(new), mode=0o750, exist_ok=True)
            os.replace(os.path.join(queue_dir, name), new)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise errors.OpExecError(f"Cannot archive stale queue file {name}: {exc}") from exc
        archived.append(name)
    if archived:
        logger.info("Queue sync archived %d stale job files", len(archived))
    return archived


@procedure(NORMAL, fenced=True)
def jobqueue_purge(ctx: NodeContext) -> None:
    """Remove every job file (and the archive) from the node's queue.

    Remove every file and directory in the queue except the lock file.

    Entries that vanish meanwhile (a concurrent writer's temporary file
    renamed into place) are not errors; anything else that cannot be
    removed is (:class:`errors.OpExecError`, after trying every entry).
    """
    queue_dir = ctx.paths.queue_dir
    if not os.path.isdir(queue_dir):
        return
    failures = []
    for name in os.listdir(queue_dir):
        if name in _KEEP_ON_PURGE:
            continue
        path = os.path.join(queue_dir, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                _remove_tree(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failures.append(f"{path}: {exc}")
    if failures:
        raise errors.OpExecError(f"Cannot remove from the job queue: {'; '.join(failures)}")
    logger.info("Purged job queue %s", queue_dir)


def _remove_tree(path: str, attempts: int = 3) -> None:
    """``rmtree`` that tolerates entries vanishing under it (it then goes again)."""
    for attempt in range(attempts):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            if not os.path.lexists(path) or attempt == attempts - 1:
                raise


@procedure(FAST, fenced=True, keepalive=True)
def jobqueue_set_drain_flag(ctx: NodeContext, drain_flag: bool) -> None:
    """Set or clear the queue drain flag on the node.

    Create (True) or remove (False) the queue's drain file.
    """
    path = ctx.paths.queue_drain_file
    try:
        if drain_flag:
            os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
            uio.write_file_atomic(path, b"", mode=0o644)
        else:
            uio.remove_file(path)
    except OSError as exc:
        raise errors.OpExecError(f"Cannot change the drain flag: {exc}") from exc
