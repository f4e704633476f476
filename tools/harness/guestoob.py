"""Out-of-band power control of a guest cluster's nodes (doc/oob.md, doc/vcluster.md).

The ``oob_program`` of a guest cluster runs on its master, inside a qemu
guest, but the machines' power is the host's: the host owns the qemu
processes (:mod:`tools.harness.guestvm`).  So the work is split:

* the **power server** (:func:`serve`) runs on the host from ``create``
  (or the next ``start`` if it does not run) until ``destroy``
  (``DIR/oob-server.pid``, its log ``DIR/oob-server.log``), listening only on the host's address of the cluster's private bridge,
  port :data:`PORT`; it powers a guest off (qemu killed: a dead machine),
  on (booted, returns once the node is up), cycles it, and answers its
  power state and health;
* the **guest program** ``tools/vcluster-guest-oob COMMAND NODE``
  (:func:`tools.harness.guestoob_client.client_main`, standard library
  only: Python starts slowly inside an emulated guest) speaks the OOB protocol on the master: it asks the
  server and prints its answer, exit status 0, 1 (failure, reason on
  standard error) or 2 (unsupported).

A request is authenticated by the cluster's SSH key, which the host
(``DIR/id_cluster``) and every node (``/var/lib/ganeti/id_cluster``) hold
and nobody else: the server sends a fresh nonce, the client answers with
the command, the node and an HMAC-SHA256 of ``nonce command node`` keyed
by a hash of the key file (:func:`auth_key`).  One request per connection,
one JSON line each way.  The pure parts (:func:`sign`,
:func:`check_request`, :func:`answer`, :func:`parse_answer`) are unit
tested (test/tools/test_guestoob.py); the rest runs on the guest cluster (test/integration/test_guest_ha.py).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from ganeti import constants, errors
from tools.harness.guestoob_client import (GUEST_KEY_FILE, MAX_LINE, PORT, auth_key,
                                           client_main, host_from_cmdline, parse_answer,
                                           request_line, sign)

__all__ = ["PORT", "PID_FILE", "LOG_FILE", "GUEST_KEY_FILE", "SCRIPT", "auth_key", "sign",
           "request_line", "check_request", "answer", "parse_answer", "host_from_cmdline",
           "serve", "start_server", "server_pid", "ensure_server", "stop_server",
           "client_main"]

PID_FILE = "oob-server.pid"
LOG_FILE = "oob-server.log"
#: the guest program (an absolute path inside the guests too: they share the host's root)
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "vcluster-guest-oob")
_MAX_LINE = MAX_LINE
#: seconds a client may take to answer the nonce
_REQUEST_TIMEOUT = 30.0


# --- pure: the server's side of the protocol (the rest: guestoob_client) ----------------

def check_request(key: bytes, nonce: str, line: bytes) -> tuple[str, str]:
    """``(command, node)`` of an authentic request line for ``nonce``.

    Raises :class:`errors.ParameterError` for a malformed request, an
    unknown command (code ``ECODE_INVAL``) or a wrong MAC (``ECODE_ENVIRON``).
    """
    try:
        data = json.loads(line.decode())
        command, node, mac = data["command"], data["node"], data["mac"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise errors.ParameterError(f"malformed request: {exc}", errors.ECODE_INVAL) from exc
    if not all(isinstance(v, str) for v in (command, node, mac)):
        raise errors.ParameterError("malformed request: not strings", errors.ECODE_INVAL)
    if not hmac.compare_digest(mac, sign(key, nonce, command, node)):
        raise errors.ParameterError("request not authenticated", errors.ECODE_ENVIRON)
    if command not in constants.OOB_COMMANDS:
        raise errors.ParameterError(f"unsupported out-of-band command '{command}'",
                                    errors.ECODE_INVAL)
    return command, node


def answer(status: int, output: str = "", error: str = "") -> bytes:
    """The server's answer line: the guest program's exit status, stdout and stderr."""
    return (json.dumps({"status": status, "output": output, "error": error}) + "\n").encode()


# --- the host side --------------------------------------------------------------------------

def _execute(directory: str, command: str, node: str) -> tuple[int, str, str]:
    """Run ``command`` on ``node`` of the guest cluster in ``directory``."""
    from tools.harness import guestcluster, guestvm

    gc = guestcluster.load(directory)
    vnode = gc.node(node)
    spec = gc.spec(vnode)
    ok, critical = constants.OOB_STATUS_OK, constants.OOB_STATUS_CRITICAL
    if command in (constants.OOB_POWER_OFF, constants.OOB_POWER_CYCLE):
        guestcluster.stop(gc, vnode.name)
        if guestvm.guest_running(spec):
            return 1, "", f"{vnode.name} still runs after its power-off"
    if command in (constants.OOB_POWER_ON, constants.OOB_POWER_CYCLE):
        guestcluster.start(gc, vnode.name)
    if command == constants.OOB_POWER_STATUS:
        return 0, json.dumps({constants.OOB_POWER_STATUS_POWERED:
                              guestvm.guest_running(spec)}), ""
    if command == constants.OOB_HEALTH:
        running = guestvm.guest_running(spec)
        reach = False
        if running:
            try:
                with socket.create_connection((vnode.ip, 22), timeout=3.0):
                    reach = True
            except OSError:
                pass
        return 0, json.dumps([["machine", ok if running else critical],
                              ["SSH server", ok if reach else critical]]), ""
    return 0, "", ""


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        nonce = secrets.token_hex(16)
        self.connection.settimeout(_REQUEST_TIMEOUT)
        try:
            self.wfile.write((json.dumps({"nonce": nonce}) + "\n").encode())
            line = self.rfile.readline(_MAX_LINE)
            if not line:            # a probe (start_server) or a client that gave up
                return
            command, node = check_request(self.server.key, nonce, line)
        except (OSError, errors.ParameterError) as exc:
            self.server.log(f"refused {self.client_address[0]}: {exc}")
            code = 2 if "unsupported" in str(exc) else 1
            self._reply(answer(code, error=str(exc)))
            return
        self.connection.settimeout(None)
        self.server.log(f"{command} {node} from {self.client_address[0]}")
        try:
            with self.server.lock:
                reply = answer(*self.server.execute(command, node))
        except Exception as exc:  # noqa: BLE001 - every failure is the client's answer
            reply = answer(1, error=f"{command} {node}: {exc}")
        self.server.log(f"{command} {node}: {reply.decode().strip()}")
        self._reply(reply)

    def _reply(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], key: bytes,
                 execute: Callable[[str, str], tuple[int, str, str]],
                 log: Callable[[str], None]) -> None:
        super().__init__(address, _Handler)
        self.key, self.execute, self.log = key, execute, log
        self.lock = threading.Lock()


def serve(directory: str, host: str, port: int = PORT) -> None:
    """Run the power server of the guest cluster in ``directory`` until SIGTERM."""
    directory = os.path.abspath(directory)
    with open(os.path.join(directory, "id_cluster"), encoding="utf-8") as fh:
        key = auth_key(fh.read())
    log_path = os.path.join(directory, LOG_FILE)

    def log(msg: str) -> None:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.time():.3f} {msg}\n")

    server = _Server((host, port), key, lambda c, n: _execute(directory, c, n), log)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    log(f"listening on {host}:{port}")
    server.serve_forever()
    server.server_close()


def start_server(directory: str, host: str, python: str = sys.executable) -> int:
    """Start :func:`serve` detached for ``directory``; its pid (also in ``DIR/PID_FILE``).

    Returns once it listens; raises :class:`errors.CommandError` if it died.
    """
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(directory, LOG_FILE), "a", encoding="utf-8") as out:
        proc = subprocess.Popen([python, "-m", "tools.harness.guestoob", "serve", directory,
                                 host], cwd=repo, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=out, start_new_session=True)
    with open(os.path.join(directory, PID_FILE), "w", encoding="utf-8") as fh:
        fh.write(f"{proc.pid}\n")
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise errors.CommandError(f"the power server exited ({proc.returncode}); see"
                                      f" {os.path.join(directory, LOG_FILE)}")
        try:
            with socket.create_connection((host, PORT), timeout=1.0):
                return proc.pid
        except OSError:
            time.sleep(0.2)
    raise errors.CommandError("the power server does not listen after 30 s")


def server_pid(directory: str) -> int | None:
    """The pid of the power server of ``directory`` if it runs."""
    from tools.harness import guestvm

    pid = guestvm.read_pid(os.path.join(directory, PID_FILE))
    if pid is None or not guestvm.process_alive(pid):
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return pid if b"tools.harness.guestoob" in fh.read() else None
    except OSError:
        return None


def ensure_server(directory: str, host: str, python: str = sys.executable) -> int:
    """The power server's pid, started if it does not run (a cluster made before it
    existed, or after the host restarted)."""
    return server_pid(directory) or start_server(directory, host, python)


def stop_server(directory: str) -> None:
    """Stop the power server of ``directory`` (if one runs, its pid file lost too)."""
    from tools.harness import procscan

    marker = b"tools.harness.guestoob\0serve\0" + os.path.abspath(directory).encode() + b"\0"
    pids = set(procscan.pids_whose("cmdline", lambda cmdline: marker in cmdline))
    pid = server_pid(directory)
    for victim in pids | ({pid} if pid is not None else set()):
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
    path = os.path.join(directory, PID_FILE)
    if os.path.exists(path):
        os.unlink(path)


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.stderr.write("usage: python -m tools.harness.guestoob serve DIR HOST\n")
    sys.exit(2)
