"""tools.harness.sshserver: in-process and as a separate process."""

from __future__ import annotations

import os
import pathlib
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import paramiko
import pytest

from ganeti import errors, ssh
from tools.harness.sshserver import SshServer, read_env_file

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"
REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def keys(tmp_path: pathlib.Path) -> dict[str, str]:
    key = str(tmp_path / "id_cluster")
    line = ssh.generate_cluster_key(key)
    auth = tmp_path / "authorized_keys"
    auth.write_text(f"# cluster key\n{line}\n")
    return {"key": key, "auth": str(auth), "hostkey": str(tmp_path / "hostkey"),
            "known_hosts": str(tmp_path / "known_hosts")}


@pytest.fixture
def servers() -> Iterator[list[SshServer]]:
    started: list[SshServer] = []
    try:
        yield started
    finally:
        for srv in started:
            srv.stop()


def _start(servers: list[SshServer], keys: dict[str, str], **kwargs: object) -> SshServer:
    env = {"PATH": os.environ["PATH"], "MARK": "in-process"}
    srv = SshServer(HOST, 0, keys["hostkey"], keys["auth"], env, **kwargs)  # type: ignore[arg-type]
    srv.start()
    servers.append(srv)
    return srv


def _runner(keys: dict[str, str], port: int, key: str | None = None) -> ssh.SshRunner:
    return ssh.SshRunner(key or keys["key"], known_hosts_path=keys["known_hosts"],
                         port=port, connect_timeout=5)


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


# --- env file -------------------------------------------------------------------

def test_read_env_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "env"
    path.write_text("# comment\n\nGANETI_ROOTDIR=/tmp/x y\nPATH=/a:/b\nEMPTY=\nEQ=a=b\n")
    assert read_env_file(str(path)) == {"GANETI_ROOTDIR": "/tmp/x y", "PATH": "/a:/b",
                                        "EMPTY": "", "EQ": "a=b"}


@pytest.mark.parametrize("text", ["novalue\n", "BAD-NAME=1\n", "1X=2\n"],
                         ids=["no-equals", "dash", "leading-digit"])
def test_read_env_file_rejects_bad_lines(tmp_path: pathlib.Path, text: str) -> None:
    path = tmp_path / "env"
    path.write_text(text)
    with pytest.raises(errors.CommandError, match=":1:"):
        read_env_file(str(path))


def test_read_env_file_missing(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.CommandError, match="missing"):
        read_env_file(str(tmp_path / "missing"))


# --- in-process server ---------------------------------------------------------

def test_host_key_created_if_missing(servers: list[SshServer], keys: dict[str, str]) -> None:
    assert not os.path.exists(keys["hostkey"])
    _start(servers, keys)
    assert os.stat(keys["hostkey"]).st_mode & 0o777 == 0o600
    assert ssh.load_key(keys["hostkey"]).get_name() == "ssh-ed25519"


def test_env_is_exactly_the_configured_one(servers: list[SshServer],
                                          keys: dict[str, str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEAKED_FROM_SERVER", "1")
    srv = _start(servers, keys)
    result = _runner(keys, srv.port).run(HOST, 'echo "$MARK/${LEAKED_FROM_SERVER:-unset}"')
    assert result.stdout == "in-process/unset\n"


def test_authorized_keys_reread_on_each_login(servers: list[SshServer], tmp_path: pathlib.Path,
                                              keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    other = str(tmp_path / "other")
    line = ssh.generate_cluster_key(other)
    with pytest.raises(errors.CommandError, match="refused the key"):
        _runner(keys, srv.port, key=other).run(HOST, "true")
    with open(keys["auth"], "a") as handle:
        handle.write(f'no-pty,from="127.0.0.1" {line}\n')
    assert _runner(keys, srv.port, key=other).run(HOST, "echo ok").stdout == "ok\n"


def test_password_auth_not_offered(servers: list[SshServer], keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    transport = paramiko.Transport((HOST, srv.port))
    try:
        transport.start_client(timeout=5)
        with pytest.raises(paramiko.BadAuthenticationType) as info:
            transport.auth_password("root", "secret")
        assert info.value.allowed_types == ["publickey"]
    finally:
        transport.close()


def test_shell_request_refused(servers: list[SshServer], keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    transport = paramiko.Transport((HOST, srv.port))
    try:
        transport.start_client(timeout=5)
        transport.auth_publickey("root", ssh.load_key(keys["key"]))
        chan = transport.open_session(timeout=5)
        with pytest.raises(paramiko.SSHException):
            chan.invoke_shell()
    finally:
        transport.close()


def test_killed_command_reports_128_plus_signal(servers: list[SshServer],
                                                keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    result = _runner(keys, srv.port).run(HOST, "kill -9 $$")
    assert result.exit_code == 128 + signal.SIGKILL


def test_missing_shell_reports_127(servers: list[SshServer], keys: dict[str, str]) -> None:
    srv = _start(servers, keys, shell="/nonexistent/sh")
    result = _runner(keys, srv.port).run(HOST, "true")
    assert result.exit_code == 127 and "/nonexistent/sh" in result.stderr


def test_background_child_holding_output_does_not_hang(servers: list[SshServer],
                                                       keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    # the background sleep keeps stdout open; the exit status must still come
    result = _runner(keys, srv.port).run(HOST, "sleep 20 & echo $!; exit 4", timeout=15)
    try:
        assert result.exit_code == 4 and result.stdout.strip().isdigit()
    finally:
        if result.stdout.strip().isdigit():
            os.kill(int(result.stdout), signal.SIGKILL)


def test_client_disconnect_kills_command(servers: list[SshServer], keys: dict[str, str],
                                         tmp_path: pathlib.Path) -> None:
    srv = _start(servers, keys)
    pidfile = tmp_path / "pid"
    transport = paramiko.Transport((HOST, srv.port))
    transport.start_client(timeout=5)
    transport.auth_publickey("root", ssh.load_key(keys["key"]))
    chan = transport.open_session(timeout=5)
    chan.exec_command(f"echo $$ > {pidfile}; exec sleep 30")
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    transport.close()
    assert _wait_gone(pid)


def test_command_timeout_kills_command(servers: list[SshServer], keys: dict[str, str]) -> None:
    srv = _start(servers, keys, command_timeout=0.5)
    result = _runner(keys, srv.port).run(HOST, "exec sleep 30", timeout=20)
    assert result.exit_code == 128 + signal.SIGKILL


def test_stop_kills_running_commands(servers: list[SshServer], keys: dict[str, str],
                                     tmp_path: pathlib.Path) -> None:
    srv = _start(servers, keys)
    pidfile = tmp_path / "pid"
    runner = _runner(keys, srv.port)
    import threading
    outcome: list[object] = []

    def bg() -> None:
        try:
            outcome.append(runner.run(HOST, f"echo $$ > {pidfile}; exec sleep 30", timeout=20))
        except errors.CommandError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=bg, daemon=True)
    thread.start()
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    srv.stop()
    assert _wait_gone(pid)
    thread.join(10)
    assert not thread.is_alive() and outcome


def test_unauthenticated_connection_dropped(servers: list[SshServer],
                                            keys: dict[str, str]) -> None:
    import socket
    srv = _start(servers, keys, auth_timeout=0.5)
    sock = socket.create_connection((HOST, srv.port), timeout=10)
    try:
        data = b""
        # read the banner, then nothing: the server must hang up by itself
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        assert data.startswith(b"SSH-2.0-")
    finally:
        sock.close()


def test_listen_failure_is_command_error(keys: dict[str, str]) -> None:
    srv = SshServer("192.0.2.123", 0, keys["hostkey"], keys["auth"], {})
    with pytest.raises(errors.CommandError, match="192.0.2.123"):
        srv.start()


# --- separate process --------------------------------------------------------------

def _server_argv(keys: dict[str, str], tmp_path: pathlib.Path, *extra: str) -> list[str]:
    env_file = tmp_path / "env"
    env_file.write_text(f"PATH={os.environ['PATH']}\nGANETI_HOSTNAME=node2\n"
                        f"GANETI_ROOTDIR={tmp_path / 'node2'}\n")
    return [sys.executable, "-m", "tools.harness.sshserver", "--bind", HOST,
            "--host-key", keys["hostkey"], "--authorized-keys", keys["auth"],
            "--env-file", str(env_file), "--pidfile", str(tmp_path / "sshd.pid"), *extra]


def _child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


@pytest.mark.integration  # starts a daemon
def test_subprocess_server(keys: dict[str, str], tmp_path: pathlib.Path) -> None:
    proc = subprocess.Popen(_server_argv(keys, tmp_path, "--port", "0"), env=_child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "server did not report readiness"
        line = proc.stdout.readline().decode()  # type: ignore[union-attr]
        assert line.startswith(f"LISTENING {HOST} ")
        port = int(line.split()[2])
        assert int((tmp_path / "sshd.pid").read_text()) == proc.pid
        result = _runner(keys, port).run(HOST, 'echo "$GANETI_HOSTNAME $GANETI_ROOTDIR"; cat',
                                         input_data="in\n")
        assert result.stdout == f"node2 {tmp_path / 'node2'}\nin\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert not (tmp_path / "sshd.pid").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_subprocess_bad_env_file_fails(keys: dict[str, str], tmp_path: pathlib.Path) -> None:
    argv = _server_argv(keys, tmp_path, "--port", "0")
    (tmp_path / "env").write_text("not an assignment\n")
    proc = subprocess.run(argv, env=_child_env(), capture_output=True, timeout=30)
    assert proc.returncode == 1 and b"expected KEY=VALUE" in proc.stderr


@pytest.mark.integration  # starts a daemon
def test_subprocess_daemonize(keys: dict[str, str], tmp_path: pathlib.Path) -> None:
    import socket
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    pidfile = tmp_path / "sshd.pid"
    proc = subprocess.run(_server_argv(keys, tmp_path, "--port", str(port), "--daemonize"),
                          env=_child_env(), capture_output=True, timeout=30)
    pid = int(pidfile.read_text()) if pidfile.exists() else None
    try:
        assert proc.returncode == 0, proc.stderr
        assert pid is not None and pid != os.getpid()
        assert _runner(keys, port).run(HOST, "echo $GANETI_HOSTNAME").stdout == "node2\n"
        os.kill(pid, signal.SIGTERM)
        assert _wait_gone(pid, 15)
    finally:
        if pid is not None and not _wait_gone(pid, 0):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.integration  # starts a daemon
def test_subprocess_daemonize_reports_bind_failure(keys: dict[str, str],
                                                   tmp_path: pathlib.Path) -> None:
    argv = _server_argv(keys, tmp_path, "--port", "0", "--daemonize")
    argv[argv.index("--bind") + 1] = "192.0.2.123"
    proc = subprocess.run(argv, env=_child_env(), capture_output=True, timeout=30)
    assert proc.returncode == 1 and b"192.0.2.123" in proc.stderr


# --- pty (ssh -t, gnt-instance console) -----------------------------------------

def _interactive(runner: ssh.SshRunner, command: str, keys_in: bytes) -> tuple[int, bytes]:
    """Run ``command`` with ``interactive`` on pipes (no local terminal)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(in_w, keys_in)
    try:
        code = runner.interactive(HOST, command, stdin_fd=in_r, stdout_fd=out_w,
                                  term="xterm-test")
        os.close(out_w)
        out_w = -1
        chunks = []
        while data := os.read(out_r, 65536):
            chunks.append(data)
        return code, b"".join(chunks)
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            if fd >= 0:
                os.close(fd)


def test_pty_command_runs_on_a_terminal_of_the_requested_type(
        servers: list[SshServer], keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    code, out = _interactive(_runner(keys, srv.port),
                             'test -t 0 && test -t 1 && echo "tty:$TERM:$(stty size)"; exit 3',
                             b"")
    assert code == 3
    assert b"tty:xterm-test:24 80" in out


def test_pty_command_reads_the_clients_keys(servers: list[SshServer],
                                            keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    code, out = _interactive(_runner(keys, srv.port),
                             'read line; echo "got<$line>"', b"hello\n")
    assert code == 0
    assert b"got<hello>" in out


def test_pty_output_without_request_stays_plain(servers: list[SshServer],
                                                keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    result = _runner(keys, srv.port).run(HOST, "test -t 1 && echo tty || echo notty")
    assert result.stdout == "notty\n"


def test_interactive_refuses_an_unknown_host(servers: list[SshServer],
                                             keys: dict[str, str]) -> None:
    srv = _start(servers, keys)
    runner = ssh.SshRunner(keys["key"], known_hosts_path=keys["known_hosts"], port=srv.port,
                           connect_timeout=5, accept_new_hosts=False)
    with pytest.raises(errors.CommandError, match="unknown.*refusing"):
        runner.interactive(HOST, "true")
    assert not os.path.exists(keys["known_hosts"]) or \
        not open(keys["known_hosts"]).read().strip()
    _runner(keys, srv.port).run(HOST, "true")   # records the key (trust on first use)
    code, out = _interactive(runner, "echo known", b"")
    assert code == 0 and b"known" in out


@pytest.mark.skipif(not os.path.exists("/usr/bin/ssh"), reason="no OpenSSH client")
def test_openssh_argv_reaches_the_server_on_a_pty(servers: list[SshServer],
                                                  keys: dict[str, str]) -> None:
    import pty
    srv = _start(servers, keys)
    runner = _runner(keys, srv.port)
    runner.run(HOST, "true")   # the host key into known_hosts
    argv = runner.openssh_argv(HOST, 'test -t 0 && echo "on-a-$TERM"')
    assert argv[0] == "ssh" and "-t" in argv and f"-p{srv.port}" in argv
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                            env={**os.environ, "TERM": "vt220"}, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while b"on-a-vt220" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        assert b"on-a-vt220" in seen, seen
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_interactive_forwards_terminal_resizes(servers: list[SshServer],
                                               keys: dict[str, str]) -> None:
    import fcntl
    import pty
    import struct
    import termios
    import threading
    srv = _start(servers, keys)
    master, slave = pty.openpty()
    in_r, in_w = os.pipe()

    def set_size(rows: int, cols: int) -> None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    set_size(30, 100)
    seen = bytearray()

    def resize_after_first_size() -> None:
        deadline = time.monotonic() + 20
        while b"first:30 100" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                seen.extend(os.read(master, 65536))
        set_size(40, 120)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGWINCH)
        os.write(in_w, b"go\n")
        while time.monotonic() < deadline and b"then:" not in seen:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                seen.extend(os.read(master, 65536))

    helper = threading.Thread(target=resize_after_first_size, daemon=True)
    helper.start()
    try:
        code = _runner(keys, srv.port).interactive(
            HOST, 'echo "first:$(stty size)"; read x; echo "then:$(stty size)"',
            stdin_fd=in_r, stdout_fd=slave)
        helper.join(20)
        while True:   # what is still in the pty
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                break
            seen.extend(os.read(master, 65536))
    finally:
        for fd in (master, slave, in_r, in_w):
            os.close(fd)
    assert code == 0
    assert b"then:40 120" in seen, bytes(seen)
