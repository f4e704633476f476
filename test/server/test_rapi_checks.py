"""The RAPI server's pure checks: request headers, TLS context, users table."""

from __future__ import annotations

import email.message
import ssl

import pytest

from ganeti import crypto, errors
from ganeti.server import rapi


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


def test_listen_backlog_takes_a_burst_of_clients():
    # socketserver's default (5) dropped SYNs of 50 concurrent clients (bench_rapi.py)
    assert rapi.RapiServer.request_queue_size >= 128
