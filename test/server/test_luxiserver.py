"""luxiserver.MasterServer with a fake dispatcher and a stepped clock: timeouts, the cap, buffers."""

from __future__ import annotations

import dataclasses
import os
import socket
import threading

import pytest

from ganeti import luxi, serializer
from ganeti.server import luxiserver


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Echo:
    """Answers every request with its method name."""

    def handle(self, frame: bytes) -> bytes:
        return luxi.encode_response(True, luxi.parse_request(frame).method)


@pytest.fixture
def make(tmp_path):
    servers = []

    def _make(**limits):
        clock = Clock()
        srv = luxiserver.MasterServer(str(tmp_path / f"sock{len(servers)}"), Echo(),
                                      clock=clock,
                                      limits=dataclasses.replace(luxiserver.DEFAULT_LIMITS,
                                                                 **limits))
        srv.clock = clock
        thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01},
                                  daemon=True)
        thread.start()
        servers.append(srv)
        return srv

    yield _make
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_the_luxi_limits_are_the_http_cores_limits_with_luxis_values() -> None:
    """One bounds value for every server core; LUXI keeps its own defaults."""
    from ganeti import constants
    from ganeti.http import forking, limits

    assert luxiserver.Limits is limits.Limits is forking.Limits
    assert luxiserver.DEFAULT_LIMITS == limits.Limits(
        max_connections=4096, keepalive_timeout=300.0, request_timeout=10.0,
        max_body_size=constants.LUXI_MAX_MESSAGE, max_buffered=2 * constants.LUXI_MAX_MESSAGE,
        max_children=256)


def _connect(srv) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(srv.socket.getsockname())
    return sock


def _call(sock: socket.socket, method: str = "QueryClusterInfo"):
    sock.sendall(luxi.encode_request(method, []))
    buf = luxi.FrameBuffer()
    while True:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        frames = buf.feed(data)
        if frames:
            return serializer.loads(frames[0])


def _closed(sock: socket.socket) -> bool:
    """True once the server has closed ``sock`` (waits up to the socket timeout)."""
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def _wait_connections(srv, count: int, idle: bool = False) -> None:
    """Wait until the server has ``count`` connections (idle ones only: back in the loop)."""
    def got() -> int:
        return srv.idle_connections if idle else srv.connections
    for _ in range(1000):
        if got() == count:
            return
        threading.Event().wait(0.005)
    assert got() == count


def test_silent_connection_gets_the_short_timeout(make) -> None:
    srv = make(request_timeout=10.0, keepalive_timeout=300.0)
    with _connect(srv) as sock:
        _wait_connections(srv, 1)
        srv.clock.now += 9.9
        sock.setblocking(False)
        threading.Event().wait(0.05)
        with pytest.raises(BlockingIOError):
            sock.recv(1)
        sock.settimeout(10)
        srv.clock.now += 0.2
        assert _closed(sock)


def test_served_connection_gets_the_long_timeout(make) -> None:
    srv = make(request_timeout=10.0, keepalive_timeout=300.0)
    with _connect(srv) as sock:
        assert _call(sock) == {"success": True, "result": "QueryClusterInfo"}
        _wait_connections(srv, 1, idle=True)
        srv.clock.now += 200
        assert _call(sock, "QueryJobs")["result"] == "QueryJobs"
        _wait_connections(srv, 1, idle=True)
        srv.clock.now += 301
        assert _closed(sock)


def _a_third_closes(old: socket.socket, srv, newer: socket.socket) -> None:
    """A third connection to the full server is served: ``old`` is closed to make
    room, ``newer`` still answered."""
    with _connect(srv) as third:
        assert _call(third)["success"]
        assert _closed(old)
        assert _call(newer)["success"]


def test_full_server_closes_the_connection_idle_the_longest(make) -> None:
    srv = make(max_connections=2)
    old, newer = _connect(srv), _connect(srv)
    try:
        assert _call(old)["success"] and _call(newer)["success"]
        _wait_connections(srv, 2, idle=True)
        srv.clock.now += 1
        _call(newer)   # now `old` is the one idle the longest
        _wait_connections(srv, 2, idle=True)
        _a_third_closes(old, srv, newer)
    finally:
        old.close()
        newer.close()


def test_idle_time_counts_from_the_answer_not_from_the_hand_back(make, monkeypatch) -> None:
    """A worker slow to hand its connection back after answering does not make
    that connection look newer than one the client used after it."""
    srv = make(max_connections=2)
    send_all = luxiserver.sending.send_all
    handing_back = threading.Event()

    def send_then_stall(sock, data) -> None:
        send_all(sock, data)
        if b"Stall" in data:
            assert handing_back.wait(10)

    monkeypatch.setattr(luxiserver.sending, "send_all", send_then_stall)
    old, newer = _connect(srv), _connect(srv)
    try:
        assert _call(old, "Stall")["success"]    # answered; its worker not back yet
        srv.clock.now += 1
        assert _call(newer)["success"]
        _wait_connections(srv, 1, idle=True)
        handing_back.set()                       # `old` comes back after `newer`
        _wait_connections(srv, 2, idle=True)
        _a_third_closes(old, srv, newer)
    finally:
        handing_back.set()
        old.close()
        newer.close()


def test_partial_messages_are_bounded_across_connections(make) -> None:
    srv = make(max_body_size=1000, max_buffered=1000)
    small, big = _connect(srv), _connect(srv)
    request = luxi.encode_request("QueryClusterInfo", ["x" * 500])
    try:
        small.sendall(request[:300])
        _wait_connections(srv, 2)
        big.sendall(b"[" * 900)
        reply = serializer.loads(big.recv(65536).rstrip(luxi.ETX))
        assert reply["success"] is False and "buffers full" in reply["result"][1][0]
        assert _closed(big)
        # the small one's first part was kept: its request, finished, is answered
        small.sendall(request[300:])
        small.settimeout(10)
        answer = serializer.loads(small.recv(65536).rstrip(luxi.ETX))
        assert answer == {"success": True, "result": "QueryClusterInfo"}
        _wait_connections(srv, 1)
    finally:
        small.close()
        big.close()


def test_requests_of_one_connection_are_answered_in_order(make) -> None:
    srv = make()
    with _connect(srv) as sock:
        sock.sendall(luxi.encode_request("A", []) + luxi.encode_request("B", []))
        buf, frames = luxi.FrameBuffer(), []
        while len(frames) < 2:
            frames += buf.feed(sock.recv(65536))
        assert [serializer.loads(f)["result"] for f in frames] == ["A", "B"]


def test_link_socket_alias_replaces_a_link_and_leaves_anything_else(tmp_path) -> None:
    target, alias = tmp_path / "ganeti-master", tmp_path / "ganeti-query"
    assert luxiserver.link_socket_alias(str(alias), str(target))
    assert os.readlink(alias) == "ganeti-master"
    os.unlink(alias)
    os.symlink("/elsewhere/old", alias)                  # a stale link: replaced
    assert luxiserver.link_socket_alias(str(alias), str(target))
    assert os.readlink(alias) == "ganeti-master"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ganeti-query"]   # no temporary left
    other = tmp_path / "sub" / "q"
    other.parent.mkdir()
    assert luxiserver.link_socket_alias(str(other), str(target))
    assert os.readlink(other) == str(target)             # another directory: the full path
    os.unlink(alias)
    alias.write_text("not a link")                       # something else: left alone
    assert not luxiserver.link_socket_alias(str(alias), str(target))
    assert alias.read_text() == "not a link"


def test_a_socket_path_over_the_unix_limit_is_served(tmp_path) -> None:
    """A data directory under a deep root (a test's temporary directory): the
    master binds its socket at the real path all the same, and the LUXI client
    reaches it there (ganeti.utils.unixsock)."""
    from ganeti.utils import unixsock
    path = str(tmp_path / ("d" * 60) / ("e" * 60) / "socket" / "ganeti-master")
    assert unixsock.too_long(path)
    srv = luxiserver.MasterServer(path, Echo())
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    try:
        assert os.path.exists(path) and oct(os.stat(path).st_mode & 0o777) == oct(0o660)
        with luxi.Client(path) as client:
            assert client.call("QueryClusterInfo", []) == "QueryClusterInfo"
    finally:
        srv.shutdown()
        srv.server_close()
