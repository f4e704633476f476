"""The parameters of a remote export (``OP_BACKUP_EXPORT`` with ``mode=remote``).

A remote export sends an instance's disks to another cluster sharing this
cluster's domain secret (doc/exports.md, "Moves between clusters").  As in
Ganeti, each side signs what it hands out with HMAC-SHA1 over the shared
secret, a salt in front of the text:

- ``handshake`` (prepare-export, source): ``[version, hmac("VERSION:Hi, I'm
  Ganeti"), salt]``, checked by the destination's remote import;
- ``x509_key_name`` (prepare-export, source): ``[name, hmac(name), salt]``,
  the name of the key the source's primary node made for the transfer;
- ``x509_ca`` (both sides): a certificate (PEM) after a header line
  ``X-Ganeti-Signature: SALT/HMAC`` (the HMAC of the certificate's PEM);
- the destination's disks (remote import, then ``target_node`` of the
  export): one ``[host, port, magic, hmac, salt]`` per disk, the HMAC over
  ``"INDEX:HOST:PORT:MAGIC"``.

Nothing here does I/O: the LUs read the secret and run the transfers.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from ganeti import errors

__all__ = ["SIGNATURE_HEADER", "RIE_VERSION", "RIE_HANDSHAKE", "CERT_VALIDITY",
           "CONNECT_TIMEOUT", "sha1_hmac", "new_salt", "sign_certificate", "sign_disk_info",
           "sign_key_name", "compute_handshake", "check_handshake", "disk_magic",
           "check_key_name", "load_signed_ca", "check_disk_info", "RemoteExport",
           "check_remote_export",
           "check_remote_import"]

#: the remote import/export protocol version and the text its handshake signs (Ganeti's)
RIE_VERSION = 0
RIE_HANDSHAKE = "Hi, I'm Ganeti"
#: seconds a transfer key and certificate stay valid (Ganeti's: one day)
CERT_VALIDITY = 24 * 60 * 60
#: seconds a remote import waits for the source to connect (Ganeti's)
CONNECT_TIMEOUT = 180

SIGNATURE_HEADER = "X-Ganeti-Signature"
_SIGNATURE_RE = re.compile(rf"^{re.escape(SIGNATURE_HEADER)}:\s*([0-9a-f]+)/([0-9a-f]+)$",
                           re.I)
_PEM_RE = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)


def sha1_hmac(key: str, msg: str, salt: str = "") -> str:
    """Ganeti's HMAC-SHA1 of ``salt + msg`` under ``key`` (hex)."""
    return hmac.new(key.encode(), (salt + msg).encode(), hashlib.sha1).hexdigest()


def new_salt() -> str:
    """A fresh salt (16 hex digits, as Ganeti's ``GenerateSecret(8)``)."""
    return secrets.token_hex(8)


def _hmac_ok(key: str, msg: str, digest: Any, salt: Any) -> bool:
    """Whether ``digest`` is the HMAC of ``msg`` (a digest that is not ASCII hex is
    simply wrong: compared as bytes, never raising)."""
    return (isinstance(digest, str) and isinstance(salt, str)
            and hmac.compare_digest(sha1_hmac(key, msg, salt).encode(),
                                    digest.lower().encode("utf-8", "surrogatepass")))


def _bad(msg: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(msg, errors.ECODE_INVAL)


def _sane_pem(pem: str) -> str:
    """The certificate of ``pem`` parsed and written out again (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    match = _PEM_RE.search(pem)
    if match is None:
        raise ValueError("no PEM certificate")
    cert = x509.load_pem_x509_certificate(match.group(0).encode())
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def sign_certificate(cds: str, cert_pem: str, salt: str) -> str:
    """``cert_pem`` with Ganeti's signature header (what the other cluster sends)."""
    sane = _sane_pem(cert_pem)
    return f"{SIGNATURE_HEADER}: {salt}/{sha1_hmac(cds, sane, salt)}\n\n{sane}"


def sign_disk_info(cds: str, salt: str, idx: int, host: str, port: int, magic: str
                   ) -> list[Any]:
    """One disk's destination ``[host, port, magic, hmac, salt]`` (the other side's)."""
    return [host, port, magic, sha1_hmac(cds, f"{idx}:{host}:{port}:{magic}", salt), salt]


def sign_key_name(cds: str, name: str, salt: str) -> list[str]:
    """The ``x509_key_name`` a prepared export hands out: ``[name, hmac, salt]``."""
    return [name, sha1_hmac(cds, name, salt), salt]


def _handshake_text(version: Any) -> str:
    return f"{version}:{RIE_HANDSHAKE}"


def compute_handshake(cds: str, salt: str) -> list[Any]:
    """The source's ``handshake``: ``[version, hmac, salt]``."""
    return [RIE_VERSION, sha1_hmac(cds, _handshake_text(RIE_VERSION), salt), salt]


def check_handshake(cds: str, handshake: Any) -> None:
    """Refuse (OpPrereqError, Ganeti's texts) a handshake not signed with ``cds`` or of
    another protocol version."""
    if not isinstance(handshake, (list, tuple)) or len(handshake) != 3:
        raise _bad(f"Invalid handshake: Invalid data: {handshake!r} (expected [version,"
                   " hmac, salt])")
    version, digest, salt = handshake
    if not _hmac_ok(cds, _handshake_text(version), digest, salt):
        raise _bad("Invalid handshake: Hash didn't match, clusters don't share the same"
                   " domain secret")
    if version != RIE_VERSION:
        raise _bad("Invalid handshake: Clusters don't have the same remote import/export"
                   f" protocol (local={RIE_VERSION}, remote={version})")


def disk_magic(base: str, instance_name: str, index: int) -> str:
    """The magic of one disk's transfer (SHA-1 of version, a random base, the instance's
    name and the disk's index, as Ganeti's); the sender presents it first."""
    digest = hashlib.sha1()
    for part in (str(RIE_VERSION), base, instance_name, str(index)):
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()


def check_key_name(cds: str, key_name: Any) -> str:
    """The X509 key name of ``[name, hmac, salt]``; OpPrereqError when malformed or
    not signed with ``cds``."""
    if not key_name:
        raise _bad("Missing X509 key name for encryption")
    if not isinstance(key_name, (list, tuple)) or len(key_name) != 3:
        raise _bad(f"Invalid data for X509 key name: {key_name!r} (expected [name, hmac,"
                   " salt])")
    name, digest, salt = key_name
    if not isinstance(name, str) or not _hmac_ok(cds, name, digest, salt):
        raise _bad("HMAC for X509 key name is wrong")
    return name


def load_signed_ca(cds: str, pem: Any, what: str = "destination") -> str:
    """The ``what`` CA certificate (PEM) of a signed ``pem``; OpPrereqError when
    missing, unsigned, not a certificate, or not signed with ``cds``."""
    if not pem:
        raise _bad(f"Missing {what} X509 CA")
    if not isinstance(pem, str):
        raise _bad(f"Unable to load {what} X509 CA (not a text)")
    signature = None
    for line in pem.splitlines():
        if line.startswith("---"):
            break
        match = _SIGNATURE_RE.match(line.strip())
        if match:
            signature = match.groups()
    if signature is None:
        raise _bad(f"Unable to load {what} X509 CA (X509 certificate signature is"
                   " missing)")
    try:
        sane = _sane_pem(pem)
    except ValueError as exc:
        raise _bad(f"Unable to load {what} X509 CA ({exc})") from None
    salt, digest = signature
    if not _hmac_ok(cds, sane, digest, salt):
        raise _bad(f"Unable to load {what} X509 CA (X509 certificate signature is"
                   " invalid)")
    return sane


def check_disk_info(cds: str, idx: int, info: Any) -> tuple[str, int, str]:
    """``(host, port, magic)`` of disk ``idx``'s signed destination; OpPrereqError
    ("Destination information for disk N does not match: ...") otherwise."""
    def bad(why: str) -> errors.OpPrereqError:
        return _bad(f"Destination information for disk {idx} does not match: {why}")
    if not isinstance(info, (list, tuple)) or len(info) != 5:
        raise bad(f"Invalid data: {info!r} (expected [host, port, magic, hmac, salt])")
    host, port, magic, digest, salt = info
    if not (host and port and magic):
        raise bad("Missing destination host, port or magic")
    if not _hmac_ok(cds, f"{idx}:{host}:{port}:{magic}", digest, salt):
        raise bad("HMAC is wrong")
    if not isinstance(host, str) or isinstance(port, bool) or not isinstance(port, int) \
            or not 0 < port < 65536:
        raise bad(f"Invalid host or port: {host!r}:{port!r}")
    return host, port, str(magic)


@dataclass(frozen=True)
class RemoteExport:
    """What a checked remote export sends where: the transfer key's name on the
    primary node, the destination's certificate (PEM) and ``(host, port, magic)``
    per disk, then, when the destination asked for it, one more: where the
    instance's UEFI/TPM state goes (:attr:`firmware_dest`, doc/exports.md)."""

    key_name: str
    dest_ca: str
    dests: list[tuple[str, int, str]]
    disk_count: int = 0

    @property
    def disk_dests(self) -> list[tuple[str, int, str]]:
        """The destinations of the disks, in disk order."""
        return self.dests[:self.disk_count]

    @property
    def firmware_dest(self) -> tuple[str, int, str] | None:
        """Where the UEFI/TPM state goes (None: the destination did not ask for it)."""
        return self.dests[self.disk_count] if len(self.dests) > self.disk_count else None


def check_remote_export(cds: str, op: Any, disk_count: int) -> RemoteExport:
    """Check a remote export's ``x509_key_name``, ``destination_x509_ca`` and
    ``target_node`` (one destination per disk, and perhaps one more for the
    instance's UEFI/TPM state: our remote import's, for a kvm instance with
    ``firmware=uefi`` or ``tpm=tpm2``) against the cluster domain secret.
    Raises OpPrereqError."""
    key_name = check_key_name(cds, op.x509_key_name)
    dest_ca = load_signed_ca(cds, op.destination_x509_ca)
    targets = op.target_node
    if not isinstance(targets, list):
        raise _bad("A remote export needs a list of destinations, one per disk")
    if len(targets) not in (disk_count, disk_count + 1):
        raise _bad(f"Expected {disk_count} targets, got {len(targets)}")
    return RemoteExport(key_name, dest_ca,
                        [check_disk_info(cds, idx, info) for idx, info in enumerate(targets)],
                        disk_count)


def check_remote_import(cds: str, op: Any) -> str:
    """Check a remote import's ``source_handshake``, ``source_x509_ca`` and
    ``source_instance_name``; returns the source's certificate (PEM).  Raises
    OpPrereqError with Ganeti's texts."""
    if not op.source_handshake:
        raise _bad("Missing source handshake")
    if not op.source_x509_ca:
        raise _bad("Missing source X509 CA")
    if not op.source_instance_name:
        raise _bad("Missing source instance name")
    check_handshake(cds, op.source_handshake)
    return load_signed_ca(cds, op.source_x509_ca, "source")
