"""The disk stream between node daemons: frames and progress text (doc/exports.md).

Disk data of an export or import goes from the node that reads it to the
node that writes it over one TLS connection to the receiver's node daemon
(the cluster certificate on both ends, as for node RPC):
``POST /impexp_stream HTTP/1.1`` with no ``Content-Length``, then frames
until the sender is done; the receiver answers with the usual
``[true, {"size", "sha256"}]`` or ``[false, message]`` envelope once it has
seen the end frame (or failed).

A frame is one type byte, a 4-byte big-endian length and the payload:

=====  ========================================================================
``H``  first frame: JSON ``{"dest": {...}, "total": bytes or null}``
``D``  data, at most :data:`MAX_DATA` bytes
``E``  end: JSON ``{"size": bytes sent, "sha256": hex digest of the data}``
``A``  abort: JSON ``{"error": why}`` (the sender's source failed)
=====  ========================================================================

The receiver computes the SHA-256 of what arrives and refuses the stream
when it differs from the end frame's, or when the connection ends before
the end frame.  Pure code: no sockets here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from ganeti import errors, serializer

__all__ = ["STREAM_PROCEDURE", "HEADER", "DATA", "END", "ABORT", "MAX_DATA", "encode",
           "encode_json", "FrameReader", "RECEIVE_TIMEOUT", "format_progress", "format_size"]

STREAM_PROCEDURE = "impexp_stream"
HEADER, DATA, END, ABORT = b"H", b"D", b"E", b"A"
_TYPES = frozenset([HEADER, DATA, END, ABORT])
MAX_DATA = 1024 * 1024
#: seconds the receiver waits for the next bytes before it gives the stream up
RECEIVE_TIMEOUT = 120.0
#: a JSON frame (header, end, abort) is small
_MAX_JSON = 64 * 1024
_PREFIX = struct.Struct(">cI")


def encode(kind: bytes, payload: bytes) -> bytes:
    """One frame."""
    if kind not in _TYPES:
        raise errors.ProgrammerError(f"Unknown disk stream frame type {kind!r}")
    return _PREFIX.pack(kind, len(payload)) + payload


def encode_json(kind: bytes, data: Any) -> bytes:
    """A header, end or abort frame carrying ``data`` as JSON."""
    return encode(kind, serializer.dumps_bytes(data))


class FrameReader:
    """Incremental frame decoder: :meth:`feed` bytes, iterate :meth:`frames`.

    Raises :class:`errors.HttpError` (status 400) for an unknown frame type
    or an oversized frame; the stream is then unusable.
    """

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned in a frame."""
        return len(self._buf)

    def frames(self) -> Iterator[tuple[bytes, bytes]]:
        """The complete frames buffered so far, as ``(type, payload)``."""
        while len(self._buf) >= _PREFIX.size:
            kind, length = _PREFIX.unpack_from(self._buf)
            if kind not in _TYPES:
                raise errors.HttpError(f"Disk stream: unknown frame type {kind!r}", 400)
            limit = MAX_DATA if kind == DATA else _MAX_JSON
            if length > limit:
                raise errors.HttpError(f"Disk stream: frame of {length} bytes (limit {limit})",
                                       400)
            end = _PREFIX.size + length
            if len(self._buf) < end:
                return
            payload = bytes(self._buf[_PREFIX.size:end])
            del self._buf[:end]
            yield kind, payload


def format_size(size: float) -> str:
    """``1536`` -> ``"1.5 KiB"`` (binary units, one decimal)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_progress(done: int, total: int | None, elapsed: float) -> str:
    """``"12.0 MiB of 64.0 MiB (18%), 30.5 MiB/s"`` (no total: no percentage)."""
    rate = done / elapsed if elapsed > 0 else 0.0
    if total:
        percent = min(100, int(done * 100 / total))
        amount = f"{format_size(done)} of {format_size(total)} ({percent}%)"
    else:
        amount = format_size(done)
    return f"{amount}, {format_size(rate)}/s"
