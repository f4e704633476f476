"""tools/bench/bench_quorum.py: the CPU time of a virtual cluster's daemons."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ganeti import errors
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


def test_apart_cpus_gives_the_master_the_lowest_cpu() -> None:
    assert bench_quorum.apart_cpus({0, 1}) == ({0}, {1})
    assert bench_quorum.apart_cpus({3, 1, 2, 0}) == ({0}, {1, 2, 3})
    assert bench_quorum.apart_cpus({5, 3}) == ({3}, {5})
    with pytest.raises(errors.GanetiError):
        bench_quorum.apart_cpus({2})


# a process with a second thread, both sleeping once started
_SLEEPER = ("import threading, time\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('up', flush=True)\n"
            "time.sleep(60)\n")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="--apart needs two CPUs")
def test_pin_apart_puts_every_thread_of_the_master_node_apart(tmp_path) -> None:
    cluster = tmp_path / "vc"
    roots = [cluster / "node1", cluster / "node2", cluster / "node3",
             tmp_path / "vc-other" / "node1"]     # another cluster's: left alone
    procs = []
    for root in roots:
        proc = subprocess.Popen([sys.executable, "-c", _SLEEPER],
                                env={**os.environ, "GANETI_ROOTDIR": str(root)},
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        procs.append(proc)
    everywhere = os.sched_getaffinity(0)
    master_cpus, other_cpus = bench_quorum.apart_cpus(everywhere)
    try:
        bench_quorum.pin_apart(str(cluster), str(cluster / "node1"), master_cpus, other_cpus)
        seen = [{tid: os.sched_getaffinity(int(tid)) for tid in os.listdir(f"/proc/{p.pid}/task")}
                for p in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert all(len(threads) == 2 for threads in seen)
    assert set(map(frozenset, seen[0].values())) == {frozenset(master_cpus)}
    for threads in seen[1:3]:
        assert set(map(frozenset, threads.values())) == {frozenset(other_cpus)}
    assert set(map(frozenset, seen[3].values())) == {frozenset(everywhere)}


def test_file_create_cost_measures_new_files_and_leaves_nothing(tmp_path) -> None:
    (tmp_path / "kept").write_text("other")
    cost = bench_quorum.file_create_cost(str(tmp_path), count=50)
    # CPU time per file: positive (the probe did make files) and far below
    # a second
    assert 0.0 < cost < 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
