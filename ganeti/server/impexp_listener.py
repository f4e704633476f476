"""The receiving side of a move between clusters: one process per disk (doc/exports.md,
"Moves between clusters").

``python -m ganeti.server.impexp_listener DIR FD`` is started by
:func:`ganeti.backend.remoteimpexp.impexp_listen` with the listening socket
as file descriptor ``FD``.  It reads ``DIR/job.json`` and waits, at most
``timeout`` seconds, for a sender that completes a TLS handshake with the
certificate the job trusts (the source's transfer certificate) and sends a
disk stream (:mod:`ganeti.impexp.stream`, after a ``POST /impexp_stream``
head) whose header names the job's magic.  Connections are vetted side by
side (a client that stays silent cannot hold the sender up); those that
fail the handshake are refused and the wait goes on, while a sender that
passed it but names another magic fails the import.  The
data goes into the destination of the job (never one the sender names),
checked as every disk stream is: at most the disk's size, and the SHA-256
of what arrived must match the sender's end frame.  ``DIR/status.json``
follows the transfer as the sender's does (``listening``, then
``running``, ``done`` or ``failed``); SIGTERM (``impexp_abort``) stops it.
"""

from __future__ import annotations

import hmac
import logging
import queue
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ganeti import errors, serializer
from ganeti.backend import impexp, remoteimpexp
from ganeti.backend.context import NodeContext
from ganeti.http import framing
from ganeti.http.tls import transfer_server_context
from ganeti.impexp import stream as diskstream
from ganeti.server.impexp_worker import TransferStatus, run_transfer

__all__ = ["main", "serve", "STATE_LISTENING", "HANDSHAKE_TIMEOUT"]

logger = logging.getLogger(__name__)

STATE_LISTENING = "listening"
#: seconds a connection gets to complete its TLS handshake and send its request head
HANDSHAKE_TIMEOUT = 10.0
#: connections vetted at once (more are closed at once)
MAX_VETTING = 16
#: seconds a refused sender's remaining data is read before the connection closes
DRAIN_SECONDS = 10.0
_MAX_HEAD = 16 * 1024


def _read_head(tls: ssl.SSLSocket) -> bytes:
    """Read the ``POST /impexp_stream`` head; the bytes after it.  Raises OpExecError."""
    parser = framing.RequestParser(max_head_size=_MAX_HEAD)
    while True:
        head = parser.head()
        if head is not None:
            break
        data = tls.recv(_MAX_HEAD)
        if not data:
            raise errors.OpExecError("The connection closed before its request")
        parser.feed(data)
    if head.method != "POST" or head.target.split("?")[0] != f"/{diskstream.STREAM_PROCEDURE}":
        raise errors.OpExecError(f"Not a disk stream: {head.method} {head.target[:80]!r}")
    return parser.take_after_head()


def _reply(tls: ssl.SSLSocket, envelope: list[Any]) -> None:
    """Send the answer; after a refusal, read on (a while) what the sender still sends,
    so that closing with unread data does not reset the connection and lose the
    answer before the sender reads why."""
    try:
        tls.sendall(framing.build_response(200, {"Content-Type": "application/json"}.items(),
                                           serializer.dumps_bytes(envelope), keep_alive=False))
    except OSError as exc:
        logger.warning("Could not answer the sender: %s", exc)
        return
    if envelope[0]:
        return
    deadline = time.monotonic() + DRAIN_SECONDS
    try:
        tls.settimeout(1.0)
        while time.monotonic() < deadline and tls.recv(diskstream.MAX_DATA):
            pass
    except (OSError, ssl.SSLError):
        pass


class _Gate:
    """Vets the connections of one listener side by side: each gets its TLS handshake
    and request head in a thread of its own (at most :data:`MAX_VETTING` at once), so
    a silent or slow client never holds the real sender up; :meth:`next` hands out
    the first one that passed."""

    def __init__(self, listener: socket.socket, context: ssl.SSLContext) -> None:
        self.listener, self.context = listener, context
        self.passed: queue.Queue[tuple[ssl.SSLSocket, str, bytes]] = queue.Queue()
        self.refused = ""
        self.closed = threading.Event()
        self.slots = threading.BoundedSemaphore(MAX_VETTING)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, peer = self.listener.accept()
            except OSError:
                if self.closed.is_set():
                    return
                continue
            if not self.slots.acquire(blocking=False):
                conn.close()        # a flood: the real sender retries within its timeout
                continue
            threading.Thread(target=self._vet, args=(conn, str(peer[0])), daemon=True).start()

    def _vet(self, conn: socket.socket, peer: str) -> None:
        try:
            conn.settimeout(HANDSHAKE_TIMEOUT)
            try:
                tls = self.context.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                conn.close()
                self._refuse(peer, exc)
                return
            try:
                initial = _read_head(tls)
            except (OSError, errors.GanetiError) as exc:
                tls.close()
                self._refuse(peer, exc)
                return
            self.passed.put((tls, peer, initial))
        finally:
            self.slots.release()

    def _refuse(self, peer: str, exc: BaseException) -> None:
        self.refused = f" (refused {peer}: {exc})"
        logger.warning("Refused a connection from %s: %s", peer, exc)

    def next(self, timeout: float) -> tuple[ssl.SSLSocket, str, bytes] | None:
        """The next connection that passed, or None after ``timeout`` seconds."""
        try:
            return self.passed.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop accepting; connections still being vetted are closed when they pass."""
        self.closed.set()
        while True:
            try:
                tls, _, _ = self.passed.get_nowait()
            except queue.Empty:
                return
            tls.close()


def serve(ctx: NodeContext, job: dict[str, Any], listener: socket.socket,
          status: TransferStatus, *,
          clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Wait for the sender and receive the disk; ``{"size", "sha256"}``.  Raises
    OpExecError when no sender came in time or the stream failed."""
    context = transfer_server_context(remoteimpexp.key_path(ctx, str(job["key_name"])),
                                      str(job["ca"]))
    magic = str(job["magic"]).encode("utf-8", "surrogatepass")
    deadline = clock() + float(job["timeout"])
    gate = _Gate(listener, context)
    try:
        while True:
            found = gate.next(min(deadline - clock(), 1.0))
            if found is not None:
                break
            if clock() >= deadline:
                raise errors.OpExecError(f"No sender connected within"
                                         f" {float(job['timeout']):.0f} s{gate.refused}")
    finally:
        gate.close()
    tls, peer, initial = found
    with tls:
        logger.info("Sender %s connected", peer)
        status.write(state=impexp.STATE_RUNNING)

        def opener(dest: Any, total: Any) -> Any:
            named = dest.get("magic") if isinstance(dest, dict) else None
            if not isinstance(named, str) or not hmac.compare_digest(
                    named.encode("utf-8", "surrogatepass"), magic):
                raise errors.OpExecError("The sender named another transfer (wrong magic)")
            return impexp.open_sink(ctx, job["dest"], total)

        tls.settimeout(diskstream.RECEIVE_TIMEOUT)
        envelope = impexp.receive_stream(ctx, initial, tls.recv, sink_for=opener,
                                         progress=status.progress)
        _reply(tls, envelope)
    ok, value = envelope
    if not ok:
        raise errors.OpExecError(str(value))
    return dict(value)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``impexp_listener DIR FD``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: impexp_listener DIR FD", file=sys.stderr)
        return 2
    listener = socket.socket(fileno=int(args[1]))

    def body(ctx: NodeContext, job: dict[str, Any], status: TransferStatus) -> dict[str, Any]:
        status.write(state=STATE_LISTENING, port=job["port"])
        return serve(ctx, job, listener, status)
    try:
        return run_transfer(args[0], body, "Remote import")
    finally:
        listener.close()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
