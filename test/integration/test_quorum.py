"""The job log under faults, on a real 3-node virtual cluster (all master candidates).

doc/design/replication.md (Invariant 1, "New jobs: the quorum write",
"Master start-up") and doc/design/failover.md ("Catching up before the
vote"):

* failing over to node2 and back to node1, with jobs in between and a
  drained queue, works both ways (the queue serial a new master raised
  reaches the candidates; the new master's drain flag is cleared);
* a burst of acknowledged submissions while one candidate is down, the
  master's masterd killed with SIGKILL right after, then a failover to the
  candidate that missed them: it fetches them, and every acknowledged job
  is on the new master with its original opcodes;
* a candidate that missed jobs while it was down has them once the master
  daemon restarted (the master's in-memory bookkeeping died with it).
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from failover_helpers import MASTERD_ARGS, failover, masterd_running
from host_helpers import process_tree
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl, luxi
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(600)

N1, N2, N3 = (f"node{i}.vcluster" for i in range(1, 4))


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcq"), nodes=3, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        yield cluster


def _wait(predicate, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _client(vc: VirtualCluster, node: str) -> luxi.Client:
    return luxi.Client(vc.paths(node).master_socket, connect_timeout=10.0, rw_timeout=60.0)


def _submit(vc: VirtualCluster, node: str, tag: str, count: int) -> dict[int, str]:
    """``count`` acknowledged no-op jobs on ``node``'s master daemon: ``{id: comment}``."""
    acked = {}
    with _client(vc, node) as cl:
        for idx in range(count):
            comment = f"{tag}-{idx}"
            job_id = cl.SubmitJob([{"OP_ID": "OP_TEST_DELAY", "duration": 0.0,
                                    "comment": comment}])
            acked[int(job_id)] = comment
    return acked


def _comments(vc: VirtualCluster, node: str, ids: list[int]) -> dict[int, str | None]:
    """The comment of each job's first opcode, as ``node``'s master daemon has it."""
    with _client(vc, node) as cl:
        rows = cl.QueryJobs(ids, ["id", "ops"])
    return {job_id: (row[1][0].get("comment") if row is not None else None)
            for job_id, row in zip(ids, rows)}


def _held(vc: VirtualCluster, node: str) -> set[int]:
    from ganeti.backend.joblog import held_job_ids
    paths = vc.paths(node)
    return held_job_ids(paths.queue_dir, paths.queue_archive_dir)


def _kill_masterd(vc: VirtualCluster, node: str) -> None:
    pid = daemonctl.daemon_pid(vc.paths(node), constants.MASTERD)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: not _alive(pid), 30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie of ours counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def _stop_noded(vc: VirtualCluster, node: str) -> None:
    assert daemonctl.stop_daemon(vc.paths(node), constants.NODED, timeout=10.0) is not False


def _start_noded(vc: VirtualCluster, node: str) -> None:
    vcluster.start(vc.cluster, node.split(".")[0])


def test_failover_to_node2_and_back_with_jobs_and_a_drained_queue(vc):
    assert vcluster.current_master(vc.cluster).name == N1
    before = _submit(vc, N1, "before", 3)
    vc.ok("gnt-cluster", "queue", "drain", node=N1)
    code, out = failover(vc, N2)
    assert code == 0, out
    assert "queue drain flag cleared" in out
    assert not os.path.exists(vc.paths(N2).queue_drain_file)
    between = _submit(vc, N2, "between", 3)         # accepted: not drained
    assert min(between) > max(before)
    code, out = failover(vc, N1)                     # refused as "stale data" before
    assert code == 0, out
    after = _submit(vc, N1, "after", 2)
    assert min(after) > max(between)
    # and once more without jobs in between (the raised serial alone)
    code, out = failover(vc, N2)
    assert code == 0, out
    code, out = failover(vc, N1)
    assert code == 0, out
    everything = {**before, **between, **after}
    assert _comments(vc, N1, sorted(everything)) == everything


def test_killed_master_after_a_burst_taker_that_missed_jobs_fetches_them(vc):
    master = vcluster.current_master(vc.cluster).name
    taker, other = [n for n in (N1, N2, N3) if n != master]
    _stop_noded(vc, taker)                            # it misses the whole burst
    try:
        acked = _submit(vc, master, "burst", 30)      # master + other: a quorum
    finally:
        _kill_masterd(vc, master)                     # right after the last answer
        _start_noded(vc, taker)
    assert not set(acked) <= _held(vc, taker)
    assert set(acked) <= _held(vc, other)
    code, out = failover(vc, taker)
    assert code == 0, out
    assert "job(s) from" in out and "job queue caught up" in out
    assert masterd_running(vc, taker)
    assert set(acked) <= _held(vc, taker)
    assert _comments(vc, taker, sorted(acked)) == acked
    new = _submit(vc, taker, "next", 1)
    assert min(new) > max(acked)


def test_a_candidate_that_missed_jobs_gets_them_after_a_master_restart(vc):
    master = vcluster.current_master(vc.cluster).name
    late = [n for n in (N1, N2, N3) if n != master][1]
    _stop_noded(vc, late)
    try:
        acked = _submit(vc, master, "missed", 10)
    finally:
        _kill_masterd(vc, master)                     # its stale-candidate memory is gone
    _start_noded(vc, late)
    assert not set(acked) & _held(vc, late)
    daemonctl.start_masterd(vc.paths(master), env=vc.env(master), extra_args=MASTERD_ARGS)
    assert _wait(lambda: set(acked) <= _held(vc, late)), sorted(_held(vc, late))
    # and their content becomes the master's (the jobs ran meanwhile)
    with _client(vc, master) as cl:
        for job_id in acked:
            assert cl.QueryJobs([job_id], ["status"])[0] is not None

    def same() -> bool:
        for job_id in acked:
            mine = os.path.join(vc.paths(master).queue_dir, f"job-{job_id}")
            theirs = os.path.join(vc.paths(late).queue_dir, f"job-{job_id}")
            try:
                with open(mine, "rb") as a, open(theirs, "rb") as b:
                    if a.read() != b.read():
                        return False
            except FileNotFoundError:
                return False
        return True

    assert _wait(same)


def test_a_paused_candidate_does_not_hold_acknowledgements(vc):
    # doc/design/replication.md, "Job files: one lane per candidate": with three
    # candidates the master and one other hold a majority; the paused one's
    # lane waits on its own and catches up once the node runs again
    master = vcluster.current_master(vc.cluster).name
    paused = [n for n in (N1, N2, N3) if n != master][1]
    pid = daemonctl.daemon_pid(vc.paths(paused), constants.NODED)
    assert pid is not None
    stopped = process_tree(pid)
    for member in stopped:
        os.kill(member, signal.SIGSTOP)
    try:
        acked = _submit(vc, master, "paused", 10)      # acknowledged while it is paused
        assert all(os.path.exists(f"/proc/{member}") for member in stopped)
        assert not set(acked) & _held(vc, paused)
    finally:
        for member in stopped:
            os.kill(member, signal.SIGCONT)
    assert _wait(lambda: set(acked) <= _held(vc, paused)), sorted(_held(vc, paused))
