"""HTTP/1.1 message framing without sockets: feed bytes, get messages; build bytes.

Both ends of node RPC use it (``ganeti/server/noded.py`` and
``ganeti/rpc/transport.py``); their socket loops only move bytes::

    parser = RequestParser(max_body_size=MAX_REQUEST_SIZE)
    while (request := parser.next_request()) is None and not parser.eof:
        data = sock.recv(65536)
        parser.feed(data) if data else parser.feed_eof()
    sock.sendall(build_response(200, {"Content-Type": "application/json"}, body,
                                keep_alive=False))

The subset of HTTP/1.1 (RFC 9112) we speak, checked strictly:

* **Framing by Content-Length only.**  A request without one has an empty
  body; a response without one is refused, except those that never have a
  body (1xx, 204, 304, replies to HEAD).  Any ``Transfer-Encoding`` (chunked)
  is refused with 501: RPC bodies are always sent whole.  Several
  ``Content-Length`` values must agree.
* **Keep-alive.**  :attr:`RequestHead.keep_alive` / :attr:`ResponseHead.keep_alive`
  say whether the connection stays open after the message (HTTP/1.1: unless
  ``Connection: close``; HTTP/1.0: only with ``Connection: keep-alive``).
  Messages may be pipelined: bytes after a message stay buffered for the
  next one.
* **Lines** end in CRLF; a bare LF is accepted too (RFC 9112 2.2).  Obsolete
  line folding, whitespace before a header's colon and a CR inside a line
  are refused.
* **Limits**, checked as soon as the bytes are in: the head (start line,
  headers and the blank line) at most ``max_head_size`` bytes and ``max_headers`` header lines
  (431), the body at most ``max_body_size`` bytes (413, known from the head
  before any body byte is read).  With ``max_line_size`` a request parser
  also bounds each line: a longer request line is a 414, a longer header
  line a 431 (the RAPI daemon's statuses, doc/rapi.md).

Every violation raises :class:`errors.HttpError`; its ``status`` is the
reply a server sends for it.  Header names are lower-cased in parsed heads;
repeated headers are joined with ``", "``.

Why by hand rather than h11: ``tools/bench/bench_http.py`` compares both.
"""

from __future__ import annotations

import http
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from ganeti import errors

__all__ = ["RequestHead", "Request", "ResponseHead", "Response", "RequestParser",
           "ResponseParser", "build_request", "build_response", "build_stream_head", "reason_phrase",
           "http_date",
           "DEFAULT_MAX_HEAD_SIZE", "DEFAULT_MAX_HEADERS", "DEFAULT_MAX_BODY_SIZE"]

DEFAULT_MAX_HEAD_SIZE = 64 * 1024
DEFAULT_MAX_HEADERS = 100
DEFAULT_MAX_BODY_SIZE = 128 * 1024 * 1024

#: what the builders take as headers: a mapping or ``(name, value)`` pairs
HeaderItems = Mapping[str, str] | Iterable[tuple[str, str]]

_HEAD_END = re.compile(b"\n\r?\n")
_VERSIONS = frozenset({"HTTP/1.0", "HTTP/1.1"})
_REASONS = {int(status): status.phrase for status in http.HTTPStatus}
# headers the builders write themselves
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})
_MAX_LENGTH_DIGITS = 18   # more is over any limit (and int() of huge strings is slow)


def reason_phrase(status: int) -> str:
    """The standard reason phrase of ``status`` (``"OK"`` for 200), or ``""``."""
    return _REASONS.get(status, "")


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(timestamp: float) -> str:
    """``timestamp`` (seconds since the epoch) as an IMF-fixdate: ``Sun, 06 Nov 1994 08:49:37 GMT``.

    Locale independent (the ``Date`` header of a reply).
    """
    tm = time.gmtime(timestamp)
    return (f"{_DAYS[tm.tm_wday]}, {tm.tm_mday:02d} {_MONTHS[tm.tm_mon - 1]} {tm.tm_year:04d}"
            f" {tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d} GMT")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Head:
    """What request and status lines share: version and headers (names lower-cased)."""

    version: str
    headers: Mapping[str, str]
    #: body size from ``Content-Length`` (0 when absent or for a response without body)
    content_length: int
    #: whether the connection stays open after this message
    keep_alive: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHead(_Head):
    """A request line and its headers."""

    method: str
    target: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseHead(_Head):
    """A status line and its headers."""

    status: int
    reason: str


_H = TypeVar("_H", RequestHead, ResponseHead)


@dataclass(frozen=True, slots=True)
class _Message(Generic[_H]):
    """A complete message: its head and its body."""

    head: _H
    body: bytes

    @property
    def headers(self) -> Mapping[str, str]:
        return self.head.headers

    @property
    def keep_alive(self) -> bool:
        return self.head.keep_alive


@dataclass(frozen=True, slots=True)
class Request(_Message[RequestHead]):
    """A complete request."""

    @property
    def method(self) -> str:
        return self.head.method

    @property
    def target(self) -> str:
        return self.head.target


@dataclass(frozen=True, slots=True)
class Response(_Message[ResponseHead]):
    """A complete response."""

    @property
    def status(self) -> int:
        return self.head.status

    @property
    def reason(self) -> str:
        return self.head.reason


class _Parser:
    """Buffering and head/body splitting shared by the request and response parsers.

    Subclasses implement ``_parse_head(lines)``.
    """

    def __init__(self, *, max_head_size: int = DEFAULT_MAX_HEAD_SIZE,
                 max_headers: int = DEFAULT_MAX_HEADERS,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE,
                 max_line_size: int | None = None) -> None:
        self.max_head_size = max_head_size
        self.max_headers = max_headers
        self.max_body_size = max_body_size
        #: the longest line of a head (its line end included); None: only the head is bounded
        self.max_line_size = max_line_size
        self._buf = bytearray()
        self._scan = 0          # where the search for the end of the head resumes
        self._head_len = 0      # bytes of the current message's head, blank line included
        self._line_start = 0    # where the line limit's check resumes (a line's start)
        self._line_no = 0       # and which line of the head that is (0: the start line)
        self._head: RequestHead | ResponseHead | None = None
        self._eof = False

    @property
    def eof(self) -> bool:
        """True once :meth:`feed_eof` was called (the peer closed its side)."""
        return self._eof

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as part of a complete message."""
        return len(self._buf)

    def feed(self, data: bytes) -> None:
        """Add bytes received from the peer.

        Raises :class:`errors.ProgrammerError` after :meth:`feed_eof`.
        """
        if self._eof:
            raise errors.ProgrammerError("HTTP parser fed after end of file")
        self._buf += data

    def feed_eof(self) -> None:
        """Record that the peer closed its side: no more bytes will come."""
        self._eof = True

    def _error(self, message: str, status: int = 400) -> errors.HttpError:
        return errors.HttpError(message, status)

    def _find_head(self) -> RequestHead | ResponseHead | None:
        if self._head is not None:
            return self._head
        buf = self._buf
        match = _HEAD_END.search(buf, self._scan)
        if self.max_line_size is not None:
            self._check_lines(len(buf) if match is None else match.end())
        if match is None:
            if len(buf) >= self.max_head_size:   # its end could not fit any more
                raise self._error(f"Message head too long (over {self.max_head_size} bytes)", 431)
            if self._eof and buf:
                raise self._error(f"Connection closed inside the message head ({len(buf)} bytes"
                                  " without the blank line that ends it)")
            self._scan = max(0, len(buf) - 2)
            return None
        if match.end() > self.max_head_size:
            raise self._error(f"Message head too long (over {self.max_head_size} bytes)", 431)
        text = buf[:match.start()].decode("latin-1")
        lines = text.split("\n")
        if len(lines) > self.max_headers + 1:
            raise self._error(f"More than {self.max_headers} header lines", 431)
        head = self._parse_head([line[:-1] if line[-1:] == "\r" else line for line in lines])
        self._head = head
        self._head_len = match.end()
        return head

    def _check_lines(self, end: int) -> None:
        """Refuse a line of ``self._buf[:end]`` (the head so far) longer than
        :attr:`max_line_size`: 414 for the request line, 431 for a header line."""
        assert self.max_line_size is not None
        limit, buf, start = self.max_line_size, self._buf, self._line_start
        while start < end:
            stop = buf.find(b"\n", start, end)
            length = (end if stop < 0 else stop + 1) - start
            if length > limit:
                if self._line_no == 0:
                    raise self._error(f"Request line too long (over {limit} bytes)", 414)
                raise self._error(f"Header line too long (over {limit} bytes)", 431)
            if stop < 0:
                break
            start = stop + 1
            self._line_no += 1
        self._line_start = start    # complete lines are not looked at again

    def start_line(self) -> str | None:
        """The first line of the message being received, once complete (without its
        line end); None while it is incomplete.  Nothing is consumed: a server may
        judge a request line before its headers arrive."""
        stop = self._buf.find(b"\n")
        if stop < 0:
            return None
        line = self._buf[:stop].decode("latin-1")
        return line[:-1] if line.endswith("\r") else line

    def _parse_headers(self, lines: list[str]) -> dict[str, str]:
        headers: dict[str, str] = {}
        for line in lines:
            name, sep, value = line.partition(":")
            if not sep or not name or name[0] in " \t" or name[-1] in " \t" or "\r" in line:
                raise self._error(f"Bad header line {line[:100]!r}")
            name = name.lower()
            value = value.strip(" \t")
            if name in headers:
                headers[name] = f"{headers[name]}, {value}"
            else:
                headers[name] = value
        return headers

    def _content_length(self, headers: Mapping[str, str]) -> int | None:
        """The declared body size; None without ``Content-Length``."""
        if "transfer-encoding" in headers:
            raise self._error(f"Transfer-Encoding {headers['transfer-encoding'][:40]!r} is not"
                              " supported (chunked bodies are refused): send a Content-Length",
                              501)
        value = headers.get("content-length")
        if value is None:
            return None
        if "," in value:
            values = {v.strip() for v in value.split(",")}
            if len(values) != 1:
                raise self._error(f"Conflicting Content-Length values {value[:60]!r}")
            value = values.pop()
        if not (value.isascii() and value.isdigit()):
            raise self._error(f"Invalid Content-Length {value[:40]!r}")
        if len(value) > _MAX_LENGTH_DIGITS or int(value) > self.max_body_size:
            raise self._error(f"Body too large: Content-Length {value[:40]}, the limit is"
                              f" {self.max_body_size} bytes", 413)
        return int(value)

    @staticmethod
    def _keep_alive(version: str, headers: Mapping[str, str]) -> bool:
        connection = headers.get("connection")
        if connection is None:
            return version == "HTTP/1.1"
        tokens = {t.strip() for t in connection.lower().split(",")}
        if version == "HTTP/1.1":
            return "close" not in tokens
        return "keep-alive" in tokens

    def take_after_head(self) -> bytes:
        """Hand over the connection after the current head: the bytes buffered past it.

        For a request whose body is not HTTP framed (the node daemons' disk
        stream); the parser is unusable afterwards.
        """
        if self._head is None:
            raise errors.ProgrammerError("take_after_head() before the head is complete")
        rest = bytes(self._buf[self._head_len:])
        self._buf.clear()
        return rest

    def _parse_head(self, lines: list[str]) -> RequestHead | ResponseHead:
        raise NotImplementedError

    def _take_body(self) -> bytes | None:
        """The current message's body once all of it is buffered (consumed), else None."""
        assert self._head is not None
        length = self._head.content_length
        end = self._head_len + length
        if len(self._buf) < end:
            if self._eof:
                raise self._error(f"Body shorter than Content-Length: connection closed after"
                                  f" {len(self._buf) - self._head_len} of {length} bytes")
            return None
        with memoryview(self._buf) as view:   # one copy, not a bytearray slice and then bytes
            body = bytes(view[self._head_len:end])
        del self._buf[:end]
        self._head = None
        self._head_len = 0
        self._scan = 0
        self._line_start = self._line_no = 0
        return body


class RequestParser(_Parser):
    """Incremental parser of the requests a client sends on one connection.

    :meth:`head` gives the head as soon as it is in (a server can refuse a
    request before its body arrives); :meth:`next_request` gives the whole
    request.  Both return None while more bytes are needed, and also after
    :meth:`feed_eof` when the connection ended cleanly between requests.
    Both raise :class:`errors.HttpError` (see the module docstring); the
    parser is then unusable: answer the error and close the connection.

    With ``defer_body_checks`` a head is returned even when its
    ``Transfer-Encoding`` or ``Content-Length`` would be refused (its
    :attr:`RequestHead.content_length` is then 0): the caller judges them
    itself, later (RAPI answers routing and credentials first), refuses the
    request and closes the connection.
    """

    def __init__(self, *, max_head_size: int = DEFAULT_MAX_HEAD_SIZE,
                 max_headers: int = DEFAULT_MAX_HEADERS,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE,
                 max_line_size: int | None = None, defer_body_checks: bool = False) -> None:
        super().__init__(max_head_size=max_head_size, max_headers=max_headers,
                         max_body_size=max_body_size, max_line_size=max_line_size)
        self.defer_body_checks = defer_body_checks

    def head(self) -> RequestHead | None:
        """The head of the next request, once complete; None while more bytes are needed."""
        head = self._find_head()
        assert head is None or isinstance(head, RequestHead)
        return head

    def next_request(self) -> Request | None:
        """The next complete request (consumed from the buffer); None while more bytes are needed."""
        head = self.head()
        if head is None:
            return None
        body = self._take_body()
        return None if body is None else Request(head, body)

    def _parse_head(self, lines: list[str]) -> RequestHead:
        parts = lines[0].split(" ")
        if (len(parts) != 3 or not parts[0] or not parts[1] or parts[2] not in _VERSIONS
                or "\r" in lines[0]):
            raise self._error(f"Bad request line {lines[0][:100]!r}")
        method, target, version = parts
        headers = self._parse_headers(lines[1:])
        try:
            length = self._content_length(headers)
        except errors.HttpError:
            if not self.defer_body_checks:
                raise
            length = 0
        return RequestHead(method=method, target=target, version=version, headers=headers,
                           content_length=length or 0,
                           keep_alive=self._keep_alive(version, headers))


class ResponseParser(_Parser):
    """Incremental parser of the responses a server sends on one connection.

    Like :class:`RequestParser`; errors carry status 502.  Set
    :attr:`request_method` before each response to the method of the
    request it answers (a reply to HEAD has no body).
    """

    def __init__(self, *, request_method: str = "POST", max_head_size: int = DEFAULT_MAX_HEAD_SIZE,
                 max_headers: int = DEFAULT_MAX_HEADERS,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        super().__init__(max_head_size=max_head_size, max_headers=max_headers,
                         max_body_size=max_body_size)
        #: the method of the request the next response answers
        self.request_method = request_method

    def _error(self, message: str, status: int = 400) -> errors.HttpError:
        return errors.HttpError(message, 502)   # the server sent it: a bad gateway, whatever it was

    def head(self) -> ResponseHead | None:
        """The head of the next response, once complete; None while more bytes are needed."""
        head = self._find_head()
        assert head is None or isinstance(head, ResponseHead)
        return head

    def next_response(self) -> Response | None:
        """The next complete response (consumed from the buffer); None while more bytes are needed."""
        head = self.head()
        if head is None:
            return None
        body = self._take_body()
        return None if body is None else Response(head, body)

    def _parse_head(self, lines: list[str]) -> ResponseHead:
        parts = lines[0].split(" ", 2)
        if (len(parts) < 2 or parts[0] not in _VERSIONS or len(parts[1]) != 3
                or not (parts[1].isascii() and parts[1].isdigit())):
            raise self._error(f"Bad status line {lines[0][:100]!r}")
        version, status = parts[0], int(parts[1])
        headers = self._parse_headers(lines[1:])
        if status < 200 or status in (204, 304) or self.request_method == "HEAD":
            length = 0
        else:
            declared = self._content_length(headers)
            if declared is None:
                raise self._error("The response has no Content-Length")
            length = declared
        return ResponseHead(status=status, reason=parts[2] if len(parts) > 2 else "",
                            version=version, headers=headers, content_length=length,
                            keep_alive=self._keep_alive(version, headers))


def _head_bytes(start_line: str, headers: HeaderItems, length: int | None,
                keep_alive: bool, announce: bool = False) -> bytes:
    items = headers.items() if isinstance(headers, Mapping) else headers
    lines = [start_line]
    for name, value in items:
        if name.lower() in _FRAMING_HEADERS:
            raise errors.ProgrammerError(f"Header {name!r} is written by the HTTP framing itself")
        lines.append(f"{name}: {value}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if not keep_alive:
        lines.append("Connection: close")
    elif announce:
        lines.append("Connection: keep-alive")
    text = "\r\n".join(lines) + "\r\n\r\n"
    # exactly one CR and one LF per line: no header can smuggle a line break
    if text.count("\n") != len(lines) + 1 or text.count("\r") != len(lines) + 1:
        raise errors.ProgrammerError(f"CR or LF inside an HTTP header: {start_line[:100]!r}")
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise errors.ProgrammerError(f"HTTP head not encodable as latin-1: {exc}") from exc


def build_request(method: str, target: str, headers: HeaderItems = (), body: bytes = b"", *,
                  keep_alive: bool = True, announce_keep_alive: bool = False) -> bytes:
    """The bytes of an HTTP/1.1 request: request line, headers, ``Content-Length``, body.

    ``Content-Length`` and (with ``keep_alive=False``) ``Connection: close``,
    or with ``announce_keep_alive`` ``Connection: keep-alive`` (for a peer
    that keeps a connection only when asked so, like the node daemon),
    are added here; passing them in ``headers`` is a
    :class:`errors.ProgrammerError`, and so is a space in ``target`` or a CR
    or LF anywhere in the head.
    """
    if " " in target or not target or not method:
        raise errors.ProgrammerError(f"Bad HTTP request target {method!r} {target!r}")
    return _head_bytes(f"{method} {target} HTTP/1.1", headers, len(body), keep_alive,
                       announce_keep_alive) + body


def build_stream_head(status: int, headers: HeaderItems = ()) -> bytes:
    """The head of a response whose body ends when the connection closes (no
    ``Content-Length``; ``Connection: close``), e.g. a Server-Sent Events stream."""
    return _head_bytes(f"HTTP/1.1 {status} {reason_phrase(status)}", headers, None, False)


def build_response(status: int, headers: HeaderItems = (), body: bytes = b"", *,
                   reason: str | None = None, keep_alive: bool = True,
                   announce_keep_alive: bool = False, head_only: bool = False) -> bytes:
    """The bytes of an HTTP/1.1 response: status line, headers, ``Content-Length``, body.

    ``reason`` defaults to the standard phrase.  ``head_only`` is for a
    reply to HEAD: ``Content-Length`` still gives ``len(body)`` but the
    body is not sent.  1xx, 204 and 304 replies carry neither (a body for
    them is a :class:`errors.ProgrammerError`).  Framing headers as in
    :func:`build_request`.
    """
    if not 100 <= status <= 999:
        raise errors.ProgrammerError(f"Bad HTTP status {status}")
    bodyless = status < 200 or status in (204, 304)
    if bodyless and body:
        raise errors.ProgrammerError(f"An HTTP {status} reply cannot have a body")
    line = f"HTTP/1.1 {status} {reason_phrase(status) if reason is None else reason}"
    head = _head_bytes(line, headers, None if bodyless else len(body), keep_alive,
                       announce_keep_alive)
    return head if head_only or bodyless else head + body
