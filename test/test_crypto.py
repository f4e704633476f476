"""Tests for ganeti.crypto."""

from __future__ import annotations

import datetime
import os
import ssl
import stat

import pytest

from ganeti import crypto, errors


@pytest.fixture(scope="module")
def pair() -> tuple[bytes, bytes]:
    return crypto.generate_self_signed_cert("node.example.com", 30)


def test_generate_gives_key_and_cert(pair: tuple[bytes, bytes]) -> None:
    key_pem, cert_pem = pair
    assert b"PRIVATE KEY" in key_pem
    assert cert_pem.startswith(b"-----BEGIN CERTIFICATE-----")


def test_write_pem_pair_mode_and_roundtrip(tmp_path, pair) -> None:
    path = str(tmp_path / "sub" / "server.pem")
    crypto.write_pem_pair(path, *pair)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert crypto.load_pem_pair(path) == (pair[0].strip() + b"\n", pair[1].strip() + b"\n")
    assert crypto.load_cert(path).strip() == pair[1].strip()


def test_written_file_is_usable_by_ssl(tmp_path, pair) -> None:
    path = str(tmp_path / "server.pem")
    crypto.write_pem_pair(path, *pair)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(path)
    ctx.load_verify_locations(cafile=path)


def test_rsa_key(tmp_path) -> None:
    key_pem, cert_pem = crypto.generate_self_signed_cert(key_type="rsa", key_bits=2048)
    path = str(tmp_path / "rsa.pem")
    crypto.write_pem_pair(path, key_pem, cert_pem)
    assert crypto.verify_cert(path) == []


@pytest.mark.parametrize("kwargs", [{"key_type": "dsa"}, {"key_type": "rsa", "key_bits": 1024}],
                         ids=["unknown-type", "weak-rsa"])
def test_bad_key_parameters_refused(kwargs) -> None:
    with pytest.raises(errors.ProgrammerError):
        crypto.generate_self_signed_cert(**kwargs)


def test_fingerprints(pair) -> None:
    fp = crypto.cert_fingerprint(pair[1])
    assert fp.startswith("sha256:") and len(fp) == len("sha256:") + 64
    assert crypto.cert_fingerprint(pair[1]) == fp
    other = crypto.generate_self_signed_cert()[1]
    assert crypto.cert_fingerprint(other) != fp
    sha1 = crypto.cert_fingerprint_sha1(pair[1])
    assert len(sha1.split(":")) == 20 and sha1 == sha1.upper()
    assert sha1.replace(":", "").lower() == crypto.cert_fingerprint(pair[1], "sha1").split(":")[1]


def test_fingerprint_of_garbage_raises() -> None:
    with pytest.raises(errors.CertificateError):
        crypto.cert_fingerprint(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")


def test_verify_missing_file(tmp_path) -> None:
    problems = crypto.verify_cert(str(tmp_path / "nope.pem"))
    assert len(problems) == 1 and "missing" in problems[0]


def test_verify_file_without_key(tmp_path, pair) -> None:
    path = tmp_path / "c.pem"
    path.write_bytes(pair[1])
    assert "No private key" in crypto.verify_cert(str(path))[0]


def test_verify_garbage_file(tmp_path) -> None:
    path = tmp_path / "c.pem"
    path.write_bytes(b"hello")
    assert crypto.verify_cert(str(path))


def test_verify_expiring_and_expired(tmp_path, pair) -> None:
    path = str(tmp_path / "server.pem")
    crypto.write_pem_pair(path, *pair)   # valid 30 days
    now = datetime.datetime.now(datetime.timezone.utc)
    assert crypto.verify_cert(path, warn_days=7, now=now) == []
    soon = crypto.verify_cert(path, warn_days=7, now=now + datetime.timedelta(days=25))
    assert len(soon) == 1 and "expires in" in soon[0]
    gone = crypto.verify_cert(path, now=now + datetime.timedelta(days=31))
    assert len(gone) == 1 and "expired" in gone[0]
    early = crypto.verify_cert(path, now=now - datetime.timedelta(days=1))
    assert any("not valid before" in p for p in early)


def test_not_after(pair) -> None:
    expiry = crypto.cert_not_after(pair[1])
    delta = expiry - datetime.datetime.now(datetime.timezone.utc)
    assert datetime.timedelta(days=29) < delta <= datetime.timedelta(days=30)
