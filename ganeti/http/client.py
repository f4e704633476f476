"""The HTTPS client: connect, send one request, read its response (doc/protocols/rpc.md, "The HTTP package").

Every HTTPS client of the product goes through here: node RPC
(:mod:`ganeti.rpc.transport`, which adds kept connections and TLS
session reuse on top), the import/export worker's disk streams, the
watcher's RAPI probe and bootstrap's wait for the RAPI daemon.  The
bytes are built and parsed by :mod:`ganeti.http.framing`; this module
only moves them::

    conn = client.connect("192.0.2.1", 1811, context, timeout=10.0)
    response = client.exchange(conn, framing.build_request("POST", "/version", ...),
                               deadline=time.monotonic() + 10.0)

Errors are the socket's: :class:`OSError` (refused, reset, TLS failures
as :class:`ssl.SSLError`, :class:`TimeoutError` past the deadline) and
:class:`errors.HttpError` for a malformed response; callers translate
them into their own error once (the RPC transport into
:class:`errors.RpcTransportError`).  Every socket gets ``TCP_NODELAY``:
without it a request costs ~46 ms (Nagle plus delayed ACK) instead of
~1.6 ms on loopback.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Mapping

from ganeti.http import framing

__all__ = ["connect", "exchange", "read_response", "request", "probe", "StaleConnection",
           "NoResponse", "RECV_SIZE"]

#: bytes asked of the socket per read
RECV_SIZE = 256 * 1024


class NoResponse(ConnectionError):
    """The peer closed the connection without sending a response (not a reused one)."""


class StaleConnection(Exception):
    """A reused connection ended before any byte of the response: the peer closed it
    meanwhile (not an error of the request; the caller may send it again)."""


def connect(address: str, port: int, context: ssl.SSLContext, timeout: float, *,
            handshake_timeout: float | None = None,
            source: str | None = None, session: ssl.SSLSession | None = None,
            server_hostname: str | None = None,
            unacked_timeout: float | None = None) -> ssl.SSLSocket:
    """A TLS connection to ``address:port`` with the handshake done.

    ``timeout`` bounds the connect and (unless ``handshake_timeout`` is
    given) each step of the handshake, and stays the socket's timeout;
    ``source`` is the local address to connect from; ``session`` a TLS
    session to resume.  With ``unacked_timeout`` (seconds) the kernel ends
    the connection when data sent on it stays unacknowledged that long
    (``TCP_USER_TIMEOUT``; a TLS read then finds it closed): a peer cut off
    or powered off, not a slow one.  Raises :class:`OSError`.
    """
    sock = socket.create_connection((address, port), timeout,
                                    source_address=(source, 0) if source else None)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if unacked_timeout is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                            max(1, int(unacked_timeout * 1000)))
        if handshake_timeout is not None:
            sock.settimeout(handshake_timeout)
        return context.wrap_socket(sock, server_hostname=server_hostname or address,
                                   session=session)
    except BaseException:
        sock.close()
        raise


def _set_remaining(sock: socket.socket, deadline: float | None,
                   clock: Callable[[], float]) -> None:
    """Give ``sock`` the time left until ``deadline`` (None: leave its timeout)."""
    if deadline is None:
        return
    remaining = deadline - clock()
    if remaining <= 0:
        raise TimeoutError("deadline passed")
    sock.settimeout(remaining)


def read_response(sock: socket.socket, parser: framing.ResponseParser, *,
                  deadline: float | None = None, reused: bool = False,
                  clock: Callable[[], float] = time.monotonic) -> framing.Response:
    """Feed ``parser`` from ``sock`` until a whole response is in.

    Each read waits at most until ``deadline`` (None: the socket's own
    timeout).  On a ``reused`` connection, raises :class:`StaleConnection`
    when it ends (or is reset) before any byte; a connection that ends
    before the head raises :class:`NoResponse`; one that ends in
    the body, :class:`errors.HttpError` (from the parser).
    """
    while (response := parser.next_response()) is None:
        _set_remaining(sock, deadline, clock)
        try:
            chunk = sock.recv(RECV_SIZE)
        except ConnectionResetError as exc:
            if not reused or parser.buffered or parser.head() is not None:
                raise
            raise StaleConnection() from exc
        if chunk:
            parser.feed(chunk)
        elif parser.head() is None:
            if reused and not parser.buffered:
                raise StaleConnection()
            raise NoResponse("connection closed without a reply")
        else:
            parser.feed_eof()
    return response


def exchange(sock: socket.socket, message: bytes, *, deadline: float | None = None,
             max_body_size: int = framing.DEFAULT_MAX_BODY_SIZE, method: str = "POST",
             reused: bool = False, clock: Callable[[], float] = time.monotonic
             ) -> tuple[framing.Response, framing.ResponseParser]:
    """Send the request ``message`` (its ``method``), read the response; the
    response and its parser (bytes after it stay buffered there).

    The socket is left open: the caller closes or keeps it.  Errors as
    :func:`read_response`; a ``reused`` connection whose send fails is a
    :class:`StaleConnection` too.
    """
    parser = framing.ResponseParser(request_method=method, max_body_size=max_body_size)
    _set_remaining(sock, deadline, clock)
    try:
        sock.sendall(message)
    except (BrokenPipeError, ConnectionResetError) as exc:
        if not reused:
            raise
        raise StaleConnection() from exc
    return read_response(sock, parser, deadline=deadline, reused=reused, clock=clock), parser


def request(address: str, port: int, context: ssl.SSLContext, method: str, target: str, *,
            headers: framing.HeaderItems = (), body: bytes = b"", timeout: float,
            max_body_size: int = framing.DEFAULT_MAX_BODY_SIZE) -> framing.Response:
    """One request on a connection of its own (``Connection: close``); its response.

    ``timeout`` bounds each step (connect, handshake, each read).  Errors
    as :func:`connect` and :func:`read_response`.
    """
    items = headers.items() if isinstance(headers, Mapping) else headers
    all_headers = [("Host", f"{address}:{port}"), *items]
    with connect(address, port, context, timeout) as conn:
        response, _ = exchange(conn, framing.build_request(method, target, all_headers, body,
                                                           keep_alive=False),
                               max_body_size=max_body_size, method=method)
    return response


def probe(address: str, port: int, context: ssl.SSLContext, timeout: float) -> None:
    """Connect and complete a TLS handshake with ``address:port``, then close; raises
    :class:`OSError` when that fails."""
    with connect(address, port, context, timeout):
        pass
