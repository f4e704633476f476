"""noded under connections without credentials: the master's RPCs are still served.

Connections that never complete a TLS handshake (silent, half a
ClientHello, a whole ClientHello and then nothing, plaintext) must not
take the request children; a request
whose body stops short of its Content-Length must not hold a child for
long.  Everything runs on loopback against a real ganeti-noded.
"""

from __future__ import annotations

import os
import socket
import ssl
import sys

import pytest

from ganeti import constants
from ganeti.rpc import transport as rpc_transport

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host_helpers import raise_fd_limit, skip_unless  # noqa: E402
from noded_harness import NodedCluster  # noqa: E402

pytestmark = pytest.mark.timeout(180)

SILENT = 500
HALF_HELLO = 40
#: a whole ClientHello, then nothing: the handshake stalls
FULL_HELLO = 60
PLAINTEXT = 20
#: the RPC's own timeout: the master's call must be answered within it
RPC_TIMEOUT = 2.0




def _client_hello(cert_file: str) -> bytes:
    """The bytes of a real ClientHello (from a client over memory BIOs)."""
    ctx = rpc_transport.make_client_context(cert_file)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_side=False)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


@pytest.fixture
def cluster(tmp_path):
    # the daemon inherits the limit; it also raises its own soft limit
    skip_unless(raise_fd_limit(4 * (SILENT + HALF_HELLO + FULL_HELLO + PLAINTEXT) + 256))
    with NodedCluster(tmp_path, 1) as c:
        yield c


def _open(cluster, count: int, first_bytes: bytes = b"") -> list[socket.socket]:
    node = cluster.nodes[0]
    socks = []
    for _ in range(count):
        sock = socket.create_connection((node.address, node.port), timeout=10)
        if first_bytes:
            sock.sendall(first_bytes)
        socks.append(sock)
    return socks


def test_master_served_while_500_connections_send_nothing(cluster) -> None:
    node = cluster.nodes[0]
    hello = _client_hello(cluster.cert_file)
    attackers: list[socket.socket] = []
    try:
        attackers += _open(cluster, SILENT)
        attackers += _open(cluster, HALF_HELLO, hello[:len(hello) // 2])
        attackers += _open(cluster, FULL_HELLO, hello)
        attackers += _open(cluster, PLAINTEXT, b"POST /version HTTP/1.1\r\nContent-Length: 9\r\n\r\n[")
        runner = cluster.runner(timeouts={"urgent": RPC_TIMEOUT})
        for _ in range(10):
            res = runner.call_version([node.name])[node.name]
            assert not res.failed, res.fail_msg
            assert res.payload == constants.PROTOCOL_VERSION
        # the silent ones are still connected (they cost the daemon no child)
        assert len(node.request_children()) < 64
        silent = attackers[0]
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.recv(1)
    finally:
        for sock in attackers:
            sock.close()
    assert node.alive()


def test_silent_connection_closed_after_the_handshake_timeout(cluster) -> None:
    (sock,) = _open(cluster, 1)
    try:
        sock.settimeout(30)   # the old daemon waited 60 s for a ClientHello
        assert sock.recv(10) == b""
    finally:
        sock.close()


def test_short_body_does_not_hold_a_child(cluster) -> None:
    node = cluster.nodes[0]
    ctx = rpc_transport.make_client_context(cluster.cert_file)
    with socket.create_connection((node.address, node.port), timeout=10) as raw:
        with ctx.wrap_socket(raw) as tls:
            tls.sendall(b"POST /version HTTP/1.1\r\nContent-Length: 100\r\n\r\n[")
            tls.settimeout(30)   # the old child waited 60 s for the rest
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
    # closed without an answer (the request never arrived whole)
    assert data == b""
    res = cluster.runner(timeouts={"urgent": RPC_TIMEOUT}).call_version([node.name])[node.name]
    assert res.payload == constants.PROTOCOL_VERSION
