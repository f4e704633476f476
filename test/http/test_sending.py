"""ganeti.http.sending: a socket's timeout bounds each piece of a large message, not the whole.

The reader below takes at least twice the timeout for the whole message
(it sleeps between reads), so one ``sendall`` of it times out, while each
piece arrives well within the timeout.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ganeti.http import sending, tls

TIMEOUT = 1.0
READ = 64 * 1024
PAUSE = 0.015            # 64 KiB per 15 ms: 8 MiB take >= 1.9 s, a piece ~60 ms
SIZE = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> str:
    from noded_harness import make_cluster_cert
    return make_cluster_cert(tmp_path_factory.mktemp("cert"))


def _slow_reader(sock, got: list[int]) -> threading.Thread:
    """Read ``sock`` at READ bytes per PAUSE until EOF; the total goes into ``got``.

    The pause follows each READ bytes read, not each ``recv``: one TLS
    ``recv`` returns at most one record (16 KiB), so a pause per ``recv``
    would slow the reader fourfold past the rate the test needs."""
    def run() -> None:
        total = paced = 0
        while True:
            data = sock.recv(READ)
            if not data:
                break
            total += len(data)
            while total - paced >= READ:
                paced += READ
                time.sleep(PAUSE)
        got.append(total)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _tls_pair(cert: str):
    ours, theirs = socket.socketpair()
    result: dict[str, object] = {}

    def client() -> None:
        result["tls"] = tls.node_client_context(cert).wrap_socket(theirs,
                                                                  server_hostname="node")
    thread = threading.Thread(target=client)
    thread.start()
    server = tls.node_server_context(cert).wrap_socket(ours, server_side=True)
    thread.join(10)
    return server, result["tls"]


def _send(cert: str, send) -> tuple[BaseException | None, int]:
    server, client = _tls_pair(cert)
    got: list[int] = []
    reader = _slow_reader(client, got)
    server.settimeout(TIMEOUT)
    failure = None
    try:
        send(server, b"x" * SIZE)
    except TimeoutError as exc:
        failure = exc
    finally:
        server.close()
    reader.join(30)
    client.close()
    return failure, got[0]


def test_one_sendall_times_out_for_a_slow_reader(cert) -> None:
    # the premise: one TLS write of the whole message has one deadline
    failure, received = _send(cert, lambda sock, data: sock.sendall(data))
    assert isinstance(failure, TimeoutError)
    assert received < SIZE


def test_send_all_delivers_to_a_slow_reader(cert) -> None:
    failure, received = _send(cert, sending.send_all)
    assert failure is None
    assert received == SIZE


def test_piece_writer_delivers_to_a_slow_reader(cert) -> None:
    def write(sock, data: bytes) -> None:
        assert sending.PieceWriter(sock).write(data) == len(data)
    failure, received = _send(cert, write)
    assert failure is None
    assert received == SIZE


def test_send_all_still_times_out_when_the_peer_stops_reading() -> None:
    ours, theirs = socket.socketpair()
    try:
        ours.settimeout(0.2)
        with pytest.raises(TimeoutError):
            sending.send_all(ours, b"y" * SIZE)
    finally:
        ours.close()
        theirs.close()


def test_small_and_odd_sized_messages_arrive_whole() -> None:
    for size in (0, 1, sending.PIECE, sending.PIECE + 1, 3 * sending.PIECE - 7):
        ours, theirs = socket.socketpair()
        data = bytes(i % 251 for i in range(size))
        got = bytearray()

        def read(sock=theirs, into=got) -> None:
            while chunk := sock.recv(READ):
                into.extend(chunk)
        thread = threading.Thread(target=read)
        thread.start()
        sending.send_all(ours, data)
        ours.close()
        thread.join(10)
        theirs.close()
        assert bytes(got) == data


class _Recorder:
    """A socket stand-in: records each sendall's length; ``timeout`` as given."""

    def __init__(self, timeout: float | None) -> None:
        self.sent: list[int] = []
        self.timeout = timeout

    def gettimeout(self) -> float | None:
        return self.timeout

    def sendall(self, data) -> None:
        self.sent.append(memoryview(data).nbytes)


def test_a_trickling_peer_runs_out_of_the_whole_message_deadline() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 3.0              # each piece takes 3 s: within a 5 s timeout
        return now[0]
    sock = _Recorder(5.0)
    size = 16 * sending.PIECE      # 4 MiB: allowed 5 s + 32 s at MIN_RATE
    with pytest.raises(TimeoutError, match="slower than"):
        sending.send_all(sock, b"a" * size, clock=clock)   # type: ignore[arg-type]
    assert 0 < len(sock.sent) < 16
    sock = _Recorder(None)         # no timeout on the socket: no deadline either
    sending.send_all(sock, b"a" * size, clock=clock)       # type: ignore[arg-type]
    assert sum(sock.sent) == size


def test_pieces_are_counted_in_bytes_not_items() -> None:
    import array
    items = array.array("i", range(sending.PIECE // 2))    # 2 pieces of bytes
    sock = _Recorder(5.0)
    sending.send_all(sock, memoryview(items))               # type: ignore[arg-type]
    assert sock.sent == [sending.PIECE, sending.PIECE]


def test_a_closed_piece_writer_refuses_to_write() -> None:
    writer = sending.PieceWriter(_Recorder(5.0))            # type: ignore[arg-type]
    writer.close()
    with pytest.raises(ValueError):
        writer.write(b"x")
