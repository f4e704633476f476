#!/usr/bin/env python3
"""JSON codecs on the project's own documents (prints figures, asserts nothing).

The documents are built with the project's code, as the writers make them:

* ``config.data``: a ConfigWriter with 10 nodes and 1,000 instances (two
  plain disks, one NIC, custom hv/be parameters, tags each), serialised by
  ``ConfigWriter.dump()``, which is what ``config.py`` writes;
* a job file: a finished ``OP_INSTANCE_CREATE`` job with 40 log entries, as
  ``jqueue`` writes ``queue/job-<id>`` (``job_to_disk``);
* a LUXI ``Query`` reply for the 1,000 instances (12 static fields), framed
  by ``luxi.encode_response``;
* an RPC request body (``instance_start``: the instance, its disks) and a
  reply body (``all_instances_info`` of 100 instances), as the RPC client
  and the node daemon encode them.

Each codec encodes the plain data (compact, ASCII, keys in insertion order,
as on disk and on the wire) and decodes the bytes: the standard ``json``
(also with ``sort_keys`` and ``indent``), ``simplejson`` with its C
speedups, ``orjson`` and ``ganeti.serializer`` itself; a codec that is not
importable is skipped.  Figures are the best of several runs (ms).  Then
the project's own paths (dataclass encode, the config fragment cache,
config load with ``from_data``) and the import time of each codec in a
fresh interpreter (best of 9).

    .venv/bin/python tools/bench/bench_json.py     (about 30 s)
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ganeti import constants, luxi, opcodes, parameters, serializer  # noqa: E402
from ganeti.cmdlib import query as cmdlib_query  # noqa: E402
from ganeti.config import ConfigWriter  # noqa: E402
from ganeti.context import MasterContext  # noqa: E402
from ganeti.jqueue.job import QueuedJob, QueuedOpCode, job_to_disk, split_time  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402
from ganeti.objects import NIC, Cluster, ConfigData, Disk, Instance, Node, NodeGroup  # noqa: E402
from ganeti.rpc import client as rpc_client  # noqa: E402
from ganeti.rpc import defs as rpc_defs  # noqa: E402
from ganeti.opcodes import wire  # noqa: E402

INSTANCES = 1000
NODES = 10
QUERY_FIELDS = ["name", "os", "pnode", "snodes", "admin_state", "be/maxmem", "be/vcpus",
                "disk_template", "disk.sizes", "nic.macs", "tags", "mtime"]

Codec = tuple[str, Callable[[Any], bytes], Callable[[bytes], Any]]


# --- documents ----------------------------------------------------------------

def _config(tmp: str) -> ConfigWriter:
    hvs = [constants.HT_KVM, constants.HT_FAKE]
    cluster = Cluster(
        cluster_name="cluster.example.com", uuid="uuid-cluster", master_node="uuid-node1",
        master_ip="192.0.2.254", master_netdev="eth0", enabled_hypervisors=hvs,
        enabled_disk_templates=[constants.DT_PLAIN, constants.DT_DISKLESS],
        volume_group_name="xenvg",
        hvparams={hv: parameters.defaults("hv", hv) for hv in hvs},
        beparams={"default": parameters.defaults("be")},
        nicparams={"default": parameters.defaults("nic")},
        ndparams=parameters.defaults("nd"))
    group = NodeGroup(name="default", uuid="uuid-group")
    nodes = {f"uuid-node{i}": Node(name=f"node{i}.example.com", uuid=f"uuid-node{i}",
                                   primary_ip=f"192.0.2.{i}", secondary_ip=f"198.51.100.{i}",
                                   group=group.uuid, master_candidate=i <= 3)
             for i in range(1, NODES + 1)}
    path = os.path.join(tmp, "config.data")
    cfg = ConfigWriter.initialize(path, ConfigData(cluster=cluster, nodes=nodes,
                                                   nodegroups={group.uuid: group}),
                                  write_fn=lambda path, raw: None)
    with cfg.batch():
        for idx in range(INSTANCES):
            name = f"inst{idx:04d}.example.com"
            disks = [Disk(uuid=f"uuid-disk{idx}-{d}", dev_type=constants.DT_PLAIN,
                          size=10240 * (d + 1), logical_id=["xenvg", f"uuid-disk{idx}-{d}.disk{d}"],
                          iv_name=f"disk/{d}", nodes=[f"uuid-node{idx % NODES + 1}"])
                     for d in range(2)]
            inst = Instance(
                name=name, uuid=f"uuid-inst{idx}", primary_node=f"uuid-node{idx % NODES + 1}",
                os="debootstrap+default", hypervisor=constants.HT_KVM,
                disk_template=constants.DT_PLAIN, admin_state=constants.ADMINST_UP,
                nics=[NIC(mac=f"aa:00:00:{idx >> 8 & 255:02x}:{idx & 255:02x}:01",
                          ip=f"10.0.{idx >> 8}.{idx & 255}", nicparams={"link": "br0"})],
                hvparams={"kernel_path": "", "serial_console": True},
                beparams={"maxmem": 1024 * (1 + idx % 4), "vcpus": 1 + idx % 2},
                network_port=11000 + idx, tags=["web", f"rack{idx % 7}"])
            cfg.add_instance(inst, disks)
    return cfg


def _job_file() -> dict[str, Any]:
    op = opcodes.from_dict(wire.instance_create(instance_name="inst0001.example.com", mode="create",
                                                os_type="debootstrap+default",
                                                disk_template="plain",
                                                disks=[{"size": 10240}, {"size": 20480}],
                                                nics=[{"mac": "auto"}], beparams={"maxmem": 2048},
                                                pnode="node1.example.com", tags=["web"]))
    qop = QueuedOpCode.from_opcode(op)
    job = QueuedJob(id=12345, ops=[qop], received_timestamp=split_time(1700000000.25))
    now = 1700000001.0
    for idx in range(40):
        job.add_log(now + idx, "message", f" - INFO: step {idx}: creating disk/{idx % 2}"
                    " on node1.example.com (volume xenvg/uuid-disk1-0.disk0)", 0)
    qop.status = constants.OP_STATUS_SUCCESS
    qop.result = ["node1.example.com"]
    qop.start_timestamp = qop.exec_timestamp = split_time(now)
    qop.end_timestamp = job.end_timestamp = split_time(now + 42.5)
    job.start_timestamp = split_time(now)
    return job_to_disk(job)


def _query_reply(cfg: ConfigWriter, root: str) -> bytes:
    """The LUXI answer to a ``Query`` of ``QUERY_FIELDS`` of every instance (no
    live field: no node is asked), as the master daemon builds it."""
    context = MasterContext(paths=Paths(root=root), cfg=cfg)
    result = cmdlib_query.run_query(context, constants.QR_INSTANCE, QUERY_FIELDS, None)
    frame = luxi.encode_response(True, result)
    return frame[:-len(luxi.ETX)]   # the message; the ETX byte only ends it on the socket


def _rpc_bodies(cfg: ConfigWriter) -> tuple[bytes, bytes]:
    inst = cfg.get_instance_info("uuid-inst7")
    assert inst is not None
    disks = cfg.get_instance_disks(inst.uuid)
    request = rpc_client.encode_args(rpc_defs.CALLS["instance_start"],
                                     [serializer.to_data(inst), serializer.to_data(disks), False])
    info = {f"inst{i:04d}.example.com": {"memory": 1024, "vcpus": 1, "state": 0,
                                         "time": 12345.67 + i, "hv_state": "running"}
            for i in range(100)}
    return request, serializer.dumps_bytes([True, info])


# --- codecs ---------------------------------------------------------------------

def _codecs() -> list[Codec]:
    out: list[Codec] = []
    import json
    compact = json.JSONEncoder(separators=(",", ":"))
    indented = json.JSONEncoder(indent=1, sort_keys=True)
    out.append(("json (stdlib, compact)", lambda o: compact.encode(o).encode(), json.loads))
    sorted_enc = json.JSONEncoder(separators=(",", ":"), sort_keys=True)
    out.append(("json sort_keys", lambda o: sorted_enc.encode(o).encode(), json.loads))
    out.append(("json indent=1 sort_keys", lambda o: indented.encode(o).encode(), json.loads))
    try:
        import simplejson
    except ImportError:
        pass
    else:
        speedups = importlib.util.find_spec("simplejson._speedups") is not None
        sj = simplejson.JSONEncoder(separators=(",", ":"))
        version = importlib.metadata.version("simplejson")
        out.append((f"simplejson {version} (C speedups {'on' if speedups else 'OFF'})",
                    lambda o: sj.encode(o).encode(), simplejson.loads))
    try:
        import orjson
    except ImportError:
        pass
    else:
        out.append((f"orjson {orjson.__version__}", orjson.dumps, orjson.loads))
    out.append(("ganeti.serializer", serializer.dumps_bytes, serializer.loads))
    return out


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def _bench_document(title: str, raw: bytes, codecs: list[Codec], repeat: int) -> None:
    plain = serializer.loads(raw)
    print(f"\n{title}: {len(raw) / 1024:.0f} KiB")
    print(f"  {'codec':44s} {'encode ms':>10s} {'decode ms':>10s}  same bytes")
    for name, encode, decode in codecs:
        enc = _best(lambda: encode(plain), repeat)
        dec = _best(lambda: decode(raw), repeat)
        same = "yes" if encode(plain) == raw else "no"
        print(f"  {name:44s} {enc:10.3f} {dec:10.3f}  {same}")


def _bench_project_paths(cfg: ConfigWriter, repeat: int) -> None:
    data = cfg.get_config_data()
    raw = cfg.dump()
    print("\nproject paths on config.data:")
    cold = _best(lambda: serializer.dumps_bytes(data), repeat)
    print(f"  serializer.dumps_bytes(ConfigData), dataclasses included: {cold:8.2f} ms")
    to_data = _best(lambda: serializer.to_data(data), repeat)
    print(f"  serializer.to_data(ConfigData) (plain data in memory):   {to_data:8.2f} ms")
    inst = data.instances["uuid-inst3"]

    def one_change() -> bytes:
        inst.serial_no += 1
        return cfg.dump()
    warm = _best(one_change, repeat)
    print(f"  ConfigWriter.dump(), one instance changed (fragments):   {warm:8.2f} ms")
    load = _best(lambda: serializer.from_data(ConfigData, serializer.loads(raw)), repeat)
    print(f"  config load: serializer.loads + from_data(ConfigData):   {load:8.2f} ms")


def _import_ms(module: str, runs: int = 9) -> float | None:
    code = ("import time; t = time.perf_counter(); import " + module +
            "; print(time.perf_counter() - t)")
    samples = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  p for p in (REPO, os.environ.get("PYTHONPATH")) if p)})
        if proc.returncode != 0:
            return None
        samples.append(float(proc.stdout))
    return min(samples) * 1000


def _bench_imports() -> None:
    print("\nimport time in a fresh interpreter (best of 9, ms):")
    for module in ("_json", "json", "simplejson", "orjson", "ganeti.serializer", "ganeti.luxi"):
        ms = _import_ms(module)
        print(f"  {module:24s} " + ("not importable" if ms is None else f"{ms:6.2f}"))


def main() -> int:
    codecs = _codecs()
    with tempfile.TemporaryDirectory(prefix="bench-json-") as tmp:
        cfg = _config(tmp)
        raw_config = cfg.dump()
        request, reply = _rpc_bodies(cfg)
        _bench_document(f"config.data ({INSTANCES} instances, {NODES} nodes)", raw_config,
                        codecs, 10)
        _bench_document("job file (OP_INSTANCE_CREATE, 40 log entries)",
                        serializer.dumps_bytes(_job_file()), codecs, 300)
        frame = _query_reply(cfg, tmp)
        _bench_document(f"LUXI Query reply ({INSTANCES} instances, {len(QUERY_FIELDS)} fields)",
                        frame, codecs, 20)
        _bench_document("RPC request body (instance_start)", request, codecs, 1000)
        _bench_document("RPC reply body (all_instances_info, 100 instances)", reply, codecs, 300)
        _bench_project_paths(cfg, 10)
    _bench_imports()
    return 0


if __name__ == "__main__":
    sys.exit(main())
