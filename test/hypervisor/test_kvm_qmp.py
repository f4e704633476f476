"""The QMP codec on bytes, and the client against a scripted server."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Callable

import pytest

from ganeti import errors
from ganeti.hypervisor.kvm import qmp

GREETING = (b'{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7},'
            b' "package": ""}, "capabilities": ["oob"]}}\r\n')


# --- codec --------------------------------------------------------------------

def test_codec_parses_greeting_return_error_and_event():
    codec = qmp.QmpCodec()
    msgs = codec.feed(GREETING
                      + b'{"return": {}, "id": 1}\r\n'
                      + b'{"timestamp": {"seconds": 10, "microseconds": 500000},'
                        b' "event": "STOP"}\r\n'
                      + b'{"error": {"class": "CommandNotFound", "desc": "no"}, "id": 2}\r\n')
    assert msgs[0] == qmp.QmpGreeting(version={"qemu": {"micro": 0, "minor": 2, "major": 7},
                                               "package": ""}, capabilities=["oob"])
    assert msgs[1] == qmp.QmpReturn(id=1, value={})
    assert msgs[2] == qmp.QmpEvent(name="STOP", data={}, timestamp=10.5)
    assert msgs[3] == qmp.QmpFailure(id=2, error_class="CommandNotFound", desc="no")


def test_codec_accepts_any_chunking():
    data = GREETING + b'{"return": {"status": "running"}, "id": 7}\n'
    codec = qmp.QmpCodec()
    got: list[qmp.QmpMessage] = []
    for i in range(len(data)):
        got.extend(codec.feed(data[i:i + 1]))
    assert [type(m) for m in got] == [qmp.QmpGreeting, qmp.QmpReturn]
    assert got[1] == qmp.QmpReturn(id=7, value={"status": "running"})


def test_codec_skips_blank_lines_and_keeps_partial_tail():
    codec = qmp.QmpCodec()
    assert codec.feed(b'\r\n\n{"return": 1') == []
    assert codec.feed(b', "id": 3}\n') == [qmp.QmpReturn(id=3, value=1)]


@pytest.mark.parametrize("line", [b"not json\n", b"[1, 2]\n", b'{"what": 1}\n'])
def test_codec_refuses_bad_messages(line):
    with pytest.raises(qmp.QmpError):
        qmp.QmpCodec().feed(line)


def test_codec_refuses_overlong_line():
    codec = qmp.QmpCodec(max_line=10)
    with pytest.raises(qmp.QmpError, match="longer than 10"):
        codec.feed(b'{"return": "0123456789"')


def test_codec_encodes_commands_with_increasing_ids():
    codec = qmp.QmpCodec()
    assert codec.encode("qmp_capabilities") == (1, b'{"execute":"qmp_capabilities","id":1}\r\n')
    cid, data = codec.encode("human-monitor-command", {"command-line": "info cpus"})
    assert cid == 2
    assert data == (b'{"execute":"human-monitor-command","arguments":'
                    b'{"command-line":"info cpus"},"id":2}\r\n')


def test_errors_are_hypervisor_errors():
    exc = qmp.QmpCommandError("cont", "GenericError", "boom")
    assert isinstance(exc, errors.HypervisorError)
    assert (exc.command, exc.error_class, exc.desc) == ("cont", "GenericError", "boom")
    assert "cont" in str(exc) and "boom" in str(exc)


# --- client against a scripted server ------------------------------------------
# Servers that break the protocol on purpose (stale ids, no greeting, silence, a cut
# line, a long socket path) are raw byte scripts here; a well-behaved qemu is the
# scripted peer of test/fakes/fakeqmp.py.

Script = Callable[[socket.socket], None]


def _serve(script: Script) -> tuple[str, threading.Thread]:
    tmp = tempfile.mkdtemp(prefix="qmp-test-")
    path = os.path.join(tmp, "qmp.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def run() -> None:
        conn, _ = listener.accept()
        listener.close()
        try:
            script(conn)
        finally:
            conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return path, thread


def _read_command(conn: socket.socket, buf: bytearray) -> dict:
    from ganeti import serializer
    while b"\n" not in buf:
        chunk = conn.recv(4096)
        if not chunk:
            raise EOFError
        buf += chunk
    end = buf.index(b"\n")
    line = bytes(buf[:end])
    del buf[:end + 1]
    return serializer.loads(line)


def test_client_negotiates_and_matches_replies_across_events():
    seen: list[dict] = []

    def script(conn: socket.socket) -> None:
        buf = bytearray()
        conn.sendall(GREETING)
        cmd = _read_command(conn, buf)
        seen.append(cmd)
        conn.sendall(b'{"return": {}, "id": %d}\r\n' % cmd["id"])
        cmd = _read_command(conn, buf)
        seen.append(cmd)
        # an event, then a stale reply with another id, then the real reply
        conn.sendall(b'{"event": "RESUME", "timestamp": {"seconds": 1, "microseconds": 0}}\r\n'
                     b'{"return": "stale", "id": 999}\r\n'
                     b'{"return": {"status": "running", "running": true}, "id": %d}\r\n'
                     % cmd["id"])
        cmd = _read_command(conn, buf)
        seen.append(cmd)
        conn.sendall(b'{"error": {"class": "DeviceNotFound", "desc": "no disk"}, "id": %d}\r\n'
                     % cmd["id"])
        conn.sendall(b'{"event": "SHUTDOWN", "data": {"guest": true, "reason": "guest-shutdown"},'
                     b' "timestamp": {"seconds": 2, "microseconds": 0}}\r\n')
        conn.recv(1)   # wait for the client to close

    path, thread = _serve(script)
    with qmp.QmpClient(path, timeout=5) as client:
        assert client.greeting is not None and client.greeting.capabilities == ["oob"]
        assert client.execute("query-status") == {"status": "running", "running": True}
        assert [e.name for e in client.events] == ["RESUME"]
        with pytest.raises(qmp.QmpCommandError) as info:
            client.execute("block_resize", device="d0", size=1)
        assert info.value.error_class == "DeviceNotFound"
        event = client.wait_event("SHUTDOWN")
        assert event.data == {"guest": True, "reason": "guest-shutdown"}
        assert client.wait_event("RESUME").timestamp == 1.0
    thread.join(5)
    assert seen[0] == {"execute": "qmp_capabilities", "id": 1}
    assert seen[1] == {"execute": "query-status", "id": 2}
    assert seen[2] == {"execute": "block_resize", "arguments": {"device": "d0", "size": 1},
                       "id": 3}


def test_client_times_out_on_a_silent_server():
    release = threading.Event()

    def script(conn: socket.socket) -> None:
        conn.sendall(GREETING)
        release.wait(5)

    path, thread = _serve(script)
    with pytest.raises(qmp.QmpError, match="Timeout"):
        qmp.QmpClient(path, timeout=0.2).connect()
    release.set()
    thread.join(5)


def test_client_reports_a_closed_connection():
    def script(conn: socket.socket) -> None:
        conn.sendall(GREETING[:20])

    path, thread = _serve(script)
    with pytest.raises(qmp.QmpError, match="closed"):
        qmp.QmpClient(path, timeout=5).connect()
    thread.join(5)


def test_client_refuses_a_missing_socket(tmp_path):
    with pytest.raises(qmp.QmpError, match="Cannot connect"):
        qmp.QmpClient(str(tmp_path / "none.sock"), timeout=1).connect()


def test_client_refuses_a_server_without_greeting():
    def script(conn: socket.socket) -> None:
        conn.sendall(b'{"return": {}, "id": 1}\r\n')

    path, thread = _serve(script)
    with pytest.raises(qmp.QmpError, match="greeting"):
        qmp.QmpClient(path, timeout=5).connect()
    thread.join(5)


def test_client_keeps_an_event_that_comes_before_the_greeting(qmp_peer):
    # qemu flushes an event queued while the previous client left before the greeting
    peer = qmp_peer()
    peer.emit("MIGRATION", {"status": "completed"})
    client = peer.client()
    assert client.greeting is not None
    assert [(e.name, e.data) for e in client.events] == [("MIGRATION", {"status": "completed"})]
    assert peer.lines == [{"execute": "qmp_capabilities", "id": 1}]


def test_client_reaches_a_socket_with_a_long_path(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "qmp.sock")
    assert len(path) > 108
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dirfd = os.open(str(deep), os.O_PATH)
    try:
        listener.bind(f"/proc/self/fd/{dirfd}/qmp.sock")
    finally:
        os.close(dirfd)
    listener.listen(1)

    def run() -> None:
        conn, _ = listener.accept()
        buf = bytearray()
        conn.sendall(GREETING)
        cmd = _read_command(conn, buf)
        conn.sendall(b'{"return": {}, "id": %d}\r\n' % cmd["id"])
        conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    client = qmp.QmpClient(path, timeout=5)
    assert client.connect().capabilities == ["oob"]
    client.close()
    thread.join(5)
    listener.close()
