"""Whether a daemon runs, from its pid file: light enough for the CLI's start-up.

doc/cli-startup.md: a ``gnt-*`` command imports only a small set of
modules; this one needs nothing beyond :mod:`os` (and :mod:`stat`, which :mod:`os` imports).
"""

from __future__ import annotations

import os
import stat

__all__ = ["running_pid", "is_zombie"]

#: a pid file is a few digits; anything longer is not one
_MAX_PID_FILE = 64
#: Linux pids are below 2**22 (7 digits)
_MAX_PID_DIGITS = 10


def running_pid(path: str) -> int | None:
    """The pid in the pid file ``path`` if that process runs, else None.

    A missing or unreadable file, a non-number, and a process that exited
    (a zombie included) all give None; so does anything but a regular file
    at ``path`` (a symbolic link is not followed, a FIFO does not block).
    """
    try:
        # O_NONBLOCK: a FIFO planted there cannot block the reader
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, _MAX_PID_FILE)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = raw.decode("ascii", "replace").strip()
    if not text.isascii() or not text.isdigit() or len(text) > _MAX_PID_DIGITS:
        return None
    pid = int(text)
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass          # someone else's process: alive unless a zombie
    if is_zombie(pid):
        return None   # died without removing its pid file; nobody reaped it yet
    return pid


def is_zombie(pid: int) -> bool:
    """True if ``pid`` has exited but was not reaped (its parent, often init, has
    not waited for it yet); such a pid still passes ``kill(pid, 0)``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    fields = stat.rpartition(b")")[2].split()
    return bool(fields) and fields[0] in (b"Z", b"X")
