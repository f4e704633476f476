"""A scripted QMP peer: qemu's monitor side of the wire, answering from a script.

``FakeQmp`` listens on a real UNIX socket and speaks QMP the way qemu
does (doc/kvm.md; the wire is described in ganeti/hypervisor/kvm/qmp.py):
a greeting on every connection, ``qmp_capabilities`` before anything
else, one ``{"return": ...}`` or ``{"error": {"class", "desc"}}`` per
``{"execute", "arguments", "id"}`` (with the id echoed), and
asynchronous ``{"event", "data", "timestamp"}`` lines.  Tests talk to it
through the project's real :class:`~ganeti.hypervisor.kvm.qmp.QmpClient`
(:meth:`FakeQmp.client`, :meth:`FakeQmp.session`).

The script, per command name (``answers``):

* a plain value: the ``return`` value (a fresh copy each time);
* :class:`Replies`: one value per call, in order, the last one repeating;
* a callable: called with the command's arguments; what it returns is the
  answer (it may raise :class:`~ganeti.hypervisor.kvm.qmp.QmpCommandError`);
* a :class:`~ganeti.hypervisor.kvm.qmp.QmpCommandError`: the error reply
  (its ``error_class`` and ``desc``);
* nothing: ``{}``.

``after`` queues events sent right behind the reply to a command (each
list is sent once), :meth:`FakeQmp.emit` queues one for the next read
(before the greeting when no client is connected, as qemu does).
Every command is recorded in :attr:`FakeQmp.calls` (without the
negotiation) and every decoded line in :attr:`FakeQmp.lines`.

The project has no table of the QMP commands it sends, so :data:`COMMANDS`
here lists them with their argument names (qemu's schema names);
test/test_fakeqmp.py checks that every command name written in
ganeti/hypervisor/kvm/ is in it.  A command or argument outside the table,
a command before negotiation, or a malformed line gets qemu's error reply
*and* is kept in :attr:`FakeQmp.refused`; :meth:`FakeQmp.close` (and
leaving the ``with`` block) fails the test with an ``AssertionError``
naming them, so a refusal swallowed by the code under test still fails.

No thread: the peer runs when the client reads.  :meth:`FakeQmp.client`
returns a ``QmpClient`` whose reads first let the peer handle what the
client sent; when the peer has nothing more to say, a wait ends at once
as the client's timeout (after ``on_silence(deadline)``, which lets a
stepped clock reach the deadline), so a test of "the guest never
answers" steps time instead of sleeping.
"""

from __future__ import annotations

import contextlib
import copy
import os
import select
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ganeti import errors, serializer
from ganeti.hypervisor.kvm import qmp

__all__ = ["COMMANDS", "CommandArgs", "FakeQmp", "Replies", "GREETING", "MAX_ANSWER",
           "check_command"]

#: Most bytes sent for one line of the client (the answers wait in the socket
#: buffer until the client reads, in the same thread).
MAX_ANSWER = 64 * 1024

#: The greeting of every connection (shaped like qemu 7.2's).
GREETING: dict[str, Any] = {"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7},
                                                "package": ""}, "capabilities": ["oob"]}}


@dataclass(frozen=True)
class CommandArgs:
    """The argument names one command takes (``open``: any other names too)."""

    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    open: bool = False


def _args(required: str = "", optional: str = "", open: bool = False) -> CommandArgs:
    return CommandArgs(frozenset(required.split()), frozenset(optional.split()), open)


_NONE = _args()

#: The commands ganeti/hypervisor/kvm/ sends (and the few the integration
#: tests send through ``qmp_command``), with qemu's argument names.
#: ``device_add``, ``netdev_add`` and ``blockdev-add`` take the properties
#: of a driver, so only their discriminating names are required.
COMMANDS: Mapping[str, CommandArgs] = {
    "qmp_capabilities": _args(optional="enable"),
    "query-status": _NONE, "query-block": _NONE, "query-block-jobs": _NONE,
    "query-migrate": _NONE, "query-balloon": _NONE, "query-memory-size-summary": _NONE,
    "query-cpus-fast": _NONE, "query-pci": _NONE,
    "system_powerdown": _NONE, "system_reset": _NONE, "cont": _NONE, "stop": _NONE,
    "quit": _NONE, "migrate_cancel": _NONE, "nbd-server-stop": _NONE,
    "qom-get": _args("path property"),
    "qom-list": _args("path"),
    "human-monitor-command": _args("command-line", "cpu-index"),
    "netdev_add": _args("type id", open=True),
    "netdev_del": _args("id"),
    "device_add": _args("driver", open=True),
    "device_del": _args("id"),
    "blockdev-add": _args("driver", open=True),
    "blockdev-del": _args("node-name"),
    "block_resize": _args("size", "device node-name"),
    "balloon": _args("value"),
    "migrate-set-capabilities": _args("capabilities"),
    "migrate-set-parameters": _args("", "max-bandwidth downtime-limit"),
    "migrate": _args("uri", "detach resume"),
    "migrate-incoming": _args("uri"),
    "nbd-server-start": _args("addr", "tls-creds tls-authz max-connections"),
    "block-export-add": _args("type id node-name", "name writable description"),
    "drive-mirror": _args("device target sync",
                          "job-id format mode speed auto-dismiss auto-finalize granularity"
                          " buf-size node-name replaces unmap copy-mode"),
    "block-job-cancel": _args("device", "force"),
    "job-dismiss": _args("id"),
    "set_password": _args("protocol password", "connected display"),
}


class Replies:
    """One answer per call, in order; the last one repeats."""

    def __init__(self, *answers: Any) -> None:
        if not answers:
            raise errors.ProgrammerError("Replies needs at least one answer")
        self._answers = list(answers)

    def next(self) -> Any:
        """The answer of this call."""
        return self._answers.pop(0) if len(self._answers) > 1 else self._answers[0]


def check_command(command: str, arguments: Mapping[str, Any],
                  table: Mapping[str, CommandArgs] = COMMANDS) -> tuple[str, str] | None:
    """``(error class, desc)`` qemu would answer for a command outside ``table``; None: fine."""
    spec = table.get(command)
    if spec is None:
        return "CommandNotFound", f"The command {command} has not been found"
    for name in sorted(spec.required - set(arguments)):
        return "GenericError", f"Parameter '{name}' is missing"
    if not spec.open:
        for name in sorted(set(arguments) - spec.required - spec.optional):
            return "GenericError", f"Parameter '{name}' is unexpected"
    return None


@dataclass
class _Conn:
    """One accepted connection: its socket, unread bytes, negotiation state."""

    sock: socket.socket
    buf: bytearray = field(default_factory=bytearray)
    negotiated: bool = False


class FakeQmp:
    """A scripted QMP peer on a UNIX socket; see the module docstring."""

    def __init__(self, answers: Mapping[str, Any] | None = None, *,
                 after: Mapping[str, list[tuple[str, dict[str, Any]]]] | None = None,
                 table: Mapping[str, CommandArgs] = COMMANDS) -> None:
        self.answers: dict[str, Any] = dict(answers or {})
        self.after: dict[str, list[tuple[str, dict[str, Any]]]] = {
            k: list(v) for k, v in (after or {}).items()}
        self.table = table
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lines: list[Any] = []
        self.refused: list[str] = []
        self.connections = 0
        self._outbox: list[dict[str, Any]] = []
        self._stamp = 0
        self._dir = tempfile.mkdtemp(prefix="fakeqmp-")
        self.path = os.path.join(self._dir, "qmp.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(8)
        self._listener.setblocking(False)
        self._conn: _Conn | None = None
        self._clients: list[qmp.QmpClient] = []

    # --- the script -----------------------------------------------------------------

    def names(self) -> list[str]:
        """The names of the commands received, in order (without the negotiation)."""
        return [name for name, _ in self.calls]

    def emit(self, name: str, data: dict[str, Any] | None = None) -> None:
        """Queue the event ``name``; it is sent when the client next reads."""
        self._outbox.append(self._event(name, data or {}))

    def _event(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        self._stamp += 1
        return {"event": name, "data": data,
                "timestamp": {"seconds": self._stamp, "microseconds": 0}}

    def _refuse(self, what: str, cls: str, desc: str, cid: Any) -> list[dict[str, Any]]:
        self.refused.append(f"{what}: {desc}")
        return [self._error(cls, desc, cid)]

    @staticmethod
    def _error(cls: str, desc: str, cid: Any) -> dict[str, Any]:
        reply: dict[str, Any] = {"error": {"class": cls, "desc": desc}}
        if cid is not None:
            reply["id"] = cid
        return reply

    def answer(self, line: bytes, conn: _Conn) -> list[dict[str, Any]]:
        """The messages that answer one line the client sent (reply, then events)."""
        try:
            msg = serializer.loads(line)
        except errors.SerializationError as exc:
            return self._refuse(repr(line), "GenericError", f"JSON parse error, {exc}", None)
        self.lines.append(msg)
        if not isinstance(msg, dict):
            return self._refuse(repr(line), "GenericError", "QMP input must be a JSON object",
                                None)
        cid = msg.get("id")
        extra = sorted(set(msg) - {"execute", "arguments", "id"})
        if extra:
            return self._refuse(repr(line), "GenericError",
                                f"QMP input member '{extra[0]}' is unexpected", cid)
        command, arguments = msg.get("execute"), msg.get("arguments", {})
        if not isinstance(command, str):
            return self._refuse(repr(line), "GenericError",
                                "QMP input member 'execute' must be a string", cid)
        if not isinstance(arguments, dict):
            return self._refuse(command, "GenericError",
                                "QMP input member 'arguments' must be an object", cid)
        bad = check_command(command, arguments, self.table)
        if bad is not None:
            return self._refuse(command, bad[0], bad[1], cid)
        if command == "qmp_capabilities":
            if conn.negotiated:
                return self._refuse(command, "CommandNotFound",
                                    "Capabilities negotiation is already complete,"
                                    " command ignored", cid)
            conn.negotiated = True
            return [{"return": {}, "id": cid} if cid is not None else {"return": {}}]
        if not conn.negotiated:
            return self._refuse(command, "CommandNotFound",
                                "Expecting capabilities negotiation with 'qmp_capabilities'",
                                cid)
        self.calls.append((command, copy.deepcopy(arguments)))
        out = [self._reply(command, arguments, cid)]
        out.extend(self._event(name, data) for name, data in self.after.pop(command, []))
        return out

    def _reply(self, command: str, arguments: dict[str, Any], cid: Any) -> dict[str, Any]:
        answer = self.answers.get(command, {})
        if isinstance(answer, Replies):
            answer = answer.next()
        try:
            if callable(answer):
                answer = answer(**arguments)
            if isinstance(answer, qmp.QmpCommandError):
                raise answer
        except qmp.QmpCommandError as exc:
            return self._error(exc.error_class, exc.desc, cid)
        reply: dict[str, Any] = {"return": copy.deepcopy(answer)}
        if cid is not None:
            reply["id"] = cid
        return reply

    # --- the socket side ------------------------------------------------------------

    def pump(self) -> None:
        """Handle what the client sent so far and send the answers and queued events."""
        if self._conn is not None:
            self._drain(self._conn)
        if self._conn is None:
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(False)
            self._conn = _Conn(sock)
            self.connections += 1
            # like qemu, events queued while no client was connected come first
            out, self._outbox = self._outbox, []
            self._send(self._conn, [*out, GREETING])
            self._drain(self._conn)
        if self._conn is not None and self._outbox:
            out, self._outbox = self._outbox, []
            self._send(self._conn, out)

    def _drain(self, conn: _Conn) -> None:
        eof = False
        for _ in range(1024):          # bounded: 64 MiB a pump, far beyond any test
            try:
                chunk = conn.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                eof = True
                break
            conn.buf += chunk
        while b"\n" in conn.buf:
            end = conn.buf.index(b"\n")
            line = bytes(conn.buf[:end]).strip()
            del conn.buf[:end + 1]
            if line:
                self._send(conn, self.answer(line, conn))
        if eof:
            conn.sock.close()
            self._conn = None

    @staticmethod
    def _send(conn: _Conn, messages: list[dict[str, Any]]) -> None:
        data = b"".join(serializer.dumps_bytes(m) + b"\r\n" for m in messages)
        if len(data) > MAX_ANSWER:
            # the client reads only after the peer returns: more would not fit the socket
            raise errors.ProgrammerError(f"fakeqmp: an answer of {len(data)} bytes is more"
                                         f" than the {MAX_ANSWER} the peer can send at once")
        conn.sock.setblocking(True)
        try:
            conn.sock.sendall(data)
        except OSError:
            pass                      # the client left; what it missed does not matter
        finally:
            conn.sock.setblocking(False)

    def client(self, timeout: float = 5.0, clock: Callable[[], float] | None = None,
               on_silence: Callable[[float], None] | None = None) -> qmp.QmpClient:
        """A connected :class:`QmpClient` of this peer (:meth:`close` closes it too)."""
        made = _PumpedClient(self, timeout, clock, on_silence)
        self._clients.append(made)
        made.connect()
        return made

    @contextlib.contextmanager
    def session(self, name: str = "", **kwargs: Any) -> Iterator[qmp.QmpClient]:
        """A connected client, closed afterwards (the shape of ``KvmHypervisor._qmp``)."""
        made = self.client(**kwargs)
        try:
            yield made
        finally:
            made.close()

    def close(self) -> None:
        """Close the clients and sockets; fail when a client sent anything the table refuses."""
        for made in self._clients:
            made.close()
        if self._conn is not None:
            self._conn.sock.close()
            self._conn = None
        self._listener.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        if self.refused:
            raise AssertionError("The QMP peer refused: " + "; ".join(self.refused))

    def __enter__(self) -> FakeQmp:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _PumpedClient(qmp.QmpClient):
    """The real client; each read first lets the peer answer (no thread, no sleep)."""

    def __init__(self, peer: FakeQmp, timeout: float, clock: Callable[[], float] | None,
                 on_silence: Callable[[float], None] | None) -> None:
        if clock is None:
            super().__init__(peer.path, timeout=timeout)
        else:
            super().__init__(peer.path, timeout=timeout, clock=clock)
        self.peer = peer
        self.on_silence = on_silence

    def _next_message(self, deadline: float) -> qmp.QmpMessage:
        if not self._pending and self._sock is not None:
            self.peer.pump()
            readable, _, _ = select.select([self._sock], [], [], 0)
            if not readable:
                # the peer said all it will say: the wait ends as the timeout
                if self.on_silence is not None:
                    self.on_silence(deadline)
                raise qmp.QmpError(f"Timeout waiting for QMP on {self.path}")
        return super()._next_message(deadline)
