"""Unix socket paths of any length: bind and connect past ``sun_path``'s limit.

A Unix socket's address holds at most :data:`MAX_PATH` bytes (``sun_path``
is 108 bytes, the last one its terminating NUL).  A socket under a deep
directory (a data directory under a long root, an instance with a long
name) can pass it; :func:`bind` and :func:`connect` then reach the socket
through ``/proc/self/fd/<n>/<name>``, ``<n>`` an ``O_PATH`` descriptor of
the socket's directory, closed again at once: the socket is still made
(and found) at its real path, which stays what every other process uses.
When even that cannot work (the file name itself too long, no ``/proc``)
the :class:`OSError` names the path and the limit.

Imports nothing but :mod:`os` (on the ``gnt-*`` start-up path through
:mod:`ganeti.luxi`, doc/cli-startup.md); a socket object is passed in.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_PATH", "too_long", "bind", "connect"]

#: the longest Unix socket path, in bytes (``sun_path`` less its NUL)
MAX_PATH = 107


def too_long(path: str) -> bool:
    """Whether ``path`` does not fit a Unix socket address as it is."""
    return len(os.fsencode(path)) > MAX_PATH


def _through_directory(sock: Any, path: str, call: str) -> None:
    """``sock.<call>`` (bind or connect) on the long ``path`` through its directory."""
    import errno    # only here: not on the CLI's start-up path
    name = os.path.basename(path)
    where = f"{path}: {len(os.fsencode(path))} bytes, over the {MAX_PATH}-byte limit of a" \
            " Unix socket path"
    dirfd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        short = f"/proc/self/fd/{dirfd}/{name}"
        if too_long(short):
            raise OSError(errno.ENAMETOOLONG, f"{where}, and its file name alone is too long"
                                              " to reach it through its directory")
        try:
            getattr(sock, call)(short)
        except OSError as exc:
            if os.path.isdir(f"/proc/self/fd/{dirfd}"):
                raise    # reached the socket: its own error (refused, in use, ...)
            raise OSError(exc.errno, f"{where}, and /proc/self/fd, the way to reach it"
                                     f" through its directory, is missing: {exc}") from exc
    finally:
        os.close(dirfd)


def bind(sock: Any, path: str) -> None:
    """``sock.bind(path)`` for an ``AF_UNIX`` socket, ``path`` of any length."""
    if too_long(path):
        _through_directory(sock, path, "bind")
    else:
        sock.bind(path)


def connect(sock: Any, path: str) -> None:
    """``sock.connect(path)`` for an ``AF_UNIX`` socket, ``path`` of any length."""
    if too_long(path):
        _through_directory(sock, path, "connect")
    else:
        sock.connect(path)
