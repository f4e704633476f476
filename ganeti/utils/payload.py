"""File contents inside RPC arguments: plain text or zlib + base64.

A file carried in an RPC argument is either a plain string (the old
form, UTF-8 text) or ``[encoding, data]``: :data:`ENCODING_NONE` with the
text as is, or :data:`ENCODING_ZLIB_BASE64` with the bytes compressed by
zlib and base64-encoded.  The master compresses large documents (the
~7 MB config of a 10,000-instance cluster becomes ~10x smaller), so the
JSON request body is cheap to build, send and parse on every node
(doc/protocols/rpc.md, "File contents").  Pure: bytes in, bytes out.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from typing import Any

from ganeti import errors

__all__ = ["ENCODING_NONE", "ENCODING_ZLIB_BASE64", "ENCODINGS", "encode_payload",
           "decode_payload"]

#: ``[0, text]``: the content as UTF-8 text
ENCODING_NONE = 0
#: ``[1, base64 text]``: the content compressed with zlib, then base64
ENCODING_ZLIB_BASE64 = 1
ENCODINGS = (ENCODING_NONE, ENCODING_ZLIB_BASE64)

#: zlib level: 1 compresses a config document ~10x at a fraction of the
#: cost of the default level 6
COMPRESS_LEVEL = 1


def encode_payload(data: bytes, compress: bool = True) -> list[Any]:
    """``[encoding, data]`` for the content ``data``.

    With ``compress`` the bytes are zlib-compressed (level
    :data:`COMPRESS_LEVEL`) and base64-encoded; without, ``data`` must be
    UTF-8 text and travels as is.
    """
    if compress:
        packed = base64.b64encode(zlib.compress(data, COMPRESS_LEVEL)).decode("ascii")
        return [ENCODING_ZLIB_BASE64, packed]
    return [ENCODING_NONE, data.decode("utf-8")]


def decode_payload(value: Any, max_size: int | None = None) -> bytes:
    """The content bytes of ``value`` (a plain string or ``[encoding, data]``).

    ``max_size`` bounds the decompressed size (a small compressed body
    cannot expand past it).  Raises :class:`errors.OpExecError` for an
    unknown encoding, a malformed value, bad base64 or zlib data, or
    content larger than ``max_size``.
    """
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif (isinstance(value, list) and len(value) == 2 and isinstance(value[1], str)
          and not isinstance(value[0], bool) and isinstance(value[0], int)):
        encoding, text = value
        if encoding == ENCODING_NONE:
            data = text.encode("utf-8")
        elif encoding == ENCODING_ZLIB_BASE64:
            data = _inflate(text, max_size)
        else:
            raise errors.OpExecError(
                f"Unknown content encoding {encoding!r} (known: "
                f"{', '.join(str(e) for e in ENCODINGS)})")
    else:
        raise errors.OpExecError(
            f"Invalid content (expected a string or [encoding, data]): {str(value)[:100]}")
    if max_size is not None and len(data) > max_size:
        raise errors.OpExecError(f"Content larger than {max_size} bytes")
    return data


def _inflate(text: str, max_size: int | None) -> bytes:
    try:
        packed = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise errors.OpExecError(f"Invalid base64 content: {exc}") from exc
    inflater = zlib.decompressobj()
    try:
        limit = 0 if max_size is None else max_size + 1
        data = inflater.decompress(packed, limit)
    except zlib.error as exc:
        raise errors.OpExecError(f"Invalid zlib content: {exc}") from exc
    if max_size is not None and len(data) > max_size:
        raise errors.OpExecError(f"Content larger than {max_size} bytes")
    if not inflater.eof or inflater.unused_data:
        raise errors.OpExecError("Invalid zlib content: truncated or trailing data")
    return data
