"""The serial console in the browser, brokered by the master: a WebSocket through real daemons.

A 2-node kvm virtual cluster (no SSH servers): a tinylinux instance on
node2, and ganeti-rapi on node1 (the master).  A tiny WebSocket client
(below, on :mod:`ganeti.http.websocket`) gets a console token with an
operator's credentials (``POST /2/instances/NAME/console/token``), opens
``GET .../console/websocket?token=...`` on RAPI, which opens the node
daemon's console pipe on node2 over the cluster's mutual TLS, types a
command into the guest's shell and reads its answer.  Also checked through
the daemons: a token works once, does not open another instance's
console, a readonly user gets none, a web console session needs its CSRF
token for one, the token never reaches the access log.  The instance also
has VNC with a password (``vnc_bind_address``, ``vnc_password_file``): a
VNC token carries the password, opens VNC and nothing else, and the VNC
page (noVNC) in headless Chromium connects and shows the guest's screen.
Skips only when qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import socket
import ssl
import time
import urllib.parse

import pytest
from guest_helpers import BOOT_LINE, wait_for_line
from instance_helpers import NOCHECK
from test_rapi import request, write_users
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.http import websocket as ws
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from ganeti.rapi import webui
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

N1, N2 = "node1.vcluster", "node2.vcluster"
VNC_PASSWORD = "vnc-p4ss"
INST, OTHER = "webcon1.example.com", "webcon2.example.com"
USERS = "olga opass operator\nrita rpass read\n"
OLGA, RITA = ("olga", "opass"), ("rita", "rpass")


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    base = tmp_path_factory.mktemp("vwebcon")
    with VirtualCluster(base, nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        # in the master's configuration directory: the only place the broker hands a
        # VNC password out from (the nodes of a virtual cluster share the host's files)
        password_file = pathlib.Path(cluster.paths(N1).conf_dir, "vnc-cluster-password")
        password_file.write_text(VNC_PASSWORD + "\n")
        password_file.chmod(0o600)
        write_users(cluster, USERS)
        deadline = time.monotonic() + 10
        while request(cluster, "GET", "/2/tokens", auth=OLGA)[0] != 200:   # users loaded
            assert time.monotonic() < deadline, "users file not loaded"
            time.sleep(0.1)
        cluster.ok("gnt-instance", "add", "-t", "file", "-s", "64M", "-o", "tinylinux",
                   "-n", N2, "-H", f"vnc_bind_address=127.0.0.1,vnc_password_file="
                   f"{password_file}", *NOCHECK, INST)
        cluster.ok("gnt-instance", "add", "-t", "file", "-s", "64M", "-o", "tinylinux",
                   "-n", N2, "--no-start", *NOCHECK, OTHER)
        assert wait_for_line(KvmHypervisor(cluster.paths(N2)).serial_log(INST)) == \
            f"{BOOT_LINE} {INST}"
        yield cluster


class WsClient:
    """A WebSocket client for the tests: TLS to RAPI, the handshake, masked frames."""

    def __init__(self, vc, path: str, headers: dict[str, str] | None = None) -> None:
        host, port = vc.cluster.master_node.ip, vc.cluster.rapi_port
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        self.sock = ctx.wrap_socket(socket.create_connection((host, port), 10))
        self.sock.settimeout(10)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                 f"Sec-WebSocket-Key: {key}",
                 *(f"{k}: {v}" for k, v in (headers or {}).items())]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1]) if head else 0
        self.head = head.decode("latin-1")
        self.body = rest
        if self.status == 101:
            assert f"Sec-WebSocket-Accept: {ws.accept_key(key)}" in self.head
        self.decoder = ws.Decoder(masked=False)
        self.decoder.feed(rest if self.status == 101 else b"")
        self.seen = b""
        self.closed: tuple[int, str] | None = None

    def send_text(self, text: str) -> None:
        self.sock.sendall(ws.encode_frame(ws.OP_TEXT, text.encode(), mask=os.urandom(4)))

    def send(self, opcode: int, payload: bytes) -> None:
        self.sock.sendall(ws.encode_frame(opcode, payload, mask=os.urandom(4)))

    def read_until(self, wanted: bytes, timeout: float, *, retype: str | None = None) -> bytes:
        """Console output until ``wanted`` shows (typing ``retype`` every 2 s meanwhile)."""
        deadline = time.monotonic() + timeout
        next_type = 0.0
        while wanted not in self.seen:
            now = time.monotonic()
            assert now < deadline, f"{wanted!r} not seen; got {self.seen[-400:]!r}"
            assert self.closed is None, f"closed: {self.closed}"
            if retype is not None and now >= next_type:
                self.send_text(retype)
                next_type = now + 2.0
            self.sock.settimeout(0.5)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            assert data, "connection closed"
            self.decoder.feed(data)
            self._take()
        return self.seen

    def _take(self) -> None:
        for msg in self.decoder.messages():
            if msg.opcode == ws.OP_BINARY:
                self.seen += msg.data
            elif msg.opcode == ws.OP_CLOSE:
                self.closed = ws.parse_close(msg.data)

    def wait_close(self, timeout: float = 10.0) -> tuple[int, str]:
        deadline = time.monotonic() + timeout
        while self.closed is None:
            assert time.monotonic() < deadline, "no close frame"
            self.sock.settimeout(1)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                break
            self.decoder.feed(data)
            self._take()
        assert self.closed is not None
        return self.closed

    def close(self) -> None:
        self.sock.close()


def _token(vc, name: str = INST, auth=OLGA) -> tuple[int, dict]:
    status, body, _ = request(vc, "POST", f"/2/instances/{name}/console/token", auth=auth)
    return status, body


def _ws_path(name: str, token: str, kind: str = "serial") -> str:
    return (f"/2/instances/{name}/console/websocket?token={urllib.parse.quote(token)}"
            + ("" if kind == "serial" else f"&kind={kind}"))


def test_typing_a_command_in_the_guest_through_the_broker(vc):
    status, grant = _token(vc)
    assert status == 200, grant
    assert grant["instance"] == INST and grant["expires_in"] == 30
    assert grant["websocket"] == f"/2/instances/{INST}/console/websocket"
    client = WsClient(vc, _ws_path(INST, grant["token"]))
    try:
        assert client.status == 101, client.head + client.body.decode("latin-1")
        client.read_until(b"@@WEB@@42", 90, retype="echo @@WEB@@$((6*7))\r")
        client.send(ws.OP_PING, b"hello")
        client.send(ws.OP_CLOSE, ws.close_payload(1000))
        assert client.wait_close()[0] == 1000
    finally:
        client.close()


def test_get_console_gives_every_console_and_upstreams_shape_first(vc):
    status, cons, _ = request(vc, "GET", f"/2/instances/{INST}/console", auth=OLGA)
    assert status == 200, cons
    assert cons["kind"] == "ssh" and cons["instance"] == INST
    assert [c["kind"] for c in cons["consoles"]] == ["ssh", "vnc"]
    assert cons["consoles"][0] == {k: v for k, v in cons.items() if k != "consoles"}
    assert isinstance(cons["consoles"][1]["port"], int)     # the port its qemu listens on
    assert VNC_PASSWORD not in json.dumps(cons)


def test_a_token_opens_one_console_once(vc):
    _, grant = _token(vc)
    first = WsClient(vc, _ws_path(INST, grant["token"]))
    try:
        assert first.status == 101
    finally:
        first.close()
    second = WsClient(vc, _ws_path(INST, grant["token"]))
    assert second.status == 403 and "already used" in second.body.decode()
    second.close()


def test_a_token_for_one_instance_does_not_open_another(vc):
    _, grant = _token(vc)
    other = WsClient(vc, _ws_path(OTHER, grant["token"]))
    assert other.status == 403 and "another instance" in other.body.decode()
    other.close()
    # and it is spent: not usable on its own instance either
    again = WsClient(vc, _ws_path(INST, grant["token"]))
    assert again.status == 403
    again.close()


def test_no_token_or_a_made_up_one_is_refused(vc):
    for path in (f"/2/instances/{INST}/console/websocket", _ws_path(INST, "x" * 43)):
        client = WsClient(vc, path)
        assert client.status == 403, client.head
        client.close()


def test_a_stopped_instance_gets_no_token(vc):
    assert _token(vc, OTHER)[0] == 503


def test_a_readonly_user_gets_no_token(vc):
    status, body = _token(vc, auth=RITA)
    assert status == 403 and "operator" in body["explain"]
    assert _token(vc, auth=None)[0] == 401


def test_another_origin_is_refused(vc):
    _, grant = _token(vc)
    client = WsClient(vc, _ws_path(INST, grant["token"]),
                      {"Origin": "https://evil.example.com"})
    assert client.status == 403 and "origin" in client.body.decode()
    client.close()


def test_a_session_needs_its_csrf_token_for_a_console_token(vc):
    status, login, resp = request(vc, "POST", "/ui/login", {"user": "olga",
                                                             "password": "opass"})
    assert status == 200
    cookie = resp.getheader("Set-Cookie").split(";")[0]
    path = f"/2/instances/{INST}/console/token"
    assert request(vc, "POST", path, headers={"Cookie": cookie})[0] == 403
    status, grant, _ = request(vc, "POST", path, headers={
        "Cookie": cookie, "X-CSRF-Token": login["csrf_token"]})
    assert status == 200 and grant["token"]
    # a logout ends the console opened with the session's token
    client = WsClient(vc, _ws_path(INST, grant["token"]))
    try:
        assert client.status == 101
        assert request(vc, "POST", "/ui/logout", headers={
            "Cookie": cookie, "X-CSRF-Token": login["csrf_token"]})[0] == 200
        code, reason = client.wait_close()
        assert code == ws.CLOSE_POLICY and "no longer valid" in reason
    finally:
        client.close()


def test_tokens_never_reach_the_access_log(vc):
    _, grant = _token(vc)
    WsClient(vc, _ws_path(INST, grant["token"])).close()
    log = os.path.join(vc.paths(N1).log_dir, constants.RAPI_ACCESS_LOG)
    deadline = time.monotonic() + 5
    while True:
        with open(log) as fh:
            text = fh.read()
        if "console/websocket?token=-" in text or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert "console/websocket?token=-" in text
    assert grant["token"] not in text
    assert json.dumps(grant["token"])[1:-1] not in text


def _log_in(b, origin: str, page: str) -> None:
    """Log in as olga (an operator) on the login form, which then leads to ``page``."""
    b.get(origin + "/ui/login.html?next=" + urllib.parse.quote(page))
    b.type("#user", "olga")
    b.type("#password", "opass")
    b.click("#submit")


def test_the_console_page_in_chromium(vc):
    """/ui/console.html, reached from the instance page's link: a command typed into the
    term.js terminal runs in the guest, and its answer shows on the page."""
    import webdriver
    reason = webdriver.missing()
    host_helpers.skip_unless(reason, required_by=host_helpers.REQUIRE_BROWSER)
    origin = f"https://{vc.cluster.master_node.ip}:{vc.cluster.rapi_port}"
    page = "/ui/instance.html?name=" + urllib.parse.quote(INST)
    with webdriver.browser(width=1100, height=700) as b:
        _log_in(b, origin, page)
        b.wait("return document.body.dataset.ready === '1' && location.pathname",
               "the instance page")
        href = b.wait("const a = document.getElementById('console-link');"
                      " return a && a.href.includes('console.html') && a.href", "the link")
        assert href == origin + "/ui/console.html?name=" + urllib.parse.quote(INST)
        b.click("#console-link")
        b.wait("return document.body.dataset.console === 'open'", "the console open", 20)
        screen = "return document.getElementById('terminal').innerText"
        deadline = time.monotonic() + 60
        while "@@UI@@42" not in b.script(screen):
            assert time.monotonic() < deadline, b.script(screen)[-400:]
            b.type(".terminal", "echo @@UI@@$((6*7))\ue007")
            try:
                b.wait(screen + ".includes('@@UI@@42')", "the answer", 5)
            except AssertionError:
                continue
        # colours: term.js's own style attributes, which the console page's policy allows
        red = ("return [...document.querySelectorAll('#terminal span')].some(s =>"
               " s.textContent.includes('RED42') && getComputedStyle(s).color"
               " === 'rgb(204, 0, 0)')")   # term.js's red, #cc0000: the style applied
        deadline = time.monotonic() + 60
        while not b.script(red):
            assert time.monotonic() < deadline, b.script(
                "return document.getElementById('terminal').innerHTML")[-600:]
            b.type(".terminal", "printf '\\033[31mRED%s\\033[0m\\n' $((40+2))\ue007")
            try:
                b.wait(red, "red text", 5)
            except AssertionError:
                continue
        assert all(u.startswith(origin) for u in b.resource_urls())
        shots = os.environ.get("GANETI_TEST_SCREENSHOTS")
        if shots:                     # doc/webui/console.png (doc/webui.md, "Tests")
            with open(os.path.join(shots, "console.png"), "wb") as fh:
                fh.write(b.screenshot())


# --- VNC -------------------------------------------------------------------------------------

def _vnc_token(vc, name: str = INST, auth=OLGA) -> tuple[int, dict]:
    status, body, _ = request(vc, "POST", f"/2/instances/{name}/console/token?kind=vnc",
                              auth=auth)
    return status, body


def test_a_vnc_token_carries_the_password_and_opens_the_rfb_stream(vc):
    status, grant = _vnc_token(vc)
    assert status == 200, grant
    assert grant["kind"] == "vnc" and grant["password"] == VNC_PASSWORD
    assert grant["websocket"] == f"/2/instances/{INST}/console/websocket?kind=vnc"
    client = WsClient(vc, _ws_path(INST, grant["token"], "vnc"),
                      {"Sec-WebSocket-Protocol": "binary"})
    try:
        assert client.status == 101, client.head + client.body.decode("latin-1")
        assert "Sec-WebSocket-Protocol: binary" in client.head
        assert client.read_until(b"RFB 003.008\n", 10).startswith(b"RFB 003.008\n")
        # the same version back: qemu offers one security type, VNC authentication (2)
        client.send(ws.OP_BINARY, b"RFB 003.008\n")
        assert client.read_until(b"RFB 003.008\n\x01\x02", 10) == b"RFB 003.008\n\x01\x02"
    finally:
        client.close()


def test_a_vnc_token_opens_nothing_else(vc):
    _, grant = _vnc_token(vc)
    other = WsClient(vc, _ws_path(OTHER, grant["token"], "vnc"))
    assert other.status == 403 and "another instance" in other.body.decode()
    other.close()
    _, grant = _vnc_token(vc)
    serial = WsClient(vc, _ws_path(INST, grant["token"]))
    assert serial.status == 403 and "for the vnc console" in serial.body.decode()
    serial.close()
    _, grant = _token(vc)
    vnc = WsClient(vc, _ws_path(INST, grant["token"], "vnc"))
    assert vnc.status == 403 and "for the serial console" in vnc.body.decode()
    vnc.close()
    assert _vnc_token(vc, OTHER)[0] == 503
    assert _vnc_token(vc, auth=RITA)[0] == 403


def test_the_vnc_password_is_in_no_log_and_no_job(vc):
    _vnc_token(vc)
    found = []
    for node in (N1, N2):
        paths = vc.paths(node)
        for top in (paths.log_dir, paths.queue_dir):
            for root, _, files in os.walk(top):
                for name in files:
                    with open(os.path.join(root, name), "rb") as fh:
                        if VNC_PASSWORD.encode() in fh.read():
                            found.append(os.path.join(root, name))
    assert found == []


#: the framebuffer: more than one colour on noVNC's canvas (the guest's text screen)
_CANVAS_COLOURS = """
    const c = document.querySelector('#screen canvas');
    if (!c || !c.width || !c.height) return 0;
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const seen = new Set();
    for (let i = 0; i < px.length && seen.size < 3; i += 4 * 7) {
      seen.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
    }
    return seen.size > 1 ? seen.size : 0;"""


def _need_novnc() -> None:
    """Skip (fail, when the browser is required) without Chromium or Debian's novnc."""
    import webdriver
    novnc = os.path.join(webui.VENDOR_TREES["vendor/novnc/"][0], "core", "rfb.js")
    reason = webdriver.missing() or (None if os.path.exists(novnc) else
                                     f"{novnc} missing (Debian novnc: make debian-deps)")
    host_helpers.skip_unless(reason, required_by=host_helpers.REQUIRE_BROWSER)


def _novnc_shows_the_screen(b, origin: str) -> None:
    b.wait("return document.body.dataset.vnc === 'connected'", "noVNC connected", 20)
    assert b.wait(_CANVAS_COLOURS, "a non-uniform framebuffer", 20) > 1
    assert b.script("return document.getElementById('state').textContent") == "connected"
    assert all(u.startswith(origin) for u in b.resource_urls())


def test_the_vnc_page_in_chromium(vc):
    """/ui/vnc.html, reached from the instance page's VNC link: noVNC connects through
    the broker (the password from the token) and its canvas shows the guest's screen."""
    import webdriver
    _need_novnc()
    origin = f"https://{vc.cluster.master_node.ip}:{vc.cluster.rapi_port}"
    page = "/ui/instance.html?name=" + urllib.parse.quote(INST)
    with webdriver.browser() as b:
        _log_in(b, origin, page)
        b.wait("return document.body.dataset.ready === '1' && location.pathname",
               "the instance page")
        href = b.wait("const a = document.getElementById('vnc-link');"
                      " return a && !a.hidden && a.href", "the VNC link")
        assert href == origin + "/ui/vnc.html?name=" + urllib.parse.quote(INST)
        b.click("#vnc-link")
        _novnc_shows_the_screen(b, origin)


# --- VNC over TLS (last: it restarts the instance with vnc_tls) --------------------------

def test_vnc_over_tls_noVNC_through_the_node_and_qemu_asks_for_vencrypt(vc, tmp_path):
    """The instance restarted with ``vnc_tls`` and a throw-away CA (qemu checks the
    node's client certificate too): qemu itself offers only VeNCrypt, the node's end
    offers the browser VNC authentication, and noVNC connects and draws the screen."""
    from fakes.x509ca import make_vnc_x509_dir
    x509 = make_vnc_x509_dir(tmp_path / "vnc-x509")
    vc.ok("gnt-instance", "modify", "-H",
          f"vnc_tls=true,vnc_x509_path={x509},vnc_x509_verify=true", INST)
    vc.ok("gnt-instance", "reboot", "--type=hard", INST)
    status, cons, _ = request(vc, "GET", f"/2/instances/{INST}/console", auth=OLGA)
    assert status == 200, cons
    port = cons["consoles"][1]["port"]
    # a plain RFB client straight at qemu: asked for VeNCrypt (19) and nothing else
    with socket.create_connection(("127.0.0.1", port), 10) as raw:
        raw.settimeout(10)
        greeting = b""
        while len(greeting) < 14:
            if len(greeting) == 12:
                raw.sendall(greeting)
            chunk = raw.recv(14 - len(greeting))
            assert chunk, greeting
            greeting += chunk
        assert greeting == b"RFB 003.008\n\x01\x13"
    # through the broker: the node spoke VeNCrypt and TLS to qemu, the browser gets RFB
    _, grant = _vnc_token(vc)
    client = WsClient(vc, _ws_path(INST, grant["token"], "vnc"),
                      {"Sec-WebSocket-Protocol": "binary"})
    try:
        assert client.status == 101, client.head + client.body.decode("latin-1")
        client.read_until(b"RFB 003.008\n", 10)
        client.send(ws.OP_BINARY, b"RFB 003.008\n")
        assert client.read_until(b"RFB 003.008\n\x01\x02", 10) == b"RFB 003.008\n\x01\x02"
    finally:
        client.close()
    import webdriver
    _need_novnc()
    origin = f"https://{vc.cluster.master_node.ip}:{vc.cluster.rapi_port}"
    page = "/ui/vnc.html?name=" + urllib.parse.quote(INST)
    with webdriver.browser(width=1100, height=700) as b:
        _log_in(b, origin, page)
        _novnc_shows_the_screen(b, origin)
        shots = os.environ.get("GANETI_TEST_SCREENSHOTS")
        if shots:                     # doc/webui/vnc.png (doc/webui.md, "Tests")
            time.sleep(2)             # the guest's boot lines on the screen
            with open(os.path.join(shots, "vnc.png"), "wb") as fh:
                fh.write(b.screenshot())
