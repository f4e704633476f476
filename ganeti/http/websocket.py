"""WebSocket (RFC 6455) as bytes: the opening handshake and the frames (pure, no sockets).

The server side of the web console's serial console (doc/webui.md,
"Consoles"), and, with ``mask`` given, the client side its tests use:

* :func:`check_upgrade` judges a request's head (``GET``, ``Upgrade:
  websocket``, ``Connection: upgrade``, ``Sec-WebSocket-Version: 13``, a
  ``Sec-WebSocket-Key`` of 16 bytes in base64) and :func:`accept_head` is
  the ``101 Switching Protocols`` answer with its ``Sec-WebSocket-Accept``
  (:func:`accept_key`); :func:`choose_protocol` picks the subprotocol to
  name in it from the client's ``Sec-WebSocket-Protocol`` (noVNC offers
  ``binary``);
* :func:`encode_frame` builds one frame (a server's unmasked, a client's
  masked with the 4 bytes given), :func:`close_payload` a close frame's
  body;
* :class:`Decoder` takes bytes as they come and gives whole messages
  (:class:`Message`: text, binary, ping, pong, close), fragments put back
  together, control frames between fragments given at once.  What breaks
  the protocol raises :class:`errors.WebSocketError` carrying the close
  code to answer with: 1002 (a reserved bit, an unknown opcode, an
  unmasked frame from a client, a long or fragmented control frame, a
  length not in its shortest form, a continuation out of place), 1007 (a
  text message or close reason that is not UTF-8) and 1009 (a frame or
  message over ``max_message`` bytes, refused from its header, before its
  payload arrives).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import struct
from collections.abc import Mapping

from ganeti import errors

__all__ = ["GUID", "OP_CONT", "OP_TEXT", "OP_BINARY", "OP_CLOSE", "OP_PING", "OP_PONG",
           "CLOSE_NORMAL", "CLOSE_GOING_AWAY", "CLOSE_PROTOCOL", "CLOSE_NO_STATUS",
           "CLOSE_BAD_DATA", "CLOSE_POLICY", "CLOSE_TOO_BIG", "CLOSE_ERROR",
           "MAX_MESSAGE", "Message", "Decoder", "accept_key", "check_upgrade", "accept_head",
           "choose_protocol", "SUBPROTOCOL_NAMES",
           "encode_frame", "close_payload", "parse_close"]

#: the fixed GUID the accept key is derived with (RFC 6455 section 1.3)
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA
_DATA_OPS = frozenset({OP_TEXT, OP_BINARY})
_CONTROL_OPS = frozenset({OP_CLOSE, OP_PING, OP_PONG})

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_PROTOCOL = 1002
CLOSE_NO_STATUS = 1005       # never sent: a close frame without a code
CLOSE_BAD_DATA = 1007
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_ERROR = 1011

#: the largest message (all its fragments) a :class:`Decoder` takes by default
MAX_MESSAGE = 1024 * 1024
#: a control frame's payload is at most this long (RFC 6455 section 5.5)
MAX_CONTROL = 125
#: the subprotocols a server answers with (binary frames both ways, as it speaks
#: anyway): ``binary`` is what noVNC and websockify name it
SUBPROTOCOL_NAMES = ("binary",)


def _fail(code: int, why: str) -> errors.WebSocketError:
    return errors.WebSocketError(why, code)


# --- the opening handshake ----------------------------------------------------------------

def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for a request's ``Sec-WebSocket-Key``."""
    digest = hashlib.sha1((key + GUID).encode("ascii")).digest()
    return base64.b64encode(digest).decode("ascii")


def _tokens(value: str | None) -> set[str]:
    return {t.strip().lower() for t in (value or "").split(",") if t.strip()}


def check_upgrade(method: str, version: str, headers: Mapping[str, str]) -> str:
    """The ``Sec-WebSocket-Key`` of a valid opening request (``headers`` keyed in
    lower case, as :mod:`ganeti.http.framing` gives them).

    Raises :class:`errors.HttpError`: 400 for anything but a ``GET`` over
    HTTP/1.1 asking to upgrade to ``websocket`` with a proper key, 426 for
    another protocol version (the answer then names version 13).
    """
    if method != "GET" or version != "HTTP/1.1":
        raise errors.HttpError("A WebSocket opens with GET over HTTP/1.1", 400)
    if "websocket" not in _tokens(headers.get("upgrade")):
        raise errors.HttpError("This path is a WebSocket: send 'Upgrade: websocket'", 400)
    if "upgrade" not in _tokens(headers.get("connection")):
        raise errors.HttpError("A WebSocket needs 'Connection: Upgrade'", 400)
    if (headers.get("sec-websocket-version") or "").strip() != "13":
        raise errors.HttpError("Only WebSocket version 13 is supported", 426)
    key = (headers.get("sec-websocket-key") or "").strip()
    try:
        raw = base64.b64decode(key.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raw = b""
    if len(raw) != 16:
        raise errors.HttpError("Sec-WebSocket-Key must be 16 bytes in base64", 400)
    return key


def choose_protocol(offered: str | None,
                    supported: tuple[str, ...] = SUBPROTOCOL_NAMES) -> str | None:
    """The subprotocol to answer a request's ``Sec-WebSocket-Protocol`` with: the
    first one ``offered`` that is ``supported`` (names compared exactly, as RFC
    6455 says), or None (no ``Sec-WebSocket-Protocol`` in the answer; a
    browser that offered some then fails the connection itself)."""
    for name in (t.strip() for t in (offered or "").split(",")):
        if name and name in supported:
            return name
    return None


def accept_head(key: str, extra: list[tuple[str, str]] | None = None) -> bytes:
    """The ``101 Switching Protocols`` answer to a request with ``key``."""
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Accept: {accept_key(key)}"]
    lines += [f"{name}: {value}" for name, value in extra or []]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# --- frames ------------------------------------------------------------------------------

def _unmask(data: bytes, mask: bytes) -> bytes:
    if not data:
        return data
    repeated = (mask * (len(data) // 4 + 1))[:len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(repeated, "big")).to_bytes(
        len(data), "big")


def encode_frame(opcode: int, payload: bytes, *, fin: bool = True,
                 mask: bytes | None = None) -> bytes:
    """One frame: unmasked (a server's) or masked with ``mask``'s 4 bytes (a client's).

    Raises :class:`errors.ProgrammerError` for a control frame over 125 bytes
    or fragmented, an unknown opcode or a mask not of 4 bytes.
    """
    if opcode not in _DATA_OPS | _CONTROL_OPS | {OP_CONT}:
        raise errors.ProgrammerError(f"Unknown WebSocket opcode {opcode:#x}")
    if opcode in _CONTROL_OPS and (len(payload) > MAX_CONTROL or not fin):
        raise errors.ProgrammerError("A control frame is at most 125 bytes, unfragmented")
    if mask is not None and len(mask) != 4:
        raise errors.ProgrammerError("A WebSocket mask is 4 bytes")
    first = (0x80 if fin else 0) | opcode
    mbit = 0x80 if mask is not None else 0
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", first, mbit | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", first, mbit | 126, size)
    else:
        head = struct.pack("!BBQ", first, mbit | 127, size)
    if mask is None:
        return head + payload
    return head + mask + _unmask(payload, mask)


def close_payload(code: int | None = CLOSE_NORMAL, reason: str = "") -> bytes:
    """A close frame's payload: the code and a reason cut to fit 125 bytes."""
    if code is None:
        return b""
    data = reason.encode("utf-8")[:MAX_CONTROL - 2]
    return struct.pack("!H", code) + data.decode("utf-8", "ignore").encode("utf-8")


def _valid_close_code(code: int) -> bool:
    return (1000 <= code <= 1003 or 1007 <= code <= 1011 or 3000 <= code <= 4999)


def parse_close(payload: bytes) -> tuple[int, str]:
    """``(code, reason)`` of a received close frame (1005 for none).

    Raises :class:`errors.WebSocketError`: 1002 for a one-byte payload or a
    code that may not be sent, 1007 for a reason that is not UTF-8.
    """
    if not payload:
        return CLOSE_NO_STATUS, ""
    if len(payload) < 2:
        raise _fail(CLOSE_PROTOCOL, "A close frame's payload is empty or at least 2 bytes")
    (code,) = struct.unpack("!H", payload[:2])
    if not _valid_close_code(code):
        raise _fail(CLOSE_PROTOCOL, f"Close code {code} may not be sent")
    try:
        reason = payload[2:].decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(CLOSE_BAD_DATA, "A close reason must be UTF-8") from None
    return code, reason


@dataclasses.dataclass(frozen=True)
class Message:
    """One whole message: its opcode (text, binary, ping, pong, close) and payload."""

    opcode: int
    data: bytes

    @property
    def text(self) -> str:
        """A text message's payload (checked as UTF-8 by the decoder)."""
        return self.data.decode("utf-8")


class Decoder:
    """Frames in, messages out: :meth:`feed` bytes, then take :meth:`messages`.

    ``masked``: frames must be masked (a server reading a client), or must
    not be (a client reading a server).  ``max_message`` bounds a frame and
    a whole fragmented message.  After a :class:`errors.WebSocketError`, or
    once a close frame was given, the decoder takes nothing more.
    """

    def __init__(self, *, masked: bool = True, max_message: int = MAX_MESSAGE) -> None:
        self.masked = masked
        self.max_message = max_message
        self._buf = bytearray()
        self._parts: list[bytes] = []
        self._part_op: int | None = None
        self._part_size = 0
        self.closed = False

    def feed(self, data: bytes) -> None:
        """Take ``data`` (any cut: a frame may come in many pieces)."""
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet part of a message given out."""
        return len(self._buf)

    def messages(self) -> list[Message]:
        """The messages whole in what was fed, in order (empty: more bytes needed)."""
        out: list[Message] = []
        while not self.closed:
            msg = self._next()
            if msg is None:
                break
            if msg is not _PARTIAL:
                out.append(msg)
                if msg.opcode == OP_CLOSE:
                    self.closed = True
        return out

    def _header(self) -> tuple[bool, int, bool, int, int] | None:
        """``(fin, opcode, masked, length, header size)`` of the next frame, when in."""
        buf = self._buf
        if len(buf) < 2:
            return None
        b0, b1 = buf[0], buf[1]
        if b0 & 0x70:
            raise _fail(CLOSE_PROTOCOL, "Reserved bits set (no extension was agreed)")
        fin, opcode, masked, length = bool(b0 & 0x80), b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
        pos = 2
        if length == 126:
            if len(buf) < 4:
                return None
            (length,) = struct.unpack_from("!H", buf, 2)
            pos = 4
            if length < 126:
                raise _fail(CLOSE_PROTOCOL, "A frame length not in its shortest form")
        elif length == 127:
            if len(buf) < 10:
                return None
            (length,) = struct.unpack_from("!Q", buf, 2)
            pos = 10
            if length >> 63:
                raise _fail(CLOSE_PROTOCOL, "A frame length with its top bit set")
            if length < 1 << 16:
                raise _fail(CLOSE_PROTOCOL, "A frame length not in its shortest form")
        return fin, opcode, masked, length, pos + (4 if masked else 0)

    def _check(self, fin: bool, opcode: int, masked: bool, length: int) -> None:
        if opcode not in _DATA_OPS | _CONTROL_OPS | {OP_CONT}:
            raise _fail(CLOSE_PROTOCOL, f"Unknown opcode {opcode:#x}")
        if masked != self.masked:
            raise _fail(CLOSE_PROTOCOL, "A client's frames must be masked" if self.masked
                        else "A server's frames must not be masked")
        if opcode in _CONTROL_OPS:
            if not fin:
                raise _fail(CLOSE_PROTOCOL, "A control frame may not be fragmented")
            if length > MAX_CONTROL:
                raise _fail(CLOSE_PROTOCOL, "A control frame is at most 125 bytes")
            return
        if opcode == OP_CONT and self._part_op is None:
            raise _fail(CLOSE_PROTOCOL, "A continuation frame without a message to continue")
        if opcode != OP_CONT and self._part_op is not None:
            raise _fail(CLOSE_PROTOCOL, "A new message before the last one's final fragment")
        if length > self.max_message or self._part_size + length > self.max_message:
            raise _fail(CLOSE_TOO_BIG, f"A message over {self.max_message} bytes")

    def _next(self) -> Message | None:
        header = self._header()
        if header is None:
            return None
        fin, opcode, masked, length, size = header
        self._check(fin, opcode, masked, length)
        if len(self._buf) < size + length:
            return None
        payload = bytes(self._buf[size:size + length])
        if masked:
            payload = _unmask(payload, bytes(self._buf[size - 4:size]))
        del self._buf[:size + length]
        if opcode in _CONTROL_OPS:
            if opcode == OP_CLOSE:
                parse_close(payload)
            return Message(opcode, payload)
        if opcode != OP_CONT:
            self._part_op = opcode
        self._parts.append(payload)
        self._part_size += length
        if not fin:
            return _PARTIAL
        assert self._part_op is not None
        msg = Message(self._part_op, b"".join(self._parts))
        self._parts, self._part_op, self._part_size = [], None, 0
        if msg.opcode == OP_TEXT:
            try:
                msg.data.decode("utf-8")
            except UnicodeDecodeError:
                raise _fail(CLOSE_BAD_DATA, "A text message that is not UTF-8") from None
        return msg


#: a fragment taken in, no message yet
_PARTIAL = Message(-1, b"")
