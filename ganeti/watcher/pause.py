"""The watcher pause file: a pause-until timestamp, one copy on every node.

``gnt-cluster watcher pause`` (LUXI ``SetWatcherPause``) writes it on the
master and, through the ``set_watcher_pause`` RPC, on every other online
node, so the watcher of each node can check its own copy; ``continue``
removes it.  A file holding a time in the past (or garbage) means "not
paused".
"""

from __future__ import annotations

import math

from ganeti import errors
from ganeti.utils import io as uio
from ganeti.utils import localfile

__all__ = ["read_pause", "write_pause", "check_until"]


def check_until(until: object) -> float | None:
    """``until`` as a float timestamp (or None); :class:`errors.ParameterError` otherwise."""
    if until is None:
        return None
    if isinstance(until, bool) or not isinstance(until, (int, float)) \
            or not math.isfinite(until):
        raise errors.ParameterError(f"Invalid watcher pause time {until!r}: expected a"
                                    " timestamp or null", errors.ECODE_INVAL)
    return float(until)


def read_pause(path: str, now: float) -> int | None:
    """The pause-until time (whole seconds) at ``path`` if it lies after ``now``, else None.

    The file is read without following a symbolic link; a link, a FIFO or a
    directory there means "not paused" (:mod:`ganeti.utils.localfile`).
    """
    try:
        raw = localfile.read_local(path, what="watcher pause file", max_size=4096)
        until = float((raw or b"").strip() or b"0")
    except (OSError, ValueError, errors.GanetiError):
        return None
    return int(until) if math.isfinite(until) and until > now else None


def write_pause(path: str, until: float | None) -> None:
    """Store ``until`` (whole seconds, as Ganeti) at ``path`` atomically; None removes it."""
    if until is None:
        uio.remove_file(path)
    else:
        uio.write_file_atomic(path, f"{int(until)}\n")
