#!/usr/bin/env python3
"""Installs from the OS image store: pushed to a node vs taken from its cache.

A 2-node virtual cluster; a 64 MiB raw image of random data (incompressible)
is added to the store (``gnt-os image add``), then ``RUNS`` instances with a
72 MiB ``file`` disk are installed from it on the second node, each
``gnt-instance add --os-image NAME`` timed whole (job included): the first
pushes the image over node RPC, the others take the node's cached copy
(doc/images.md, "The image store").  Printed: the add to the store, the
pushed install, the median of the cached ones, and ``dd`` of the image for
comparison.

Run: ``.venv/bin/python tools/bench/bench_image_store.py`` (about 40 s).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from tools.harness import vcluster  # noqa: E402

MIB = 1024 * 1024
IMAGE_MIB = 64
RUNS = 4


def _gnt(vc: vcluster.VCluster, *argv: str) -> float:
    env = {**os.environ, **vcluster.node_env(vc, vc.master_node)}
    started = time.perf_counter()
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", argv[0]), *argv[1:]],
                   env=env, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-imgstore-") as tmp:
        image = os.path.join(tmp, "bench.raw")
        data = bytearray(os.urandom(IMAGE_MIB * MIB))
        data[510:512] = b"\x55\xaa"
        with open(image, "wb") as fh:
            fh.write(data)
        started = time.perf_counter()
        subprocess.run(["dd", f"if={image}", f"of={image}.copy", "bs=4M", "conv=fsync"],
                       check=True, capture_output=True)
        dd_s = time.perf_counter() - started
        directory = os.path.join(tmp, "vc")
        try:
            vc = vcluster.create(directory, 2, use_ssh=False)
            node2 = vc.nodes[1].name
            add_s = _gnt(vc, "gnt-os", "image", "add", "bench", image)
            times = [_gnt(vc, "gnt-instance", "add", "-t", "file", "--disk", "0:size=72M",
                          "-n", node2, "--no-start", "--no-name-check", "--no-ip-check",
                          "--os-image", "bench", f"img{i}.example.com") for i in range(RUNS)]
        finally:
            vcluster.destroy(directory)
    cached = statistics.median(times[1:])
    print(f"gnt-os image add of {IMAGE_MIB} MiB (a master's file): {add_s:.2f} s")
    print(f"install, image pushed to the node: {times[0]:.2f} s")
    print(f"install, node's cached copy (median of {RUNS - 1}): {cached:.2f} s")
    print(f"dd bs=4M conv=fsync of the image: {dd_s:.2f} s")
    print(f"(load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
