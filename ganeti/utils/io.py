"""File helpers: durable atomic writes, bounded reads, directories."""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile

from ganeti import errors

__all__ = ["write_file_atomic", "read_file", "remove_file", "ensure_dirs",
           "fsync_dir", "file_checksum", "DEFAULT_MAX_READ"]

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
