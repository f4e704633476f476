"""A daemon's own local files (pid files, locks, state): never follow a link there.

The files a daemon or the watcher keeps below its run and data directories
are opened with ``O_NOFOLLOW`` (a symbolic link planted at the path is not
followed, so its target is never truncated or written) and ``O_NONBLOCK``
(a FIFO cannot block the opener), and must turn out to be regular files.
What the caller does with something else at the path depends on the
file (doc/watcher.md, "Files"):

* ``replace=True`` (state files, pid files): the entry is moved aside to
  ``<path>.invalid-<k>`` with a warning in the log, and a fresh file is
  used; the bad entry itself (a link's target, a directory's content) is
  left untouched for the operator to look at;
* ``replace=False`` (the watcher lock): :class:`errors.UntrustedFileError`
  names the path and what is there; nothing is touched.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat

from ganeti import errors
from ganeti.utils import io as uio

__all__ = ["describe_entry", "move_aside", "open_local", "read_local", "write_local_atomic",
           "MAX_ASIDE"]

logger = logging.getLogger(__name__)

#: how many ``<path>.invalid-<k>`` names :func:`move_aside` tries
MAX_ASIDE = 100

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str | None:
    """None for a regular file, else what the entry is ("a directory", ...)."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def describe_entry(path: str) -> str | None:
    """What is wrong at ``path``: None when nothing is there or a regular file is,
    else what is there (``"a symbolic link"``, ``"a directory"``, ``"a FIFO"`` ...).

    Looks at the entry itself (``lstat``), never at a link's target.
    """
    try:
        return _kind(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def move_aside(path: str) -> str:
    """Rename the entry at ``path`` to the first free ``<path>.invalid-<k>``; the new name.

    The entry is renamed, not opened: a link's target and a directory's
    content stay as they are.  Raises :class:`OSError` when no name is free
    or the rename fails.
    """
    for k in range(1, MAX_ASIDE + 1):
        target = f"{path}.invalid-{k}"
        try:
            os.lstat(target)
        except FileNotFoundError:
            os.rename(path, target)
            return target
    raise OSError(errno.EEXIST, f"no free name to move {path} aside ({MAX_ASIDE} tried)", path)


def _untrusted(path: str, what: str, kind: str) -> errors.UntrustedFileError:
    return errors.UntrustedFileError(f"{what} {path} is {kind}, not a regular file", path)


def _replace_entry(path: str, what: str, kind: str) -> None:
    """Move the bad entry at ``path`` aside (with a warning in the log)."""
    try:
        aside = move_aside(path)
    except OSError as exc:
        raise errors.UntrustedFileError(
            f"{what} {path} is {kind}, not a regular file, and cannot be moved aside: {exc}",
            path) from exc
    logger.warning("%s %s was %s, not a regular file; moved it aside to %s", what.capitalize(),
                   path, kind, aside)


def open_local(path: str, flags: int, mode: int = 0o600, *, what: str = "file",
               replace: bool = False) -> int:
    """Open the local file ``path`` (``os.open`` ``flags``, ``mode`` when created); the fd.

    The file is opened with ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`` added,
    and the descriptor is checked to be a regular file (``O_NONBLOCK`` is
    cleared again).  When something else is at ``path`` (a symbolic link, a
    directory, a FIFO ...): with ``replace`` it is moved aside
    (:func:`move_aside`, a warning naming ``what``) and the file opened
    afresh; without, :class:`errors.UntrustedFileError` is raised and
    nothing is touched.  Other failures raise :class:`OSError`.
    """
    full = flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(2):
        kind: str | None = None
        try:
            fd = os.open(path, full, mode)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise
            kind = describe_entry(path)
            if kind is None:
                raise
        else:
            kind = _kind(os.fstat(fd).st_mode)
            if kind is None:
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
                return fd
            os.close(fd)
        if not replace:
            raise _untrusted(path, what, kind)
        _replace_entry(path, what, kind)
    raise _untrusted(path, what, describe_entry(path) or "not a regular file")


def read_local(path: str, *, what: str = "file", replace: bool = False,
               max_size: int = uio.DEFAULT_MAX_READ) -> bytes | None:
    """The content of the local file ``path``; None when it does not exist.

    As :func:`open_local` (read-only): something other than a regular file
    is moved aside with a warning (``replace``, then None is returned) or
    refused with :class:`errors.UntrustedFileError`.  Raises
    :class:`errors.GanetiError` for a file over ``max_size`` bytes.
    """
    try:
        fd = open_local(path, os.O_RDONLY, what=what, replace=False)
    except FileNotFoundError:
        return None
    except errors.UntrustedFileError:
        kind = describe_entry(path)
        if not replace or kind is None:
            raise
        _replace_entry(path, what, kind)
        return None
    with os.fdopen(fd, "rb") as fh:
        data = uio.read_limited(fh, max_size)
    if len(data) > max_size:
        raise errors.GanetiError(f"{what.capitalize()} {path} is larger than {max_size} bytes")
    return data


def write_local_atomic(path: str, data: bytes | str, *, mode: int = 0o644,
                       what: str = "file") -> None:
    """Replace the local file ``path`` with ``data`` atomically (:func:`uio.write_file_atomic`).

    The rename replaces a symbolic link or FIFO at ``path`` itself (never a
    link's target); a directory there, which a rename cannot replace, is
    moved aside first.  Either is logged as a warning.
    """
    kind = describe_entry(path)
    if kind == "a directory":
        _replace_entry(path, what, kind)
    elif kind is not None:
        logger.warning("%s %s was %s, not a regular file; replacing it", what.capitalize(),
                       path, kind)
    uio.write_file_atomic(path, data, mode=mode)
