"""ganeti.http.rfb: the VNC bridge's handshake, fed bytes from both sides."""

from __future__ import annotations

import struct

import pytest

from ganeti import errors
from ganeti.http import rfb

CHALLENGE = bytes(range(16))
RESPONSE = bytes(range(100, 116))


def _u32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}I", *values)


def _reason(text: bytes) -> bytes:
    return _u32(len(text)) + text


def _to_tls(bridge: rfb.Bridge, subtypes: tuple[int, ...] = (rfb.X509_VNC,),
            version: bytes = rfb.VERSION_38) -> None:
    """Drive the server's side (as qemu answers) up to the TLS handshake."""
    bridge.receive_server(version)
    assert bridge.server_output() == version
    bridge.receive_server(bytes([1, rfb.SEC_VENCRYPT]))
    assert bridge.server_output() == bytes([rfb.SEC_VENCRYPT])
    bridge.receive_server(b"\x00\x02")
    assert bridge.server_output() == b"\x00\x02"
    bridge.receive_server(b"\x00" + bytes([len(subtypes)]) + _u32(*subtypes))
    assert bridge.state == rfb.SUBTYPE_ACK
    assert bridge.server_output() == _u32(bridge.subtype)
    bridge.receive_server(b"\x01")
    assert bridge.state == rfb.START_TLS
    assert bridge.client_output() == b""          # nothing to the browser before its turn


def test_x509_with_vnc_authentication_relays_the_challenge_and_the_result():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge)
    assert bridge.subtype == rfb.X509_VNC and bridge.x509 and bridge.vnc_auth
    bridge.tls_started()
    assert bridge.state == rfb.SERVER_AUTH
    bridge.receive_server(CHALLENGE[:10])
    assert bridge.state == rfb.SERVER_AUTH
    bridge.receive_server(CHALLENGE[10:])
    assert bridge.state == rfb.CLIENT_VERSION
    assert bridge.client_output() == rfb.VERSION_38
    bridge.receive_client(rfb.VERSION_38)
    assert bridge.client_output() == bytes([1, rfb.SEC_VNC])    # one type: VNC authentication
    bridge.receive_client(bytes([rfb.SEC_VNC]))
    assert bridge.client_output() == CHALLENGE                   # the server's own challenge
    bridge.receive_client(RESPONSE)
    assert bridge.server_output() == RESPONSE
    assert bridge.state == rfb.SERVER_RESULT
    bridge.receive_server(_u32(0))
    assert bridge.state == rfb.DONE
    assert bridge.client_output() == _u32(0)


def test_x509_none_offers_the_browser_no_authentication():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge, (rfb.X509_NONE,))
    assert not bridge.vnc_auth
    bridge.tls_started()
    bridge.receive_server(_u32(0))                 # qemu's SecurityResult for *None
    assert bridge.client_output() == rfb.VERSION_38
    bridge.receive_client(rfb.VERSION_38 + bytes([rfb.SEC_NONE]))
    assert bridge.state == rfb.DONE
    assert bridge.client_output() == bytes([1, rfb.SEC_NONE]) + _u32(0)


def test_anonymous_tls_subtypes():
    bridge = rfb.Bridge(rfb.ANON_SUBTYPES)
    _to_tls(bridge, (rfb.TLS_NONE,))
    assert bridge.subtype == rfb.TLS_NONE and not bridge.x509
    bridge.tls_started()
    bridge.receive_server(_u32(0))
    bridge.receive_client(rfb.VERSION_38 + bytes([rfb.SEC_NONE]))
    assert bridge.state == rfb.DONE


def test_the_best_subtype_the_server_offers_is_chosen():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    bridge.receive_server(rfb.VERSION_38 + bytes([2, rfb.SEC_VNC, rfb.SEC_VENCRYPT])
                          + b"\x00\x02" + b"\x00\x04" + _u32(rfb.PLAIN, rfb.TLS_VNC,
                                                            rfb.X509_NONE, rfb.X509_VNC))
    assert bridge.server_output() == (rfb.VERSION_38 + bytes([rfb.SEC_VENCRYPT]) + b"\x00\x02"
                                      + _u32(rfb.X509_VNC))


def test_bytes_beyond_the_handshake_go_on_to_the_other_side():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge)
    bridge.tls_started()
    bridge.receive_server(CHALLENGE)
    bridge.client_output()
    # the browser's response and its ClientInit (shared flag) in one read
    bridge.receive_client(rfb.VERSION_38 + bytes([rfb.SEC_VNC]) + RESPONSE + b"\x01")
    assert bridge.server_output() == RESPONSE
    bridge.receive_server(_u32(0) + b"server-init")
    assert bridge.state == rfb.DONE
    assert bridge.server_output() == b"\x01"
    assert bridge.client_output() == bytes([1, rfb.SEC_VNC]) + CHALLENGE \
        + _u32(0) + b"server-init"


def test_bytes_received_once_done_pass_through():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge, (rfb.X509_NONE,))
    bridge.tls_started()
    bridge.receive_server(_u32(0))
    bridge.receive_client(rfb.VERSION_38 + bytes([rfb.SEC_NONE]))
    bridge.client_output()
    bridge.receive_server(b"server-init")
    bridge.receive_client(b"\x01")
    assert (bridge.client_output(), bridge.server_output()) == (b"server-init", b"\x01")


def test_a_wrong_password_is_told_to_the_browser_with_the_servers_reason():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge)
    bridge.tls_started()
    bridge.receive_server(CHALLENGE)
    bridge.receive_client(rfb.VERSION_38 + bytes([rfb.SEC_VNC]) + RESPONSE)
    bridge.client_output()
    refusal = _u32(1) + _reason(b"Authentication failed\x00")     # qemu's, NUL and all
    bridge.receive_server(refusal[:6])
    assert bridge.state == rfb.SERVER_RESULT                      # the reason is not all there
    with pytest.raises(errors.RfbError, match="refused: Authentication failed$"):
        bridge.receive_server(refusal[6:])
    assert bridge.client_output() == _u32(1) + _reason(b"Authentication failed")
    assert bridge.state == rfb.FAILED
    with pytest.raises(errors.RfbError):
        bridge.receive_client(b"more")


@pytest.mark.parametrize("version, tail", [
    (b"RFB 003.007\n", b""),                 # 3.7: a failed SecurityResult has no reason
    (b"RFB 003.003\n", b""),
], ids=["3.7", "3.3"])
def test_an_older_browser_gets_the_failure_in_its_form(version, tail):
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge)
    bridge.tls_started()
    bridge.receive_server(CHALLENGE)
    bridge.client_output()
    bridge.receive_client(version)
    if version == rfb.VERSION_37:
        assert bridge.client_output() == bytes([1, rfb.SEC_VNC])
        bridge.receive_client(bytes([rfb.SEC_VNC]))
        assert bridge.client_output() == CHALLENGE
    else:                                    # 3.3: the server names the one type (u32)
        assert bridge.client_output() == _u32(rfb.SEC_VNC) + CHALLENGE
    bridge.receive_client(RESPONSE)
    with pytest.raises(errors.RfbError):
        bridge.receive_server(_u32(1) + _reason(b"no"))
    assert bridge.client_output() == _u32(1) + tail


@pytest.mark.parametrize("version, expect", [
    (b"RFB 003.007\n", b""), (b"RFB 003.003\n", b""), (b"RFB 003.889\n", b"")],
    ids=["3.7", "3.3", "apple-3.889-as-3.3"])
def test_no_authentication_for_older_browsers_sends_no_result(version, expect):
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge, (rfb.X509_NONE,))
    bridge.tls_started()
    bridge.receive_server(_u32(0))
    bridge.client_output()
    bridge.receive_client(version)
    if version == rfb.VERSION_37:
        bridge.receive_client(bytes([rfb.SEC_NONE]))
        assert bridge.client_output() == bytes([1, rfb.SEC_NONE]) + expect
    else:
        assert bridge.client_output() == _u32(rfb.SEC_NONE) + expect
    assert bridge.state == rfb.DONE


def test_a_browser_choosing_another_type_is_refused():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge)
    bridge.tls_started()
    bridge.receive_server(CHALLENGE)
    bridge.client_output()
    with pytest.raises(errors.RfbError, match="chose security type 1"):
        bridge.receive_client(rfb.VERSION_38 + bytes([rfb.SEC_NONE]))
    assert bridge.client_output() == bytes([1, rfb.SEC_VNC]) + _u32(1) + _reason(
        b"security type not offered")


def test_a_browser_sending_no_version_is_refused_in_the_38_form():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge, (rfb.X509_NONE,))
    bridge.tls_started()
    bridge.receive_server(_u32(0))
    bridge.client_output()
    with pytest.raises(errors.RfbError, match="not an RFB version"):
        bridge.receive_client(b"GET / HTTP/1.")
    assert bridge.client_output() == b"\x00" + _reason(
        b"The browser sent b'GET / HTTP/1', not an RFB version")


@pytest.mark.parametrize("server, match", [
    (b"RFB 003.003\n", "not RFB 3.7 or 3.8"),
    (b"SSH-2.0-Open", "not RFB 3.7 or 3.8"),
    (rfb.VERSION_38 + b"\x01\x02", r"offers security types \[2\], not VeNCrypt"),
    (rfb.VERSION_38 + b"\x00" + _reason(b"Too many connections"),
     "refused the connection: Too many connections"),
    (rfb.VERSION_38 + b"\x01\x13\x00\x01", "VeNCrypt 0.1, not 0.2"),
    (rfb.VERSION_38 + b"\x01\x13\x00\x02\x01", "refused VeNCrypt 0.2"),
    (rfb.VERSION_38 + b"\x01\x13\x00\x02\x00\x00", "offers no VeNCrypt subtype"),
    (rfb.VERSION_38 + b"\x01\x13\x00\x02\x00\x01" + _u32(rfb.X509_SASL),
     "offers VeNCrypt X509SASL; the node takes X509Vnc, X509None"),
    (rfb.VERSION_38 + b"\x01\x13\x00\x02\x00\x01" + _u32(rfb.TLS_VNC),
     "offers VeNCrypt TLSVnc; the node takes X509Vnc, X509None"),
    (rfb.VERSION_38 + b"\x01\x13\x00\x02\x00\x01" + _u32(rfb.X509_VNC) + b"\x00",
     "refused VeNCrypt X509Vnc"),
    (rfb.VERSION_38 + b"\x01\x13\x00\x02\x00\x01" + _u32(rfb.X509_VNC) + b"\x01\x16\x03",
     "data before the TLS handshake"),
    (rfb.VERSION_38 + b"\x00" + _u32(rfb.MAX_REASON + 1), "a reason of 4097 bytes"),
], ids=["rfb-3.3", "not-rfb", "no-vencrypt", "refused", "vencrypt-0.1", "version-refused",
        "no-subtypes", "sasl-only", "anonymous-only", "subtype-refused", "early-bytes",
        "long-reason"])
def test_the_servers_side_is_refused_before_the_browser_hears_anything(server, match):
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    with pytest.raises(errors.RfbError, match=match):
        bridge.receive_server(server)
    assert bridge.state == rfb.FAILED
    assert bridge.client_output() == b""


def test_a_failed_none_result_before_the_browsers_turn():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge, (rfb.X509_NONE,))
    bridge.tls_started()
    with pytest.raises(errors.RfbError, match="refused: bad certificate"):
        bridge.receive_server(_u32(1) + _reason(b"bad certificate"))
    assert bridge.client_output() == b""


def test_the_server_speaking_37_is_answered_in_37():
    bridge = rfb.Bridge(rfb.X509_SUBTYPES)
    _to_tls(bridge, version=rfb.VERSION_37)
    bridge.tls_started()
    bridge.receive_server(CHALLENGE)
    bridge.receive_client(rfb.VERSION_38 + bytes([rfb.SEC_VNC]) + RESPONSE)
    with pytest.raises(errors.RfbError, match="refused: authentication failed"):
        bridge.receive_server(_u32(1))               # 3.7: no reason follows


def test_misuse_is_a_programmer_error():
    with pytest.raises(errors.ProgrammerError):
        rfb.Bridge((rfb.X509_PLAIN,))
    with pytest.raises(errors.ProgrammerError):
        rfb.Bridge(())
    with pytest.raises(errors.ProgrammerError):
        rfb.Bridge().tls_started()
