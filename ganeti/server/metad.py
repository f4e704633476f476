"""``ganeti-metad``: the instance metadata service of a node (doc/images.md, "The metadata service").

Plain HTTP on the package's accept loop (:class:`ganeti.http.threaded.ThreadedServer`
with no TLS context: guests prove nothing but their address) and
:mod:`ganeti.http.framing`; what to answer is :func:`ganeti.impexp.metadata.answer`,
from the request's source address and the node's entries
(``<data dir>/metadata/<instance>.json``, written by the node daemon
whenever it builds an instance's NoCloud seed, removed when the instance
stops, leaves the node or is removed).  One request per connection; the
log has the method, path, source, instance and status, never a body.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import threading
import time
from typing import Any

from ganeti import constants, errors
from ganeti.http import framing
from ganeti.http.limits import Limits
from ganeti.http.threaded import ThreadedServer
from ganeti.impexp import metadata
from ganeti.pathutils import Paths
from ganeti.server import daemon

__all__ = ["EntryCache", "MetadServer", "LIMITS", "main"]

logger = logging.getLogger(__name__)

#: small requests from guests: a short deadline, a small head, no body
LIMITS = dataclasses.replace(Limits(), max_children=16, max_connections=512,
                             request_timeout=10.0, max_body_size=0)
_MAX_HEAD = 8 * 1024


class EntryCache:
    """The node's entries, read from ``directory`` again only when a file changed.

    The node daemon writes an entry by a rename and removes one by an
    unlink, both of which change the directory's modification time: while
    that stays what it was at the last scan, the table is kept.  A time
    less than :data:`SETTLE_NS` old is not trusted (two changes within one
    clock tick leave the same time), so the directory is scanned then.
    """

    #: a directory modification time younger than this is scanned again anyway
    SETTLE_NS = 2_000_000_000

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._files: dict[str, tuple[tuple[int, int, int], metadata.Entry | None]] = {}
        self._dir_sig: tuple[int, int] | None = None
        self._table: dict[str, metadata.Entry | None] = {}

    def table(self) -> dict[str, metadata.Entry | None]:
        """``{address: entry}`` of the entries there now (see :func:`metadata.build_table`)."""
        try:
            st = os.stat(self.directory)
            dir_sig: tuple[int, int] | None = (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            dir_sig = None
        with self._lock:
            if dir_sig is not None and dir_sig == self._dir_sig \
                    and time.time_ns() - dir_sig[1] > self.SETTLE_NS:
                return self._table
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.endswith(".json"))
        except FileNotFoundError:
            names = []
        with self._lock:
            seen: dict[str, tuple[tuple[int, int, int], metadata.Entry | None]] = {}
            for name in names:
                path = os.path.join(self.directory, name)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                sig = (st.st_ino, st.st_mtime_ns, st.st_size)
                old = self._files.get(name)
                if old is not None and old[0] == sig:
                    seen[name] = old
                    continue
                seen[name] = (sig, self._read(path))
            self._files = seen
            self._dir_sig = dir_sig
            self._table = metadata.build_table(e for _, e in seen.values() if e is not None)
            return self._table

    @staticmethod
    def _read(path: str) -> metadata.Entry | None:
        try:
            with open(path, encoding="utf-8") as fh:
                return metadata.parse_entry(fh.read())
        except (OSError, UnicodeDecodeError, errors.ParameterError) as exc:
            logger.warning("Ignoring metadata entry %s: %s", os.path.basename(path), exc)
            return None


def _read_request(conn: Any, deadline: float) -> framing.Request | None:
    parser = framing.RequestParser(max_head_size=_MAX_HEAD, max_body_size=0)
    while (request := parser.next_request()) is None and not parser.eof:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not complete in time")
        conn.settimeout(left)
        data = conn.recv(8192)
        if data:
            parser.feed(data)
        else:
            parser.feed_eof()
    return request


class _Connection:
    """Serves one connection (called by the worker pool: ``(conn, address, server)``)."""

    def __init__(self, conn: Any, address: Any, server: MetadServer) -> None:
        source = str(address[0])
        try:
            request = _read_request(conn, time.monotonic() + server.request_timeout)
        except errors.HttpError as exc:
            status = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], int) else 400
            self._send(conn, status, b"Bad request\n", head_only=False)
            logger.info("Bad request from %s: %s", source, exc.args[0] if exc.args else exc)
            return
        except (TimeoutError, OSError) as exc:
            logger.debug("Connection from %s dropped: %s", source, exc)
            return
        if request is None:
            return
        table = server.entries.table()
        ans = metadata.answer(table, source, request.method, request.target)
        entry = table.get(metadata.normalize_address(source) or "")
        logger.info("%s %s from %s (%s): %d", request.method, request.target[:200], source,
                    entry.name if entry else "no instance", ans.status)
        self._send(conn, ans.status, ans.body, head_only=request.method == "HEAD",
                   content_type=ans.content_type)

    @staticmethod
    def _send(conn: Any, status: int, body: bytes, *, head_only: bool,
              content_type: str = "text/plain; charset=utf-8") -> None:
        headers = {"Content-Type": content_type, "Cache-Control": "no-store"}
        if status == 405:
            headers["Allow"] = "GET, HEAD"
        try:
            conn.sendall(framing.build_response(status, headers, body, keep_alive=False,
                                                head_only=head_only))
        except OSError as exc:
            logger.debug("Cannot answer: %s", exc)


class MetadServer(ThreadedServer):
    """The metadata service on ``address``, answering from ``paths``' entries."""

    def __init__(self, address: tuple[str, int], paths: Paths, *,
                 limits: Limits = LIMITS) -> None:
        #: the node's entries
        self.entries = EntryCache(paths.metadata_dir)
        super().__init__(address, None, _Connection, limits=limits)


def _add_options(parser: argparse.ArgumentParser) -> None:
    bind = os.environ.get(constants.ENV_METAD_BIND) or constants.METAD_ADDRESS
    port = int(os.environ.get(constants.ENV_METAD_PORT) or constants.METAD_PORT)
    parser.add_argument("-b", "--bind", default=bind,
                        help=f"address to listen on (default ${constants.ENV_METAD_BIND} or"
                             f" {constants.METAD_ADDRESS}, where instances look for it)")
    parser.add_argument("-p", "--port", type=int, default=port,
                        help=f"TCP port (default ${constants.ENV_METAD_PORT} or"
                             f" {constants.METAD_PORT})")


def _check(options: argparse.Namespace, paths: Paths) -> None:
    del paths
    if not 1 <= options.port <= 65535:
        raise errors.ParameterError(f"Invalid port {options.port}")


def _prepare(runtime: Any) -> MetadServer:
    return MetadServer((runtime.options.bind, runtime.options.port), runtime.paths)


def _serve(runtime: Any, server: MetadServer) -> None:
    try:
        server.serve(runtime.stop_event)
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``daemons/ganeti-metad``."""
    return daemon.run_daemon(constants.METAD, add_options=_add_options, check_fn=_check,
                             prepare_fn=_prepare, exec_fn=_serve, argv=argv,
                             description="Ganeti instance metadata service (plain HTTP)")
