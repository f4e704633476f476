"""tools/bench/bench_quorum.py: the CPU time of a virtual cluster's daemons."""

from __future__ import annotations

import os
import subprocess
import sys

from tools.bench import bench_quorum

# spins until the process used ``cpu`` seconds of CPU, says so, then sleeps
_BURN = ("import sys, time\n"
         "while time.process_time() < float(sys.argv[1]): pass\n"
         "print('done', flush=True)\n"
         "time.sleep(60)\n")


def _burner(root: str, cpu: float, name: str) -> subprocess.Popen[str]:
    """A process of the virtual node ``root`` (by its environment) whose
    command line names ``name``, once it used ``cpu`` seconds of CPU."""
    proc = subprocess.Popen([sys.executable, "-c", _BURN, str(cpu), name],
                            env={**os.environ, "GANETI_ROOTDIR": root},
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
    return proc


def test_daemon_cpu_counts_the_cluster_processes_by_role(tmp_path) -> None:
    cluster = tmp_path / "vc"
    elsewhere = tmp_path / "vc-other"
    before = bench_quorum.daemon_cpu(str(cluster))
    assert before == {"master": 0.0, "others": 0.0}
    procs = [_burner(str(cluster / "node1"), 0.3, "daemons/ganeti-masterd"),
             _burner(str(cluster / "node2"), 0.2, "daemons/ganeti-noded"),
             # a sibling directory whose name starts alike is another cluster
             _burner(str(elsewhere / "node1"), 0.5, "daemons/ganeti-masterd")]
    try:
        used = bench_quorum.daemon_cpu(str(cluster))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    # CPU used, not time passed: each burner used at least its share
    assert 0.28 <= used["master"] < 0.5
    assert 0.18 <= used["others"] < 0.5
