"""ganeti-noded: the node daemon, answering node RPC over HTTPS.

Wire protocol (doc/protocols/rpc.md, "Response"): ``POST /<procedure>`` with a JSON
list of positional arguments; the reply is ``[true, payload]`` or
``[false, "message"]`` with ``Server: Ganeti <version>`` and
``Connection: close`` (one request per connection), except on a kept
connection (read-only procedures and the job-queue replication writes,
:mod:`ganeti.server.noded_keepalive`).

Status codes:

* ``200`` with ``[true, payload]``: the procedure ran;
* ``200`` with ``[false, msg]``: the procedure ran and failed (any
  :class:`errors.GanetiError` gives its message; other exceptions give
  ``"Error while executing backend function: ..."`` and are logged);
* ``400`` with ``[false, msg]``: the body is not JSON, not a list, or the
  arguments do not match the procedure's row (count or types);
* ``404`` with ``[false, msg]``: no such procedure in ``rpc.defs.CALLS`` (but
  ``impexp_stream``, a disk stream: :mod:`ganeti.impexp.stream`, and
  ``console_stream``, a serial console pipe: :mod:`ganeti.server.console`);
* ``405`` (``Allow: POST``) for any other standard method, ``501`` for an
  unknown one; ``503`` when the daemon is busy (see below);
* what :mod:`ganeti.http.framing` refuses, with its status: ``400`` for
  malformed HTTP, ``413`` for a body over :data:`MAX_REQUEST_SIZE`, ``431``
  for a head over 64 KiB or 100 header lines, ``501`` for a
  ``Transfer-Encoding``.

The method, the busy flag and the procedure are checked from the head,
before the body is read.

This module holds the request handler and the daemon's wiring; the
connection engine described below (accept loop, handshakes, request
slots, spare children) is the HTTP package's forking server core,
:class:`ganeti.http.forking.ForkingServer`, with its bounds in one
:class:`ganeti.http.forking.Limits`.

Processes: the parent accepts TCP connections and keeps each one, without
blocking, until the client's ClientHello has arrived whole (TLS >= 1.2;
the client must present the cluster certificate, otherwise the handshake
fails and no HTTP reply is sent); see :mod:`ganeti.http.handshake`.
Then the connection goes to an idle pre-forked *spare* child, which does
the handshake itself (the fast path), or, when no spare is free, when
``max_child_handshakes`` children are already in their handshake, or when
the ClientHello came in pieces, the parent does the handshake itself and
forks a child that inherits the established connection.  A handshake must
be done within ``handshake_timeout`` seconds (default 5) of the accept; at
most ``max_handshakes`` wait in the parent (beyond that the oldest is
closed).  So connections that send nothing, half a ClientHello or stall in
their handshake cost no process (a spare that took a ClientHello and sees
the handshake stall holds one of the few handshake slots for at most the
timeout) and never keep the master's requests from a child.  The child
reads the request (each read within ``request_timeout`` seconds, default
5: a body shorter than its ``Content-Length`` does not hold it for long),
runs the backend function and exits.

Request slots count only children whose peer has completed the handshake
(a spare tells the parent over a pipe when its handshake is done): at
most ``max_children`` of those run at once; an established connection
beyond that waits (in the parent, without blocking it) up to
``busy_wait`` seconds for a slot, then gets a short lived child that
answers ``503 [false, "Node daemon busy ..."]`` (those are capped too;
beyond that the connection is closed).  Children are reaped without
blocking whenever SIGCHLD arrives (the signal wakes the accept loop
through a wakeup pipe), so the parent never waits for a child.

Spare children (``--spare-children N``, default 1; 0 forks only on
demand) are forked ahead of time and each serves one connection handed to
it; see :mod:`ganeti.http.spare`.  Before waiting, a spare resets
its signals, closes the parent's sockets and runs one in-process dummy
``version`` dispatch over a socketpair (no TLS, no file I/O) to touch the
code it will run.  Idle spares count against nothing.

Children never hold the daemon's pid-file lock (the runner closes it in
every forked child: :meth:`ganeti.server.daemon.PidFile.keep_out_of_children`)
and get :data:`noded_keepalive.RECLAIM_SIGNAL` when the parent dies
(``PR_SET_PDEATHSIG``): an idle kept child closes at once, a busy one
after its reply, an idle spare sees its channel close.  So a node daemon
killed with SIGKILL can be started again at once (doc/watcher.md).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import socketserver
import ssl
import threading
import time
from typing import Any, Callable, TypeVar

from ganeti import backend, constants, errors, redact, serializer
from ganeti.impexp import stream as diskstream
from ganeti.backend import fencing, impexp
from ganeti.backend.context import NodeContext
from ganeti.http import forking, framing, handshake, sending
from ganeti.http.tls import node_client_context, node_server_context
from ganeti.pathutils import Paths
from ganeti.redact import Redactor
from ganeti.rpc import defs
from ganeti.server import console, noded_keepalive
from ganeti.server.autopromote import PromotionMonitor, run_worker
from ganeti.server.selffence import SelfFenceMonitor

__all__ = ["NodedServer", "NodedRequestHandler", "make_server_context",
           "MAX_REQUEST_SIZE", "DEFAULT_MAX_CHILDREN", "DEFAULT_BIND_ADDRESS",
           "DEFAULT_SPARE_CHILDREN", "DEFAULT_REQUEST_TIMEOUT", "DEFAULT_MAX_CHILD_HANDSHAKES"]

logger = logging.getLogger(__name__)

MAX_REQUEST_SIZE = 128 * 1024 * 1024
DEFAULT_MAX_CHILDREN = 64
DEFAULT_BUSY_WAIT = 0.5
#: seconds each read (or write) of a request child may wait for the peer
DEFAULT_REQUEST_TIMEOUT = 5.0
DEFAULT_BIND_ADDRESS = "0.0.0.0"
DEFAULT_SPARE_CHILDREN = 1
#: children (spares that took a ClientHello) in their TLS handshake at once
DEFAULT_MAX_CHILD_HANDSHAKES = 4
_WARM_REQUEST = b"POST /version HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]"
_T = TypeVar("_T")


#: the node daemon's TLS context (:func:`ganeti.http.tls.node_server_context`)
make_server_context = node_server_context


_RECV_SIZE = 256 * 1024
#: methods answered with 405 (any other gets 501)
_OTHER_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"})
_Reply = tuple[int, Any, dict[str, str]]


class NodedRequestHandler(socketserver.BaseRequestHandler):
    """One node RPC request on a connected socket (TLS, or a socketpair to warm up).

    Constructing it handles the request (the :mod:`socketserver` way):
    :meth:`handle` reads it with :class:`framing.RequestParser`, sends one
    JSON reply with ``Connection: close`` and returns; the caller closes
    the socket.  The method, the busy flag and the procedure name are
    checked as soon as the head is in, before the body is read.  Socket
    errors other than a timeout propagate.
    """

    request: socket.socket
    server: NodedServer  # type: ignore[assignment]  # the accept loop, not a socketserver server
    #: the request's method, once its head is in
    method: str = ""

    def handle(self) -> None:
        """Read one request, answer it; more on a kept connection (:mod:`noded_keepalive`)."""
        parser = framing.RequestParser(max_body_size=MAX_REQUEST_SIZE)
        served = 0
        while self._handle_one(parser, served):
            served += 1

    def _handle_one(self, parser: framing.RequestParser, served: int) -> bool:
        """Answer the next request on the connection; True to wait for another one."""
        self.method = ""
        self.request.settimeout(self.server.request_timeout)
        keep = False
        try:
            if served and not self._wait_next(parser):
                return False
            head = self._receive(parser, parser.head)
            if head is None:
                return False   # closed before sending anything
            self.method = head.method
            if served and not noded_keepalive.may_share(head):
                self.send_json(400, [False, f"{_procedure(head)[:80]!r} needs a connection of"
                                     " its own (only read-only procedures and queue writes"
                                     " share one)"])
                return False
            if head.method == "POST" and _procedure(head) == console.PROCEDURE:
                console.serve_node_console(self, head, parser, self._context())
                return False
            if head.method == "POST" and _procedure(head) == diskstream.STREAM_PROCEDURE:
                self.send_json(*self._receive_stream(parser))
                return False
            reply = self._refuse(head)
            if reply is None:
                message = self._receive(parser, parser.next_request)
                assert message is not None   # the parser raises on a short body
                reply = self._dispatch(message)
                keep = self._may_keep(head, reply[0], served)
        except errors.HttpError as exc:
            try:
                self.send_json(exc.status, [False, str(exc)])
            except OSError:
                pass
            return False
        except TimeoutError:
            logger.debug("%s: request timed out", self.client_address[0])
            return False
        status, data, headers = reply
        if keep:
            left = noded_keepalive.MAX_REQUESTS - served - 1
            headers = {**headers, **noded_keepalive.reply_headers(self.server.keepalive_timeout,
                                                                  left)}
        self.send_json(status, data, headers, keep_alive=keep)
        return keep

    def _wait_next(self, parser: framing.RequestParser) -> bool:
        """On a kept connection: wait (idle, at most ``keepalive_timeout``) for the next
        request's first bytes; False when the peer closed, the time ran out or the
        parent reclaimed the slot."""
        if parser.buffered:
            return True
        reclaim = self.server.reclaim
        self.request.settimeout(self.server.keepalive_timeout)
        try:
            reclaim.idle = True
            if reclaim.requested:
                return False
            data = self.request.recv(_RECV_SIZE)
        except (noded_keepalive.Reclaimed, OSError):   # (a timeout, the peer went away)
            return False
        finally:
            reclaim.idle = False
        if not data:
            return False
        parser.feed(data)
        self.request.settimeout(self.server.request_timeout)
        return True

    def _may_keep(self, head: framing.RequestHead, status: int, served: int) -> bool:
        """Whether the connection stays open after this reply (see :mod:`noded_keepalive`)."""
        server, ctx = self.server, self.server.request_ctx
        return noded_keepalive.may_keep(
            head, status, served, timeout=server.keepalive_timeout,
            refusing=server.busy_reply or server.reclaim.requested
            or bool(ctx is not None and ctx.after_response) or os.getpid() == server.parent_pid)

    def _receive(self, parser: framing.RequestParser, step: Callable[[], _T | None]) -> _T | None:
        """Feed ``parser`` from the socket until ``step()`` gives something or the peer is done."""
        while (got := step()) is None and not parser.eof:
            data = self.request.recv(_RECV_SIZE)
            if data:
                parser.feed(data)
            else:
                parser.feed_eof()
        return got

    def send_json(self, status: int, data: Any, headers: dict[str, str] | None = None, *,
                  keep_alive: bool = False) -> None:
        """Send ``data`` as the JSON body of a ``status`` reply (no body for HEAD);
        ``Connection: close`` unless ``keep_alive``."""
        try:
            body = serializer.dumps_bytes(data)
        except errors.SerializationError as exc:   # e.g. a backend result that is not JSON
            logger.error("Cannot encode the reply: %s", exc)
            body = serializer.dumps_bytes([False, f"Cannot encode the reply: {exc}"])
        all_headers = {"Server": f"Ganeti {constants.RELEASE_VERSION}",
                       "Date": framing.http_date(time.time()),
                       "Content-Type": "application/json"}
        all_headers.update(headers or {})
        # in pieces: the request timeout bounds each, not the whole reply (a disk chunk)
        sending.send_all(self.request, framing.build_response(
            status, all_headers, body, keep_alive=keep_alive, announce_keep_alive=keep_alive,
            head_only=self.method == "HEAD"))
        logger.debug("%s %s %d", self.client_address[0], self.method or "-", status)

    def _refuse(self, head: framing.RequestHead) -> _Reply | None:
        """The reply refusing the request from its head alone, if any."""
        if head.method != "POST":
            if head.method in _OTHER_METHODS:
                return 405, [False, f"Method {head.method} not allowed; use POST"], {"Allow": "POST"}
            return 501, [False, f"Unsupported method {head.method[:40]!r}"], {}
        if self.server.busy_reply:
            return 503, [False, "Node daemon busy: too many requests in progress,"
                         " try again later"], {}
        procedure = _procedure(head)
        if procedure not in defs.CALLS:
            return 404, [False, f"Unknown procedure {procedure!r}"], {}
        return None

    def _receive_stream(self, parser: framing.RequestParser) -> _Reply:
        """A disk stream (doc/exports.md): frames follow the head until the end frame."""
        if self.server.busy_reply:
            return 503, [False, "Node daemon busy: too many requests in progress"], {}
        self.request.settimeout(diskstream.RECEIVE_TIMEOUT)
        return 200, impexp.receive_stream(self._context(), parser.take_after_head(),
                                          self.request.recv), {}

    def _context(self) -> NodeContext:
        server = self.server
        ctx = NodeContext(paths=server.paths, hostname=server.hostname,
                          noded_port=server.server_address[1], stop_daemon=server.stop_parent,
                          restart_daemon=server.restart_parent)
        server.request_ctx = ctx
        return ctx

    def _dispatch(self, request: framing.Request) -> _Reply:
        """Decode and check the arguments, run the procedure: the reply."""
        procedure = _procedure(request.head)
        call = defs.CALLS[procedure]
        args: Any = None
        try:
            if request.body:
                args = serializer.loads(request.body, valid_unicode=True)
        except errors.SerializationError as exc:
            return 400, [False, f"{procedure}: malformed request body: {exc}"], {}
        problem = defs.check_args(call, args)
        if problem:
            return 400, [False, problem], {}
        if procedure in defs.FENCED_CALLS:
            # doc/design/failover.md, "Fencing": refuse an old master's changes
            epoch, master = defs.parse_epoch_query(request.head.target)
            try:
                fencing.check_epoch(self._context(), procedure, epoch, master)
            except errors.GanetiError as exc:
                return 200, [False, str(exc)], {}
        return 200, self.run_procedure(call, args), {}

    def run_procedure(self, call: defs.RpcCall, args: list[Any]) -> list[Any]:
        """Run the backend function of ``call``; the ``[success, payload]`` envelope.

        The private values among the arguments (:data:`ganeti.redact.PRIVATE_KEYS`)
        are scrubbed from the failure text and from log lines while it runs.
        """
        ctx = self._context()
        start = time.monotonic()
        redactor = self.server.redactor
        with redactor.hold(redact.values_under_keys(args)):
            try:
                payload = backend.get_function(call.name)(ctx, *args)
                reply: list[Any] = [True, payload]   # encoded once, by send_json
            except errors.GanetiError as exc:
                logger.info("RPC %s failed: %s", call.name, exc)
                reply = [False, redactor.scrub(str(exc))]
            except Exception as exc:
                logger.exception("RPC %s crashed", call.name)
                reply = [False, redactor.scrub(f"Error while executing backend function:"
                                               f" {type(exc).__name__}: {exc}")]
        logger.debug("RPC %s from %s done in %.3fs", call.name, self.client_address[0],
                     time.monotonic() - start)
        return reply


def _procedure(head: framing.RequestHead) -> str:
    return head.target.split("?", 1)[0].lstrip("/")


class NodedServer(forking.ForkingServer):
    """The accepting parent; see the module docstring for the process model
    (the engine: :class:`ganeti.http.forking.ForkingServer`)."""

    warm_request = _WARM_REQUEST

    def __init__(self, address: str, port: int, ssl_context: ssl.SSLContext, paths: Paths,
                 hostname: str, *, max_children: int = DEFAULT_MAX_CHILDREN,
                 busy_wait: float = DEFAULT_BUSY_WAIT,
                 request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 handshake_timeout: float = handshake.HANDSHAKE_TIMEOUT,
                 max_handshakes: int = handshake.DEFAULT_MAX_PENDING,
                 max_child_handshakes: int = DEFAULT_MAX_CHILD_HANDSHAKES,
                 spare_children: int = DEFAULT_SPARE_CHILDREN,
                 keepalive_timeout: float = noded_keepalive.DEFAULT_KEEPALIVE_TIMEOUT,
                 redactor: Redactor | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        #: the secret values scrubbed from replies and log lines: a request's
        #: private values are held while it runs (see run_procedure)
        self.redactor = redactor if redactor is not None else Redactor()
        self.paths = paths
        self.hostname = hostname
        #: the context of the procedure this process ran (a child serves one request)
        self.request_ctx: NodeContext | None = None
        limits = forking.Limits(max_children=max_children, busy_wait=busy_wait,
                                request_timeout=request_timeout,
                                keepalive_timeout=keepalive_timeout,
                                handshake_timeout=handshake_timeout,
                                max_handshakes=max_handshakes,
                                max_child_handshakes=max_child_handshakes,
                                max_body_size=MAX_REQUEST_SIZE)
        super().__init__(address, port, ssl_context, NodedRequestHandler, limits=limits,
                         spare_children=spare_children, clock=clock)
        #: the master autopromotion's timer (doc/ha.md); None: not watched
        self.promotion: PromotionMonitor | None = None
        #: the self-fence lease's timer (doc/ha.md, "Node loss recovery")
        self.self_fence: SelfFenceMonitor | None = None

    def watch_master(self) -> None:
        """Take part in the master autopromotion (doc/ha.md, "Master autopromotion") and
        hold the self-fence lease of node loss recovery (doc/ha.md, "Node loss recovery")."""
        self.promotion = PromotionMonitor(self.paths, self.hostname, clock=self.clock)
        self.self_fence = SelfFenceMonitor(self.paths, clock=self.clock)

    def loop_deadline(self) -> float | None:
        deadline = super().loop_deadline()
        for monitor in (self.promotion, self.self_fence):
            if monitor is not None:
                mine = monitor.deadline()
                deadline = mine if deadline is None else min(deadline, mine)
        return deadline

    def loop_tick(self, stopping: bool) -> None:
        super().loop_tick(stopping)
        if self.promotion is not None and not stopping:
            self.promotion.tick(lambda fn: run_worker(self._child_setup, fn, "master autopromotion"))
        if self.self_fence is not None and not stopping:
            self.self_fence.tick(lambda fn: run_worker(self._child_setup, fn, "self-fence"))

    def warm_up(self) -> None:
        """Answer one ``version`` request in-process over a socketpair.

        Loads what the first request would otherwise load in *every* child
        (OpenSSL algorithm caches, the HTTP framing, the
        backend, the text codecs that ``open(..., encoding=...)`` looks up),
        so that forked children start warm.  Failures are logged.
        """
        import codecs
        import locale
        for encoding in ("ascii", "utf-8", "latin-1", locale.getpreferredencoding(False)):
            try:
                codecs.lookup(encoding)
            except LookupError:
                pass
        ours, theirs = socket.socketpair()
        reply: list[bytes] = []

        def client() -> None:
            try:
                ctx = node_client_context(self.paths.server_pem)
                with ctx.wrap_socket(theirs) as conn:
                    conn.sendall(b"POST /version HTTP/1.1\r\nHost: localhost\r\n"
                                 b"Content-Length: 2\r\n\r\n[]")
                    while chunk := conn.recv(65536):
                        reply.append(chunk)
            except (OSError, ssl.SSLError, errors.CertificateError) as exc:
                logger.warning("Warm-up client failed: %s", exc)

        thread = threading.Thread(target=client, name="noded-warm-up", daemon=True)
        thread.start()
        try:
            ours.settimeout(10)
            self.finish_request(ours, ("127.0.0.1", 0))
        except Exception:
            logger.exception("Warm-up request failed")
        finally:
            try:
                ours.close()
            finally:
                thread.join(10)
                theirs.close()
        if not b"".join(reply).startswith(b"HTTP/1.1 200"):
            logger.warning("Warm-up request got no proper reply")

    def stop_parent(self) -> None:
        """Ask the accepting parent to stop (used from a child)."""
        os.kill(self.parent_pid, signal.SIGTERM)

    def restart_parent(self) -> None:
        """Ask the accepting parent to stop and start again, same options (from a child)."""
        os.kill(self.parent_pid, signal.SIGUSR2)

    def serve_connection(self, tls: ssl.SSLSocket, client_address: Any) -> None:
        """The HTTP request, then the after-response callbacks.

        The callbacks run even when the reply could not be delivered (the
        client went away): the procedure has run, so a node that has left
        the cluster must still stop its daemon.
        """
        self.request_ctx = None
        try:
            super().serve_connection(tls, client_address)
        finally:
            ctx, self.request_ctx = self.request_ctx, None
            callbacks: list[Callable[[], None]] = ctx.after_response if ctx else []
            for callback in callbacks:
                try:
                    callback()
                except Exception:
                    logger.exception("After-response callback failed")
