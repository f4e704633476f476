"""ganeti.http.framing: HTTP/1.1 messages from bytes and back, fed any way the network splits them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganeti import errors
from ganeti.http import framing

REQUEST = (b"POST /version HTTP/1.1\r\nHost: node1:1811\r\nContent-Type: application/json\r\n"
           b"Content-Length: 2\r\n\r\n[]")
RESPONSE = (b"HTTP/1.1 200 OK\r\nServer: Ganeti 3.0\r\nContent-Length: 15\r\n"
            b"Connection: close\r\n\r\n[true, 3000000]")


def _parse_requests(data: bytes, **limits: int) -> list[framing.Request]:
    parser = framing.RequestParser(**limits)
    parser.feed(data)
    parser.feed_eof()
    found = []
    while (request := parser.next_request()) is not None:
        found.append(request)
    return found


def _parse_one(data: bytes, **limits: int) -> framing.Request:
    [request] = _parse_requests(data, **limits)
    return request


def _refused(data: bytes, **limits: int) -> errors.HttpError:
    with pytest.raises(errors.HttpError) as info:
        _parse_requests(data, **limits)
    return info.value


def _parse_response(data: bytes, **kwargs) -> framing.Response:
    parser = framing.ResponseParser(**kwargs)
    parser.feed(data)
    parser.feed_eof()
    response = parser.next_response()
    assert response is not None
    return response


# --- requests ---

def test_request_fields() -> None:
    request = _parse_one(REQUEST)
    assert (request.method, request.target, request.head.version) == ("POST", "/version", "HTTP/1.1")
    assert request.body == b"[]"
    assert request.headers == {"host": "node1:1811", "content-type": "application/json",
                               "content-length": "2"}
    assert request.head.content_length == 2 and request.keep_alive


def test_request_split_at_every_byte_boundary() -> None:
    for cut in range(len(REQUEST)):
        parser = framing.RequestParser()
        parser.feed(REQUEST[:cut])
        assert parser.next_request() is None, cut
        parser.feed(REQUEST[cut:])
        request = parser.next_request()
        assert request is not None and request.body == b"[]", cut
        assert parser.buffered == 0


def test_request_fed_byte_by_byte() -> None:
    parser = framing.RequestParser()
    for i in range(len(REQUEST) - 1):
        parser.feed(REQUEST[i:i + 1])
        assert parser.next_request() is None
    parser.feed(REQUEST[-1:])
    assert parser.next_request().body == b"[]"


def test_head_is_available_before_the_body() -> None:
    parser = framing.RequestParser()
    parser.feed(REQUEST[:-1])
    head = parser.head()
    assert head is not None and head.target == "/version" and head.content_length == 2
    assert parser.next_request() is None
    parser.feed(REQUEST[-1:])
    assert parser.next_request().head is head


def test_pipelined_requests() -> None:
    second = framing.build_request("POST", "/node_info", {"Host": "x"}, b'["a", 1]')
    third = b"GET /status HTTP/1.1\r\n\r\n"
    requests = _parse_requests(REQUEST + second + third)
    assert [(r.method, r.target, r.body) for r in requests] == [
        ("POST", "/version", b"[]"), ("POST", "/node_info", b'["a", 1]'), ("GET", "/status", b"")]


def test_bytes_after_a_request_stay_buffered() -> None:
    parser = framing.RequestParser()
    parser.feed(REQUEST + b"POST /x HT")
    assert parser.next_request().target == "/version"
    assert parser.buffered == len(b"POST /x HT")
    assert parser.next_request() is None


def test_clean_end_between_requests_is_none() -> None:
    parser = framing.RequestParser()
    parser.feed_eof()
    assert parser.eof and parser.head() is None and parser.next_request() is None


def test_feed_after_eof_is_a_bug() -> None:
    parser = framing.RequestParser()
    parser.feed_eof()
    with pytest.raises(errors.ProgrammerError):
        parser.feed(b"x")


def test_request_without_content_length_has_empty_body() -> None:
    request = _parse_one(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
    assert request.body == b"" and request.head.content_length == 0


def test_header_names_lower_cased_and_repeats_joined() -> None:
    request = _parse_one(b"POST / HTTP/1.1\r\ncontent-LENGTH: 1\r\nX-A: 1\r\nx-a:  2 \r\n\r\nz")
    assert request.headers["content-length"] == "1"
    assert request.headers["x-a"] == "1, 2"


def test_repeated_equal_content_lengths_accepted() -> None:
    assert _parse_one(b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab").body == b"ab"


def test_bare_lf_line_endings_accepted() -> None:
    request = _parse_one(b"POST /version HTTP/1.1\nHost: x\nContent-Length: 2\n\n[]")
    assert (request.target, request.headers["host"], request.body) == ("/version", "x", b"[]")


@pytest.mark.parametrize("version,connection,keep_alive", [
    ("HTTP/1.1", None, True),
    ("HTTP/1.1", "close", False),
    ("HTTP/1.1", "Keep-Alive, Close", False),
    ("HTTP/1.1", "keep-alive", True),
    ("HTTP/1.0", None, False),
    ("HTTP/1.0", "keep-alive", True),
    ("HTTP/1.0", "close", False),
], ids=["11-default", "11-close", "11-close-in-list", "11-keep-alive", "10-default",
        "10-keep-alive", "10-close"])
def test_keep_alive(version: str, connection: str | None, keep_alive: bool) -> None:
    extra = f"Connection: {connection}\r\n" if connection else ""
    request = _parse_one(f"GET / {version}\r\n{extra}\r\n".encode())
    assert request.keep_alive is keep_alive


@pytest.mark.parametrize("line", [
    b"BOGUS", b"GET /", b"GET / HTTP/2.0", b"POST /version SPDY/3", b"GET  / HTTP/1.1",
    b"GET / HTTP/1.1 extra", b" / HTTP/1.1", b"\x00\x01garbage", b"GET /a\rb HTTP/1.1",
], ids=["one-word", "two-words", "http2", "spdy", "double-space", "four-words", "no-method",
        "garbage", "bare-cr"])
def test_bad_request_line(line: bytes) -> None:
    err = _refused(line + b"\r\n\r\n")
    assert err.status == 400 and "Bad request line" in str(err)


@pytest.mark.parametrize("line", [
    b"no colon", b": empty name", b"Content-Length : 2", b" folded: continuation",
    b"\tfolded: continuation", b"X-A: b\rc",
], ids=["no-colon", "empty-name", "space-before-colon", "obs-fold-space", "obs-fold-tab",
        "bare-cr"])
def test_bad_header_line(line: bytes) -> None:
    err = _refused(b"POST / HTTP/1.1\r\nHost: x\r\n" + line + b"\r\n\r\n")
    assert err.status == 400 and "Bad header line" in str(err)


@pytest.mark.parametrize("value", [b"abc", b"-1", b"+2", b"1.0", b"0x10", b"\xb2", b"", b"2 2"],
                         ids=["word", "negative", "plus", "float", "hex", "superscript", "empty",
                              "two-numbers"])
def test_invalid_content_length(value: bytes) -> None:
    err = _refused(b"POST / HTTP/1.1\r\nContent-Length: " + value + b"\r\n\r\n[]")
    assert err.status == 400 and "Invalid Content-Length" in str(err)


def test_conflicting_content_lengths() -> None:
    err = _refused(b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n[]")
    assert err.status == 400 and "Conflicting Content-Length" in str(err)


@pytest.mark.parametrize("value", [b"11", b"1000000000000", b"9" * 5000],
                         ids=["just-over", "huge", "5000-digits"])
def test_body_over_the_limit_refused_from_the_head(value: bytes) -> None:
    parser = framing.RequestParser(max_body_size=10)
    parser.feed(b"POST / HTTP/1.1\r\nContent-Length: " + value + b"\r\n\r\n")   # no body byte yet
    with pytest.raises(errors.HttpError, match="Body too large") as info:
        parser.head()
    assert info.value.status == 413


def test_body_at_the_limit_accepted() -> None:
    assert _parse_one(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789",
                      max_body_size=10).body == b"0123456789"


@pytest.mark.parametrize("value", [b"chunked", b"gzip, chunked", b"identity"])
def test_transfer_encoding_refused(value: bytes) -> None:
    err = _refused(b"POST / HTTP/1.1\r\nTransfer-Encoding: " + value + b"\r\n\r\n0\r\n\r\n")
    assert err.status == 501 and "chunked bodies are refused" in str(err)


def test_head_over_the_limit_without_its_end() -> None:
    parser = framing.RequestParser(max_head_size=100)
    parser.feed(b"POST / HTTP/1.1\r\nX-Long: " + b"a" * 100)
    with pytest.raises(errors.HttpError, match="head too long") as info:
        parser.head()
    assert info.value.status == 431


def test_head_over_the_limit_with_its_end() -> None:
    err = _refused(b"POST / HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n")
    assert err.status == 431 and "too long" in str(err)


def test_head_at_the_limit_accepted() -> None:
    head = b"GET / HTTP/1.1\r\nX: " + b"a" * 20 + b"\r\n\r\n"
    assert _parse_one(head, max_head_size=len(head)).headers["x"] == "a" * 20
    assert _refused(head, max_head_size=len(head) - 1).status == 431


def test_too_many_header_lines() -> None:
    err = _refused(b"POST / HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n")
    assert err.status == 431 and "More than 100 header lines" in str(err)
    assert len(_parse_one(b"POST / HTTP/1.1\r\n" + b"X-A: b\r\n" * 100 + b"\r\n").headers) == 1


def test_head_without_its_blank_line_waits_then_fails_at_eof() -> None:
    parser = framing.RequestParser()
    parser.feed(b"POST /version HTTP/1.1\r\nContent-Length: 2\r\n")
    assert parser.head() is None
    parser.feed_eof()
    with pytest.raises(errors.HttpError, match="inside the message head") as info:
        parser.head()
    assert info.value.status == 400


def test_request_line_without_crlf_waits() -> None:
    parser = framing.RequestParser()
    parser.feed(b"POST /version HTTP/1.1")
    assert parser.head() is None and parser.next_request() is None


def test_body_shorter_than_content_length_at_eof() -> None:
    err = _refused(b"POST / HTTP/1.1\r\nContent-Length: 50\r\n\r\n[true, 1]")
    assert err.status == 400 and "closed after 9 of 50 bytes" in str(err)


# --- responses ---

def test_response_fields_and_trailing_bytes() -> None:
    parser = framing.ResponseParser()
    parser.feed(RESPONSE + b"xyz")
    response = parser.next_response()
    assert (response.status, response.reason, response.body) == (200, "OK", b"[true, 3000000]")
    assert response.headers["server"] == "Ganeti 3.0" and not response.keep_alive
    assert parser.buffered == 3


def test_response_split_at_every_byte_boundary() -> None:
    for cut in range(len(RESPONSE)):
        parser = framing.ResponseParser()
        parser.feed(RESPONSE[:cut])
        assert parser.next_response() is None, cut
        parser.feed(RESPONSE[cut:])
        assert parser.next_response().body == b"[true, 3000000]", cut


@pytest.mark.parametrize("data,status,reason", [
    (b"HTTP/1.0 404 Not Found\r\ncontent-length:3\r\n\r\nabc", 404, "Not Found"),
    (b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 200, ""),
    (b"HTTP/1.1 503 Busy right now\r\nContent-Length: 0\r\n\r\n", 503, "Busy right now"),
], ids=["http10", "no-reason", "reason-with-spaces"])
def test_status_lines(data: bytes, status: int, reason: str) -> None:
    response = _parse_response(data)
    assert (response.status, response.reason) == (status, reason)


@pytest.mark.parametrize("data,match", [
    (b"SPDY 200 OK\r\nContent-Length: 1\r\n\r\nx", "Bad status line"),
    (b"HTTP/1.1 abc OK\r\nContent-Length: 1\r\n\r\nx", "Bad status line"),
    (b"HTTP/1.1 20 OK\r\nContent-Length: 1\r\n\r\nx", "Bad status line"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "Bad header line"),
    (b"HTTP/1.1 200 OK\r\n\r\n[true, 1]", "has no Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Invalid Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "chunked bodies are refused"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n[true, 1]", "closed after 9 of 50"),
    (b"HTTP/1.1 200 OK\r\nContent-Le", "inside the message head"),
], ids=["spdy", "word-status", "two-digits", "no-colon", "no-length", "negative-length",
        "chunked", "truncated-body", "truncated-head"])
def test_bad_responses_are_bad_gateway(data: bytes, match: str) -> None:
    with pytest.raises(errors.HttpError, match=match) as info:
        _parse_response(data)
    assert info.value.status == 502


def test_response_body_over_the_limit() -> None:
    parser = framing.ResponseParser(max_body_size=4)
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    with pytest.raises(errors.HttpError, match="Body too large"):
        parser.next_response()


@pytest.mark.parametrize("status", [101, 204, 304])
def test_bodyless_statuses_need_no_content_length(status: int) -> None:
    parser = framing.ResponseParser()
    parser.feed(f"HTTP/1.1 {status} X\r\n\r\n".encode() + RESPONSE)
    assert parser.next_response().body == b""
    assert parser.next_response().status == 200


def test_reply_to_head_has_no_body() -> None:
    parser = framing.ResponseParser(request_method="HEAD")
    parser.feed(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 30\r\n\r\n")
    response = parser.next_response()
    assert response.status == 405 and response.body == b"" and parser.buffered == 0


# --- building ---

def test_build_request() -> None:
    data = framing.build_request("POST", "/version", [("Host", "n:1"), ("X-A", "1")], b"[]",
                                 keep_alive=False)
    assert data == (b"POST /version HTTP/1.1\r\nHost: n:1\r\nX-A: 1\r\nContent-Length: 2\r\n"
                    b"Connection: close\r\n\r\n[]")


def test_build_response() -> None:
    data = framing.build_response(404, {"Content-Type": "application/json"}, b"[false]")
    assert data == (b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 7\r\n\r\n[false]")


def test_build_response_for_head_keeps_the_length() -> None:
    data = framing.build_response(405, {"Allow": "POST"}, b"[false, 1]", head_only=True,
                                  keep_alive=False, reason="Nope")
    assert data == (b"HTTP/1.1 405 Nope\r\nAllow: POST\r\nContent-Length: 10\r\n"
                    b"Connection: close\r\n\r\n")


def test_build_bodyless_response() -> None:
    assert framing.build_response(204) == b"HTTP/1.1 204 No Content\r\n\r\n"
    with pytest.raises(errors.ProgrammerError):
        framing.build_response(204, body=b"x")


@pytest.mark.parametrize("headers", [
    {"X-A": "b\r\nX-Injected: 1"}, {"X-A": "b\nc"}, {"X\r\nB": "c"}, {"X-A": "b\rc"},
    {"Content-Length": "3"}, {"connection": "close"}, {"Transfer-Encoding": "chunked"},
    {"X-A": "\u20ac"},
], ids=["crlf-value", "lf-value", "crlf-name", "cr-value", "content-length", "connection",
        "transfer-encoding", "not-latin-1"])
def test_build_refuses_bad_headers(headers: dict[str, str]) -> None:
    with pytest.raises(errors.ProgrammerError):
        framing.build_request("POST", "/x", headers)
    with pytest.raises(errors.ProgrammerError):
        framing.build_response(200, headers)


@pytest.mark.parametrize("method,target", [("POST", "/a b"), ("POST", ""), ("", "/"),
                                           ("POST", "/a\r\nX: 1")])
def test_build_refuses_bad_request_lines(method: str, target: str) -> None:
    with pytest.raises(errors.ProgrammerError):
        framing.build_request(method, target)


def test_http_date() -> None:
    assert framing.http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT"
    assert framing.http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT"


def test_http_error_round_trips_with_its_status() -> None:
    back = errors.decode_exception(errors.encode_exception(errors.HttpError("too big", 413)))
    assert type(back) is errors.HttpError and back.status == 413 and str(back) == "too big"


# --- properties ---

_TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-",
                 min_size=1, max_size=20)
_VALUE = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=40)
_HEADERS = st.dictionaries(_TOKEN.filter(lambda n: n.lower() not in
                                         ("content-length", "transfer-encoding", "connection")),
                           _VALUE, max_size=5)
_REQUESTS = st.lists(st.tuples(st.sampled_from(["GET", "POST", "PUT"]),
                               _TOKEN.map(lambda t: "/" + t), _HEADERS, st.binary(max_size=300)),
                     min_size=1, max_size=4)


@given(requests=_REQUESTS, cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10))
def test_any_split_of_pipelined_requests_round_trips(requests, cuts) -> None:
    stream = b"".join(framing.build_request(m, t, h, b) for m, t, h, b in requests)
    parser = framing.RequestParser()
    got = []
    start = 0
    for cut in sorted({min(c, len(stream)) for c in cuts}) + [len(stream)]:
        parser.feed(stream[start:cut])
        start = cut
        while (request := parser.next_request()) is not None:
            got.append(request)
    parser.feed_eof()
    assert parser.next_request() is None
    assert [(r.method, r.target, r.body) for r in got] == [(m, t, b) for m, t, _, b in requests]
    for request, (_, _, headers, _) in zip(got, requests):
        lowered: dict[str, list[str]] = {}
        for name, value in headers.items():
            lowered.setdefault(name.lower(), []).append(value.strip(" \t"))
        for name, values in lowered.items():
            assert request.headers[name] == ", ".join(values)


@given(status=st.sampled_from([200, 400, 404, 413, 500, 503]), headers=_HEADERS,
       body=st.binary(max_size=500), keep_alive=st.booleans())
def test_responses_round_trip(status, headers, body, keep_alive) -> None:
    response = _parse_response(framing.build_response(status, headers, body, keep_alive=keep_alive))
    assert (response.status, response.reason, response.body, response.keep_alive) == \
        (status, framing.reason_phrase(status), body, keep_alive)


@given(data=st.binary(max_size=300))
def test_garbage_never_crashes_the_parser(data: bytes) -> None:
    parser = framing.RequestParser(max_head_size=200, max_body_size=100)
    parser.feed(data)
    parser.feed_eof()
    try:
        while parser.next_request() is not None:
            pass
    except errors.HttpError as exc:
        assert exc.status in (400, 413, 431, 501)


# --- the RAPI daemon's options: line limits, deferred body checks, the start line -----------

def test_a_long_request_line_is_a_414_before_its_end_arrives() -> None:
    parser = framing.RequestParser(max_line_size=100, max_head_size=1000)
    parser.feed(b"GET /" + b"a" * 200)
    with pytest.raises(errors.HttpError) as info:
        parser.head()
    assert info.value.status == 414


def test_a_long_header_line_is_a_431_and_short_lines_pass() -> None:
    err = _refused(b"GET / HTTP/1.1\r\nX-A: " + b"v" * 200 + b"\r\n\r\n",
                   max_line_size=100, max_head_size=1000)
    assert err.status == 431 and "Header line" in str(err)
    request = _parse_one(b"GET / HTTP/1.1\r\nX-A: " + b"v" * 90 + b"\r\n\r\n",
                         max_line_size=100, max_head_size=1000)
    assert request.headers["x-a"] == "v" * 90


def test_without_a_line_limit_a_long_head_is_a_431() -> None:
    err = _refused(b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\n\r\n", max_head_size=1000)
    assert err.status == 431


@pytest.mark.parametrize("headers", [b"Transfer-Encoding: chunked\r\n",
                                     b"Content-Length: 99999\r\n", b"Content-Length: x\r\n"],
                         ids=["chunked", "too-large", "invalid"])
def test_deferred_body_checks_give_the_head(headers: bytes) -> None:
    data = b"PUT /x HTTP/1.1\r\n" + headers + b"\r\n"
    strict = framing.RequestParser(max_body_size=100)
    strict.feed(data)
    with pytest.raises(errors.HttpError):
        strict.head()
    lenient = framing.RequestParser(max_body_size=100, defer_body_checks=True)
    lenient.feed(data)
    head = lenient.head()
    assert head is not None and head.target == "/x" and head.content_length == 0


def test_start_line_is_seen_before_the_headers_and_not_consumed() -> None:
    parser = framing.RequestParser()
    parser.feed(b"GET /version HTTP/1.1")
    assert parser.start_line() is None
    parser.feed(b"\r\nHost: x\r\n")
    assert parser.start_line() == "GET /version HTTP/1.1" and parser.head() is None
    parser.feed(b"\r\n")
    request = parser.next_request()
    assert request is not None and request.target == "/version"


def test_stream_head_has_no_content_length() -> None:
    head = framing.build_stream_head(200, [("Content-Type", "text/event-stream")])
    assert head == (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Connection: close\r\n\r\n")


def test_line_limits_hold_when_bytes_come_one_by_one_and_for_the_next_request() -> None:
    parser = framing.RequestParser(max_line_size=40, max_head_size=1000)
    first = b"GET /a HTTP/1.1\r\nX-A: " + b"v" * 30 + b"\r\n\r\n"
    for byte in first:
        parser.feed(bytes([byte]))
        parser.head()
    assert parser.next_request() is not None
    parser.feed(b"GET /b HTTP/1.1\r\nX-B: " + b"w" * 60)
    with pytest.raises(errors.HttpError) as info:
        parser.head()
    assert info.value.status == 431
