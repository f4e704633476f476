"""gnt-cluster on a real 3-node virtual cluster (one cluster shared by the module).

The tests run in file order; the ones that break nodes come last and put
the cluster back together.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import time

import pytest
from host_helpers import process_tree
from vcluster_harness import SHORT_RPC_TIMEOUTS, VirtualCluster

from ganeti import constants, crypto, daemonctl

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    # no live-data cache (--node-info-max-age 0): the fan-out test lists the
    # nodes right after killing two node daemons, and a listing made less
    # than the cache's 5 s before (by an earlier test) would show their old
    # figures instead (ganeti/cmdlib/liveinfo.py)
    with VirtualCluster(tmp_path_factory.mktemp("vcl"), nodes=3,
                        masterd_args=[*SHORT_RPC_TIMEOUTS, "--node-info-max-age", "0"]) as cluster:
        yield cluster


def _files_equal(vc, rel_path: str, nodes: list[str], *, wait: float = 30.0) -> bool:
    deadline = time.monotonic() + wait
    while True:
        contents = set()
        for node in nodes:
            try:
                with open(os.path.join(vc.paths(node).root, rel_path), "rb") as fh:
                    contents.add(fh.read())
            except FileNotFoundError:
                contents.add(None)
        if len(contents) == 1 and None not in contents:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_info_getmaster_version(vc):
    out = vc.ok("gnt-cluster", "info")
    assert "Cluster name: cluster.vcluster" in out
    assert "Master node: node1.vcluster" in out
    assert "Enabled hypervisors: fake" in out
    assert vc.ok("gnt-cluster", "getmaster").strip() == "node1.vcluster"
    assert f"Software version: {constants.RELEASE_VERSION}" in vc.ok("gnt-cluster", "version")


def test_all_nodes_are_in_the_cluster(vc):
    roles = vc.roles()
    assert roles == {"node1.vcluster": "M", "node2.vcluster": "C", "node3.vcluster": "C"}


def test_verify_clean_cluster(vc):
    res = vc.run("gnt-cluster", "verify")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ERROR" not in res.stdout


def test_config_and_job_files_identical_on_candidates(vc):
    vc.ok("gnt-cluster", "modify", "-B", "maxmem=512")
    assert "maxmem: 512" in vc.ok("gnt-cluster", "info")
    rel_config = os.path.relpath(vc.paths("node1").config_file, vc.paths("node1").root)
    assert _files_equal(vc, rel_config, vc.names)
    queue = vc.paths("node1").queue_dir
    jobs = sorted((int(n[4:]) for n in os.listdir(queue) if n.startswith("job-")))
    assert jobs
    rel_job = os.path.relpath(os.path.join(queue, f"job-{jobs[-1]}"), vc.paths("node1").root)
    assert _files_equal(vc, rel_job, vc.names)


def _drained_on(vc, want: bool, wait: float = 30.0) -> list[str]:
    """Nodes whose queue drain flag is ``want`` (waiting for replication)."""
    deadline = time.monotonic() + wait
    while True:
        have = [n for n in vc.names if os.path.exists(vc.paths(n).queue_drain_file) == want]
        if len(have) == len(vc.names) or time.monotonic() > deadline:
            return have
        time.sleep(0.1)


def test_queue_drain_and_watcher_pause(vc):
    vc.ok("gnt-cluster", "queue", "drain")
    assert "is set" in vc.ok("gnt-cluster", "queue", "info")
    assert _drained_on(vc, True) == vc.names     # every candidate holds the flag
    res = vc.run("gnt-cluster", "redist-conf")
    assert res.returncode == 1 and "drain" in res.stderr
    vc.ok("gnt-cluster", "queue", "undrain")
    assert "is unset" in vc.ok("gnt-cluster", "queue", "info")
    assert _drained_on(vc, False) == vc.names    # and clearing it reaches them too
    vc.ok("gnt-cluster", "watcher", "pause", "1h")
    assert "paused until" in vc.ok("gnt-cluster", "watcher", "info")
    # every node holds the same pause-until time, for its own watcher
    copies = set()
    for name in vc.names:
        with open(vc.paths(name).watcher_pause_file) as fh:
            copies.add(float(fh.read()))
    assert len(copies) == 1 and copies.pop() > time.time() + 3000
    vc.ok("gnt-cluster", "watcher", "continue")
    assert "not paused" in vc.ok("gnt-cluster", "watcher", "info")
    assert not any(os.path.exists(vc.paths(n).watcher_pause_file) for n in vc.names)


def test_command_over_ssh(vc):
    out = vc.ok("gnt-cluster", "command", "echo", "$GANETI_HOSTNAME")
    blocks = out.split("-" * 48 + "\n")[1:]
    assert len(blocks) == 3
    for block, name in zip(blocks, vc.names):
        assert block == f"node: {name}\n{name}\nreturn code = 0\n"
    res = vc.run("gnt-cluster", "command", "-n", "node2.vcluster", "exit 3")
    assert res.returncode == 1
    assert "node: node2.vcluster\nreturn code = 3" in res.stdout


def test_copyfile_maps_paths_below_the_node_root(vc):
    src = os.path.join(vc.paths("node1").conf_dir, "copied.txt")
    with open(src, "w") as fh:
        fh.write("payload\n")
    vc.ok("gnt-cluster", "copyfile", src)
    for node in ("node2", "node3"):
        with open(os.path.join(vc.paths(node).conf_dir, "copied.txt")) as fh:
            assert fh.read() == "payload\n"


def test_renew_crypto_restarts_daemons_with_the_new_certificate(vc):
    def certs() -> set[bytes]:
        out = set()
        for name in vc.names:
            with open(vc.paths(name).server_pem, "rb") as fh:
                out.add(fh.read())
        return out

    before = certs()
    assert len(before) == 1
    rapi = daemonctl.daemon_pid(vc.paths("node1"), constants.RAPI)
    assert rapi is not None
    assert vc.run("gnt-cluster", "renew-crypto", "--new-cluster-certificate").returncode == 1
    vc.ok("gnt-cluster", "renew-crypto", "--new-cluster-certificate", "--force")
    after = certs()
    assert len(after) == 1 and after != before
    # the RAPI daemon went down and came back with the master daemon
    assert daemonctl.daemon_pid(vc.paths("node1"), constants.RAPI) not in (None, rapi)
    res = vc.run("gnt-cluster", "verify")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "RAPI daemon" not in res.stderr


def _served_rapi_cert(vc) -> bytes:
    """The certificate the master's RAPI daemon presents (DER)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((vc.cluster.master_node.ip, vc.cluster.rapi_port),
                                  timeout=30) as sock:
        with ctx.wrap_socket(sock) as tls:
            cert = tls.getpeercert(binary_form=True)
    assert cert
    return cert


def _rapi_pem_cert(vc, node: str) -> bytes:
    with open(vc.paths(node).rapi_pem, encoding="ascii") as fh:
        text = fh.read()
    begin = text.index("-----BEGIN CERTIFICATE-----")
    return ssl.PEM_cert_to_DER_cert(text[begin:])


def _wait_served(vc, cert: bytes) -> bytes:
    """The served certificate, once it is ``cert`` (bounded wait; the daemon reloads
    asynchronously after SIGHUP or the file change)."""
    served = b""
    for _ in range(100):
        served = _served_rapi_cert(vc)
        if served == cert:
            break
        time.sleep(0.1)
    return served


def test_new_rapi_certificate_is_reloaded_without_a_restart(vc):
    old_cert = _served_rapi_cert(vc)
    assert old_cert == _rapi_pem_cert(vc, "node1")
    rapi = daemonctl.daemon_pid(vc.paths("node1"), constants.RAPI)
    masterd = daemonctl.daemon_pid(vc.paths("node1"), constants.MASTERD)
    out = vc.ok("gnt-cluster", "renew-crypto", "--new-rapi-certificate", "--force")
    assert "the RAPI daemon reloads it" in out
    new_cert = _rapi_pem_cert(vc, "node1")
    assert new_cert != old_cert
    assert {_rapi_pem_cert(vc, n) for n in vc.names} == {new_cert}
    assert _wait_served(vc, new_cert) == new_cert
    assert daemonctl.daemon_pid(vc.paths("node1"), constants.RAPI) == rapi
    assert daemonctl.daemon_pid(vc.paths("node1"), constants.MASTERD) == masterd
    # a rapi.pem replaced by hand is picked up too (inotify), still the same process
    key, cert = crypto.generate_self_signed_cert("rapi.by-hand")
    pem = vc.paths("node1").rapi_pem
    crypto.write_pem_pair(pem + ".new", key, cert)
    os.replace(pem + ".new", pem)
    hand_cert = _rapi_pem_cert(vc, "node1")
    assert _wait_served(vc, hand_cert) == hand_cert
    assert daemonctl.daemon_pid(vc.paths("node1"), constants.RAPI) == rapi
    log = open(vc.paths("node1").daemon_log_file(constants.RAPI)).read()
    assert crypto.cert_fingerprint(cert) in log     # "RAPI certificate reloaded ... (sha256:..)"


def test_cluster_tags(vc):
    vc.ok("gnt-cluster", "add-tags", "demo:tag")
    assert "demo:tag" in vc.ok("gnt-cluster", "list-tags").split()
    vc.ok("gnt-cluster", "remove-tags", "demo:tag")
    assert "demo:tag" not in vc.ok("gnt-cluster", "list-tags").split()


def test_node_list_units(vc):
    def mtotal(units: str) -> dict[str, str]:
        out = vc.ok("gnt-node", "list", "--no-headers", "--units", units, "-o", "name,mtotal")
        return dict(line.split() for line in out.splitlines())

    in_mib, in_gib = mtotal("m"), mtotal("g")
    assert set(in_mib) == set(vc.names)
    for name in vc.names:
        assert in_mib[name].isdigit()
        assert abs(float(in_gib[name]) * 1024 - int(in_mib[name])) <= 0.05 * 1024
    assert vc.run("gnt-node", "list", "--units", "x").returncode != 0


def _hook(vc, node: str, hpath: str, phase: str, body: str) -> str:
    hook_dir = vc.paths(node).hooks_dir(hpath, phase)
    os.makedirs(hook_dir, exist_ok=True)
    script = os.path.join(hook_dir, "10-test")
    with open(script, "w") as fh:
        fh.write("#!/bin/sh\n" + body)
    os.chmod(script, 0o755)
    return script


def test_failing_pre_hook_aborts_node_modify_with_its_output(vc):
    script = _hook(vc, "node2", "node-modify", "pre",
                   'echo "policy: $GANETI_NODE_NAME stays as it is ($GANETI_OP_CODE)"\nexit 1\n')
    try:
        res = vc.run("gnt-node", "modify", "-D", "yes", "node2.vcluster")
        assert res.returncode == 1
        assert "policy: node2.vcluster stays as it is (OP_NODE_SET_PARAMS)" in res.stderr
        assert vc.roles()["node2.vcluster"] == "C"
    finally:
        os.unlink(script)
    vc.ok("gnt-node", "modify", "-D", "yes", "node2.vcluster")
    assert vc.roles()["node2.vcluster"] == "D"
    vc.ok("gnt-node", "modify", "-D", "no", "node2.vcluster")
    assert vc.roles()["node2.vcluster"] == "C"


def test_post_hooks_of_cluster_modify_get_the_environment(vc, tmp_path):
    target = tmp_path / "env"
    script = _hook(vc, "node1", "cluster-modify", "post", f"env > '{target}'\nexit 1\n")
    try:
        # a failing post hook is only logged: the operation succeeds
        vc.ok("gnt-cluster", "modify", "-B", "maxmem=256")
    finally:
        os.unlink(script)
    with open(target) as fh:
        env = dict(line.split("=", 1) for line in fh.read().splitlines() if "=" in line)
    assert env["GANETI_HOOKS_PHASE"] == "post"
    assert env["GANETI_HOOKS_PATH"] == "cluster-modify"
    assert env["GANETI_OP_CODE"] == "OP_CLUSTER_SET_PARAMS"
    assert env["GANETI_OBJECT_TYPE"] == "CLUSTER"
    assert env["GANETI_CLUSTER"] == "cluster.vcluster"
    assert env["GANETI_MASTER"] == "node1.vcluster"
    assert "maxmem: 256" in vc.ok("gnt-cluster", "info")


def test_noded_refuses_client_without_certificate(vc):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    node = vc.cluster.node("node2")
    with socket.create_connection((node.ip, vc.cluster.noded_port), timeout=5) as sock:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(sock) as tls:
                tls.sendall(b"POST /version HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]")
                if not tls.recv(100):
                    raise ConnectionError("closed without a reply")


def test_verify_detects_tampered_file_and_redist_fixes_it(vc):
    path = vc.paths("node2").ssconf_file("cluster_name")
    with open(path, "w") as fh:
        fh.write("tampered.example\n")
    config3 = vc.paths("node3").config_file
    with open(config3, "ab") as fh:
        fh.write(b" ")
    res = vc.run("gnt-cluster", "verify")
    assert res.returncode == 1
    errors_ = [line for line in res.stdout.splitlines() if "ERROR:" in line]
    assert any("node2.vcluster" in line and "ssconf_cluster_name" in line
               for line in errors_), res.stdout
    assert any("node3.vcluster" in line and "config.data" in line for line in errors_), \
        res.stdout
    vc.ok("gnt-cluster", "redist-conf")
    with open(path) as fh:
        assert fh.read().strip() == "cluster.vcluster"
    rel_config = os.path.relpath(config3, vc.paths("node3").root)
    assert _files_equal(vc, rel_config, vc.names)
    res = vc.run("gnt-cluster", "verify")
    assert res.returncode == 0, res.stdout + res.stderr


def test_verify_detects_stopped_node_daemon(vc):
    paths = vc.paths("node3")
    assert daemonctl.stop_daemon(paths, constants.NODED)
    try:
        res = vc.run("gnt-cluster", "verify")
        assert res.returncode == 1
        errors_ = [line for line in res.stdout.splitlines() if "ERROR" in line]
        assert any("node3.vcluster" in line for line in errors_), res.stdout
        # the watcher pause is set where possible and the failing node is named
        res = vc.run("gnt-cluster", "watcher", "pause", "10m")
        assert res.returncode == 1 and "node3.vcluster" in res.stderr, res.stderr
        assert "node2.vcluster" not in res.stderr
        assert os.path.exists(vc.paths("node2").watcher_pause_file)
        assert not os.path.exists(paths.watcher_pause_file)
    finally:
        node = vc.cluster.node("node3")
        daemonctl.start_noded(paths, node.ip, vc.cluster.noded_port, env=vc.env("node3"))
    vc.ok("gnt-cluster", "watcher", "continue")
    assert not any(os.path.exists(vc.paths(n).watcher_pause_file) for n in vc.names)


def _queue_top(paths) -> dict[str, bytes]:
    """The top-level job files and serial of a node's queue, with their bytes."""
    out = {}
    for name in os.listdir(paths.queue_dir):
        if name.startswith("job-") or name == "serial":
            with open(os.path.join(paths.queue_dir, name), "rb") as fh:
                out[name] = fh.read()
    return out


def _new_job_file(vc, master, *argv: str) -> str:
    before = set(_queue_top(master))
    vc.ok(*argv)
    (name,) = set(_queue_top(master)) - before - {"serial"}
    return name


def _wait_same_queue(vc, master, node, *, submit: bool, wait: float = 60.0) -> bool:
    deadline = time.monotonic() + wait
    while _queue_top(node) != _queue_top(master):
        if time.monotonic() > deadline:
            return False
        if submit:     # job-file updates are what brings the copy
            vc.ok("gnt-debug", "delay", "0")
        time.sleep(0.3)
    return True


def test_candidate_that_missed_updates_catches_up(vc):
    master, node3 = vc.paths(vc.names[0]), vc.paths("node3")
    first = _new_job_file(vc, master, "gnt-debug", "delay", "0")
    # (earlier tests stopped node daemons too: this also waits for those copies)
    assert _wait_same_queue(vc, master, node3, submit=True)
    assert daemonctl.stop_daemon(node3, constants.NODED)
    try:
        vc.ok("gnt-job", "archive", first[4:])              # a rename node3 misses
        missed = _new_job_file(vc, master, "gnt-debug", "delay", "0")   # and updates
        assert first in _queue_top(node3) and missed not in _queue_top(node3)
    finally:
        node = vc.cluster.node("node3")
        daemonctl.start_noded(node3, node.ip, vc.cluster.noded_port, env=vc.env("node3"))
    # the next job-file updates bring node3 the whole queue (retried every few seconds)
    assert _wait_same_queue(vc, master, node3, submit=True)
    assert missed in _queue_top(node3) and first not in _queue_top(node3)
    job_id = int(first[4:])
    assert os.path.exists(os.path.join(node3.queue_archive_dir, str(job_id // 10000), first))


def test_fanout_with_killed_and_stopped_daemons_is_bounded(vc):
    # a listing just before (what a cached answer would come from: none, see vc)
    vc.ok("gnt-node", "list", "--no-headers", "-o", "name,mfree")
    killed = daemonctl.daemon_pid(vc.paths("node2"), constants.NODED)
    stopped = daemonctl.daemon_pid(vc.paths("node3"), constants.NODED)
    assert killed and stopped
    os.kill(killed, signal.SIGKILL)
    paused = process_tree(stopped)       # its kept-connection children too
    for pid in paused:
        os.kill(pid, signal.SIGSTOP)
    try:
        # a hang fails the 60 s limit: the master's RPC timeouts are scaled to 0.05 (3 s
        # for "urgent"), so the unreachable nodes give up long before
        res = vc.run("gnt-node", "list", "--no-headers", "-o", "name,mfree", timeout=60)
        rows = dict(line.split() for line in res.stdout.splitlines())
        # no data for the unreachable nodes ("?" no data, "-" unavailable)
        assert rows["node2.vcluster"] in ("?", "-") and rows["node3.vcluster"] in ("?", "-")
        assert rows["node1.vcluster"] not in ("?", "-")
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
        daemonctl.stop_daemon(vc.paths("node3"), constants.NODED)
        for name in ("node2", "node3"):
            node = vc.cluster.node(name)
            daemonctl.start_noded(vc.paths(name), node.ip, vc.cluster.noded_port,
                                  env=vc.env(name))
    assert vc.run("gnt-cluster", "verify").returncode == 0
