"""The one accept loop of the HTTPS server cores: listen, accept, TLS handshakes, then a runner.

Both HTTPS daemons are built on :class:`AcceptLoop` (doc/protocols/rpc.md,
"The HTTP package"); they differ only in how an established connection is
*run*, which a subclass plugs in:

* the node daemon (:class:`ganeti.http.forking.ForkingServer`) forks a
  child per connection, or hands the connection to an idle pre-forked
  spare before its handshake (:meth:`AcceptLoop.take_hello`);
* RAPI (:class:`ganeti.http.threaded.ThreadedServer`) runs it on a bounded
  worker pool.

What the loop owns, once for both:

* **the listening socket** (bound at construction: a failed bind raises
  the socket error, with nothing left open);
* **accepting** everything queued on each wake-up, with ``TCP_NODELAY``;
  out of descriptors, the oldest silent peer is evicted to make room;
* **TLS handshakes** in a :class:`~ganeti.http.handshake.HandshakePool`,
  non-blocking, within :attr:`Limits.handshake_timeout`, at most
  :attr:`Limits.max_handshakes` at once (the oldest goes first), so a
  peer that has proved nothing costs neither a process nor a thread;
* **the wake-up**: one pipe that a stop request (:meth:`AcceptLoop.shutdown`)
  or a signal (a runner may make it the signal wake-up descriptor) writes
  to, and the loop's timeout, the earliest of every deadline it and the
  runner keep;
* **one bounds value**, :class:`~ganeti.http.limits.Limits`, for every core.

A loop made with no TLS context (``None``) is **plain**: an accepted
connection goes to :meth:`~AcceptLoop.run_plain_connection` at once, with
no handshake (the instance metadata service, ``ganeti/server/metad.py``:
guests speak plain HTTP to it and prove nothing but their address).

A runner's hooks, each called in the loop's thread only:
:meth:`~AcceptLoop.run_connection` (required; for a plain loop
:meth:`~AcceptLoop.run_plain_connection`),
:meth:`~AcceptLoop.take_hello`, :meth:`~AcceptLoop.loop_started`,
:meth:`~AcceptLoop.loop_tick`, :meth:`~AcceptLoop.loop_deadline` and
:meth:`~AcceptLoop.loop_stopped`; :meth:`~AcceptLoop.watch` adds a
descriptor of its own to the loop.
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import socket
import ssl
import threading
import time
from typing import Any, Callable

from ganeti.http import handshake
from ganeti.http.limits import Limits

__all__ = ["AcceptLoop"]

logger = logging.getLogger(__name__)

_ACCEPT = "accept"
_WAKE = "wake"
#: connections accepted per wake-up at most (then the loop looks at its other work)
_ACCEPT_BATCH = 256
#: the loop looks at its stop flag at least this often (seconds)
_MAX_SLEEP = 1.0


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


class AcceptLoop:
    """Accepts TLS connections and hands each established one to :meth:`run_connection`.

    ``handler_class(connection, address, server)`` serves one connection;
    the subclass decides where it runs.  ``clock`` gives monotonic seconds.
    """

    #: the listen backlog (a small one drops the SYNs of a burst of clients:
    #: a 1 s retransmit each)
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], tls_context: ssl.SSLContext | None,
                 handler_class: Callable[[Any, Any, Any], object], *, limits: Limits,
                 clock: Callable[[], float] = time.monotonic) -> None:
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        #: serves one connection when called as ``handler_class(conn, address, server)``
        self.handler_class = handler_class
        self.limits = limits
        self.request_timeout = limits.request_timeout
        self.handshake_timeout = limits.handshake_timeout
        #: monotonic seconds, for every deadline of the loop and its runner
        self.clock = clock
        #: no TLS: accepted connections go to :meth:`run_plain_connection` as they are
        self.plain = tls_context is None
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind((host, port))
            self.socket.listen(self.request_queue_size)
        except OSError:
            self.socket.close()
            raise
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self._selector = selectors.DefaultSelector()
        #: handshakes in progress
        self.handshakes = handshake.HandshakePool(
            tls_context, self._selector, timeout=limits.handshake_timeout,
            max_pending=min(limits.max_handshakes, handshake.fd_budget()),
            take_hello=self.take_hello, clock=clock)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._stop = threading.Event()
        self._not_serving = threading.Event()
        self._not_serving.set()

    # --- what a subclass plugs in -------------------------------------------------------------
    def run_connection(self, tls: ssl.SSLSocket, address: Any) -> None:
        """Run an established connection (it is the runner's from now on)."""
        raise NotImplementedError

    def run_plain_connection(self, sock: socket.socket, address: Any) -> None:
        """Run an accepted connection of a plain loop (it is the runner's from now on)."""
        raise NotImplementedError

    def take_hello(self, sock: socket.socket, address: Any) -> bool:
        """A connection's ClientHello is in: True if the runner took the bare socket."""
        return False

    def loop_started(self) -> None:
        """The loop is about to wait for its first event."""

    def loop_tick(self, stopping: bool) -> None:
        """After each wake-up of the loop (``stopping``: it ends after this one)."""

    def loop_deadline(self) -> float | None:
        """The runner's earliest deadline (the loop's clock), or None."""
        return None

    def loop_stopped(self) -> None:
        """The loop ended (before the pending handshakes are closed)."""

    # --- the loop ------------------------------------------------------------------------------
    @property
    def tls_context(self) -> ssl.SSLContext:
        """The context new connections are wrapped in (set it to reload a certificate)."""
        if self.handshakes.context is None:
            raise ValueError("a plain accept loop has no TLS context")
        return self.handshakes.context

    @tls_context.setter
    def tls_context(self, value: ssl.SSLContext) -> None:
        self.handshakes.context = value

    @property
    def wake_fd(self) -> int:
        """A descriptor whose write wakes the loop (e.g. for ``signal.set_wakeup_fd``)."""
        return self._wake_w

    def fileno(self) -> int:
        """The listening socket's descriptor."""
        return self.socket.fileno()

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` in the loop whenever ``fd`` is readable."""
        self._selector.register(fd, selectors.EVENT_READ, callback)

    def unwatch(self, fd: int) -> None:
        """Stop watching ``fd``."""
        try:
            self._selector.unregister(fd)
        except (KeyError, ValueError):
            pass

    def serve(self, stop_event: threading.Event | None = None) -> None:
        """Run the loop until ``stop_event`` is set or :meth:`shutdown` is called."""
        stop = stop_event if stop_event is not None else self._stop
        self._not_serving.clear()
        try:
            self.socket.setblocking(False)
            self._selector.register(self.socket, selectors.EVENT_READ, _ACCEPT)
            self._selector.register(self._wake_r, selectors.EVENT_READ, _WAKE)
            logger.info("Listening on %s:%d", *self.server_address[:2])
            self.loop_started()
            stopping = stop.is_set() or self._stop.is_set()
            while not stopping:
                for key, _ in self._selector.select(timeout=self._timeout()):
                    data = key.data
                    if data == _ACCEPT:
                        self._accept_all()
                    elif data == _WAKE:
                        _drain(self._wake_r)
                    elif handshake.is_pending(data):
                        done = self.handshakes.advance(data)
                        if done is not None:
                            self._established(done)
                    else:
                        data()
                self.handshakes.expire()
                stopping = stop.is_set() or self._stop.is_set()
                self.loop_tick(stopping)
        finally:
            try:
                self.loop_stopped()
            finally:
                self.handshakes.close_all()
                self.unwatch(self.socket.fileno())
                self.unwatch(self._wake_r)
                self._not_serving.set()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """:meth:`serve` under socketserver's name (``poll_interval`` is not needed: a
        stop wakes the loop at once)."""
        del poll_interval
        self.serve()

    def shutdown(self) -> None:
        """Stop the loop and wait until it has ended (from another thread)."""
        self._stop.set()
        self.wake()
        self._not_serving.wait()

    def wake(self) -> None:
        """Make the loop look at its work now (any thread, signal handlers too)."""
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):
            pass    # a full pipe wakes it all the same; a closed one: the loop is gone

    def _timeout(self) -> float:
        now = self.clock()
        deadlines = [now + _MAX_SLEEP]
        for deadline in (self.handshakes.next_deadline(), self.loop_deadline()):
            if deadline is not None:
                deadlines.append(deadline)
        return max(0.005, min(deadlines) - now)

    def _accept_all(self) -> None:
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, address = self.socket.accept()
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
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:     # the peer is gone already
                sock.close()
                continue
            if self.plain:
                self._plain(sock, address)
                continue
            done = self.handshakes.add(sock, address)
            if done is not None:
                self._established(done)

    def _plain(self, sock: socket.socket, address: Any) -> None:
        try:
            sock.setblocking(True)
            self.run_plain_connection(sock, address)
        except Exception:
            logger.exception("Cannot handle a connection from %s", address[0])
            self.shutdown_request(sock)

    def _established(self, done: handshake.Established) -> None:
        try:
            self.run_connection(done.tls, done.address)
        except Exception:
            logger.exception("Cannot handle a connection from %s", done.address[0])
            self.shutdown_request(done.tls)

    # --- connections and the end ---------------------------------------------------------------
    def shutdown_request(self, request: Any) -> None:
        """End a connection: our FIN, then close (the peer reads what was sent)."""
        try:
            request.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.close_request(request)

    def close_request(self, request: Any) -> None:
        """Close this process's copy of a connection, leaving the peer alone (e.g. the
        parent's copy of a connection a forked child took)."""
        request.close()

    def detach_in_child(self) -> None:
        """In a forked child: close this process's copies of the loop's descriptors
        (the pending handshakes' sockets too; their peers see nothing)."""
        self.handshakes.detach()
        self._close_descriptors()

    def server_close(self) -> None:
        """Close the listening socket and everything the loop holds."""
        self.handshakes.close_all()
        self._close_descriptors()

    def _close_descriptors(self) -> None:
        self._selector.close()
        self.socket.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1
