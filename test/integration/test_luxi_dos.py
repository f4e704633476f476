"""masterd's LUXI socket under idle and greedy connections: normal clients are still served.

Against a real ganeti-masterd with its default limits: a thousand idle
connections do not lock clients out, a hundred concurrent clients are all
served, silent connections are closed after the short timeout, and
oversized partial messages on parallel connections neither grow the
daemon without bound nor stay allocated.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from ganeti import luxi
from ganeti.utils import unixsock
from test.integration.host_helpers import raise_fd_limit, skip_unless
from test.integration.masterd_harness import REPO_ROOT, start_masterd

pytestmark = pytest.mark.timeout(300)

IDLE = 1000
CLIENTS = 100
#: the well-behaved client's own timeouts: it must be answered within them
CLIENT_TIMEOUT = 2.0




@pytest.fixture
def masterd(tmp_path):
    skip_unless(raise_fd_limit(3 * IDLE + 4 * CLIENTS + 256))   # the daemon inherits it
    handle = start_masterd(tmp_path, workers=4)
    try:
        yield handle
    finally:
        handle.close()


def _idle_connections(path: str, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        unixsock.connect(sock, path)     # the basetemp may be deep: past sun_path
        socks.append(sock)
    return socks


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_clients_served_while_1000_connections_idle(masterd) -> None:
    idle = _idle_connections(masterd.socket_path, IDLE)
    try:
        client = luxi.Client(masterd.socket_path, connect_timeout=CLIENT_TIMEOUT,
                             rw_timeout=CLIENT_TIMEOUT)
        with client:
            assert client.QueryClusterInfo()["name"] == "cluster.example.com"
        env = {**os.environ, "GANETI_ROOTDIR": masterd.root,
               "GANETI_HOSTNAME": "node1.example.com"}
        proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "gnt-debug"),
                               "delay", "0"], env=env, capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr

        failures: list[BaseException] = []
        served: list[int] = []

        def well_behaved() -> None:
            try:
                with luxi.Client(masterd.socket_path, connect_timeout=30,
                                 rw_timeout=30) as c:
                    for _ in range(3):
                        assert c.QueryConfigValues(["cluster_name"]) == ["cluster.example.com"]
                served.append(1)
            except BaseException as exc:   # reported below
                failures.append(exc)

        threads = [threading.Thread(target=well_behaved) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert failures == [] and len(served) == CLIENTS
        # the idle connections are still open (they were not needed to make room)
        idle[-1].setblocking(False)
        with pytest.raises(BlockingIOError):
            idle[-1].recv(1)
    finally:
        for sock in idle:
            sock.close()


def test_silent_connection_closed_after_the_short_timeout(tmp_path) -> None:
    # (the default is 10 s; the option, at 1 s, keeps the test short)
    handle = start_masterd(tmp_path, workers=1, extra_args=["--new-client-timeout", "1"])
    try:
        (sock,) = _idle_connections(handle.socket_path, 1)
        with sock:
            sock.settimeout(60)   # the old daemon kept it for 300 s
            assert sock.recv(10) == b""
        # a client that sends a request in time is served
        assert handle.call("QueryConfigValues", [["cluster_name"]])
    finally:
        handle.close()


def test_parallel_oversized_messages_are_bounded_and_freed(masterd) -> None:
    before = _rss_kib(masterd.pid)
    chunk = b"[" + b"1," * 32767   # 64 KiB of a JSON list that never ends (no ETX)
    closed: list[bool] = []

    def stream() -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        unixsock.connect(sock, masterd.socket_path)
        try:
            for _ in range(40 * 16):   # 40 MiB
                sock.sendall(chunk)
        except OSError:
            closed.append(True)   # the daemon closed it
        finally:
            sock.close()

    for _ in range(3):   # the old daemon's growth showed from the second round on
        threads = [threading.Thread(target=stream) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert len(closed) == 12   # every stream was cut off
    deadline = time.monotonic() + 10
    while _rss_kib(masterd.pid) - before > 24 * 1024 and time.monotonic() < deadline:
        time.sleep(0.1)
    # the old daemon kept about 65 MiB of it
    assert _rss_kib(masterd.pid) - before < 24 * 1024
    assert masterd.call("QueryConfigValues", [["cluster_name"]]) == ["cluster.example.com"]
