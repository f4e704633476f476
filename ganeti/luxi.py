"""LUXI: the JSON+ETX protocol between clients and the master daemon.

This module holds the codec (no sockets: bytes in, messages out) and the
:class:`Client` (one method per LUXI method, same names as Ganeti).

Framing: each message is one JSON document followed by ``0x03`` (ETX).
Request ``{"method", "args", "version"?}``; response ``{"success",
"result"}``; a failed call's result is ``[ErrorClass, [args]]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors, serializer

__all__ = ["ETX", "KNOWN_METHODS", "FrameBuffer", "encode_message",
           "encode_request", "encode_response", "parse_request",
           "parse_response", "Request"]

ETX = b"\x03"

KNOWN_METHODS = frozenset([
    "SubmitJob", "SubmitJobToDrainedQueue", "SubmitManyJobs",
    "WaitForJobChange", "PickupJob", "CancelJob", "ArchiveJob",
    "AutoArchiveJobs", "ChangeJobPriority", "Query", "QueryFields",
    "QueryJobs", "QueryInstances", "QueryNodes", "QueryGroups",
    "QueryNetworks", "QueryExports", "QueryConfigValues",
    "QueryClusterInfo", "QueryTags", "QueryFilters", "ReplaceFilter",
    "DeleteFilter", "SetDrainFlag", "SetWatcherPause",
])


@dataclass(frozen=True)
class Request:
    """A decoded LUXI request."""

    method: str
    args: list[Any]
    version: int | None = None


class FrameBuffer:
    """Splits a byte stream into ETX-terminated JSON messages.

    ``feed`` returns the complete frames (as bytes, without ETX).  A frame
    (complete or still growing) larger than ``max_size`` raises
    :class:`errors.ProtocolError`; the caller should then close the
    connection, as the stream can no longer be trusted.
    """

    def __init__(self, max_size: int = constants.LUXI_MAX_MESSAGE) -> None:
        self._buf = bytearray()
        self._max = max_size

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        start = 0
        while True:
            idx = self._buf.find(ETX, start)
            if idx < 0:
                break
            if idx - start > self._max:
                raise errors.ProtocolError(f"LUXI message larger than {self._max} bytes")
            frames.append(bytes(self._buf[start:idx]))
            start = idx + 1
        del self._buf[:start]
        if len(self._buf) > self._max:
            raise errors.ProtocolError(f"LUXI message larger than {self._max} bytes")
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return len(self._buf)


def encode_message(obj: Any) -> bytes:
    """JSON-encode ``obj`` and append ETX."""
    data = serializer.dumps_bytes(obj)
    if ETX in data:  # JSON escapes control characters; this is a bug if hit
        raise errors.ProgrammerError("ETX inside an encoded LUXI message")
    return data + ETX


def encode_request(method: str, args: list[Any], version: int | None = None) -> bytes:
    """Frame a request."""
    msg: dict[str, Any] = {"method": method, "args": args}
    if version is not None:
        msg["version"] = version
    return encode_message(msg)


def encode_response(success: bool, result: Any) -> bytes:
    """Frame a response; an exception as ``result`` is encoded as an error."""
    if isinstance(result, BaseException):
        result = errors.encode_exception(result)
    return encode_message({"success": success, "result": result})


def parse_request(frame: bytes) -> Request:
    """Decode and check one request frame; raises :class:`errors.ProtocolError`."""
    try:
        msg = serializer.loads(frame)
    except errors.SerializationError as exc:
        raise errors.ProtocolError(f"Invalid LUXI request: {exc}") from exc
    if not isinstance(msg, dict):
        raise errors.ProtocolError("Invalid LUXI request: not a JSON object")
    method, args = msg.get("method"), msg.get("args")
    if not isinstance(method, str) or not method:
        raise errors.ProtocolError("Invalid LUXI request: 'method' missing or not a string")
    if not isinstance(args, list):
        raise errors.ProtocolError("Invalid LUXI request: 'args' missing or not a list")
    version = msg.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise errors.ProtocolError("Invalid LUXI request: 'version' must be an integer")
    if version is not None and version != constants.PROTOCOL_VERSION:
        raise errors.ProtocolError(
            f"LUXI version mismatch: client {version}, server {constants.PROTOCOL_VERSION}")
    return Request(method, args, version)


def parse_response(frame: bytes) -> Any:
    """Decode one response frame and return its result, raising its error.

    A failed call raises the decoded exception (or :class:`errors.LuxiError`
    carrying the text when the result is not an encoded error).
    """
    try:
        msg = serializer.loads(frame)
    except errors.SerializationError as exc:
        raise errors.ProtocolError(f"Invalid LUXI response: {exc}") from exc
    if not isinstance(msg, dict) or "success" not in msg or "result" not in msg:
        raise errors.ProtocolError("Invalid LUXI response: missing success/result")
    if msg["success"]:
        return msg["result"]
    result = msg["result"]
    errors.maybe_raise(result)
    raise errors.LuxiError(str(result))
