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
    def run() -> None:
        total = 0
        while True:
            data = sock.recv(READ)
            if not data:
                break
            total += len(data)
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
