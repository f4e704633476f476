"""A file writer whose writes fail on demand, as on a full disk.

``FlakyDisk()`` is a drop-in for :func:`ganeti.utils.io.write_files_atomic`
(pass it as ``JobStorage(..., write_files=disk)``): it writes for real,
except while :attr:`full` is set, when every call raises ``OSError(ENOSPC)``
and writes nothing.  :meth:`wait_failures` lets a test wait until the code
under test has hit the full disk a number of times.
"""

from __future__ import annotations

import errno
import threading
import time
from typing import Any

from ganeti.utils import io as uio

_write_files_atomic = uio.write_files_atomic   # the real one, even if a test patches uio


class FlakyDisk:
    """``write_files_atomic`` with a switch: ``full = True`` makes it fail."""

    def __init__(self) -> None:
        self.full = False
        self.failures = 0
        self.writes: list[dict[str, bytes]] = []
        self._cond = threading.Condition()

    def __call__(self, files: dict[str, bytes], **kwargs: Any) -> None:
        with self._cond:
            if self.full:
                self.failures += 1
                self._cond.notify_all()
                raise OSError(errno.ENOSPC, "No space left on device")
        _write_files_atomic(files, **kwargs)
        with self._cond:
            self.writes.append(dict(files))
            self._cond.notify_all()

    def wait_failures(self, count: int, timeout: float = 10.0) -> None:
        """Block until ``count`` writes have failed (AssertionError after
        ``timeout`` real seconds)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.failures < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.failures} of {count} writes failed")
                self._cond.wait(left)
