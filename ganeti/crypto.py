"""The cluster certificate: create, store, load, fingerprint and check it.

Ganeti (up to 2.12) secures node RPC with *one* self-signed certificate
shared by every node (``server.pem``: private key and certificate in one
file).  The node daemon presents it and requires clients to present it too;
both sides trust exactly that certificate as their CA.  This module is the
only place that touches X.509 (through the ``cryptography`` package); the
TLS sockets themselves use the standard ``ssl`` module and only need the
file path.

Defaults are strong and fast: an ECDSA P-256 key (a TLS handshake costs a
fraction of an RSA-2048 one) valid five years, signed with SHA-256.
``key_type="rsa"`` gives an RSA key of ``key_bits`` bits instead.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import uuid

from ganeti import errors
from ganeti.utils import io as uio

__all__ = [
    "DEFAULT_COMMON_NAME", "DEFAULT_VALIDITY_DAYS", "DEFAULT_WARN_DAYS",
    "generate_self_signed_cert", "write_pem_pair", "load_pem_pair", "load_cert",
    "cert_fingerprint", "cert_fingerprint_sha1", "cert_not_after",
    "verify_cert", "verify_cert_file",
]

DEFAULT_COMMON_NAME = "ganeti.example.com"
DEFAULT_VALIDITY_DAYS = 5 * 365
DEFAULT_WARN_DAYS = 30
_KEY_MARKERS = (b"-----BEGIN PRIVATE KEY-----", b"-----BEGIN EC PRIVATE KEY-----",
                b"-----BEGIN RSA PRIVATE KEY-----")
_CERT_MARKER = b"-----BEGIN CERTIFICATE-----"


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def generate_self_signed_cert(common_name: str = DEFAULT_COMMON_NAME,
                              validity_days: int = DEFAULT_VALIDITY_DAYS, *,
                              key_type: str = "ec", key_bits: int = 2048,
                              now: datetime.datetime | None = None,
                              valid_for: datetime.timedelta | None = None
                              ) -> tuple[bytes, bytes]:
    """Create a private key and a self-signed certificate for it.

    Returns ``(key_pem, cert_pem)``.  The certificate is a CA (basic
    constraints ``ca=True``) so that peers can use it as their trust anchor,
    and it is backdated by one hour to tolerate small clock skew; it expires
    ``valid_for`` after ``now`` when given (else ``validity_days`` after its
    start).  Raises
    :class:`errors.ProgrammerError` for an unknown ``key_type``.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    if key_type == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
    elif key_type == "rsa":
        if key_bits < 2048:
            raise errors.ProgrammerError(f"RSA keys below 2048 bits are refused ({key_bits})")
        key = rsa.generate_private_key(public_exponent=65537, key_size=key_bits)
    else:
        raise errors.ProgrammerError(f"Unknown key type {key_type!r}")
    start = (now or _utcnow()) - datetime.timedelta(hours=1)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(uuid.uuid4().int >> 2)
            .not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(hours=1) + valid_for if valid_for
                             else start + datetime.timedelta(days=validity_days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def write_pem_pair(path: str, key_pem: bytes, cert_pem: bytes, *,
                   uid: int | None = None, gid: int | None = None) -> None:
    """Write key and certificate into one file, mode 0600, atomically."""
    data = key_pem.rstrip(b"\n") + b"\n" + cert_pem.rstrip(b"\n") + b"\n"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    uio.write_file_atomic(path, data, mode=0o600, uid=uid, gid=gid)


def _split_pem(data: bytes, path: str) -> tuple[bytes, bytes]:
    key_start = min((data.find(m) for m in _KEY_MARKERS if m in data), default=-1)
    cert_start = data.find(_CERT_MARKER)
    if key_start < 0:
        raise errors.CertificateError(f"No private key in {path}")
    if cert_start < 0:
        raise errors.CertificateError(f"No certificate in {path}")
    if key_start < cert_start:
        key_pem, cert_pem = data[key_start:cert_start], data[cert_start:]
    else:
        cert_pem, key_pem = data[cert_start:key_start], data[key_start:]
    return key_pem.strip() + b"\n", cert_pem.strip() + b"\n"


def load_pem_pair(path: str) -> tuple[bytes, bytes]:
    """Read ``(key_pem, cert_pem)`` from a combined file.

    Raises :class:`errors.CertificateError` when the file is missing or
    lacks one of the two parts.
    """
    try:
        data = uio.read_file(path, max_size=1024 * 1024)
    except OSError as exc:
        raise errors.CertificateError(f"Cannot read {path}: {exc.strerror}") from exc
    return _split_pem(data, path)


def load_cert(path: str) -> bytes:
    """The certificate part (PEM) of a file holding a certificate (and maybe a key)."""
    try:
        data = uio.read_file(path, max_size=1024 * 1024)
    except OSError as exc:
        raise errors.CertificateError(f"Cannot read {path}: {exc.strerror}") from exc
    start = data.find(_CERT_MARKER)
    if start < 0:
        raise errors.CertificateError(f"No certificate in {path}")
    end_marker = b"-----END CERTIFICATE-----"
    end = data.find(end_marker, start)
    if end < 0:
        raise errors.CertificateError(f"Truncated certificate in {path}")
    return data[start:end + len(end_marker)] + b"\n"


def _parse(cert_pem: bytes):  # -> x509.Certificate
    from cryptography import x509
    try:
        return x509.load_pem_x509_certificate(cert_pem)
    except ValueError as exc:
        raise errors.CertificateError(f"Cannot parse certificate: {exc}") from exc


def cert_fingerprint(cert_pem: bytes, algorithm: str = "sha256") -> str:
    """``"<algorithm>:<hex digest>"`` of the certificate's DER encoding.

    ``algorithm`` is ``sha256`` (default) or ``sha1``.  Raises
    :class:`errors.CertificateError` for unparseable input.
    """
    from cryptography.hazmat.primitives import serialization
    if algorithm not in ("sha256", "sha1"):
        raise errors.ProgrammerError(f"Unsupported fingerprint algorithm {algorithm!r}")
    der = _parse(cert_pem).public_bytes(serialization.Encoding.DER)
    return f"{algorithm}:{hashlib.new(algorithm, der).hexdigest()}"


def cert_fingerprint_sha1(cert_pem: bytes) -> str:
    """Upper-case colon-separated SHA-1 digest, as ``ssconf_master_candidates_certs`` holds it."""
    digest = cert_fingerprint(cert_pem, "sha1").split(":", 1)[1].upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def cert_not_after(cert_pem: bytes) -> datetime.datetime:
    """Expiry time (UTC, aware) of a certificate."""
    return _parse(cert_pem).not_valid_after_utc


def verify_cert(path: str, *, warn_days: int = DEFAULT_WARN_DAYS,
                now: datetime.datetime | None = None) -> list[str]:
    """Readable problems of the certificate file at ``path`` (empty = fine).

    Reports a missing or unreadable file, a file without certificate or
    without key, an unparseable certificate, a certificate not yet valid,
    expired, or expiring within ``warn_days`` days.
    """
    now = now or _utcnow()
    if not os.path.exists(path):
        return [f"Certificate file {path} is missing"]
    try:
        key_pem, cert_pem = load_pem_pair(path)
    except errors.CertificateError as exc:
        return [str(exc)]
    problems: list[str] = []
    try:
        cert = _parse(cert_pem)
    except errors.CertificateError as exc:
        return [f"{path}: {exc}"]
    try:
        from cryptography.hazmat.primitives import serialization
        serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        problems.append(f"{path}: cannot parse private key: {exc}")
    not_before, not_after = cert.not_valid_before_utc, cert.not_valid_after_utc
    if now < not_before:
        problems.append(f"{path}: certificate not valid before {not_before.isoformat()}")
    if now >= not_after:
        problems.append(f"{path}: certificate expired on {not_after.isoformat()}")
    elif now + datetime.timedelta(days=warn_days) >= not_after:
        days = (not_after - now).days
        problems.append(f"{path}: certificate expires in {days} days ({not_after.isoformat()})")
    return problems


verify_cert_file = verify_cert
