"""Rounds of the master-role fault-injection suite on a virtual cluster.

doc/design/failover.md, "Fault injection".  One round (:func:`run_round`):

1. one client per node submits ``OP_TEST_DELAY`` jobs (each with a unique
   marker in its ``comment``) over LUXI to the master its node's ssconf
   names, recording every acknowledged id (:class:`Clients`);
2. a seeded nemesis applies a plan of faults (:data:`PLANS`): a failover
   stopped at a named fault point (``GANETI_FAULT_POINT``,
   ``ganeti/failover/faultpoints.py``), two or three racing takers, the
   master's daemons killed or paused (SIGSTOP) during a failover, a node
   cut off (``tools/vcluster isolate``, nftables), a node restarted, a
   failover process killed at a random moment;
3. the faults stop (every node healed, continued and started) and the
   cluster is recovered by the documented means only: start the master
   daemon (``tools/vcluster start``), a watcher pass, a rerun of the
   interrupted failover (:func:`recover`), within :data:`RECOVERY_LIMIT`;
4. the job files on the working master's disk are read and the pure
   checker (``master_history.check``) lists the violations.

Used by ``test/integration/test_master_faults.py`` (a handful of rounds)
and ``tools/soak/soak_master.py`` (1,000 by default).  Every loop is
bounded in count and in time.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from failover_helpers import MASTERD_ARGS, masterd_running
from host_helpers import process_tree
from master_history import Ack, History, Violation, check, count_by_kind
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl, errors, luxi, serializer
from ganeti.failover import faultpoints
from ganeti.pathutils import archived_job_file_name
from tools.harness import vcluster

__all__ = ["MASTERD_ARGS", "RECOVERY_LIMIT", "PLANS", "Clients", "RoundResult", "run_round",
           "recover", "make_cluster"]

#: seconds after the faults stop within which a master must acknowledge a job
RECOVERY_LIMIT = 45.0
#: seconds one failover command may take before it is killed
FAILOVER_TIMEOUT = 90.0
#: pause between two submissions of one client
SUBMIT_PAUSE = 0.03
#: LUXI timeouts of the clients (a paused master must not hold a client long)
CALL_TIMEOUT = 5.0
#: at most this many submissions per client and round
MAX_SUBMISSIONS = 20000

Log = Callable[[str], None]


def make_cluster(directory: str, nodes: int = 4) -> VirtualCluster:
    """A started virtual cluster for the rounds (short RPC timeouts, 2 s lease, no SSH)."""
    return VirtualCluster(directory, nodes=nodes, use_ssh=False,
                          masterd_args=MASTERD_ARGS).start()


# --- what a node believes ---------------------------------------------------------------

def master_view(vc: VirtualCluster, node: str) -> tuple[int, bool] | None:
    """``(master_epoch, whether node is the master)`` of ``node``'s configuration."""
    try:
        with open(vc.paths(node).config_file, "rb") as fh:
            data = serializer.loads(fh.read())
        cluster = data["cluster"]
        master = data["nodes"].get(cluster["master_node"], {}).get("name")
        return int(cluster.get("master_epoch") or 0), master == node
    except (OSError, ValueError, KeyError, TypeError, AttributeError, errors.GanetiError):
        return None


def ssconf_master(vc: VirtualCluster, node: str) -> str | None:
    """The master ``node``'s ssconf names (None: unreadable)."""
    try:
        with open(vc.paths(node).ssconf_file("master_node")) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def working_master(vc: VirtualCluster) -> str:
    """The node most likely to be the master now (``tools/vcluster``'s current master)."""
    return vcluster.current_master(vc.cluster).name


# --- the clients ------------------------------------------------------------------------

@dataclass
class Clients:
    """One submitting thread per node, each asking its own node's ssconf for the master."""

    vc: VirtualCluster
    prefix: str
    deadline: float
    acks: list[Ack] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    #: set while the nemesis wants no submissions (see :meth:`Nemesis.quiet`)
    hold: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Clients:
        for idx, home in enumerate(self.vc.names):
            thread = threading.Thread(target=self._run, args=(idx, home), daemon=True,
                                      name=f"nemesis-client-{idx}")
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=CALL_TIMEOUT * 3)

    def submit_once(self, node: str, marker: str,
                    clients: dict[str, luxi.Client] | None = None) -> Ack | None:
        """Submit one job to ``node``'s master daemon; its :class:`Ack`, or None if refused."""
        own = clients is None
        clients = {} if clients is None else clients
        before = master_view(self.vc, node)
        client = clients.get(node)
        if client is None:
            client = clients[node] = luxi.Client(self.vc.paths(node).master_socket,
                                                 connect_timeout=CALL_TIMEOUT,
                                                 rw_timeout=CALL_TIMEOUT)
        sent = time.monotonic()
        try:
            job_id = int(client.SubmitJob([{"OP_ID": "OP_TEST_DELAY", "duration": 0,
                                            "comment": marker}]))
        except (errors.GanetiError, OSError) as exc:
            client.close()
            with self._lock:
                name = type(exc).__name__
                self.refused[name] = self.refused.get(name, 0) + 1
            return None
        finally:
            if own:
                client.close()
        acked = time.monotonic()
        after = master_view(self.vc, node)
        same = before is not None and before == after
        ack = Ack(marker=marker, job_id=job_id, node=node,
                  epoch=before[0] if same and before else None,
                  named_master=bool(same and before and before[1]), sent=sent, acked=acked)
        with self._lock:
            self.acks.append(ack)
        return ack

    def _run(self, idx: int, home: str) -> None:
        clients: dict[str, luxi.Client] = {}
        try:
            for count in range(MAX_SUBMISSIONS):
                if self._stop.is_set() or time.monotonic() > self.deadline:
                    return
                master = ssconf_master(self.vc, home)
                if not self.hold.is_set() and master is not None and master in self.vc.names:
                    self.submit_once(master, f"{self.prefix}-c{idx}-{count}", clients)
                self._stop.wait(SUBMIT_PAUSE)
        finally:
            for client in clients.values():
                client.close()


# --- the nemesis ------------------------------------------------------------------------

@dataclass
class Nemesis:
    """The faults of one round: seeded choices, and what to undo when they stop."""

    vc: VirtualCluster
    rng: random.Random
    log: Log
    hold: threading.Event = field(default_factory=threading.Event)
    steps: list[str] = field(default_factory=list)
    paused: list[int] = field(default_factory=list)
    takers: list[str] = field(default_factory=list)
    #: (taker, exit status) of every failover of the round, recovery included
    failovers: list[tuple[str, int]] = field(default_factory=list)

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """No submissions inside (the clients wait); half a second to let replication drain."""
        self.hold.set()
        self.note("clients hold")
        try:
            time.sleep(0.5)
            yield
        finally:
            self.hold.clear()
            self.note("clients resume")

    def note(self, text: str) -> None:
        self.steps.append(text)
        self.log(text)

    def candidates(self) -> list[str]:
        """The nodes that may take over: not the master, and not named master by their own config."""
        master = working_master(self.vc)
        others = [n for n in self.vc.names if n != master]
        found = [n for n in others if not (master_view(self.vc, n) or (0, False))[1]]
        return found if len(found) >= min(2, len(others)) else others

    # processes -------------------------------------------------------------------------
    def start_failover(self, node: str, point: str | None = None) -> subprocess.Popen[str]:
        """``gnt-cluster master-failover`` on ``node`` (armed at ``point``), not waited for."""
        env = {**os.environ, **vcluster.node_env(self.vc.cluster, self.vc.cluster.node(node))}
        env.pop(faultpoints.ENV, None)
        if point:
            env[faultpoints.ENV] = point
        self.takers.append(node)
        script = os.path.join(vcluster.REPO_ROOT, "scripts", "gnt-cluster")
        return subprocess.Popen([sys.executable, script, "master-failover"], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def finish(self, node: str, proc: subprocess.Popen[str]) -> int:
        """Wait for a failover process (killed after :data:`FAILOVER_TIMEOUT`); its status."""
        try:
            out, _ = proc.communicate(timeout=FAILOVER_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
        last = (out or "").strip().splitlines()[-1:] or [""]
        self.failovers.append((node, proc.returncode))
        self.note(f"failover {node}: exit {proc.returncode} ({last[0][:160]})")
        return proc.returncode

    def daemon_pids(self, node: str) -> list[int]:
        paths = self.vc.paths(node)
        pids = [daemonctl.daemon_pid(paths, d)
                for d in (constants.MASTERD, constants.NODED, constants.RAPI)]
        return [p for p in pids if p is not None]

    def kill_daemons(self, node: str) -> None:
        for pid in self.daemon_pids(node):
            _signal(pid, signal.SIGKILL)
        self.note(f"kill -9 daemons of {node}")

    def pause(self, node: str) -> None:
        # the daemons' forked children too: a node daemon's kept-connection
        # children would otherwise go on serving node RPC
        pids = [member for pid in self.daemon_pids(node) for member in process_tree(pid)]
        for pid in pids:
            _signal(pid, signal.SIGSTOP)
        self.paused += pids
        self.note(f"SIGSTOP daemons of {node}")

    def resume(self) -> None:
        for pid in self.paused:
            _signal(pid, signal.SIGCONT)
        if self.paused:
            self.note("SIGCONT every paused daemon")
        self.paused = []

    def isolate(self, node: str) -> bool:
        if vcluster.partition_support() is not None:
            self.pause(node)   # no nftables here: a cut-off node is simulated by SIGSTOP
            self.note(f"(isolation of {node} simulated: {vcluster.partition_support()})")
            return False
        vcluster.isolate(self.vc.cluster, node)
        self.note(f"isolate {node}")
        return True

    def stop_faults(self) -> None:
        """Undo every fault: continue, heal, start every node."""
        self.resume()
        vcluster.heal(self.vc.cluster)
        try:
            vcluster.start(self.vc.cluster)
        except errors.GanetiError as exc:
            self.note(f"start after the faults: {str(exc).splitlines()[0][:160]}")


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# --- plans: one fault story each ------------------------------------------------------

def plan_fault_point(point: str) -> Callable[[Nemesis], None]:
    """A failover on a candidate stopped at ``point`` (a process killed there)."""
    def plan(nem: Nemesis) -> None:
        node = nem.rng.choice(nem.candidates())
        with nem.quiet():
            code = nem.finish(node, nem.start_failover(node, point))
        if code != faultpoints.EXIT_STATUS:
            nem.note(f"fault point {point} NOT reached (exit {code})")
    return plan


def plan_race(takers: int) -> Callable[[Nemesis], None]:
    """``takers`` candidates run ``gnt-cluster master-failover`` at once."""
    def plan(nem: Nemesis) -> None:
        pool = nem.candidates()
        nodes = nem.rng.sample(pool, min(takers, len(pool)))
        with nem.quiet():
            procs = [(node, nem.start_failover(node)) for node in nodes]
            for node, proc in procs:
                nem.finish(node, proc)
    return plan


def plan_kill_master(nem: Nemesis) -> None:
    """The master's daemons killed (-9) at a random moment of a failover to a candidate."""
    old = working_master(nem.vc)
    node = nem.rng.choice(nem.candidates())
    delay = nem.rng.uniform(0.0, 1.5)
    if nem.rng.random() < 0.5:
        nem.kill_daemons(old)
        proc = nem.start_failover(node)
    else:
        proc = nem.start_failover(node)
        time.sleep(delay)
        nem.kill_daemons(old)
    nem.finish(node, proc)


def plan_kill_failover(nem: Nemesis) -> None:
    """A failover process killed (-9) at a random moment."""
    node = nem.rng.choice(nem.candidates())
    delay = nem.rng.uniform(0.2, 4.0)
    with nem.quiet():
        proc = nem.start_failover(node)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            nem.note(f"kill -9 the failover on {node} after {delay:.2f}s")
        nem.finish(node, proc)


def plan_pause_master(nem: Nemesis) -> None:
    """The master paused (SIGSTOP) while a candidate takes over, then continued."""
    old = working_master(nem.vc)
    node = nem.rng.choice(nem.candidates())
    nem.pause(old)
    nem.finish(node, nem.start_failover(node))
    time.sleep(nem.rng.uniform(0.0, 2.0))
    nem.resume()
    time.sleep(nem.rng.uniform(0.5, 2.0))   # the old master wakes up among the clients


def plan_isolate_master(nem: Nemesis) -> None:
    """The master cut off while a candidate takes over; the clients keep submitting."""
    old = working_master(nem.vc)
    node = nem.rng.choice(nem.candidates())
    nem.isolate(old)
    nem.finish(node, nem.start_failover(node))
    time.sleep(nem.rng.uniform(1.0, 3.0))


def plan_restart(nem: Nemesis) -> None:
    """A random node (maybe the master) stopped and started again, then a failover."""
    node = nem.rng.choice(nem.vc.names)
    vcluster.stop(nem.vc.cluster, node)
    nem.note(f"stop {node}")
    time.sleep(nem.rng.uniform(0.0, 2.0))
    try:
        vcluster.start(nem.vc.cluster, node)
        nem.note(f"start {node}")
    except errors.GanetiError as exc:
        nem.note(f"start {node}: {str(exc).splitlines()[0][:160]}")
    taker = nem.rng.choice(nem.candidates())
    with nem.quiet():
        nem.finish(taker, nem.start_failover(taker))


def plan_failover_under_load(nem: Nemesis) -> None:
    """A planned failover to a candidate while every client keeps submitting."""
    node = nem.rng.choice(nem.candidates())
    nem.finish(node, nem.start_failover(node))


PLANS: dict[str, Callable[[Nemesis], None]] = {
    **{f"point-{p}": plan_fault_point(p) for p in faultpoints.POINTS},
    "race-2": plan_race(2),
    "race-3": plan_race(3),
    "kill-master": plan_kill_master,
    "kill-failover": plan_kill_failover,
    "pause-master": plan_pause_master,
    "isolate-master": plan_isolate_master,
    "restart": plan_restart,
    "failover-under-load": plan_failover_under_load,
}


# --- recovery and the check -----------------------------------------------------------

def _probe(vc: VirtualCluster, clients: Clients, marker: str) -> Ack | None:
    """One job to the master the majority's ssconf names; its ack (None: refused)."""
    names = [m for m in (ssconf_master(vc, n) for n in vc.names) if m in vc.names]
    if not names:
        return None
    master = max(sorted(set(names)), key=names.count)
    return clients.submit_once(master, marker)


def recover(vc: VirtualCluster, nem: Nemesis, clients: Clients, *, since: float,
            limit: float = RECOVERY_LIMIT) -> tuple[float | None, str | None]:
    """Bring a master back by the documented means: ``(seconds, the master)`` when one
    acknowledged a job.

    Between two jobs to the master the nodes' ssconf names, tries in turn:
    ``tools/vcluster start`` plus a plain ``ganeti-masterd`` start on every
    node whose configuration names itself the master (it votes); a watcher
    pass on every node; a rerun of ``gnt-cluster master-failover`` on the
    round's takers, the last one first.  Seconds
    are counted from ``since`` (a ``time.monotonic()`` when the faults
    stopped); ``(None, None)`` when nothing worked within ``limit`` seconds.
    """
    started = since

    def start_masters(_attempt: int) -> None:
        try:
            vcluster.start(vc.cluster)   # node daemons; the master daemon on the current master
        except errors.GanetiError as exc:
            nem.note(f"recovery: vcluster start: {str(exc).splitlines()[0][:160]}")
        for node in vc.names:        # a plain ganeti-masterd start where a config names itself
            if (master_view(vc, node) or (0, False))[1] and not masterd_running(vc, node):
                daemonctl.start_masterd(vc.paths(node), env=vc.env(node),
                                        extra_args=vc.cluster.masterd_args)

    def watcher(_attempt: int) -> None:
        vcluster.run_watcher(vc.cluster, timeout=limit)

    def rerun(attempt: int) -> None:
        takers = list(dict.fromkeys(reversed(nem.takers))) or [working_master(vc)]
        taker = takers[(attempt // 3) % len(takers)]
        nem.finish(taker, nem.start_failover(taker))

    actions: list[Callable[[int], None]] = [start_masters, watcher, rerun]
    for attempt in range(12):
        ack = _probe(vc, clients, f"{clients.prefix}-probe{attempt}")
        if ack is not None:
            return ack.acked - started, ack.node
        if time.monotonic() - started > limit:
            return None, None
        action = actions[attempt % len(actions)]
        try:
            action(attempt)
            nem.note(f"recovery: {action.__name__}")
        except (errors.GanetiError, subprocess.SubprocessError, OSError) as exc:
            nem.note(f"recovery: {action.__name__} failed: {str(exc).splitlines()[0][:160]}")
        time.sleep(0.5)
    return None, None


def read_jobs(vc: VirtualCluster, node: str, prefix: str,
              wanted: set[int]) -> dict[int, str | None]:
    """Job id -> marker of the jobs on ``node``'s disk with a marker of this round.

    Every file in the queue directory is read; the ``wanted`` ids not found
    there are also looked up in the archive.
    """
    paths = vc.paths(node)
    found: dict[int, str | None] = {}

    def read(path: str) -> str | None:
        try:
            with open(path, "rb") as fh:
                data = serializer.loads(fh.read())
            return str(data["ops"][0]["input"].get("comment") or "") or None
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError,
                errors.GanetiError):
            return None

    try:
        names = os.listdir(paths.queue_dir)
    except OSError:
        names = []
    for name in names:
        if not name.startswith("job-") or not name[4:].isdigit():
            continue
        marker = read(os.path.join(paths.queue_dir, name))
        if marker is not None and marker.startswith(prefix + "-"):
            found[int(name[4:])] = marker
    for job_id in sorted(wanted - set(found)):
        marker = read(archived_job_file_name(paths.queue_archive_dir, job_id))
        if marker is not None:
            found[job_id] = marker
    return found


@dataclass
class RoundResult:
    """One round: its plan, steps, history and the violations found."""

    seed: int
    plan: str
    steps: list[str]
    history: History
    violations: list[Violation]
    refused: dict[str, int]
    failovers: list[tuple[str, int]]

    def counts(self) -> dict[str, int]:
        """Violations per kind (every kind, zeros included)."""
        return count_by_kind(self.violations)

    def summary(self) -> str:
        kinds = " ".join(f"{k}={v}" for k, v in self.counts().items() if v)
        after = self.history.recovered_after
        return (f"round seed={self.seed} plan={self.plan} acks={len(self.history.acks)}"
                f" failovers={','.join(str(code) for _, code in self.failovers) or '-'}"
                f" recovered_after={'never' if after is None else f'{after:.1f}s'}"
                f" violations={len(self.violations)}" + (f" ({kinds})" if kinds else ""))


def run_round(vc: VirtualCluster, seed: int, plan: str | None = None, *,
              earlier: dict[int, str] | None = None, warmup: float = 1.0,
              limit: float = RECOVERY_LIMIT, log: Log | None = None) -> RoundResult:
    """One round (see the module docstring); ``plan`` None picks one from the seed."""
    rng = random.Random(seed)
    plan = plan or rng.choice(sorted(PLANS))
    nem = Nemesis(vc, rng, log or (lambda _msg: None))
    prefix = f"s{seed}"
    clients = Clients(vc, prefix, deadline=time.monotonic() + FAILOVER_TIMEOUT * 4 + limit,
                      hold=nem.hold)
    nem.note(f"seed {seed}: plan {plan}, master {working_master(vc)}")
    clients.start()
    try:
        time.sleep(warmup)
        try:
            PLANS[plan](nem)
        finally:
            stopped = time.monotonic()
            nem.stop_faults()
        recovered, master = recover(vc, nem, clients, since=stopped, limit=limit)
        time.sleep(0.3)
    finally:
        clients.stop()
    master = master or working_master(vc)
    history = History(acks=list(clients.acks), recovered_after=recovered,
                      recovery_limit=limit, earlier=dict(earlier or {}))
    history.jobs = read_jobs(vc, master, prefix, {a.job_id for a in history.acks})
    violations = check(history)
    nem.note(f"seed {seed}: {len(history.acks)} acks, master {master}"
              f" (masterd {'running' if masterd_running(vc, master) else 'NOT running'}),"
              f" recovered after {recovered if recovered is None else round(recovered, 1)}s,"
              f" {len(violations)} violations")
    for violation in violations[:20]:
        nem.note(f"  VIOLATION {violation}")
    return RoundResult(seed, plan, nem.steps, history, violations, dict(clients.refused),
                       list(nem.failovers))
