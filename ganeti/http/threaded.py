"""The threaded HTTPS server core: a bounded pool of threads, TLS in them, deadlines, lingering close.

The RAPI daemon's connection engine (doc/protocols/rpc.md, "The HTTP
package"); what a request *means* is the handler's business.  What it
owns:

* **Accept** without blocking on a peer: the accepting thread only wraps
  the socket (:attr:`ThreadedServer.tls_context`, which may be replaced
  for new connections, e.g. a reloaded certificate) and hands it to the
  :class:`WorkerPool`; the TLS handshake runs in the worker
  (:meth:`TlsConnectionMixin.handle`), within
  :attr:`ThreadedServer.request_timeout`.
* **Bounds**, one :class:`~ganeti.http.limits.Limits` value as every
  server core takes (:data:`DEFAULT_LIMITS`): at most ``max_children``
  connections are served at once (more wait for a worker, in the order
  they came), at most ``max_connections`` are open (a connection over it
  is closed at once), ``request_timeout`` is the deadline below.
  A response that lasts (an event stream) calls :meth:`WorkerPool.detach`:
  its thread leaves the pool and a new worker takes its place, so
  long-lived responses never starve requests.
* **Deadlines**, not only a timeout per read: :class:`DeadlineReader`
  gives a request's head, and then its body, one total deadline, so a
  client dripping a byte every few seconds cannot hold a thread.
* **Lingering close** (:meth:`ThreadedServer.shutdown_request`): our FIN
  first, then the client's remaining input is read and dropped (at most
  :data:`LINGER_TIME` seconds and :data:`LINGER_BYTES` bytes), so that a
  client still sending gets our answer rather than a reset.
* ``TCP_NODELAY`` on every connection.

Requests are parsed by the handler class plugged in (for RAPI:
``ganeti/server/rapi.py`` on :mod:`ganeti.http.framing`).
"""

from __future__ import annotations

import io
import logging
import socket
import queue
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from ganeti.http.limits import Limits

__all__ = ["ThreadedServer", "TlsConnectionMixin", "DeadlineReader", "WorkerPool",
           "LINGER_TIME", "LINGER_BYTES", "DEFAULT_WORKERS", "DEFAULT_MAX_CONNECTIONS",
           "DEFAULT_LIMITS"]

logger = logging.getLogger(__name__)

#: after our last answer, input is read and dropped for at most this long and this
#: much, so that a client still sending gets the answer rather than a reset
LINGER_TIME = 2.0
LINGER_BYTES = 1024 * 1024
#: connections open at most (served or waiting), and connections served at once:
#: as many, because a worker holds its connection while it waits for the client's
#: next request (a selector for idle connections would let fewer serve more); a
#: smaller pool would let that many slow or idle clients hold up everyone else
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_WORKERS = DEFAULT_MAX_CONNECTIONS
#: the threaded core's bounds: the fields it reads are ``max_children`` (its
#: workers), ``max_connections`` and ``request_timeout`` (RAPI's 10 s)
DEFAULT_LIMITS = Limits(max_children=DEFAULT_WORKERS, max_connections=DEFAULT_MAX_CONNECTIONS,
                        request_timeout=10.0)


class WorkerPool:
    """At most ``size`` threads run the submitted functions, started as needed.

    A function that will run long (an event stream) calls :meth:`detach`
    from its worker: that thread leaves the pool when the function
    returns, and the pool may start another one at once.
    """

    def __init__(self, size: int, name: str = "worker") -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least one thread, not {size}")
        self.size = size
        self._name = name
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers = 0       # threads in the pool (detached ones not counted)
        self._idle = 0          # of those, waiting for work
        self._pending = 0       # submitted, not yet taken
        self._local = threading.local()
        self._closed = False

    @property
    def workers(self) -> int:
        """Threads in the pool now (detached ones are not)."""
        with self._lock:
            return self._workers

    def submit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` in a worker (at once if one is free, else when one is)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("worker pool is shut down")
            self._pending += 1
            self._grow()
        self._queue.put(fn)

    def detach(self) -> None:
        """From a worker: leave the pool after the current function (see the class)."""
        if getattr(self._local, "detached", True):
            return      # not a worker of this pool, or already detached
        self._local.detached = True
        with self._lock:
            self._workers -= 1
            self._grow()

    def shutdown(self) -> None:
        """Let idle workers end; busy ones end after their function (not waited for)."""
        with self._lock:
            self._closed = True
            count = self._workers
        for _ in range(count):
            self._queue.put(None)

    def _grow(self) -> None:
        # under the lock: a new thread when work waits that no idle worker will take
        if self._pending > self._idle and self._workers < self.size and not self._closed:
            self._workers += 1
            threading.Thread(target=self._run, name=f"{self._name}-{self._workers}",
                             daemon=True).start()

    def _run(self) -> None:
        self._local.detached = False
        while True:
            with self._lock:
                self._idle += 1
            fn = self._queue.get()
            with self._lock:
                self._idle -= 1
                if fn is not None:
                    self._pending -= 1
            if fn is None:
                return
            try:
                fn()
            except Exception:   # the function's own business; the worker goes on
                logger.exception("Unexpected error in a pool worker")
            if self._local.detached:
                return


class DeadlineReader(io.RawIOBase):
    """A socket's input with a total deadline, not only a timeout per read.

    :meth:`arm` starts a deadline (for a request's head, then for its
    body); every read after it raises :class:`TimeoutError`, and each
    ``recv`` waits at most the time left.  :meth:`disarm` ends it (while
    the request runs, nothing is read).  The socket's own timeout is put
    back after each read, so writes keep theirs.
    """

    def __init__(self, sock: Any, timeout: float, clock: Callable[[], float]) -> None:
        super().__init__()
        self._sock = sock
        self._timeout = timeout
        self._clock = clock
        self.deadline: float | None = None

    def arm(self) -> None:
        self.deadline = self._clock() + self._timeout

    def disarm(self) -> None:
        self.deadline = None

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        if self.deadline is None:
            return int(self._sock.recv_into(buf))
        left = self.deadline - self._clock()
        if left <= 0:
            raise TimeoutError("request not received in time")
        self._sock.settimeout(min(left, self._timeout))
        try:
            return int(self._sock.recv_into(buf))
        finally:
            self._sock.settimeout(self._timeout)


class ThreadedServer(socketserver.TCPServer):
    """Accepts TLS connections and serves each on a :class:`WorkerPool` (see the module docstring)."""

    allow_reuse_address = True
    # socketserver's default backlog of 5 drops the SYNs of a burst of clients
    # (a 1 s retransmit each): 50 concurrent clients had a p95 of 1.5 s
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], tls_context: ssl.SSLContext,
                 handler_class: type[socketserver.BaseRequestHandler], *,
                 limits: Limits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(address, handler_class)
        self.limits = limits
        #: the threads serving connections
        self.pool = WorkerPool(limits.max_children, name="http")
        #: connections open at most (served or waiting for a worker)
        self.max_connections = limits.max_connections
        self._open = 0
        self._open_lock = threading.Lock()
        #: wraps the connections accepted from now on (replace it to reload)
        self.tls_context = tls_context
        #: the time a request's head, and then its body, may take to arrive
        self.request_timeout = limits.request_timeout
        self.clock = clock

    def get_request(self) -> tuple[Any, Any]:
        """Accept a connection and wrap it in the current TLS context (handshake later,
        in the connection's thread)."""
        sock, address = self.socket.accept()
        return self.tls_context.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False), address

    def process_request(self, request: Any, client_address: Any) -> None:
        """Queue the connection for a worker; over :attr:`max_connections`, close it."""
        with self._open_lock:
            full = self._open >= self.max_connections
            if not full:
                self._open += 1
        if full:
            logger.warning("Connection from %s refused: %d connections open",
                           client_address[0], self.max_connections)
            self.close_request(request)
            return
        try:
            self.pool.submit(lambda: self._serve_connection(request, client_address))
        except RuntimeError:        # shutting down
            self._closed_one()
            self.close_request(request)

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self._closed_one()
            self.shutdown_request(request)

    def _closed_one(self) -> None:
        with self._open_lock:
            self._open -= 1

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown()

    def shutdown_request(self, request: Any) -> None:
        """Close a connection the lingering way: our FIN first, then drain its input.

        Closing a socket with unread input sends a reset, which can destroy
        an answer the client has not read yet (a 414 to a request line it is
        still sending).  Bounded by :data:`LINGER_TIME` and :data:`LINGER_BYTES`.
        """
        try:
            request.shutdown(socket.SHUT_WR)     # for TLS: ends the TLS layer too
            request.settimeout(LINGER_TIME)
            deadline = time.monotonic() + LINGER_TIME
            drained = 0
            while drained < LINGER_BYTES and time.monotonic() < deadline:
                data = request.recv(65536)
                if not data:
                    break
                drained += len(data)
        except OSError:
            pass
        self.close_request(request)


class TlsConnectionMixin(socketserver.StreamRequestHandler):
    """For the handler of a :class:`ThreadedServer`: TLS handshake in the thread,
    ``TCP_NODELAY``, and reads through a :class:`DeadlineReader` (:attr:`deadline_input`).

    Put it first among the bases (``class H(TlsConnectionMixin,
    MyHttpConnection)``): its :meth:`handle` does the handshake and
    then the next class's.  The subclass arms :attr:`deadline_input`
    before each request's head (and body) and disarms it after.
    """

    server: ThreadedServer
    deadline_input: DeadlineReader

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.deadline_input = DeadlineReader(self.connection, self.server.request_timeout,
                                             self.server.clock)
        self.rfile.close()      # the stdlib's reader (it holds a reference to the socket)
        self.rfile = io.BufferedReader(self.deadline_input, self.rbufsize if self.rbufsize > 0
                                       else io.DEFAULT_BUFFER_SIZE)

    def handle(self) -> None:
        """The TLS handshake (within the request timeout), then the connection; a
        connection that times out, breaks or fails TLS is dropped (logged at debug)."""
        try:
            self.connection.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            logger.debug("TLS handshake with %s failed: %s", self.client_address[0], exc)
            return
        try:
            super().handle()
        except (TimeoutError, ssl.SSLError, ConnectionError) as exc:
            logger.debug("Connection from %s dropped: %s", self.client_address[0], exc)
