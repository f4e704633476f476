"""Malformed RAPI requests from a seeded generator, and a TLS client that sends them.

:func:`generate` yields :class:`Case` rows (raw request bytes plus the
status codes a correct server may answer); :class:`Fuzzer` sends them
over TLS to a running ``ganeti-rapi``, reusing a connection as long as the
server keeps it open, and checks every answer: a well-formed HTTP/1.x
response with an expected status, a Ganeti JSON error body for an error,
and never a traceback.  Used by ``test_rapi_fuzz.py`` (2,000 requests) and
by the ``rapi`` scenario of ``tools/soak/soak.py`` (longer).

Only the ``body`` cases carry a write user's credentials, on ``PUT
/2/nodes/[node]/role`` with bodies that are never a valid role; so no case
may submit a job, and the caller checks that the job serial is unchanged.
"""

from __future__ import annotations

import base64
import json
import random
import re
import select
import socket
import ssl
import string
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ganeti.rapi import resources

MAX_BODY = 10 * 1024 * 1024
#: the largest body accepted without credentials (doc/rapi.md, "The daemon")
MAX_ANONYMOUS_BODY = 64 * 1024
#: the statuses any garbage request line may get from the stdlib parser
_GARBAGE = frozenset({400, 414, 431, 501, 505})
_SAFE_READS = ["/version", "/", "/2", "/2/features"]
_TOKEN = string.ascii_letters + string.digits + "-_."


@dataclass(frozen=True)
class Case:
    """One request: raw bytes and the statuses a correct server may answer.

    An empty ``expect`` means no HTTP answer at all (the connection is
    closed), e.g. for plain text on the TLS port.  ``half_close`` ends
    our sending side after ``data`` (the request promised more body).
    """

    kind: str
    data: bytes
    expect: frozenset[int]
    half_close: bool = False
    pre_tls: bool = False
    head: bool = False


def _concrete(path: str, node: str) -> str:
    subst = {"job_id": "1", "node": node, "resource": "node"}
    return re.sub(r"\{(\w+)\}", lambda m: subst.get(m.group(1), "nosuch"), path)


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _request(method: str, path: str, headers: list[tuple[str, str]] | None = None,
             body: bytes = b"", *, length: str | None = None,
             version: str = "HTTP/1.1") -> bytes:
    lines = [f"{method} {path} {version}", "Host: rapi"]
    lines += [f"{k}: {v}" for k, v in headers or []]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    elif body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class _Gen:
    rng: random.Random
    node: str
    reader: tuple[str, str]
    writer: tuple[str, str]
    writes: list[tuple[str, str]] = field(default_factory=list)

    def word(self, lo: int = 1, hi: int = 12) -> str:
        return "".join(self.rng.choice(_TOKEN) for _ in range(self.rng.randint(lo, hi)))

    def junk(self, lo: int, hi: int) -> bytes:
        return bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(lo, hi)))

    def write(self) -> tuple[str, str]:
        return self.rng.choice(self.writes)

    def not_json(self) -> bytes:
        return self.rng.choice([
            lambda: b"{" + self.word().encode(), lambda: b"[1, 2",
            lambda: b"NaN", lambda: b"[Infinity]", lambda: b"{'single': 1}",
            lambda: b'{"a": 1} trailing', lambda: self.junk(1, 200).replace(b"\n", b"")
            + b"\x00", lambda: b"\xff\xfe\xfd", lambda: b'"\\u12"',
            lambda: b"[" * self.rng.randint(2000, 200000),
            lambda: b'{"a":' * self.rng.randint(1000, 50000),
        ])()

    # one method per kind of malformed request ------------------------------------------

    def method(self) -> Case:
        verb = self.rng.choice(["PATCH", "OPTIONS", "TRACE", "HEAD", "get", "Post", "FOO",
                                "PROPFIND", self.word().upper()])
        if verb in ("GET", "PUT", "POST", "DELETE"):
            verb = "PATCH"
        path = self.rng.choice(_SAFE_READS + [p for _, p in self.writes[:5]])
        return Case("method", _request(verb, path), frozenset({501}), head=verb == "HEAD")

    def path(self) -> Case:
        choice = self.rng.randrange(6)
        if choice == 0:     # unknown resources
            path = self.rng.choice(["/3", "/2/nowhere", "/x", "/2/info/more", "/version/2"])
            path += "".join("/" + self.word() for _ in range(self.rng.randint(0, 4)))
            return Case("path", _request("GET", path), frozenset({404}))
        if choice == 1:     # percent-escapes that are not UTF-8, or NUL
            path = "/2/" + self.rng.choice(["%ff", "%c3%28", "%ed%a0%80", "info%00", "%e2%82"])
            return Case("path", _request("GET", path), frozenset({400, 404}))
        if choice == 2:     # a bad query string on a real resource
            query = self.rng.choice(["%ff=1", "bulk=maybe", "bulk=2", "a", "bulk=%80",
                                     "bulk=1&&x", "bulk=-1"])
            path = self.rng.choice(["/2/nodes", "/2/instances", "/2/jobs", "/2/groups"])
            return Case("path", _request("GET", f"{path}?{query}"), frozenset({400}))
        if choice == 3:     # a known path with a method it does not have
            path = self.rng.choice(["/version", "/2/info", "/2/features", "/2/os"])
            return Case("path", _request(self.rng.choice(["PUT", "POST", "DELETE"]), path),
                        frozenset({501}))
        if choice == 4:     # a request line too long for the server
            path = "/" + "a" * self.rng.randint(70000, 100000)
            return Case("path", _request("GET", path), frozenset({414}))
        path = self.rng.choice(["*", "version", "/..", "/2/../../etc/passwd", "/%2e%2e/"])
        return Case("path", _request("GET", path), frozenset({400, 404}))

    def version(self) -> Case:
        choice = self.rng.randrange(4)
        if choice == 0:
            return Case("version", _request("GET", "/version", version="HTTP/2.0"),
                        frozenset({505}))
        if choice == 1:
            ver = self.rng.choice(["HTTP/1.x", "HTTQ/1.1", "HTTP/", "HTTP/1.1.1", "http/1.1"])
            return Case("version", _request("GET", "/version", version=ver),
                        frozenset({400}))
        if choice == 2:     # HTTP/0.9: no version, no headers
            return Case("version", b"GET /version\r\n", frozenset({400}))
        return Case("version", b"GET /version HTTP/1.1 extra\r\n\r\n", frozenset({400}))

    def header(self) -> Case:
        choice = self.rng.randrange(4)
        if choice == 0:
            headers = [(f"X-{i}", "v") for i in range(self.rng.randint(101, 300))]
            return Case("header", _request("GET", "/version", headers), frozenset({431}))
        if choice == 1:
            headers = [("X-Long", "v" * self.rng.randint(66000, 90000))]
            return Case("header", _request("GET", "/version", headers), frozenset({431}))
        if choice == 2:     # a line without a colon, a folded line, odd names
            raw = (b"GET /version HTTP/1.1\r\nHost: x\r\n" + self.rng.choice([
                b"no colon here\r\n", b" folded\r\n", b": empty name\r\n",
                b"X-\xff\xfe: latin\r\n", b"X-A:\x00\x01\r\n"]) + b"\r\n")
            return Case("header", raw, frozenset({200, 400}))
        return Case("header", _request("GET", "/version", [("Expect", "nonsense")]),
                    frozenset({200, 417}))

    def length(self) -> Case:
        ctype = [("Content-Type", "application/json")]
        choice = self.rng.randrange(6)
        if choice == 0:
            bad = self.rng.choice(["abc", "-1", "1e3", "0x10", "", "+5", "1 2", "\xb2", "\xb9"])
            return Case("length", _request("GET", "/version", ctype, b"{}", length=bad),
                        frozenset({400}))
        if choice == 1:
            raw = _request("GET", "/version", ctype + [("Content-Length", "2"),
                                                       ("Content-Length", "3")], b"{}")
            return Case("length", raw, frozenset({400}))
        if choice == 2:
            raw = _request("PUT", "/2/tags?tag=x", ctype + [("Transfer-Encoding", "chunked")],
                           b"2\r\n{}\r\n0\r\n\r\n", length=None)
            return Case("length", raw, frozenset({501, 401}))
        if choice == 3:     # shorter than the body: a truncated JSON object
            body = json.dumps({self.word(): self.word() for _ in range(3)}).encode()
            cut = self.rng.randint(1, len(body) - 1)
            return Case("length", _request("GET", "/version", ctype, body, length=str(cut)),
                        frozenset({400}))
        if choice == 4:     # longer than the body, then our side closes
            body = b'{"a": 1}'
            more = self.rng.randint(1, 5000)
            return Case("length", _request("GET", "/version", ctype, body,
                                           length=str(len(body) + more)),
                        frozenset({400}), half_close=True)
        size = self.rng.choice([MAX_BODY + 1, MAX_BODY * 10, 2 ** 63, 10 ** 40])
        return Case("oversize", _request("GET", "/version", ctype, length=str(size)),
                    frozenset({413}))

    def body(self) -> Case:
        ctype = [("Content-Type", "application/json")]
        if self.rng.randrange(2):
            body = self.not_json()       # anonymous: over 64 KiB it is refused unread
            return Case("body", _request("GET", "/version", ctype, body),
                        frozenset({400, 413} if len(body) > MAX_ANONYMOUS_BODY else {400}))
        # a write user's request whose body is never a valid role: 400, no job
        body = self.rng.choice([self.not_json(), b"{}", b"[]", b"42", b"null", b'"boss"',
                                b'"master"', b'{"role": "drained"}'])
        return Case("body", _request("PUT", f"/2/nodes/{self.node}/role",
                                     ctype + [("Authorization", _basic(*self.writer))], body),
                    frozenset({400}))

    def ctype(self) -> Case:
        kinds = ["text/plain", "application/jsonx", "application/x-www-form-urlencoded",
                 "json", "application/json-patch+json", "multipart/form-data; boundary=x"]
        headers = [] if self.rng.randrange(4) == 0 else [
            ("Content-Type", self.rng.choice(kinds))]
        body = self.rng.choice([b"{}", b'"drained"', b"a=1", self.junk(1, 300)])
        return Case("ctype", _request("GET", self.rng.choice(_SAFE_READS), headers, body),
                    frozenset({415}))

    def auth(self) -> Case:
        method, path = self.write()
        choice = self.rng.randrange(5)
        if choice == 0:
            value = self.rng.choice(["Basic", "Basic ", "Basic !!!", "Bearer x", "Digest a=b",
                                     "basic", "Basic ===="])
        elif choice == 1:
            value = "Basic " + base64.b64encode(self.junk(0, 64)).decode()
        elif choice == 2:
            value = "Basic " + base64.b64encode(
                f"{self.word()}:{self.word()}".encode()).decode()
        elif choice == 3:
            value = "Basic " + "A" * self.rng.randint(1000, 60000)
        else:
            return Case("auth", _request(method, path, [("Authorization",
                                                         _basic(*self.reader))]),
                        frozenset({403}))
        return Case("auth", _request(method, path, [("Authorization", value)]),
                    frozenset({400, 401}))

    def garbage(self) -> Case:
        data = self.junk(1, 3000)
        first = bytes([self.rng.choice(b"!#$%&*+0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\x80\xff")])
        return Case("garbage", first + data + b"\r\n\r\n", _GARBAGE)

    def pre_tls(self) -> Case:
        data = self.rng.choice([b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n",
                                b"\x16\x03\x01\x00\x05hello", self.junk(1, 500)])
        return Case("pre-tls", data, frozenset(), pre_tls=True)


#: (kind, weight) of the generated cases
KINDS: list[tuple[str, int]] = [("method", 2), ("path", 3), ("version", 1), ("header", 2),
                                ("length", 3), ("body", 3), ("ctype", 2), ("auth", 3),
                                ("garbage", 3), ("pre_tls", 1)]


def generate(rng: random.Random, *, node: str, reader: tuple[str, str],
             writer: tuple[str, str]) -> Iterator[Case]:
    """An endless stream of malformed requests (bounded by the caller)."""
    gen = _Gen(rng, node, reader, writer,
               [(r.method, _concrete(r.path, node) + "?dry-run=1")
                for r in resources.write_routes()])
    names = [k for k, _ in KINDS]
    weights = [w for _, w in KINDS]
    while True:
        yield getattr(gen, rng.choices(names, weights)[0])()


# --- the client ---------------------------------------------------------------------------

class ResponseError(Exception):
    """The server's answer was not a well-formed HTTP response."""


@dataclass
class Answer:
    status: int        # 0: the connection was closed without an answer
    headers: dict[str, str]
    body: bytes


def _read_answer(fh, head: bool) -> Answer:
    line = fh.readline(70000)
    if not line:
        return Answer(0, {}, b"")
    m = re.fullmatch(rb"HTTP/1\.[01] (\d{3}) [^\r\n]*\r\n", line)
    if m is None:
        raise ResponseError(f"bad status line {line[:100]!r}")
    headers: dict[str, str] = {}
    while True:
        hline = fh.readline(70000)
        if hline in (b"\r\n", b""):
            break
        name, sep, value = hline.decode("latin-1").partition(":")
        if not sep:
            raise ResponseError(f"bad header line {hline[:100]!r}")
        headers[name.strip().lower()] = value.strip()
    if "content-length" not in headers:
        raise ResponseError("no Content-Length")
    length = int(headers["content-length"])
    body = b"" if head else fh.read(length)
    if len(body) != (0 if head else length):
        raise ResponseError("body shorter than Content-Length")
    return Answer(int(m.group(1)), headers, body)


def client_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


@dataclass
class Fuzzer:
    """Sends cases to ``address`` and checks the answers; counts and failures."""

    address: tuple[str, int]
    timeout: float = 20.0
    ctx: ssl.SSLContext = field(default_factory=client_context)
    sent: int = 0
    connections: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    _sock: ssl.SSLSocket | None = None
    _fh: object = None

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock, self._fh = None, None

    def _connect(self) -> ssl.SSLSocket:
        if self._sock is None:
            raw = socket.create_connection(self.address, timeout=self.timeout)
            self._sock = self.ctx.wrap_socket(raw)
            self._fh = self._sock.makefile("rb")
            self.connections += 1
        return self._sock

    def _pre_tls(self, case: Case) -> Answer:
        with socket.create_connection(self.address, timeout=self.timeout) as raw:
            self.connections += 1
            try:
                raw.sendall(case.data)
                raw.shutdown(socket.SHUT_WR)
                data = raw.recv(100)
            except OSError:       # the server closed first: no answer, as expected
                data = b""
        return Answer(0 if b"HTTP/" not in data else -1, {}, data)

    def send(self, case: Case) -> None:
        """Send one case and record a failure when the answer is not among the expected."""
        self.sent += 1
        try:
            if case.pre_tls:
                answer = self._pre_tls(case)
            else:
                sock = self._connect()
                sock.sendall(case.data)
                if case.half_close:
                    socket.socket.shutdown(sock, socket.SHUT_WR)   # keep the TLS state
                answer = _read_answer(self._fh, case.head)
        except (ResponseError, OSError, ValueError) as exc:
            self.close()
            self.failures.append(f"{case.kind}: {type(exc).__name__}: {exc}; sent"
                                 f" {case.data[:120]!r}")
            return
        self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
        problem = self._check(case, answer)
        if problem:
            self.failures.append(f"{case.kind}: {problem}; sent {case.data[:120]!r}")
        if (case.pre_tls or case.half_close or answer.status == 0
                or answer.headers.get("connection", "").lower() == "close"):
            self.close()

    @staticmethod
    def _check(case: Case, answer: Answer) -> str | None:
        if not case.expect:
            return None if answer.status == 0 else f"answered {answer.body[:60]!r}"
        if answer.status not in case.expect:
            return f"status {answer.status}, expected {sorted(case.expect)}:" \
                   f" {answer.body[:200]!r}"
        if b"Traceback" in answer.body:
            return "a traceback in the body"
        if answer.status >= 400 and not case.head:
            try:
                body = json.loads(answer.body)
            except ValueError:
                return f"error body not JSON: {answer.body[:100]!r}"
            if not (isinstance(body, dict) and set(body) == {"code", "message", "explain"}
                    and body["code"] == answer.status):
                return f"error body not Ganeti's: {body!r}"[:300]
        return None

    def run(self, cases: Iterator[Case], count: int, time_limit: float,
            clock: Callable[[], float] = time.monotonic) -> bool:
        """Send up to ``count`` cases within ``time_limit`` seconds; False if time ran out."""
        deadline = clock() + time_limit
        try:
            for _ in range(count):
                if clock() > deadline:
                    return False
                self.send(next(cases))
        finally:
            self.close()
        return True


def drip(address, head: bytes, body: bytes = b"", *, every: float = 0.3) -> int:
    """Send ``head`` (at once when a ``body`` is dripped) and drip the rest one byte
    every ``every`` seconds, each gap well under the per-read timeout; the number
    of dripped bytes sent before the server ended the connection."""
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    dripped = body or head
    with socket.create_connection(address, timeout=15) as raw:
        with tls.wrap_socket(raw) as sock:
            if body:
                sock.sendall(head)
            for sent in range(len(dripped)):
                try:
                    sock.sendall(dripped[sent:sent + 1])
                except OSError:
                    return sent
                time.sleep(every)
                if select.select([sock], [], [], 0)[0]:
                    sock.settimeout(0.0)
                    try:
                        if sock.recv(4096) == b"":
                            return sent + 1
                    except ssl.SSLWantReadError:
                        pass        # TLS records without data (session tickets)
                    except OSError:
                        return sent + 1
                    finally:
                        sock.settimeout(15)
    return len(dripped)
