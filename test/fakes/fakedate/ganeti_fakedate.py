"""Run whole processes on a shifted wall clock, for the calendar tests.

libfaketime cannot serve here: with the monotonic clock faked, Python's
timed lock waits sleep for the whole shift; without it, ``time.sleep``
fails with EINVAL.  So the wall clock is shifted inside Python instead:
when ``GANETI_TEST_TIME_OFFSET`` (seconds, may be negative) is set, every
Python process of the project's virtualenv adds it to ``time.time()`` and
to everything that reads the wall clock by default (``localtime``,
``gmtime``, ``ctime``, ``asctime``, ``strftime``, ``datetime.now`` and
friends).  The monotonic clock is left alone.

The hook is a ``.pth`` line in the virtualenv (``--install-hook``, done by
the Makefile), so the master and node daemons, the ``gnt-*`` commands and
the tests all share one shifted clock.  Without the variable it does
nothing.  Shifts go backwards (the newest 1st or 15th of a month that is
not in the future), so certificates made on the shifted clock are already
valid for OpenSSL, which reads the real one.

``python ganeti_fakedate.py --offset DAY HH:MM:SS`` prints the shift to the
newest past DAY of a month at that local time (``$TZ``).
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False   # no typing at run time: the CLI start-up tests look for it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

ENV = "GANETI_TEST_TIME_OFFSET"
HOOK_NAME = "ganeti-test-fakedate.pth"
_installed: list[float] = []   # the shift in force (site may read the .pth twice: lib, lib64)


class _Plain:
    """A callable that stays unbound as a class attribute, as built-in functions do."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


def install(offset: float) -> None:
    """Shift this process's wall clock by ``offset`` seconds (once; later calls do nothing)."""
    if _installed:
        return
    _installed.append(offset)
    import datetime as _dt

    real_time, real_time_ns = time.time, time.time_ns
    real_localtime, real_gmtime = time.localtime, time.gmtime
    real_ctime, real_asctime, real_strftime = time.ctime, time.asctime, time.strftime
    offset_ns = int(offset * 1e9)

    def fake_time() -> float:
        return real_time() + offset

    def fake_time_ns() -> int:
        return real_time_ns() + offset_ns

    def fake_localtime(secs: float | None = None) -> time.struct_time:
        return real_localtime(fake_time() if secs is None else secs)

    def fake_gmtime(secs: float | None = None) -> time.struct_time:
        return real_gmtime(fake_time() if secs is None else secs)

    def fake_ctime(secs: float | None = None) -> str:
        return real_ctime(fake_time() if secs is None else secs)

    def fake_asctime(t: object = None) -> str:
        return real_asctime(fake_localtime() if t is None else t)  # type: ignore[arg-type]

    def fake_strftime(fmt: str, t: object = None) -> str:
        return real_strftime(fmt, fake_localtime() if t is None else t)  # type: ignore[arg-type]

    class FakeDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def,override]
            return cls.fromtimestamp(fake_time(), tz)

        @classmethod
        def utcnow(cls):  # type: ignore[no-untyped-def,override]
            return cls.fromtimestamp(fake_time(), _dt.timezone.utc).replace(tzinfo=None)

        @classmethod
        def today(cls):  # type: ignore[no-untyped-def,override]
            return cls.fromtimestamp(fake_time())

    class FakeDate(_dt.date):
        @classmethod
        def today(cls):  # type: ignore[no-untyped-def,override]
            return cls.fromtimestamp(fake_time())

    # plain functions would become methods where a class keeps them as an attribute
    # (logging.Formatter.converter = time.localtime): wrap them in _Plain
    time.time, time.time_ns = _Plain(fake_time), _Plain(fake_time_ns)
    time.localtime, time.gmtime = _Plain(fake_localtime), _Plain(fake_gmtime)
    time.ctime, time.asctime = _Plain(fake_ctime), _Plain(fake_asctime)
    time.strftime = _Plain(fake_strftime)
    _dt.datetime, _dt.date = FakeDatetime, FakeDate  # type: ignore[misc]


def from_environment() -> None:
    """Install the shift named by ``$GANETI_TEST_TIME_OFFSET``, if any (the hook's entry)."""
    raw = os.environ.get(ENV)
    if raw:
        install(float(raw))


def offset_to(day: int, clock: str, now: float | None = None) -> float:
    """Seconds from ``now`` back to the newest past ``day`` of a month at local ``clock``."""
    now = time.time() if now is None else now
    hour, minute, second = (int(x) for x in clock.split(":"))
    tm = time.localtime(now)
    year, month = tm.tm_year, tm.tm_mon
    for _ in range(3):
        target = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
        if target <= now:
            return target - now
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    raise ValueError(f"no past day {day} at {clock}")


def install_hook() -> str:
    """Write the ``.pth`` hook into this interpreter's site-packages; returns its path."""
    import site
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.path.join(site.getsitepackages()[0], HOOK_NAME)
    text = (f"{here}\n"
            f"import os; os.environ.get({ENV!r}) and __import__('ganeti_fakedate')"
            ".from_environment()\n")
    try:
        with open(target, encoding="utf-8") as fh:
            if fh.read() == text:
                return target
    except FileNotFoundError:
        pass
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(text)
    return target


if __name__ == "__main__":
    if sys.argv[1:2] == ["--install-hook"]:
        print(install_hook())
    elif sys.argv[1:2] == ["--offset"] and len(sys.argv) == 4:
        print(f"{offset_to(int(sys.argv[2]), sys.argv[3]):.0f}")
    else:
        sys.exit("usage: ganeti_fakedate.py --install-hook | --offset DAY HH:MM:SS")
