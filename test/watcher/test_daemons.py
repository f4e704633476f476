"""The watcher's checks of the master's daemons: the decision with a fake daemon, the
RAPI probe against small in-process TLS servers, and where the RAPI daemon is asked."""

from __future__ import annotations

import argparse
import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes import FakeLuxi

from ganeti import constants, crypto, errors
from ganeti.pathutils import Paths
from ganeti.watcher import main, master


class FakeDaemon:
    """A daemon that is ``up``, ``hung`` (has a pid, does not answer) or ``dead``.

    ``start`` gives it a new pid and the state ``after_start``; everything
    the watcher does is recorded in ``actions``.
    """

    def __init__(self, state: str, *, after_start: str = "up") -> None:
        self.state = state
        self.after_start = after_start
        self.pid = 100 if state != "dead" else None
        self.actions: list[str] = []

    def probe(self) -> str | None:
        self.actions.append("probe")
        return None if self.state == "up" else f"it is {self.state}"

    def pid_of(self) -> int | None:
        return self.pid

    def stop(self) -> None:
        self.actions.append(f"stop {self.pid}")
        self.state, self.pid = "dead", None

    def start(self) -> None:
        self.actions.append("start")
        self.state, self.pid = self.after_start, 200

    def ensure(self) -> str | None:
        return master.ensure_daemon("test daemon", self.probe, pid_of=self.pid_of,
                                    stop=self.stop, start=self.start)


def test_a_daemon_that_answers_is_left_alone() -> None:
    daemon = FakeDaemon("up")
    assert daemon.ensure() is None
    assert daemon.actions == ["probe"]


def test_a_dead_daemon_is_started_and_probed_again() -> None:
    daemon = FakeDaemon("dead")
    assert daemon.ensure() == "started the test daemon"
    assert daemon.actions == ["probe", "start", "probe"]
    assert daemon.pid == 200


def test_a_hung_daemon_is_stopped_before_a_new_one_starts() -> None:
    daemon = FakeDaemon("hung")
    assert daemon.ensure() == "restarted the hung test daemon (old pid 100)"
    assert daemon.actions == ["probe", "stop 100", "start", "probe"]


@pytest.mark.parametrize("state", ["dead", "hung"])
def test_one_restart_per_pass_then_an_error(state: str) -> None:
    daemon = FakeDaemon(state, after_start="hung")
    with pytest.raises(errors.OpExecError, match="does not answer after a restart: it is hung"):
        daemon.ensure()
    assert daemon.actions.count("start") == 1


def test_ensure_rapi_uses_the_rapi_pid_file(tmp_path: Path) -> None:
    """No pid file: the RAPI daemon counts as dead, so it is started, not stopped."""
    paths = Paths(root=str(tmp_path))
    answers = iter(["connection refused", None])
    started = []
    done = master.ensure_rapi(paths, "192.0.2.1", 5080, probe=lambda: next(answers),
                              restart=lambda: started.append(True))
    assert done == "started the RAPI daemon" and started == [True]


# --- the RAPI probe ---------------------------------------------------------------------

def _pem(tmp_path: Path, name: str) -> str:
    key, cert = crypto.generate_self_signed_cert("rapi-test")
    path = str(tmp_path / name)
    crypto.write_pem_pair(path, key, cert)
    return path


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        status, body = self.server.answer  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[http.server.HTTPServer, int, str]]:
    """A TLS HTTP server on loopback; set ``server.answer = (status, body)``."""
    pem = _pem(tmp_path, "rapi.pem")
    server = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pem)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.answer = (200, b"2")  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, server.server_address[1], pem
    finally:
        server.shutdown()
        server.server_close()


def test_probe_accepts_a_version_number_from_the_certified_server(tls_server) -> None:
    _server, port, pem = tls_server
    assert master.rapi_answers("127.0.0.1", port, pem, timeout=10.0) is None


def test_probe_refuses_a_server_with_another_certificate(tls_server, tmp_path: Path) -> None:
    _server, port, _pem_file = tls_server
    other = _pem(tmp_path, "other.pem")
    problem = master.rapi_answers("127.0.0.1", port, other, timeout=10.0)
    assert problem is not None and "CERTIFICATE_VERIFY_FAILED" in problem


@pytest.mark.parametrize("answer, why", [
    ((500, b'{"code": 500}'), "answered 500"),
    ((200, b"not json"), "no JSON"),
    ((200, b'"2"'), "not a version number"),
])
def test_probe_refuses_wrong_answers(tls_server, answer, why: str) -> None:
    server, port, pem = tls_server
    server.answer = answer
    problem = master.rapi_answers("127.0.0.1", port, pem, timeout=10.0)
    assert problem is not None and why in problem


def test_probe_of_a_silent_server_gives_up_after_its_timeout(tmp_path: Path) -> None:
    """A listening socket nobody accepts on: the TCP connect succeeds (the kernel's
    backlog), the TLS handshake never gets an answer, as with a SIGSTOPped daemon."""
    pem = _pem(tmp_path, "rapi.pem")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        problem = master.rapi_answers("127.0.0.1", sock.getsockname()[1], pem, timeout=0.2)
    assert problem is not None and "timed out" in problem


def test_probe_of_a_closed_port_fails(tmp_path: Path) -> None:
    pem = _pem(tmp_path, "rapi.pem")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert master.rapi_answers("127.0.0.1", port, pem, timeout=5.0) is not None


def test_probe_without_the_certificate_file_says_so(tmp_path: Path) -> None:
    problem = master.rapi_answers("127.0.0.1", 1, str(tmp_path / "missing.pem"))
    assert problem is not None and "cannot load the RAPI certificate" in problem


# --- where the RAPI daemon is asked -----------------------------------------------------

class _Store:
    def get_node_primary_ips(self) -> dict[str, str]:
        return {"node1": "192.0.2.10"}


def _opts(rapi_ip: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(rapi_ip=rapi_ip)


@pytest.mark.parametrize("rapi_ip, env, me, want", [
    ("198.51.100.7", {constants.ENV_RAPI_BIND: "192.0.2.99"}, "node1", "198.51.100.7"),
    (None, {constants.ENV_RAPI_BIND: "192.0.2.99"}, "node1", "192.0.2.99"),
    (None, {constants.ENV_RAPI_BIND: "0.0.0.0"}, "node1", "192.0.2.10"),
    (None, {}, "node1", "192.0.2.10"),
    (None, {}, "unknown", "127.0.0.1"),
])
def test_rapi_address(rapi_ip, env, me, want) -> None:
    assert main.rapi_address(_opts(rapi_ip), env, _Store(), me) == want  # type: ignore[arg-type]


def test_rapi_port() -> None:
    assert main.rapi_port({}) == constants.DEFAULT_RAPI_PORT
    assert main.rapi_port({constants.ENV_RAPI_PORT: "15080"}) == 15080


def test_daemon_timeout_option() -> None:
    from ganeti.watcher import main as wmain
    assert wmain.parse_args([]).daemon_timeout is None        # the built-in defaults
    assert wmain.parse_args(["--daemon-timeout", "2.5"]).daemon_timeout == 2.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(SystemExit):
            wmain.parse_args(["--daemon-timeout", bad])


def test_ensure_masterd_probes_with_the_timeout_given(tmp_path: Path) -> None:
    asked: list[float] = []

    def factory(timeout: float) -> FakeLuxi:
        asked.append(timeout)
        return FakeLuxi({"QueryClusterInfo": {}})
    paths = Paths(root=str(tmp_path))
    assert master.ensure_masterd(paths, factory, timeout=2.0) is None   # it answers
    assert asked == [2.0]
    master.ensure_masterd(paths, factory)
    assert asked[-1] == master.MASTERD_TIMEOUT
