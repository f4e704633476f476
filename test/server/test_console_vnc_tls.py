"""The node's end of a VNC console with TLS (ganeti.server.console.open_vnc_tls and
finish_vnc_handshake): a fake VeNCrypt server in a thread, real TLS with a
throw-away CA, a socketpair for the browser's side."""

from __future__ import annotations

import os
import socket
import ssl
import struct
import threading

import pytest

from fakes.x509ca import make_vnc_x509_dir
from ganeti import errors
from ganeti.http import rfb
from ganeti.hypervisor import base
from ganeti.server import console

CHALLENGE = bytes(range(16))
RESPONSE = bytes(range(50, 66))


@pytest.fixture(scope="module")
def x509(tmp_path_factory) -> str:
    return make_vnc_x509_dir(tmp_path_factory.mktemp("vnc") / "x509")


def _exactly(sock, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"closed after {data!r}"
        data += chunk
    return data


class FakeVencryptServer:
    """qemu's VNC server as the node sees it: RFB 3.8, VeNCrypt 0.2, one subtype
    (X509Vnc), TLS with ``x509``'s server certificate (client certificates
    required when ``verify``), a challenge, then ``b"server-init"`` once the
    right response came."""

    def __init__(self, x509: str, *, verify: bool = False,
                 subtype: int = rfb.X509_VNC) -> None:
        # a test's own context (the tls module builds every context of ganeti/ only)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if subtype in rfb.ANON_SUBTYPES:      # qemu's tls-creds-anon: no certificate
            self.ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            self.ctx.set_ciphers("aNULL:@SECLEVEL=0")
        else:
            self.ctx.load_cert_chain(os.path.join(x509, "server-cert.pem"),
                                     os.path.join(x509, "server-key.pem"))
        if verify:
            self.ctx.verify_mode = ssl.CERT_REQUIRED
            self.ctx.load_verify_locations(os.path.join(x509, "ca-cert.pem"))
        self.subtype = subtype
        self.node, self.sock = socket.socketpair()
        self.node.settimeout(10)
        self.sock.settimeout(10)
        self.error: BaseException | None = None
        self.seen: bytes = b""
        self.cipher: tuple | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            sock = self.sock
            sock.sendall(rfb.VERSION_38)
            assert _exactly(sock, 12) == rfb.VERSION_38
            sock.sendall(bytes([1, rfb.SEC_VENCRYPT]))
            assert _exactly(sock, 1) == bytes([rfb.SEC_VENCRYPT])
            sock.sendall(b"\x00\x02")
            assert _exactly(sock, 2) == b"\x00\x02"
            sock.sendall(b"\x00\x01" + struct.pack(">I", self.subtype))
            assert struct.unpack(">I", _exactly(sock, 4))[0] == self.subtype
            sock.sendall(b"\x01")
            tls = self.ctx.wrap_socket(sock, server_side=True)
            self.cipher = tls.cipher()
            ok = True
            if self.subtype not in (rfb.TLS_NONE, rfb.X509_NONE):
                tls.sendall(CHALLENGE)
                ok = _exactly(tls, 16) == RESPONSE
            tls.sendall(struct.pack(">I", 0) if ok else
                        struct.pack(">II", 1, 6) + b"failed")
            if ok:
                self.seen = _exactly(tls, 1)           # ClientInit
                tls.sendall(b"server-init")
            tls.close()
        except (OSError, AssertionError, ssl.SSLError) as exc:
            self.error = exc
            self.sock.close()

    def join(self) -> None:
        self.thread.join(10)


def test_the_node_speaks_vencrypt_to_the_server_and_rfb_to_the_browser(x509):
    server = FakeVencryptServer(x509)
    conn, bridge = console.open_vnc_tls(server.node, base.VncTls(
        ca_file=os.path.join(x509, "ca-cert.pem")))
    assert isinstance(conn, ssl.SSLSocket) and bridge.state == rfb.CLIENT_VERSION
    browser, node_side = socket.socketpair()
    browser.settimeout(10)
    done = []
    thread = threading.Thread(target=lambda: done.append(console.finish_vnc_handshake(
        node_side, conn, bridge, rfb.VERSION_38)), daemon=True)
    thread.start()
    assert _exactly(browser, 12 + 2) == rfb.VERSION_38 + bytes([1, rfb.SEC_VNC])
    browser.sendall(bytes([rfb.SEC_VNC]))
    assert _exactly(browser, 16) == CHALLENGE               # the server's own challenge
    browser.sendall(RESPONSE)
    assert _exactly(browser, 4) == b"\x00\x00\x00\x00"
    thread.join(10)
    assert done == [None]
    # from here the shell relays bytes as they are
    conn.sendall(b"\x01")
    assert _exactly(conn, len(b"server-init")) == b"server-init"
    server.join()
    assert server.error is None and server.seen == b"\x01"
    for sock in (conn, browser, node_side):
        sock.close()


def test_a_wrong_response_reaches_the_browser_as_an_rfb_failure(x509):
    server = FakeVencryptServer(x509)
    conn, bridge = console.open_vnc_tls(server.node, base.VncTls(
        ca_file=os.path.join(x509, "ca-cert.pem")))
    browser, node_side = socket.socketpair()
    browser.settimeout(10)
    browser.sendall(rfb.VERSION_38 + bytes([rfb.SEC_VNC]) + b"x" * 16)
    why = console.finish_vnc_handshake(node_side, conn, bridge)
    assert why == "the VNC handshake failed: The VNC server refused: failed"
    assert _exactly(browser, 12 + 2 + 16 + 4 + 4 + 6)[-14:] == struct.pack(">II", 1, 6) + \
        b"failed"
    server.join()
    for sock in (conn, browser, node_side):
        sock.close()


def test_the_client_certificate_is_presented_when_the_server_checks_it(x509):
    server = FakeVencryptServer(x509, verify=True)
    conn, bridge = console.open_vnc_tls(server.node, base.VncTls(
        os.path.join(x509, "ca-cert.pem"), os.path.join(x509, "client-cert.pem"),
        os.path.join(x509, "client-key.pem")))
    assert bridge.state == rfb.CLIENT_VERSION
    conn.close()
    server.join()


def test_a_server_certificate_of_another_ca_is_refused(x509, tmp_path):
    other = make_vnc_x509_dir(tmp_path / "other", client=False)
    server = FakeVencryptServer(x509)
    with pytest.raises(errors.RfbError, match="TLS with the VNC server failed: .*certificate"):
        console.open_vnc_tls(server.node, base.VncTls(os.path.join(other, "ca-cert.pem")))
    server.node.close()
    server.join()


def test_anonymous_tls_is_not_taken_for_x509(x509):
    server = FakeVencryptServer(x509, subtype=rfb.TLS_VNC)
    with pytest.raises(errors.RfbError, match="offers VeNCrypt TLSVnc; the node takes X509Vnc"):
        console.open_vnc_tls(server.node, base.VncTls(os.path.join(x509, "ca-cert.pem")))
    server.node.close()
    server.join()


def test_a_missing_ca_file_is_a_certificate_error(tmp_path):
    node, _ = socket.socketpair()
    with pytest.raises(errors.CertificateError, match="VNC CA certificate"):
        console.open_vnc_tls(node, base.VncTls(str(tmp_path / "ca-cert.pem")))
    node.close()


def test_anonymous_tls_without_a_password_offers_the_browser_none(x509):
    server = FakeVencryptServer(x509, subtype=rfb.TLS_NONE)
    conn, bridge = console.open_vnc_tls(server.node, base.VncTls())
    assert bridge.subtype == rfb.TLS_NONE and conn.version() == "TLSv1.2"
    browser, node_side = socket.socketpair()
    browser.settimeout(10)
    browser.sendall(rfb.VERSION_38 + bytes([rfb.SEC_NONE]))
    assert console.finish_vnc_handshake(node_side, conn, bridge) is None
    assert _exactly(browser, 12 + 2 + 4) == rfb.VERSION_38 + bytes([1, rfb.SEC_NONE]) + \
        b"\x00\x00\x00\x00"
    conn.sendall(b"\x01")
    assert _exactly(conn, len(b"server-init")) == b"server-init"
    server.join()
    assert server.error is None and server.cipher is not None
    assert server.cipher[0].startswith(("ADH-", "AECDH-"))
    for sock in (conn, browser, node_side):
        sock.close()
