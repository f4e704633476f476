"""The watcher's files: group state files, the instance status file, the lock file.

State files (``watcher.<group-uuid>.data``) and the instance status file
are replaced atomically, so a watcher killed half-way leaves the old
version.  A state file that cannot be read or parsed is reset (an empty
state) with a warning in the log, never a crash.  The lock file is held
with ``flock`` for the whole pass: a second watcher on the same node
finds it held and exits at once (doc/watcher.md).

None of these paths is followed through a symbolic link
(:mod:`ganeti.utils.localfile`): something other than a regular file at a
state path is moved aside with a warning and the state starts empty; at
the status path it is replaced; at the lock path the watcher refuses to
run (:class:`errors.UntrustedFileError`) and touches nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterable

from ganeti import errors, serializer
from ganeti.utils import localfile
from ganeti.watcher import core

__all__ = ["load_state", "save_state", "write_instance_status", "WatcherLock"]

logger = logging.getLogger(__name__)


def load_state(path: str) -> core.GroupState:
    """The state stored at ``path``; an empty one if missing, reset if corrupt.

    A non-file at ``path`` (a directory, a symbolic link, a FIFO) is moved
    aside with a warning and counts as missing.
    """
    try:
        raw = localfile.read_local(path, what="watcher state file", replace=True)
    except (OSError, errors.GanetiError) as exc:
        logger.warning("Cannot read watcher state file %s (%s); resetting it", path, exc)
        return core.GroupState()
    if raw is None:
        return core.GroupState()
    try:
        return core.state_from_data(serializer.loads(raw))
    except (errors.SerializationError, errors.ConfigurationError) as exc:
        logger.warning("Watcher state file %s is corrupt (%s); resetting it", path, exc)
        return core.GroupState()


def save_state(path: str, state: core.GroupState) -> None:
    """Store ``state`` at ``path`` atomically (a directory there is moved aside first)."""
    localfile.write_local_atomic(path, serializer.dumps(core.state_to_data(state), pretty=True),
                                 mode=0o600, what="watcher state file")


def write_instance_status(path: str, rows: Iterable[tuple[str, str]]) -> None:
    """Write ``name status`` lines (sorted by name) to ``path`` atomically."""
    text = "".join(f"{name} {status}\n" for name, status in sorted(rows))
    localfile.write_local_atomic(path, text, mode=0o644, what="instance status file")


class WatcherLock:
    """The per-node watcher lock: ``acquire`` returns False if another holds it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another watcher holds it.

        Raises :class:`errors.UntrustedFileError` when something other than
        a regular file (a symbolic link, a directory, a FIFO) is at the lock
        path; it is left as it is (a link's target is never opened).
        """
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = localfile.open_local(self.path, os.O_RDWR | os.O_CREAT, 0o600,
                                  what="watcher lock file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def holder(self) -> str:
        """The pid written by the current holder ('' when unknown)."""
        try:
            data = localfile.read_local(self.path, what="watcher lock file", max_size=64)
        except (OSError, errors.GanetiError):
            return ""
        return (data or b"").decode(errors="replace").strip()

    def release(self) -> None:
        """Drop the lock (also dropped when the process exits)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
