"""The receiving side of a move between clusters: one process per disk (doc/exports.md,
"Moves between clusters").

``python -m ganeti.server.impexp_listener DIR FD`` is started by
:func:`ganeti.backend.remoteimpexp.impexp_listen` with the listening socket
as file descriptor ``FD``.  It reads ``DIR/job.json`` and waits, at most
``timeout`` seconds, for a sender that completes a TLS handshake with the
certificate the job trusts (the source's transfer certificate) and sends a
disk stream (:mod:`ganeti.impexp.stream`, after a ``POST /impexp_stream``
head) whose header names the job's magic; connections that fail the
handshake, or name another magic, are refused and the wait goes on.  The
data goes into the destination of the job (never one the sender names),
checked as every disk stream is: at most the disk's size, and the SHA-256
of what arrived must match the sender's end frame.  ``DIR/status.json``
follows the transfer as the sender's does (``listening``, then
``running``, ``done`` or ``failed``); SIGTERM (``impexp_abort``) stops it.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import signal
import socket
import ssl
import sys
import time
from typing import Any

from ganeti import constants, errors, serializer
from ganeti.backend import impexp, remoteimpexp
from ganeti.backend.context import NodeContext
from ganeti.http import framing
from ganeti.http.tls import transfer_server_context
from ganeti.impexp import stream as diskstream
from ganeti.pathutils import Paths
from ganeti.server.impexp_worker import TransferStatus

__all__ = ["main", "serve", "STATE_LISTENING", "HANDSHAKE_TIMEOUT"]

logger = logging.getLogger(__name__)

STATE_LISTENING = "listening"
#: seconds a connection gets to complete its TLS handshake and send its request head
HANDSHAKE_TIMEOUT = 30.0
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
    try:
        tls.sendall(framing.build_response(200, {"Content-Type": "application/json"}.items(),
                                           serializer.dumps_bytes(envelope), keep_alive=False))
    except OSError as exc:
        logger.warning("Could not answer the sender: %s", exc)


def serve(ctx: NodeContext, job: dict[str, Any], listener: socket.socket,
          status: TransferStatus, *, clock: Any = time.monotonic) -> dict[str, Any]:
    """Wait for the sender and receive the disk; ``{"size", "sha256"}``.  Raises
    OpExecError when no sender came in time or the stream failed."""
    context = transfer_server_context(remoteimpexp.key_path(ctx, str(job["key_name"])),
                                      str(job["ca"]))
    magic = str(job["magic"])
    deadline = clock() + float(job["timeout"])
    refused = ""
    while True:
        left = deadline - clock()
        if left <= 0:
            raise errors.OpExecError(f"No sender connected within {float(job['timeout']):.0f}"
                                     f" s{refused}")
        listener.settimeout(left)
        try:
            conn, peer = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(HANDSHAKE_TIMEOUT)
        try:
            tls = context.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError) as exc:
            conn.close()
            refused = f" (refused {peer[0]}: {exc})"
            logger.warning("Refused a connection from %s: %s", peer[0], exc)
            continue
        with tls:
            try:
                initial = _read_head(tls)
            except (OSError, errors.GanetiError) as exc:
                refused = f" (refused {peer[0]}: {exc})"
                logger.warning("Refused a connection from %s: %s", peer[0], exc)
                continue
            logger.info("Sender %s connected", peer[0])
            status.write(state=impexp.STATE_RUNNING)

            def opener(dest: Any, total: Any) -> Any:
                named = dest.get("magic") if isinstance(dest, dict) else None
                if not isinstance(named, str) or not hmac.compare_digest(named, magic):
                    raise errors.OpExecError("The sender named another transfer (wrong magic)")
                return impexp.open_sink(ctx, job["dest"], total)

            tls.settimeout(diskstream.RECEIVE_TIMEOUT)
            envelope = impexp.receive_stream(ctx, initial, tls.recv, open_sink=opener,
                                             progress=status.progress)
            _reply(tls, envelope)
        ok, value = envelope
        if not ok:
            raise errors.OpExecError(str(value))
        return dict(value)


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``impexp_listener DIR FD``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: impexp_listener DIR FD", file=sys.stderr)
        return 2
    directory, fd = args[0], int(args[1])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, _terminate)
    status = TransferStatus(directory)
    listener = socket.socket(fileno=fd)
    try:
        with open(os.path.join(directory, impexp.JOB_FILE), "rb") as fh:
            job = json.loads(fh.read())
        ctx = NodeContext(paths=Paths(root=job["root"]), hostname=job["hostname"],
                          noded_port=constants.DEFAULT_NODED_PORT)
        status.write(state=STATE_LISTENING, port=job["port"])
        result = serve(ctx, job, listener, status)
        status.write(state=impexp.STATE_DONE, **result)
        return 0
    except SystemExit:
        status.write(state=impexp.STATE_FAILED, error="the transfer was aborted")
        return 1
    except (errors.GanetiError, OSError, ValueError, KeyError) as exc:
        logger.error("Remote import failed: %s", exc)
        status.write(state=impexp.STATE_FAILED, error=str(exc))
        return 1
    finally:
        listener.close()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
