"""Run real ganeti-noded processes on 127.0.1.k for tests, benchmarks and vcluster.

::

    with NodedCluster(tmp_path, 3) as cluster:       # node1..node3 on 127.0.1.1..3
        results = cluster.runner().call_version(cluster.names)
        cluster.nodes[0].pause()                       # SIGSTOP
        cluster.nodes[1].kill()                        # SIGKILL

* :func:`make_cluster_cert` creates the shared cluster certificate.
* :func:`make_node_root` creates one node's root directory tree with that
  certificate as ``server.pem`` and ``client.pem``.
* :class:`NodedProcess` starts/stops/kills/pauses one foreground noded with
  ``GANETI_ROOTDIR``/``GANETI_HOSTNAME`` set, in its own process group
  (so forked request children die with it); ``children()``, ``spares()``
  (idle pre-forked children), ``request_children()`` and ``zombies()``
  look at its children in /proc.
* :func:`in_process_server` builds a ``NodedServer`` in the test process
  (no listening loop) and :func:`answer_in_process` has it serve one
  connection over a socket pair, a TLS client thread at the other end.
* :class:`NodedCluster` does that for N nodes sharing one random free port,
  and builds resolvers and RPC runners for them.

Everything started is killed by ``close()`` (also called on context exit
and, as a safety net, at interpreter exit).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ganeti import crypto, errors
from ganeti.pathutils import Paths
from ganeti.rpc import client as rpc_client
from ganeti.rpc.transport import HttpsTransport
from ganeti.http.spare import CHILD_COMM, SPARE_COMM
from tools.harness.vcluster import pick_free_port

__all__ = ["REPO_ROOT", "NODED_SCRIPT", "make_cluster_cert", "make_node_root",
           "pick_free_port", "node_address", "NodedProcess", "NodedCluster",
           "in_process_server", "answer_in_process"]

REPO_ROOT = Path(__file__).resolve().parents[2]
NODED_SCRIPT = REPO_ROOT / "daemons" / "ganeti-noded"
_LIVE: set[NodedProcess] = set()


def node_address(index: int) -> str:
    """Loopback address of virtual node ``index`` (1-based): 127.0.1.<index>."""
    if not 1 <= index <= 254:
        raise ValueError(f"node index {index} out of range 1..254")
    return f"127.0.1.{index}"


def make_cluster_cert(directory: str | os.PathLike[str]) -> str:
    """Create a cluster certificate file ``<directory>/server.pem``; return its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "server.pem")
    key_pem, cert_pem = crypto.generate_self_signed_cert()
    crypto.write_pem_pair(path, key_pem, cert_pem)
    return path


def make_node_root(root: str | os.PathLike[str], cert_file: str) -> Paths:
    """Create a node root with the usual directories and the cluster certificate."""
    paths = Paths(root=os.path.abspath(root))
    for directory in (paths.data_dir, paths.run_dir, paths.log_dir, paths.conf_dir,
                      paths.queue_dir, paths.hooks_base_dir):
        os.makedirs(directory, exist_ok=True)
    key_pem, cert_pem = crypto.load_pem_pair(cert_file)
    crypto.write_pem_pair(paths.server_pem, key_pem, cert_pem)
    crypto.write_pem_pair(paths.client_pem, key_pem, cert_pem)
    return paths


def _harness_server_class() -> type:
    from ganeti.server import noded

    class HarnessServer(noded.NodedServer):
        """A node daemon server that also names its certificate file."""

        cert_file: str = ""

    return HarnessServer


@contextlib.contextmanager
def in_process_server(directory: str | os.PathLike[str], **kwargs: Any) -> Iterator[Any]:
    """A ``NodedServer`` for node1.example.com on a fresh node root in ``directory``
    (``kwargs`` go to the server; no spares unless asked), closed at the end; its
    certificate file is ``server.cert_file``."""
    from ganeti.server import noded
    cert = make_cluster_cert(os.path.join(directory, "cert"))
    paths = make_node_root(os.path.join(directory, "node"), cert)
    kwargs.setdefault("spare_children", 0)
    server_class = _harness_server_class()
    srv = server_class("127.0.0.1", 0, noded.make_server_context(cert), paths,
                       "node1.example.com", **kwargs)
    srv.cert_file = cert
    try:
        yield srv
    finally:
        srv.server_close()


def answer_in_process(server: Any, request: bytes, *, pause: float = 0.0) -> bytes:
    """Have ``server`` (from :func:`in_process_server`) serve one connection: a TLS
    client thread sends ``request`` and reads until the server closes, sleeping
    ``pause`` seconds after each 64 KiB read (per 64 KiB, not per ``recv``: a TLS
    ``recv`` returns one record of at most 16 KiB); the bytes it read."""
    from ganeti.rpc import transport
    ours, theirs = socket.socketpair()
    ctx = transport.make_client_context(server.cert_file)
    received = bytearray()

    def client() -> None:
        with ctx.wrap_socket(theirs, server_hostname="node1.example.com") as tls:
            tls.sendall(request)
            paced = 0
            while chunk := tls.recv(64 * 1024):
                received.extend(chunk)
                while pause and len(received) - paced >= 64 * 1024:
                    paced += 64 * 1024
                    time.sleep(pause)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    ours.settimeout(10)
    try:
        server.finish_request(ours, ("127.0.0.1", 0))
    finally:
        ours.close()
        thread.join(30)
    return bytes(received)


class NodedProcess:
    """One foreground ganeti-noded process."""

    def __init__(self, name: str, address: str, port: int, root: str, *,
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> None:
        self.name = name
        self.address = address
        self.port = port
        self.paths = Paths(root=os.path.abspath(root))
        self.extra_args = extra_args
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, *, wait: bool = True, timeout: float = 15.0) -> None:
        """Start the daemon (``-f``); with ``wait``, return once it answers RPC."""
        env = {**os.environ, "GANETI_ROOTDIR": self.paths.root, "GANETI_HOSTNAME": self.name,
               "GANETI_NODED_PORT": str(self.port), **self.env}
        argv = [sys.executable, str(NODED_SCRIPT), "-f", "-b", self.address,
                "-p", str(self.port), *self.extra_args]
        log = open(os.path.join(self.paths.log_dir, "noded-stderr.log"), "ab")
        try:
            self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, start_new_session=True)
        finally:
            log.close()
        _LIVE.add(self)
        if wait:
            self.wait_ready(timeout)

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Wait until ``version`` answers; raises :class:`errors.GanetiError` on timeout."""
        transport = HttpsTransport(self.paths.server_pem, keepalive=False)
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and not self.alive():
                raise errors.GanetiError(f"noded {self.name} exited: {self._stderr_tail()}")
            try:
                transport.post(self.address, self.port, "version", b"[]", 2.0)
                return
            except errors.RpcError as exc:
                last = exc
                time.sleep(0.02)
        raise errors.GanetiError(f"noded {self.name} not ready after {timeout}s: {last}")

    def _stderr_tail(self) -> str:
        try:
            with open(os.path.join(self.paths.log_dir, "noded-stderr.log"), "rb") as fh:
                return fh.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _signal_group(self, signum: int) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def pause(self) -> None:
        """SIGSTOP the daemon (it keeps its socket: connections hang)."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the daemon."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the daemon and its request children; wait for it."""
        if self.proc is None:
            return
        self._signal_group(signal.SIGCONT)
        self._signal_group(signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        # a request child (or spare) killed with the group may still be exiting
        # and hold the listening socket: a connection then gets reset instead
        # of refused; the node is dead only once the whole group is gone
        deadline = time.monotonic() + 10
        while self._group_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        _LIVE.discard(self)

    def _group_alive(self) -> bool:
        """True while a process of the daemon's group still runs (zombies are done)."""
        if self.proc is None:
            return False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # after the command's closing parenthesis: state, ppid, pgrp
            if fields[0] != "Z" and int(fields[2]) == self.proc.pid:
                return True
        return False

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM (after SIGCONT), wait, SIGKILL if needed; the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self._signal_group(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        code = self.proc.poll()
        self._signal_group(signal.SIGKILL)   # leftover request children
        if code is None:
            self.proc.wait(timeout=10)
        _LIVE.discard(self)
        return code

    def children(self) -> list[int]:
        """Pids of the daemon's direct children (request handlers), from /proc."""
        if self.proc is None:
            return []
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as fh:
                return [int(x) for x in fh.read().split()]
        except OSError:
            return []

    @staticmethod
    def _comm(pid: int) -> str | None:
        try:
            with open(f"/proc/{pid}/comm") as fh:
                return fh.read().strip()
        except OSError:
            return None

    def spares(self) -> list[int]:
        """Pids of the idle pre-forked spare children (named ``noded-spare``)."""
        return [pid for pid in self.children() if self._comm(pid) == SPARE_COMM]

    def request_children(self) -> list[int]:
        """Pids of the children other than idle spares (requests being served, zombies)."""
        return [pid for pid in self.children() if self._comm(pid) != SPARE_COMM]

    def serving_children(self) -> list[int]:
        """Pids of the children holding a request slot (handshake done, named ``noded-child``).

        A child just forked still has the daemon's name and is not counted.
        """
        return [pid for pid in self.children() if self._comm(pid) == CHILD_COMM]

    def zombies(self) -> list[int]:
        """Children in state Z (not reaped)."""
        found = []
        for pid in self.children():
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    state = fh.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state == "Z":
                found.append(pid)
        return found


class NodedCluster:
    """N node daemons ``node<k>.example.com`` on 127.0.1.k, one shared port."""

    def __init__(self, base_dir: str | os.PathLike[str], count: int, *,
                 port: int | None = None, start: bool = True, name_fmt: str = "node{}.example.com",
                 extra_args: tuple[str, ...] = (), ready_timeout: float = 60.0) -> None:
        self.base_dir = os.path.abspath(base_dir)
        self.cert_file = make_cluster_cert(os.path.join(self.base_dir, "master"))
        addresses = [node_address(i) for i in range(1, count + 1)]
        self.port = port or pick_free_port(addresses)
        self.nodes: list[NodedProcess] = []
        for index, address in enumerate(addresses, start=1):
            name = name_fmt.format(index)
            root = os.path.join(self.base_dir, name)
            make_node_root(root, self.cert_file)
            self.nodes.append(NodedProcess(name, address, self.port, root, extra_args=extra_args))
        if start:
            self.start_all(ready_timeout)

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def node(self, name: str) -> NodedProcess:
        """The node called ``name``."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def start_all(self, timeout: float = 60.0) -> None:
        """Start every daemon, then wait until all answer."""
        try:
            for node in self.nodes:
                node.start(wait=False)
            for node in self.nodes:
                node.wait_ready(timeout)
        except BaseException:
            self.close()
            raise

    def resolver(self, offline: tuple[str, ...] = ()) -> rpc_client.StaticResolver:
        """A resolver for the nodes; names in ``offline`` are marked offline."""
        return rpc_client.StaticResolver(
            {n.name: (n.address, n.port, n.name in offline) for n in self.nodes},
            default_port=self.port)

    def transport(self, keepalive: bool = False) -> HttpsTransport:
        """The master-side HTTPS transport with the cluster certificate; without
        ``keepalive`` one request per connection, so that every call's child
        exits once it answered (the tests count children)."""
        return HttpsTransport(self.cert_file, keepalive=keepalive)

    def runner(self, timeouts: dict[str, float] | None = None, *, keepalive: bool = False,
               **kwargs: Any) -> rpc_client.RpcRunner:
        """An RpcRunner for the cluster (``timeouts`` overrides classes)."""
        return rpc_client.RpcRunner(self.resolver(**kwargs), self.transport(keepalive),
                                    timeouts=timeouts)

    def close(self) -> None:
        """Kill every daemon that is still running."""
        for node in self.nodes:
            node.kill()

    def __enter__(self) -> NodedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        proc.kill()
