"""ganeti.http.client against a real one-connection TLS server on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from ganeti import errors
from ganeti.http import client, framing, tls


@pytest.fixture(scope="module")
def cert_file(tmp_path_factory) -> str:
    from noded_harness import make_cluster_cert
    return make_cluster_cert(tmp_path_factory.mktemp("cert"))


@pytest.fixture
def serve(cert_file) -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """``serve(fn)``: a TLS server on loopback running ``fn(conn)`` for one connection; its port."""
    threads: list[threading.Thread] = []
    listeners: list[socket.socket] = []

    def start(fn: Callable[[socket.socket], None]) -> int:
        ctx = tls.node_server_context(cert_file)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)
        listeners.append(listener)

        def run() -> None:
            try:
                raw, _ = listener.accept()
                with ctx.wrap_socket(raw, server_side=True) as conn:
                    conn.settimeout(10)
                    fn(conn)
            except OSError:
                pass

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        return listener.getsockname()[1]

    yield start
    for listener in listeners:
        listener.close()
    for thread in threads:
        thread.join(10)


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    for _ in range(100):
        if b"\r\n\r\n" in data:
            break
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_request_sends_one_closing_request_and_reads_the_reply(serve, cert_file) -> None:
    seen: list[bytes] = []

    def answer(conn: socket.socket) -> None:
        seen.append(_read_head(conn))
        conn.sendall(framing.build_response(200, {"Content-Type": "application/json"}, b"2",
                                            keep_alive=False))

    port = serve(answer)
    response = client.request("127.0.0.1", port, tls.node_client_context(cert_file), "GET",
                              "/version", timeout=10)
    assert (response.status, response.body) == (200, b"2")
    assert seen == [b"GET /version HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\n\r\n" % port]


def test_closed_without_reply_is_no_response(serve, cert_file) -> None:
    port = serve(_read_head)
    with pytest.raises(client.NoResponse, match="without a reply"):
        client.request("127.0.0.1", port, tls.node_client_context(cert_file), "GET", "/",
                       timeout=10)


def test_reused_connection_closed_before_reply_is_stale(serve, cert_file) -> None:
    port = serve(_read_head)
    conn = client.connect("127.0.0.1", port, tls.node_client_context(cert_file), 10)
    with conn, pytest.raises(client.StaleConnection):
        client.exchange(conn, framing.build_request("POST", "/x", keep_alive=True), reused=True)


def test_truncated_body_is_an_http_error(serve, cert_file) -> None:
    def answer(conn: socket.socket) -> None:
        _read_head(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")

    port = serve(answer)
    with pytest.raises(errors.HttpError):
        client.request("127.0.0.1", port, tls.node_client_context(cert_file), "GET", "/",
                       timeout=10)


def test_deadline_bounds_the_wait_for_a_reply(serve, cert_file) -> None:
    release = threading.Event()

    def stall(conn: socket.socket) -> None:
        _read_head(conn)
        release.wait(10)

    port = serve(stall)
    conn = client.connect("127.0.0.1", port, tls.node_client_context(cert_file), 10)
    try:
        with pytest.raises(TimeoutError):
            client.exchange(conn, framing.build_request("POST", "/x"),
                            deadline=time.monotonic() + 0.2)
    finally:
        release.set()
        conn.close()


def test_probe_fails_on_a_closed_port(cert_file) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(OSError):
        client.probe("127.0.0.1", port, tls.probe_context(), 2.0)
