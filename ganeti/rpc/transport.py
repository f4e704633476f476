"""HTTPS transport for node RPC: one POST per connection, mutual TLS.

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
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from typing import Callable, Protocol

from ganeti import constants, errors, serializer
from ganeti.http import framing

__all__ = ["Transport", "HttpsTransport", "FunctionTransport", "make_client_context",
           "MAX_RESPONSE_SIZE", "USER_AGENT"]

MAX_RESPONSE_SIZE = 128 * 1024 * 1024
USER_AGENT = f"Ganeti RPC client {constants.RELEASE_VERSION}"


class Transport(Protocol):
    """What RpcRunner needs: send one procedure's body to one node."""

    def post(self, address: str, port: int, procedure: str, body: bytes,
             timeout: float) -> bytes: ...


def make_client_context(cert_file: str, ca_file: str | None = None) -> ssl.SSLContext:
    """A TLS >= 1.2 client context presenting ``cert_file`` and trusting ``ca_file``.

    ``ca_file`` defaults to ``cert_file`` (the shared cluster certificate).
    Raises :class:`errors.CertificateError` when the files cannot be loaded.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_cert_chain(cert_file)
        ctx.load_verify_locations(cafile=ca_file or cert_file)
    except (OSError, ssl.SSLError) as exc:
        raise errors.CertificateError(f"Cannot load the cluster certificate {cert_file}: {exc}") from exc
    return ctx


_RECV_SIZE = 256 * 1024


def _set_remaining(sock: ssl.SSLSocket, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("deadline passed")
    sock.settimeout(remaining)


def _reason(exc: BaseException) -> str:
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
    a full handshake; nothing else changes).
    """

    def __init__(self, cert_file: str, ca_file: str | None = None, *,
                 context: ssl.SSLContext | None = None,
                 source_address: str | None = None) -> None:
        self.context = context or make_client_context(cert_file, ca_file)
        self._sessions: dict[tuple[str, int], ssl.SSLSession] = {}
        #: connections are made from this local address (default
        #: ``$GANETI_SOURCE_ADDRESS``, else the kernel's choice)
        self.source = (source_address if source_address is not None
                       else os.environ.get(constants.ENV_SOURCE_ADDRESS) or None)

    def post(self, address: str, port: int, procedure: str, body: bytes,
             timeout: float) -> bytes:
        """POST ``body`` to ``https://address:port/procedure``; the 200 reply body.

        ``timeout`` bounds every socket operation and the whole exchange.
        """
        deadline = time.monotonic() + timeout
        request = framing.build_request(
            "POST", f"/{procedure}", {"Host": f"{address}:{port}",
                                      "Content-Type": "application/json",
                                      "User-Agent": USER_AGENT}, body, keep_alive=False)
        try:
            status, reason, data = self._exchange(address, port, request, timeout, deadline)
        except OSError as exc:
            raise errors.RpcTransportError(_reason(exc)) from exc
        if status != 200:
            raise errors.RemoteError(f"HTTP {status} {reason}: {_error_text(data)}")
        return data

    def _exchange(self, address: str, port: int, request: bytes, timeout: float,
                  deadline: float) -> tuple[int, str, bytes]:
        """Send ``request`` on a new TLS connection; ``(status, reason, body)`` of the reply.

        Only moves bytes: :mod:`ganeti.http.framing` parses the reply.
        """
        sock = socket.create_connection((address, port), timeout,
                                        source_address=(self.source, 0) if self.source else None)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.context.wrap_socket(sock, server_hostname=address,
                                           session=self._sessions.get((address, port)))
        except BaseException:
            sock.close()
            raise
        parser = framing.ResponseParser(max_body_size=MAX_RESPONSE_SIZE)
        with tls:
            _set_remaining(tls, deadline)
            tls.sendall(request)
            try:
                while (response := parser.next_response()) is None:
                    _set_remaining(tls, deadline)
                    chunk = tls.recv(_RECV_SIZE)
                    if chunk:
                        parser.feed(chunk)
                    elif parser.head() is None:
                        raise errors.RpcTransportError("connection closed without a reply")
                    else:
                        parser.feed_eof()
            except errors.HttpError as exc:
                raise errors.RpcTransportError(f"malformed reply: {exc}") from exc
            session = tls.session
            if session is not None and session.has_ticket:
                self._sessions[(address, port)] = session
        return response.status, response.reason, response.body


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
