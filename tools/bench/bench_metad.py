#!/usr/bin/env python3
"""Metadata service benchmark: ``ganeti-metad``'s server answering guests, in process.

A :class:`ganeti.server.metad.MetadServer` on loopback with N entries
(instances) in its directory; clients bound to the instances' loopback
addresses ask for ``/user-data`` one request per connection, as cloud-init
does: sequentially (latency per request) and from 8 threads at once
(requests per second), once the directory has settled.  Also the cost of a
request right after an entry was rewritten (the directory scanned, that
entry parsed again).  Prints figures, asserts nothing.
Run: ``.venv/bin/python tools/bench/bench_metad.py [N]`` (a few seconds).
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ganeti.http import framing  # noqa: E402
from ganeti.impexp import metadata  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.server import metad  # noqa: E402

DOCS = {"meta-data": 'instance-id: "u"\nlocal-hostname: "web"\n',
        "user-data": "#cloud-config\n" + "packages:\n" + "".join(f"  - p{i}\n" for i in range(50)),
        "network-config": "version: 2\nethernets: {}\n"}


def _address(i: int) -> str:
    return f"127.0.{10 + i // 250}.{1 + i % 250}"


def _write(paths: Paths, i: int) -> None:
    """As the node daemon writes an entry: a new file renamed over the old."""
    path = paths.metadata_entry(f"web{i}")
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        fh.write(metadata.entry_text(f"web{i}", f"u{i}", [_address(i)], DOCS))
    os.replace(path + ".tmp", path)


def _get(server: tuple[str, int], source: str) -> int:
    with socket.socket() as sock:
        sock.bind((source, 0))
        sock.connect(server)
        sock.sendall(framing.build_request("GET", "/user-data"))
        parser = framing.ResponseParser(request_method="GET")
        while (resp := parser.next_response()) is None:
            data = sock.recv(65536)
            parser.feed(data) if data else parser.feed_eof()
        return resp.status


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    with tempfile.TemporaryDirectory() as top:
        paths = Paths(root=top)
        os.makedirs(paths.metadata_dir)
        for i in range(count):
            _write(paths, i)
        srv = metad.MetadServer(("127.0.0.1", 0), paths)
        thread = threading.Thread(target=srv.serve, daemon=True)
        thread.start()
        try:
            address = srv.server_address
            # the directory settles (a just-changed one is scanned at every request)
            time.sleep(metad.EntryCache.SETTLE_NS / 1e9 + 0.2)
            _get(address, _address(0))      # warm the cache
            n = 500
            start = time.perf_counter()
            for k in range(n):
                assert _get(address, _address(k % count)) == 200
            seq = (time.perf_counter() - start) / n
            start = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                statuses = list(pool.map(lambda k: _get(address, _address(k % count)),
                                         range(2000)))
            par = 2000 / (time.perf_counter() - start)
            assert set(statuses) == {200}
            start = time.perf_counter()
            for k in range(100):
                _write(paths, k % count)
                _get(address, _address(k % count))
            changed = (time.perf_counter() - start) / 100
        finally:
            srv.shutdown()
            srv.server_close()
    print(f"{count} entries: {seq * 1000:.2f} ms per request (sequential),"
          f" {par:.0f} requests/s (8 clients), {changed * 1000:.2f} ms with the entry"
          " rewritten before each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
