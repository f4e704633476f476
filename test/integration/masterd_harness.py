"""Run a real ganeti-masterd on a temporary root, for tests and benchmarks.

::

    handle = start_masterd(tmp_path, workers=4)
    try:
        job_id = luxi_call(handle.socket_path, "SubmitJob", [[{"OP_ID": "OP_TEST_DELAY",
                                                               "duration": 0}]])
        handle.kill()          # SIGKILL
        handle.restart()       # same root, same options
    finally:
        handle.close()         # SIGKILL if still running; always safe

:func:`prepare_root` creates a minimal one-node cluster configuration with
``config.ConfigWriter.initialize`` (until cluster init exists).  The daemon
runs in the foreground in its own process group, with ``GANETI_ROOTDIR``
and ``GANETI_HOSTNAME`` set; its output goes to ``<tmp>/masterd.out``.
Everything started is also killed at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ganeti import config, luxi, objects
from ganeti.pathutils import Paths
from ganeti.utils import unixsock

__all__ = ["REPO_ROOT", "MASTERD_SCRIPT", "CLUSTER_NAME", "NODE_NAME", "prepare_root",
           "start_masterd", "MasterdHandle", "luxi_call", "LuxiConnection"]

REPO_ROOT = Path(__file__).resolve().parents[2]
MASTERD_SCRIPT = REPO_ROOT / "daemons" / "ganeti-masterd"
CLUSTER_NAME = "cluster.example.com"
NODE_NAME = "node1.example.com"
_LIVE: set[MasterdHandle] = set()


def prepare_root(root: str | os.PathLike[str], *, node_name: str = NODE_NAME,
                 cluster_name: str = CLUSTER_NAME) -> Paths:
    """Create the directories and a one-node ``config.data`` (if missing)."""
    paths = Paths(root=os.path.abspath(root))
    for directory in (paths.data_dir, paths.run_dir, paths.socket_dir, paths.log_dir,
                      paths.conf_dir, paths.queue_dir):
        os.makedirs(directory, exist_ok=True)
    if not os.path.exists(paths.config_file):
        group_uuid, node_uuid = str(uuid.uuid4()), str(uuid.uuid4())
        data = objects.ConfigData(
            cluster=objects.Cluster(cluster_name=cluster_name, uuid=str(uuid.uuid4()),
                                    master_node=node_uuid, master_ip="127.0.0.1",
                                    master_netdev="lo"),
            nodes={node_uuid: objects.Node(name=node_name, uuid=node_uuid,
                                           primary_ip="127.0.0.1", secondary_ip="127.0.0.1",
                                           group=group_uuid, master_candidate=True)},
            nodegroups={group_uuid: objects.NodeGroup(name="default", uuid=group_uuid,
                                                      members=[node_uuid])},
        )
        config.ConfigWriter.initialize(paths.config_file, data)
    return paths


class MasterdHandle:
    """One masterd process (restartable) on a fixed root."""

    def __init__(self, root: str, args: list[str], log_path: str,
                 node_name: str = NODE_NAME) -> None:
        self.root = root
        self.paths = Paths(root=root)
        self.socket_path = self.paths.master_socket
        self.args = args
        self.log_path = log_path
        self.env = {**os.environ, "GANETI_ROOTDIR": root, "GANETI_HOSTNAME": node_name}
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_time: float | None = None

    def start(self, timeout: float = 30.0) -> None:
        """Start the daemon and wait until its socket answers."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("masterd already running")
        started = time.monotonic()
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(MASTERD_SCRIPT), "-f", *self.args],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        _LIVE.add(self)
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"masterd exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                luxi_call(self.socket_path, "QueryConfigValues", [["cluster_name"]], timeout=2)
                self.startup_time = time.monotonic() - started
                return
            except (OSError, ConnectionError):
                time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"masterd did not come up in {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                return b"\n".join(fh.read().splitlines()[-lines:]).decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit status (kills after ``timeout``)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        _LIVE.discard(self)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the daemon's process group and reap it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        _LIVE.discard(self)

    def restart(self, timeout: float = 30.0) -> None:
        """Start again on the same root (after stop or kill)."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        self.start(timeout)

    def close(self) -> None:
        self.kill()

    def call(self, method: str, args: list[Any], timeout: float = 60.0) -> Any:
        """One LUXI call on a new connection; raises the decoded error on failure."""
        return luxi_call(self.socket_path, method, args, timeout=timeout)

    def __enter__(self) -> MasterdHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start_masterd(tmp_path: str | os.PathLike[str], *, workers: int = 8,
                  extra_args: list[str] | None = None, timeout: float = 30.0) -> MasterdHandle:
    """Prepare ``<tmp_path>/root`` (once) and start masterd on it."""
    root = os.path.abspath(os.path.join(tmp_path, "root"))
    prepare_root(root)
    args = ["--workers", str(workers), "--no-rpc", *(extra_args or [])]
    handle = MasterdHandle(root, args, os.path.join(os.path.abspath(tmp_path), "masterd.out"))
    handle.start(timeout)
    return handle


class LuxiConnection:
    """A raw LUXI connection (several requests on one socket)."""

    def __init__(self, path: str, timeout: float = 60.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        unixsock.connect(self.sock, path)   # a long temporary root too
        self.buf = luxi.FrameBuffer()
        self.frames: list[bytes] = []

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        """The next response frame; raises ConnectionError when the peer closed."""
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("connection closed by masterd")
            self.frames.extend(self.buf.feed(data))
        return self.frames.pop(0)

    def call_raw(self, method: str, args: list[Any]) -> dict[str, Any]:
        """Send a request; return the whole response dict."""
        from ganeti import serializer
        self.send_raw(luxi.encode_request(method, args))
        return serializer.loads(self.recv_frame())

    def call(self, method: str, args: list[Any]) -> Any:
        """Send a request; return its result or raise the decoded error."""
        self.send_raw(luxi.encode_request(method, args))
        return luxi.parse_response(self.recv_frame())

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> LuxiConnection:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def luxi_call(path: str, method: str, args: list[Any], timeout: float = 60.0) -> Any:
    """One LUXI request on a fresh connection."""
    with LuxiConnection(path, timeout) as conn:
        return conn.call(method, args)


@atexit.register
def _kill_all() -> None:
    for handle in list(_LIVE):
        handle.kill()
