"""The RFB (VNC) handshake of the node's VNC bridge: VeNCrypt toward the VNC server,
plain RFB toward the browser (pure: bytes in, bytes out, no sockets).

A VNC server with TLS (kvm's ``vnc_tls``: doc/kvm.md) offers only the
VeNCrypt security type (19), whose TLS runs *inside* the RFB stream, which
noVNC cannot do.  The node's end of the console stream (doc/protocols/rpc.md,
"The console stream") therefore speaks the handshake on both sides itself
with one :class:`Bridge`, then relays the bytes unchanged:

* **Toward the VNC server** it is the client (RFC 6143 section 7.1 and the
  VeNCrypt extension, version 0.2): the server's version (3.7 or 3.8, and
  the same back), security type 19, the VeNCrypt version 0.2, then one of
  the subtypes the bridge was built to accept (:data:`X509_SUBTYPES` or
  :data:`ANON_SUBTYPES`; qemu offers exactly one).  Once the server accepts
  the subtype the bridge is in :data:`START_TLS`: the shell wraps its
  socket in TLS and calls :meth:`Bridge.tls_started`.  Inside TLS the
  subtype's own authentication follows: VNC authentication (a 16-byte
  challenge) for ``*Vnc``, nothing for ``*None``; the server ends it with a
  SecurityResult.
* **Toward the browser** it is the server, speaking RFB 3.8 (3.7 and 3.3
  clients are answered in their own version's form): it offers one
  security type, None (1) when the server asked for no password, else
  VNC authentication (2) with *the server's* challenge, and relays the
  browser's response to the server and the server's SecurityResult back.
  The password never passes through the bridge: only the challenge and
  the DES response do, as between a VNC client and server.

Bytes from the server go in through :meth:`Bridge.receive_server`, from the
browser through :meth:`Bridge.receive_client`; what to send each way comes
out of :meth:`Bridge.server_output` and :meth:`Bridge.client_output`.  The
browser's side starts only once the server's side has reached its
challenge (or its SecurityResult for ``*None``): before that, nothing goes
to the browser, so the shell can still refuse the console with a message
(:data:`CLIENT_PHASE` tells when).  When the bridge is :data:`DONE`, bytes
received beyond the handshake are already in the other side's output and
everything after is relayed as it is.

A broken or refused handshake raises :class:`errors.RfbError`; when the
browser's side had started, :meth:`Bridge.client_output` then holds the
RFB failure to send it (a SecurityResult "failed" with the reason, in 3.8)
before closing.
"""

from __future__ import annotations

import re
import struct

from ganeti import errors

__all__ = ["VERSION_33", "VERSION_37", "VERSION_38", "SEC_INVALID", "SEC_NONE", "SEC_VNC",
           "SEC_VENCRYPT", "TLS_NONE", "TLS_VNC", "TLS_PLAIN", "X509_NONE", "X509_VNC",
           "X509_PLAIN", "TLS_SASL", "X509_SASL", "PLAIN", "SUBTYPE_NAMES", "X509_SUBTYPES",
           "ANON_SUBTYPES", "CHALLENGE_SIZE", "MAX_REASON", "SERVER_VERSION", "SERVER_TYPES",
           "VENCRYPT_VERSION", "VENCRYPT_SUBTYPES", "SUBTYPE_ACK", "START_TLS", "SERVER_AUTH",
           "CLIENT_VERSION", "CLIENT_TYPE", "CLIENT_RESPONSE", "SERVER_RESULT", "DONE",
           "FAILED", "CLIENT_PHASE", "Bridge"]

VERSION_33 = b"RFB 003.003\n"
VERSION_37 = b"RFB 003.007\n"
VERSION_38 = b"RFB 003.008\n"
_VERSION = re.compile(rb"RFB (\d{3})\.(\d{3})\n")

# security types (RFC 6143 section 7.2; 19 is VeNCrypt's)
SEC_INVALID, SEC_NONE, SEC_VNC, SEC_VENCRYPT = 0, 1, 2, 19

# VeNCrypt subtypes (u32 in version 0.2)
PLAIN = 256
TLS_NONE, TLS_VNC, TLS_PLAIN = 257, 258, 259
X509_NONE, X509_VNC, X509_PLAIN = 260, 261, 262
TLS_SASL, X509_SASL = 263, 264
SUBTYPE_NAMES = {PLAIN: "Plain", TLS_NONE: "TLSNone", TLS_VNC: "TLSVnc",
                 TLS_PLAIN: "TLSPlain", X509_NONE: "X509None", X509_VNC: "X509Vnc",
                 X509_PLAIN: "X509Plain", TLS_SASL: "TLSSASL", X509_SASL: "X509SASL"}
#: the subtypes with a certificate (the server's, checked against a CA), best first
X509_SUBTYPES = (X509_VNC, X509_NONE)
#: the anonymous TLS subtypes (no certificate: encryption only), best first
ANON_SUBTYPES = (TLS_VNC, TLS_NONE)
_VNC_AUTH = frozenset({TLS_VNC, X509_VNC})

#: VNC authentication's challenge and response (DES of the challenge) size
CHALLENGE_SIZE = 16
#: the longest failure reason taken from the server
MAX_REASON = 4096

# states, in the order they are passed through
SERVER_VERSION = "server-version"          # waiting for the server's ProtocolVersion
SERVER_TYPES = "server-types"              # ... its security types
VENCRYPT_VERSION = "vencrypt-version"      # ... its VeNCrypt version
VENCRYPT_SUBTYPES = "vencrypt-subtypes"    # ... its verdict on ours and its subtypes
SUBTYPE_ACK = "subtype-ack"                # ... its verdict on the subtype we chose
START_TLS = "start-tls"                    # the shell starts TLS, then tls_started()
SERVER_AUTH = "server-auth"                # waiting for the challenge (or the result)
CLIENT_VERSION = "client-version"          # waiting for the browser's ProtocolVersion
CLIENT_TYPE = "client-type"                # ... its security type
CLIENT_RESPONSE = "client-response"        # ... its response to the challenge
SERVER_RESULT = "server-result"            # waiting for the server's SecurityResult
DONE = "done"                              # relay from now on
FAILED = "failed"
#: the states in which the browser's side has started (the console was opened)
CLIENT_PHASE = frozenset({CLIENT_VERSION, CLIENT_TYPE, CLIENT_RESPONSE, SERVER_RESULT, DONE})


class Bridge:
    """One VNC console's handshake: VeNCrypt with the server, plain RFB with the browser.

    ``accept`` is the VeNCrypt subtypes the shell can do, best first
    (:data:`X509_SUBTYPES` when it has the CA of the server's certificate,
    :data:`ANON_SUBTYPES` for anonymous TLS).  See the module docstring for
    the flow; every ``receive_*`` may raise :class:`errors.RfbError`.
    """

    def __init__(self, accept: tuple[int, ...] = X509_SUBTYPES) -> None:
        if not accept or any(s not in (*X509_SUBTYPES, *ANON_SUBTYPES) for s in accept):
            raise errors.ProgrammerError(f"unsupported VeNCrypt subtypes {accept!r}")
        self.accept = accept
        self.state = SERVER_VERSION
        #: the VeNCrypt subtype agreed with the server (0 before)
        self.subtype = 0
        #: the RFB version spoken with the server and with the browser
        self.server_version = VERSION_38
        self.client_version = VERSION_38
        self._from_server = bytearray()
        self._from_client = bytearray()
        self._to_server = bytearray()
        self._to_client = bytearray()
        self._challenge = b""

    # --- the shell's side ------------------------------------------------------------------

    @property
    def x509(self) -> bool:
        """Whether the agreed subtype checks the server's certificate."""
        return self.subtype in X509_SUBTYPES

    @property
    def vnc_auth(self) -> bool:
        """Whether the agreed subtype asks for VNC authentication (a password)."""
        return self.subtype in _VNC_AUTH

    def receive_server(self, data: bytes) -> None:
        """Bytes from the VNC server (inside TLS once it started)."""
        self._from_server += data
        self._advance()

    def receive_client(self, data: bytes) -> None:
        """Bytes from the browser (kept until the browser's side starts)."""
        self._from_client += data
        self._advance()

    def tls_started(self) -> None:
        """The shell finished the TLS handshake with the server (in :data:`START_TLS`)."""
        if self.state != START_TLS:
            raise errors.ProgrammerError(f"tls_started in state {self.state}")
        self.state = SERVER_AUTH
        self._advance()

    def server_output(self) -> bytes:
        """The bytes to send to the VNC server now (taken)."""
        out = bytes(self._to_server)
        self._to_server.clear()
        return out

    def client_output(self) -> bytes:
        """The bytes to send to the browser now (taken)."""
        out = bytes(self._to_client)
        self._to_client.clear()
        return out

    # --- the machine -----------------------------------------------------------------------

    def _fail(self, message: str, *, tell_client: str | None = None) -> errors.RfbError:
        """Fail; the browser (when its side started) is told ``tell_client`` or ``message``."""
        if self.state in CLIENT_PHASE and self.state != DONE:
            self._to_client += self._client_failure(tell_client or message)
        self.state = FAILED
        return errors.RfbError(message)

    def _client_failure(self, reason: str) -> bytes:
        if self.state == CLIENT_VERSION:
            # the version is not known yet: the 3.8 form of a refused handshake
            return b"\x00" + _reason(reason)
        result = struct.pack(">I", 1)
        if self.client_version == VERSION_38:
            result += _reason(reason)
        return result

    def _take(self, buf: bytearray, size: int) -> bytes | None:
        if len(buf) < size:
            return None
        out = bytes(buf[:size])
        del buf[:size]
        return out

    def _take_reason(self, buf: bytearray) -> str | None:
        """A u32-length-prefixed reason from ``buf`` (None: not all there yet)."""
        if len(buf) < 4:
            return None
        (size,) = struct.unpack(">I", buf[:4])
        if size > MAX_REASON:
            raise self._fail(f"The VNC server sent a reason of {size} bytes")
        if len(buf) < 4 + size:
            return None
        text = bytes(buf[4:4 + size]).decode("utf-8", "replace").rstrip("\x00")
        del buf[:4 + size]
        return text

    def _advance(self) -> None:
        if self.state == FAILED:
            raise errors.RfbError("The VNC handshake failed already")
        while self._step():
            pass
        if self.state == DONE:          # bytes received after the end go straight on
            self._done()

    def _step(self) -> bool:
        """One step of the machine; False when it waits for bytes (or is done)."""
        step = {
            SERVER_VERSION: self._server_version, SERVER_TYPES: self._server_types,
            VENCRYPT_VERSION: self._vencrypt_version,
            VENCRYPT_SUBTYPES: self._vencrypt_subtypes, SUBTYPE_ACK: self._subtype_ack,
            SERVER_AUTH: self._server_auth, CLIENT_VERSION: self._client_version_step,
            CLIENT_TYPE: self._client_type, CLIENT_RESPONSE: self._client_response,
            SERVER_RESULT: self._server_result,
        }.get(self.state)
        return step() if step is not None else False

    # the server's side

    def _server_version(self) -> bool:
        line = self._take(self._from_server, 12)
        if line is None:
            return False
        if line not in (VERSION_37, VERSION_38):
            raise self._fail(f"The VNC server speaks {line[:12]!r}, not RFB 3.7 or 3.8"
                             " (VeNCrypt needs one of them)")
        self.server_version = line
        self._to_server += line
        self.state = SERVER_TYPES
        return True

    def _server_types(self) -> bool:
        buf = self._from_server
        if not buf:
            return False
        count = buf[0]
        if count == 0:
            reason = self._take_reason(buf[1:])
            if reason is None:
                return False
            raise self._fail(f"The VNC server refused the connection: {reason}")
        types = self._take(buf, 1 + count)
        if types is None:
            return False
        offered = list(types[1:])
        if SEC_VENCRYPT not in offered:
            raise self._fail(f"The VNC server offers security types {offered}, not"
                             f" VeNCrypt ({SEC_VENCRYPT}): is its TLS off?")
        self._to_server.append(SEC_VENCRYPT)
        self.state = VENCRYPT_VERSION
        return True

    def _vencrypt_version(self) -> bool:
        version = self._take(self._from_server, 2)
        if version is None:
            return False
        if (version[0], version[1]) < (0, 2):
            raise self._fail(f"The VNC server speaks VeNCrypt {version[0]}.{version[1]},"
                             " not 0.2")
        self._to_server += b"\x00\x02"
        self.state = VENCRYPT_SUBTYPES
        return True

    def _vencrypt_subtypes(self) -> bool:
        buf = self._from_server
        if not buf:
            return False
        if buf[0] != 0:
            raise self._fail("The VNC server refused VeNCrypt 0.2")
        if len(buf) < 2 or len(buf) < 2 + 4 * buf[1]:
            return False
        count = buf[1]
        if count == 0:
            raise self._fail("The VNC server offers no VeNCrypt subtype")
        offered = list(struct.unpack(f">{count}I", buf[2:2 + 4 * count]))
        del buf[:2 + 4 * count]
        chosen = next((s for s in self.accept if s in offered), None)
        if chosen is None:
            names = ", ".join(SUBTYPE_NAMES.get(s, str(s)) for s in offered)
            want = ", ".join(SUBTYPE_NAMES[s] for s in self.accept)
            raise self._fail(f"The VNC server offers VeNCrypt {names}; the node takes {want}")
        self.subtype = chosen
        self._to_server += struct.pack(">I", chosen)
        self.state = SUBTYPE_ACK
        return True

    def _subtype_ack(self) -> bool:
        ack = self._take(self._from_server, 1)
        if ack is None:
            return False
        if ack != b"\x01":
            raise self._fail(f"The VNC server refused VeNCrypt"
                             f" {SUBTYPE_NAMES[self.subtype]}")
        if self._from_server:
            raise self._fail("The VNC server sent data before the TLS handshake")
        self.state = START_TLS
        return False

    def _server_auth(self) -> bool:
        if self.vnc_auth:
            challenge = self._take(self._from_server, CHALLENGE_SIZE)
            if challenge is None:
                return False
            self._challenge = challenge
        else:
            ok = self._server_security_result()
            if ok is None:
                return False
        self.state = CLIENT_VERSION
        self._to_client += VERSION_38
        return True

    def _server_security_result(self) -> bool | None:
        """The server's SecurityResult: True (ok), None (not all there); raises on a refusal."""
        buf = self._from_server
        if len(buf) < 4:
            return None
        (status,) = struct.unpack(">I", buf[:4])
        if status == 0:
            del buf[:4]
            return True
        reason = "authentication failed"
        if self.server_version == VERSION_38:
            text = self._take_reason(buf[4:])
            if text is None:
                return None
            reason = text or reason
        raise self._fail(f"The VNC server refused: {reason}", tell_client=reason)

    # the browser's side

    def _client_version_step(self) -> bool:
        line = self._take(self._from_client, 12)
        if line is None:
            return False
        match = _VERSION.fullmatch(line)
        if match is None:
            raise self._fail(f"The browser sent {line!r}, not an RFB version")
        major, minor = int(match.group(1)), int(match.group(2))
        # RFC 6143 7.1.1: versions other than 3.7 and 3.8 are taken as 3.3
        self.client_version = {(3, 7): VERSION_37, (3, 8): VERSION_38}.get(
            (major, minor), VERSION_33)
        kind = SEC_VNC if self.vnc_auth else SEC_NONE
        if self.client_version == VERSION_33:
            self._to_client += struct.pack(">I", kind)
            self._chose(kind)
        else:
            self._to_client += bytes([1, kind])
            self.state = CLIENT_TYPE
        return True

    def _client_type(self) -> bool:
        chosen = self._take(self._from_client, 1)
        if chosen is None:
            return False
        kind = SEC_VNC if self.vnc_auth else SEC_NONE
        if chosen[0] != kind:
            raise self._fail(f"The browser chose security type {chosen[0]}, not the"
                             f" {kind} offered", tell_client="security type not offered")
        self._chose(kind)
        return True

    def _chose(self, kind: int) -> None:
        if kind == SEC_VNC:
            self._to_client += self._challenge
            self.state = CLIENT_RESPONSE
            return
        if self.client_version == VERSION_38:
            self._to_client += struct.pack(">I", 0)
        self._done()

    def _client_response(self) -> bool:
        response = self._take(self._from_client, CHALLENGE_SIZE)
        if response is None:
            return False
        self._to_server += response
        self.state = SERVER_RESULT
        return True

    def _server_result(self) -> bool:
        if self._server_security_result() is None:
            return False
        self._to_client += struct.pack(">I", 0)
        self._done()
        return False

    def _done(self) -> None:
        """The handshake is over: bytes already received go on to the other side."""
        self.state = DONE
        self._to_server += self._from_client
        self._to_client += self._from_server
        self._from_client.clear()
        self._from_server.clear()


def _reason(text: str) -> bytes:
    data = text.encode("utf-8")[:MAX_REASON]
    return struct.pack(">I", len(data)) + data
