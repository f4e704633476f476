#!/usr/bin/env python3
"""Node RPC benchmark: round trip, fan-out to 10 and 50 nodes, fork cost.

Starts 50 real ganeti-noded processes on 127.0.1.1..50 (idle between
calls), then measures with the real HTTPS transport:

* ``version`` round trip to one node (median of 50);
* fan-out of ``version`` to 10 and to 50 nodes (median of 15);
* cost per forked request: 200 sequential requests to one node, and the
  share of that which is the TLS handshake + HTTP (measured against an
  in-process threaded TLS server answering the same bytes without forking).

Run: ``.venv/bin/python tools/bench/bench_rpc.py`` (about 20 s).
"""

from __future__ import annotations

import os
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

from ganeti.rpc.transport import HttpsTransport  # noqa: E402
from ganeti.server.noded import make_server_context  # noqa: E402
from noded_harness import NodedCluster  # noqa: E402

NODES = 50


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _time(fn, count: int) -> list[float]:
    out = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _threaded_tls_baseline(cert_file: str, count: int) -> float:
    """Median ms of one TLS request against a non-forking in-process server."""
    ctx = make_server_context(cert_file)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n"
             b"Connection: close\r\n\r\n[true, 3000000]")
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = tls.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    while len(body) < length:
                        body += tls.recv(4096)
                    tls.sendall(reply)
            except (OSError, ssl.SSLError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    transport = HttpsTransport(cert_file)
    try:
        samples = _time(lambda: transport.post("127.0.0.1", port, "version", b"[]", 5), count)
    finally:
        stop.set()
        listener.close()
    return _median_ms(samples)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-rpc-") as tmp:
        start = time.perf_counter()
        with NodedCluster(tmp, NODES, ready_timeout=120) as cluster:
            print(f"started {NODES} node daemons in {time.perf_counter() - start:.1f} s")
            runner = cluster.runner()
            names = cluster.names
            one = names[:1]
            for _ in range(5):
                runner.call_version(one)
            rt = _time(lambda: runner.call_version(one), 50)
            print(f"version round trip, 1 node:   median {_median_ms(rt):6.1f} ms"
                  f"  (min {min(rt) * 1000:.1f}, max {max(rt) * 1000:.1f})")
            for count in (10, 50):
                subset = names[:count]
                results = runner.call_version(subset)
                failed = [r.fail_msg for r in results.values() if r.failed]
                if failed:
                    print(f"fan-out to {count}: FAILURES {failed[:3]}")
                    return 1
                samples = _time(lambda: runner.call_version(subset), 15)
                print(f"version fan-out, {count:2d} nodes:  median {_median_ms(samples):6.1f} ms"
                      f"  (max {max(samples) * 1000:.1f})  target < 500 ms")
            seq = 200
            start = time.perf_counter()
            for _ in range(seq):
                runner.call_version(one)
            per_request = (time.perf_counter() - start) / seq * 1000
            baseline = _threaded_tls_baseline(cluster.cert_file, 100)
            print(f"forked request, sequential:    {per_request:6.2f} ms per request")
            print(f"same exchange, no fork (threaded in-process TLS server): {baseline:6.2f} ms"
                  f" -> fork + child cost ~{max(per_request - baseline, 0):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
