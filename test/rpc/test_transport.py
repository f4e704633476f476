"""HttpsTransport over real TLS: replies read, truncated or malformed ones refused (framing: test/http)."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import subprocess
import threading

import pytest

from ganeti import errors
from ganeti.rpc import transport
from ganeti.server.noded import make_server_context
from tools.harness import vcluster


@pytest.fixture(scope="module")
def cert_file(tmp_path_factory) -> str:
    from noded_harness import make_cluster_cert
    return make_cluster_cert(tmp_path_factory.mktemp("cert"))


def _serve_once(cert_file: str, reply: bytes) -> tuple[int, threading.Thread]:
    """A one-connection TLS server sending ``reply`` after reading the request."""
    ctx = make_server_context(cert_file)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(10)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with ctx.wrap_socket(conn, server_side=True) as tls:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = tls.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                tls.sendall(reply)
        except (OSError, ValueError):
            pass
        finally:
            listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


@pytest.mark.parametrize("reply,expected", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n[true, 3000000]", b"[true, 3000000]"),
    # bytes after Content-Length are ignored
    (b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n[1]\nxyz", b"[1]\n"),
])
def test_post_reads_body(cert_file: str, reply: bytes, expected: bytes) -> None:
    port, thread = _serve_once(cert_file, reply)
    got = transport.HttpsTransport(cert_file).post("127.0.0.1", port, "version", b"[]", 10)
    thread.join(10)
    assert got == expected


@pytest.mark.parametrize("reply,match", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n[true, 1]", "closed after 9 of 50"),
    (b"HTTP/1.1 200 OK\r\n\r\n[true, 1]", "no Content-Length"),
    (b"", "closed without a reply"),
    (b"HTTP/1.1 200 OK\r\nContent-Le", "closed without a reply"),
])
def test_post_refuses_bad_replies(cert_file: str, reply: bytes, match: str) -> None:
    port, thread = _serve_once(cert_file, reply)
    with pytest.raises(errors.RpcTransportError, match=match):
        transport.HttpsTransport(cert_file).post("127.0.0.1", port, "version", b"[]", 10)
    thread.join(10)


@pytest.mark.parametrize("reply", [
    b"SPDY 200 OK\r\nContent-Length: 1\r\n\r\nx",
    b"HTTP/1.1 abc OK\r\nContent-Length: 1\r\n\r\nx",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n",
], ids=["bad-version", "bad-status", "bad-header", "bad-length", "chunked", "long-head"])
def test_post_refuses_malformed_replies(cert_file: str, reply: bytes) -> None:
    port, thread = _serve_once(cert_file, reply)
    with pytest.raises(errors.RpcTransportError, match="malformed reply"):
        transport.HttpsTransport(cert_file).post("127.0.0.1", port, "version", b"[]", 10)
    thread.join(10)


def test_post_error_status_is_remote_error(cert_file: str) -> None:
    port, thread = _serve_once(cert_file, b"HTTP/1.1 404 Not Found\r\nContent-Length: 30\r\n"
                                          b"\r\n[false, \"Unknown procedure x\"]")
    with pytest.raises(errors.RemoteError, match="HTTP 404 Not Found: Unknown procedure x"):
        transport.HttpsTransport(cert_file).post("127.0.0.1", port, "x", b"[]", 10)
    thread.join(10)


def test_second_connection_to_a_node_resumes_the_tls_session(cert_file: str) -> None:
    """The node daemon's own TLS context resumes the session the transport kept."""
    ctx = make_server_context(cert_file)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(2)
    listener.settimeout(10)
    reused: list[bool] = []

    def serve() -> None:
        try:
            for _ in range(2):
                conn, _ = listener.accept()
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += tls.recv(4096)
                    tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n[1]\n")
                    reused.append(tls.session_reused)
        finally:
            listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = transport.HttpsTransport(cert_file)
    port = listener.getsockname()[1]
    assert client.post("127.0.0.1", port, "version", b"[]", 10) == b"[1]\n"
    assert client.post("127.0.0.1", port, "version", b"[]", 10) == b"[1]\n"
    thread.join(10)
    assert reused == [False, True]


def test_connections_leave_from_the_source_address(cert_file: str, monkeypatch) -> None:
    """A virtual node's RPC comes from its own address (doc/vcluster.md, "Partitions")."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(10)
    peers: list[str] = []

    def accept() -> None:
        conn, addr = listener.accept()
        peers.append(addr[0])
        conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    monkeypatch.setenv("GANETI_SOURCE_ADDRESS", "127.0.0.7")
    with pytest.raises(errors.RpcTransportError):
        transport.HttpsTransport(cert_file).post("127.0.0.1", listener.getsockname()[1],
                                                 "version", b"[]", 5)
    thread.join(10)
    listener.close()
    assert peers == ["127.0.0.7"]


def _keepalive_server(cert_file: str, plan: list[int]) -> tuple[int, threading.Thread, list[bytes]]:
    """A TLS server: on the n-th connection answer ``plan[n]`` requests (keep-alive
    replies), then close it.  Returns the port, the thread and every request head."""
    ctx = make_server_context(cert_file)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(len(plan))
    listener.settimeout(10)
    heads: list[bytes] = []

    def serve() -> None:
        try:
            for count in plan:
                conn, _ = listener.accept()
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    data = b""
                    for _ in range(count):
                        while b"\r\n\r\n" not in data:
                            chunk = tls.recv(4096)
                            if not chunk:
                                return
                            data += chunk
                        head, _, data = data.partition(b"\r\n\r\n")
                        data = data[2:]   # the "[]" body
                        heads.append(head)
                        tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n"
                                    b"Connection: keep-alive\r\nKeep-Alive: timeout=15\r\n\r\n[1]\n")
        except OSError:
            pass
        finally:
            listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread, heads


def test_read_only_calls_reuse_a_kept_connection(cert_file: str) -> None:
    port, thread, heads = _keepalive_server(cert_file, [3])
    client = transport.HttpsTransport(cert_file, keepalive=True)
    for procedure in ("version", "node_info", "all_instances_info?epoch=1&master=m"):
        assert client.post("127.0.0.1", port, procedure, b"[]", 10) == b"[1]\n"
    client.close()
    thread.join(10)
    assert len(heads) == 3   # all three on the one connection the server accepted
    assert all(b"Connection: keep-alive" in head for head in heads)


def test_changing_calls_never_use_a_kept_connection(cert_file: str) -> None:
    port, thread, heads = _keepalive_server(cert_file, [1, 1])
    client = transport.HttpsTransport(cert_file, keepalive=True)
    assert client.post("127.0.0.1", port, "version", b"[]", 10) == b"[1]\n"
    # the kept connection stays idle: this one opens the server's second connection
    assert client.post("127.0.0.1", port, "test_delay", b"[]", 10) == b"[1]\n"
    client.close()
    thread.join(10)
    assert b"Connection: keep-alive" in heads[0]
    assert b"Connection: close" in heads[1]


def test_queue_replication_writes_reuse_a_kept_connection(cert_file: str) -> None:
    port, thread, heads = _keepalive_server(cert_file, [3])
    client = transport.HttpsTransport(cert_file, keepalive=True)
    for procedure in ("jobqueue_update_many?epoch=1&master=m", "jobqueue_rename",
                      "jobqueue_set_drain_flag"):
        assert client.post("127.0.0.1", port, procedure, b"[]", 10) == b"[1]\n"
    client.close()
    thread.join(10)
    assert len(heads) == 3   # all three on the one connection the server accepted
    assert all(b"Connection: keep-alive" in head for head in heads)


def test_kept_connection_closed_by_the_node_is_replaced_once(cert_file: str) -> None:
    port, thread, heads = _keepalive_server(cert_file, [1, 1])
    client = transport.HttpsTransport(cert_file, keepalive=True)
    assert client.post("127.0.0.1", port, "version", b"[]", 10) == b"[1]\n"
    # the server closed the first connection after one reply: sent again on a new one
    assert client.post("127.0.0.1", port, "version", b"[]", 10) == b"[1]\n"
    client.close()
    thread.join(10)
    assert len(heads) == 2


def test_without_keepalive_every_call_closes_its_connection(cert_file: str) -> None:
    port, thread, heads = _keepalive_server(cert_file, [1])
    assert transport.HttpsTransport(cert_file).post("127.0.0.1", port, "version", b"[]",
                                                    10) == b"[1]\n"
    thread.join(10)
    assert b"Connection: close" in heads[0]


def test_expired_kept_connections_of_other_nodes_are_closed(cert_file: str) -> None:
    first, thread1, _ = _keepalive_server(cert_file, [1])
    second, thread2, _ = _keepalive_server(cert_file, [1])
    now = [100.0]
    client = transport.HttpsTransport(cert_file, keepalive=True, clock=lambda: now[0])
    client.post("127.0.0.1", first, "version", b"[]", 10)
    kept = client._kept[("127.0.0.1", first)][0].tls
    now[0] += transport.KEEPALIVE_IDLE + 1
    # a call to another node sweeps the expired connection to the first one
    client.post("127.0.0.1", second, "version", b"[]", 10)
    assert ("127.0.0.1", first) not in client._kept
    assert kept.fileno() == -1   # closed
    client.close()
    thread1.join(10)
    thread2.join(10)


@pytest.mark.timeout(60)
def test_a_node_that_never_does_the_handshake_fails_before_the_call_timeout(
        cert_file: str, monkeypatch) -> None:
    # a hung node daemon: its kernel accepts the connection (backlog), nobody answers the
    # ClientHello; the call's own timeout (600 s here) is not waited for
    monkeypatch.setattr(transport, "HANDSHAKE_TIMEOUT", 0.5)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        with pytest.raises(errors.RpcTransportError, match="timed out"):
            transport.HttpsTransport(cert_file).post("127.0.0.1", listener.getsockname()[1],
                                                     "version", b"[]", 600)
    finally:
        listener.close()


def test_a_connection_is_given_the_connect_timeout_or_less(cert_file: str,
                                                           monkeypatch) -> None:
    seen: list[float] = []

    def refuse(address, timeout, source_address=None):
        seen.append(timeout)
        raise ConnectionRefusedError()

    monkeypatch.setattr(transport.socket, "create_connection", refuse)
    https = transport.HttpsTransport(cert_file)
    for call_timeout in (2.0, 600.0):
        with pytest.raises(errors.RpcTransportError, match="connection refused"):
            https.post("127.0.0.1", 1, "version", b"[]", call_timeout)
    assert 0 < seen[0] <= 2.0 and seen[1] == transport.CONNECT_TIMEOUT


def test_a_node_whose_connection_timed_out_gets_the_shorter_connect_timeout(
        cert_file: str, monkeypatch) -> None:
    # a dead node: the first call waits the whole connect timeout, the next ones of the
    # window wait less; a refusal (the node answers) never makes a node suspect
    seen: list[float] = []
    outcome: list[BaseException] = [socket.timeout("timed out")]

    def connect(address, timeout, source_address=None):
        seen.append(timeout)
        raise outcome[0]

    now = [1000.0]
    monkeypatch.setattr(transport.socket, "create_connection", connect)
    https = transport.HttpsTransport(cert_file, clock=lambda: now[0])
    for _ in range(2):
        with pytest.raises(errors.RpcTransportError, match="timed out"):
            https.post("192.0.2.7", 1811, "version", b"[]", 600)
    assert seen == [transport.CONNECT_TIMEOUT, transport.SUSPECT_CONNECT_TIMEOUT]
    # another node is not suspect
    with pytest.raises(errors.RpcTransportError):
        https.post("192.0.2.8", 1811, "version", b"[]", 600)
    assert seen[-1] == transport.CONNECT_TIMEOUT
    # once the window is over, the dead node gets the whole timeout again
    now[0] += transport.SUSPECT_WINDOW + 1
    outcome[0] = ConnectionRefusedError()
    with pytest.raises(errors.RpcTransportError, match="connection refused"):
        https.post("192.0.2.7", 1811, "version", b"[]", 600)
    assert seen[-1] == transport.CONNECT_TIMEOUT
    outcome[0] = OSError(errno.EHOSTUNREACH, "No route to host")
    with pytest.raises(errors.RpcTransportError, match="No route to host"):
        https.post("192.0.2.7", 1811, "version", b"[]", 600)
    with pytest.raises(errors.RpcTransportError):
        https.post("192.0.2.7", 1811, "version", b"[]", 600)
    assert seen[-1] == transport.SUSPECT_CONNECT_TIMEOUT


def test_a_node_that_connects_again_is_no_longer_suspect(cert_file: str) -> None:
    now = [0.0]
    suspects = transport.SuspectNodes(clock=lambda: now[0])
    key = ("192.0.2.7", 1811)
    suspects.failed(key)
    now[0] = transport.SUSPECT_WINDOW - 1
    assert suspects.connect_timeout(key) == transport.SUSPECT_CONNECT_TIMEOUT
    suspects.succeeded(key)
    assert suspects.connect_timeout(key) == transport.CONNECT_TIMEOUT


@pytest.mark.parametrize("scale", [1.0, 0.05, 0.5])
def test_rpc_timeout_scale_scales_the_connect_and_handshake_timeouts(
        cert_file: str, monkeypatch, scale: float) -> None:
    # --rpc-timeout-scale: a cut-off or hung node costs the scaled timeouts, never less
    # than the floors (the tests' 0.05), and the defaults at scale 1
    seen: list[tuple[float, float | None]] = []

    def connect(address, port, context, timeout, *, handshake_timeout=None, **_):
        seen.append((timeout, handshake_timeout))
        raise socket.timeout("timed out")

    monkeypatch.setattr(transport.client, "connect", connect)
    https = transport.HttpsTransport(cert_file, timeout_scale=scale)
    for _ in range(2):
        with pytest.raises(errors.RpcTransportError, match="timed out"):
            https.post("192.0.2.7", 1811, "version", b"[]", 600)
    expected = {1.0: [(5.0, 10.0), (2.0, 10.0)],
                0.05: [(1.5, 5.0), (1.5, 5.0)],
                0.5: [(2.5, 5.0), (1.5, 5.0)]}[scale]
    assert seen == [pytest.approx(pair) for pair in expected]


@pytest.mark.timeout(60)
def test_a_scaled_transport_gives_up_on_a_hung_handshake_at_its_own_timeout(
        cert_file: str, monkeypatch) -> None:
    # the scaled handshake timeout is the one a hung node daemon meets (the
    # default, 10 s, is not)
    monkeypatch.setattr(transport, "MIN_HANDSHAKE_TIMEOUT", 0.2)
    seen: list[float | None] = []
    real = transport.client.connect

    def connect(*args, handshake_timeout=None, **kwargs):
        seen.append(handshake_timeout)
        return real(*args, handshake_timeout=handshake_timeout, **kwargs)

    monkeypatch.setattr(transport.client, "connect", connect)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        with pytest.raises(errors.RpcTransportError, match="timed out"):
            transport.HttpsTransport(cert_file, timeout_scale=0.01).post(
                "127.0.0.1", listener.getsockname()[1], "version", b"[]", 600)
    finally:
        listener.close()
    assert seen == [pytest.approx(0.2, abs=0.01)]


def _nft(script: str) -> None:
    subprocess.run(["nft", "-f", "-"], input=script, text=True, check=True, timeout=30)


@pytest.mark.skipif(vcluster.partition_support() is not None,
                    reason=f"{vcluster.partition_support()}")
@pytest.mark.timeout(60)
def test_a_node_cut_off_while_its_kept_connection_idles_fails_the_next_call_early(
        cert_file: str) -> None:
    # the node's kernel stops acknowledging (nftables drops what the client sends): the
    # kept connection ends at the unacknowledged-data timeout (3 s at this scale), the
    # new connection tried instead at the connect timeout (1.5 s), not at the call's own
    # deadline (600 s; without TCP_USER_TIMEOUT the test's 60 s run out), and the node
    # is suspect
    ctx = make_server_context(cert_file)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(10)
    port = listener.getsockname()[1]
    requests: list[bytes] = []
    accepted: list[socket.socket] = []

    def serve() -> None:
        conn, _ = listener.accept()
        conn.settimeout(300)      # longer than the test may take: it never ends the call
        with ctx.wrap_socket(conn, server_side=True) as tls:
            accepted.append(tls)
            try:
                while chunk := tls.recv(4096):
                    requests.append(chunk)
                    if chunk.endswith(b"[]"):
                        tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n"
                                    b"Connection: keep-alive\r\nKeep-Alive: timeout=15\r\n\r\n[1]\n")
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    table = f"ganeti_test_unacked_{os.getpid()}"
    client = transport.HttpsTransport(cert_file, keepalive=True, timeout_scale=0.01)
    assert client.unacked_timeout == transport.MIN_UNACKED_TIMEOUT
    try:
        assert client.post("127.0.0.1", port, "version", b"[]", 600) == b"[1]\n"
        assert ("127.0.0.1", port) in client._kept
        _nft(f"table inet {table} {{\n  chain out {{\n"
             "    type filter hook output priority 0; policy accept;\n"
             f"    ip daddr 127.0.0.1 tcp dport {port} drop\n  }}\n}}\n")
        with pytest.raises(errors.RpcTransportError, match="timed out"):
            client.post("127.0.0.1", port, "version", b"[]", 600)
        assert ("127.0.0.1", port) in client.suspects._failed
    finally:
        _nft(f"table inet {table}\ndelete table inet {table}\n")
        client.close()
        listener.close()
        for tls in accepted:     # the server thread's read ends
            with contextlib.suppress(OSError):
                tls.shutdown(socket.SHUT_RDWR)
    assert len(requests) == 1      # the second request never reached the node
