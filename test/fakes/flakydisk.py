"""A file writer whose writes fail on demand, as on a full disk.

``FlakyDisk()`` is a drop-in for :func:`ganeti.utils.io.write_files_atomic`
(pass it as ``JobStorage(..., write_files=disk)``): it writes for real,
except while :attr:`full` is set, when every call raises ``OSError(ENOSPC)``
and writes nothing.  :meth:`wait_failures` lets a test wait until the code
under test has hit the full disk a number of times.

``GatedWriter()`` is a ``write_fn`` for :class:`ganeti.config.ConfigWriter`
that holds its next write, once armed, until the test opens the gate: the
test can look at everything while a write is in progress, then let it
succeed or fail with ENOSPC.
"""

from __future__ import annotations

import errno
import threading
import time
from typing import Any

from ganeti.config import file as configfile
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

    def config_write_fn(self) -> Any:
        """A ``ConfigWriter`` ``write_fn`` that writes through this disk."""
        return lambda path, raw: self({path: raw}, mode=0o640)

    def writer(self, path: str, data: Any, **kwargs: Any) -> Any:
        """A new ``ConfigWriter`` of ``data`` at ``path`` that writes through this disk."""
        from ganeti.config import ConfigWriter
        return ConfigWriter.initialize(path, data, write_fn=self.config_write_fn(), **kwargs)

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


class GatedWriter:
    """A config ``write_fn`` that holds the next armed writes, each until one :meth:`open`.

    ``arm(count)`` holds the next ``count`` writes; each held write waits
    for its own :meth:`open`, then goes to disk, or fails with ENOSPC and
    writes nothing (``arm(fail=True)``).  :attr:`held` counts the writes
    held so far; :meth:`wait_held` waits for that count.
    """

    def __init__(self, timeout: float = 20.0) -> None:
        self.timeout = timeout
        self.held = 0
        self._armed = 0
        self._fail = False
        self._permits = threading.Semaphore(0)
        self._cond = threading.Condition()

    def arm(self, count: int = 1, *, fail: bool = False) -> None:
        """Hold the next ``count`` writes (and make them fail with ENOSPC if ``fail``)."""
        with self._cond:
            self._armed, self._fail = count, fail

    def open(self) -> None:
        """Let one held write (the current or the next) go on."""
        self._permits.release()

    def wait_held(self, count: int) -> None:
        """Block until ``count`` writes have been held (AssertionError after ``timeout``)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.held >= count, self.timeout):
                raise AssertionError(f"{self.held} of {count} writes were held")

    def __call__(self, path: str, raw: bytes) -> None:
        with self._cond:
            hold, fail = self._armed > 0, self._fail
            if hold:
                self._armed -= 1
                self.held += 1
                self._cond.notify_all()
        if hold:
            if not self._permits.acquire(timeout=self.timeout):
                raise AssertionError("the gated write was never released")
            if fail:
                raise OSError(errno.ENOSPC, "No space left on device")
        configfile.write_config_file(path, raw)
