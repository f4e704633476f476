"""The console relays (ganeti/server/console.py) over socket pairs, no daemons."""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
from types import SimpleNamespace

import pytest

from ganeti import errors
from ganeti.http import framing
from ganeti.http import websocket as ws
from ganeti.rapi import consoleslots, consoletokens, resources
from ganeti.rapi.roles import Role
from ganeti.server import console

MASK = b"\x01\x02\x03\x04"


class _Run:
    """Run a relay in a thread; its result once it ended."""

    def __init__(self, fn, *args, **kw) -> None:
        self.result: str | None = None
        self.thread = threading.Thread(target=self._go, args=(fn, args, kw), daemon=True)
        self.thread.start()

    def _go(self, fn, args, kw) -> None:
        self.result = fn(*args, **kw)

    def join(self) -> str | None:
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.result


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk
        data += chunk
    return data


def _frame(sock: socket.socket) -> ws.Message:
    dec = ws.Decoder(masked=False)
    sock.settimeout(5)
    while True:
        msgs = dec.messages()
        if msgs:
            return msgs[0]
        dec.feed(sock.recv(65536))


def test_relay_bytes_both_ways_until_one_side_closes():
    master, a = socket.socketpair()
    b, console_end = socket.socketpair()
    run = _Run(console.relay_bytes, a, b, b"early")
    console_end.settimeout(5)
    master.settimeout(5)
    assert _recv_exactly(console_end, 5) == b"early"
    master.sendall(b"ls\r")
    assert _recv_exactly(console_end, 3) == b"ls\r"
    console_end.sendall(b"bin etc\r\n")
    assert _recv_exactly(master, 9) == b"bin etc\r\n"
    console_end.close()
    assert run.join() == "closed"


def test_relay_bytes_stops_when_asked():
    _, a = socket.socketpair()
    b, _c = socket.socketpair()
    stop = threading.Event()
    run = _Run(console.relay_bytes, a, b, stop=stop.is_set)
    stop.set()
    assert run.join() == "stopped"


@pytest.fixture
def broker():
    browser, broker_end = socket.socketpair()
    node_end, node = socket.socketpair()
    state = {"allowed": True}
    run = _Run(console.relay_websocket, broker_end, node_end, b"login: ",
               allowed=lambda: state["allowed"])
    browser.settimeout(5)
    node.settimeout(5)
    yield browser, node, run, state
    for s in (browser, node, broker_end, node_end):
        s.close()


def test_websocket_relay_carries_keys_and_output(broker):
    browser, node, run, _ = broker
    assert _frame(browser) == ws.Message(ws.OP_BINARY, b"login: ")
    browser.sendall(ws.encode_frame(ws.OP_TEXT, b"root\r", mask=MASK))
    assert _recv_exactly(node, 5) == b"root\r"
    node.sendall(b"# ")
    assert _frame(browser) == ws.Message(ws.OP_BINARY, b"# ")
    browser.sendall(ws.encode_frame(ws.OP_PING, b"hi", mask=MASK))
    assert _frame(browser) == ws.Message(ws.OP_PONG, b"hi")
    browser.sendall(ws.encode_frame(ws.OP_CLOSE, ws.close_payload(1000), mask=MASK))
    msg = _frame(browser)
    assert msg.opcode == ws.OP_CLOSE and ws.parse_close(msg.data)[0] == 1000
    assert run.join() == "the browser closed"


def test_websocket_relay_closes_when_the_console_ends(broker):
    browser, node, run, _ = broker
    _frame(browser)
    node.close()
    msg = _frame(browser)
    assert ws.parse_close(msg.data) == (1000, "the console closed")
    assert run.join() == "the console closed"


def test_websocket_relay_closes_when_the_credentials_end(broker):
    browser, _, run, state = broker
    _frame(browser)
    state["allowed"] = False
    msg = _frame(browser)
    assert ws.parse_close(msg.data)[0] == ws.CLOSE_POLICY
    assert "no longer valid" in run.join()


def test_websocket_relay_refuses_unmasked_frames(broker):
    browser, _, run, _ = broker
    _frame(browser)
    browser.sendall(b"\x81\x02hi")
    msg = _frame(browser)
    assert ws.parse_close(msg.data)[0] == ws.CLOSE_PROTOCOL
    run.join()


def test_websocket_relay_refuses_a_huge_message_from_its_header(broker):
    browser, _, run, _ = broker
    _frame(browser)
    browser.sendall(b"\x82\xff" + struct.pack("!Q", 1 << 40) + MASK)
    assert ws.parse_close(_frame(browser).data)[0] == ws.CLOSE_TOO_BIG
    run.join()


def test_the_console_rows():
    token_row, _ = resources.match("POST", "/2/instances/web1/console/token")
    assert token_row.needs_write and token_row.required_role == Role.OPERATOR
    socket_row, args = resources.match("GET", "/2/instances/web1/console/websocket")
    assert not socket_row.needs_write and args == {"instance": "web1"}


# --- serve_browser: the kind, the subprotocol, the cap ------------------------------------

class _Pool:
    def detach(self) -> None:
        pass


def _server(per_instance: int = 1):
    return SimpleNamespace(console_tokens=consoletokens.ConsoleTokens(),
                           console_slots=consoleslots.ConsoleSlots(per_instance=per_instance),
                           node_tls=object(), noded_port=1811, pool=_Pool(),
                           stopping=threading.Event())


def _head(protocol: str | None = None):
    headers = {"upgrade": "websocket", "connection": "Upgrade",
               "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}
    if protocol:
        headers["sec-websocket-protocol"] = protocol
    return framing.RequestHead(method="GET", target="/x", version="HTTP/1.1",
                               headers=headers, content_length=0, keep_alive=True)


def _vnc_open(server, kind: str = "vnc"):
    token, _ = server.console_tokens.issue(consoletokens.Grant("web1", "olga", lambda: True,
                                                               kind))
    return consoletokens.ConsoleOpen("web1", token, node="node2", address="192.0.2.2",
                                     hypervisor="kvm", running=True, kind=kind)


def test_serve_browser_opens_the_tokens_kind_and_answers_binary(monkeypatch):
    server = _server()
    node_end, node = socket.socketpair()
    asked = {}

    def fake_open(address, port, context, instance, hypervisor, *, kind):
        asked.update(address=address, instance=instance, kind=kind)
        return node_end, b"RFB 003.008\n"
    monkeypatch.setattr(console, "open_node_console", fake_open)
    browser, conn = socket.socketpair()
    browser.settimeout(5)
    users = []
    run = _Run(console.serve_browser, server, _vnc_open(server), _head("binary"), 0, conn,
               "198.51.100.1", users.append)
    head = b""
    while b"\r\n\r\n" not in head:
        head += browser.recv(1)
    assert b"\r\nSec-WebSocket-Protocol: binary\r\n" in head
    assert _frame(browser) == ws.Message(ws.OP_BINARY, b"RFB 003.008\n")
    assert asked == {"address": "192.0.2.2", "instance": "web1", "kind": "vnc"}
    assert server.console_slots.open_for("web1") == 1 and users == ["olga"]
    # a second console of web1 is over the cap (1 here): a 503, before the node is asked
    with pytest.raises(errors.HttpError) as info:
        console.serve_browser(server, _vnc_open(server, "serial"), _head(), 0, None, "-",
                              users.append)
    assert info.value.status == 503 and "Too many open consoles of web1" in str(info.value)
    node.close()
    run.join()
    assert server.console_slots.open_for("web1") == 0
    for s in (browser, conn, node_end):
        s.close()


def test_a_token_of_one_kind_does_not_open_the_other():
    server = _server()
    opening = _vnc_open(server, "serial")
    with pytest.raises(errors.HttpError) as info:
        console.serve_browser(server, dataclasses.replace(opening, kind="vnc"), _head(), 0, None, "-",
                              print)
    assert info.value.status == 403 and "serial console" in str(info.value)


def test_no_token_while_the_instance_has_no_console_free():
    server = _server()
    server.console_slots.take("web1")
    issue = console.token_issuer(server.console_tokens, None, lambda: None,
                                 server.console_slots)
    with pytest.raises(errors.HttpError) as info:
        issue("web1", "vnc")
    assert info.value.status == 503
    assert issue("web2", "vnc")[1] == 30.0


def test_the_vnc_password_is_read_only_from_under_the_configuration_directory(tmp_path):
    conf = tmp_path / "etc" / "ganeti"
    conf.mkdir(parents=True)
    inside = conf / "vnc-cluster-password"
    inside.write_text("s3cret\nsecond line\n")
    outside = tmp_path / "shadow"
    outside.write_text("root:hash:1:2\n")
    (conf / "link").symlink_to(outside)
    assert console.read_vnc_password(str(inside), str(conf)) == "s3cret"
    # another file, also through a link or a ".." out of the directory: never read
    assert console.read_vnc_password(str(outside), str(conf)) is None
    assert console.read_vnc_password(str(conf / "link"), str(conf)) is None
    assert console.read_vnc_password(str(conf / ".." / ".." / "shadow"), str(conf)) is None
    assert console.read_vnc_password(str(conf) + "-evil/x", str(conf)) is None
    # no directory given: no password at all
    assert console.read_vnc_password(str(inside), None) is None
    # inside but missing or empty: None, not an error
    assert console.read_vnc_password(str(conf / "missing"), str(conf)) is None
    (conf / "empty").write_text("")
    assert console.read_vnc_password(str(conf / "empty"), str(conf)) is None
