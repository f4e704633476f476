"""A throw-away CA for tests: a ``vnc_x509_path`` directory as qemu and libvirt lay it out.

:func:`make_vnc_x509_dir` writes ``ca-cert.pem``, ``server-cert.pem`` and
``server-key.pem`` (what qemu's ``tls-creds-x509`` loads) and
``client-cert.pem`` with ``client-key.pem`` (what the node presents when
qemu checks clients), all signed by one new CA (EC P-256, valid from a day
before now for ten years, so independent of the test's date).
"""

from __future__ import annotations

import datetime
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["make_vnc_x509_dir"]


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool,
          usage: list[x509.ObjectIdentifier]) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject))
               .issuer_name(_name(issuer)).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=3650))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def make_vnc_x509_dir(path: str | os.PathLike[str], *, client: bool = True) -> str:
    """Create ``path`` with a new CA's certificates (see the module docstring); ``path``."""
    os.makedirs(path, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("vnc test CA", ca_key, "vnc test CA", ca_key, ca=True, usage=[])
    _write(os.path.join(path, "ca-cert.pem"), ca.public_bytes(serialization.Encoding.PEM))
    leaves = [("server", ExtendedKeyUsageOID.SERVER_AUTH)]
    if client:
        leaves.append(("client", ExtendedKeyUsageOID.CLIENT_AUTH))
    for role, usage in leaves:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(f"vnc test {role}", key, "vnc test CA", ca_key, ca=False, usage=[usage])
        _write(os.path.join(path, f"{role}-cert.pem"),
               cert.public_bytes(serialization.Encoding.PEM))
        _write(os.path.join(path, f"{role}-key.pem"), key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
    return str(path)
