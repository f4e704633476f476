"""HTTPS transport for node RPC: one POST per connection (or kept, read-only), mutual TLS.

The seam is one method, easy to fake (see ``FunctionTransport``)::

    transport.post(address, port, procedure, body, timeout) -> bytes

It returns the body of a ``200`` reply (a JSON ``[success, payload]``
envelope) and raises :class:`errors.RpcTransportError` when the node
cannot be reached, refuses TLS or times out, and
:class:`errors.RemoteError` when it answers with another HTTP status.

Security model (Ganeti <= 2.12 style): every node holds the same cluster
certificate ``server.pem`` (key and certificate in one file).  The client
presents it as its own certificate and trusts only it as CA; the node
daemon does the same the other way round.  Host names are not checked:
possession of the cluster key is what authenticates a peer.  TLS 1.2 is
the minimum.

Every socket gets ``TCP_NODELAY``: without it a request costs ~46 ms
(Nagle plus delayed ACK) instead of ~1.6 ms on loopback.

Kept connections (doc/protocols/rpc.md, "Kept connections"): with
``keepalive=True`` (the master daemon's transport) the read-only
procedures of :data:`rpc.defs.KEEPALIVE_CALLS` and the job-queue
replication writes of :data:`rpc.defs.KEEPALIVE_WRITE_CALLS` are sent with
``Connection: keep-alive`` and, when the node keeps the connection, the
next such call to the node reuses it (at most :data:`KEEPALIVE_PER_NODE`
idle per node, each for at most :data:`KEEPALIVE_IDLE` seconds, less if the
node's ``Keep-Alive: timeout`` is shorter).  A kept connection the node
closed meanwhile (before any byte of the reply) is replaced by a new one
once: the read-only procedures change nothing, and the master's replicator
sends a candidate's queue writes one at a time, so writing the same files
(renaming, setting the flag) again at once leaves the node as one request
would.  Every other procedure gets a connection of its own, as before.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import ssl
import threading
import time
from typing import Callable, NamedTuple, Protocol

from ganeti import constants, errors, serializer
from ganeti.http import client, framing
from ganeti.http.tls import node_client_context
from ganeti.rpc import defs

__all__ = ["Transport", "HttpsTransport", "FunctionTransport", "make_client_context",
           "MAX_RESPONSE_SIZE", "USER_AGENT", "KEEPALIVE_PER_NODE", "KEEPALIVE_IDLE",
           "CONNECT_TIMEOUT", "HANDSHAKE_TIMEOUT", "SUSPECT_CONNECT_TIMEOUT", "SUSPECT_WINDOW",
           "MIN_CONNECT_TIMEOUT", "MIN_HANDSHAKE_TIMEOUT", "UNACKED_TIMEOUT",
           "MIN_UNACKED_TIMEOUT", "SuspectNodes"]

MAX_RESPONSE_SIZE = 128 * 1024 * 1024
USER_AGENT = f"Ganeti RPC client {constants.RELEASE_VERSION}"
#: idle kept connections per node at most (one fan-out uses one per node)
KEEPALIVE_PER_NODE = 2
#: seconds an idle kept connection is reused at most (the node daemon's default is 15)
KEEPALIVE_IDLE = 10.0
#: seconds a new connection may take to be accepted by the node's kernel (TCP): the
#: answer does not depend on the daemon, so only a lost packet (two SYN retries fit)
#: or a cut-off node makes it wait
CONNECT_TIMEOUT = 5.0
#: seconds the TLS handshake may take once connected: the node daemon itself gives a
#: handshake 5 s from its accept (doc/protocols/rpc.md), the rest is margin for that accept
HANDSHAKE_TIMEOUT = 10.0
#: seconds a new connection may take to a node whose last connection failed (timed out or
#: found no route) within :data:`SUSPECT_WINDOW` seconds: a dead node then costs each
#: later call of the same operation 2 s instead of 5 (a failover from a dead primary
#: calls it five times); a node that is back connects well within it (a lost SYN is
#: sent again after 1 s) and is no longer suspect after its first connection
SUSPECT_CONNECT_TIMEOUT = 2.0
SUSPECT_WINDOW = 60.0
#: seconds data sent to a node may stay unacknowledged by its kernel before the
#: connection fails (``TCP_USER_TIMEOUT``): a node cut off or powered off while a kept
#: connection to it is idle gets the next request on it, and without this the call
#: would wait until its own deadline (minutes); a busy node's kernel still
#: acknowledges at once, and five retransmissions fit (at the shortest
#: retransmission timeout, 0.2 s, they go 0.2, 0.6, 1.4, 3.0 and 6.2 s after the data)
UNACKED_TIMEOUT = 10.0
#: the shortest connect timeout (suspect or not) ``--rpc-timeout-scale`` gives: a lost
#: SYN is sent again after 1 s, and one loss must still fit
MIN_CONNECT_TIMEOUT = 1.5
#: the shortest handshake timeout ``--rpc-timeout-scale`` gives: the handshake of a
#: node daemon on a loaded host (a forked child, then TLS) must still fit
MIN_HANDSHAKE_TIMEOUT = 5.0
#: the shortest unacknowledged-data timeout ``--rpc-timeout-scale`` gives
MIN_UNACKED_TIMEOUT = 3.0
_KEEPALIVE_TIMEOUT = re.compile(r"timeout=(\d+)")


class Transport(Protocol):
    """What RpcRunner needs: send one procedure's body to one node."""

    def post(self, address: str, port: int, procedure: str, body: bytes,
             timeout: float) -> bytes: ...


#: the node RPC client's TLS context (:func:`ganeti.http.tls.node_client_context`)
make_client_context = node_client_context


def _bounded(limit: float, deadline: float) -> float:
    """``limit`` seconds, or fewer if ``deadline`` comes first (TimeoutError once passed)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("deadline passed")
    return min(limit, remaining)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, client.NoResponse):
        return str(exc)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failure: {exc.reason or exc}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer (TLS refused?)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"


class SuspectNodes:
    """The nodes whose last connection failed recently, and the connect timeout each gets.

    Thread-safe; ``clock`` is monotonic seconds (injected by tests);
    ``connect`` and ``suspect`` are the two timeouts (default
    :data:`CONNECT_TIMEOUT` and :data:`SUSPECT_CONNECT_TIMEOUT`).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, *,
                 connect: float = CONNECT_TIMEOUT,
                 suspect: float = SUSPECT_CONNECT_TIMEOUT) -> None:
        self._clock = clock
        self._connect = connect
        self._suspect = min(suspect, connect)
        self._lock = threading.Lock()
        self._failed: dict[tuple[str, int], float] = {}

    def connect_timeout(self, key: tuple[str, int]) -> float:
        """The suspect timeout (:data:`SUSPECT_CONNECT_TIMEOUT`) for a node that
        failed within :data:`SUSPECT_WINDOW` seconds, else the connect timeout
        (:data:`CONNECT_TIMEOUT`)."""
        with self._lock:
            since = self._failed.get(key)
            if since is None:
                return self._connect
            if self._clock() - since > SUSPECT_WINDOW:
                del self._failed[key]
                return self._connect
        return self._suspect

    def failed(self, key: tuple[str, int]) -> None:
        """A connection to ``key`` timed out or found no route."""
        with self._lock:
            self._failed[key] = self._clock()

    def succeeded(self, key: tuple[str, int]) -> None:
        """A connection to ``key`` was made: it is not suspect any more."""
        if key in self._failed:
            with self._lock:
                self._failed.pop(key, None)


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` of a connect says the node did not answer at all (not a refusal)."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH,
                                                      errno.EHOSTDOWN)


class _Kept(NamedTuple):
    """An idle kept connection and until when it may be reused."""

    tls: ssl.SSLSocket
    expires: float


def _error_text(data: bytes) -> str:
    """The message of a ``[false, message]`` error body, else the raw text."""
    try:
        decoded = serializer.loads(data)
    except errors.SerializationError:
        decoded = None
    if isinstance(decoded, list) and len(decoded) == 2 and isinstance(decoded[1], str):
        return decoded[1]
    return data.decode("utf-8", "replace").strip()[:500]


class HttpsTransport:
    """Node RPC over HTTPS with the cluster certificate.

    The SSL context is built once (loading the certificate costs more than
    a handshake) and shared by all threads.  The TLS session of the last
    connection to each node is kept and offered again (session
    resumption): a fan-out to 200 nodes then costs 200 abbreviated
    handshakes instead of 200 full ones (the node daemon may refuse and do
    a full handshake; nothing else changes).  With ``keepalive`` (the
    master daemon's transport), read-only procedures reuse kept
    connections (see the module docstring).  ``timeout_scale``
    (``--rpc-timeout-scale``) scales the connect, handshake and
    unacknowledged-data timeouts, never below :data:`MIN_CONNECT_TIMEOUT`,
    :data:`MIN_HANDSHAKE_TIMEOUT` and :data:`MIN_UNACKED_TIMEOUT`.
    Thread-safe.
    """

    def __init__(self, cert_file: str, ca_file: str | None = None, *,
                 context: ssl.SSLContext | None = None,
                 source_address: str | None = None, keepalive: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 timeout_scale: float = 1.0) -> None:
        self.context = context or make_client_context(cert_file, ca_file)
        self._sessions: dict[tuple[str, int], ssl.SSLSession] = {}
        #: connections are made from this local address (default
        #: ``$GANETI_SOURCE_ADDRESS``, else the kernel's choice)
        self.source = (source_address if source_address is not None
                       else os.environ.get(constants.ENV_SOURCE_ADDRESS) or None)
        self.keepalive = keepalive
        self._clock = clock
        self._lock = threading.Lock()
        #: seconds a TLS handshake may take (:data:`HANDSHAKE_TIMEOUT`, scaled)
        self.handshake_timeout = defs.scaled_timeout(HANDSHAKE_TIMEOUT, timeout_scale,
                                                     MIN_HANDSHAKE_TIMEOUT)
        #: seconds sent data may stay unacknowledged (:data:`UNACKED_TIMEOUT`, scaled)
        self.unacked_timeout = defs.scaled_timeout(UNACKED_TIMEOUT, timeout_scale,
                                                   MIN_UNACKED_TIMEOUT)
        #: nodes whose last connection failed: their next ones get a shorter connect timeout
        self.suspects = SuspectNodes(
            clock,
            connect=defs.scaled_timeout(CONNECT_TIMEOUT, timeout_scale, MIN_CONNECT_TIMEOUT),
            suspect=defs.scaled_timeout(SUSPECT_CONNECT_TIMEOUT, timeout_scale,
                                        MIN_CONNECT_TIMEOUT))
        self._kept: dict[tuple[str, int], list[_Kept]] = {}
        self._next_sweep = 0.0

    def post(self, address: str, port: int, procedure: str, body: bytes,
             timeout: float) -> bytes:
        """POST ``body`` to ``https://address:port/procedure``; the 200 reply body.

        ``timeout`` bounds every socket operation and the whole exchange; a new
        connection must also be made within :data:`CONNECT_TIMEOUT` and its TLS
        handshake done within :data:`HANDSHAKE_TIMEOUT` (both scaled by
        ``timeout_scale``: a cut-off or hung node fails then, not at the end of
        a long call's timeout), and data sent on any connection, a kept one
        included, must be acknowledged by the node's kernel within
        :data:`UNACKED_TIMEOUT` (scaled): when a node was cut off while a
        kept connection to it was idle, that connection ends then, the one
        new connection tried instead fails within the connect timeout, and
        the node is suspect.
        """
        deadline = time.monotonic() + timeout
        name = procedure.split("?", 1)[0]
        keep = self.keepalive and (name in defs.KEEPALIVE_CALLS
                                   or name in defs.KEEPALIVE_WRITE_CALLS)
        headers = {"Host": f"{address}:{port}", "Content-Type": "application/json",
                   "User-Agent": USER_AGENT}
        request = framing.build_request("POST", f"/{procedure}", headers, body, keep_alive=keep,
                                        announce_keep_alive=keep)
        try:
            response = None
            kept = self._take(address, port) if keep else None
            if kept is not None:
                try:
                    response = self._round_trip(kept, address, port, request, deadline, keep,
                                                reused=True)
                except client.StaleConnection:
                    response = None
            if response is None:
                tls = self._connect(address, port, deadline)
                response = self._round_trip(tls, address, port, request, deadline, keep)
        except OSError as exc:
            raise errors.RpcTransportError(_reason(exc)) from exc
        if response.status != 200:
            raise errors.RemoteError(f"HTTP {response.status} {response.reason}:"
                                     f" {_error_text(response.body)}")
        return response.body

    def close(self) -> None:
        """Close the idle kept connections."""
        with self._lock:
            kept, self._kept = self._kept, {}
        for conns in kept.values():
            for conn in conns:
                conn.tls.close()

    def _take(self, address: str, port: int) -> ssl.SSLSocket | None:
        """An idle kept connection to the node that may still be used, if any."""
        now = self._clock()
        expired = []
        found = None
        with self._lock:
            conns = self._kept.get((address, port), [])
            while conns:
                conn = conns.pop()
                if conn.expires > now:
                    found = conn.tls
                    break
                expired.append(conn.tls)
        for tls in expired:
            tls.close()
        return found

    def _give_back(self, tls: ssl.SSLSocket, address: str, port: int,
                   response: framing.Response) -> None:
        """Keep ``tls`` for the next read-only call (if the node keeps it and there is room)."""
        idle = KEEPALIVE_IDLE
        match = _KEEPALIVE_TIMEOUT.search(response.headers.get("keep-alive", ""))
        if match:
            idle = min(idle, int(match.group(1)) - 1.0)
        now = self._clock()
        stale: list[ssl.SSLSocket] = []
        kept = False
        with self._lock:
            if now >= self._next_sweep:   # nodes not called again (removed ones too)
                self._next_sweep = now + KEEPALIVE_IDLE
                for key, conns in list(self._kept.items()):
                    stale.extend(c.tls for c in conns if c.expires <= now)
                    conns[:] = [c for c in conns if c.expires > now]
                    if not conns:
                        del self._kept[key]
            conns = self._kept.setdefault((address, port), [])
            if idle > 0 and len(conns) < KEEPALIVE_PER_NODE:
                conns.append(_Kept(tls, now + idle))
                kept = True
        for old in stale:
            old.close()
        if not kept:
            tls.close()

    def _connect(self, address: str, port: int, deadline: float) -> ssl.SSLSocket:
        """A new TLS connection to the node (resuming its last session), made within
        :data:`CONNECT_TIMEOUT` (:data:`SUSPECT_CONNECT_TIMEOUT` for a node that
        failed recently) and :data:`HANDSHAKE_TIMEOUT` (both scaled), and by ``deadline``."""
        key = (address, port)
        try:
            tls = client.connect(address, port, self.context,
                                 _bounded(self.suspects.connect_timeout(key), deadline),
                                 handshake_timeout=_bounded(self.handshake_timeout, deadline),
                                 source=self.source, session=self._sessions.get(key),
                                 unacked_timeout=self.unacked_timeout)
        except OSError as exc:
            if _unreachable(exc):
                self.suspects.failed(key)
            raise
        self.suspects.succeeded(key)
        return tls

    def _round_trip(self, tls: ssl.SSLSocket, address: str, port: int, request: bytes,
                    deadline: float, keep: bool, *, reused: bool = False) -> framing.Response:
        """Send ``request`` on ``tls``, read the reply; the connection is closed or kept.

        On a ``reused`` connection, raises :class:`client.StaleConnection` when it
        ended before any byte of the reply (:func:`ganeti.http.client.exchange`).
        """
        try:
            response, parser = client.exchange(tls, request, deadline=deadline,
                                               max_body_size=MAX_RESPONSE_SIZE, reused=reused)
        except errors.HttpError as exc:
            tls.close()
            raise errors.RpcTransportError(f"malformed reply: {exc}") from exc
        except BaseException:
            tls.close()
            raise
        if not reused:
            # a kept connection's session was recorded after its first reply;
            # reading it again costs the lanes of the job-file stream a
            # session object per request (doc/design/replication.md,
            # "Quorum write, sixth round")
            session = tls.session
            if session is not None and session.has_ticket:
                self._sessions[(address, port)] = session
        if keep and response.keep_alive and not parser.buffered:
            self._give_back(tls, address, port, response)
        else:
            tls.close()
        return response


class FunctionTransport:
    """A transport that calls ``fn(address, port, procedure, body, timeout)``.

    The fake for tests: wrap a plain function that returns the reply body
    (e.g. ``b'[true, 3000000]'``) or raises an :class:`errors.RpcError`.
    """

    def __init__(self, fn: Callable[[str, int, str, bytes, float], bytes]) -> None:
        self.fn = fn

    def post(self, address: str, port: int, procedure: str, body: bytes,
             timeout: float) -> bytes:
        return self.fn(address, port, procedure, body, timeout)
