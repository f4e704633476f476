#!/usr/bin/env python3
"""ganeti-rapi latency on a 3-node virtual cluster, one request per HTTPS connection.

Figures (issue 11), each a new TLS connection per request as upstream was
measured (curl):

* ``GET /2/info``, median of 20 sequential requests;
* 50 concurrent clients doing ``GET /2/info`` (5 requests each): median
  and 95th percentile latency, requests/s;
* ``GET /2/instances?bulk=1`` with 100, 500 and 1000 diskless fake
  instances (written to the config with ConfigWriter while masterd is
  stopped, as bench_instances.py does), median of 5;
* ``POST /2/instances`` (a diskless, not started, no-install create) until
  the job id arrives, median of 5.

Upstream Ganeti 3.0.2: 0.060 s, 0.112 s and 0.182 s.  Targets: /2/info
< 0.015 s, bulk <= 0.02 s at 100, < 0.1 s at 500 and <= 0.15 s at 1000
instances (issue 33).

Run: ``.venv/bin/python tools/bench/bench_rapi.py`` (about 30 s).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import constants  # noqa: E402
from tools.harness import vcluster  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import fill_config  # noqa: E402

RUNS = 5
INFO_RUNS = 20
CLIENTS = 50
PER_CLIENT = 5
AUTH = "Basic " + base64.b64encode(b"bench:benchpass").decode()


def _tls() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _request(address: tuple[str, int], ctx: ssl.SSLContext, method: str, path: str,
             body: Any = None) -> tuple[float, Any]:
    """One request on a new connection; (seconds, decoded result)."""
    started = time.perf_counter()
    conn = http.client.HTTPSConnection(*address, context=ctx, timeout=60)
    headers = {"Authorization": AUTH}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read()
    finally:
        conn.close()
    elapsed = time.perf_counter() - started
    if resp.status != 200:
        raise RuntimeError(f"{method} {path}: {resp.status} {text[:200]!r}")
    return elapsed, json.loads(text)


def _median(address, ctx, method: str, path: str, runs: int = RUNS) -> float:
    return statistics.median(_request(address, ctx, method, path)[0] for _ in range(runs))


def _concurrent(address, ctx) -> tuple[float, float, float]:
    """50 threads, 5 GET /2/info each: (median, p95, requests/s)."""
    samples: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client() -> None:
        start.wait()
        for _ in range(PER_CLIENT):
            elapsed, _ = _request(address, ctx, "GET", "/2/info")
            with lock:
                samples.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    if len(samples) != CLIENTS * PER_CLIENT:
        raise RuntimeError("some concurrent requests failed")
    samples.sort()
    return (statistics.median(samples), samples[int(len(samples) * 0.95) - 1],
            len(samples) / wall)




def _write_users(vc: vcluster.VCluster) -> None:
    path = vc.paths(vc.master_node.name).rapi_users_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as fh:
        fh.write("bench benchpass write\n")
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)


def _wait_ready(address, ctx) -> None:
    for _ in range(200):
        try:
            _request(address, ctx, "GET", "/2/instances")
            _request(address, ctx, "PUT", "/2/tags?tag=bench&dry-run=1")
            return
        except (RuntimeError, OSError):
            time.sleep(0.05)
    raise RuntimeError("RAPI not ready")


def main() -> int:
    figures: dict[str, float] = {}
    ctx = _tls()
    with tempfile.TemporaryDirectory(prefix="bench-rapi-") as tmp:
        directory = os.path.join(tmp, "vc")
        try:
            vc = vcluster.create(directory, 3, use_ssh=False)
            _write_users(vc)
            address = (vc.master_node.ip, vc.rapi_port or constants.DEFAULT_RAPI_PORT)
            fill_config(vc, 100)
            _wait_ready(address, ctx)
            _median(address, ctx, "GET", "/2/info", 3)          # warm up
            figures["info"] = _median(address, ctx, "GET", "/2/info", INFO_RUNS)
            figures["conc_median"], figures["conc_p95"], figures["conc_rate"] = \
                _concurrent(address, ctx)
            _, rows = _request(address, ctx, "GET", "/2/instances?bulk=1")
            assert len(rows) == 100, len(rows)
            figures["bulk_100"] = _median(address, ctx, "GET", "/2/instances?bulk=1")
            samples = []
            for i in range(RUNS):
                body = {"__version__": 1, "name": f"post{i}.example.com", "os": "tinyos",
                        "mode": "create", "disk_template": "diskless", "disks": [],
                        "nics": [{}], "pnode": vc.nodes[1].name, "name_check": False,
                        "ip_check": False, "start": False, "no_install": True}
                elapsed, job_id = _request(address, ctx, "POST", "/2/instances", body)
                assert isinstance(job_id, int)
                samples.append(elapsed)
            figures["post"] = statistics.median(samples)
            fill_config(vc, 500)
            _wait_ready(address, ctx)
            _, rows = _request(address, ctx, "GET", "/2/instances?bulk=1")
            assert len(rows) >= 500, len(rows)
            figures["bulk_500"] = _median(address, ctx, "GET", "/2/instances?bulk=1")
            fill_config(vc, 1000)
            _wait_ready(address, ctx)
            _, rows = _request(address, ctx, "GET", "/2/instances?bulk=1")
            assert len(rows) >= 1000, len(rows)
            figures["bulk_1000"] = _median(address, ctx, "GET", "/2/instances?bulk=1")
        finally:
            vcluster.destroy(directory)
    print(f"GET /2/info, one request per connection, median of {INFO_RUNS}: "
          f"{figures['info']:.4f} s (target < 0.015; upstream 0.060)")
    print(f"GET /2/info, {CLIENTS} concurrent clients x {PER_CLIENT}: median "
          f"{figures['conc_median']:.4f} s, p95 {figures['conc_p95']:.4f} s, "
          f"{figures['conc_rate']:.0f} requests/s")
    print(f"GET /2/instances?bulk=1, 100 instances, median of {RUNS}: "
          f"{figures['bulk_100']:.4f} s (target <= 0.02; upstream 0.112)")
    print(f"GET /2/instances?bulk=1, 500 instances, median of {RUNS}: "
          f"{figures['bulk_500']:.4f} s (target < 0.1; upstream 0.182)")
    print(f"GET /2/instances?bulk=1, 1000 instances, median of {RUNS}: "
          f"{figures['bulk_1000']:.4f} s (target <= 0.15)")
    print(f"POST /2/instances to job id, median of {RUNS}: {figures['post']:.4f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
