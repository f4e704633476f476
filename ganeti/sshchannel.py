"""Reading an SSH channel: a command's output to its end, and an interactive terminal.

:class:`ganeti.ssh.SshRunner` opens the channels; this module reads them.

The end of a command's output is the channel's EOF, not its exit status (the
command is done when both are in, in either order):
OpenSSH's sshd sends ``exit-status`` as soon as the command exits, ahead of
output the channel's window still holds back, so a reader that stopped at
the exit status cut large outputs short (doc/storage.md, "DRBD figures").
A command that leaves a process behind holding its stdout sends no EOF;
once its exit status is in, reading ends after :data:`EOF_GRACE` seconds
without data.

paramiko is imported only where it is needed (see :mod:`ganeti.ssh`).
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import paramiko

__all__ = ["EOF_GRACE", "collect", "terminal_size", "raw_terminal", "forward_resizes",
           "pump_terminal"]

_POLL_INTERVAL = 0.05
_READ_CHUNK = 65536
#: seconds without data after the exit status before a command whose output has
#: no EOF (a process it left behind holds its stdout) is taken as done
EOF_GRACE = 3.0


def collect(chan: paramiko.Channel, timeout: float | None,
            clock: Callable[[], float] = time.monotonic) -> tuple[bytes, bytes, bool]:
    """``(stdout, stderr, timed_out)`` of the command on ``chan``: read until its
    output ends (the module's docstring) or ``timeout`` seconds passed (the
    channel is then closed)."""
    deadline = None if timeout is None else clock() + timeout
    out: list[bytes] = []
    err: list[bytes] = []
    fileno = chan.fileno()
    quiet: list[float] = []
    while True:
        progressed = False
        while chan.recv_ready():
            out.append(chan.recv(_READ_CHUNK))
            progressed = True
        while chan.recv_stderr_ready():
            err.append(chan.recv_stderr(_READ_CHUNK))
            progressed = True
        if progressed:
            quiet.clear()
            continue
        transport = chan.get_transport()
        gone = chan.closed or transport is None or not transport.is_active()
        # EOF may come before the exit status: the command is done when both are in
        if gone or (chan.eof_received and chan.exit_status_ready()) \
                or (not chan.eof_received and _quiet_after_exit(chan, quiet, False, clock)):
            # EOF (or close) arrives after all data: the buffers are complete
            while chan.recv_ready():
                out.append(chan.recv(_READ_CHUNK))
            while chan.recv_stderr_ready():
                err.append(chan.recv_stderr(_READ_CHUNK))
            return b"".join(out), b"".join(err), False
        wait = _POLL_INTERVAL
        if deadline is not None:
            remaining = deadline - clock()
            if remaining <= 0:
                chan.close()
                return b"".join(out), b"".join(err), True
            wait = min(wait, remaining)
        select.select([fileno], [], [], wait)


def terminal_size(fd: int) -> tuple[int, int]:
    """``(columns, rows)`` of the terminal on ``fd``; 80x24 when it is none."""
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return 80, 24
    return size.columns or 80, size.lines or 24


class raw_terminal:  # noqa: N801 - used as a context manager, like a function
    """Put the terminal on ``fd`` in raw mode for a ``with`` block (no-op if none)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: list[Any] | None = None

    def __enter__(self) -> None:
        import termios
        import tty
        try:
            self._saved = termios.tcgetattr(self.fd)
        except (termios.error, OSError):
            return
        tty.setraw(self.fd)

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            import termios
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)


class forward_resizes:  # noqa: N801 - used as a context manager, like a function
    """While in the block, send our terminal's new size to the channel on SIGWINCH.

    Only in the main thread (where signal handlers can be set); a no-op elsewhere.
    """

    def __init__(self, chan: paramiko.Channel, fd: int) -> None:
        self.chan = chan
        self.fd = fd
        self._old: Any = None
        self._set = False

    def _resize(self, signum: int, frame: object) -> None:
        import paramiko
        cols, rows = terminal_size(self.fd)
        try:
            self.chan.resize_pty(width=cols, height=rows)
        except (OSError, EOFError, paramiko.SSHException):
            pass   # a resize is best effort

    def __enter__(self) -> None:
        import signal
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGWINCH, self._resize)
            self._set = True

    def __exit__(self, *exc: object) -> None:
        if self._set:
            import signal
            signal.signal(signal.SIGWINCH, self._old)


def pump_terminal(chan: paramiko.Channel, stdin_fd: int, stdout_fd: int) -> None:
    """Copy ``stdin_fd`` to the channel and the channel to ``stdout_fd`` until it closes."""
    stdin_open = True
    quiet: list[float] = []
    while True:
        readers: list[int] = [chan.fileno()] + ([stdin_fd] if stdin_open else [])
        ready, _, _ = select.select(readers, [], [], _POLL_INTERVAL * 4)
        got = False
        while chan.recv_ready():
            _write_all(stdout_fd, chan.recv(_READ_CHUNK))
            got = True
        while chan.recv_stderr_ready():
            _write_all(stdout_fd, chan.recv_stderr(_READ_CHUNK))
            got = True
        if chan.closed or chan.eof_received or _quiet_after_exit(chan, quiet, got):
            while chan.recv_ready():
                _write_all(stdout_fd, chan.recv(_READ_CHUNK))
            return
        transport = chan.get_transport()
        if transport is None or not transport.is_active():
            return
        if stdin_open and stdin_fd in ready:
            try:
                data = os.read(stdin_fd, _READ_CHUNK)
            except OSError:
                data = b""
            if data:
                chan.sendall(data)
            else:
                stdin_open = False
                chan.shutdown_write()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _quiet_after_exit(chan: paramiko.Channel, quiet: list[float], progressed: bool,
                      clock: Callable[[], float] = time.monotonic) -> bool:
    """Whether the command exited and nothing came for :data:`EOF_GRACE` seconds
    since; ``quiet`` holds when the quiet began (empty: not quiet)."""
    if progressed or not chan.exit_status_ready():
        quiet.clear()
        return False
    if not quiet:
        quiet.append(clock())
    return clock() - quiet[0] >= EOF_GRACE
