"""The RAPI server's HTTP framing on odd input, in-process over TLS on loopback.

No cluster: the rows used here (``/version``, ``/2/features``, refusals)
never reach LUXI.  Each test is one way a malformed request once got a
wrong or broken answer (found by test_rapi_fuzz.py).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading

import pytest
import rapi_fuzz

from ganeti import crypto
from ganeti.server import rapi
from ganeti.server.logsetup import AccessLog

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rapi")
    key, cert = crypto.generate_self_signed_cert("rapi.test")
    crypto.write_pem_pair(str(tmp / "rapi.pem"), key, cert)
    (tmp / "users").write_text("writer wpass write\n")
    srv = rapi.RapiServer(("127.0.0.1", 0), rapi.make_tls_context(str(tmp / "rapi.pem")),
                          users_table=rapi.UsersTable(str(tmp / "users")),
                          access_log=AccessLog(str(tmp / "access.log")),
                          luxi_address=str(tmp / "no-masterd"))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    yield srv.server_address
    srv.shutdown()
    thread.join(10)
    srv.server_close()


def _exchange(address, *chunks: bytes, half_close: bool = False) -> list[rapi_fuzz.Answer]:
    """Send ``chunks`` on one connection; every answer until the server closes."""
    fuzzer = rapi_fuzz.Fuzzer(address, timeout=15)
    sock = fuzzer._connect()
    try:
        for chunk in chunks:
            sock.sendall(chunk)
        if half_close:
            socket.socket.shutdown(sock, socket.SHUT_WR)
        answers = []
        while True:
            answer = rapi_fuzz._read_answer(fuzzer._fh, head=False)
            if answer.status == 0:
                return answers
            answers.append(answer)
            if answer.headers.get("connection") == "close":
                return answers
    finally:
        fuzzer.close()


_VERSION = b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def test_http09_request_gets_a_status_line(server):
    (answer,) = _exchange(server, b"GET /version\r\n")
    assert answer.status == 400 and b"HTTP/0.9" in answer.body


def test_error_before_the_version_gets_a_status_line(server):
    (answer,) = _exchange(server, b"NOT-HTTP\r\n\r\n")
    assert answer.status == 400
    (answer,) = _exchange(server, b"GET /version HTTP/2.0\r\n\r\n")
    assert answer.status == 505


@pytest.mark.parametrize("request_head", [
    b"GET /version HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n",       # 415
    b"PUT /2/tags?tag=a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",  # 401
    b"POST /version HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",  # 501
], ids=["415", "401", "501"])
def test_unread_body_is_never_taken_for_the_next_request(server, request_head):
    smuggled = b"GET /2/features HTTP/1.1\r\nHost: x\r\n\r\n"
    answers = _exchange(server, request_head + b"Content-Length: %d\r\n\r\n" % len(smuggled)
                        + smuggled)
    assert len(answers) == 1 and answers[0].status in (401, 415, 501)
    assert answers[0].headers["connection"] == "close"


def test_path_that_is_not_utf8_is_a_400(server):
    (answer,) = _exchange(server, b"GET /2/%ff HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.status == 400


def test_body_shorter_than_promised_then_half_close(server):
    (answer,) = _exchange(server, b"GET /version HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{}",
                          half_close=True)
    assert answer.status == 400 and b"ended early" in answer.body


def test_answer_survives_a_client_still_sending(server):
    # the server answers 414 after 64 KiB of request line, the client sends on: without
    # the lingering close, the reset often came before the answer was read
    for size in range(70_000, 500_000, 43_000):
        (answer,) = _exchange(server, b"GET /" + b"a" * size + b" HTTP/1.1\r\n\r\n")
        assert answer.status == 414


def test_server_still_answers(server):
    (answer,) = _exchange(server, _VERSION)
    assert answer.status == 200 and answer.body == b"2"


# --- a client dripping its request -----------------------------------------------------------

@pytest.fixture(scope="module")
def quick_server(tmp_path_factory):
    """A server whose requests must arrive within 1 s (the daemon's: 10 s)."""
    tmp = tmp_path_factory.mktemp("rapi-quick")
    key, cert = crypto.generate_self_signed_cert("rapi.test")
    crypto.write_pem_pair(str(tmp / "rapi.pem"), key, cert)
    (tmp / "users").write_text("")
    srv = rapi.RapiServer(("127.0.0.1", 0), rapi.make_tls_context(str(tmp / "rapi.pem")),
                          users_table=rapi.UsersTable(str(tmp / "users")),
                          access_log=AccessLog(str(tmp / "access.log")),
                          luxi_address=str(tmp / "no-masterd"), limits=dataclasses.replace(rapi.LIMITS, request_timeout=1.0))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    yield srv.server_address
    srv.shutdown()
    thread.join(10)
    srv.server_close()


def test_a_dripping_request_head_is_dropped(quick_server):
    head = b"GET /version HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40 + b"\r\n\r\n"
    assert rapi_fuzz.drip(quick_server, head) < len(head), "the server waited for the dripped head"
    answers = _exchange(quick_server, b"GET /version HTTP/1.1\r\nHost: x\r\n"
                                      b"Connection: close\r\n\r\n")
    assert [a.status for a in answers] == [200]     # and it still serves others


def test_a_dripping_request_body_is_dropped(quick_server):
    body = b'["' + b"a" * 40 + b'"]'
    head = (b"PUT /2/query/node HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    assert rapi_fuzz.drip(quick_server, head, body) < len(body), \
        "the server waited for the dripped body"


# --- certificate reload ------------------------------------------------------------------------

def _served_cert(address) -> bytes:
    import ssl
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    with socket.create_connection(address, timeout=15) as raw:
        with tls.wrap_socket(raw) as sock:
            return sock.getpeercert(binary_form=True)


def _pem_cert(path) -> bytes:
    import ssl
    text = path.read_text()
    return ssl.PEM_cert_to_DER_cert(text[text.index("-----BEGIN CERTIFICATE-----"):])


def _new_pem(path, name: str) -> None:
    key, cert = crypto.generate_self_signed_cert(name)
    crypto.write_pem_pair(str(path) + ".new", key, cert)
    os.replace(str(path) + ".new", path)


def test_certificate_reload_for_new_connections(tmp_path):
    import time
    pem = tmp_path / "rapi.pem"
    _new_pem(pem, "first.test")
    (tmp_path / "users").write_text("")
    srv = rapi.RapiServer(("127.0.0.1", 0), rapi.make_tls_context(str(pem)),
                          users_table=rapi.UsersTable(str(tmp_path / "users")),
                          access_log=AccessLog(str(tmp_path / "access.log")),
                          luxi_address=str(tmp_path / "no-masterd"), pem=str(pem))
    stop, wake = threading.Event(), threading.Event()
    threads = [threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}),
               threading.Thread(target=rapi._watch_files,
                                args=([(str(pem), srv.reload_certificate)], stop, wake))]
    for thread in threads:
        thread.start()
    try:
        first = _served_cert(srv.server_address)
        assert first == _pem_cert(pem)
        _new_pem(pem, "second.test")                # the file changes: inotify reloads
        second = _pem_cert(pem)
        for _ in range(100):
            if _served_cert(srv.server_address) == second:
                break
            time.sleep(0.1)
        assert _served_cert(srv.server_address) == second != first
        pem.write_text("-----BEGIN garbage")         # a broken file: the old one stays
        wake.set()                                   # (what SIGHUP does)
        for _ in range(100):
            if not wake.is_set():
                break
            time.sleep(0.05)
        assert srv.reload_certificate() is False
        assert _served_cert(srv.server_address) == second
    finally:
        stop.set()
        srv.shutdown()
        for thread in threads:
            thread.join(10)
        srv.server_close()


# --- a bounded pool: event streams do not hold its workers ----------------------------------

def test_open_event_streams_leave_the_one_worker_to_requests(tmp_path):
    key, cert = crypto.generate_self_signed_cert("rapi.test")
    crypto.write_pem_pair(str(tmp_path / "rapi.pem"), key, cert)
    (tmp_path / "users").write_text("")
    srv = rapi.RapiServer(("127.0.0.1", 0), rapi.make_tls_context(str(tmp_path / "rapi.pem")),
                          users_table=rapi.UsersTable(str(tmp_path / "users")),
                          access_log=AccessLog(str(tmp_path / "access.log")),
                          luxi_address=str(tmp_path / "no-masterd"), limits=dataclasses.replace(rapi.LIMITS, max_children=1))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    streams = []
    try:
        for _ in range(3):      # three streams, each opened while the others stay open
            fuzzer = rapi_fuzz.Fuzzer(srv.server_address, timeout=15)
            streams.append(fuzzer)
            sock = fuzzer._connect()
            sock.sendall(b"GET /2/events HTTP/1.1\r\nHost: x\r\n\r\n")
            status = fuzzer._fh.readline(1000)
            assert status.startswith(b"HTTP/1.1 200 ")
            head = b""
            for _ in range(20):
                line = fuzzer._fh.readline(1000)
                head += line
                if line in (b"\r\n", b""):
                    break
            assert b"text/event-stream" in head.lower() and b"content-length" not in head.lower()
        (answer,) = _exchange(srv.server_address, _VERSION)
        assert answer.status == 200 and answer.body == b"2"
    finally:
        srv.stopping.set()
        for fuzzer in streams:
            fuzzer.close()
        srv.shutdown()
        thread.join(10)
        srv.server_close()
