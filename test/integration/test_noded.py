"""Integration tests: real ganeti-noded processes on 127.0.1.k."""

from __future__ import annotations

import concurrent.futures
import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

import pytest

from ganeti import constants, crypto, errors, serializer
from ganeti.rpc import transport as rpc_transport

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from noded_harness import NODED_SCRIPT, NodedCluster, NodedProcess, make_node_root  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with NodedCluster(tmp_path_factory.mktemp("noded"), 3) as c:
        yield c


def _raw_request(cluster, method: str, path: str, body: bytes | None,
                 context: ssl.SSLContext | None = None) -> tuple[int, dict, bytes]:
    node = cluster.nodes[0]
    ctx = context or rpc_transport.make_client_context(cluster.cert_file)
    conn = http.client.HTTPSConnection(node.address, node.port, timeout=10, context=ctx)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_version_round_trip_and_headers(cluster) -> None:
    res = cluster.runner().call_version(cluster.names)
    assert {n: r.payload for n, r in res.items()} == {n: constants.PROTOCOL_VERSION
                                                       for n in cluster.names}
    status, headers, body = _raw_request(cluster, "POST", "/version", b"[]")
    assert status == 200 and serializer.loads(body) == [True, constants.PROTOCOL_VERSION]
    assert headers["Server"] == f"Ganeti {constants.RELEASE_VERSION}"
    assert headers["Connection"] == "close"


def test_client_without_certificate_refused(cluster) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cafile=cluster.cert_file)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        _raw_request(cluster, "POST", "/version", b"[]", context=ctx)


def test_client_with_other_certificate_refused(cluster, tmp_path) -> None:
    other = str(tmp_path / "other.pem")
    crypto.write_pem_pair(other, *crypto.generate_self_signed_cert())
    node = cluster.nodes[0]
    # presents a foreign certificate but trusts the real server: the server refuses
    bad = rpc_transport.HttpsTransport(other, context=rpc_transport.make_client_context(
        other, ca_file=cluster.cert_file))
    with pytest.raises(errors.RpcTransportError):
        bad.post(node.address, node.port, "version", b"[]", 5)
    # trusts only its own certificate: the client refuses the server
    with pytest.raises(errors.RpcTransportError, match="TLS"):
        rpc_transport.HttpsTransport(other).post(node.address, node.port, "version", b"[]", 5)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls_below_1_2_refused(cluster) -> None:
    ctx = rpc_transport.make_client_context(cluster.cert_file)
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    try:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ValueError, ssl.SSLError):
        pytest.skip("TLS 1.1 not available in this OpenSSL")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _raw_request(cluster, "POST", "/version", b"[]", context=ctx)


@pytest.mark.parametrize("method, path, body, status, text", [
    ("POST", "/no_such_procedure", b"[]", 404, "Unknown procedure"),
    ("GET", "/version", None, 405, "use POST"),
    ("PUT", "/version", b"[]", 405, "use POST"),
    ("POST", "/version", b"{not json", 400, "malformed request body"),
    ("POST", "/version", b'{"a": 1}', 400, "must be a JSON list"),
    ("POST", "/test_delay", b'["soon"]', 400, "'duration' must be a number"),
    ("POST", "/test_delay", b"[]", 400, "expected 1 argument"),
], ids=["unknown", "get", "put", "bad-json", "not-list", "bad-type", "bad-count"])
def test_bad_requests_get_clear_errors(cluster, method, path, body, status, text) -> None:
    got_status, headers, reply = _raw_request(cluster, method, path, body)
    assert got_status == status
    decoded = serializer.loads(reply)
    assert decoded[0] is False and text in decoded[1]


def test_bad_request_through_transport(cluster) -> None:
    node = cluster.nodes[0]
    with pytest.raises(errors.RemoteError, match="HTTP 404.*Unknown procedure 'nope'"):
        cluster.transport().post(node.address, node.port, "nope", b"[]", 5)


def test_upload_file_allowed_and_refused(cluster) -> None:
    runner = cluster.runner()
    res = runner.call_upload_file(
        cluster.names, file_name="/var/lib/ganeti/known_hosts", content="hosts\n", mode=0o644, uid=None,
        gid=None, mtime=None)
    assert all(not r.failed for r in res.values()), res
    for node in cluster.nodes:
        assert open(node.paths.known_hosts_file).read() == "hosts\n"
    bad = runner.call_upload_file(
        cluster.names[:1], file_name="/etc/passwd", content="x", mode=0o644, uid=None, gid=None,
        mtime=None)
    assert "not an allowed cluster file" in bad[cluster.names[0]].fail_msg
    assert not os.path.exists(os.path.join(cluster.nodes[0].paths.root, "etc", "passwd"))


def test_upload_file_refuses_setuid_and_foreign_owner(cluster) -> None:
    runner = cluster.runner()
    name = cluster.names[0]
    path = cluster.nodes[0].paths.rapi_users_file
    setuid = runner.call_upload_file(
        [name], file_name="/var/lib/ganeti/rapi/users", content="u\n", mode=0o4755, uid=None, gid=None,
        mtime=None)
    assert "Refusing mode 4755" in setuid[name].fail_msg
    owner = runner.call_upload_file(
        [name], file_name="/var/lib/ganeti/rapi/users", content="u\n", mode=0o640,
        uid=os.geteuid() + 4242, gid=None, mtime=None)
    assert "Refusing uid" in owner[name].fail_msg
    assert not os.path.exists(path)


def test_jobqueue_update_refuses_escape(cluster) -> None:
    runner = cluster.runner()
    node = cluster.nodes[0]
    ok = runner.call_jobqueue_update(
        [node.name], file_name="/var/lib/ganeti/queue/job-3", content='{"id": 3}')
    assert not ok[node.name].failed
    assert open(os.path.join(node.paths.queue_dir, "job-3")).read() == '{"id": 3}'
    bad = runner.call_jobqueue_update([node.name], file_name="../config.data", content="evil")
    assert "not inside" in bad[node.name].fail_msg
    assert not os.path.exists(node.paths.config_file)


def test_hooks_runner_over_rpc(cluster) -> None:
    node = cluster.nodes[1]
    hook_dir = node.paths.hooks_dir("cluster-verify", "post")
    os.makedirs(hook_dir, exist_ok=True)
    for name, body, mode in [("02-second", 'echo "2 $GANETI_X"', 0o755),
                             ("01-first", "echo 1; exit 1", 0o755),
                             ("03.bad-name", "echo no", 0o755),
                             ("04-noexec", "echo no", 0o644)]:
        path = os.path.join(hook_dir, name)
        with open(path, "w") as fh:
            fh.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, mode)
    res = cluster.runner().call_hooks_runner(
        [node.name], hpath="cluster-verify", phase="post", env={"GANETI_X": "y"})[node.name]
    assert not res.failed, res.fail_msg
    assert [r[:2] for r in res.payload] == [
        ["01-first", constants.HKR_FAIL], ["02-second", constants.HKR_SUCCESS],
        ["03.bad-name", constants.HKR_SKIP], ["04-noexec", constants.HKR_SKIP]]
    assert res.payload[1][2] == "2 y\n"


def test_daemon_survives_bad_input(cluster) -> None:
    node = cluster.nodes[2]
    # plain text on the TLS port
    with socket.create_connection((node.address, node.port), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        sock.settimeout(5)
        try:
            sock.recv(100)
        except OSError:
            pass
    # connect and close at once
    socket.create_connection((node.address, node.port), timeout=5).close()
    # garbage HTTP inside TLS
    ctx = rpc_transport.make_client_context(cluster.cert_file)
    with socket.create_connection((node.address, node.port), timeout=5) as raw:
        with ctx.wrap_socket(raw) as tls:
            tls.sendall(b"\x00\x01garbage\r\n\r\n")
            try:
                tls.recv(1000)
            except OSError:
                pass
    # absurd Content-Length
    conn = http.client.HTTPSConnection(node.address, node.port, timeout=10, context=ctx)
    try:
        conn.putrequest("POST", "/version")
        conn.putheader("Content-Length", str(10 ** 12))
        conn.endheaders()
        assert conn.getresponse().status == 413
    finally:
        conn.close()
    res = cluster.runner().call_version([node.name])[node.name]
    assert res.payload == constants.PROTOCOL_VERSION
    assert node.alive()


def test_backend_failure_is_false_envelope(cluster) -> None:
    node = cluster.nodes[0]
    res = cluster.runner().call_master_node_name([node.name])[node.name]
    assert res.failed and "master node" in res.fail_msg


def test_many_concurrent_requests_and_no_zombies(cluster) -> None:
    node = cluster.nodes[0]
    runner = cluster.runner(timeouts={"urgent": 20.0})
    with concurrent.futures.ThreadPoolExecutor(max_workers=30) as pool:
        futures = [pool.submit(runner.call_version, [node.name]) for _ in range(120)]
        results = [f.result(timeout=60)[node.name] for f in futures]
    assert all(r.payload == constants.PROTOCOL_VERSION for r in results), \
        [r.fail_msg for r in results if r.failed][:3]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (node.request_children() or len(node.spares()) != 1):
        time.sleep(0.05)
    assert node.zombies() == []
    assert node.request_children() == []
    assert len(node.spares()) == 1   # the default: one idle spare, nothing else


def test_fanout_with_killed_and_stopped_node(tmp_path) -> None:
    with NodedCluster(tmp_path, 3) as c:
        healthy, dead, stopped = c.nodes
        dead.kill()
        stopped.pause()
        runner = c.runner(timeouts={"urgent": 1.0})
        res = runner.call_version(c.names)   # returns: the stopped node hit its 1 s timeout
        assert res[healthy.name].payload == constants.PROTOCOL_VERSION
        assert dead.name in res[dead.name].fail_msg
        assert "connection refused" in res[dead.name].fail_msg
        assert stopped.name in res[stopped.name].fail_msg
        assert "timed out" in res[stopped.name].fail_msg
        stopped.resume()
        again = c.runner().call_version([stopped.name])[stopped.name]
        assert again.payload == constants.PROTOCOL_VERSION


def test_busy_daemon_answers_503(tmp_path) -> None:
    with NodedCluster(tmp_path, 1, extra_args=("--max-children", "2")) as c:
        node = c.nodes[0]
        runner = c.runner()
        overlapped = False
        for _ in range(3):
            # the children of the readiness probe (or of the attempt before)
            # must be gone before counting
            assert _wait_for(lambda: not node.request_children())
            with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
                # long enough that a loaded machine still asks while both children sleep
                slow = [pool.submit(lambda: runner.call_test_delay([node.name], duration=8.0))
                        for _ in range(2)]
                # both requests hold their slots: not just two children (a spare
                # just forked has the daemon's name until it names itself)
                assert _wait_for(lambda: len(node.serving_children()) == 2)
                busy = runner.call_version([node.name])[node.name]
                # neither slow call answered yet: both slots were held all along
                # (on a machine so loaded that one had ended, try again)
                overlapped = not any(f.done() for f in slow)
                assert all(not f.result(timeout=30)[node.name].failed for f in slow)
            if overlapped:
                break
        assert overlapped, "a slow call always ended before the third request was answered"
        assert busy.failed and "busy" in busy.fail_msg and "503" in busy.fail_msg
        assert runner.call_version([node.name])[node.name].payload == constants.PROTOCOL_VERSION


def _wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer exists (reaped, not a zombie)."""
    return not os.path.exists(f"/proc/{pid}")


def test_spare_child_serves_one_request_and_is_replaced(tmp_path) -> None:
    with NodedCluster(tmp_path, 1) as c:
        node = c.nodes[0]
        runner = c.runner()
        assert _wait_for(lambda: len(node.spares()) == 1)
        first = node.spares()[0]
        assert runner.call_version([node.name])[node.name].payload == constants.PROTOCOL_VERSION
        # the spare served that request, exited and was reaped; a new one waits
        assert _wait_for(lambda: _gone(first))
        assert _wait_for(lambda: len(node.spares()) == 1 and node.spares() != [first])
        second = node.spares()[0]
        # a spare that dies unexpectedly is reaped and replaced
        os.kill(second, signal.SIGKILL)
        assert _wait_for(lambda: _gone(second))
        assert _wait_for(lambda: len(node.spares()) == 1 and node.spares() != [second])
        assert node.zombies() == []
        assert node.request_children() == []
        for _ in range(5):
            assert runner.call_version([node.name])[node.name].payload == \
                constants.PROTOCOL_VERSION
        assert _wait_for(lambda: not node.request_children() and len(node.spares()) == 1)
        assert node.zombies() == []


@pytest.mark.parametrize("spares", [0, 2])
def test_spare_children_option(tmp_path, spares) -> None:
    with NodedCluster(tmp_path, 1, extra_args=("--spare-children", str(spares))) as c:
        node = c.nodes[0]
        runner = c.runner()
        for _ in range(4):
            assert runner.call_version([node.name])[node.name].payload == \
                constants.PROTOCOL_VERSION
        assert _wait_for(lambda: not node.request_children() and len(node.spares()) == spares)
        time.sleep(0.2)
        assert len(node.children()) == spares and node.zombies() == []


def test_shutdown_kills_spares_promptly(tmp_path) -> None:
    with NodedCluster(tmp_path, 1, extra_args=("--spare-children", "2")) as c:
        node = c.nodes[0]
        assert _wait_for(lambda: len(node.spares()) == 2)
        spares = node.spares()
        node.proc.send_signal(signal.SIGTERM)
        assert node.proc.wait(timeout=10) == 0   # a hang fails here
        # killed and reaped by the daemon itself, not left to the harness
        assert all(_gone(pid) for pid in spares)


def test_spares_exit_when_daemon_is_killed(tmp_path) -> None:
    with NodedCluster(tmp_path, 1) as c:
        node = c.nodes[0]
        assert _wait_for(lambda: len(node.spares()) == 1)
        spare = node.spares()[0]
        os.kill(node.pid, signal.SIGKILL)   # the parent only: the spare sees EOF
        node.proc.wait(timeout=10)
        assert _wait_for(lambda: _gone(spare) or _zombie(spare))


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_shutdown_with_pending_handshakes(tmp_path) -> None:
    with NodedCluster(tmp_path, 1) as c:
        node = c.nodes[0]
        silent = [socket.create_connection((node.address, node.port), timeout=5)
                  for _ in range(5)]
        try:
            node.proc.send_signal(signal.SIGTERM)
            assert node.proc.wait(timeout=10) == 0   # a hang fails here
            for sock in silent:   # closed: by the daemon (EOF), or still in the backlog (reset)
                sock.settimeout(5)
                try:
                    assert sock.recv(10) == b""
                except ConnectionResetError:
                    pass
        finally:
            for sock in silent:
                sock.close()


@pytest.mark.parametrize("option", ["--handshake-timeout", "--max-handshakes",
                                    "--request-timeout"])
def test_bad_timeout_options_refused(tmp_path, option: str) -> None:
    c = NodedCluster(tmp_path, 1, start=False)
    node = c.nodes[0]
    env = {**os.environ, "GANETI_ROOTDIR": node.paths.root, "GANETI_HOSTNAME": node.name}
    proc = subprocess.run([sys.executable, str(NODED_SCRIPT), "-f", "-b", node.address,
                           "-p", str(node.port), option, "0"],
                          env=env, capture_output=True, timeout=30)
    assert proc.returncode == 1
    assert option.encode() in proc.stderr


def test_bad_spare_children_option_refused(tmp_path) -> None:
    c = NodedCluster(tmp_path, 1, start=False)
    node = c.nodes[0]
    env = {**os.environ, "GANETI_ROOTDIR": node.paths.root, "GANETI_HOSTNAME": node.name}
    proc = subprocess.run([sys.executable, str(NODED_SCRIPT), "-f", "-b", node.address,
                           "-p", str(node.port), "--spare-children", "-1"],
                          env=env, capture_output=True, timeout=30)
    assert proc.returncode == 1
    assert b"spare children" in proc.stderr


def test_node_leave_cluster_stops_daemon(tmp_path) -> None:
    with NodedCluster(tmp_path, 1) as c:
        node = c.nodes[0]
        open(node.paths.config_file, "w").close()
        res = c.runner().call_node_leave_cluster([node.name], modify_ssh_setup=False)[node.name]
        assert not res.failed, res.fail_msg
        node.proc.wait(timeout=10)
        assert node.proc.returncode == 0
        assert not os.path.exists(node.paths.config_file)
        assert not os.path.exists(node.paths.server_pem)
        assert not os.path.exists(node.paths.pid_file(constants.NODED))


def test_daemon_refuses_to_start_without_certificate(tmp_path) -> None:
    root = tmp_path / "bare"
    env = {**os.environ, "GANETI_ROOTDIR": str(root), "GANETI_HOSTNAME": "bare.example.com"}
    proc = subprocess.run([sys.executable, str(NODED_SCRIPT), "-f", "-b", "127.0.1.1", "-p", "1"],
                          env=env, capture_output=True, timeout=30)
    assert proc.returncode == 1
    assert b"server.pem" in proc.stderr and b"missing" in proc.stderr


def test_daemonized_start_and_pid_file(tmp_path) -> None:
    c = NodedCluster(tmp_path, 1, start=False)
    node = c.nodes[0]
    env = {**os.environ, "GANETI_ROOTDIR": node.paths.root, "GANETI_HOSTNAME": node.name}
    proc = subprocess.run([sys.executable, str(NODED_SCRIPT), "-b", node.address,
                           "-p", str(node.port)], env=env, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    pid = int(open(node.paths.pid_file(constants.NODED)).read())
    try:
        node.wait_ready(15)
        assert os.path.exists(node.paths.daemon_log_file(constants.NODED))
    finally:
        os.kill(pid, 15)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and os.path.exists(node.paths.pid_file(constants.NODED)):
            time.sleep(0.05)
    assert not os.path.exists(node.paths.pid_file(constants.NODED))


def test_make_node_root_layout(tmp_path) -> None:
    cert = str(tmp_path / "c.pem")
    crypto.write_pem_pair(cert, *crypto.generate_self_signed_cert())
    paths = make_node_root(tmp_path / "n", cert)
    assert crypto.verify_cert(paths.server_pem) == []
    assert os.path.isdir(paths.queue_dir)
    assert isinstance(NodedProcess("x", "127.0.1.9", 1, paths.root).pid, type(None))
