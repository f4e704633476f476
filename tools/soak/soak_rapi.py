"""The ``rapi`` soak scenario: a long fuzz loop of malformed requests against ganeti-rapi.

A one-node virtual cluster (``tools/vcluster``, ``use_ssh=False``) with a
users file; then ``--rapi-requests`` cases from test/integration/rapi_fuzz.py
over TLS, at most ``--rapi-time-limit`` seconds, checking every answer as
the suite does.  Afterwards the daemon must still answer ``GET /version``
with 2, and the job serial must not have moved.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import rapi_fuzz

from tools.harness import vcluster

_USERS = "writer wpass write\nreader rpass read\n"
#: the write user of the users file (name, password)
WRITER = ("writer", "wpass")


@dataclass
class RapiFigures:
    """Counts of the fuzz loop and what went wrong."""

    requested: int
    sent: int = 0
    connections: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    stopped_early: bool = False
    alive_after: bool = False
    serial_unchanged: bool = False
    seconds: float = 0.0

    def failed(self) -> bool:
        return bool(self.failures) or not self.alive_after or not self.serial_unchanged

    def line(self) -> str:
        rate = self.sent / self.seconds if self.seconds else 0.0
        return (f"rapi: sent={self.sent}/{self.requested} connections={self.connections}"
                f" rate={rate:.0f}/s bad_answers={len(self.failures)}"
                f" statuses={','.join(f'{k}:{v}' for k, v in sorted(self.statuses.items()))}"
                f" alive_after={self.alive_after} serial_unchanged={self.serial_unchanged}"
                + (" stopped_early" if self.stopped_early else ""))


def job_serial(vc: vcluster.VCluster) -> str:
    """The master's job queue serial (it moves with every submitted job)."""
    with open(vc.paths(vc.master_node.name).queue_serial_file) as fh:
        return fh.read().strip()


def _probe(address: tuple[str, int], data: bytes) -> int:
    """The status of one request (0 when the answer was broken or missing)."""
    fuzzer = rapi_fuzz.Fuzzer(address)
    fuzzer.send(rapi_fuzz.Case("probe", data, frozenset({200})))
    fuzzer.close()
    return 200 if not fuzzer.failures else 0


def _wait_users(address: tuple[str, int], tries: int = 100) -> None:
    """Wait until the daemon's inotify watch has loaded the users file."""
    auth = rapi_fuzz._basic("reader", "rpass")
    for _ in range(tries):
        if _probe(address, f"GET /2/features HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}"
                           "\r\n\r\n".encode()) == 200:
            return
        time.sleep(0.05)
    raise RuntimeError("the RAPI daemon did not load the users file")


@contextlib.contextmanager
def rapi_cluster(workdir: str) -> Iterator[tuple[vcluster.VCluster, tuple[str, int]]]:
    """A one-node virtual cluster whose ganeti-rapi has the users of :data:`_USERS`
    loaded; the cluster and the daemon's address.  Destroyed afterwards."""
    directory = os.path.join(workdir, "vc")
    vc = vcluster.create(directory, 1, use_ssh=False)
    try:
        node = vc.master_node.name
        address = (vc.master_node.ip, vc.rapi_port or 0)
        users = vc.paths(node).rapi_users_file
        os.makedirs(os.path.dirname(users), exist_ok=True)
        with open(users + ".tmp", "w") as fh:
            fh.write(_USERS)
        os.chmod(users + ".tmp", 0o600)
        os.replace(users + ".tmp", users)
        _wait_users(address)
        yield vc, address
    finally:
        vcluster.destroy(directory)


def run_rapi_fuzz(workdir: str, *, requests: int, rng: random.Random, time_limit: float,
                  log: Any = print) -> RapiFigures:
    """Send ``requests`` malformed requests to a real ganeti-rapi; the figures."""
    figures = RapiFigures(requested=requests)
    with rapi_cluster(workdir) as (vc, address):
        node = vc.master_node.name
        before = job_serial(vc)
        fuzzer = rapi_fuzz.Fuzzer(address)
        started = time.monotonic()
        cases = rapi_fuzz.generate(rng, node=node, reader=("reader", "rpass"),
                                   writer=("writer", "wpass"))
        figures.stopped_early = not fuzzer.run(cases, requests, time_limit)
        figures.seconds = time.monotonic() - started
        figures.sent, figures.connections = fuzzer.sent, fuzzer.connections
        figures.statuses.update(fuzzer.statuses)
        figures.failures = fuzzer.failures
        for failure in fuzzer.failures[:10]:
            log(f"rapi: bad answer: {failure[:300]}")
        figures.alive_after = _probe(address, b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n") == 200
        figures.serial_unchanged = job_serial(vc) == before
    return figures
