"""ganeti.http.tls: the one place that builds TLS contexts, and what each context accepts."""

from __future__ import annotations

import ast
import pathlib
import socket
import ssl
import threading

import pytest

from ganeti import errors
from ganeti.http import tls

ROOT = pathlib.Path(__file__).resolve().parents[2]
_BUILDERS = frozenset({"SSLContext", "create_default_context", "_create_unverified_context"})


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> tuple[str, str]:
    """Two unrelated cluster certificates (key and certificate in one file each)."""
    from noded_harness import make_cluster_cert
    return (make_cluster_cert(tmp_path_factory.mktemp("one")),
            make_cluster_cert(tmp_path_factory.mktemp("two")))


def _context_builders(path: pathlib.Path) -> list[int]:
    """Lines of ``path`` that call ``ssl.SSLContext(...)`` or ``ssl.create_default_context(...)``."""
    tree = ast.parse(path.read_text(), str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in _BUILDERS]


def test_only_tls_module_builds_contexts() -> None:
    found = []
    for top in ("ganeti", "daemons", "scripts"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == ROOT / "ganeti" / "http" / "tls.py":
                continue
            found += [f"{path.relative_to(ROOT)}:{line}" for line in _context_builders(path)]
    assert found == []


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str | None:
    """Handshake over a socketpair; None when both ends succeed, else the client's error."""
    ours, theirs = socket.socketpair()
    ours.settimeout(10)
    theirs.settimeout(10)

    def serve() -> None:
        try:
            with server.wrap_socket(ours, server_side=True) as conn:
                conn.recv(1)
        except (OSError, ssl.SSLError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with client.wrap_socket(theirs) as conn:
            conn.sendall(b"x")
            conn.recv(1)   # TLS 1.3: the server's verdict on our certificate comes now
    except (OSError, ssl.SSLError) as exc:
        return str(exc)
    finally:
        ours.close()
        thread.join(10)
    return None


def test_node_contexts_agree_on_the_cluster_certificate(certs) -> None:
    one, _ = certs
    assert _handshake(tls.node_server_context(one), tls.node_client_context(one)) is None


def test_node_server_refuses_another_clusters_client(certs) -> None:
    one, two = certs
    # the client trusts ``one`` but presents ``two``: the server must refuse it
    assert _handshake(tls.node_server_context(one), tls.node_client_context(two, one)) is not None


def test_node_client_refuses_another_clusters_server(certs) -> None:
    one, two = certs
    assert _handshake(tls.node_server_context(two, one), tls.node_client_context(one)) is not None


def test_rapi_client_checks_the_certificate_file(certs) -> None:
    one, two = certs
    assert _handshake(tls.rapi_server_context(one), tls.rapi_client_context(one)) is None
    assert _handshake(tls.rapi_server_context(one), tls.rapi_client_context(two)) is not None


def test_probe_context_accepts_any_server(certs) -> None:
    one, _ = certs
    assert _handshake(tls.rapi_server_context(one), tls.probe_context()) is None


@pytest.mark.parametrize("build", [tls.node_server_context, tls.node_client_context,
                                   tls.rapi_server_context, tls.rapi_client_context],
                         ids=["node-server", "node-client", "rapi-server", "rapi-client"])
def test_missing_certificate_is_a_certificate_error(tmp_path, build) -> None:
    with pytest.raises(errors.CertificateError, match="Cannot load"):
        build(str(tmp_path / "absent.pem"))


@pytest.mark.parametrize("build", [tls.node_server_context, tls.node_client_context,
                                   tls.rapi_server_context, tls.rapi_client_context,
                                   lambda _pem: tls.probe_context()],
                         ids=["node-server", "node-client", "rapi-server", "rapi-client", "probe"])
def test_tls_1_2_is_the_minimum(certs, build) -> None:
    assert build(certs[0]).minimum_version >= ssl.TLSVersion.TLSv1_2


def test_the_vnc_context_without_a_ca_is_anonymous_tls_12() -> None:
    ctx = tls.vnc_client_context()
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 and all(name.startswith(("ADH-", "AECDH-")) for name in tls12)


def test_the_vnc_context_with_a_ca_checks_the_server_but_not_its_name(tmp_path) -> None:
    from fakes.x509ca import make_vnc_x509_dir
    x509 = make_vnc_x509_dir(tmp_path / "x509")
    ctx = tls.vnc_client_context(f"{x509}/ca-cert.pem", f"{x509}/client-cert.pem",
                                 f"{x509}/client-key.pem")
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname
    with pytest.raises(errors.CertificateError, match="VNC client certificate"):
        tls.vnc_client_context(f"{x509}/ca-cert.pem", f"{x509}/nosuch.pem")
