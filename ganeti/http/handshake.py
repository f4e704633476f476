"""TLS handshakes of the forking server (noded), watched and if need be done by the parent without blocking.

Why: before its handshake is done a peer has proved nothing (the cluster
certificate is checked during the handshake), so it must not cost a
process.  A child per accepted connection let 80 connections that never
sent a ClientHello hold all 64 request slots for the old 60 s timeout, and
a real RPC from the master was dropped.

How: an accepted connection first waits here as a bare socket (no TLS
object) until its first TLS record, the ClientHello, has fully arrived
(looked at with ``MSG_PEEK``, nothing is consumed).  Then it is offered to
``take_hello`` (noded hands it to a pre-forked spare child, which does the
handshake itself: the fast path).  If that declines, or the ClientHello
came in pieces, the parent does the handshake itself, non-blocking, and
returns the established connection, for which noded forks a child that
inherits it.  Silent peers, half ClientHellos and stalled handshakes cost
one socket (and at most one small TLS object) in the parent and no
process; the parent's work is event driven, so a thousand of them do not
delay the master's handshake.  Data that is not TLS closes the connection
at once.

Bounds: a handshake must finish within ``timeout`` seconds
(:data:`HANDSHAKE_TIMEOUT`) of the accept; at most ``max_pending``
handshakes are pending at once, and a new connection beyond that closes
the *oldest* pending one (the closest to its deadline), so a flood can
never keep a fresh connection, such as the master's, from its handshake.

Interface (parent side, the accepting thread only; never blocks)::

    pool = HandshakePool(ssl_context, selector, take_hello=fn)   # registers in `selector`
    pool.add(sock, address)          # accepted socket; may complete at once (see below)
    done = pool.advance(key.data)    # on a selector event whose data is a pool entry
    pool.expire()                    # close those past their deadline
    pool.next_deadline()             # monotonic time of the earliest deadline, or None
    pool.evict_oldest()              # close the oldest pending (e.g. out of descriptors)
    pool.close_all() / pool.detach() # shutdown / in a forked child: drop every socket

``add`` and ``advance`` return an :class:`Established` (a blocking
``ssl.SSLSocket`` whose handshake is done, and the peer's address) once
the handshake completes, else None.  ``take_hello(sock, address) -> bool``
is called with the bare socket once its ClientHello is in; True means the
caller took the socket (the pool forgets it without closing it).  Selector keys that the pool
registered carry a :class:`Pending` as their data; :func:`is_pending`
tells them apart from the caller's own keys.
"""

from __future__ import annotations

import logging
import resource
import selectors
import socket
import ssl
import time
from typing import Any, Callable, NamedTuple

__all__ = ["HandshakePool", "Pending", "Established", "is_pending", "hello_state",
           "fd_budget", "HANDSHAKE_TIMEOUT", "DEFAULT_MAX_PENDING"]

logger = logging.getLogger(__name__)

#: seconds from the accept to a finished TLS handshake
HANDSHAKE_TIMEOUT = 5.0
#: handshakes pending at once (beyond that the oldest is closed)
DEFAULT_MAX_PENDING = 1024
#: descriptors kept free for children, files and the listening socket
_FD_RESERVE = 64
_TLS_HANDSHAKE_RECORD = 0x16
_RECORD_HEADER = 5
_MAX_RECORD = _RECORD_HEADER + 16384 + 2048


class Established(NamedTuple):
    """A connection whose TLS handshake is done (the peer presented the cluster certificate)."""

    tls: ssl.SSLSocket
    address: Any


class Pending:
    """One handshake in progress (the data of its selector key).

    ``sock`` is the bare socket until the parent starts the handshake
    itself; from then on it is the ``ssl.SSLSocket`` (and ``tls`` is True).
    """

    __slots__ = ("sock", "tls", "address", "deadline")

    def __init__(self, sock: socket.socket, address: Any, deadline: float) -> None:
        self.sock = sock
        self.tls = False
        self.address = address
        self.deadline = deadline


def hello_state(data: bytes) -> str:
    """What the first bytes of a connection are: ``"complete"``, ``"partial"`` or ``"not-tls"``.

    ``"complete"`` when the whole first TLS handshake record (the
    ClientHello) is in ``data``.
    """
    if data[:1] != bytes([_TLS_HANDSHAKE_RECORD]) or (len(data) >= 2 and data[1] != 3):
        return "not-tls"
    if len(data) < _RECORD_HEADER:
        return "partial"
    length = int.from_bytes(data[3:5], "big")
    return "complete" if len(data) >= _RECORD_HEADER + length else "partial"


def fd_budget() -> int:
    """Descriptors pending handshakes may use: the soft limit minus a reserve."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return DEFAULT_MAX_PENDING
    return max(16, soft - _FD_RESERVE)


def is_pending(data: object) -> bool:
    """True if a selector key's ``data`` is one of the pool's handshakes."""
    return isinstance(data, Pending)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


class HandshakePool:
    """Pending server-side TLS handshakes, advanced as their sockets become ready.

    ``clock`` gives monotonic seconds (deadlines); the pool registers and
    unregisters its sockets in ``selector`` itself.
    """

    def __init__(self, ssl_context: ssl.SSLContext | None, selector: selectors.BaseSelector, *,
                 timeout: float = HANDSHAKE_TIMEOUT, max_pending: int = DEFAULT_MAX_PENDING,
                 take_hello: Callable[[socket.socket, Any], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        #: the context new connections are wrapped in (replace it to reload a certificate);
        #: None for a plain loop, which adds no connection to the pool
        self.context = ssl_context
        self._take_hello = take_hello
        self._selector = selector
        self.timeout = timeout
        self.max_pending = max(1, max_pending)
        self._clock = clock
        # insertion order is deadline order (one timeout for all)
        self._pending: dict[int, Pending] = {}
        #: handshakes closed for passing their deadline, for being the oldest
        #: when the pool was full, and for failing (counters for logs and tests)
        self.expired = 0
        self.evicted = 0
        self.failed = 0

    def __len__(self) -> int:
        """The number of pending handshakes."""
        return len(self._pending)

    def add(self, sock: socket.socket, address: Any) -> Established | None:
        """Start the handshake of an accepted ``sock``; the connection if it is already done.

        Closes the oldest pending handshake first when ``max_pending`` are
        pending.  ``sock`` is owned by the pool from now on.
        """
        while len(self._pending) >= self.max_pending:
            self.evict_oldest()
        try:
            sock.setblocking(False)
        except OSError:
            _close(sock)
            return None
        entry = Pending(sock, address, self._clock() + self.timeout)
        self._pending[id(entry)] = entry
        return self._look(entry, registered=False)

    def advance(self, entry: Pending) -> Established | None:
        """Continue the handshake of ``entry`` (its socket is ready); the connection once done."""
        if id(entry) not in self._pending:
            return None
        if not entry.tls:
            return self._look(entry, registered=True)
        return self._step(entry, registered=True)

    def _look(self, entry: Pending, *, registered: bool) -> Established | None:
        """Before any TLS: peek at the first record, then hand over or start the handshake."""
        try:
            data = entry.sock.recv(_MAX_RECORD, socket.MSG_PEEK)
        except BlockingIOError:
            self._watch(entry, selectors.EVENT_READ, registered)
            return None
        except OSError:
            self._drop(entry, registered)
            return None
        state = hello_state(data) if data else "not-tls"
        if state == "not-tls":
            if data:
                logger.info("Not TLS from %s; closing", entry.address[0])
                self.failed += 1
                try:    # consumed, so that the close is a FIN rather than a reset
                    entry.sock.recv(len(data))
                except OSError:
                    pass
            self._drop(entry, registered)
            return None
        if registered:   # the TLS socket (if any) is a new object: registered anew
            self._selector.unregister(entry.sock)
        if state == "complete" and self._take_hello is not None \
                and self._take_hello(entry.sock, entry.address):
            del self._pending[id(entry)]
            return None
        # a ClientHello in pieces, or the fast path declined: the parent does the handshake
        if self.context is None:        # a plain loop never adds a connection: be safe
            self._drop(entry, registered=False)
            return None
        try:
            entry.sock = self.context.wrap_socket(entry.sock, server_side=True,
                                               do_handshake_on_connect=False)
        except (OSError, ssl.SSLError) as exc:
            logger.info("TLS setup for %s failed: %s", entry.address[0], exc)
            self.failed += 1
            self._drop(entry, registered=False)
            return None
        entry.tls = True
        return self._step(entry, registered=False)

    def _step(self, entry: Pending, *, registered: bool) -> Established | None:
        tls = entry.sock
        assert isinstance(tls, ssl.SSLSocket)
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            self._watch(entry, selectors.EVENT_READ, registered)
            return None
        except ssl.SSLWantWriteError:
            self._watch(entry, selectors.EVENT_WRITE, registered)
            return None
        except (OSError, ssl.SSLError, ValueError) as exc:
            logger.info("TLS handshake with %s failed: %s", entry.address[0], exc)
            self.failed += 1
            self._drop(entry, registered)
            return None
        self._forget(entry, registered)
        tls.setblocking(True)
        return Established(tls, entry.address)

    def _watch(self, entry: Pending, events: int, registered: bool) -> None:
        if registered:
            self._selector.modify(entry.sock, events, entry)
        else:
            self._selector.register(entry.sock, events, entry)

    def _forget(self, entry: Pending, registered: bool) -> None:
        del self._pending[id(entry)]
        if registered:
            try:
                self._selector.unregister(entry.sock)
            except (KeyError, ValueError):
                pass

    def _drop(self, entry: Pending, registered: bool = True) -> None:
        self._forget(entry, registered)
        _close(entry.sock)

    def expire(self) -> int:
        """Close every handshake past its deadline; how many were closed."""
        now = self._clock()
        closed = 0
        while self._pending:
            entry = next(iter(self._pending.values()))
            if entry.deadline > now:
                break
            logger.info("TLS handshake with %s timed out", entry.address[0])
            self.expired += 1     # counted before the close the peer sees
            self._drop(entry)
            closed += 1
        return closed

    def next_deadline(self) -> float | None:
        """The earliest deadline (monotonic seconds), or None when nothing is pending."""
        for entry in self._pending.values():
            return entry.deadline
        return None

    def evict_oldest(self) -> bool:
        """Close the oldest pending handshake; False if there was none."""
        if not self._pending:
            return False
        entry = next(iter(self._pending.values()))
        logger.warning("Too many pending TLS handshakes (%d); closing the one from %s",
                       len(self._pending), entry.address[0])
        self._drop(entry)
        self.evicted += 1
        return True

    def close_all(self) -> None:
        """Close every pending handshake (shutdown)."""
        for entry in list(self._pending.values()):
            self._drop(entry)

    def detach(self) -> None:
        """In a forked child: close this process's copies of the sockets, touch nothing else.

        The selector is the parent's (the caller closes its own copy); the
        peers see nothing, since the parent still holds the connections.
        """
        for entry in self._pending.values():
            _close(entry.sock)
        self._pending = {}
