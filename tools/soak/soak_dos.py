"""Soak scenarios of denial of service: idle LUXI connections and silent noded connections.

They measure and report (worst latency of a normal client, refusals);
they assert nothing, the integration tests of the two servers do that.

* LUXI: many connections to a real masterd's socket that never send a
  request, while normal clients (:class:`ganeti.luxi.Client`, a fresh
  connection per call) ask ``QueryClusterInfo``.
* noded: many TCP connections to a real noded that never send a TLS
  ClientHello, while an :class:`ganeti.rpc.client.RpcRunner` calls
  ``version`` (test/integration/noded_harness.py starts the daemon).
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ganeti import errors, luxi
from masterd_harness import start_masterd
from noded_harness import NodedCluster

__all__ = ["ProbeFigures", "run_luxi_dos", "run_noded_dos", "OPEN_LIMIT"]

#: Seconds the attackers' connections may take to open; those not open by then are not tried.
OPEN_LIMIT = 30.0


@dataclass
class ProbeFigures:
    """Latencies and refusals of normal calls before and during an attack."""

    name: str
    attackers_requested: int
    attackers_open: int = 0
    attackers_failed: Counter[str] = field(default_factory=Counter)
    attackers_dropped: int = 0
    #: seconds it took to open the attackers' connections
    open_time: float = 0.0
    baseline: list[float] = field(default_factory=list)
    served: list[float] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    #: seconds until each refused call during the attack failed
    refused_after: list[float] = field(default_factory=list)
    baseline_refused: int = 0

    def refuse(self, reason: str, took: float, attack: bool) -> None:
        """Count one refused call (``took`` seconds until it failed)."""
        if attack:
            self.refused[reason] += 1
            self.refused_after.append(took)
        else:
            self.baseline_refused += 1

    def line(self) -> str:
        worst = max(self.served, default=0.0)
        base = max(self.baseline, default=0.0)
        median = sorted(self.served)[len(self.served) // 2] if self.served else 0.0
        return (f"{self.name}: attackers={self.attackers_open}/{self.attackers_requested}"
                f" attackers_failed={sum(self.attackers_failed.values())}"
                f" ({','.join(f'{k}:{v}' for k, v in sorted(self.attackers_failed.items())) or '-'})"
                f" attackers_dropped_by_server={self.attackers_dropped}"
                f" open_time={self.open_time:.1f}s"
                f" calls={len(self.served) + sum(self.refused.values())} served={len(self.served)}"
                f" refused={sum(self.refused.values())}"
                f" ({','.join(f'{k}:{v}' for k, v in sorted(self.refused.items())) or '-'})"
                f" worst_latency={worst:.3f}s median_latency={median:.3f}s"
                f" worst_refused_after={max(self.refused_after, default=0.0):.3f}s"
                f" baseline_worst={base:.3f}s baseline_refused={self.baseline_refused}")


def _dropped(socks: list[socket.socket]) -> int:
    """How many of ``socks`` the server has closed or answered (readable now)."""
    poller = select.poll()
    for sock in socks:
        poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    return len(poller.poll(0))


def _close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()
    socks.clear()


# --- LUXI ------------------------------------------------------------------------

def _unix_connect(path: str, timeout: float) -> socket.socket:
    """A connected Unix socket; retries while the accept backlog is full, up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(path)
            return sock
        except BlockingIOError:        # EAGAIN: the backlog is full
            sock.close()
            if time.monotonic() > deadline:
                raise TimeoutError(f"connect to {path}: backlog full for {timeout}s") from None
            time.sleep(0.01)
        except OSError:
            sock.close()
            raise


def _luxi_probe(path: str, timeout: float, figures: ProbeFigures, lock: threading.Lock,
                attack: bool) -> None:
    started = time.monotonic()
    try:
        with luxi.Client(path, connect_timeout=timeout, rw_timeout=timeout) as client:
            client.QueryClusterInfo()
    except (errors.GanetiError, OSError) as exc:
        with lock:
            figures.refuse(type(exc).__name__, time.monotonic() - started, attack)
        return
    took = time.monotonic() - started
    with lock:
        (figures.served if attack else figures.baseline).append(took)


def _luxi_clients(path: str, clients: int, calls: int, timeout: float,
                  figures: ProbeFigures, attack: bool) -> None:
    lock = threading.Lock()

    def one_client() -> None:
        for _ in range(calls):
            _luxi_probe(path, timeout, figures, lock, attack)
            time.sleep(0.02)

    threads = [threading.Thread(target=one_client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(calls * (2 * timeout + 1))


def run_luxi_dos(workdir: str, *, idle: int, clients: int = 10, calls: int = 10,
                 timeout: float = 5.0, open_limit: float = OPEN_LIMIT,
                 masterd_args: list[str] | None = None, log: Any = print) -> ProbeFigures:
    """Hold ``idle`` silent connections to masterd; ``clients`` x ``calls`` normal calls meanwhile.

    Opening the connections stops after ``open_limit`` seconds.
    """
    figures = ProbeFigures("luxi-dos", idle)
    handle = start_masterd(workdir, workers=4, extra_args=masterd_args)
    socks: list[socket.socket] = []
    try:
        _luxi_clients(handle.socket_path, 1, 5, timeout, figures, attack=False)
        started = time.monotonic()
        for _ in range(idle):
            if time.monotonic() - started > open_limit:
                break
            try:
                socks.append(_unix_connect(handle.socket_path, 2.0))
            except OSError as exc:
                figures.attackers_failed[type(exc).__name__] += 1
        figures.attackers_open = len(socks)
        figures.open_time = time.monotonic() - started
        time.sleep(0.5)
        log(f"  luxi-dos: {len(socks)} idle connections open, {clients} clients x {calls} calls")
        _luxi_clients(handle.socket_path, clients, calls, timeout, figures, attack=True)
        figures.attackers_dropped = _dropped(socks)
    finally:
        _close_all(socks)
        handle.close()
    return figures


# --- noded -----------------------------------------------------------------------

def run_noded_dos(workdir: str, *, conns: int, calls: int = 10, timeout: float = 5.0,
                  open_limit: float = OPEN_LIMIT, log: Any = print) -> ProbeFigures:
    """Hold ``conns`` TCP connections to noded without a ClientHello; ``calls`` version RPCs meanwhile.

    Opening the connections stops after ``open_limit`` seconds (a full
    accept backlog makes each connect wait for a SYN retransmission).
    """
    figures = ProbeFigures("noded-dos", conns)
    socks: list[socket.socket] = []
    with NodedCluster(workdir, 1) as cluster:
        node = cluster.nodes[0]
        runner = cluster.runner(timeouts={"urgent": timeout})

        def probe(into: list[float]) -> None:
            started = time.monotonic()
            result = runner.call_version([node.name])[node.name]
            took = time.monotonic() - started
            if result.fail_msg:
                reason = "timeout" if "timed out" in result.fail_msg else "failed"
                figures.refuse(reason, took, into is figures.served)
            else:
                into.append(took)

        try:
            for _ in range(3):
                probe(figures.baseline)
            started = time.monotonic()
            for _ in range(conns):
                if time.monotonic() - started > open_limit:
                    break
                try:
                    socks.append(socket.create_connection((node.address, node.port), timeout=2.0))
                except OSError as exc:
                    figures.attackers_failed[type(exc).__name__] += 1
            figures.attackers_open = len(socks)
            figures.open_time = time.monotonic() - started
            time.sleep(0.5)
            log(f"  noded-dos: {len(socks)} silent connections open, {calls} version calls")
            for _ in range(calls):
                probe(figures.served)
                time.sleep(0.2)
            figures.attackers_dropped = _dropped(socks)
        finally:
            _close_all(socks)
    return figures
