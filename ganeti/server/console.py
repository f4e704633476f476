"""Consoles in the browser: the node's console pipe and the master's broker.

Two ends of one path (doc/protocols/rpc.md, "The console stream";
doc/rapi.md, "Consoles"):

* **On the node** (:func:`serve_node_console`, run by ``ganeti-noded`` in
  the forked child of the connection): ``POST
  /console_stream?instance=NAME&hypervisor=HV&kind=KIND`` with
  ``Connection: Upgrade`` and ``Upgrade: ganeti-console``, on the node
  RPC's mutually authenticated TLS (the cluster certificate on both ends,
  as every node RPC).  The child connects to the instance's console of
  that kind (:data:`ganeti.rapi.consoletokens.KINDS`; ``serial`` when
  absent): the serial console's UNIX socket
  (:meth:`ganeti.hypervisor.base.BaseHypervisor.serial_console_socket`) or
  the VNC server on the node's own address
  (:meth:`~ganeti.hypervisor.base.BaseHypervisor.vnc_console_address`),
  answers ``101 Switching Protocols`` and from then on the TLS connection
  is a raw byte pipe to that socket, both ways (for VNC the RFB protocol,
  which the broker carries unchanged).  A failure before that is
  the usual ``200 [false, message]``.  A VNC server with TLS (kvm
  ``vnc_tls``: :meth:`~ganeti.hypervisor.base.BaseHypervisor.vnc_console_tls`)
  is the exception: the child speaks VeNCrypt to it and plain RFB to the
  browser (:mod:`ganeti.http.rfb`, driven by :func:`open_vnc_tls` before
  the ``101``, then :func:`finish_vnc_handshake`), and pipes the bytes
  after the handshake.  The pipe ends when either side
  closes, after :data:`NODE_LIFETIME`, or when the node daemon reclaims
  the child's request slot (it needs the slot for RPC, or it stops).
* **On the master** (:func:`open_node_console` and :func:`relay_websocket`,
  run by ``ganeti-rapi`` in a thread taken out of its worker pool): the
  broker opens that pipe on the instance's primary node and relays it to
  the browser's WebSocket (:mod:`ganeti.http.websocket`): console bytes go
  out as binary messages, text and binary messages come in as bytes; pings
  are answered.  At most :data:`ganeti.rapi.consoleslots.PER_INSTANCE`
  consoles of one instance and :data:`~ganeti.rapi.consoleslots.TOTAL` in
  all are open at once (a 503 beyond).  It ends when either side closes, after
  :data:`BROKER_LIFETIME`, at the daemon's stop, or as soon as the
  credentials that made the console token no longer hold (checked every
  second, as the event stream does).

The node's console port is never exposed: browsers reach RAPI only, and
only the master holds the key the node daemon asks for.  Each relay is
one thread (or child) with one ``select`` loop over both sockets; writes
block, bounded by :data:`WRITE_TIMEOUT`.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from ganeti import constants, errors, serializer
from ganeti.http import client, framing, rfb, websocket
from ganeti.http.tls import node_client_context, vnc_client_context
from ganeti.hypervisor import base as hvbase
from ganeti.rapi import auth, consoleslots, consoletokens, sessions
from ganeti.utils import io as utils_io
from ganeti.utils import unixsock

__all__ = ["PROCEDURE", "UPGRADE", "NODE_LIFETIME", "BROKER_LIFETIME", "WRITE_TIMEOUT",
           "serve_node_console", "open_node_console", "relay_bytes", "relay_websocket",
           "serve_browser", "token_issuer", "read_vnc_password", "node_tls",
           "HANDSHAKE_TIMEOUT", "open_vnc_tls", "finish_vnc_handshake"]

logger = logging.getLogger(__name__)

#: the node daemon's path of the console stream (not a row of rpc.defs: it is not a call)
PROCEDURE = "console_stream"
#: the protocol the node's connection is upgraded to
UPGRADE = "ganeti-console"
#: seconds a console pipe lasts at most (node side; the broker's bound is the same)
NODE_LIFETIME = 12 * 3600.0
BROKER_LIFETIME = NODE_LIFETIME
#: seconds one write may wait for the peer to take data
WRITE_TIMEOUT = 10.0
#: how often the loops look at their stop conditions (seconds)
TICK = 1.0
#: seconds the RFB handshake of a VNC server with TLS may take, on each side (the
#: browser's includes a person typing the VNC password when the page has none)
HANDSHAKE_TIMEOUT = 120.0
#: the largest message a browser may send (keystrokes, a paste)
MAX_INPUT = 64 * 1024
_CHUNK = 64 * 1024


def _head(first: str, headers: list[tuple[str, str]]) -> bytes:
    """An HTTP head with ``Connection: Upgrade`` (which :mod:`framing`'s builders
    manage themselves); the values are ours, never a peer's."""
    lines = [first, *(f"{k}: {v}" for k, v in headers), "Connection: Upgrade",
             f"Upgrade: {UPGRADE}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _readable(socks: list[Any], timeout: float) -> list[Any]:
    """The sockets with data: TLS records already decrypted first, else ``select``."""
    pending = [s for s in socks if isinstance(s, ssl.SSLSocket) and s.pending()]
    if pending:
        return pending
    return select.select(socks, [], [], timeout)[0]


def relay_bytes(a: Any, b: Any, initial: bytes = b"", *, lifetime: float = NODE_LIFETIME,
                stop: Callable[[], bool] = lambda: False,
                clock: Callable[[], float] = time.monotonic) -> str:
    """Copy bytes both ways between sockets ``a`` and ``b`` (``initial`` first to ``b``)
    until one closes, ``stop()`` holds or ``lifetime`` passes; why it ended."""
    end = clock() + lifetime
    for sock in (a, b):
        sock.settimeout(WRITE_TIMEOUT)
    try:
        if initial:
            b.sendall(initial)
        while True:
            if stop():
                return "stopped"
            if clock() >= end:
                return "lifetime"
            for sock in _readable([a, b], TICK):
                data = sock.recv(_CHUNK)
                if not data:
                    return "closed"
                (b if sock is a else a).sendall(data)
    except (OSError, ssl.SSLError) as exc:
        return f"broken: {exc}"


# --- the node side ---------------------------------------------------------------------

def _connect_console(ctx: Any, name: str, hypervisor: str,
                     kind: str) -> tuple[socket.socket, rfb.Bridge | None]:
    """A socket connected to ``name``'s console of ``kind`` (the serial console's
    UNIX socket, or the VNC server's TCP port on this node; for a VNC server
    with TLS the TLS socket, with the handshake's :class:`rfb.Bridge` waiting
    for the browser).  Raises :class:`errors.GanetiError` or :class:`OSError`."""
    from ganeti.backend.instance import hypervisor_for
    if hypervisor not in constants.HYPER_TYPES:
        raise errors.HypervisorError(f"Unknown hypervisor {hypervisor[:40]!r}")
    if kind not in consoletokens.KINDS:
        raise errors.HypervisorError(f"Unknown console kind {kind[:20]!r}")
    hv = hypervisor_for(ctx, hypervisor)
    if name not in hv.list_instances():
        raise errors.HypervisorError(f"Instance {name[:80]!r} is not running here")
    if kind == consoletokens.KIND_VNC:
        address = hv.vnc_console_address(name)
        if address is None:
            raise errors.HypervisorError(f"Instance {name} has no VNC console")
        tls = hv.vnc_console_tls(name)
        sock = socket.create_connection(address, timeout=5.0)
        if tls is None:
            return sock, None
        try:
            return open_vnc_tls(sock, tls)
        except BaseException:
            sock.close()
            raise
    path = hv.serial_console_socket(name)
    if path is None:
        raise errors.HypervisorError(f"Instance {name} has no serial console")
    console = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        console.settimeout(5.0)
        unixsock.connect(console, path)   # a path of any length
    except OSError:
        console.close()
        raise
    return console, None


def open_vnc_tls(sock: socket.socket, tls: hvbase.VncTls, *, timeout: float = HANDSHAKE_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic
                 ) -> tuple[ssl.SSLSocket, rfb.Bridge]:
    """The VNC server's side of the handshake on ``sock`` (connected to it): RFB,
    VeNCrypt, TLS (:func:`vnc_client_context` with ``tls``'s files), up to its
    challenge or its SecurityResult; the TLS socket and the bridge, which now
    waits for the browser.  Raises :class:`errors.RfbError` (the server's
    handshake), :class:`errors.CertificateError` or :class:`OSError`."""
    bridge = rfb.Bridge(rfb.X509_SUBTYPES if tls.ca_file else rfb.ANON_SUBTYPES)
    context = vnc_client_context(tls.ca_file, tls.client_cert, tls.client_key)
    end = clock() + timeout
    conn: Any = sock
    while bridge.state not in rfb.CLIENT_PHASE:
        if bridge.state == rfb.START_TLS:
            try:
                conn = context.wrap_socket(sock)
            except ssl.SSLError as exc:
                raise errors.RfbError(f"TLS with the VNC server failed: {exc}") from exc
            bridge.tls_started()
            continue
        if clock() >= end:
            raise errors.RfbError("The VNC server's handshake took too long")
        data = conn.recv(_CHUNK)
        if not data:
            raise errors.RfbError("The VNC server closed the connection in its handshake")
        bridge.receive_server(data)
        conn.sendall(bridge.server_output())
    if not isinstance(conn, ssl.SSLSocket):
        raise errors.ProgrammerError("a VNC handshake past its TLS without TLS")
    return conn, bridge


def finish_vnc_handshake(browser: Any, server: Any, bridge: rfb.Bridge, initial: bytes = b"",
                         *, timeout: float = HANDSHAKE_TIMEOUT,
                         stop: Callable[[], bool] = lambda: False,
                         clock: Callable[[], float] = time.monotonic) -> str | None:
    """The browser's side of the handshake (``initial``: its bytes already read),
    relaying the challenge's response and the result between ``browser`` and
    ``server``; None once done (the bytes beyond it sent on), else why it ended
    (a refusal's RFB failure sent to the browser first)."""
    end = clock() + timeout
    try:
        bridge.receive_client(initial)
        while True:
            browser.sendall(bridge.client_output())
            server.sendall(bridge.server_output())
            if bridge.state == rfb.DONE:
                return None
            if stop():
                return "stopped"
            if clock() >= end:
                return "the VNC handshake took too long"
            for sock in _readable([browser, server], TICK):
                data = sock.recv(_CHUNK)
                if not data:
                    return "closed in the VNC handshake"
                if sock is browser:
                    bridge.receive_client(data)
                else:
                    bridge.receive_server(data)
    except errors.RfbError as exc:
        try:
            browser.sendall(bridge.client_output())
        except (OSError, ssl.SSLError):
            pass
        return f"the VNC handshake failed: {exc}"
    except (OSError, ssl.SSLError) as exc:
        return f"broken in the VNC handshake: {exc}"


def serve_node_console(handler: Any, head: framing.RequestHead,
                       parser: framing.RequestParser, ctx: Any) -> None:
    """Serve ``POST /console_stream`` in a node daemon child (see the module docstring).

    ``handler`` is the node daemon's request handler: its ``request`` (the
    TLS socket), ``server`` (busy flag, reclaim) and ``send_json``; ``ctx``
    the request's :class:`ganeti.backend.context.NodeContext`.
    """
    server = handler.server
    if server.busy_reply:
        handler.send_json(503, [False, "Node daemon busy: too many requests in progress"])
        return
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(head.target).query)
    name = (query.get("instance") or [""])[-1]
    hvname = (query.get("hypervisor") or [""])[-1]
    kind = (query.get("kind") or [consoletokens.KIND_SERIAL])[-1]
    if "upgrade" not in (head.headers.get("connection") or "").lower() or \
            (head.headers.get("upgrade") or "").strip() != UPGRADE:
        handler.send_json(400, [False, f"{PROCEDURE} needs 'Upgrade: {UPGRADE}'"])
        return
    initial = parser.take_after_head()
    try:
        console, bridge = _connect_console(ctx, name, hvname, kind)
    except (errors.GanetiError, OSError) as exc:
        handler.send_json(200, [False, f"Cannot open the {kind[:20]} console of {name[:80]}:"
                                       f" {exc}"])
        return
    tls = handler.request
    try:
        tls.sendall(_head("HTTP/1.1 101 Switching Protocols",
                          [("Server", f"Ganeti {constants.RELEASE_VERSION}")]))
        logger.info("Console (%s) of %s opened for %s", kind, name, handler.client_address[0])
        why = None
        if bridge is not None:
            tls.settimeout(WRITE_TIMEOUT)
            console.settimeout(WRITE_TIMEOUT)
            why = finish_vnc_handshake(tls, console, bridge, initial,
                                       stop=lambda: server.reclaim.requested)
            initial = b""
        if why is None:
            why = relay_bytes(tls, console, initial, lifetime=NODE_LIFETIME,
                              stop=lambda: server.reclaim.requested)
        logger.info("Console (%s) of %s closed: %s", kind, name, why)
    finally:
        console.close()


# --- the master side --------------------------------------------------------------------

def open_node_console(address: str, port: int, context: ssl.SSLContext, instance: str,
                      hypervisor: str, *, kind: str = consoletokens.KIND_SERIAL,
                      timeout: float = 10.0) -> tuple[ssl.SSLSocket, bytes]:
    """The pipe to ``instance``'s console of ``kind`` on the node at ``address``: the
    upgraded TLS socket and the console bytes that came with the ``101``.

    Raises :class:`errors.RpcError` when the node cannot be reached or refuses
    (its message).
    """
    try:
        sock = client.connect(address, port, context, timeout)
    except (OSError, ssl.SSLError) as exc:
        raise errors.RpcTransportError(f"Cannot reach the node daemon at {address}:{port}:"
                                       f" {exc}") from exc
    try:
        target = "/" + PROCEDURE + "?" + urllib.parse.urlencode(
            {"instance": instance, "hypervisor": hypervisor, "kind": kind})
        sock.sendall(_head(f"POST {target} HTTP/1.1", [("Host", address),
                                                       ("Content-Length", "0")]))
        parser = framing.ResponseParser(request_method="POST")
        deadline = time.monotonic() + timeout
        while (head := parser.head()) is None:
            if time.monotonic() > deadline:
                raise errors.RpcTransportError(f"No answer from {address} in time")
            data = sock.recv(_CHUNK)
            if not data:
                raise errors.RpcTransportError(f"{address} closed the console stream")
            parser.feed(data)
        if head.status == 101:
            return sock, parser.take_after_head()
        while (reply := parser.next_response()) is None and not parser.eof:
            data = sock.recv(_CHUNK)
            if data:
                parser.feed(data)
            else:
                parser.feed_eof()
        message = f"HTTP {head.status}"
        if reply is not None:
            try:
                message = str(serializer.loads(reply.body)[1])
            except (errors.SerializationError, IndexError, KeyError, TypeError):
                pass
        raise errors.RemoteError(message)
    except (OSError, ssl.SSLError, errors.HttpError) as exc:
        sock.close()
        raise errors.RpcTransportError(f"Console stream to {address} failed: {exc}") from exc
    except errors.GanetiError:
        sock.close()
        raise


def relay_websocket(browser: Any, node: Any, node_initial: bytes = b"", *,
                    allowed: Callable[[], bool] = lambda: True,
                    stop: Callable[[], bool] = lambda: False,
                    lifetime: float = BROKER_LIFETIME,
                    clock: Callable[[], float] = time.monotonic) -> str:
    """Relay between a browser's WebSocket (already answered ``101``) and a node's
    console pipe until one ends; why it ended.  A close frame (with the reason) is
    sent to the browser whenever the browser did not close first."""
    decoder = websocket.Decoder(masked=True, max_message=MAX_INPUT)
    end = clock() + lifetime
    next_check = clock() + TICK
    for sock in (browser, node):
        sock.settimeout(WRITE_TIMEOUT)

    def close(code: int, why: str) -> str:
        try:
            browser.sendall(websocket.encode_frame(
                websocket.OP_CLOSE, websocket.close_payload(code, why)))
        except (OSError, ssl.SSLError):
            pass
        return why

    def to_browser(data: bytes) -> None:
        browser.sendall(websocket.encode_frame(websocket.OP_BINARY, data))

    try:
        if node_initial:
            to_browser(node_initial)
        while True:
            if stop():
                return close(websocket.CLOSE_GOING_AWAY, "the server stops")
            now = clock()
            if now >= end:
                return close(websocket.CLOSE_NORMAL, "the console's time is up")
            if now >= next_check:
                next_check = now + TICK
                if not allowed():
                    return close(websocket.CLOSE_POLICY, "the credentials are no longer valid")
            for sock in _readable([browser, node], TICK):
                data = sock.recv(_CHUNK)
                if sock is node:
                    if not data:
                        return close(websocket.CLOSE_NORMAL, "the console closed")
                    to_browser(data)
                    continue
                if not data:
                    return "the browser went away"
                decoder.feed(data)
                try:
                    messages = decoder.messages()
                except errors.WebSocketError as exc:
                    return close(exc.code, str(exc))
                for msg in messages:
                    if msg.opcode in (websocket.OP_TEXT, websocket.OP_BINARY):
                        node.sendall(msg.data)
                    elif msg.opcode == websocket.OP_PING:
                        browser.sendall(websocket.encode_frame(websocket.OP_PONG, msg.data))
                    elif msg.opcode == websocket.OP_CLOSE:
                        code, _ = websocket.parse_close(msg.data)
                        close(websocket.CLOSE_NORMAL if code == websocket.CLOSE_NO_STATUS
                              else code, "")
                        return "the browser closed"
    except (OSError, ssl.SSLError) as exc:
        return f"broken: {exc}"


# --- the RAPI daemon's pieces ------------------------------------------------------------

def node_tls(pem: str) -> ssl.SSLContext | None:
    """The node RPC's client context for the broker (None, and a log line, when
    the cluster certificate does not load: no consoles then)."""
    try:
        return node_client_context(pem)
    except (OSError, ssl.SSLError, errors.GanetiError) as exc:
        logger.error("Cannot load the cluster certificate %s (%s): no consoles", pem, exc)
        return None


def token_issuer(tokens: consoletokens.ConsoleTokens, principal: auth.Principal | None,
                 check: Callable[[], auth.Principal | None],
                 slots: consoleslots.ConsoleSlots | None = None
                 ) -> Callable[[str, str], tuple[str, float]]:
    """The maker of one request's console tokens: each bound to an instance and a
    kind of console, to the user, and to ``check`` (the request's credentials,
    checked again while the console is open: a revoked token or an ended
    session closes it).  No token (a 503) while ``slots`` has no console
    free for the instance."""
    allowed = auth.still_holds(check)

    def issue(instance: str, kind: str) -> tuple[str, float]:
        if slots is not None:
            slots.check(instance)
        user = principal.user if principal else "-"
        return tokens.issue(consoletokens.Grant(instance, user, allowed, kind))
    return issue


def read_vnc_password(path: str, within: str | None) -> str | None:
    """The VNC password in ``path`` on this host (``vnc_password_file``, which must
    be on every node, the master too), or None (logged, without the password)
    when it cannot be read.

    The broker hands this password to a browser, so it reads it only from
    a file whose real path (symbolic links resolved) lies under ``within``,
    the cluster's configuration directory (``/etc/ganeti``, where Ganeti
    keeps ``vnc-cluster-password``): a ``vnc_password_file`` set elsewhere
    must not turn a token request into a way to read the first line of any
    file the daemon may read.  ``within`` None: never.
    """
    if within is None:
        return None
    real = os.path.realpath(path)
    base = os.path.realpath(within)
    if os.path.commonpath([base, real]) != base:
        logger.warning("Not handing out the VNC password of %s: it is outside %s",
                       path, within)
        return None
    try:
        return utils_io.read_password_file(real)
    except (OSError, errors.GanetiError) as exc:
        logger.warning("Cannot read the VNC password file %s: %s", path, exc)
        return None


def serve_browser(server: Any, request: consoletokens.ConsoleOpen, head: framing.RequestHead,
                  buffered: int, conn: Any, peer: str, opened: Callable[[str], None]) -> None:
    """Serve ``GET /2/instances/[name]/console/websocket`` on RAPI connection ``conn``.

    Checks the upgrade (:func:`websocket.check_upgrade`) and the ``Origin``
    (when sent: this host only), spends the token (bound to the instance
    and the kind of console), takes a slot of ``server.console_slots``,
    opens the pipe on the primary node, answers ``101`` (naming the
    subprotocol ``binary`` when the browser offered it: noVNC does) (then
    ``opened(user)``) and relays until the end.  The thread leaves the
    server's worker pool first, as an event stream's does.  Raises
    :class:`errors.HttpError` (answered by the caller) before the ``101``:
    400/426 for a bad upgrade, 403 for another origin or a bad token, 503
    for a stopped instance or when too many consoles are open, 502 when
    the node refuses.
    """
    key = websocket.check_upgrade(head.method, head.version, head.headers)
    protocol = websocket.choose_protocol(head.headers.get("sec-websocket-protocol"))
    origin = head.headers.get("origin")
    if origin is not None and not sessions.same_origin(origin, head.headers.get("host")):
        raise errors.HttpError("Permission denied: a console from another origin", 403)
    if buffered:
        raise errors.HttpError("Data before the WebSocket was accepted", 400)
    grant = server.console_tokens.redeem(request.token, request.instance, request.kind)
    if not request.running:
        raise errors.HttpError(f"Instance console unavailable: {request.instance} is"
                               " not running", 503)
    if server.node_tls is None:
        raise errors.HttpError("This server does not broker consoles", 501)
    free = server.console_slots.take(request.instance)
    try:
        try:
            node, initial = open_node_console(request.address, server.noded_port,
                                              server.node_tls, request.instance,
                                              request.hypervisor, kind=request.kind)
        except errors.GanetiError as exc:
            logger.warning("Console (%s) of %s on %s for %s not opened: %s", request.kind,
                           request.instance, request.node, grant.user, exc)
            raise errors.HttpError(f"Cannot open the {request.kind} console of"
                                   f" {request.instance} on {request.node}: {exc}",
                                   502) from exc
        server.pool.detach()
        try:
            extra = [("Sec-WebSocket-Protocol", protocol)] if protocol else None
            conn.sendall(websocket.accept_head(key, extra))
            opened(grant.user)
            logger.info("Console (%s) of %s (on %s) opened by %s from %s", request.kind,
                        request.instance, request.node, grant.user, peer)
            why = relay_websocket(conn, node, initial, allowed=grant.recheck,
                                  stop=server.stopping.is_set)
            logger.info("Console (%s) of %s closed for %s: %s", request.kind,
                        request.instance, grant.user, why)
        finally:
            node.close()
    finally:
        free()
