"""The forking runner of the HTTPS accept loop: request slots, one child per connection.

The node daemon's connection engine (doc/protocols/rpc.md, "The HTTP package"):
the one accept loop (:class:`ganeti.http.acceptor.AcceptLoop`: listening,
accepting, TLS handshakes, eviction) with a child process per connection;
what a request *means* is the handler's business (``NodedRequestHandler``
in :mod:`ganeti.server.noded`), plugged in as a
:class:`socketserver.BaseRequestHandler` class.

The parent never blocks and never waits for a child:

* **Handshakes.**  Accepted connections wait in the loop's
  :class:`~ganeti.http.handshake.HandshakePool` (no process) until their
  ClientHello is in; then an idle pre-forked spare child
  (:class:`~ganeti.http.spare.SparePool`) takes the connection and does
  the handshake itself (:meth:`ForkingServer.take_hello`), or the parent
  does it and forks a child that inherits the established connection.
* **Request slots.**  At most :attr:`Limits.max_children` children whose
  peer completed the handshake run at once; an established connection
  beyond that waits (in the parent) up to :attr:`Limits.busy_wait`
  seconds, then gets a short-lived child that answers busy (those are
  capped at a quarter of the slots; beyond that the connection is
  closed).  A waiting connection makes the parent ask the request
  children for their slots back (:data:`RECLAIM_SIGNAL`, see
  :class:`Reclaim`): an idle kept child closes at once.
* **Children** are reaped whenever SIGCHLD arrives (it wakes the
  selector through a wakeup pipe); a spare reports over a pipe when its
  handshake is done, and only then holds a request slot.  Every child
  gets :data:`RECLAIM_SIGNAL` when the parent dies.

Deadlines: a handshake within :attr:`Limits.handshake_timeout` of the
accept, each read of a request within :attr:`Limits.request_timeout`, an
idle kept connection at most :attr:`Limits.keepalive_timeout`; bodies at
most :attr:`Limits.max_body_size` (the handler's parser enforces it).
:class:`~ganeti.http.limits.Limits` is the one bounds value of the server
cores (the LUXI server takes it too); it is re-exported here.
"""

from __future__ import annotations

import collections
import gc
import logging
import os
import signal
import socket
import ssl
import struct
import time
from collections.abc import Iterable
from typing import Any, Callable, NamedTuple, NoReturn

from ganeti.http import spare
from ganeti.http.acceptor import AcceptLoop
from ganeti.http.limits import Limits
from ganeti.utils import process

__all__ = ["ForkingServer", "Limits", "Reclaim", "Reclaimed", "reclaim", "RECLAIM_SIGNAL"]

logger = logging.getLogger(__name__)

_PID = struct.Struct("=i")
#: sent by the parent to its request children when a connection waits for a slot
RECLAIM_SIGNAL = signal.SIGUSR1
#: the bounds unless the server is given others (a frozen value: shared safely)
_DEFAULT_LIMITS = Limits()


def reclaim(pids: Iterable[int]) -> set[int]:
    """In the parent: send :data:`RECLAIM_SIGNAL` to the request children ``pids``; those signalled."""
    sent = set()
    for pid in pids:
        try:
            os.kill(pid, RECLAIM_SIGNAL)
        except ProcessLookupError:
            continue
        sent.add(pid)
    return sent


class Reclaimed(Exception):
    """Raised by the signal handler in an idle kept child: close the connection now."""


class Reclaim:
    """A request child's view of :data:`RECLAIM_SIGNAL`: asked to give its slot back?

    :meth:`install` (in the child, at once after the fork; the parent
    ignores the signal, so a child never dies of it before) sets the
    handler.  While :attr:`idle` (waiting for the next request on a kept
    connection) the handler raises :class:`Reclaimed`; otherwise it sets
    :attr:`requested` and the child closes after its current reply.
    """

    def __init__(self) -> None:
        self.requested = False
        self.idle = False

    def install(self) -> None:
        """Handle :data:`RECLAIM_SIGNAL` in this process."""
        signal.signal(RECLAIM_SIGNAL, self._handler)

    def _handler(self, signum: int, frame: Any) -> None:
        self.requested = True
        if self.idle:
            self.idle = False
            raise Reclaimed()


class _Waiting(NamedTuple):
    """An established connection waiting for a request slot."""

    tls: ssl.SSLSocket
    address: Any
    deadline: float


class ForkingServer(AcceptLoop):
    """The accepting parent (see the module docstring); ``handler_class`` serves a connection.

    Subclasses add what their handler needs and may override
    :meth:`serve_connection` (to run work after the reply) and set
    :attr:`warm_request` (the bytes of a cheap request a spare answers over
    a socketpair before it waits, to copy the pages a real one touches).
    The handler finds the bounds on its server: :attr:`limits`,
    :attr:`request_timeout`, :attr:`keepalive_timeout`, :attr:`busy_reply`
    (answer busy) and :attr:`reclaim`.  :meth:`serve` runs in the main
    thread (it takes the signals it needs).
    """

    #: a request a spare answers to itself before it waits (empty: none)
    warm_request: bytes = b""

    def __init__(self, address: str, port: int, ssl_context: ssl.SSLContext,
                 handler_class: Callable[[Any, Any, Any], object], *,
                 limits: Limits = _DEFAULT_LIMITS, spare_children: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_children = limits.max_children
        self.max_busy_children = limits.max_busy_children
        self.busy_wait = limits.busy_wait
        #: seconds a kept connection may idle (0: one request per connection)
        self.keepalive_timeout = limits.keepalive_timeout
        #: in a request child: whether the parent asked for its slot back
        self.reclaim = Reclaim()
        #: request children already asked to give their slot back
        self._reclaimed: set[int] = set()
        self.max_child_handshakes = limits.max_child_handshakes
        #: children serving a peer that completed its handshake
        self.active_children: set[int] = set()
        #: spares that took a ClientHello and have not reported the handshake done
        self.handshaking_children: set[int] = set()
        self.busy_children: set[int] = set()
        #: in a child forked for a connection that found no slot: answer busy
        self.busy_reply = False
        self.parent_pid = os.getpid()
        #: spares write their pid here once their handshake is done
        self._authenticated: tuple[int, int] | None = None
        self._signals: tuple[Any, ...] | None = None
        #: the idle pre-forked children
        self.spares = spare.SparePool(spare_children, self._run_spare)
        #: established connections waiting for a request slot, oldest first
        self.waiting: collections.deque[_Waiting] = collections.deque()
        super().__init__((address, port), ssl_context, handler_class, limits=limits,
                         clock=clock)

    # --- parent side: the runner's hooks ---
    def collect_children(self) -> None:
        """Reap every finished child; never waits."""
        for children in (self.active_children, self.handshaking_children, self.busy_children):
            for pid in list(children):
                if spare.reaped(pid):
                    children.discard(pid)
        self._reclaimed &= self.active_children
        self.spares.reap()

    def children_count(self) -> int:
        """Children currently running (busy responders and handshaking spares included)."""
        return (len(self.active_children) + len(self.handshaking_children)
                + len(self.busy_children))

    def take_hello(self, sock: socket.socket, address: Any) -> bool:
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

    def _read_authenticated(self) -> None:
        """Spares whose handshake is done now hold request slots."""
        assert self._authenticated is not None
        try:
            data = os.read(self._authenticated[0], _PID.size * 256)
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
            # reported before renamed: whoever sees the new name (the tests)
            # knows the parent will count the slot at its next connection
            try:
                os.write(self._authenticated[1], _PID.pack(os.getpid()))
            except OSError as exc:
                logger.debug("Cannot report the handshake to the parent: %s", exc)
            spare.set_comm(spare.CHILD_COMM)   # it holds a request slot now

    def run_connection(self, tls: ssl.SSLSocket, address: Any) -> None:
        """Serve an established connection: fork its child, or let it wait for a slot."""
        self.collect_children()
        if self._authenticated is not None:
            # spares whose handshake ended since the loop last looked hold
            # their slots already (their report may share this wake-up)
            self._read_authenticated()
        if len(self.active_children) < self.max_children and not self.waiting:
            self._fork(tls, address, busy=False)
        else:
            self.waiting.append(_Waiting(tls, address, self.clock() + self.busy_wait))
            self._reclaim_slots()
            self._serve_waiting()

    def _reclaim_slots(self) -> None:
        """A connection waits for a slot: ask the request children to give theirs back."""
        self._reclaimed |= reclaim(self.active_children - self._reclaimed)

    def _serve_waiting(self) -> None:
        """Fork for waiting connections while slots are free; answer or drop the expired ones."""
        while self.waiting and len(self.active_children) < self.max_children:
            conn = self.waiting.popleft()
            self._fork(conn.tls, conn.address, busy=False)
        now = self.clock()
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

    def loop_deadline(self) -> float | None:
        deadlines = []
        delay = self.spares.refill_delay()
        if delay is not None:
            deadlines.append(self.clock() + delay)
        if self.waiting:
            deadlines.append(self.waiting[0].deadline)
        return min(deadlines) if deadlines else None

    def loop_started(self) -> None:
        """Signals (SIGCHLD wakes the loop), the spares' report pipe, the spares."""
        old_wakeup = signal.set_wakeup_fd(self.wake_fd, warn_on_full_buffer=False)
        old_chld = signal.signal(signal.SIGCHLD, lambda *_: None)
        # ignored here, so that a child forked before it sets its handler never dies of it
        old_reclaim = signal.signal(RECLAIM_SIGNAL, signal.SIG_IGN)
        self._signals = (old_wakeup, old_chld, old_reclaim)
        arfd, awfd = os.pipe()
        os.set_blocking(arfd, False)
        self._authenticated = (arfd, awfd)
        self.watch(arfd, self._read_authenticated)
        # Keep the objects created so far out of the collector: a child then
        # neither collects nor touches (and so copies) the parent's pages.
        gc.collect()
        gc.freeze()
        self.spares.refill()

    def loop_tick(self, stopping: bool) -> None:
        self.collect_children()
        self._serve_waiting()
        if not stopping:
            self.spares.refill()

    def loop_stopped(self) -> None:
        self._reclaim_slots()   # kept connections end with the daemon
        self.spares.stop()
        for conn in self.waiting:
            self.shutdown_request(conn.tls)
        self.waiting.clear()
        if self._signals is not None:
            old_wakeup, old_chld, old_reclaim = self._signals
            signal.signal(signal.SIGCHLD, old_chld)
            signal.signal(RECLAIM_SIGNAL, old_reclaim)
            signal.set_wakeup_fd(old_wakeup)
            self._signals = None
        if self._authenticated is not None:
            self.unwatch(self._authenticated[0])
            for fd in self._authenticated:
                os.close(fd)
            self._authenticated = None

    def server_close(self) -> None:
        self.spares.stop()
        super().server_close()

    # --- child side ---
    def _child_setup(self, keep: Any = None) -> None:
        """In a fresh child: default signals, drop the parent's sockets (but ``keep``) and bookkeeping."""
        gc.disable()   # short-lived: exits before garbage matters
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        self.reclaim = Reclaim()
        self.reclaim.install()
        # a dead parent reclaims every slot: an idle kept child closes at once,
        # a busy one after its reply (the pid file is already closed here:
        # daemon.PidFile.keep_out_of_children)
        process.set_parent_death_signal(RECLAIM_SIGNAL)
        if os.getppid() != self.parent_pid:
            self.reclaim.requested = True
        if self._authenticated is not None:
            os.close(self._authenticated[0])   # the write end stays: a spare reports on it
        self.detach_in_child()
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
        """Answer :attr:`warm_request` over a socketpair (no TLS, no file I/O).

        Touches (and so copies, ahead of time) the pages the real request
        will touch: the handler, the parser, the dispatch, the serializer.
        """
        if not self.warm_request:
            return
        ours, theirs = socket.socketpair()
        try:
            theirs.sendall(self.warm_request)
            theirs.shutdown(socket.SHUT_WR)
            ours.settimeout(1.0)
            self.handler_class(ours, ("spare-warm-up", 0), self)
            theirs.settimeout(1.0)
            theirs.recv(65536)
            self.tls_context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_side=True)
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
        spare.set_comm(spare.SPARE_COMM)

        def connection() -> tuple[socket.socket, Any] | None:
            self._prewarm()
            request = spare.receive_connection(channel)
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
        spare.set_comm(spare.CHILD_COMM)
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
        """Serve one connection (:meth:`serve_connection`), its TLS handshake done first.

        ``request`` is a TLS connection whose handshake is done (from the
        parent's :class:`handshake.HandshakePool`), or a plain socket
        whose handshake is done here (a spare's, an in-process warm-up,
        tests), within ``handshake_timeout`` seconds.
        """
        if isinstance(request, ssl.SSLSocket):
            tls = request
        else:
            if request.gettimeout() is None:
                request.settimeout(self.handshake_timeout)
            try:
                tls = self.tls_context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                logger.info("TLS handshake with %s failed: %s", client_address[0], exc)
                return
            self._notify_authenticated()
        self.serve_connection(tls, client_address)

    def serve_connection(self, tls: ssl.SSLSocket, client_address: Any) -> None:
        """Run the handler on an established connection, then end our side of it."""
        self.handler_class(tls, client_address, self)
        try:
            tls.shutdown(socket.SHUT_WR)
        except OSError:
            pass
