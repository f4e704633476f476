"""A small QMP (QEMU Machine Protocol) client: a pure codec and a socket client.

QMP is newline-framed JSON over a stream socket.  On connect the server
sends a greeting ``{"QMP": {"version": ..., "capabilities": [...]}}``; the
client must send ``qmp_capabilities`` before any other command.  Every
command ``{"execute": NAME, "arguments": {...}, "id": ID}`` is answered by
exactly one ``{"return": ..., "id": ID}`` or
``{"error": {"class": ..., "desc": ...}, "id": ID}``, and asynchronous
events ``{"event": NAME, "data": {...}, "timestamp": {...}}`` may arrive
between them at any time.

* :class:`QmpCodec` turns bytes into typed messages and commands into
  bytes; it does no I/O and is tested with plain bytes.
* :class:`QmpClient` drives the codec over a UNIX socket with a deadline
  per call; events that arrive while waiting for a reply are kept in
  :attr:`QmpClient.events`.

Failures raise :class:`QmpError` (a :class:`errors.HypervisorError`);
:class:`QmpCommandError` carries the server's error class.  The
operator-facing description of the kvm hypervisor is doc/kvm.md.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ganeti import errors, serializer
from ganeti.utils import unixsock

__all__ = [
    "QmpError", "QmpCommandError", "QmpGreeting", "QmpReturn", "QmpFailure",
    "QmpEvent", "QmpMessage", "QmpCodec", "QmpClient", "MAX_LINE", "MAX_SOCKET_PATH",
    "connect_unix",
]

#: Longest message line accepted (bytes); a runaway peer cannot fill memory.
MAX_LINE = 16 * 1024 * 1024
#: Longest UNIX socket path connected to directly (``sun_path`` less its NUL).
MAX_SOCKET_PATH = unixsock.MAX_PATH


def connect_unix(sock: socket.socket, path: str) -> None:
    """``sock.connect(path)``, also for paths longer than ``sun_path`` allows
    (through the socket's directory: :func:`ganeti.utils.unixsock.connect`)."""
    unixsock.connect(sock, path)


class QmpError(errors.HypervisorError):
    """The QMP connection failed, timed out or the peer broke the protocol."""


class QmpCommandError(QmpError):
    """The server answered a command with an error."""

    def __init__(self, command: str, error_class: str, desc: str) -> None:
        super().__init__(f"QMP command {command} failed: {error_class}: {desc}")
        self.command = command
        self.error_class = error_class
        self.desc = desc


@dataclass(frozen=True)
class QmpGreeting:
    """The server's first message."""

    version: dict[str, Any]
    capabilities: list[Any]


@dataclass(frozen=True)
class QmpReturn:
    """A successful reply to the command with ``id``."""

    id: Any
    value: Any


@dataclass(frozen=True)
class QmpFailure:
    """An error reply to the command with ``id`` (None: unparsable command)."""

    id: Any
    error_class: str
    desc: str


@dataclass(frozen=True)
class QmpEvent:
    """An asynchronous event; ``timestamp`` in seconds since the epoch."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)
    timestamp: float = 0.0


QmpMessage = QmpGreeting | QmpReturn | QmpFailure | QmpEvent


def _classify(obj: Any) -> QmpMessage:
    if not isinstance(obj, dict):
        raise QmpError(f"QMP message is not an object: {obj!r}")
    if "QMP" in obj:
        info = obj["QMP"] if isinstance(obj["QMP"], dict) else {}
        version = info.get("version")
        caps = info.get("capabilities")
        return QmpGreeting(version=version if isinstance(version, dict) else {},
                           capabilities=caps if isinstance(caps, list) else [])
    if "return" in obj:
        return QmpReturn(id=obj.get("id"), value=obj["return"])
    if "error" in obj:
        err = obj["error"] if isinstance(obj["error"], dict) else {}
        return QmpFailure(id=obj.get("id"), error_class=str(err.get("class", "GenericError")),
                          desc=str(err.get("desc", "")))
    if "event" in obj:
        data = obj.get("data")
        stamp = obj.get("timestamp")
        when = 0.0
        if isinstance(stamp, dict):
            try:
                when = float(stamp.get("seconds", 0)) + float(stamp.get("microseconds", 0)) / 1e6
            except (TypeError, ValueError):
                when = 0.0
        return QmpEvent(name=str(obj["event"]), data=data if isinstance(data, dict) else {},
                        timestamp=when)
    raise QmpError(f"Unknown QMP message: {obj!r}")


class QmpCodec:
    """Bytes <-> QMP messages, with no I/O.

    :meth:`feed` accepts any chunking of the stream and returns the
    complete messages so far; :meth:`encode` frames one command.  Command
    ids are allocated here (``1, 2, ...``) so replies can be matched.
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._buf = bytearray()
        self._next_id = 1
        self.max_line = max_line

    def feed(self, data: bytes) -> list[QmpMessage]:
        """Append ``data``; return every message completed by it, in order.

        Raises :class:`QmpError` for invalid JSON, unknown message shapes
        or a line longer than :attr:`max_line`.
        """
        self._buf += data
        out: list[QmpMessage] = []
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                if len(self._buf) > self.max_line:
                    raise QmpError(f"QMP message longer than {self.max_line} bytes")
                return out
            line = bytes(self._buf[:end]).strip()
            del self._buf[:end + 1]
            if not line:
                continue
            try:
                obj = serializer.loads(line)
            except errors.SerializationError as exc:
                raise QmpError(f"Invalid JSON from QMP: {exc}") from exc
            out.append(_classify(obj))

    def encode(self, command: str, arguments: dict[str, Any] | None = None) -> tuple[int, bytes]:
        """``(id, bytes)`` of one command line."""
        if not command or not isinstance(command, str):
            raise QmpError(f"Invalid QMP command name {command!r}")
        cid = self._next_id
        self._next_id += 1
        msg: dict[str, Any] = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        msg["id"] = cid
        return cid, serializer.dumps_bytes(msg) + b"\r\n"


class QmpClient:
    """A QMP connection over a UNIX socket; use as a context manager.

    ``timeout`` (seconds) bounds each call (:meth:`connect`,
    :meth:`execute`, :meth:`wait_event`); ``clock`` is the monotonic clock
    the deadlines use.  Events received at any time are appended to
    :attr:`events`.
    """

    def __init__(self, path: str, timeout: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.timeout = timeout
        self.clock = clock
        self.codec = QmpCodec()
        self.events: list[QmpEvent] = []
        self.greeting: QmpGreeting | None = None
        self._sock: socket.socket | None = None
        self._pending: list[QmpMessage] = []

    def __enter__(self) -> QmpClient:
        self.connect()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket (idempotent)."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def connect(self) -> QmpGreeting:
        """Connect, read the greeting and negotiate capabilities."""
        deadline = self.clock() + self.timeout
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            connect_unix(sock, self.path)
        except OSError as exc:
            sock.close()
            raise QmpError(f"Cannot connect to QMP socket {self.path}: {exc}") from exc
        self._sock = sock
        try:
            msg = self._next_message(deadline)
            # qemu may flush an event queued for the previous client before
            # the greeting (seen with MIGRATION events): keep it, read on
            while isinstance(msg, QmpEvent):
                self.events.append(msg)
                msg = self._next_message(deadline)
            if not isinstance(msg, QmpGreeting):
                raise QmpError(f"Expected a QMP greeting on {self.path}, got {msg!r}")
            self.greeting = msg
            self._call("qmp_capabilities", None, deadline)
        except BaseException:
            self.close()
            raise
        return msg

    def execute(self, command: str, **arguments: Any) -> Any:
        """Run ``command`` and return its ``return`` value.

        Raises :class:`QmpCommandError` when the server refuses it and
        :class:`QmpError` on timeouts or a closed connection.
        """
        return self._call(command, arguments or None, self.clock() + self.timeout)

    def wait_event(self, name: str, timeout: float | None = None) -> QmpEvent:
        """The first event called ``name`` (already received or arriving)."""
        for idx, event in enumerate(self.events):
            if event.name == name:
                return self.events.pop(idx)
        deadline = self.clock() + (self.timeout if timeout is None else timeout)
        while True:
            msg = self._next_message(deadline)
            if isinstance(msg, QmpEvent):
                if msg.name == name:
                    return msg
                self.events.append(msg)

    def _call(self, command: str, arguments: dict[str, Any] | None, deadline: float) -> Any:
        if self._sock is None:
            raise QmpError(f"QMP connection to {self.path} is not open")
        cid, data = self.codec.encode(command, arguments)
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise QmpError(f"Cannot send {command} to {self.path}: {exc}") from exc
        while True:
            msg = self._next_message(deadline)
            if isinstance(msg, QmpEvent):
                self.events.append(msg)
            elif isinstance(msg, QmpReturn) and msg.id == cid:
                return msg.value
            elif isinstance(msg, QmpFailure) and msg.id in (cid, None):
                raise QmpCommandError(command, msg.error_class, msg.desc)
            # replies to other ids (none are outstanding) and late greetings are dropped

    def _next_message(self, deadline: float) -> QmpMessage:
        while not self._pending:
            left = deadline - self.clock()
            if left <= 0 or self._sock is None:
                raise QmpError(f"Timeout waiting for QMP on {self.path}")
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise QmpError(f"Timeout waiting for QMP on {self.path}") from None
            except OSError as exc:
                raise QmpError(f"QMP read from {self.path} failed: {exc}") from exc
            if not chunk:
                raise QmpError(f"QMP connection {self.path} closed by the peer")
            self._pending.extend(self.codec.feed(chunk))
        return self._pending.pop(0)
