#!/usr/bin/env python3
"""The ``plain`` (LVM) template on a guest cluster (doc/storage.md, "Figures").

Creates a 3-node guest cluster (doc/vcluster.md, "Guest clusters") whose
nodes have two data disks each, and prints:

* the create and the remove rate of ``COUNT`` (default 20) instances
  submitted at once as parallel jobs (``SubmitManyJobs``, one opcode per
  job, from one Python process on the master), for ``plain`` and, as the
  reference, ``file`` (64 MiB disks, no OS install);
* sequential write throughput, ``dd if=/dev/zero bs=1M count=256
  oflag=direct`` inside node2, onto a ``plain`` disk (its logical volume),
  a ``file`` disk (its file), and the guest's raw virtio disk (the second
  data disk, taken out of the volume group first: the physical limit here).

The guests run under TCG on this machine (KVM does not boot them), so
every figure is bound by emulated CPUs; compare them with each other.
Figures only; no assertion.  Needs root; says why and exits 0 otherwise.

Run: ``.venv/bin/python tools/bench/bench_plain.py [COUNT]`` (5-10 minutes).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti.utils.process import RunResult  # noqa: E402
from tools.harness import guestcluster, guestvm  # noqa: E402

DD_MIB = 256

#: runs on the master (``python3 -``): submit the jobs at once, wait, print seconds
_RATE_SCRIPT = r'''
import json, sys, time
from ganeti import constants, luxi
from ganeti.opcodes import wire
count, template, nodes = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
names = [f"bench-{template}-{k}.vcluster" for k in range(count)]
cl = luxi.Client()

def run(ops):
    started = time.perf_counter()
    ids = []
    for ok, value in cl.SubmitManyJobs([[op] for op in ops]):
        if not ok:
            raise SystemExit(f"submit failed: {value}")
        ids.append(int(value))
    pending = ids
    while pending:
        statuses = cl.QueryJobs(pending, ["id", "status"])
        bad = [jid for jid, status in statuses if status in ("error", "canceled")]
        if bad:
            raise SystemExit(f"job {bad[0]} failed: {cl.QueryJobs(bad[:1], ['opresult'])}")
        pending = [jid for jid, status in statuses if status not in constants.JOBS_FINALIZED]
        time.sleep(0.1)
    return time.perf_counter() - started

create = run([wire.instance_create(
    instance_name=name, disk_template=template, os_type="tinyos", pnode=nodes[k % len(nodes)],
    start=False, no_install=True, name_check=False, ip_check=False,
    disks=[{"size": 64}], nics=[{}]) for k, name in enumerate(names)])
remove = run([wire.instance_remove(instance_name=name) for name in names])
print(json.dumps({"create": create, "remove": remove}))
'''


def _ok(res: RunResult, what: str) -> str:
    if res.failed:
        raise RuntimeError(f"{what} failed: {res.fail_reason}: {res.stdout}{res.stderr}")
    return res.stdout


def _rates(gc: guestcluster.GuestCluster, count: int, template: str) -> dict[str, float]:
    master = guestcluster.current_master(gc).name
    out = _ok(guestcluster.run_on(gc, master, ["python3", "-", str(count), template,
                                               "node2.vcluster,node3.vcluster"],
                                  timeout=1800, input_data=_RATE_SCRIPT), f"{template} jobs")
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def _dd(gc: guestcluster.GuestCluster, node: str, target: str) -> float:
    """MiB/s of a direct sequential write of DD_MIB MiB onto ``target`` on ``node``."""
    err = _ok(guestcluster.run_on(
        gc, node, f"dd if=/dev/zero of={target} bs=1M count={DD_MIB} oflag=direct"
                  " conv=notrunc 2>&1 >/dev/null", timeout=900), f"dd to {target}")
    match = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", err)
    if not match:
        raise RuntimeError(f"unexpected dd output: {err}")
    return int(match.group(1)) / float(match.group(2)) / 2**20


def _disk_path(gc: guestcluster.GuestCluster, instance: str) -> str:
    """The node-side path of the instance's first disk (``activate-disks``)."""
    out = _ok(guestcluster.run_gnt(gc, ["gnt-instance", "activate-disks", instance]),
              "activate-disks")
    # node2.vcluster:disk/0:/dev/xenvg/...
    return out.strip().splitlines()[-1].rsplit(":", 1)[1]


def _add(gc: guestcluster.GuestCluster, name: str, template: str) -> None:
    _ok(guestcluster.run_gnt(gc, ["gnt-instance", "add", "-t", template, "-o", "tinyos",
                                  "--disk", f"0:size={DD_MIB}m", "-n", "node2.vcluster",
                                  "--no-start", "--no-install", "--no-name-check",
                                  "--no-ip-check", name]), f"add {name}")


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 20
    why = guestvm.network_support()
    if why:
        print(f"skipped: {why}")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-plain-") as tmp:
        directory = os.path.join(tmp, "gc")
        started = time.monotonic()
        try:
            gc = guestcluster.create(directory, 3, disk_count=2)
            print(f"guest cluster (3 nodes, {gc.accel.upper()}) ready in"
                  f" {time.monotonic() - started:.1f}s")
            for template in ("plain", "file"):
                rates = _rates(gc, count, template)
                print(f"{template:5}: {count} creations in {rates['create']:.1f}s"
                      f" ({count / rates['create']:.2f}/s), {count} removals in"
                      f" {rates['remove']:.1f}s ({count / rates['remove']:.2f}/s)")
            _add(gc, "dd-plain.vcluster", "plain")
            _add(gc, "dd-file.vcluster", "file")
            vg = gc.vg_name
            _ok(guestcluster.run_on(gc, "node2", f"vgreduce {vg} /dev/vdc && pvremove -q"
                                                 " /dev/vdc"), "freeing /dev/vdc")
            figures = {
                "raw virtio disk (/dev/vdc)": _dd(gc, "node2", "/dev/vdc"),
                "plain disk (its LV)": _dd(gc, "node2", _disk_path(gc, "dd-plain.vcluster")),
                "file disk (its file)": _dd(gc, "node2", _disk_path(gc, "dd-file.vcluster")),
            }
            raw = figures["raw virtio disk (/dev/vdc)"]
            for what, mib_s in figures.items():
                print(f"dd {DD_MIB} MiB, oflag=direct, onto the {what}: {mib_s:.1f} MiB/s"
                      f" ({mib_s / raw:.2f}x the raw disk)")
        finally:
            guestcluster.destroy(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
