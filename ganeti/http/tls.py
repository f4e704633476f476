"""Every TLS context of the cluster, in one place (doc/protocols/rpc.md, "The HTTP package").

No other module builds an :class:`ssl.SSLContext`; a test checks it
(``test/http/test_tls.py``).  Two trust models:

* **Node RPC** (noded, the RPC transport, the disk streams of
  import/export): mutual TLS with the shared cluster certificate
  ``server.pem`` (key and certificate in one file).  Each end presents it
  and trusts only it as CA; host names are not checked: possession of the
  cluster key is what authenticates a peer (Ganeti <= 2.12 style).
* **Moves between clusters** (the disk streams of a remote export into a
  remote import): mutual TLS with a key and self-signed certificate made on
  each side for the transfer; each end trusts exactly the other's
  certificate, which the clusters exchanged signed with their shared
  domain secret (doc/exports.md, "Moves between clusters").
* **A node's own VNC servers** (kvm ``vnc_tls``: the node's end of a VNC
  console, :mod:`ganeti.http.rfb`): the server's certificate is checked
  against the CA of the instance's ``vnc_x509_path`` (``ca-cert.pem``; not
  the host name: the node connects by address), and the node presents that
  directory's ``client-cert.pem`` when the server checks clients
  (``vnc_x509_verify``).  Without ``vnc_x509_path``, qemu's anonymous TLS:
  anonymous Diffie-Hellman suites of TLS 1.2 (TLS 1.3 has none), no
  certificate on either side, so encryption without authentication.
* **RAPI**: the daemon presents ``rapi.pem``; clients authenticate with a
  user and password.  The watcher checks the daemon's certificate against
  ``rapi.pem`` (by file, not by host name); bootstrap only waits until a
  handshake succeeds.

TLS 1.2 is the minimum everywhere.  Loading a certificate raises
:class:`errors.CertificateError` (the file is missing, unreadable or not
a key and certificate).
"""

from __future__ import annotations

import ssl

from ganeti import errors

__all__ = ["node_server_context", "node_client_context", "transfer_server_context",
           "transfer_client_context", "vnc_client_context", "rapi_server_context", "rapi_client_context",
           "probe_context"]


def _load(ctx: ssl.SSLContext, what: str, *, chain: str | None = None,
          ca_file: str | None = None) -> ssl.SSLContext:
    """Load ``chain`` (key and certificate) and the CA ``ca_file`` into ``ctx``."""
    try:
        if chain is not None:
            ctx.load_cert_chain(chain)
        if ca_file is not None:
            ctx.load_verify_locations(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise errors.CertificateError(f"Cannot load {what} {chain or ca_file}: {exc}") from exc
    return ctx


def node_server_context(cert_file: str, ca_file: str | None = None) -> ssl.SSLContext:
    """The node daemon's context: present ``cert_file``, require a client
    certificate signed by ``ca_file`` (default: ``cert_file``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    # One request per connection; the master's transport keeps the session
    # of each node and resumes it (one TLS 1.3 ticket is enough).
    ctx.num_tickets = 1
    return _load(ctx, "the cluster certificate", chain=cert_file, ca_file=ca_file or cert_file)


def node_client_context(cert_file: str, ca_file: str | None = None) -> ssl.SSLContext:
    """A node RPC client's context: present ``cert_file``, trust ``ca_file``
    (default: ``cert_file``), no host name check."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    return _load(ctx, "the cluster certificate", chain=cert_file, ca_file=ca_file or cert_file)


def _trust_only(ctx: ssl.SSLContext, peer_pem: str, chain: str) -> ssl.SSLContext:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_verify_locations(cadata=peer_pem)
    except (ValueError, ssl.SSLError) as exc:
        raise errors.CertificateError(f"Cannot load the peer's transfer certificate: {exc}"
                                      ) from exc
    return _load(ctx, "the transfer key", chain=chain)


def transfer_server_context(chain: str, peer_pem: str) -> ssl.SSLContext:
    """A remote import's listener: present ``chain`` (key and certificate in one
    file), require a client certificate and trust only ``peer_pem`` (PEM text)."""
    return _trust_only(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), peer_pem, chain)


def transfer_client_context(chain: str, peer_pem: str) -> ssl.SSLContext:
    """A remote export's sender: present ``chain``, trust only ``peer_pem`` (the
    listener's certificate), no host name check."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    return _trust_only(ctx, peer_pem, chain)


def vnc_client_context(ca_file: str = "", client_cert: str = "",
                       client_key: str = "") -> ssl.SSLContext:
    """The node's context toward an instance's VNC server with TLS (see above).

    With ``ca_file``: trust only it, no host name check, and present
    ``client_cert`` (with ``client_key``) when given.  Without: anonymous
    TLS 1.2 (only the ``aNULL`` suites, which OpenSSL allows at security
    level 0 alone), for qemu's ``tls-creds-anon``.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    if not ca_file:
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers("aNULL:!eNULL:@SECLEVEL=0")
        return ctx
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load(ctx, "the VNC CA certificate", ca_file=ca_file)
    if client_cert:
        try:
            ctx.load_cert_chain(client_cert, client_key or None)
        except (OSError, ssl.SSLError) as exc:
            raise errors.CertificateError(f"Cannot load the VNC client certificate"
                                          f" {client_cert}: {exc}") from exc
    return ctx


def rapi_server_context(pem: str) -> ssl.SSLContext:
    """The RAPI daemon's context: key and certificate from ``pem``, no
    renegotiation, no compression."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    # a client that ends its side early (no close_notify) gets our 400, not a TLS
    # alert; safe because no request is delimited by the end of the stream
    ctx.options |= ssl.OP_IGNORE_UNEXPECTED_EOF
    return _load(ctx, "the RAPI certificate", chain=pem)


def rapi_client_context(ca_file: str) -> ssl.SSLContext:
    """A RAPI client's context that trusts only ``ca_file`` (the cluster's
    ``rapi.pem``); the host name is not checked (the daemon is asked by address)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    return _load(ctx, "the RAPI certificate", ca_file=ca_file)


def probe_context() -> ssl.SSLContext:
    """A client context that checks nothing: only to see that a daemon
    completes a handshake (bootstrap waiting for RAPI); never for data."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx
