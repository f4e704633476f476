"""The RAPI server's pure checks: request headers, TLS context, users table."""

from __future__ import annotations

import email.message
import json
import os
import ssl
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes.clock import FakeClock  # noqa: E402

from ganeti import crypto, errors  # noqa: E402
from ganeti.server import rapi  # noqa: E402


def _headers(**kv: str) -> email.message.Message:
    msg = email.message.Message()
    for key, value in kv.items():
        msg[key.replace("_", "-")] = value
    return msg


@pytest.mark.parametrize("headers,status", [
    ({"Transfer_Encoding": "chunked"}, 501),
    ({"Content_Length": "abc"}, 400),
    ({"Content_Length": "-1"}, 400),
    ({"Content_Length": "\u00b2"}, 400),      # "²".isdigit() but not a number
    ({"Content_Length": str(rapi.MAX_BODY + 1), "Content_Type": "application/json"}, 413),
    ({"Content_Length": "5", "Content_Type": "text/plain"}, 415),
    ({"Content_Length": "5"}, 415),
])
def test_refused_bodies(headers, status):
    with pytest.raises(errors.HttpError) as exc:
        rapi.check_request_body("PUT", _headers(**headers))
    assert exc.value.status == status


def test_anonymous_bodies_have_the_small_limit():
    small, big = rapi.body_limit(False), rapi.body_limit(True)
    assert small == rapi.MAX_ANONYMOUS_BODY < big == rapi.MAX_BODY
    json_of = {"Content_Type": "application/json"}
    assert rapi.check_request_body("PUT", _headers(Content_Length=str(small), **json_of),
                                   small) == small
    for length in (str(small + 1), "9" * 5000):       # no int() of 5,000 digits
        with pytest.raises(errors.HttpError, match="without credentials") as exc:
            rapi.check_request_body("PUT", _headers(Content_Length=length, **json_of), small)
        assert exc.value.status == 413 and len(str(exc.value)) < 200
    assert rapi.check_request_body("PUT", _headers(Content_Length=str(small + 1),
                                                   **json_of), big) == small + 1
    assert rapi.check_request_body("PUT", _headers(Content_Length="0" * 5000 + "12",
                                                   **json_of), small) == 12
    assert rapi.check_request_body("PUT", _headers(Content_Length="0" * 5000), small) == 0


@pytest.mark.parametrize("data, text", [
    (b"[" * (rapi.MAX_JSON_DEPTH + 1) + b"]" * (rapi.MAX_JSON_DEPTH + 1), "nested too deep"),
    (b"[" + b"{}," * rapi.MAX_JSON_VALUES + b"{}]", "too large"),
    (b"{", "Invalid JSON"),
], ids=["deep", "many", "broken"])
def test_decode_body_bounds_the_shape_first(data, text):
    with pytest.raises(errors.HttpError, match=text) as exc:
        rapi.decode_body(data)
    assert exc.value.status == 400


def test_decode_body_takes_ordinary_json():
    assert rapi.decode_body(b'{"fields": ["name"], "filter": ["=", "name", "a[b"]}') == {
        "fields": ["name"], "filter": ["=", "name", "a[b"]}


def test_accepted_bodies():
    assert rapi.check_request_body("GET", _headers()) == 0
    assert rapi.check_request_body("PUT", _headers(
        Content_Length="7", Content_Type="application/json; charset=utf-8")) == 7
    assert rapi.check_request_body("PUT", _headers(Content_Length="0")) == 0


def test_tls_context(tmp_path):
    key, cert = crypto.generate_self_signed_cert("rapi.test")
    pem = tmp_path / "rapi.pem"
    crypto.write_pem_pair(str(pem), key, cert)
    ctx = rapi.make_tls_context(str(pem))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.options & ssl.OP_NO_RENEGOTIATION
    assert ctx.options & ssl.OP_IGNORE_UNEXPECTED_EOF


def test_users_table_keeps_old_table_on_error(tmp_path, caplog):
    path = tmp_path / "users"
    path.write_text("jack pw write\n")
    path.chmod(0o600)
    table = rapi.UsersTable(str(path))
    assert set(table.get()) == {"jack"}
    path.write_text("jack\n")
    assert table.reload() is False
    assert set(table.get()) == {"jack"}
    assert "keeping the previous users" in caplog.text
    path.write_text("jill pw read\n")
    path.chmod(0o644)
    assert table.reload() is True and set(table.get()) == {"jill"}
    assert "accessible by others" in caplog.text


def test_users_file_is_not_read_through_a_symlink_or_a_fifo(tmp_path, caplog):
    path = tmp_path / "users"
    path.write_text("jack pw write\n")
    path.chmod(0o600)
    table = rapi.UsersTable(str(path))
    other = tmp_path / "other"
    other.write_text("mallory pw write\n")
    path.unlink()
    path.symlink_to(other)
    assert table.reload() is False and set(table.get()) == {"jack"}
    assert "is a symbolic link" in caplog.text
    path.unlink()
    os.mkfifo(path)
    assert table.reload() is False and set(table.get()) == {"jack"}   # did not block
    assert "is a FIFO" in caplog.text


def test_listen_backlog_takes_a_burst_of_clients():
    # socketserver's default (5) dropped SYNs of 50 concurrent clients (bench_rapi.py)
    assert rapi.RapiServer.request_queue_size >= 128


class _FakeSock:
    """recv_into hands out one byte per call; records the timeouts set."""

    def __init__(self, data: bytes, clock: Any, step: float) -> None:
        self.data, self.clock, self.step = data, clock, step
        self.timeouts: list[float] = []

    def settimeout(self, value: float) -> None:
        self.timeouts.append(value)

    def recv_into(self, buf: Any) -> int:
        self.clock.advance(self.step)          # the client takes `step` per byte
        if not self.data:
            return 0
        buf[0:1], self.data = self.data[:1], self.data[1:]
        return 1


def test_deadline_reader_ends_a_dripped_request_and_restores_the_timeout() -> None:
    clock = FakeClock()
    sock = _FakeSock(b"GET / HTTP/1.1\r\n", clock, step=3.0)
    reader = rapi.DeadlineReader(sock, 10.0, clock)
    buf = bytearray(1)
    assert reader.readinto(buf) == 1 and sock.timeouts == []     # not armed: plain reads
    reader.arm()
    got = 0
    with pytest.raises(TimeoutError):
        for _ in range(100):
            got += reader.readinto(buf)
    assert got == 4                           # 3 s a byte: 4 reads fit in the 10 s
    assert sock.timeouts[0] == 10.0 and sock.timeouts[-1] == 10.0
    assert min(sock.timeouts) < 10.0          # the last reads waited only the time left
    reader.disarm()
    assert reader.readinto(buf) == 1


@pytest.mark.parametrize("exc", [errors.NotMasterError("This node is no longer the master;"
                                                       " the master is node2"),
                                 errors.MasterFailingOverError("The master is failing over")],
                         ids=["fenced", "failing-over"])
def test_not_the_master_is_503(exc):
    assert rapi._status_of(exc) == 503


# --- the request line and headers, as RAPI judges them ----------------------------------------

@pytest.mark.parametrize(("line", "status"), [
    ("GET /version", 400), ("GET /version HTTP/2.0", 505), ("GET / HTTP/3.1", 505),
], ids=["http09", "http2", "http3"])
def test_request_lines_answered_before_the_headers(line: str, status: int) -> None:
    with pytest.raises(errors.HttpError) as info:
        rapi.check_request_line(line)
    assert info.value.status == status


@pytest.mark.parametrize("line", ["GET /version HTTP/1.1", "GET /version HTTP/1.0",
                                  "NOT-HTTP", "GET / HTTP/1.1 extra", "GET / HTTP/x.y"])
def test_other_request_lines_are_left_to_the_framing(line: str) -> None:
    rapi.check_request_line(line)


def test_request_headers_by_any_case_and_list_values() -> None:
    headers = rapi.RequestHeaders({"content-length": "2, 2", "authorization": "Basic x"})
    assert headers.get("Authorization") == "Basic x" and headers.get("X-None") is None
    assert headers.get_all("Content-Length") == ["2", "2"]
    assert rapi.check_request_body("PUT", rapi.RequestHeaders(
        {"content-length": "2", "content-type": "application/json"})) == 2


def test_error_body_is_ganeti_json() -> None:
    assert json.loads(rapi.error_body(414)) == {
        "code": 414, "message": "Request-URI Too Long", "explain": "Request-URI Too Long"}
    assert json.loads(rapi.error_body(400, "bad"))["explain"] == "bad"


class _Sent:
    """What ``_send_error`` needs of a connection; the answer is kept, not sent."""

    def __init__(self, *, bearer: bool = False) -> None:
        self._ui, self._bearer, self._method, self._user = False, bearer, "PUT", "ann\nx"
        self.client_address = ("192.0.2.1", 1)
        self._allow: list[str] = []
        self._body_unread = self._close = False
        self.answers: list[tuple[int, list[tuple[str, str]]]] = []

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.answers.append((status, headers))


def test_a_refusal_is_logged_on_one_line_whatever_the_names(caplog):
    conn = _Sent()
    forged = "instance 'a\nRefused PUT to user admin from 10.0.0.1: ok' is not tagged"
    rapi._Handler._send_error(conn, 403, forged)  # type: ignore[arg-type]
    (record,) = [r for r in caplog.records if r.getMessage().startswith("Refused")]
    assert "\n" not in record.getMessage() and "'ann\\nx'" in record.getMessage()


@pytest.mark.parametrize("bearer, challenge", [(True, "Bearer "), (False, "Basic ")],
                         ids=["bearer", "basic"])
def test_a_failed_credential_is_challenged_with_its_scheme(bearer, challenge):
    conn = _Sent(bearer=bearer)
    rapi._Handler._send_error(conn, 401, "Invalid, expired or revoked token")  # type: ignore[arg-type]
    ((status, headers),) = conn.answers
    assert status == 401 and dict(headers)["WWW-Authenticate"].startswith(challenge)
