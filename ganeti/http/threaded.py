"""The threaded runner of the HTTPS accept loop: a bounded pool of threads, deadlines, lingering close.

The RAPI daemon's connection engine (doc/protocols/rpc.md, "The HTTP
package"): the one accept loop (:class:`ganeti.http.acceptor.AcceptLoop`:
listening, accepting, TLS handshakes without a thread, eviction) with a
:class:`WorkerPool` that runs established connections; what a request
*means* is the handler's business.  What it adds:

* **Bounds**, one :class:`~ganeti.http.limits.Limits` value as every
  server core takes (:data:`DEFAULT_LIMITS`): at most ``max_children``
  connections are served at once (more wait for a worker, in the order
  they came), at most ``max_connections`` are open (a connection over it
  is closed at once), ``request_timeout`` is the deadline below, and
  ``handshake_timeout`` bounds the handshake the loop does before a
  worker sees the connection.  A response that lasts (an event stream)
  calls :meth:`WorkerPool.detach`: its thread leaves the pool and a new
  worker takes its place, so long-lived responses never starve requests.
* **Idle connections wait in the loop**, not in a worker: when a kept
  connection has answered a request and nothing of the next one is in,
  the handler parks it (:meth:`TlsConnectionMixin.may_park`); the loop
  watches it for at most ``keepalive_timeout`` seconds and hands it to a
  worker again once the client sends, so a thousand idle keep-alive
  clients hold no thread.
* **Deadlines**, not only a timeout per read: :class:`DeadlineReader`
  gives a request's head, and then its body, one total deadline, so a
  client dripping a byte every few seconds cannot hold a thread.
* **Lingering close** (:meth:`ThreadedServer.linger_close`): our FIN
  first, then the client's remaining input is read and dropped (at most
  :data:`LINGER_TIME` seconds and :data:`LINGER_BYTES` bytes), so that a
  client still sending gets our answer rather than a reset.

Requests are parsed by the handler class plugged in (for RAPI:
``ganeti/server/rapi.py`` on :mod:`ganeti.http.framing`).
"""

from __future__ import annotations

import collections
import functools
import io
import logging
import socket
import queue
import select
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from ganeti.http import sending
from ganeti.http.acceptor import AcceptLoop
from ganeti.http.limits import Limits

__all__ = ["ThreadedServer", "TlsConnectionMixin", "DeadlineReader", "WorkerPool",
           "LINGER_TIME", "LINGER_BYTES", "PARK_AFTER", "DEFAULT_WORKERS", "DEFAULT_MAX_CONNECTIONS",
           "DEFAULT_LIMITS"]

logger = logging.getLogger(__name__)

#: after our last answer, input is read and dropped for at most this long and this
#: much, so that a client still sending gets the answer rather than a reset
LINGER_TIME = 2.0
LINGER_BYTES = 1024 * 1024
#: a kept connection whose client says nothing for this long after an answer is
#: parked in the loop; a client that closes or asks again sooner (most do) is
#: served on by its worker, without the round trip through the loop
PARK_AFTER = 0.05
#: connections open at most (served, parked or waiting), and connections served at
#: once: as many, because a worker holds its connection while the client's request
#: head is still arriving (up to the request deadline); a smaller pool would let
#: that many slow clients hold up everyone else (idle ones are parked in the loop)
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_WORKERS = DEFAULT_MAX_CONNECTIONS
#: the threaded core's bounds: the fields it reads are ``max_children`` (its
#: workers), ``max_connections``, ``request_timeout`` (RAPI's 10 s),
#: ``keepalive_timeout`` (a parked idle connection) and the accept loop's
#: ``handshake_timeout`` and ``max_handshakes``
DEFAULT_LIMITS = Limits(max_children=DEFAULT_WORKERS, max_connections=DEFAULT_MAX_CONNECTIONS,
                        request_timeout=10.0, handshake_timeout=10.0, keepalive_timeout=10.0)


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


class ThreadedServer(AcceptLoop):
    """Accepts TLS connections and serves each established one on a :class:`WorkerPool`
    (see the module docstring).  :meth:`serve_forever` runs in any one thread;
    :meth:`shutdown` from another stops it."""

    request_queue_size = 128

    def __init__(self, address: tuple[str, int], tls_context: ssl.SSLContext | None,
                 handler_class: Callable[[Any, Any, Any], object], *,
                 limits: Limits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        #: the threads serving connections
        self.pool = WorkerPool(limits.max_children, name="http")
        #: connections open at most (served or waiting for a worker)
        self.max_connections = limits.max_connections
        self._open = 0
        self._open_lock = threading.Lock()
        #: seconds a parked idle connection may wait for its next request
        self.idle_timeout = limits.keepalive_timeout
        #: connections parked by workers, not yet watched by the loop (any thread appends)
        self._to_park: collections.deque[tuple[Any, Any]] = collections.deque()
        #: parked connections the loop watches, by descriptor, oldest first (loop thread only)
        self._parked: dict[int, tuple[Any, Any, float]] = {}
        super().__init__(address, tls_context, handler_class, limits=limits, clock=clock)

    @property
    def parked(self) -> int:
        """Idle connections waiting in the loop for their next request now."""
        return len(self._parked) + len(self._to_park)

    def run_connection(self, tls: ssl.SSLSocket, address: Any) -> None:
        """Queue an established connection for a worker; over :attr:`max_connections`, close it."""
        self._admit(tls, address)

    def run_plain_connection(self, sock: socket.socket, address: Any) -> None:
        """The same for a connection of a plain loop (no TLS context)."""
        self._admit(sock, address)

    def _admit(self, tls: Any, address: Any) -> None:
        with self._open_lock:
            full = self._open >= self.max_connections
            if not full:
                self._open += 1
        if full:
            logger.warning("Connection from %s refused: %d connections open",
                           address[0], self.max_connections)
            self.close_request(tls)
            return
        self._to_worker(tls, address)

    def _to_worker(self, request: Any, address: Any) -> None:
        """Serve an open connection on the pool (it is closed if the pool is shutting down)."""
        try:
            self.pool.submit(lambda: self._serve_connection(request, address))
        except RuntimeError:        # shutting down
            self._end_parked(request)

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        park = False
        try:
            handler = self.handler_class(request, client_address, self)
            park = getattr(handler, "parked", False) is True
        except Exception:
            logger.exception("Error serving a connection from %s", client_address[0])
        finally:
            if park:
                self._to_park.append((request, client_address))
                self.wake()
            else:
                self._closed_one()
                self.linger_close(request)

    # --- parked idle connections (the loop's thread) ---
    def loop_tick(self, stopping: bool) -> None:
        while self._to_park:
            request, address = self._to_park.popleft()
            if stopping:
                self._end_parked(request)
                continue
            fd = request.fileno()
            self._parked[fd] = (request, address, self.clock() + self.idle_timeout)
            self.watch(fd, functools.partial(self._resume, fd))
        now = self.clock()
        while self._parked:
            fd, (request, _, deadline) = next(iter(self._parked.items()))
            if deadline > now and not stopping:
                break
            del self._parked[fd]
            self.unwatch(fd)
            self._end_parked(request)

    def loop_deadline(self) -> float | None:
        for _, _, deadline in self._parked.values():
            return deadline
        return None

    def loop_stopped(self) -> None:
        self.loop_tick(stopping=True)

    def _resume(self, fd: int) -> None:
        """A parked connection has input (or was closed): a worker serves it again."""
        request, address, _ = self._parked.pop(fd)
        self.unwatch(fd)
        self._to_worker(request, address)

    def _end_parked(self, request: Any) -> None:
        """End a connection counted as open that no worker serves (parked or not yet taken)."""
        self._closed_one()
        self.shutdown_request(request)

    def _closed_one(self) -> None:
        with self._open_lock:
            self._open -= 1

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown()

    def linger_close(self, request: Any) -> None:
        """Close a served connection the lingering way: our FIN first, then drain its input.

        Closing a socket with unread input sends a reset, which can destroy
        an answer the client has not read yet (a 414 to a request line it is
        still sending).  Bounded by :data:`LINGER_TIME` and :data:`LINGER_BYTES`;
        runs in the worker, never in the accept loop.
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
    """For the handler of a :class:`ThreadedServer`: the request timeout on the
    connection (its handshake is done already) and reads through a
    :class:`DeadlineReader` (:attr:`deadline_input`).

    Put it first among the bases (``class H(TlsConnectionMixin,
    MyHttpConnection)``): its :meth:`handle` runs the next class's and
    drops a connection that times out or breaks.  The subclass arms
    :attr:`deadline_input` before each request's head (and body) and
    disarms it after.
    """

    server: ThreadedServer  # type: ignore[assignment]  # the accept loop, not a socketserver server
    deadline_input: DeadlineReader
    #: set by :meth:`may_park`: the connection goes back to the loop, not closed
    parked = False

    def may_park(self, buffered: int) -> bool:
        """After an answer on a kept connection: park it if nothing of the next
        request is in (``buffered``: bytes the handler's parser holds) within
        :data:`PARK_AFTER` seconds.  True means the handler returns now and the
        loop keeps the connection; False, the handler reads on (the next
        request, or the end of a client that closes after its answer)."""
        if buffered or self.connection.pending():
            return False
        if select.select([self.connection], [], [], PARK_AFTER)[0]:
            return False
        self.parked = True
        return True

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)
        self.deadline_input = DeadlineReader(self.connection, self.server.request_timeout,
                                             self.server.clock)
        self.rfile.close()      # the stdlib's reader (it holds a reference to the socket)
        self.rfile = io.BufferedReader(self.deadline_input, self.rbufsize if self.rbufsize > 0
                                       else io.DEFAULT_BUFFER_SIZE)
        # the request timeout bounds each piece of an answer, not the whole of it
        self.wfile.close()      # the stdlib's writer: one timeout for a whole answer
        self.wfile = sending.PieceWriter(self.connection)

    def handle(self) -> None:
        """The connection; one that times out, breaks or fails TLS is dropped
        (logged at debug)."""
        try:
            super().handle()
        except (TimeoutError, ssl.SSLError, ConnectionError) as exc:
            logger.debug("Connection from %s dropped: %s", self.client_address[0], exc)
