"""The sending side of a disk transfer: one process per transfer (doc/exports.md).

``python -m ganeti.server.impexp_worker DIR`` is started by
:func:`ganeti.backend.impexp.impexp_send` in its own session.  It reads
``DIR/job.json``, opens the source (an instance disk, through the OS
``export`` script when the instance has an OS, or an image file of an
export), connects to the receiving node daemon with the cluster
certificate (or, for a move between clusters, to the other cluster's
listener with this node's transfer key: :mod:`ganeti.backend.remoteimpexp`)
and sends the frames of :mod:`ganeti.impexp.stream`, computing
the SHA-256 as it goes.  ``DIR/status.json`` says how far it got
(``{state, done, total, elapsed, error, size, sha256}``), rewritten
atomically at most every :data:`STATUS_INTERVAL` seconds and at the end.
SIGTERM (``impexp_abort``) stops it; the OS script is killed with it.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import signal
import ssl
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from ganeti import constants, errors, osapi, serializer
from ganeti.impexp import stream as diskstream
from ganeti.backend import blockdev, impexp, remoteimpexp
from ganeti.backend import os as bos
from ganeti.backend.context import NodeContext
from ganeti.http import client, framing
from ganeti.http.tls import node_client_context, transfer_client_context
from ganeti.pathutils import Paths
from ganeti.rpc import transport
from ganeti.utils import io as uio

__all__ = ["main", "send", "open_source", "Source", "TransferStatus", "run_transfer",
           "STATUS_INTERVAL", "CONNECT_TIMEOUT"]

logger = logging.getLogger(__name__)

STATUS_INTERVAL = 0.5
#: seconds to connect, and for each send or receive to make progress
CONNECT_TIMEOUT = 30.0
IO_TIMEOUT = 120.0


class Source:
    """What a transfer reads: ``read(n)`` until ``b""``, then :meth:`finish`."""

    def __init__(self, fh: IO[bytes], total: int | None,
                 run: osapi.RunningScript | None = None) -> None:
        self.fh = fh
        self.total = total
        self.run = run

    def read(self, size: int) -> bytes:
        return self.fh.read(size)

    def finish(self, *, kill: bool = False) -> None:
        """Close; with an OS script, wait for it (raises when it failed)."""
        if self.run is not None:
            osapi.finish_disk_script(self.run, kill=kill)
        else:
            self.fh.close()


def open_source(ctx: NodeContext, source: Any) -> Source:
    """Open a transfer source (see :func:`ganeti.backend.impexp.impexp_send`)."""
    if not isinstance(source, dict):
        raise errors.OpExecError(f"Invalid transfer source {source!r}")
    kind = source.get("kind")
    if kind == "file":
        fh, size, _ = impexp.open_export_file(ctx, str(source.get("export")),
                                              str(source.get("file")))
        return Source(fh, size)
    if kind == "disk":
        instance, index, disk = source.get("instance"), source.get("index"), source.get("disk")
        if not isinstance(index, int) or not isinstance(disk, dict):
            raise errors.OpExecError("Disk source without disk or index")
        total = int(disk.get("size") or 0) * 1024 * 1024 or None
        if isinstance(instance, dict) and instance.get("os"):
            os_inst = bos.os_instance(ctx, instance)
            run = osapi.start_disk_script(ctx.paths, os_inst, index, osapi.SCRIPT_EXPORT,
                                          clock=ctx.clock)
            return Source(run.pipe, total, run)
        name = str(instance.get("name")) if isinstance(instance, dict) else ""
        _, path = blockdev.assemble_disk(ctx, disk, name, index)
        return Source(open(path, "rb"), total)
    if kind == "firmware":
        data = impexp.firmware_state_bytes(ctx, source)
        return Source(io.BytesIO(data), len(data))
    raise errors.OpExecError(f"Unknown transfer source kind {kind!r}")


def _read_reply(tls: ssl.SSLSocket) -> list[Any]:
    try:
        response = client.read_response(tls, framing.ResponseParser(max_body_size=1024 * 1024))
    except client.NoResponse as exc:
        raise errors.OpExecError("The receiving node closed the stream without an answer") from exc
    try:
        reply = serializer.loads(response.body)
    except errors.SerializationError as exc:
        raise errors.OpExecError(f"Bad answer from the receiving node: {exc}") from exc
    if not (isinstance(reply, list) and len(reply) == 2):
        raise errors.OpExecError(f"Bad answer from the receiving node: {reply!r}")
    return reply


def _context_for(ctx: NodeContext, dest: Any) -> ssl.SSLContext:
    """The TLS context of a transfer: the cluster certificate, or for a move between
    clusters (``dest`` of kind ``remote``) this node's transfer key, trusting only
    the listener's certificate."""
    if isinstance(dest, dict) and dest.get("kind") == "remote":
        return transfer_client_context(remoteimpexp.key_path(ctx, str(dest.get("key_name"))),
                                       str(dest.get("ca") or ""))
    return node_client_context(ctx.paths.server_pem)


def _header_dest(dest: Any) -> Any:
    """What the header frame names: ``dest`` itself, or for a move between clusters only
    the disk's magic (the listener alone decides where the data goes)."""
    if isinstance(dest, dict) and dest.get("kind") == "remote":
        return {"kind": "remote", "magic": dest.get("magic")}
    return dest


def send(ctx: NodeContext, job: dict[str, Any], progress: Callable[[int, int | None], None],
         *, context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """Run one transfer; ``{"size", "sha256"}`` as the receiver confirmed them.

    ``progress(done, total)`` is called after every frame.  Raises
    :class:`errors.OpExecError` when the source, the connection or the
    receiver fails (with the receiver's message when it gave one).
    """
    host, port = str(job["host"]), int(job["port"])
    source = open_source(ctx, job["source"])
    digest = hashlib.sha256()
    done = 0
    try:
        tls_ctx = context or _context_for(ctx, job["dest"])
        try:
            conn = client.connect(host, port, tls_ctx, CONNECT_TIMEOUT)
        except OSError as exc:   # refused, unreachable, or the TLS handshake failed
            raise errors.OpExecError(f"Cannot connect to {host}:{port}:"
                                     f" {exc.strerror or exc}") from exc
        with conn as tls:
            tls.settimeout(IO_TIMEOUT)
            try:
                tls.sendall(framing.build_request(
                    "POST", f"/{diskstream.STREAM_PROCEDURE}",
                    {"Host": f"{host}:{port}", "User-Agent": transport.USER_AGENT,
                     "Content-Type": "application/x-ganeti-diskstream"}, keep_alive=False))
                tls.sendall(diskstream.encode_json(diskstream.HEADER, {
                    "dest": _header_dest(job["dest"]), "total": source.total}))
                failure: str | None = None
                while True:
                    try:
                        chunk = source.read(diskstream.MAX_DATA)
                    except OSError as exc:
                        failure = f"Cannot read the source: {exc}"
                        break
                    if not chunk:
                        break
                    digest.update(chunk)
                    tls.sendall(diskstream.encode(diskstream.DATA, chunk))
                    done += len(chunk)
                    progress(done, source.total)
                if failure is None:
                    try:
                        source.finish()
                    except errors.GanetiError as exc:
                        failure = str(exc)
                if failure is not None:
                    tls.sendall(diskstream.encode_json(diskstream.ABORT, {"error": failure}))
                    _read_reply(tls)
                    raise errors.OpExecError(failure)
                tls.sendall(diskstream.encode_json(diskstream.END, {
                    "size": done, "sha256": digest.hexdigest()}))
                ok, value = _read_reply(tls)
            except OSError as exc:
                # the receiver may have said why before it closed
                try:
                    tls.settimeout(5.0)
                    ok, value = _read_reply(tls)
                except (OSError, errors.GanetiError):
                    raise errors.OpExecError(f"Connection to {host} lost after {done} bytes:"
                                             f" {exc.strerror or exc}") from exc
                if ok:
                    raise errors.OpExecError(f"Connection to {host} lost after {done} bytes")
        if not ok:
            raise errors.OpExecError(f"The receiving node {host} failed: {value}")
        if not isinstance(value, dict) or value.get("sha256") != digest.hexdigest():
            raise errors.OpExecError(f"The receiving node confirmed {value!r}, not"
                                     f" {done} bytes with SHA-256 {digest.hexdigest()}")
        return {"size": done, "sha256": digest.hexdigest()}
    finally:
        try:
            source.finish(kill=True)
        except errors.GanetiError:
            pass


class TransferStatus:
    """``status.json`` of one transfer, rewritten atomically."""

    def __init__(self, directory: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = os.path.join(directory, impexp.STATUS_FILE)
        self.clock = clock
        self.started = clock()
        self.last = 0.0
        self.data: dict[str, Any] = {"state": impexp.STATE_RUNNING, "done": 0, "total": None,
                                     "elapsed": 0.0, "error": None, "pid": os.getpid()}

    def write(self, **changes: Any) -> None:
        self.data.update(changes)
        self.data["elapsed"] = round(self.clock() - self.started, 3)
        uio.write_file_atomic(self.path, json.dumps(self.data).encode("utf-8"), mode=0o640)
        self.last = self.clock()

    def progress(self, done: int, total: int | None) -> None:
        self.data.update(done=done, total=total)
        if self.clock() - self.last >= STATUS_INTERVAL:
            self.write()


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


#: ``body(ctx, job, status)``: the transfer itself, ``{"size", "sha256"}`` at its end
TransferBody = Callable[[NodeContext, dict[str, Any], TransferStatus], dict[str, Any]]


def run_transfer(directory: str, body: TransferBody, what: str = "Transfer") -> int:
    """Run one transfer process over ``directory`` (its ``job.json``, ``status.json``):
    logging, SIGTERM as an abort, the final state written whatever happens; the exit
    code.  Shared by the sender (here) and the remote import's listener."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, _terminate)
    status = TransferStatus(directory)
    try:
        with open(os.path.join(directory, impexp.JOB_FILE), "rb") as fh:
            job = json.loads(fh.read())
        ctx = NodeContext(paths=Paths(root=job["root"]), hostname=job["hostname"],
                          noded_port=constants.DEFAULT_NODED_PORT)
        result = body(ctx, job, status)
        status.write(state=impexp.STATE_DONE, **result)
        return 0
    except SystemExit:
        status.write(state=impexp.STATE_FAILED, error="the transfer was aborted")
        return 1
    except (errors.GanetiError, OSError, ValueError, KeyError) as exc:
        logger.error("%s failed: %s", what, exc)
        status.write(state=impexp.STATE_FAILED, error=str(exc))
        return 1
    except Exception as exc:    # a bad job file or a bug: still a final state, and why
        logger.exception("%s failed", what)
        status.write(state=impexp.STATE_FAILED, error=f"internal error: {exc!r}")
        return 1


def _send_body(ctx: NodeContext, job: dict[str, Any], status: TransferStatus
               ) -> dict[str, Any]:
    status.write()
    return send(ctx, job, status.progress)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``impexp_worker DIR``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: impexp_worker DIR", file=sys.stderr)
        return 2
    return run_transfer(args[0], _send_body)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
