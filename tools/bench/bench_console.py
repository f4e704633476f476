#!/usr/bin/env python3
"""The serial console's keystroke round trip through the broker (issue 30).

A 2-node kvm virtual cluster (no SSH servers), as
test/integration/test_kvm_console_web.py makes it: a tinylinux instance on
node2, ganeti-rapi on node1 (the master).  The benchmark gets a console
token from RAPI (``POST /2/instances/NAME/console/token``, an operator's
credentials), opens ``GET .../console/websocket?token=...`` (RAPI relays to
node2's node daemon over the cluster's mutual TLS, which relays to qemu's
``serial.sock``) and prints:

* the keystroke round trip: one character sent as a text message, until
  its echo from the guest's shell arrives as a binary message; ``SAMPLES``
  (200) after a warm-up, median, p90, p99 and max.  Each line typed starts
  with ``#`` (a comment for the shell) and ends after ``PER_LINE``
  characters with Enter; the characters are from a set the guest's own
  ``tinylinux: uptime`` lines never contain, so an echo is never mistaken;
* the open latency: from the token request to the first console byte,
  median of 5 opens (the console has no history: right after the
  handshake, Enter is sent and the first byte is the shell's answer to
  it), with the token-to-handshake part next to it;
* with headless Chromium (test/integration/webdriver.py), in
  ``/ui/console.html?name=NAME``: a key typed through WebDriver (the
  terminal's own key handler and the page's own WebSocket) until the
  character is in the terminal's DOM text, median of 30.  The time is taken
  in the page: a capturing ``keydown`` listener stamps the key, a
  MutationObserver on the terminal stamps the first change after which the
  screen holds one more of that character; WebDriver's own latency is not
  in the figure.

Figures only; no assertion on time.  Needs qemu-system-x86_64 and root
(the node daemons, qemu's run directories); says why and exits 0 otherwise.
Run: ``.venv/bin/python tools/bench/bench_console.py`` (about 1-2 minutes).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import statistics
import sys
import tempfile
import time
import urllib.parse
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import webdriver  # noqa: E402
from guest_helpers import BOOT_LINE, wait_for_line  # noqa: E402
from host_helpers import qemu_reason  # noqa: E402
from vcluster_harness import VirtualCluster  # noqa: E402

from ganeti import constants  # noqa: E402
from ganeti.http import websocket as ws  # noqa: E402
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor  # noqa: E402

N2 = "node2.vcluster"
INST = "benchcon1.example.com"
USER, PASSWORD = "bench", "benchpass"
SAMPLES, WARMUP, PER_LINE = 200, 20, 40
OPENS = 5
BROWSER_SAMPLES = 30
PROMPT = b"tinylinux# "
#: letters in neither "tinylinux: uptime 12.34" nor "tinylinux# " nor "booted"
KEYS = "acfghjkqrsvwz"


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def _tls() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


def _rapi(address: tuple[str, int], method: str, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPSConnection(*address, context=_tls(), timeout=60)
    try:
        auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        conn.request(method, path, headers={"Authorization": auth})
        resp = conn.getresponse()
        text = resp.read()
        return resp.status, (json.loads(text) if text else None)
    finally:
        conn.close()


def _token(address: tuple[str, int]) -> str:
    status, grant = _rapi(address, "POST", f"/2/instances/{INST}/console/token")
    if status != 200:
        raise RuntimeError(f"console token: {status} {grant}")
    return str(grant["token"])


class Console:
    """A WebSocket client of the brokered console: TLS to RAPI, the handshake, masked frames."""

    def __init__(self, address: tuple[str, int], token: str) -> None:
        path = f"/2/instances/{INST}/console/websocket?token={urllib.parse.quote(token)}"
        self.sock = _tls().wrap_socket(socket.create_connection(address, 10))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(10)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {address[0]}:{address[1]}",
                 "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                 f"Sec-WebSocket-Key: {key}"]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed during the handshake")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101") or ws.accept_key(key).encode() not in head:
            raise RuntimeError("no WebSocket: " + head.decode("latin-1")[:300])
        self.decoder = ws.Decoder(masked=False)
        self.decoder.feed(rest)
        self.pending = b""

    def send(self, text: str) -> None:
        self.sock.sendall(ws.encode_frame(ws.OP_TEXT, text.encode(), mask=os.urandom(4)))

    def _take(self) -> None:
        for msg in self.decoder.messages():
            if msg.opcode == ws.OP_BINARY:
                self.pending += msg.data
            elif msg.opcode == ws.OP_CLOSE:
                raise RuntimeError(f"console closed: {ws.parse_close(msg.data)}")

    def read(self, timeout: float) -> bytes:
        """The console bytes that arrive within ``timeout`` ("" if none)."""
        self._take()
        if not self.pending:
            self.sock.settimeout(timeout)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return b""
            if not data:
                raise RuntimeError("connection closed")
            self.decoder.feed(data)
            self._take()
        out, self.pending = self.pending, b""
        return out

    def until(self, wanted: bytes, timeout: float) -> bytes:
        """Read until ``wanted`` shows; everything read."""
        deadline = time.monotonic() + timeout
        seen = b""
        while wanted not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{wanted!r} not seen; got {seen[-200:]!r}")
            seen += self.read(min(left, 0.5))
        return seen

    def close(self) -> None:
        try:
            self.sock.sendall(ws.encode_frame(ws.OP_CLOSE, ws.close_payload(1000),
                                              mask=os.urandom(4)))
        except OSError:
            pass
        self.sock.close()


def _shell_ready(con: Console) -> None:
    """Wait until the guest's shell answers Enter with its prompt (it may still be booting)."""
    deadline = time.monotonic() + 120
    while True:
        con.send("\r")
        try:
            con.until(PROMPT, 2)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise


def _new_line(con: Console) -> None:
    con.send("\r")
    con.until(PROMPT, 10)
    while con.read(0.05):          # whatever else came (an uptime line)
        pass
    con.send("#")
    con.until(b"#", 10)


def _round_trips(con: Console, count: int) -> list[float]:
    out: list[float] = []
    _new_line(con)
    for i in range(count):
        if i and i % PER_LINE == 0:
            _new_line(con)
        char = KEYS[i % len(KEYS)]
        began = time.perf_counter()
        con.send(char)
        seen = b""
        while char.encode() not in seen:
            seen += con.read(5)
            if time.perf_counter() - began > 10:
                raise RuntimeError(f"no echo of {char!r}")
        out.append(time.perf_counter() - began)
    return out


def _open_latency(address: tuple[str, int]) -> tuple[float, float]:
    """(token request to 101, token request to the first console byte), seconds."""
    began = time.perf_counter()
    con = Console(address, _token(address))
    upgraded = time.perf_counter() - began
    try:
        con.send("\r")
        while not con.read(10):
            if time.perf_counter() - began > 10:
                raise RuntimeError("no console byte in 10 s")
        return upgraded, time.perf_counter() - began
    finally:
        con.close()


# In the page: stamp the key (capturing keydown) and the first terminal change after
# which the screen holds more of that character than at the key.
_ARM = """
const char = arguments[0];
const box = document.getElementById('terminal');
const count = () => box.innerText.split(char).length - 1;
const probe = {char: char, key: null, shown: null, before: count()};
window.__probe = probe;
const onKey = (ev) => {
  if (ev.key === char && probe.key === null) { probe.key = performance.now();
                                               probe.before = count(); }
};
window.addEventListener('keydown', onKey, true);
const obs = new MutationObserver(() => {
  if (probe.key !== null && probe.shown === null && count() > probe.before) {
    probe.shown = performance.now(); obs.disconnect();
    window.removeEventListener('keydown', onKey, true);
  }
});
obs.observe(box, {childList: true, subtree: true, characterData: true});
return true;
"""


def _browser(address: tuple[str, int]) -> list[float]:
    origin = f"https://{address[0]}:{address[1]}"
    page = "/ui/console.html?name=" + urllib.parse.quote(INST)
    out: list[float] = []
    with webdriver.browser() as b:
        b.get(origin + "/ui/login.html?next=" + urllib.parse.quote(page))
        b.type("#user", USER)
        b.type("#password", PASSWORD)
        b.click("#submit")
        b.wait("return document.body.dataset.console === 'open'", "the console open", 30)
        screen = "return document.getElementById('terminal').innerText"
        deadline = time.monotonic() + 60
        while "@@B@@42" not in b.script(screen):
            if time.monotonic() > deadline:
                raise RuntimeError("the shell does not answer in the page")
            b.type(".terminal", "echo @@B@@$((6*7))\ue007")
            try:
                b.wait(screen + ".includes('@@B@@42')", "the answer", 5)
            except AssertionError:
                continue
        b.type(".terminal", "#")
        i = 0
        while len(out) < BROWSER_SAMPLES:
            if i and i % PER_LINE == 0:
                b.type(".terminal", "\ue007#")
                time.sleep(0.3)
            char = KEYS[i % len(KEYS)]
            i += 1
            b.script(_ARM, char)
            b.type(".terminal", char)
            try:
                got = b.wait("const p = window.__probe; return p.shown !== null &&"
                             " [p.key, p.shown];", "the echo", 10)
            except AssertionError:
                continue                # a line with that character scrolled off meanwhile
            out.append((got[1] - got[0]) / 1000)
            time.sleep(0.05)
    return out


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> int:
    why = qemu_reason()
    if not why and os.geteuid() != 0:
        why = "needs root (the node daemons and qemu of a kvm virtual cluster)"
    if why:
        print(f"skipped: {why}")
        return 0
    print(f"load average before: {_load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        with VirtualCluster(os.path.join(tmp, "vc"), nodes=2, use_ssh=False,
                            hypervisor=constants.HT_KVM) as vc:
            path = vc.paths(vc.cluster.master_node.name).rapi_users_file
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w") as fh:
                fh.write(f"{USER} {PASSWORD} operator\n")
            os.chmod(path + ".tmp", 0o600)
            os.replace(path + ".tmp", path)
            address = (vc.cluster.master_node.ip, int(vc.cluster.rapi_port or 0))
            deadline = time.monotonic() + 10
            while _rapi(address, "GET", "/2/tokens")[0] != 200:      # users loaded
                if time.monotonic() > deadline:
                    raise RuntimeError("RAPI users file not loaded")
                time.sleep(0.1)
            vc.ok("gnt-instance", "add", "-t", "file", "-s", "64M", "-o", "tinylinux",
                  "-n", N2, "--no-name-check", "--no-ip-check", INST)
            wait_for_line(KvmHypervisor(vc.paths(N2)).serial_log(INST), BOOT_LINE)
            con = Console(address, _token(address))
            try:
                _shell_ready(con)
                _round_trips(con, WARMUP)
                trips = _round_trips(con, SAMPLES)
            finally:
                con.close()
            opens = [_open_latency(address) for _ in range(OPENS)]
            print(f"keystroke round trip (WebSocket client), {SAMPLES} samples: median"
                  f" {_ms(trips, 0.5):.1f} ms, p90 {_ms(trips, 0.9):.1f} ms,"
                  f" p99 {_ms(trips, 0.99):.1f} ms, max {max(trips) * 1000:.1f} ms", flush=True)
            print(f"open, token request to first console byte, median of {OPENS}:"
                  f" {statistics.median(o[1] for o in opens) * 1000:.1f} ms (token request to"
                  f" WebSocket 101: {statistics.median(o[0] for o in opens) * 1000:.1f} ms;"
                  f" max {max(o[1] for o in opens) * 1000:.1f} ms)", flush=True)
            reason = webdriver.missing()
            if reason:
                print(f"browser: skipped: {reason}")
            else:
                page = _browser(address)
                print(f"browser key (WebDriver) to character in the terminal's DOM, median of"
                      f" {len(page)}: {statistics.median(page) * 1000:.1f} ms"
                      f" (max {max(page) * 1000:.1f} ms)")
    print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
