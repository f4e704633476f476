"""The WebSocket codec (ganeti/http/websocket.py), with bytes only."""

from __future__ import annotations

import struct

import pytest

from ganeti import errors
from ganeti.http import websocket as ws

MASK = b"\x37\xfa\x21\x3d"


def test_accept_key_is_the_rfc_example():
    # RFC 6455 section 1.3
    assert ws.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def _headers(**over: str) -> dict[str, str]:
    h = {"upgrade": "websocket", "connection": "keep-alive, Upgrade",
         "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}
    h.update(over)
    return {k: v for k, v in h.items() if v != "-"}


def test_check_upgrade_gives_the_key():
    assert ws.check_upgrade("GET", "HTTP/1.1", _headers()) == "dGhlIHNhbXBsZSBub25jZQ=="


@pytest.mark.parametrize("method,version,over,status", [
    ("POST", "HTTP/1.1", {}, 400),
    ("GET", "HTTP/1.0", {}, 400),
    ("GET", "HTTP/1.1", {"upgrade": "-"}, 400),
    ("GET", "HTTP/1.1", {"upgrade": "h2c"}, 400),
    ("GET", "HTTP/1.1", {"connection": "keep-alive"}, 400),
    ("GET", "HTTP/1.1", {"sec-websocket-version": "8"}, 426),
    ("GET", "HTTP/1.1", {"sec-websocket-key": "-"}, 400),
    ("GET", "HTTP/1.1", {"sec-websocket-key": "c2hvcnQ="}, 400),      # 5 bytes
    ("GET", "HTTP/1.1", {"sec-websocket-key": "not base64!!"}, 400),
], ids=["post", "http10", "no-upgrade", "other-upgrade", "no-connection-upgrade",
        "version-8", "no-key", "short-key", "bad-key"])
def test_check_upgrade_refuses(method, version, over, status):
    with pytest.raises(errors.HttpError) as info:
        ws.check_upgrade(method, version, _headers(**over))
    assert info.value.status == status


def test_accept_head():
    head = ws.accept_head("dGhlIHNhbXBsZSBub25jZQ==")
    assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert b"\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in head
    assert b"\r\nUpgrade: websocket\r\n" in head and head.endswith(b"\r\n\r\n")


def test_accept_head_names_the_chosen_subprotocol():
    head = ws.accept_head("dGhlIHNhbXBsZSBub25jZQ==", [("Sec-WebSocket-Protocol", "binary")])
    assert b"\r\nSec-WebSocket-Protocol: binary\r\n" in head


@pytest.mark.parametrize("offered,chosen", [
    ("binary", "binary"), ("base64, binary", "binary"), ("chat,binary ", "binary"),
    (None, None), ("", None), ("base64", None), ("Binary", None),
], ids=["binary", "second", "spaces", "none", "empty", "other", "case"])
def test_choose_protocol(offered, chosen):
    assert ws.choose_protocol(offered) == chosen


@pytest.mark.parametrize("size,header", [
    (5, b"\x81\x05"), (125, b"\x81\x7d"), (126, b"\x81\x7e\x00\x7e"),
    (65535, b"\x81\x7e\xff\xff"), (65536, b"\x81\x7f" + struct.pack("!Q", 65536)),
], ids=["5", "125", "126", "65535", "65536"])
def test_server_frame_lengths(size, header):
    frame = ws.encode_frame(ws.OP_TEXT, b"a" * size)
    assert frame == header + b"a" * size


def test_rfc_masked_hello():
    # RFC 6455 section 5.7: a masked "Hello"
    frame = ws.encode_frame(ws.OP_TEXT, b"Hello", mask=MASK)
    assert frame == b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"
    dec = ws.Decoder()
    dec.feed(frame)
    assert dec.messages() == [ws.Message(ws.OP_TEXT, b"Hello")]


def test_decoder_takes_bytes_one_at_a_time():
    data = (ws.encode_frame(ws.OP_BINARY, bytes(range(256)) * 300, mask=MASK)
            + ws.encode_frame(ws.OP_PING, b"p", mask=MASK))
    dec = ws.Decoder()
    got = []
    for i in range(len(data)):
        dec.feed(data[i:i + 1])
        got += dec.messages()
    assert got == [ws.Message(ws.OP_BINARY, bytes(range(256)) * 300),
                   ws.Message(ws.OP_PING, b"p")]
    assert dec.buffered == 0


def test_fragments_with_a_ping_between():
    data = (ws.encode_frame(ws.OP_TEXT, b"Hel", fin=False, mask=MASK)
            + ws.encode_frame(ws.OP_PING, b"x", mask=MASK)
            + ws.encode_frame(ws.OP_CONT, b"lo", mask=MASK))
    dec = ws.Decoder()
    dec.feed(data)
    assert dec.messages() == [ws.Message(ws.OP_PING, b"x"), ws.Message(ws.OP_TEXT, b"Hello")]


def test_client_side_reads_unmasked_frames():
    dec = ws.Decoder(masked=False)
    dec.feed(ws.encode_frame(ws.OP_PONG, b"") + ws.encode_frame(ws.OP_TEXT, "é".encode()))
    msgs = dec.messages()
    assert msgs[0] == ws.Message(ws.OP_PONG, b"") and msgs[1].text == "é"


def test_close_ends_the_decoder():
    dec = ws.Decoder()
    dec.feed(ws.encode_frame(ws.OP_CLOSE, ws.close_payload(1000, "bye"), mask=MASK)
             + ws.encode_frame(ws.OP_TEXT, b"late", mask=MASK))
    msgs = dec.messages()
    assert len(msgs) == 1 and ws.parse_close(msgs[0].data) == (1000, "bye")
    assert dec.closed and dec.messages() == []


@pytest.mark.parametrize("payload,expect", [
    (b"", (1005, "")), (struct.pack("!H", 4000) + b"x", (4000, "x")),
], ids=["none", "private-code"])
def test_parse_close(payload, expect):
    assert ws.parse_close(payload) == expect


def _refused(data: bytes, *, masked: bool = True, max_message: int = ws.MAX_MESSAGE) -> int:
    dec = ws.Decoder(masked=masked, max_message=max_message)
    dec.feed(data)
    with pytest.raises(errors.WebSocketError) as info:
        dec.messages()
    return info.value.code


@pytest.mark.parametrize("data,code", [
    (b"\x91\x80" + MASK, 1002),                                     # RSV1
    (b"\x83\x80" + MASK, 1002),                                     # opcode 3
    (b"\x81\x05Hello", 1002),                                       # unmasked from a client
    (b"\x09\x80" + MASK, 1002),                                     # fragmented ping
    (b"\x89\xfe\x00\x7e" + MASK + b"a" * 126, 1002),                # long ping
    (b"\x80\x80" + MASK, 1002),                                     # continuation first
    (b"\x81\xfe\x00\x05" + MASK + b"Hello", 1002),                  # 16-bit length for 5
    (b"\x81\xff" + struct.pack("!Q", 5) + MASK + b"Hello", 1002),   # 64-bit length for 5
    (b"\x81\xff" + struct.pack("!Q", 1 << 63), 1002),               # top bit
    (ws.encode_frame(ws.OP_TEXT, b"\xff\xfe", mask=MASK), 1007),    # not UTF-8
    (ws.encode_frame(ws.OP_CLOSE, b"\x03", mask=MASK), 1002),       # 1-byte close
    (ws.encode_frame(ws.OP_CLOSE, struct.pack("!H", 1005), mask=MASK), 1002),
    (ws.encode_frame(ws.OP_CLOSE, struct.pack("!H", 1000) + b"\xff", mask=MASK), 1007),
], ids=["rsv1", "opcode-3", "unmasked", "fragmented-ping", "long-ping", "lone-continuation",
        "long-form-16", "long-form-64", "top-bit", "text-not-utf8", "close-1-byte",
        "close-1005", "close-reason-not-utf8"])
def test_protocol_errors(data, code):
    assert _refused(data) == code


def test_new_message_inside_a_fragmented_one():
    data = (ws.encode_frame(ws.OP_TEXT, b"a", fin=False, mask=MASK)
            + ws.encode_frame(ws.OP_TEXT, b"b", mask=MASK))
    assert _refused(data) == 1002


def test_masked_frame_to_a_client():
    assert _refused(ws.encode_frame(ws.OP_TEXT, b"x", mask=MASK), masked=False) == 1002


def test_too_big_is_refused_from_its_header():
    # only the header is in: the 1 GiB payload is never waited for
    head = b"\x82\xff" + struct.pack("!Q", 1 << 30) + MASK
    assert _refused(head, max_message=1024) == 1009


def test_too_big_over_fragments():
    data = (ws.encode_frame(ws.OP_BINARY, b"a" * 600, fin=False, mask=MASK)
            + ws.encode_frame(ws.OP_CONT, b"a" * 600, mask=MASK))
    assert _refused(data, max_message=1000) == 1009


def test_close_payload_is_cut_to_fit():
    payload = ws.close_payload(1000, "é" * 100)
    assert len(payload) <= 125 and ws.parse_close(payload)[0] == 1000
    assert ws.close_payload(None) == b""


@pytest.mark.parametrize("opcode,payload,kw", [
    (ws.OP_PING, b"a" * 126, {}), (ws.OP_CLOSE, b"", {"fin": False}), (0x3, b"", {}),
    (ws.OP_TEXT, b"", {"mask": b"abc"}),
], ids=["long-ping", "fragmented-close", "opcode-3", "short-mask"])
def test_encode_refuses(opcode, payload, kw):
    with pytest.raises(errors.ProgrammerError):
        ws.encode_frame(opcode, payload, **kw)
