"""noded's own HTTP request parser: malformed request lines and headers get JSON errors."""

from __future__ import annotations

import json
import socket

import pytest

from ganeti import constants
from ganeti.rpc import transport as rpc_transport
from noded_harness import NodedCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with NodedCluster(tmp_path_factory.mktemp("noded-http"), 1) as c:
        yield c


def _exchange(cluster, request: bytes) -> tuple[int, bytes, bytes]:
    """Send raw bytes over TLS; (status, head, body) of the reply read until EOF."""
    node = cluster.nodes[0]
    ctx = rpc_transport.make_client_context(cluster.cert_file)
    with socket.create_connection((node.address, node.port), timeout=10) as raw:
        with ctx.wrap_socket(raw) as tls:
            tls.sendall(request)
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head, body


@pytest.mark.parametrize("request_bytes,status,text", [
    (b"BOGUS\r\n\r\n", 400, "Bad request line"),
    (b"POST /version SPDY/3\r\n\r\n", 400, "Bad request line"),
    (b"POST /version HTTP/1.1\r\nno colon\r\n\r\n", 400, "Bad header line"),
    (b"POST /version HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431, "header lines"),
    (b"POST /version HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n", 431, "too long"),
])
def test_malformed_requests_get_json_errors(cluster, request_bytes: bytes, status: int,
                                            text: str) -> None:
    got, head, body = _exchange(cluster, request_bytes)
    assert got == status
    assert b"Connection: close" in head
    success, message = json.loads(body)
    assert success is False and text in message


def test_header_names_are_case_insensitive(cluster) -> None:
    got, head, body = _exchange(cluster, b"POST /version HTTP/1.1\r\nHost: x\r\n"
                                         b"content-LENGTH: 2\r\n\r\n[]")
    assert got == 200
    assert json.loads(body) == [True, constants.PROTOCOL_VERSION]
    assert b"Server: Ganeti" in head
    # the daemon is still fine afterwards
    res = cluster.runner().call_version(cluster.names)[cluster.names[0]]
    assert res.payload == constants.PROTOCOL_VERSION
