"""Talk to a tinylinux guest (tools/harness/tinylinux.py) from a test: its serial log and its shell.

The guest prints ``tinylinux: booted <hostname>`` once per boot and
``tinylinux: uptime <seconds>`` every two seconds on its serial console,
and runs a shell there.  qemu keeps everything the guest wrote in the
instance's ``serial.log`` (``KvmHypervisor.serial_log(name)``) and serves
the console on ``serial.sock`` (``KvmHypervisor.serial_socket(name)``)::

    log = hv.serial_log(INST)
    wait_for_line(log, BOOT_LINE, count=2)          # the second boot
    with SerialConsole(hv.serial_socket(INST)) as con:
        assert con.run("cat /sys/block/vda/size") == "131072"
    assert uptimes(log)[-1] > 10.0

Every wait is bounded (``timeout``) and polls; nothing asserts wall-clock
time.
"""

from __future__ import annotations

import os
import pty
import re
import select
import socket
import subprocess
import time
from collections.abc import Callable

from ganeti import errors
from ganeti.hypervisor.kvm.qmp import connect_unix
from tools.harness.tinylinux import BOOT_LINE, UPTIME_LINE

__all__ = ["BOOT_LINE", "UPTIME_LINE", "read_log", "log_lines", "boot_count", "uptimes",
           "wait_for_line", "wait_for", "SerialConsole"]

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def read_log(path: str) -> str:
    """The serial log's text ("" while it does not exist), escape sequences removed."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return ""
    return _ESCAPE.sub("", data.decode(errors="replace")).replace("\r", "")


def log_lines(path: str, prefix: str) -> list[str]:
    """The lines of the serial log that contain ``prefix`` (from ``prefix`` on)."""
    out = []
    for line in read_log(path).splitlines():
        at = line.find(prefix)
        if at >= 0:
            out.append(line[at:])
    return out


def boot_count(path: str) -> int:
    """How many times the guest printed its booted line."""
    return len(log_lines(path, BOOT_LINE))


def uptimes(path: str) -> list[float]:
    """The guest's uptime figures, in the order printed (several boots follow each other)."""
    out = []
    for line in log_lines(path, UPTIME_LINE):
        words = line[len(UPTIME_LINE):].split()
        try:
            out.append(float(words[0]))
        except (IndexError, ValueError):
            continue  # a line cut short by a reset or interleaved output
    return out


def wait_for(predicate: Callable[[], object], what: str, timeout: float = 120.0,
             poll: float = 0.2) -> object:
    """Poll ``predicate`` until it returns a true value (returned); AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


def wait_for_line(path: str, prefix: str = BOOT_LINE, *, count: int = 1,
                  timeout: float = 120.0) -> str:
    """Wait until ``prefix`` occurs on ``count`` lines of the serial log; the ``count``-th line."""
    def seen() -> str | None:
        lines = log_lines(path, prefix)
        return lines[count - 1] if len(lines) >= count else None

    try:
        return str(wait_for(seen, f"{count} x {prefix!r} in {path}", timeout))
    except AssertionError as exc:
        tail = read_log(path)[-2000:]
        raise AssertionError(f"{exc}; the log ends with:\n{tail}") from None


class SerialConsole:
    """A client of the guest's serial console socket (one client at a time: qemu's rule).

    :meth:`run` sends one shell command line and returns what it printed:
    the command is framed by two ``echo`` markers written so that the
    terminal's echo of the typed line does not contain them, the uptime
    lines of the guest's background loop are dropped.
    """

    def __init__(self, socket_path: str, timeout: float = 60.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.buffer = ""
        self._serial = 0

    def __enter__(self) -> SerialConsole:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Connect and wait until the guest's shell answers (a marker round trip)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connect_unix(sock, self.socket_path)
        sock.settimeout(0.2)
        self.sock = sock
        deadline = time.monotonic() + self.timeout
        while True:  # the shell may not be reading yet: repeat a harmless marker echo
            marker = self._marker("R")
            self.send(f"echo {marker[:2]}''{marker[2:]}\n")
            if self._read_until(marker + "\n", 2.0) is not None:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the guest's shell did not answer on {self.socket_path};"
                                     f" received:\n{self.buffer[-2000:]}")

    def close(self) -> None:
        """Disconnect (the guest's shell stays)."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _marker(self, kind: str) -> str:
        self._serial += 1
        return f"@@{kind}{self._serial}@@"

    def send(self, text: str) -> None:
        """Type ``text`` on the console as is."""
        assert self.sock is not None, "not connected"
        self.sock.sendall(text.encode())

    def _receive(self) -> None:
        assert self.sock is not None, "not connected"
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return
        if not data:
            raise AssertionError("the guest's console closed (qemu gone?)")
        self.buffer += _ESCAPE.sub("", data.decode(errors="replace")).replace("\r", "")

    def _read_until(self, needle: str, timeout: float) -> str | None:
        """Everything up to and including ``needle`` (consumed), None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while needle not in self.buffer:
            if time.monotonic() > deadline:
                return None
            self._receive()
        at = self.buffer.index(needle) + len(needle)
        text, self.buffer = self.buffer[:at], self.buffer[at:]
        return text

    def read_until(self, needle: str, timeout: float | None = None) -> str:
        """What the guest printed up to and including ``needle``; AssertionError on timeout."""
        text = self._read_until(needle, self.timeout if timeout is None else timeout)
        if text is None:
            raise AssertionError(f"{needle!r} not seen on the console; received:\n"
                                 f"{self.buffer[-2000:]}")
        return text

    def run(self, command: str, timeout: float | None = None) -> str:
        """Run ``command`` in the guest's shell; its output (stripped, uptime lines dropped)."""
        begin, end = self._marker("B"), self._marker("E")
        self.send(f"echo {begin[:2]}''{begin[2:]}; {command}; echo {end[:2]}''{end[2:]}\n")
        self.read_until(begin + "\n", timeout)
        text = self.read_until(end + "\n", timeout)[:-len(end) - 1]
        lines = [line for line in text.split("\n") if not line.startswith(UPTIME_LINE)]
        return "\n".join(lines).strip()

    def send_line(self, line: str, timeout: float | None = None) -> None:
        """Type one line and wait for its echo only (``poweroff -f``, ``reboot -f``).

        Waiting for the echo matters: qemu drops what it has not yet fed to
        the guest's serial port when the client disconnects.  The echo of the
        line's text does not mean the guest has read its newline: stay
        connected until the command has taken effect.
        """
        line = line.rstrip("\n")
        self.send(line + "\n")
        self.read_until(line, timeout)



def stop_all(hypervisors) -> None:
    """Force-stop every instance each hypervisor object still runs (test clean-up)."""
    for hv in hypervisors:
        for name in hv.list_instances():
            try:
                hv.stop_instance(name, force=True)
            except errors.HypervisorError:
                pass


def talk_on_a_pty(argv: list[str], env: dict[str, str], marker: str,
                  timeout: float = 90.0) -> tuple[int, bytes]:
    """Run ``argv`` on a new pty, type ``echo marker`` until it answers, detach with Ctrl-].

    Returns the exit status and what the pty showed.
    """

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    seen = b""
    quoted = f"{marker[:2]}''{marker[2:]}"   # the typed line's echo does not hold the marker
    try:
        deadline = time.monotonic() + timeout
        while marker.encode() not in seen:
            assert proc.poll() is None, f"{argv[0]} exited {proc.returncode}: {seen!r}"
            assert time.monotonic() < deadline, f"no answer from the guest: {seen!r}"
            os.write(master, f"echo {quoted}\n".encode())
            ready, _, _ = select.select([master], [], [], 2.0)
            while ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
                ready, _, _ = select.select([master], [], [], 0.3)
        os.write(master, b"\x1d")  # socat's escape character: detach
        return proc.wait(timeout=30), seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
