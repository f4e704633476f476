"""ganeti-rapi over TLS against 2,000 generated malformed requests, and /2/openapi.json.

Every answer must be a well-formed HTTP response with one of the statuses
the case allows (rapi_fuzz.py), a Ganeti error body and no traceback; the
daemon must still answer ``GET /version`` afterwards and the job serial
must not move.  The generator is seeded (``RAPI_FUZZ_SEED`` repeats a run).
"""

from __future__ import annotations

import base64
import json
import os
import random

import pytest
import rapi_fuzz
from vcluster_harness import VirtualCluster

from ganeti.rapi import openapi, resources

pytestmark = pytest.mark.timeout(600)

N1 = "node1.vcluster"
USERS = "writer wpass write\nreader rpass read\n"
COUNT = 2000
TIME_LIMIT = 300.0


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcf"), nodes=1, use_ssh=False) as cluster:
        path = cluster.paths(N1).rapi_users_file
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as fh:
            fh.write(USERS)
        os.chmod(path + ".tmp", 0o600)
        os.replace(path + ".tmp", path)
        yield cluster


def _address(vc) -> tuple[str, int]:
    return vc.cluster.master_node.ip, vc.cluster.rapi_port


def _get(vc, path: str, auth: tuple[str, str] | None = None) -> rapi_fuzz.Answer:
    headers = "Host: x\r\nConnection: close\r\n"
    if auth:
        headers += "Authorization: Basic " + base64.b64encode(
            ":".join(auth).encode()).decode() + "\r\n"
    fuzzer = rapi_fuzz.Fuzzer(_address(vc))
    sock = fuzzer._connect()
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\n{headers}\r\n".encode())
        return rapi_fuzz._read_answer(fuzzer._fh, head=False)
    finally:
        fuzzer.close()


def _serial(vc) -> str:
    with open(vc.paths(N1).queue_serial_file) as fh:
        return fh.read().strip()


def _wait_users(vc) -> None:
    for _ in range(100):
        if _get(vc, "/2/features", auth=("reader", "rpass")).status == 200:
            return
    raise AssertionError("users file not loaded")


def test_openapi_served_over_tls(vc):
    answer = _get(vc, "/2/openapi.json")
    assert answer.status == 200 and answer.headers["content-type"] == "application/json"
    assert json.loads(answer.body) == json.loads(json.dumps(openapi.document(resources.ROUTES)))


def test_fuzz_malformed_requests(vc):
    _wait_users(vc)
    seed = int(os.environ.get("RAPI_FUZZ_SEED") or random.SystemRandom().randrange(2 ** 32))
    before = _serial(vc)
    cases = rapi_fuzz.generate(random.Random(seed), node=N1, reader=("reader", "rpass"),
                               writer=("writer", "wpass"))
    fuzzer = rapi_fuzz.Fuzzer(_address(vc))
    finished = fuzzer.run(cases, COUNT, TIME_LIMIT)
    report = f"seed {seed}: {fuzzer.sent} sent, statuses {sorted(fuzzer.statuses.items())}"
    assert fuzzer.failures == [], report + "\n" + "\n".join(fuzzer.failures[:20])
    assert finished and fuzzer.sent == COUNT, report
    assert fuzzer.connections < COUNT, report     # some connections were reused
    assert _get(vc, "/version").body == b"2"
    assert _serial(vc) == before
