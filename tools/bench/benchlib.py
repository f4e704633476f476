"""Helpers the benchmarks share (not a benchmark itself: ``make bench`` runs ``bench_*.py``)."""

from __future__ import annotations

import compileall
import os
import sys
import time
import uuid as uuidlib
from typing import Any

from ganeti import constants, daemonctl, serializer
from ganeti.config import ConfigWriter
from ganeti.objects import NIC, Instance
from ganeti.pathutils import Paths
from tools.harness import vcluster

__all__ = ["fill_config", "process_cpu", "process_times", "use_bytecode_cache", "wait_jobs"]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cpu_ticks(pid: int) -> list[int]:
    """utime, stime, cutime, cstime of process ``pid`` (``/proc/PID/stat`` fields 14-17)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return [int(v) for v in fh.read().rsplit(")", 1)[1].split()[11:15]]


def process_cpu(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads; with
    ``reaped``, also its children it has waited for), from ``/proc/PID/stat``.

    Raises :class:`OSError` when the process is gone."""
    return sum(_cpu_ticks(pid)[:4 if reaped else 2]) / os.sysconf("SC_CLK_TCK")


def process_times(pid: int) -> tuple[float, float]:
    """``(user, system)`` CPU seconds of process ``pid`` so far (all its threads)."""
    user, system = _cpu_ticks(pid)[:2]
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


def use_bytecode_cache(directory: str) -> None:
    """Byte-compile ``ganeti/`` into ``directory`` and make this process and
    every Python process it starts from now on (commands, daemons) use it.

    An installed Ganeti has its modules byte-compiled; a checkout run with
    ``PYTHONDONTWRITEBYTECODE`` has none, and then every command compiles
    the modules it imports (about 18 ms of a 60 ms ``gnt-job list``, and
    more of a daemon's start-up): a figure of the checkout, not of the
    program.  ``PYTHONPYCACHEPREFIX`` keeps the tree itself clean.
    """
    os.makedirs(directory, exist_ok=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = directory
    sys.dont_write_bytecode = False
    sys.pycache_prefix = directory
    compileall.compile_dir(os.path.join(REPO, "ganeti"), quiet=1)


def wait_jobs(conn: Any, ids: list[int], deadline: float) -> None:
    """Wait (``WaitForJobChangeOnce`` on LUXI client ``conn``) until every job
    of ``ids`` has finished; RuntimeError past ``deadline`` (monotonic)."""
    for job_id in ids:
        prev = None
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError("jobs did not finish in time")
            res = conn.WaitForJobChangeOnce(job_id, ["status"], prev, -1, 10)
            if res == "nochange":
                continue
            prev = res[0]
            if prev[0] in ("success", "error", "canceled"):
                break


def _fake_running(vc: vcluster.VCluster, node_name: str, inst: Instance) -> None:
    """Write the fake hypervisor's state file of a running ``inst`` on its node
    (what ``FakeHypervisor.start_instance`` leaves; see ganeti/hypervisor/fake.py)."""
    state_dir = Paths(root=vc.node(node_name).root).hypervisor_state_dir
    os.makedirs(state_dir, mode=0o750, exist_ok=True)
    state = {"name": inst.name, "uuid": inst.uuid, "memory": 128, "vcpus": 1,
             "state": "running", "start_time": time.time(), "hvparams": {}, "beparams": {},
             "os": inst.os, "disks": [], "nics": [serializer.to_data(n) for n in inst.nics],
             "migration": None}
    with open(os.path.join(state_dir, inst.name + ".json"), "w") as fh:
        fh.write(serializer.dumps(state))


def fill_config(vc: vcluster.VCluster, total: int, *, half_running: bool = False) -> None:
    """Stop masterd, add diskless instances up to ``total`` with ConfigWriter, restart.

    The cheap offline path: no job, no OS script, spread round-robin over the nodes.
    The instances are stopped; with ``half_running`` every second one is up and
    "running" in its node's fake hypervisor (its state file written directly).
    """
    paths = vc.paths(vc.master_node.name)
    daemonctl.stop_daemon(paths, constants.MASTERD, timeout=10.0)
    cfg = ConfigWriter(paths.config_file)
    nodes = []
    for vnode in vc.nodes:
        node = cfg.get_node_info_by_name(vnode.name)
        if node is None:
            raise SystemExit(f"{vnode.name} is not in the cluster's configuration")
        nodes.append(node.uuid)
    have = len(cfg.get_instance_names())
    with cfg.batch():
        for idx in range(have, total):
            mac = f"aa:01:{idx >> 16 & 255:02x}:{idx >> 8 & 255:02x}:{idx & 255:02x}:00"
            up = half_running and idx % 2 == 1
            inst = Instance(name=f"cfg{idx:05d}.example.com", uuid=str(uuidlib.uuid4()),
                            primary_node=nodes[idx % len(nodes)], os="tinyos",
                            hypervisor=constants.HT_FAKE, disk_template="diskless",
                            nics=[NIC(mac=mac)],
                            admin_state=constants.ADMINST_UP if up else constants.ADMINST_DOWN)
            cfg.add_instance(inst, [])
            if up:
                _fake_running(vc, vc.nodes[idx % len(nodes)].name, inst)
    vcluster.start(vc)
