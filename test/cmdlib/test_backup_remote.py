"""The remote export parameters, checked as Ganeti's (ganeti.cmdlib.backup_remote)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ganeti import crypto, errors
from ganeti.cmdlib import backup_remote as br

CDS = "0123456789abcdef" * 4


@pytest.fixture(scope="module")
def cert_pem() -> str:
    _key, cert = crypto.generate_self_signed_cert("other.cluster")
    return cert.decode()


def _op(cert_pem: str, targets: list, cds: str = CDS) -> SimpleNamespace:
    return SimpleNamespace(
        x509_key_name=["x509-key", br.sha1_hmac(cds, "x509-key", "s1"), "s1"],
        destination_x509_ca=br.sign_certificate(cds, cert_pem, "5a17"),
        target_node=targets)


def test_hmac_is_ganetis_salted_sha1() -> None:
    # hmac-sha1("key", "salt" + "text"), as Ganeti's utils.Sha1Hmac
    assert br.sha1_hmac("key", "text", "salt") == "8cc1629a03751e98f849ac26a65e594b315b34d9"


def test_a_well_signed_export_gives_the_destinations(cert_pem) -> None:
    targets = [br.sign_disk_info(CDS, "ab", i, "192.0.2.9", 11000 + i, f"m{i}")
               for i in range(2)]
    assert br.check_remote_export(CDS, _op(cert_pem, targets), 2) == [
        ("192.0.2.9", 11000, "m0"), ("192.0.2.9", 11001, "m1")]


def test_signed_certificate_layout(cert_pem) -> None:
    signed = br.sign_certificate(CDS, cert_pem, "5a17")
    header, blank, rest = signed.split("\n", 2)
    assert header.startswith("X-Ganeti-Signature: 5a17/") and blank == ""
    assert rest.startswith("-----BEGIN CERTIFICATE-----")
    assert br.load_signed_ca(CDS, signed) == rest


@pytest.mark.parametrize("change,match", [
    (lambda op: setattr(op, "x509_key_name", None), "Missing X509 key name"),
    (lambda op: setattr(op, "x509_key_name", ["k", "00", "s"]), "HMAC for X509 key name"),
    (lambda op: setattr(op, "x509_key_name", "k"), "Invalid data for X509 key name"),
    (lambda op: setattr(op, "destination_x509_ca", ""), "Missing destination X509 CA"),
    (lambda op: setattr(op, "destination_x509_ca",
                        op.destination_x509_ca.split("\n", 2)[2]), "signature is missing"),
    (lambda op: setattr(op, "destination_x509_ca",
                        op.destination_x509_ca.replace("/", "/0", 1)), "signature is invalid"),
    (lambda op: setattr(op, "target_node", "node2"), "list of destinations"),
    (lambda op: setattr(op, "target_node", []), "Expected 1 targets, got 0"),
    (lambda op: op.target_node[0].__setitem__(1, 11001), "disk 0 does not match: HMAC"),
    (lambda op: op.target_node.__setitem__(0, ["h", 1]), "disk 0 does not match: Invalid"),
], ids=["no-key", "key-hmac", "key-shape", "no-ca", "ca-unsigned", "ca-hmac", "not-list",
        "count", "disk-hmac", "disk-shape"])
def test_bad_parameters_are_refused(cert_pem, change, match) -> None:
    op = _op(cert_pem, [br.sign_disk_info(CDS, "ab", 0, "192.0.2.9", 11000, "m0")])
    change(op)
    with pytest.raises(errors.OpPrereqError, match=match):
        br.check_remote_export(CDS, op, 1)


def test_another_domain_secret_is_refused(cert_pem) -> None:
    op = _op(cert_pem, [br.sign_disk_info(CDS, "ab", 0, "192.0.2.9", 11000, "m0")],
             cds="f" * 64)
    with pytest.raises(errors.OpPrereqError, match="HMAC"):
        br.check_remote_export(CDS, op, 1)
