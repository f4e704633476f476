"""ganeti.http.handshake.HandshakePool: non-blocking server handshakes over socketpairs, stepped time."""

from __future__ import annotations

import selectors
import socket
import ssl
import threading

import pytest

from ganeti.rpc import transport
from ganeti.http import handshake as noded_handshake
from ganeti.server import noded


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> str:
    from noded_harness import make_cluster_cert
    return make_cluster_cert(tmp_path_factory.mktemp("cert"))


@pytest.fixture
def taken() -> list:
    """What the pool's take_hello was offered; it takes a socket while ``taken[0]`` is True."""
    return [False]


@pytest.fixture
def pool(cert, taken):
    sel = selectors.DefaultSelector()
    clock = Clock()

    def take_hello(sock, address) -> bool:
        taken.append((sock, address))
        return taken[0]

    made = noded_handshake.HandshakePool(noded.make_server_context(cert), sel, timeout=5.0,
                                         max_pending=3, take_hello=take_hello, clock=clock)
    made.clock = clock
    made.selector = sel
    try:
        yield made
    finally:
        made.close_all()
        sel.close()


def _pump(pool, rounds: int = 200):
    """Run the pool's events until a handshake completes (bounded)."""
    for _ in range(rounds):
        for key, _ in pool.selector.select(timeout=0.05):
            done = pool.advance(key.data)
            if done is not None:
                return done
    return None


def test_handshake_completes_without_blocking(pool, cert) -> None:
    ours, theirs = socket.socketpair()
    ctx = transport.make_client_context(cert)
    got: list[bytes] = []

    def client() -> None:
        with ctx.wrap_socket(theirs) as tls:
            tls.sendall(b"ping")
            got.append(tls.recv(10))

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    done = pool.add(ours, ("peer", 0)) or _pump(pool)
    assert done is not None and len(pool) == 0
    with done.tls:
        assert done.tls.gettimeout() is None   # blocking again
        assert done.tls.recv(4) == b"ping"
        done.tls.sendall(b"pong")
        thread.join(10)
    assert got == [b"pong"]


def test_silent_peer_expires_at_the_deadline(pool) -> None:
    ours, theirs = socket.socketpair()
    with theirs:
        assert pool.add(ours, ("silent", 0)) is None
        assert pool.next_deadline() == 105.0
        pool.clock.now = 104.9
        assert pool.expire() == 0 and len(pool) == 1
        pool.clock.now = 105.0
        assert pool.expire() == 1 and len(pool) == 0 and pool.expired == 1
        theirs.settimeout(5)
        assert theirs.recv(10) == b""   # closed


def test_full_pool_closes_the_oldest(pool) -> None:
    peers = []
    for index in range(4):
        ours, theirs = socket.socketpair()
        peers.append(theirs)
        pool.clock.now += 1
        assert pool.add(ours, (f"p{index}", 0)) is None
    try:
        assert len(pool) == 3 and pool.evicted == 1
        peers[0].settimeout(5)
        assert peers[0].recv(10) == b""             # the oldest went
        peers[3].setblocking(False)
        with pytest.raises(BlockingIOError):         # the newest is kept
            peers[3].recv(10)
    finally:
        for sock in peers:
            sock.close()


def test_garbage_fails_the_handshake(pool) -> None:
    ours, theirs = socket.socketpair()
    with theirs:
        theirs.sendall(b"GET / HTTP/1.1\r\n\r\n")
        done = pool.add(ours, ("plain", 0)) or _pump(pool, rounds=20)
        assert done is None and len(pool) == 0 and pool.failed == 1


def test_detach_forgets_without_touching_the_selector(pool) -> None:
    ours, theirs = socket.socketpair()
    with theirs:
        pool.add(ours, ("x", 0))
        pool.detach()
        assert len(pool) == 0 and pool.next_deadline() is None


def _hello(cert: str) -> bytes:
    ctx = transport.make_client_context(cert)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    with pytest.raises(ssl.SSLWantReadError):
        ctx.wrap_bio(incoming, outgoing).do_handshake()
    return outgoing.read()


def test_whole_client_hello_is_offered_untouched(pool, cert, taken) -> None:
    hello = _hello(cert)
    taken[0] = True
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(hello)
        assert pool.add(ours, ("fast", 0)) is None
        (offered, address), = taken[1:]
        assert offered is ours and address == ("fast", 0) and len(pool) == 0
        assert ours.recv(len(hello) + 10) == hello   # nothing was read from it


def test_half_client_hello_is_not_offered(pool, cert, taken) -> None:
    hello = _hello(cert)
    taken[0] = True
    ours, theirs = socket.socketpair()
    with theirs:
        theirs.sendall(hello[:len(hello) // 2])
        assert pool.add(ours, ("slow", 0)) is None
        assert _pump(pool, rounds=3) is None
        assert taken[1:] == [] and len(pool) == 1   # the parent handshakes, waiting for more


def test_declined_hello_is_handshaken_by_the_pool(pool, cert, taken) -> None:
    ours, theirs = socket.socketpair()
    ctx = transport.make_client_context(cert)
    thread = threading.Thread(target=lambda: ctx.wrap_socket(theirs).close(), daemon=True)
    thread.start()
    done = pool.add(ours, ("declined", 0)) or _pump(pool)
    thread.join(10)
    assert done is not None and len(taken) == 2   # offered once, declined
    done.tls.close()
    theirs.close()


@pytest.mark.parametrize("data,state", [
    (b"\x16\x03\x01\x00\x02ab", "complete"),
    (b"\x16\x03\x01\x00\x03ab", "partial"),
    (b"\x16\x03", "partial"),
    (b"\x16", "partial"),
    (b"GET / HTTP/1.1", "not-tls"),
    (b"\x16\x07\x01\x00\x02ab", "not-tls"),
], ids=["complete", "short-body", "short-header", "one-byte", "http", "bad-version"])
def test_hello_state(data: bytes, state: str) -> None:
    assert noded_handshake.hello_state(data) == state
