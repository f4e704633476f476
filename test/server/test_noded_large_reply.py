"""A large reply (a disk chunk) reaches a master that reads it slower than the request timeout.

The request timeout bounds each piece of the reply, not the whole of it
(ganeti.http.sending): in CI a master in a virtual node read a 5.6 MB
``blockdev_read_chunk`` reply for longer than 5 s and saw the connection
close in the middle of the body.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from ganeti.rpc import transport
from ganeti.server import noded

SIZE = 6 * 1024 * 1024


@pytest.fixture
def server(tmp_path):
    from noded_harness import make_cluster_cert, make_node_root
    cert = make_cluster_cert(tmp_path / "cert")
    paths = make_node_root(tmp_path / "node", cert)
    srv = noded.NodedServer("127.0.0.1", 0, noded.make_server_context(cert), paths,
                            "node1.example.com", spare_children=0, request_timeout=0.5)
    srv.cert_file = cert
    try:
        yield srv
    finally:
        srv.server_close()


def test_a_slow_reader_gets_the_whole_reply(server, monkeypatch) -> None:
    monkeypatch.setattr(noded.backend, "get_function", lambda name: lambda ctx: "z" * SIZE)
    ours, theirs = socket.socketpair()
    ctx = transport.make_client_context(server.cert_file)
    received = bytearray()

    def client() -> None:
        with ctx.wrap_socket(theirs, server_hostname="node1.example.com") as sock:
            sock.sendall(b"POST /version HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: 2\r\n\r\n[]")
            while data := sock.recv(64 * 1024):
                received.extend(data)
                time.sleep(0.01)     # 6 MiB take >= 1 s: twice the request timeout

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    ours.settimeout(10)
    try:
        server.finish_request(ours, ("127.0.0.1", 0))
    finally:
        ours.close()
        thread.join(30)
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert json.loads(body) == [True, "z" * SIZE]
