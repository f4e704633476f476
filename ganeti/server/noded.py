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
  ``impexp_stream``, a disk stream: :mod:`ganeti.diskstream`);
* ``405`` (``Allow: POST``) for any other standard method, ``501`` for an
  unknown one; ``503`` when the daemon is busy (see below);
* what :mod:`ganeti.http.framing` refuses, with its status: ``400`` for
  malformed HTTP, ``413`` for a body over :data:`MAX_REQUEST_SIZE`, ``431``
  for a head over 64 KiB or 100 header lines, ``501`` for a
  ``Transfer-Encoding``.

The method, the busy flag and the procedure are checked from the head,
before the body is read.

Processes: the parent accepts TCP connections and keeps each one, without
blocking, until the client's ClientHello has arrived whole (TLS >= 1.2;
the client must present the cluster certificate, otherwise the handshake
fails and no HTTP reply is sent); see :mod:`ganeti.server.noded_handshake`.
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
it; see :mod:`ganeti.server.noded_spare`.  Before waiting, a spare resets
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

import collections
import errno
import gc
import logging
import os
import selectors
import signal
import socket
import socketserver
import ssl
import struct
import threading
import time
from typing import Any, Callable, NamedTuple, NoReturn, TypeVar

from ganeti import backend, constants, diskstream, errors, redact, serializer
from ganeti.backend import fencing, impexp
from ganeti.backend.context import NodeContext
from ganeti.http import framing
from ganeti.http.tls import node_client_context, node_server_context
from ganeti.pathutils import Paths
from ganeti.redact import Redactor
from ganeti.rpc import defs
from ganeti.server import noded_handshake, noded_keepalive, noded_spare
from ganeti.utils import process

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
_PID = struct.Struct("=i")
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
    server: NodedServer
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
        self.request.sendall(framing.build_response(status, all_headers, body, keep_alive=keep_alive,
                                                    announce_keep_alive=keep_alive,
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


class _Waiting(NamedTuple):
    """An established connection waiting for a request slot."""

    tls: ssl.SSLSocket
    address: Any
    deadline: float


class NodedServer(socketserver.ForkingMixIn, socketserver.TCPServer):
    """The accepting parent; see the module docstring for the process model."""

    allow_reuse_address = True
    request_queue_size = 256
    block_on_close = False

    def __init__(self, address: str, port: int, ssl_context: ssl.SSLContext, paths: Paths,
                 hostname: str, *, max_children: int = DEFAULT_MAX_CHILDREN,
                 busy_wait: float = DEFAULT_BUSY_WAIT,
                 request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 handshake_timeout: float = noded_handshake.HANDSHAKE_TIMEOUT,
                 max_handshakes: int = noded_handshake.DEFAULT_MAX_PENDING,
                 max_child_handshakes: int = DEFAULT_MAX_CHILD_HANDSHAKES,
                 spare_children: int = DEFAULT_SPARE_CHILDREN,
                 keepalive_timeout: float = noded_keepalive.DEFAULT_KEEPALIVE_TIMEOUT,
                 redactor: Redactor | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        #: the secret values scrubbed from replies and log lines: a request's
        #: private values are held while it runs (see run_procedure)
        self.redactor = redactor if redactor is not None else Redactor()
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.ssl_context = ssl_context
        self.paths = paths
        self.hostname = hostname
        self.max_children = max_children
        self.max_busy_children = max(1, max_children // 4)
        self.busy_wait = busy_wait
        self.request_timeout = request_timeout
        #: seconds a kept connection may idle (0: one request per connection)
        self.keepalive_timeout = keepalive_timeout
        #: in a request child: whether the parent asked for its slot back
        self.reclaim = noded_keepalive.Reclaim()
        #: request children already asked to give their slot back
        self._reclaimed: set[int] = set()
        self.handshake_timeout = handshake_timeout
        self.max_child_handshakes = max_child_handshakes
        #: children serving a peer that completed its handshake
        self.active_children: set[int] = set()
        #: spares that took a ClientHello and have not reported the handshake done
        self.handshaking_children: set[int] = set()
        self.busy_children: set[int] = set()
        self.busy_reply = False
        #: the context of the procedure this process ran (a child serves one request)
        self.request_ctx: NodeContext | None = None
        self.parent_pid = os.getpid()
        self._clock = clock
        self._wakeup: tuple[int, int] | None = None
        #: spares write their pid here once their handshake is done
        self._authenticated: tuple[int, int] | None = None
        self._selector = selectors.DefaultSelector()
        #: handshakes in progress (parent side)
        self.handshakes = noded_handshake.HandshakePool(
            ssl_context, self._selector, timeout=handshake_timeout,
            max_pending=min(max_handshakes, noded_handshake.fd_budget()), take_hello=self._take_hello,
            clock=clock)
        #: the idle pre-forked children
        self.spares = noded_spare.SparePool(spare_children, self._run_spare)
        #: established connections waiting for a request slot, oldest first
        self.waiting: collections.deque[_Waiting] = collections.deque()
        # binds last: a failed bind calls server_close(), which needs the pools above
        super().__init__((address, port), NodedRequestHandler)

    # --- parent side ---
    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr

    def collect_children(self, *, blocking: bool = False) -> None:
        """Reap every finished child; never waits (``blocking`` is ignored)."""
        for children in (self.active_children, self.handshaking_children, self.busy_children):
            for pid in list(children):
                if noded_spare.reaped(pid):
                    children.discard(pid)
        self._reclaimed &= self.active_children
        self.spares.reap()

    def children_count(self) -> int:
        """Children currently running (busy responders and handshaking spares included)."""
        return (len(self.active_children) + len(self.handshaking_children)
                + len(self.busy_children))

    def _take_hello(self, sock: socket.socket, client_address: Any) -> bool:
        """Fast path: hand a connection whose ClientHello is in to an idle spare, if allowed."""
        if (self.waiting or len(self.handshaking_children) >= self.max_child_handshakes
                or len(self.active_children) + len(self.handshaking_children)
                >= self.max_children):
            return False
        pid = self.spares.hand_over(sock)
        if pid is None:
            return False
        self.handshaking_children.add(pid)
        sock.close()
        return True

    def _read_authenticated(self, fd: int) -> None:
        """Spares whose handshake is done now hold request slots."""
        try:
            data = os.read(fd, _PID.size * 256)
        except BlockingIOError:
            return
        for (pid,) in _PID.iter_unpack(data[:len(data) - len(data) % _PID.size]):
            if pid in self.handshaking_children:
                self.handshaking_children.discard(pid)
                self.active_children.add(pid)

    def _notify_authenticated(self) -> None:
        """In a spare: take the name of a request child and tell the parent the
        handshake is done (no-op elsewhere)."""
        if self._authenticated is not None and os.getpid() != self.parent_pid:
            noded_spare.set_comm(noded_spare.CHILD_COMM)   # it holds a request slot now
            try:
                os.write(self._authenticated[1], _PID.pack(os.getpid()))
            except OSError as exc:
                logger.debug("Cannot report the handshake to the parent: %s", exc)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve an established connection: fork its child, or let it wait for a slot."""
        self.collect_children()
        if len(self.active_children) < self.max_children and not self.waiting:
            self._fork(request, client_address, busy=False)
        else:
            self.waiting.append(_Waiting(request, client_address,
                                         self._clock() + self.busy_wait))
            self._reclaim_slots()
            self._serve_waiting()

    def _reclaim_slots(self) -> None:
        """A connection waits for a slot: ask the request children to give theirs back."""
        self._reclaimed |= noded_keepalive.reclaim(self.active_children - self._reclaimed)

    def _serve_waiting(self) -> None:
        """Fork for waiting connections while slots are free; answer or drop the expired ones."""
        while self.waiting and len(self.active_children) < self.max_children:
            conn = self.waiting.popleft()
            self._fork(conn.tls, conn.address, busy=False)
        now = self._clock()
        while self.waiting and self.waiting[0].deadline <= now:
            conn = self.waiting.popleft()
            if len(self.busy_children) >= self.max_busy_children:
                logger.warning("Too many requests; dropping connection from %s", conn.address[0])
                self.shutdown_request(conn.tls)
                continue
            logger.warning("Node daemon busy (%d children); refusing %s",
                           len(self.active_children), conn.address[0])
            self._fork(conn.tls, conn.address, busy=True)

    def _fork(self, request: Any, client_address: Any, *, busy: bool) -> None:
        try:
            pid = os.fork()
        except OSError as exc:
            logger.error("Cannot fork for a request from %s: %s", client_address[0], exc)
            self.shutdown_request(request)
            return
        if pid:
            (self.busy_children if busy else self.active_children).add(pid)
            self.close_request(request)
            return
        self._run_child(request, client_address, busy)

    def close_request(self, request: Any) -> None:
        """The parent's copy of a connection a child took: close it, leave the peer alone."""
        request.close()

    def _next_timeout(self) -> float:
        deadlines = [self._clock() + 1.0]
        delay = self.spares.refill_delay()
        if delay is not None:
            deadlines.append(self._clock() + delay)
        pending = self.handshakes.next_deadline()
        if pending is not None:
            deadlines.append(pending)
        if self.waiting:
            deadlines.append(self.waiting[0].deadline)
        return max(0.005, min(deadlines) - self._clock())

    def serve(self, stop_event: threading.Event) -> None:
        """Accept connections and advance handshakes until ``stop_event`` is set (main thread only)."""
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        self._wakeup = (rfd, wfd)
        old_wakeup = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
        old_chld = signal.signal(signal.SIGCHLD, lambda *_: None)
        # ignored here, so that a child forked before it sets its handler never dies of it
        old_reclaim = signal.signal(noded_keepalive.RECLAIM_SIGNAL, signal.SIG_IGN)
        self.socket.setblocking(False)
        arfd, awfd = os.pipe()
        os.set_blocking(arfd, False)
        self._authenticated = (arfd, awfd)
        sel = self._selector
        sel.register(self.socket, selectors.EVENT_READ, "accept")
        sel.register(rfd, selectors.EVENT_READ, "wakeup")
        sel.register(arfd, selectors.EVENT_READ, "authenticated")
        logger.info("Listening on %s:%d", *self.server_address[:2])
        # Keep the objects created so far out of the collector: a child then
        # neither collects nor touches (and so copies) the parent's pages.
        gc.collect()
        gc.freeze()
        try:
            self.spares.refill()
            while not stop_event.is_set():
                for key, _ in sel.select(timeout=self._next_timeout()):
                    if key.data == "wakeup":
                        self._drain(rfd)
                    elif key.data == "authenticated":
                        self._read_authenticated(arfd)
                    elif key.data == "accept":
                        self._accept_all()
                    elif noded_handshake.is_pending(key.data):
                        done = self.handshakes.advance(key.data)
                        if done is not None:
                            self._established(done)
                self.handshakes.expire()
                self.collect_children()
                self._serve_waiting()
                if not stop_event.is_set():
                    self.spares.refill()
        finally:
            self._reclaim_slots()   # kept connections end with the daemon
            self.spares.stop()
            self.handshakes.close_all()
            for conn in self.waiting:
                self.shutdown_request(conn.tls)
            self.waiting.clear()
            sel.unregister(self.socket)
            sel.unregister(rfd)
            sel.unregister(arfd)
            signal.signal(signal.SIGCHLD, old_chld)
            signal.signal(noded_keepalive.RECLAIM_SIGNAL, old_reclaim)
            signal.set_wakeup_fd(old_wakeup)
            for fd in (rfd, wfd, arfd, awfd):
                os.close(fd)
            self._wakeup = None
            self._authenticated = None

    @staticmethod
    def _drain(fd: int) -> None:
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass

    def _established(self, done: noded_handshake.Established) -> None:
        try:
            self.process_request(done.tls, done.address)
        except Exception:
            logger.exception("Cannot handle a connection from %s", done.address[0])
            self.shutdown_request(done.tls)

    def _accept_all(self) -> None:
        for _ in range(256):
            try:
                request, client_address = self.get_request()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    # out of descriptors: the oldest silent peer makes room
                    if self.handshakes.evict_oldest():
                        continue
                    logger.error("accept failed: %s", exc)
                    return
                if exc.errno in (errno.ENOBUFS, errno.ENOMEM):
                    logger.error("accept failed: %s", exc)
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EINTR):
                    continue
                raise
            done = self.handshakes.add(request, client_address)
            if done is not None:
                self._established(done)

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

    def server_close(self) -> None:
        self.spares.stop()
        self.handshakes.close_all()
        self._selector.close()
        super().server_close()

    # --- child side ---
    def _child_setup(self, keep: Any = None) -> None:
        """In a fresh child: default signals, drop the parent's sockets (but ``keep``) and bookkeeping."""
        gc.disable()   # short-lived: exits before garbage matters
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        self.reclaim = noded_keepalive.Reclaim()
        self.reclaim.install()
        # a dead parent reclaims every slot: an idle kept child closes at once,
        # a busy one after its reply (the pid file is already closed here:
        # daemon.PidFile.keep_out_of_children)
        process.set_parent_death_signal(noded_keepalive.RECLAIM_SIGNAL)
        if os.getppid() != self.parent_pid:
            self.reclaim.requested = True
        if self._wakeup is not None:
            for fd in self._wakeup:
                os.close(fd)
            self._wakeup = None
        if self._authenticated is not None:
            os.close(self._authenticated[0])   # the write end stays: a spare reports on it
        self.socket.close()
        self.handshakes.detach()
        self._selector.close()
        for conn in self.waiting:
            if conn.tls is not keep:
                conn.tls.close()
        self.waiting.clear()
        self.spares.detach()
        self.active_children = set()
        self.handshaking_children = set()
        self.busy_children = set()
        self._reclaimed = set()

    def _prewarm(self) -> None:
        """Run a dummy ``version`` request over a socketpair (no TLS, no file I/O).

        Touches (and so copies, ahead of time) the pages the real request
        will touch: the handler, the parser, the dispatch, the serializer.
        """
        ours, theirs = socket.socketpair()
        try:
            theirs.sendall(_WARM_REQUEST)
            theirs.shutdown(socket.SHUT_WR)
            ours.settimeout(1.0)
            NodedRequestHandler(ours, ("spare-warm-up", 0), self)
            theirs.settimeout(1.0)
            theirs.recv(65536)
            self.ssl_context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_side=True)
        except (OSError, ssl.SSLError) as exc:
            logger.debug("Spare warm-up failed: %s", exc)
        finally:
            ours.close()
            theirs.close()

    def _run_spare(self, channel: socket.socket) -> NoReturn:
        """Spare child (forked by the pool): warm up, wait for one connection, serve it, exit.

        The connection comes with its ClientHello in; the spare does the
        handshake (reporting it to the parent once done), then the request.
        """
        noded_spare.set_comm(noded_spare.SPARE_COMM)

        def connection() -> tuple[socket.socket, Any] | None:
            self._prewarm()
            request = noded_spare.receive_connection(channel)
            if request is None:   # the parent is shutting down or gone
                return None
            try:
                return request, request.getpeername()
            except OSError:   # the client already went away
                self.shutdown_request(request)
                return None

        self._child_main(connection)

    def _run_child(self, request: socket.socket, client_address: Any, busy: bool) -> NoReturn:
        """Request child forked for an established ``request``: serve it, exit."""
        noded_spare.set_comm(noded_spare.CHILD_COMM)
        self.busy_reply = busy
        self._child_main(lambda: (request, client_address), keep=request)

    def _child_main(self, connection: Callable[[], tuple[socket.socket, Any] | None],
                    keep: Any = None) -> NoReturn:
        """In a fresh child: set up, serve the connection ``connection()`` gives (if any), exit.

        Exits 0 when served (or there was nothing to serve), 1 when the
        request failed (logged); the connection is shut down either way.
        """
        status = 1
        request: socket.socket | None = None
        client_address: Any = ("?", 0)
        try:
            self._child_setup(keep)
            got = connection()
            if got is not None:
                request, client_address = got
                self.finish_request(request, client_address)
            status = 0
        except BaseException:
            logger.exception("Request from %s failed", client_address[0])
        finally:
            try:
                if request is not None:
                    self.shutdown_request(request)
            finally:
                logging.shutdown()
                os._exit(status)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """The HTTP request, then the after-response callbacks.

        ``request`` is a TLS connection whose handshake is done (from the
        parent's :class:`noded_handshake.HandshakePool`), or a plain socket
        whose handshake is done here (a spare's, the in-process warm-up,
        tests), within ``handshake_timeout`` seconds.  The callbacks run even when the reply could not be
        delivered (the client went away): the procedure has run, so a node
        that has left the cluster must still stop its daemon.
        """
        if isinstance(request, ssl.SSLSocket):
            tls = request
        else:
            if request.gettimeout() is None:
                request.settimeout(self.handshake_timeout)
            try:
                tls = self.ssl_context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                logger.info("TLS handshake with %s failed: %s", client_address[0], exc)
                return
            self._notify_authenticated()
        self.request_ctx = None
        try:
            NodedRequestHandler(tls, client_address, self)
            try:
                tls.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        finally:
            ctx, self.request_ctx = self.request_ctx, None
            callbacks: list[Callable[[], None]] = ctx.after_response if ctx else []
            for callback in callbacks:
                try:
                    callback()
                except Exception:
                    logger.exception("After-response callback failed")
