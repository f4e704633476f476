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
    checked = br.check_remote_export(CDS, _op(cert_pem, targets), 2)
    assert checked.dests == [("192.0.2.9", 11000, "m0"), ("192.0.2.9", 11001, "m1")]
    assert checked.key_name == "x509-key" and checked.dest_ca.strip() == cert_pem.strip()


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


# --- the remote import's side: handshake, magic, the source's certificate ------------------

def test_a_handshake_checks_with_the_same_secret_only() -> None:
    handshake = br.compute_handshake(CDS, "5a17")
    assert handshake[0] == br.RIE_VERSION == 0 and handshake[2] == "5a17"
    # hmac-sha1 over "0:Hi, I'm Ganeti", as Ganeti's ComputeRemoteExportHandshake
    assert handshake[1] == br.sha1_hmac(CDS, "0:Hi, I'm Ganeti", "5a17")
    br.check_handshake(CDS, handshake)
    with pytest.raises(errors.OpPrereqError, match="Hash didn't match, clusters don't share"
                       " the same domain secret"):
        br.check_handshake("f" * 64, handshake)


@pytest.mark.parametrize("bad", [None, "x", [0, "aa"], [0, "aa", "bb", "cc"]])
def test_a_malformed_handshake_is_refused(bad) -> None:
    with pytest.raises(errors.OpPrereqError, match="Invalid handshake: Invalid data"):
        br.check_handshake(CDS, bad)


def test_a_handshake_of_another_protocol_version_is_refused() -> None:
    other = [1, br.sha1_hmac(CDS, "1:Hi, I'm Ganeti", "ab"), "ab"]
    with pytest.raises(errors.OpPrereqError, match=r"same remote import/export protocol"
                       r" \(local=0, remote=1\)"):
        br.check_handshake(CDS, other)


def test_disk_magic_is_per_transfer_instance_and_disk() -> None:
    magic = br.disk_magic("base1", "web1", 0)
    assert magic == br.disk_magic("base1", "web1", 0) and len(magic) == 40
    assert len({magic, br.disk_magic("base2", "web1", 0), br.disk_magic("base1", "web2", 0),
                br.disk_magic("base1", "web1", 1)}) == 4


def test_a_signed_key_name_checks(cert_pem) -> None:
    assert br.check_key_name(CDS, br.sign_key_name(CDS, "x509-1-ab", "s9")) == "x509-1-ab"
    with pytest.raises(errors.OpPrereqError, match="HMAC for X509 key name is wrong"):
        br.check_key_name("f" * 64, br.sign_key_name(CDS, "x509-1-ab", "s9"))


def _import_op(**changes) -> SimpleNamespace:
    fields = {"source_handshake": br.compute_handshake(CDS, "ab"), "source_x509_ca": None,
              "source_instance_name": "web1.example.com"}
    fields.update(changes)
    return SimpleNamespace(**fields)


def test_a_remote_import_gives_the_sources_certificate(cert_pem) -> None:
    op = _import_op(source_x509_ca=br.sign_certificate(CDS, cert_pem, "77"))
    assert br.check_remote_import(CDS, op).strip() == cert_pem.strip()


@pytest.mark.parametrize("changes,message", [
    ({"source_handshake": None}, "Missing source handshake"),
    ({"source_x509_ca": None}, "Missing source X509 CA"),
    ({"source_instance_name": ""}, "Missing source instance name"),
    ({"source_x509_ca": "x"}, "Unable to load source X509 CA"),
])
def test_a_remote_import_without_its_material_is_refused(cert_pem, changes, message) -> None:
    fields = {"source_x509_ca": br.sign_certificate(CDS, cert_pem, "77"), **changes}
    with pytest.raises(errors.OpPrereqError, match=message):
        br.check_remote_import(CDS, _import_op(**fields))


def test_a_source_certificate_signed_with_another_secret_is_refused(cert_pem) -> None:
    op = _import_op(source_x509_ca=br.sign_certificate("f" * 64, cert_pem, "77"))
    with pytest.raises(errors.OpPrereqError, match="Unable to load source X509 CA .X509"
                       " certificate signature is invalid"):
        br.check_remote_import(CDS, op)


@pytest.mark.parametrize("digest", ["\u00e9" * 40, "\udcff", "ab\u0000"])
def test_a_digest_that_is_not_ascii_hex_is_wrong_not_a_crash(cert_pem, digest) -> None:
    with pytest.raises(errors.OpPrereqError, match="HMAC for X509 key name is wrong"):
        br.check_key_name(CDS, ["x509-key", digest, "s1"])
    with pytest.raises(errors.OpPrereqError, match="Hash didn't match"):
        br.check_handshake(CDS, [0, digest, "s1"])
    with pytest.raises(errors.OpPrereqError, match="HMAC is wrong"):
        br.check_disk_info(CDS, 0, ["192.0.2.9", 11000, "m0", digest, "s1"])
