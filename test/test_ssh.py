"""ganeti.ssh: cluster keys, known hosts, and SshRunner against a real server."""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Iterator

import pytest

from ganeti import errors, ssh, sshchannel
from tools.harness.sshserver import SshServer

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"


class Cluster:
    """A cluster key, authorized on the servers this helper starts."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.key = str(root / "id_cluster")
        self.pub_line = ssh.generate_cluster_key(self.key)
        self.authorized = str(root / "authorized_keys")
        pathlib.Path(self.authorized).write_text(self.pub_line + "\n")
        self.known_hosts = str(root / "known_hosts")
        self.servers: list[SshServer] = []

    def server(self, name: str = "node1", port: int = 0, host_key: str | None = None,
               bind: str = HOST, **kwargs: object) -> SshServer:
        env = {"PATH": os.environ["PATH"], "GANETI_HOSTNAME": name,
               "GANETI_ROOTDIR": str(self.root / name)}
        srv = SshServer(bind, port, host_key or str(self.root / f"{name}.hostkey"),
                        self.authorized, env, **kwargs)  # type: ignore[arg-type]
        srv.start()
        self.servers.append(srv)
        return srv

    def runner(self, port: int, **kwargs: object) -> ssh.SshRunner:
        kwargs.setdefault("known_hosts_path", self.known_hosts)
        return ssh.SshRunner(self.key, port=port, connect_timeout=5,
                             **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        for srv in c.servers:
            srv.stop()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --- keys -------------------------------------------------------------------

def test_generate_cluster_key_files_and_modes(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "id_cluster")
    line = ssh.generate_cluster_key(path, comment="c1")
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert pathlib.Path(path + ".pub").read_text() == line + "\n"
    assert line.startswith("ssh-ed25519 ") and line.endswith(" c1")
    key = ssh.load_key(path)
    assert ssh.load_public_key(path + ".pub") == ("ssh-ed25519", key.asbytes())


def test_generated_keys_differ(tmp_path: pathlib.Path) -> None:
    a = ssh.generate_cluster_key(str(tmp_path / "a"))
    b = ssh.generate_cluster_key(str(tmp_path / "b"))
    assert a != b


def test_load_key_missing_is_command_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.CommandError, match="nope"):
        ssh.load_key(str(tmp_path / "nope"))


@pytest.mark.parametrize("line,expected", [
    ("ssh-ed25519 AAAA c", ("ssh-ed25519", b"\x00\x00\x00")),
    ('from="10.0.0.1",no-pty ssh-rsa AAAA comment', ("ssh-rsa", b"\x00\x00\x00")),
    ("# ssh-ed25519 AAAA", None),
    ("", None),
    ("ssh-ed25519 !!notbase64", None),
    ("ssh-dss AAAA", None),
], ids=["plain", "options", "comment", "blank", "badbase64", "unknowntype"])
def test_parse_public_key_line(line: str, expected: tuple[str, bytes] | None) -> None:
    assert ssh.parse_public_key_line(line) == expected


def test_read_authorized_keys(tmp_path: pathlib.Path) -> None:
    line = ssh.generate_cluster_key(str(tmp_path / "k"))
    auth = tmp_path / "ak"
    auth.write_text(f"# keys\n\ngarbage\nno-pty {line}\n")
    assert ssh.read_authorized_keys(str(auth)) == {ssh.load_key(str(tmp_path / "k")).asbytes()}
    assert ssh.read_authorized_keys(str(tmp_path / "missing")) == set()


# --- known hosts --------------------------------------------------------------

def test_known_hosts_records_then_accepts(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "kh"
    kh = ssh.KnownHosts(str(path))
    assert kh.check("node1", 22, "ssh-ed25519", b"key1") is True
    assert kh.check("node1", 2222, "ssh-ed25519", b"key2") is True
    assert kh.check("node1", 22, "ssh-ed25519", b"key1") is False
    lines = path.read_text().splitlines()
    assert lines[0].startswith("node1 ssh-ed25519 ")
    assert lines[1].startswith("[node1]:2222 ssh-ed25519 ")
    # a fresh instance reads what the first one wrote
    assert ssh.KnownHosts(str(path)).check("node1", 2222, "ssh-ed25519", b"key2") is False


def test_known_hosts_refuses_changed_key(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "kh")
    ssh.KnownHosts(path).check("node1", 22, "ssh-ed25519", b"key1")
    with pytest.raises(errors.CommandError, match="node1 has changed.*known_hosts"):
        ssh.KnownHosts(path).check("node1", 22, "ssh-ed25519", b"other")


def test_known_hosts_without_accept_new_refuses_unknown_hosts(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "kh")
    strict = ssh.KnownHosts(path, accept_new=False)
    with pytest.raises(errors.CommandError, match=r"\[node1\]:2222 is unknown.*refusing"):
        strict.check("node1", 2222, "ssh-ed25519", b"key1")
    assert not os.path.exists(path) or not open(path).read()
    ssh.KnownHosts(path).check("node1", 2222, "ssh-ed25519", b"key1")
    assert strict.check("node1", 2222, "ssh-ed25519", b"key1") is False
    with pytest.raises(errors.CommandError, match="has changed"):
        strict.check("node1", 2222, "ssh-ed25519", b"other")


def test_openssh_argv_uses_the_runners_key_hosts_user_and_port() -> None:
    runner = ssh.SshRunner("/k/id_cluster", known_hosts_path="/k/known_hosts", port=2222)
    argv = runner.openssh_argv("192.0.2.2", ["socat", "STDIO,raw", "UNIX-CONNECT:/x y"])
    assert argv[0] == "ssh" and argv[-2:] == ["192.0.2.2", "socat STDIO,raw 'UNIX-CONNECT:/x y'"]
    for word in ("-oUserKnownHostsFile=/k/known_hosts", "-oGlobalKnownHostsFile=/dev/null",
                 "-oStrictHostKeyChecking=yes", "-oBatchMode=yes", "-lroot", "-p2222", "-t",
                 "-oEscapeChar=none"):
        assert word in argv
    assert argv[argv.index("-i") + 1] == "/k/id_cluster"
    assert "-t" not in runner.openssh_argv("h", "true", port=22, tty=False)


def test_known_hosts_in_memory(tmp_path: pathlib.Path) -> None:
    kh = ssh.KnownHosts(None)
    assert kh.check("n", 22, "ssh-ed25519", b"k") is True
    with pytest.raises(errors.CommandError, match="changed"):
        kh.check("n", 22, "ssh-ed25519", b"x")
    assert list(tmp_path.iterdir()) == []


def test_known_hosts_reads_openssh_lines(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "kh"
    path.write_text("|1|hashed ssh-ed25519 AAAA\nclustername,node1 ssh-ed25519 AAAA\n")
    kh = ssh.KnownHosts(str(path))
    assert kh.check("node1", 22, "ssh-ed25519", b"\x00\x00\x00") is False
    with pytest.raises(errors.CommandError):
        kh.check("clustername", 22, "ssh-ed25519", b"different")


# --- running commands ---------------------------------------------------------

def test_run_stdout_stderr_exit_status(cluster: Cluster) -> None:
    srv = cluster.server()
    result = cluster.runner(srv.port).run(HOST, "echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.failed and not result.timed_out
    assert f"{HOST}:{srv.port}" in result.fail_reason


def test_run_list_command_is_quoted(cluster: Cluster) -> None:
    srv = cluster.server()
    result = cluster.runner(srv.port).run(HOST, ["printf", "[%s]", "a b", "$HOME", "'"])
    assert result.stdout == "[a b][$HOME][']"
    assert not result.failed


def test_run_env_reaches_command(cluster: Cluster) -> None:
    srv = cluster.server("node7")
    result = cluster.runner(srv.port).run(HOST, 'echo "$GANETI_HOSTNAME $GANETI_ROOTDIR"')
    assert result.stdout == f"node7 {cluster.root / 'node7'}\n"


def test_run_stdin(cluster: Cluster) -> None:
    srv = cluster.server()
    data = bytes(range(256)) * 1000
    result = cluster.runner(srv.port).run(HOST, "wc -c; echo done >&2", input_data=data)
    assert result.stdout.strip() == str(len(data))
    assert result.stderr == "done\n"


def test_run_large_output(cluster: Cluster) -> None:
    srv = cluster.server()
    result = cluster.runner(srv.port).run(HOST, "head -c 3000000 /dev/zero | tr '\\0' x")
    assert len(result.stdout) == 3_000_000 and set(result.stdout) == {"x"}


def test_run_timeout_kills_remote_command(cluster: Cluster) -> None:
    srv = cluster.server()
    pidfile = cluster.root / "pid"
    result = cluster.runner(srv.port).run(HOST, f"echo $$ > {pidfile}; exec sleep 30",
                                          timeout=1.0)
    assert result.timed_out and result.failed and result.exit_code is None
    pid = int(pidfile.read_text())
    for _ in range(100):
        if not _pid_alive(pid):
            break
        time.sleep(0.05)
    assert not _pid_alive(pid)


def test_put_file_creates_file_with_mode(cluster: Cluster) -> None:
    srv = cluster.server()
    local = cluster.root / "local.bin"
    local.write_bytes(b"\x00secret\xff" * 100)
    target = cluster.root / "remote" / "sub" / "server.pem"
    runner = cluster.runner(srv.port)
    runner.put_file(HOST, str(local), str(target), mode=0o440)
    assert target.read_bytes() == local.read_bytes()
    assert os.stat(target).st_mode & 0o777 == 0o440
    # replacing an existing (read-only) file works and leaves no temp file
    local.write_bytes(b"v2")
    runner.put_file(HOST, str(local), str(target), mode=0o600)
    assert target.read_bytes() == b"v2"
    assert os.stat(target).st_mode & 0o777 == 0o600
    assert os.listdir(target.parent) == ["server.pem"]


def test_put_file_failure_is_command_error(cluster: Cluster) -> None:
    srv = cluster.server()
    blocker = cluster.root / "afile"
    blocker.write_text("x")
    with pytest.raises(errors.CommandError, match="afile/sub/x"):
        cluster.runner(srv.port).put_data(HOST, b"data", str(blocker / "sub" / "x"))


def test_wrong_key_is_refused(cluster: Cluster) -> None:
    srv = cluster.server()
    other = str(cluster.root / "other_key")
    ssh.generate_cluster_key(other)
    runner = ssh.SshRunner(other, port=srv.port, connect_timeout=5)
    with pytest.raises(errors.CommandError, match=f"{HOST}:{srv.port}.*refused the key"):
        runner.run(HOST, "true")


def test_connection_refused_names_host_and_port(cluster: Cluster) -> None:
    srv = cluster.server()
    port = srv.port
    srv.stop()
    with pytest.raises(errors.CommandError, match=f"{HOST}:{port}.*cannot connect"):
        cluster.runner(port).run(HOST, "true")


def test_a_server_that_never_sends_its_banner_is_a_command_error(cluster: Cluster) -> None:
    """A peer that accepts and stays silent (an sshd too slow to answer) is the
    runner's CommandError naming the host, never a paramiko exception."""
    import socket
    silent = socket.create_server((HOST, 0))
    try:
        port = silent.getsockname()[1]
        runner = ssh.SshRunner(cluster.key, port=port, connect_timeout=0.5,
                               known_hosts_path=cluster.known_hosts)
        with pytest.raises(errors.CommandError, match=f"{HOST}:{port}.*handshake error"):
            runner.run(HOST, "true")
    finally:
        silent.close()


def test_changed_host_key_is_refused(cluster: Cluster) -> None:
    srv = cluster.server("node1")
    port = srv.port
    assert cluster.runner(port).run(HOST, "true").exit_code == 0
    assert f"[{HOST}]:{port} ssh-ed25519" in pathlib.Path(cluster.known_hosts).read_text()
    srv.stop()
    # same address and port, new host key
    cluster.server("node1", port=port, host_key=str(cluster.root / "new.hostkey"))
    with pytest.raises(errors.CommandError, match="has changed"):
        cluster.runner(port).run(HOST, "true")


def test_run_many_in_parallel(cluster: Cluster) -> None:
    marks = cluster.root / "marks"
    marks.mkdir()
    # Linux routes all of 127.0.0.0/8 to loopback: one address per "node"
    servers = [cluster.server(f"node{i}", bind=f"127.0.0.{i + 2}") for i in range(3)]
    dead = cluster.server("dead", bind="127.0.0.9")
    dead.stop()
    # Each command waits (bounded) until all three have started: run one by
    # one, each would see fewer than three marks.
    cmd = (f'touch {marks}/"$GANETI_HOSTNAME"; i=0; '
           f'while [ "$(ls {marks} | wc -l)" -lt 3 ] && [ $i -lt 200 ]; do '
           f'sleep 0.05; i=$((i+1)); done; ls {marks} | wc -l')
    ports = {srv.bind_address: srv.port for srv in servers + [dead]}
    out = cluster.runner(22).run_many(list(ports), cmd, ports=ports, timeout=30)
    assert set(out) == set(ports)
    for srv in servers:
        res = out[srv.bind_address]
        assert not isinstance(res, errors.CommandError), res
        assert res.exit_code == 0 and res.stdout.strip() == "3"
    assert isinstance(out["127.0.0.9"], errors.CommandError)
    assert f"127.0.0.9:{dead.port}" in str(out["127.0.0.9"])


def test_run_many_empty(cluster: Cluster) -> None:
    assert cluster.runner(22).run_many([], "true") == {}


def test_unread_stdin_is_bounded_by_timeout(cluster: Cluster) -> None:
    srv = cluster.server()
    runner = cluster.runner(srv.port)
    # the command never reads stdin: sending 8 MiB cannot complete
    with pytest.raises(errors.CommandError, match=f"{HOST}:{srv.port}"):
        runner.run(HOST, "exec sleep 30", input_data=b"x" * (8 << 20), timeout=1.0)


def test_reuse_keeps_one_connection_and_makes_a_new_one_when_it_is_gone(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = cluster.server()
    connects: list[str] = []
    real = ssh.SshRunner._connect

    def counting(self: ssh.SshRunner, host: str, port: int):  # type: ignore[no-untyped-def]
        connects.append(host)
        return real(self, host, port)

    monkeypatch.setattr(ssh.SshRunner, "_connect", counting)
    plain = cluster.runner(srv.port)
    assert [plain.run(HOST, f"echo {i}").stdout for i in range(2)] == ["0\n", "1\n"]
    assert len(connects) == 2
    connects.clear()
    runner = cluster.runner(srv.port, reuse=True)
    outs = [runner.run(HOST, f"echo {i}; exit {i}") for i in range(3)]
    assert [(r.stdout, r.exit_code) for r in outs] == [("0\n", 0), ("1\n", 1), ("2\n", 2)]
    assert len(connects) == 1
    # the server goes away and another answers on the same port: one new connection
    port = srv.port
    srv.stop()
    cluster.server(port=port)
    assert runner.run(HOST, "echo again").stdout == "again\n"
    assert runner.run(HOST, "echo more").stdout == "more\n"
    assert len(connects) == 2
    runner.close()
    assert runner.run(HOST, "true").exit_code == 0 and len(connects) == 3


# --- reading a command's output --------------------------------------------

class _ScriptedChannel:
    """A channel whose server sends ``exit-status`` before the end of the output,
    as OpenSSH's sshd does when the output is held back by the channel's window:
    each :meth:`recv` hands out the next chunk; the exit status is in from the start;
    EOF comes once every chunk was read (or never, ``eof=False``: a process the
    command left behind holds its stdout)."""

    def __init__(self, chunks: list[bytes], *, eof: bool = True, exit_after: int = 0) -> None:
        self.chunks = list(chunks)
        self.eof = eof
        self.exit_after = exit_after  # looks at the exit status before it is in
        self.closed = False
        self._pipe = os.pipe()
        self._arrived = 0  # chunks the transport has put in the buffer so far
        if self.chunks:    # readable while output is left, as paramiko sets its pipe
            os.write(self._pipe[1], b"x")

    @property
    def eof_received(self) -> bool:
        return self.eof and not self.chunks

    def fileno(self) -> int:
        return self._pipe[0]

    def recv_ready(self) -> bool:
        # the data arrives one chunk per look, as window adjustments let it through
        self._arrived += 1
        return bool(self.chunks) and self._arrived % 2 == 0

    def recv(self, size: int) -> bytes:
        chunk = self.chunks.pop(0)
        if not self.chunks:
            os.read(self._pipe[0], 1)
        return chunk

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        self.exit_after -= 1
        return self.exit_after < 0

    def get_transport(self) -> object:
        return self

    def is_active(self) -> bool:
        return True

    def shutdown_write(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        for fd in self._pipe:
            os.close(fd)


def test_output_after_the_exit_status_is_read_to_its_end() -> None:
    # a 1 MiB output read over SSH from a loaded node came back cut short
    chunks = [bytes([i]) * 32768 for i in range(40)]
    chan = _ScriptedChannel(chunks)
    try:
        out, err, timed_out = sshchannel.collect(chan, 10.0)  # type: ignore[arg-type]
    finally:
        chan.close()
    assert (len(out), err, timed_out) == (40 * 32768, b"", False)
    assert out == b"".join(bytes([i]) * 32768 for i in range(40))


def test_a_command_whose_eof_comes_before_its_exit_status_is_waited_for() -> None:
    # sshd sends EOF when the command's stdout closes, exit-status when it is reaped:
    # a loaded node may take seconds in between (the runner said "connection lost")
    chan = _ScriptedChannel([b"Primary/Secondary\n"], exit_after=30)
    try:
        out, _err, timed_out = sshchannel.collect(chan, 10.0)  # type: ignore[arg-type]
        assert chan.exit_status_ready()
    finally:
        chan.close()
    assert (out, timed_out) == (b"Primary/Secondary\n", False)


def test_output_without_eof_ends_after_the_grace_once_the_exit_status_is_in() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.5
        return now[0]

    chan = _ScriptedChannel([b"started\n"], eof=False)
    try:
        out, _err, timed_out = sshchannel.collect(chan, 60.0, clock)  # type: ignore[arg-type]
    finally:
        chan.close()
    assert (out, timed_out) == (b"started\n", False)
    assert now[0] < 60.0


def test_an_interactive_session_shows_the_output_after_the_exit_status(
        tmp_path: pathlib.Path) -> None:
    chunks = [bytes([65 + i]) * 4096 for i in range(20)]
    chan = _ScriptedChannel(chunks)
    stdin_r, stdin_w = os.pipe()
    os.close(stdin_w)
    with open(tmp_path / "out", "wb") as out:
        try:
            sshchannel.pump_terminal(chan, stdin_r, out.fileno())  # type: ignore[arg-type]
        finally:
            os.close(stdin_r)
            chan.close()
    assert (tmp_path / "out").read_bytes() == b"".join(chunks)
