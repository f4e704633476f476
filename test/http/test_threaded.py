"""ganeti.http.threaded: a line-echo handler on the threaded core over real TLS on loopback."""

from __future__ import annotations

import dataclasses
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ganeti.http import threaded, tls

pytestmark = pytest.mark.timeout(60)


class _LineEcho(socketserver.StreamRequestHandler):
    """Reads one line (within the server's request deadline) and sends it back."""

    deadline_input: threaded.DeadlineReader

    def handle(self) -> None:
        self.deadline_input.arm()
        try:
            line = self.rfile.readline(1024)
        finally:
            self.deadline_input.disarm()
        self.wfile.write(b"echo " + line)


class _Handler(threaded.TlsConnectionMixin, _LineEcho):
    pass


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, int]]:
    from noded_harness import make_cluster_cert
    pem = make_cluster_cert(tmp_path_factory.mktemp("cert"))
    srv = threaded.ThreadedServer(("127.0.0.1", 0), tls.rapi_server_context(pem), _Handler,
                                  limits=dataclasses.replace(threaded.DEFAULT_LIMITS, request_timeout=1.0))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    yield srv.server_address
    srv.shutdown()
    thread.join(10)
    srv.server_close()


def _connect(address: tuple[str, int]) -> ssl.SSLSocket:
    raw = socket.create_connection(address, timeout=10)
    return tls.probe_context().wrap_socket(raw)


def _read_all(conn: ssl.SSLSocket) -> bytes:
    data = b""
    for _ in range(100):
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_a_line_is_answered_over_tls(server) -> None:
    with _connect(server) as conn:
        conn.sendall(b"hello\n")
        assert _read_all(conn) == b"echo hello\n"


def test_a_client_slower_than_the_deadline_is_dropped(server) -> None:
    # half a line, then silence: the 1 s deadline ends the read, nothing is echoed
    with _connect(server) as conn:
        conn.sendall(b"hal")
        assert _read_all(conn) == b""


def test_a_stalled_handshake_holds_no_other_client(server) -> None:
    with socket.create_connection(server, timeout=10) as silent:
        silent.sendall(b"")   # a TCP peer that never starts TLS
        with _connect(server) as conn:
            conn.sendall(b"next\n")
            assert _read_all(conn) == b"echo next\n"


# --- the worker pool ----------------------------------------------------------------------------

def test_the_pool_runs_at_most_its_size_at_once() -> None:
    import time
    pool = threaded.WorkerPool(2, name="t")
    release, lock = threading.Event(), threading.Lock()
    running, peak, done = [0], [0], threading.Semaphore(0)

    def job() -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1
        done.release()

    for _ in range(5):
        pool.submit(job)
    for _ in range(50):             # let the workers pick up what they can
        if running[0] == 2:
            break
        time.sleep(0.02)
    assert running[0] == 2 and pool.workers == 2
    release.set()
    assert all(done.acquire(timeout=10) for _ in range(5))
    assert peak[0] == 2
    pool.shutdown()


def test_a_detached_job_leaves_its_worker_to_others() -> None:
    pool = threaded.WorkerPool(1, name="t")
    hold, ran = threading.Event(), threading.Event()

    def long_lived() -> None:
        pool.detach()
        hold.wait(10)

    pool.submit(long_lived)
    pool.submit(ran.set)            # with one worker, it runs only if the first detached
    assert ran.wait(10)
    hold.set()
    pool.shutdown()


def test_a_pool_needs_a_thread() -> None:
    with pytest.raises(ValueError):
        threaded.WorkerPool(0)


# --- idle kept connections wait in the loop -----------------------------------------------------

class _KeptEcho(socketserver.StreamRequestHandler):
    """Echoes lines on a kept connection; between lines it parks the connection."""

    deadline_input: threaded.DeadlineReader
    may_park: Any

    def handle(self) -> None:
        data = bytearray()
        chunk = bytearray(1024)
        while True:
            while b"\n" not in data:
                self.deadline_input.arm()
                try:
                    count = self.deadline_input.readinto(chunk)
                finally:
                    self.deadline_input.disarm()
                if not count:
                    return
                data += chunk[:count]
            line, _, rest = bytes(data).partition(b"\n")
            data = bytearray(rest)
            self.wfile.write(b"echo " + line + b"\n")
            if self.may_park(len(data)):
                return


class _KeptHandler(threaded.TlsConnectionMixin, _KeptEcho):
    pass


@pytest.fixture
def small_pool(tmp_path) -> Iterator[threaded.ThreadedServer]:
    """Two workers, a long request deadline and a 1 s idle limit."""
    from noded_harness import make_cluster_cert
    pem = make_cluster_cert(tmp_path)
    limits = dataclasses.replace(threaded.DEFAULT_LIMITS, max_children=2, request_timeout=30.0,
                                 keepalive_timeout=1.0)
    srv = threaded.ThreadedServer(("127.0.0.1", 0), tls.rapi_server_context(pem), _KeptHandler,
                                  limits=limits)
    thread = threading.Thread(target=srv.serve_forever)
    thread.start()
    yield srv
    srv.shutdown()
    thread.join(10)
    srv.server_close()


def _line(conn: ssl.SSLSocket, text: bytes) -> bytes:
    conn.sendall(text + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        chunk = conn.recv(100)
        if not chunk:
            break
        got += chunk
    return got


def test_idle_kept_connections_hold_no_worker(small_pool) -> None:
    """Five kept connections on two workers: each is answered again after the
    others spoke, which needs the idle ones to give their worker back."""
    conns = [_connect(small_pool.server_address) for _ in range(5)]
    try:
        for round_ in (b"one", b"two"):
            for i, conn in enumerate(conns):
                assert _line(conn, round_ + b"%d" % i) == b"echo " + round_ + b"%d\n" % i
        assert small_pool.pool.workers <= 2
        for _ in range(100):
            if small_pool.parked == 5:
                break
            threading.Event().wait(0.02)
        assert small_pool.parked == 5
    finally:
        for conn in conns:
            conn.close()


def test_a_parked_connection_is_closed_after_the_idle_limit(small_pool) -> None:
    with _connect(small_pool.server_address) as conn:
        assert _line(conn, b"hi") == b"echo hi\n"
        conn.settimeout(10)
        assert conn.recv(100) == b""        # closed by the loop after 1 s idle
    assert small_pool.parked == 0
