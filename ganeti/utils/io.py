"""File helpers: durable atomic writes, bounded reads, directories."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import itertools
import os
import tempfile
from collections.abc import Mapping

from ganeti import errors

__all__ = ["write_file_atomic", "write_files_atomic", "read_file", "remove_file", "ensure_dirs",
           "fsync_dir", "file_checksum", "DEFAULT_MAX_READ",
           "SYNC_FSYNC", "SYNC_SYNCFS", "SYNC_NONE"]

DEFAULT_MAX_READ = 64 * 1024 * 1024


def fsync_dir(path: str) -> None:
    """fsync a directory so that a rename in it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomic(path: str, data: bytes | str, *, mode: int = 0o644,
                      fsync: bool = True, uid: int | None = None,
                      gid: int | None = None) -> None:
    """Replace ``path`` with ``data`` so that readers see old or new, never half.

    Writes a temporary file in the same directory, fsyncs it, renames it over
    ``path`` and fsyncs the directory.  A crash at any point leaves either
    the old file or the new one; a leftover temporary file is named
    ``.<name>.tmp*`` and never read.  Raises :class:`OSError` (e.g. ENOSPC),
    in which case the old file is untouched and the temporary file removed.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    dirname, base = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.tmp", dir=dirname)
    try:
        try:
            os.fchmod(fd, mode)
            if uid is not None or gid is not None:
                os.fchown(fd, -1 if uid is None else uid, -1 if gid is None else gid)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if fsync:
        fsync_dir(dirname)


SYNC_FSYNC = "fsync"     # one fsync per file
SYNC_SYNCFS = "syncfs"   # one syncfs(2) of the filesystem for the whole batch
SYNC_NONE = "none"       # no durability (tests, benchmarks of the rest)

_batch_seq = itertools.count(1)
_syncfs_fn = None


def _syncfs(path: str) -> None:
    """syncfs(2) of the filesystem holding ``path`` (Python has no wrapper)."""
    global _syncfs_fn
    if _syncfs_fn is None:
        _syncfs_fn = ctypes.CDLL(None, use_errno=True).syncfs
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _syncfs_fn(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    finally:
        os.close(fd)


def write_files_atomic(files: Mapping[str, bytes], *, mode: int = 0o640,
                       sync: str = SYNC_FSYNC) -> None:
    """Replace every ``{path: data}`` atomically, with one durability barrier.

    Writes all temporary files (``.<name>.tmp<n>`` next to each target),
    makes them durable (``sync``: an fsync each, or one ``syncfs`` of the
    filesystem of the first file, or nothing), renames them into place in
    the mapping's order and fsyncs each touched directory once.  Cheaper
    than :func:`write_file_atomic` per file: a batch of N files costs one
    directory fsync per directory instead of N.  Readers see each file old
    or new, never half-written.  On :class:`OSError` the temporary files not
    yet renamed are removed; files already renamed stay replaced.
    """
    if not files:
        return
    seq = next(_batch_seq)
    temps: list[tuple[str, str]] = []
    dirs: dict[str, None] = {}
    try:
        for path, data in files.items():
            dirname, base = os.path.split(path)
            tmp = os.path.join(dirname, f".{base}.tmp{os.getpid()}.{seq}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            temps.append((tmp, path))
            try:
                os.fchmod(fd, mode)    # not the umask's, nor a leftover's
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if sync == SYNC_FSYNC:
                    os.fsync(fd)
            finally:
                os.close(fd)
            dirs[dirname] = None
        if sync == SYNC_SYNCFS:
            _syncfs(next(iter(dirs)))
        for tmp, path in temps:
            os.replace(tmp, path)
        temps = []
        if sync != SYNC_NONE:
            for dirname in dirs:
                fsync_dir(dirname)
    finally:
        for tmp, _ in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def read_file(path: str, *, max_size: int = DEFAULT_MAX_READ) -> bytes:
    """Read a whole file, refusing files larger than ``max_size`` bytes.

    Raises :class:`errors.ProgrammerError`-free :class:`OSError` for missing
    files and :class:`errors.GanetiError` when the file is too large.
    """
    with open(path, "rb") as fh:
        data = fh.read(max_size + 1)
    if len(data) > max_size:
        raise errors.GanetiError(f"File {path} is larger than {max_size} bytes")
    return data


def remove_file(path: str) -> bool:
    """Remove a file; returns False (no error) when it did not exist."""
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise
    return True


def ensure_dirs(dirs: list[tuple[str, int]]) -> None:
    """Create each ``(path, mode)`` directory (with parents) and set its mode."""
    for path, mode in dirs:
        os.makedirs(path, mode=mode, exist_ok=True)
        os.chmod(path, mode)


def file_checksum(path: str) -> str | None:
    """SHA-1 hex digest of a file's content, or None when it cannot be read.

    Used to compare cluster files across nodes (verify, node_verify).
    """
    digest = hashlib.sha1()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1024 * 1024), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()
