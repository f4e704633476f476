"""The master role under faults, on real virtual clusters (doc/design/failover.md).

* two and three candidates running ``gnt-cluster master-failover`` at
  once: exactly one becomes the master, the others give up with a clear
  message and stop nothing;
* a takeover killed at each named fault point
  (:data:`ganeti.failover.faultpoints.POINTS`), then finished by a rerun of
  the command, by the watcher or by a plain ``ganeti-masterd`` start on the
  taker: one master afterwards, every node names it, job ids go on upward;
* a master fenced by the majority (its node daemon paused during the
  failover) answers every LUXI request and RAPI with "no longer the
  master; the master is X" (HTTP 503);
* a ``--no-voting`` master that crashed, then a normal failover: no job id
  handed out twice;
* a planned failover while a client submits 50 jobs/s succeeds.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time

import pytest
from failover_helpers import MASTERD_ARGS, failover, masterd_running, ssconf_master, submit
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl, errors, luxi
from ganeti.failover import faultpoints
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(900)


def _wait(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.2) + 1):
        if predicate():
            return True
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return predicate()


def _answering_masters(vc: VirtualCluster) -> list[str]:
    """Nodes whose master daemon answers as the master (``master-ping`` exits 0)."""
    return [n for n in vc.names
            if masterd_running(vc, n)
            and vc.run("gnt-cluster", "master-ping", node=n, timeout=60).returncode == 0]


def _one_master(vc: VirtualCluster, *, timeout: float = 60.0) -> str:
    """Wait until exactly one master daemon answers; its node."""
    found: list[str] = []

    def check() -> bool:
        found[:] = _answering_masters(vc)
        return len(found) == 1

    assert _wait(check, timeout), f"masters answering: {found}"
    return found[0]


def _check_everyone_follows(vc: VirtualCluster, master: str, above: int) -> int:
    """A configuration change reaches every node; a job gets an id above ``above``."""
    vc.ok("gnt-cluster", "add-tags", f"master-{master.split('.')[0]}-{above}", node=master)
    assert _wait(lambda: all(ssconf_master(vc, n) == master for n in vc.names)), \
        {n: ssconf_master(vc, n) for n in vc.names}
    job, text = submit(vc, master, "gnt-debug", "delay", "0", wait=True)
    assert job is not None and job > above, text
    return job


def _masterd(vc: VirtualCluster, node: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, f"{vcluster.REPO_ROOT}/daemons/{constants.MASTERD}",
            *MASTERD_ARGS]
    return subprocess.run(argv, env=vc.env(node), capture_output=True, text=True,
                          timeout=180, check=False)


def _failover_cmd(vc: VirtualCluster, node: str, *extra: str,
                  env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    script = os.path.join(vcluster.REPO_ROOT, "scripts", "gnt-cluster")
    return subprocess.Popen([sys.executable, script, "master-failover", *extra],
                            env={**vc.env(node), **(env or {})}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


# --- concurrent takers ----------------------------------------------------------

@pytest.fixture(scope="module")
def vc5(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vct5"), nodes=5, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        yield cluster


@pytest.mark.parametrize("takers", [2, 3], ids=["two-takers", "three-takers"])
def test_concurrent_takers_exactly_one_wins(vc5, takers):
    old = _one_master(vc5)
    last, text = submit(vc5, old, "gnt-debug", "delay", "0", wait=True)
    assert last is not None, text
    nodes = [n for n in vc5.names if n != old][:takers]
    procs = {n: _failover_cmd(vc5, n) for n in nodes}
    results = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        results[name] = (proc.returncode, out)
    winners = [n for n, (code, _) in results.items() if code == 0]
    for name, (code, out) in results.items():
        print(f"--- {name} (exit {code}):\n{out}")
    assert winners, {n: code for n, (code, _) in results.items()}
    winner = _one_master(vc5)
    assert winner in winners, (winner, winners)
    for name in winners:
        # on a loaded machine a taker may start only after another one finished:
        # then it takes over from that one, a planned failover of its own (its vote
        # names it as the master), never a second master beside it
        if name != winner:
            assert any(f"(the master is {name})" in out
                       for other, (code, out) in results.items() if other != name), results
    for name, (code, out) in results.items():
        if code == 0:
            continue
        # the loser says why and stopped nothing of its own; on a loaded machine
        # a taker may start late enough to take over from an earlier winner whose
        # master daemon was still starting: that one says it was superseded
        assert ("Failover given up" in out or "Failover refused" in out
                or "Failover superseded" in out), out
        assert not masterd_running(vc5, name)
    assert _one_master(vc5) == winner
    _check_everyone_follows(vc5, winner, last)


# --- a takeover killed at each fault point, then finished -------------------------

@pytest.fixture(scope="module")
def vc3(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vct3"), nodes=3, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        yield cluster


#: One round per fault point, and every way of finishing (a rerun of the command,
#: the watcher, a plain master daemon start) both for a takeover killed before
#: its configuration write (the marker holds only the epoch: started again) and
#: for one killed after it (the marker holds the numbers: resumed).
ROUNDS = [
    ("before_vote", "rerun"),
    ("after_stop_old_master", "rerun"),
    ("after_stop_old_master", "watcher"),
    ("after_stop_old_master", "masterd"),
    ("after_config_write", "rerun"),
    ("after_epoch_record", "masterd"),
    ("after_config_push", "watcher"),
    ("after_masterd_start", "rerun"),
]
#: The same paths again at the other points after the configuration write:
#: ``make soak`` runs them (the ``soak`` marker), ``make test`` does not.
SOAK_ROUNDS = [
    ("after_config_write", "watcher"),
    ("after_config_write", "masterd"),
    ("after_epoch_record", "rerun"),
    ("after_config_push", "rerun"),
]


def test_every_fault_point_has_a_round():
    assert {point for point, _ in ROUNDS} == set(faultpoints.POINTS)


def test_every_way_of_finishing_has_a_round_before_and_after_the_config_write():
    points = list(faultpoints.POINTS)
    written = points.index("after_config_write")
    for finish in ("rerun", "watcher", "masterd"):
        at = [points.index(p) for p, f in ROUNDS if f == finish and p != "after_masterd_start"]
        assert any(0 < k < written for k in at), finish
        assert any(k >= written for k in at), finish
    assert not set(ROUNDS) & set(SOAK_ROUNDS)


@pytest.mark.parametrize(("point", "finish"), [
    *ROUNDS, *(pytest.param(p, f, marks=pytest.mark.soak) for p, f in SOAK_ROUNDS)],
    ids=[f"{p}-{f}" for p, f in ROUNDS + SOAK_ROUNDS])
def test_takeover_killed_then_finished(vc3, point, finish):
    old = _one_master(vc3)
    last, text = submit(vc3, old, "gnt-debug", "delay", "0", wait=True)
    assert last is not None, text
    taker = next(n for n in vc3.names if n != old)
    proc = _failover_cmd(vc3, taker, env={faultpoints.ENV: point})
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == faultpoints.EXIT_STATUS, out
    if finish == "rerun":
        code, out = failover(vc3, taker)
        if point == "after_masterd_start":
            assert code != 0 and "already the master" in out, out
        else:
            assert code == 0, out
    elif finish == "watcher":
        vcluster.run_watcher(vc3.cluster, node=taker)
    else:
        res = _masterd(vc3, taker)
        assert res.returncode == 0, res.stdout + res.stderr
    new = _one_master(vc3)
    assert new == taker
    assert not os.path.exists(os.path.join(vc3.paths(taker).data_dir, "takeover_in_progress"))
    _check_everyone_follows(vc3, new, last)


# --- a master fenced by a majority ---------------------------------------------------

def _rapi_get(vc: VirtualCluster, node: str, path: str) -> tuple[int, bytes]:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(vc.cluster.node(node).ip, vc.cluster.rapi_port,
                                       context=tls, timeout=60)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_fenced_master_answers_who_the_master_is(vc3):
    old = _one_master(vc3)
    taker = next(n for n in vc3.names if n != old)
    noded = daemonctl.daemon_pid(vc3.paths(old), constants.NODED)
    assert noded is not None
    os.kill(noded, signal.SIGSTOP)       # the old master's node daemon hangs
    try:
        code, out = failover(vc3, taker)
        assert code == 0, out
        assert f"{old}: not stopped" in out
    finally:
        os.kill(noded, signal.SIGCONT)
    assert masterd_running(vc3, old)     # not stopped: it learns from the majority
    job, text = submit(vc3, old, "gnt-debug", "delay", "0")
    assert job is None and "no longer the master; the master is" in text, text
    assert taker in text
    # from now on every request, queries too, gets the same answer
    client = luxi.Client(vc3.paths(old).master_socket)
    with pytest.raises(errors.NotMasterError, match=f"the master is {taker}"):
        client.call("QueryClusterInfo", [])
    res = vc3.run("gnt-job", "list", node=old)
    assert res.returncode != 0 and f"the master is {taker}" in res.stdout + res.stderr
    status, body = _rapi_get(vc3, old, "/2/info")
    assert status == 503 and b"no longer the master" in body
    assert _one_master(vc3) == taker
    daemonctl.stop_daemon(vc3.paths(old), constants.MASTERD)
    daemonctl.stop_daemon(vc3.paths(old), constants.RAPI)
    # the new master's next change reaches the old one too
    _check_everyone_follows(vc3, taker, 0)


# --- --no-voting, then a normal failover -----------------------------------------------

def _reservation(vc: VirtualCluster, node: str) -> tuple[int, int]:
    """``(epoch, reserved job id)`` a node recorded (var/lib/ganeti/master_epoch)."""
    with open(os.path.join(vc.paths(node).data_dir, "master_epoch")) as fh:
        state = json.load(fh)
    return int(state.get("epoch") or 0), int(state.get("reserved_job_id") or 0)


def test_no_voting_master_crashed_then_failover_reuses_no_id(vc3):
    old = _one_master(vc3)
    taker = next(n for n in vc3.names if n != old)
    epoch_before = max(_reservation(vc3, n)[0] for n in vc3.names)
    code, out = failover(vc3, taker, "--no-voting", "--yes-do-it")
    assert code == 0, out
    assert _one_master(vc3) == taker
    ids = []
    for _ in range(3):
        job, text = submit(vc3, taker, "gnt-debug", "delay", "0", wait=True)
        assert job is not None, text
        ids.append(job)
    # it took a new epoch and recorded its reservation on the nodes it reached
    others = [n for n in vc3.names if n != taker]
    for name in vc3.names:
        epoch, reserved = _reservation(vc3, name)
        assert epoch > epoch_before and reserved >= max(ids), (name, epoch, reserved)
    reserved = min(_reservation(vc3, n)[1] for n in vc3.names)
    # its jobs reached the candidates (so that the next vote does not find it newer)
    assert _wait(lambda: all(os.path.exists(os.path.join(vc3.paths(n).queue_dir,
                                                         f"job-{max(ids)}")) for n in others))
    # the --no-voting master crashes (SIGKILL: no clean-up)
    pid = daemonctl.daemon_pid(vc3.paths(taker), constants.MASTERD)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: not masterd_running(vc3, taker))
    daemonctl.stop_daemon(vc3.paths(taker), constants.RAPI)
    code, out = failover(vc3, others[0])
    assert code == 0, out
    job, text = submit(vc3, others[0], "gnt-debug", "delay", "0", wait=True)
    # above every id the crashed master could have handed out
    assert job is not None and job > reserved > max(ids), (ids, reserved, text)
    _check_everyone_follows(vc3, others[0], job)


# --- a planned failover under load ---------------------------------------------------

class _Submitter:
    """Submits a no-op job every ``1/rate`` seconds to whichever node is the master."""

    def __init__(self, vc: VirtualCluster, rate: float) -> None:
        self.vc = vc
        self.rate = rate
        self.stop = threading.Event()
        self.acked: dict[int, str] = {}
        self.refused: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        op = {"OP_ID": "OP_TEST_DELAY", "duration": 0.0}
        start = time.monotonic()
        for count in range(100_000):
            if self.stop.is_set():
                return
            master = vcluster.current_master(self.vc.cluster).name
            try:
                client = luxi.Client(self.vc.paths(master).master_socket, connect_timeout=2.0,
                                     rw_timeout=20.0)
                job = client.call("SubmitJob", [[op]])
                client.close()
                assert job not in self.acked, f"job id {job} acknowledged twice"
                self.acked[int(job)] = master
            except errors.GanetiError as exc:
                self.refused.append(f"{type(exc).__name__}: {exc}")
            # paced by the clock: a slow submission is not followed by a full pause
            self.stop.wait(max(0.0, start + (count + 1) / self.rate - time.monotonic()))


def test_planned_failover_under_50_jobs_per_second(vc3):
    old = _one_master(vc3)
    taker = next(n for n in vc3.names if n != old)
    load = _Submitter(vc3, 50.0)
    load.thread.start()
    try:
        time.sleep(2.0)
        before = len(load.acked) + len(load.refused)
        started = time.monotonic()
        code, out = failover(vc3, taker)
        took = time.monotonic() - started
        time.sleep(2.0)
    finally:
        load.stop.set()
        load.thread.join(60)
    assert code == 0, out
    assert "accepts no new jobs now" in out
    print(f"failover under load: {took:.2f}s; {before / 2.0:.0f} submissions/s before,"
          f" {len(load.acked)} acknowledged in all, {len(load.refused)} refused")
    assert before > 0 and any(m == taker for m in load.acked.values())
    # a refusal during the failover is the retryable one, or the daemon being away
    other = [r for r in load.refused if not ("MasterFailingOverError" in r or "NoMasterError" in r
                                              or "NotMasterError" in r)]
    assert not other, other[:5]
    assert _one_master(vc3) == taker
