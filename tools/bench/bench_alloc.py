#!/usr/bin/env python3
"""Benchmark of the built-in allocator; prints figures, asserts nothing.

Decision time of one ``allocate`` and one ``node-evacuate`` request on a
made-up document with 200 nodes (2 groups) and 10,000 running
shared-storage instances (the target is under 0.5 s per decision), the
time to build the document itself (JSON text as an external allocator
gets it), and the same requests through upstream's ``hail`` when it is
installed (``--hail PATH`` or found in the iallocator search path).

Then, unless ``--no-vcluster``, the wall time of ``gnt-node evacuate`` of a
node running 50 diskless instances on a 3-node virtual cluster (the jobs
chain onto the other node of the group, so they run one after the other).

Run as ``.venv/bin/python tools/bench/bench_alloc.py [--nodes N] [--instances N]``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import argparse  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from ganeti import constants, luxi, serializer  # noqa: E402
from ganeti.iallocator import builtin, document  # noqa: E402
from ganeti.objects import default_ipolicy  # noqa: E402
from tools.harness import vcluster  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVAC_INSTANCES = 50

REPEAT = 5


def make_document(nodes: int, instances: int, seed: int = 1) -> dict[str, Any]:
    """Nodes of 256 GiB / 32 CPUs in two groups, instances of 512..4096 MiB spread over them."""
    rng = random.Random(seed)
    node_names = [f"node{k:03d}.example.com" for k in range(nodes)]
    free = {n: 262144 - 2048 for n in node_names}
    vcpus = dict.fromkeys(node_names, 0)
    insts: dict[str, Any] = {}
    for k in range(instances):
        name = f"inst{k:05d}.example.com"
        node = node_names[k % nodes]
        mem = rng.choice([512, 1024, 2048, 4096])
        free[node] -= mem
        vcpus[node] += 1
        insts[name] = {"nodes": [node], "memory": mem, "vcpus": 1, "spindle_use": 1,
                       "disk_template": "sharedfile", "disks": [{"size": 10240, "mode": "rw"}],
                       "disk_space_total": 0, "admin_state": "up", "tags": [], "os": "x",
                       "hypervisor": "kvm", "nics": [{"mac": "aa:00:00:00:00:01"}]}
    node_docs: dict[str, dict[str, Any]] = {}
    for k, name in enumerate(node_names):
        node_docs[name] = {
            "group": "g1" if k < nodes // 2 else "g2", "offline": False, "drained": False,
            "vm_capable": True, "master_candidate": k < 10, "master_capable": True,
            "tags": [], "primary_ip": f"10.0.{k // 256}.{k % 256}", "secondary_ip": "",
            "ndparams": {"spindle_count": 1, "exclusive_storage": False},
            "total_memory": 262144, "reserved_memory": 2048, "free_memory": free[name],
            "total_disk": 0, "free_disk": 0, "total_spindles": 1, "free_spindles": 1,
            "total_cpus": 32, "reserved_cpus": 0, "i_pri_memory": 0, "i_pri_up_memory": 0}
    groups: dict[str, dict[str, Any]] = {g: {"name": g, "alloc_policy": "preferred", "networks": [], "tags": [],
                  "ipolicy": default_ipolicy()} for g in ("g1", "g2")}
    return {"version": 2, "cluster_name": "bench", "cluster_tags": [],
            "enabled_hypervisors": ["kvm"], "ipolicy": default_ipolicy(),
            "nodegroups": groups, "nodes": node_docs, "instances": insts, "request": {}}


def _best(fn: Any) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _requests(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    first = sorted(doc["nodes"])[0]
    on_first = sorted(n for n, i in doc["instances"].items() if i["nodes"][0] == first)
    return {
        "allocate": document.allocate_request(
            name="new.example.com", disk_template="sharedfile", memory=2048, vcpus=2,
            disks=[{"size": 20480}], nics=[{"mac": "auto"}], os="x", hypervisor="kvm"),
        f"node-evacuate ({len(on_first)} instances)":
            document.node_evacuate_request(on_first, "all"),
    }


def _wait(cl: luxi.Client, ids: list[int], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while ids:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(ids)} jobs not finished after {timeout}s")
        rows = cl.QueryJobs(ids, ["id", "status"])
        bad = [j for j, st in rows if st in (constants.JOB_STATUS_ERROR,
                                               constants.JOB_STATUS_CANCELED)]
        if bad:
            raise RuntimeError(f"jobs failed: {bad}")
        ids = [j for j, st in rows if st not in constants.JOBS_FINALIZED]
        time.sleep(0.05)


def bench_vcluster_evacuation(count: int = EVAC_INSTANCES) -> float:
    """Seconds ``gnt-node evacuate`` takes to move ``count`` running instances off node1."""
    with tempfile.TemporaryDirectory(prefix="bench-alloc-") as tmp:
        directory = os.path.join(tmp, "vc")
        try:
            vc = vcluster.create(directory, 3, use_ssh=False)
            cl = luxi.Client(vc.paths(vc.master_node).master_socket)
            vc3 = vc.nodes[2].name
            first = vc.nodes[0].name
            subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gnt-group"), "add",
                            "spare"], env={**os.environ, **vcluster.node_env(vc, vc.master_node)},
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gnt-group"),
                            "assign-nodes", "spare", vc3],
                           env={**os.environ, **vcluster.node_env(vc, vc.master_node)},
                           check=True, stdout=subprocess.DEVNULL)
            # the virtual nodes have this machine's few CPUs: allow 50 vCPUs on each
            _wait(cl, [cl.SubmitJob([wire.cluster_set_params(ipolicy={"vcpu-ratio": 64.0})])])
            ops = [[wire.instance_create(instance_name=f"ev{k:03d}.example.com",
                                         disk_template="diskless", os_type="tinyos", pnode=first,
                                         no_install=True, name_check=False, ip_check=False,
                                         beparams={"maxmem": 128, "minmem": 128}, nics=[{}])]
                   for k in range(count)]
            _wait(cl, [int(v) for ok, v in cl.SubmitManyJobs(ops) if ok])
            start = time.perf_counter()
            res = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gnt-node"),
                                  "evacuate", "-f", first],
                                 env={**os.environ, **vcluster.node_env(vc, vc.master_node)},
                                 capture_output=True, text=True)
            took = time.perf_counter() - start
            if res.returncode != 0:
                raise RuntimeError(f"evacuate failed: {res.stdout[-2000:]}{res.stderr[-2000:]}")
            left = cl.Query("instance", ["pnode"], ["==", "pnode", first])["data"]
            if left:
                raise RuntimeError(f"{len(left)} instances still on {first}")
            return took
        finally:
            vcluster.destroy(directory)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--hail", default=None, help="path of upstream's hail")
    parser.add_argument("--hail-timeout", type=float, default=60.0,
                        help="seconds hail may take per request")
    parser.add_argument("--no-vcluster", action="store_true",
                        help="skip the evacuation on a virtual cluster")
    args = parser.parse_args()
    doc = make_document(args.nodes, args.instances)
    print(f"document: {args.nodes} nodes, {args.instances} instances")
    text = serializer.dumps({**doc, "request": _requests(doc)["allocate"]})
    print(f"  JSON text: {len(text) / 1e6:.1f} MB, encode {_best(lambda: serializer.dumps(doc)):.3f} s")
    hail = args.hail or shutil.which("hail") or next(
        (p for p in ("/usr/lib/ganeti/iallocators/hail", "/usr/local/lib/ganeti/iallocators/hail",
                     "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators/hail")
         if os.path.exists(p)), None)
    for label, request in _requests(doc).items():
        full = {**doc, "request": request}
        answer: dict[str, Any] = {}

        def run(full: dict[str, Any] = full) -> None:
            answer.update(builtin.allocate(full))
        seconds = _best(run)
        print(f"built-in {label}: {seconds:.3f} s per decision (best of {REPEAT});"
              f" {answer['info'][:90]}")
        if hail:
            with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
                fh.write(serializer.dumps(full))
                fh.flush()
                start = time.perf_counter()
                try:
                    res = subprocess.run([hail, fh.name], capture_output=True, text=True,
                                         timeout=args.hail_timeout)
                except subprocess.TimeoutExpired:
                    print(f"hail     {label}: more than {args.hail_timeout:.0f} s (stopped)")
                    continue
                took = time.perf_counter() - start
            info = (serializer.loads(res.stdout).get("info", "") if res.returncode == 0
                    else res.stderr.strip())
            print(f"hail     {label}: {took:.3f} s (exit {res.returncode}); {info[:90]}")
    if not hail:
        print("hail: not installed (upstream's htools package), not measured")
    if not args.no_vcluster:
        took = bench_vcluster_evacuation()
        print(f"vcluster: gnt-node evacuate of {EVAC_INSTANCES} running instances:"
              f" {took:.1f} s wall ({took / EVAC_INSTANCES * 1000:.0f} ms per instance)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
