"""ganeti.http.acceptor: the one accept loop, with a recording runner, over real TLS on loopback."""

from __future__ import annotations

import dataclasses
import errno
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ganeti.http import acceptor, tls
from ganeti.http.limits import Limits

pytestmark = pytest.mark.timeout(60)


class _Recorder(acceptor.AcceptLoop):
    """Answers every established connection with its TLS version, in the loop's thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hooks: list[str] = []
        self.served: list[str] = []
        self.ticks = 0

    def run_connection(self, conn: ssl.SSLSocket, address: Any) -> None:
        self.served.append(str(conn.version()))
        conn.sendall(f"{conn.version()}\n".encode())
        self.shutdown_request(conn)

    def loop_started(self) -> None:
        self.hooks.append("started")

    def loop_tick(self, stopping: bool) -> None:
        self.ticks += 1
        if stopping:
            self.hooks.append("last tick")

    def loop_stopped(self) -> None:
        self.hooks.append("stopped")


@pytest.fixture(scope="module")
def pem(tmp_path_factory) -> str:
    from noded_harness import make_cluster_cert
    return make_cluster_cert(tmp_path_factory.mktemp("cert"))


@pytest.fixture
def loop(pem: str) -> Iterator[_Recorder]:
    limits = dataclasses.replace(Limits(), handshake_timeout=0.5)
    srv = _Recorder(("127.0.0.1", 0), tls.rapi_server_context(pem), object, limits=limits)
    thread = threading.Thread(target=srv.serve)
    thread.start()
    yield srv
    srv.shutdown()
    thread.join(10)
    assert not thread.is_alive()
    srv.server_close()


def _read_all(sock: Any) -> bytes:
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_an_established_connection_goes_to_the_runner(loop: _Recorder) -> None:
    with socket.create_connection(loop.server_address, timeout=10) as raw:
        with tls.probe_context().wrap_socket(raw) as conn:
            answer = _read_all(conn)
    assert answer.decode().strip() in ("TLSv1.2", "TLSv1.3")
    assert loop.served == [answer.decode().strip()]
    assert loop.hooks == ["started"]


def test_a_peer_that_is_not_tls_is_closed_and_never_run(loop: _Recorder) -> None:
    with socket.create_connection(loop.server_address, timeout=10) as sock:
        sock.sendall(b"GET /version HTTP/1.0\r\n\r\n")
        assert _read_all(sock) == b""          # a clean close, no answer
    assert loop.served == []
    assert loop.handshakes.failed == 1


def test_a_silent_peer_is_closed_at_the_handshake_deadline(loop: _Recorder) -> None:
    with socket.create_connection(loop.server_address, timeout=10) as sock:
        start = time.monotonic()
        assert _read_all(sock) == b""
        assert time.monotonic() - start < 5     # the 0.5 s deadline, not the read timeout
    assert loop.handshakes.expired == 1 and loop.served == []


def test_shutdown_wakes_the_loop_at_once(pem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acceptor, "_MAX_SLEEP", 600.0)   # only the wake-up can end the wait
    srv = _Recorder(("127.0.0.1", 0), tls.rapi_server_context(pem), object, limits=Limits())
    thread = threading.Thread(target=srv.serve)
    thread.start()
    for _ in range(200):
        if srv.hooks:
            break
        time.sleep(0.01)
    ticks = srv.ticks
    srv.shutdown()                 # returns once the loop has ended
    thread.join(5)
    assert not thread.is_alive()
    assert srv.hooks == ["started", "last tick", "stopped"]
    assert srv.ticks == ticks + 1  # woken by the pipe
    srv.server_close()


def test_shutdown_before_serving_returns_and_serve_then_ends_at_once(pem: str) -> None:
    srv = _Recorder(("127.0.0.1", 0), tls.rapi_server_context(pem), object, limits=Limits())
    srv.shutdown()
    srv.serve()
    assert srv.hooks == ["started", "stopped"]
    srv.server_close()


def test_a_watched_descriptor_calls_back_in_the_loop(loop: _Recorder) -> None:
    rfd, wfd = os.pipe()
    called = threading.Event()

    def readable() -> None:
        os.read(rfd, 10)
        called.set()

    try:
        loop.watch(rfd, readable)
        os.write(wfd, b"x")
        assert called.wait(5)
    finally:
        loop.unwatch(rfd)
        os.close(rfd)
        os.close(wfd)


def test_a_new_context_serves_new_connections(loop: _Recorder, pem: str) -> None:
    other = tls.rapi_server_context(pem)
    loop.tls_context = other
    assert loop.handshakes.context is other
    with socket.create_connection(loop.server_address, timeout=10) as raw:
        with tls.probe_context().wrap_socket(raw) as conn:
            assert _read_all(conn)


def test_a_failed_bind_raises_the_socket_error(pem: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()
        before = len(os.listdir("/proc/self/fd"))
        with pytest.raises(OSError) as info:
            _Recorder(taken, tls.rapi_server_context(pem), object, limits=Limits())
        assert info.value.errno == errno.EADDRINUSE
        assert len(os.listdir("/proc/self/fd")) == before


class _PlainEcho(acceptor.AcceptLoop):
    """A plain loop: echoes the first line back, in the loop's thread."""

    def run_plain_connection(self, sock: socket.socket, address: Any) -> None:
        assert not isinstance(sock, ssl.SSLSocket)
        sock.settimeout(5)
        sock.sendall(b"plain " + sock.recv(100))
        self.shutdown_request(sock)


def test_a_loop_without_a_tls_context_is_plain() -> None:
    srv = _PlainEcho(("127.0.0.1", 0), None, object, limits=Limits())
    assert srv.plain
    with pytest.raises(ValueError):
        srv.tls_context         # noqa: B018 - the property raises
    thread = threading.Thread(target=srv.serve)
    thread.start()
    try:
        with socket.create_connection(srv.server_address, timeout=10) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\n")
            assert _read_all(conn) == b"plain GET / HTTP/1.0\r\n"
    finally:
        srv.shutdown()
        thread.join(10)
        srv.server_close()
