"""The console relays (ganeti/server/console.py) over socket pairs, no daemons."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from ganeti.http import websocket as ws
from ganeti.rapi import resources
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
