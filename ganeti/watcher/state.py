"""The watcher's files: group state files, the instance status file, the lock file.

State files (``watcher.<group-uuid>.data``) and the instance status file
are replaced atomically, so a watcher killed half-way leaves the old
version.  A state file that cannot be read or parsed is reset (an empty
state) with a warning in the log, never a crash.  The lock file is held
with ``flock`` for the whole pass: a second watcher on the same node
finds it held and exits at once (doc/watcher.md).
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterable

from ganeti import errors, serializer
from ganeti.utils import io as uio
from ganeti.watcher import core

__all__ = ["load_state", "save_state", "write_instance_status", "WatcherLock"]

logger = logging.getLogger(__name__)


def load_state(path: str) -> core.GroupState:
    """The state stored at ``path``; an empty one if missing, reset if corrupt."""
    try:
        raw = uio.read_file(path)
    except FileNotFoundError:
        return core.GroupState()
    except OSError as exc:
        logger.warning("Cannot read watcher state file %s (%s); resetting it", path, exc)
        return core.GroupState()
    try:
        return core.state_from_data(serializer.loads(raw))
    except (errors.SerializationError, errors.ConfigurationError) as exc:
        logger.warning("Watcher state file %s is corrupt (%s); resetting it", path, exc)
        return core.GroupState()


def save_state(path: str, state: core.GroupState) -> None:
    """Store ``state`` at ``path`` atomically."""
    uio.write_file_atomic(path, serializer.dumps(core.state_to_data(state), pretty=True),
                          mode=0o600)


def write_instance_status(path: str, rows: Iterable[tuple[str, str]]) -> None:
    """Write ``name status`` lines (sorted by name) to ``path`` atomically."""
    text = "".join(f"{name} {status}\n" for name, status in sorted(rows))
    uio.write_file_atomic(path, text, mode=0o644)


class WatcherLock:
    """The per-node watcher lock: ``acquire`` returns False if another holds it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another watcher holds it."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
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
            return uio.read_file(self.path).decode(errors="replace").strip()
        except OSError:
            return ""

    def release(self) -> None:
        """Drop the lock (also dropped when the process exits)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
