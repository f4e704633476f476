"""The ``rapi-memory`` and ``rapi-smuggle`` soak scenarios against a real ganeti-rapi.

``rapi-memory``: rounds of parallel anonymous requests, each announcing a
9.9 MB body (and sending it, as an attacker would), plus parallel anonymous
queries just under the anonymous body limit packed with as many JSON values
as fit; ganeti-rapi's resident memory is sampled all along (peak) and after
the last round (retained).  It fails when an anonymous body over the limit
got anything but 413.

``rapi-smuggle``: every row of the resource table that submits a job or
needs a write user, tried by a write user with bodies that name another
opcode (``OP_ID``), unknown keys, the parameters the path sets, and a
multi-allocation entry with an ``OP_ID``.  It fails when any of them was
accepted (200) or the job queue's serial moved.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import rapi_fuzz
import soak_rapi

from ganeti import constants, daemonctl
from ganeti.rapi import resources
from ganeti.server import rapi as rapi_server
from ganeti.opcodes import wire

#: the body an attacker announces (just under the authenticated limit)
BIG_BODY = 9_900_000


@dataclass
class MemoryFigures:
    """ganeti-rapi's memory under parallel anonymous large bodies (KiB)."""

    rounds: int
    clients: int
    rss_before: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    big_not_refused: int = 0

    def failed(self) -> bool:
        return self.big_not_refused > 0

    def line(self) -> str:
        mib = lambda kib: f"{kib / 1024:.0f}MiB"  # noqa: E731
        return (f"rapi-memory: rounds={self.rounds} clients={self.clients}x{BIG_BODY}B"
                f"+{self.clients}x<{rapi_server.MAX_ANONYMOUS_BODY}B"
                f" rss_before={mib(self.rss_before)} rss_peak={mib(self.rss_peak)}"
                f" rss_retained={mib(self.rss_after)} big_not_refused={self.big_not_refused}"
                f" statuses={','.join(f'{k}:{v}' for k, v in sorted(self.statuses.items()))}")


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _status_of(reply: bytes) -> str:
    m = re.match(rb"HTTP/1\.[01] (\d{3})", reply)
    return m.group(1).decode() if m else "none"


def _send(address: tuple[str, int], head: bytes, body: bytes, chunk: int = 65536) -> str:
    """Send ``head`` and as much of ``body`` as the server takes; the answer's status."""
    try:
        with socket.create_connection(address, timeout=60) as raw:
            with rapi_fuzz.client_context().wrap_socket(raw) as sock:
                sock.sendall(head)
                try:
                    for start in range(0, len(body), chunk):
                        sock.sendall(body[start:start + chunk])
                except OSError:
                    pass        # the server answered and closed: read its answer
                try:
                    return _status_of(sock.recv(4096))
                except OSError:
                    return "reset"
    except OSError as exc:
        return type(exc).__name__


def _query_head(length: int) -> bytes:
    return (b"PUT /2/query/instance HTTP/1.1\r\nHost: soak\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {length}\r\n\r\n".encode())


def _dense_query(limit: int) -> bytes:
    """A valid anonymous query of almost ``limit`` bytes, as many values as fit."""
    head, tail = b'{"fields": ["name"], "qfilter": ["|"', b"]}"
    item = b',["=","os","a"]'
    count = (limit - len(head) - len(tail) - 16) // len(item)
    return head + item * count + tail


def run_rapi_memory(workdir: str, *, rounds: int = 3, clients: int = 6,
                    log: Any = print) -> MemoryFigures:
    """Parallel anonymous large bodies against a real ganeti-rapi; its memory figures."""
    figures = MemoryFigures(rounds=rounds, clients=clients)
    with soak_rapi.rapi_cluster(workdir) as (vc, address):
        pid = daemonctl.daemon_pid(vc.paths(vc.master_node.name), constants.RAPI)
        if pid is None:
            raise RuntimeError("ganeti-rapi is not running")
        figures.rss_before = figures.rss_peak = _rss_kib(pid)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                figures.rss_peak = max(figures.rss_peak, _rss_kib(pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        big = b"[" + b"0," * (BIG_BODY // 2 - 1) + b"0]"
        dense = _dense_query(rapi_server.MAX_ANONYMOUS_BODY)
        lock = threading.Lock()

        def attack(kind: str, head: bytes, body: bytes) -> None:
            status = _send(address, head, body)
            with lock:
                figures.statuses[f"{kind}{status}"] += 1
                if kind == "big" and status != "413":
                    figures.big_not_refused += 1

        try:
            for _ in range(rounds):
                threads = [threading.Thread(target=attack, args=("big", _query_head(len(big)),
                                                                 big))
                           for _ in range(clients)]
                threads += [threading.Thread(target=attack, args=("dense",
                                                                  _query_head(len(dense)),
                                                                  dense))
                            for _ in range(clients)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(120)
        finally:
            time.sleep(1.0)         # let the request threads end
            done.set()
            sampler.join(5)
        figures.rss_after = _rss_kib(pid)
        log(f"rapi-memory: ganeti-rapi pid {pid}")
    return figures


@dataclass
class SmuggleFigures:
    """Write rows tried with foreign opcodes and unknown keys; how many were accepted."""

    routes: int = 0
    requests: int = 0
    accepted: list[str] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    serial_unchanged: bool = False

    def failed(self) -> bool:
        return bool(self.accepted) or not self.serial_unchanged

    def line(self) -> str:
        return (f"rapi-smuggle: routes={self.routes} requests={self.requests}"
                f" accepted={len(self.accepted)}"
                f" statuses={','.join(f'{k}:{v}' for k, v in sorted(self.statuses.items()))}"
                f" serial_unchanged={self.serial_unchanged}")


def _bodies(route: resources.Route) -> list[Any]:
    """The hostile bodies tried on ``route``."""
    bodies: list[Any] = [
        wire.test_delay(duration=0),
        wire.cluster_destroy(),
        {"no_such_key": 1},
        {"OP_ID": route.opcode or wire.OP_TEST_DELAY, "no_such_key": 1},
    ]
    bodies += [{key: "other"} for key in sorted(route.body.fixed)]
    if route.path == "/2/instances-multi-alloc":
        bodies.append({"instances": [wire.cluster_destroy()]})
        bodies.append({"instances": [{"instance_name": "x", "disk_template": "diskless",
                                      "no_such_key": 1}]})
    if route.path == "/2/instances":
        bodies = [{"__version__": 1, **b} for b in bodies]
    return bodies


#: the placeholder names of the routes' paths the smuggling round fills in
PLACEHOLDERS = frozenset(["node", "instance", "group", "job_id", "disk_index", "resource",
                          "network", "filter_uuid", "token_id", "image"])


def run_rapi_smuggle(workdir: str, *, log: Any = print) -> SmuggleFigures:
    """Try every write row with foreign opcodes and unknown keys; the figures."""
    figures = SmuggleFigures()
    with soak_rapi.rapi_cluster(workdir) as (vc, address):
        node = vc.master_node.name
        before = soak_rapi.job_serial(vc)
        # every {placeholder} of a route (test/tools/test_soak_rapi_routes.py checks)
        subst = {"node": node, "instance": "soak-nosuch", "group": "default", "job_id": "1",
                 "disk_index": "0", "resource": "instance", "network": "soak-nosuch",
                 "filter_uuid": "00000000-0000-0000-0000-000000000000",
                 "token_id": "soak-nosuch", "image": "soak-nosuch"}
        auth = rapi_fuzz._basic(*soak_rapi.WRITER)
        for route in resources.ROUTES:
            if not (route.needs_write or route.build is not None):
                continue
            figures.routes += 1
            path = re.sub(r"\{(\w+)\}", lambda m: subst[m.group(1)], route.path)
            for body in _bodies(route):
                data = json.dumps(body).encode()
                status = _one_status(address, route.method, path, data, auth)
                figures.requests += 1
                figures.statuses[status] += 1
                if status == 200:
                    figures.accepted.append(f"{route.method} {path} {data[:80]!r}")
        for accepted in figures.accepted[:10]:
            log(f"rapi-smuggle: accepted: {accepted}")
        figures.serial_unchanged = soak_rapi.job_serial(vc) == before
    return figures


def _one_status(address: tuple[str, int], method: str, path: str, data: bytes,
                auth: str) -> int:
    """The status ganeti-rapi answers one request with (0: no answer)."""
    conn = http.client.HTTPSConnection(*address, context=rapi_fuzz.client_context(),
                                       timeout=60)
    try:
        conn.request(method, path, body=data, headers={
            "Authorization": auth, "Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        conn.close()
