"""The master's node loss recovery thread (ganeti/server/harecovery.py), one round at a
time on a fake clock, against a fake configuration, fake RPC and a recording job queue."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config  # noqa: E402
from fakes.clock import FakeClock  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, errors  # noqa: E402
from ganeti.ha import policy, recovery  # noqa: E402
from ganeti.objects import Disk, Instance  # noqa: E402
from ganeti.server.harecovery import Monitor  # noqa: E402

N1, N2, N3, N4 = (node_name(k) for k in range(1, 5))
FAILOVER = "ganeti:watcher:autorepair:failover"


class Queue:
    """Records submitted jobs; every job succeeds (or fails, when told)."""

    def __init__(self, cfg: Any = None, clock: Any = None) -> None:
        self.cfg = cfg
        self.clock = clock
        self.jobs: list[list[dict[str, Any]]] = []
        self.failing: set[str] = set()
        #: per job, when it ends (a lease fence's wait, on the fake clock)
        self.ends: list[float] = []

    def submit(self, ops: list[dict[str, Any]]) -> int:
        self.jobs.append(ops)
        now = self.clock() if self.clock is not None else 0.0
        self.ends.append(now + sum(float(op.get("lease_wait", 0.0)) for op in ops))
        if self._final(len(self.jobs)) == constants.JOB_STATUS_SUCCESS:
            self._apply_tags(ops)
        return len(self.jobs)

    def _apply_tags(self, ops: list[dict[str, Any]]) -> None:
        """A succeeded job's tag opcodes, on the fake configuration's instances."""
        for op in ops:
            if op["OP_ID"] not in ("OP_TAGS_SET", "OP_TAGS_DEL") or self.cfg is None:
                continue
            inst = (self.cfg.get_node_info_by_name(op["name"]) if op["kind"] == "node"
                    else self.cfg.get_instance_info_by_name(op["name"]))
            if op["OP_ID"] == "OP_TAGS_SET":
                inst.tags.extend(t for t in op["tags"] if t not in inst.tags)
            else:
                assert all(t in inst.tags for t in op["tags"]), (op, inst.tags)
                inst.tags[:] = [t for t in inst.tags if t not in op["tags"]]

    def status(self, job: int) -> str:
        if self.clock is not None and self.clock() < self.ends[job - 1]:
            return constants.JOB_STATUS_RUNNING
        return self._final(job)

    def _final(self, job: int) -> str:
        names = {op.get("instance_name") for op in self.jobs[job - 1]}
        return (constants.JOB_STATUS_ERROR if names & self.failing
                else constants.JOB_STATUS_SUCCESS)

    def op_ids(self) -> list[list[str]]:
        return [[op["OP_ID"] for op in job] for job in self.jobs]


def _relay_fails(node: str, args: list[Any]) -> Any:
    raise errors.RpcError(f"ha_lease_relay: {args[0]} did not confirm: connection timed out")


def _setup(tmp_path, *, on: bool = True, oob: str = ""):  # type: ignore[no-untyped-def]
    cfg = make_config(tmp_path, nodes=4)
    cluster = cfg.get_cluster_info()
    cluster.ha_recovery = on
    cluster.ha_node_timeout = 10
    cluster.ndparams["oob_program"] = oob
    for name, tags in (("ha1", [FAILOVER]), ("other", [])):
        disk = Disk(dev_type=constants.DT_SHARED_FILE, size=8,
                    logical_id=["loop", f"/srv/{name}/d0"], nodes=["uuid-node4"], iv_name="disk/0")
        cfg.add_instance(Instance(name=name, primary_node="uuid-node4", os="tinyos",
                                  disk_template=constants.DT_SHARED_FILE, tags=tags,
                                  admin_state=constants.ADMINST_UP), [disk])
    rpc = FakeRpc(cfg)
    # by default no candidate reaches a node the master does not reach (its lease is
    # not relayed); the relay tests say otherwise
    rpc.set_handler("ha_lease_relay", _relay_fails)
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    clock = FakeClock()
    queue = Queue(cfg, clock)
    waited: list[float] = []

    def wait(seconds: float) -> bool:
        waited.append(seconds)
        clock.advance(seconds)
        return False

    monitor = Monitor(ctx, queue.submit, queue.status, threading.Event(), clock=clock,
                      wall=lambda: 1_800_000_000.0, wait=wait)
    return cfg, rpc, queue, clock, monitor, waited


def _failover_jobs(queue: Queue) -> list[list[dict[str, Any]]]:
    return [job for job in queue.jobs if any(op["OP_ID"] == "OP_INSTANCE_FAILOVER" for op in job)]


def _rounds(monitor: Monitor, clock: FakeClock, count: int) -> None:
    for _ in range(count):
        monitor.round()
        clock.advance(2.0)


def test_off_it_sends_nothing_and_submits_nothing(tmp_path) -> None:
    _, rpc, queue, clock, monitor, _ = _setup(tmp_path, on=False)
    _rounds(monitor, clock, 20)
    assert rpc.calls == [] and queue.jobs == []


def _leases(rpc: FakeRpc, node: str) -> list[list[Any]]:
    """The arguments of every ``ha_lease`` call ``node`` got."""
    return [args for nodes, args in rpc.calls_to("ha_lease") if node in nodes]


def test_every_other_online_node_gets_its_lease_each_round(tmp_path) -> None:
    _, rpc, queue, clock, monitor, _ = _setup(tmp_path)
    _rounds(monitor, clock, 3)
    # one call per node, each with its own arguments: node4's lease covers its
    # instance tagged for failover, not the untagged one
    assert all(len(nodes) == 1 for nodes, _ in rpc.calls_to("ha_lease"))
    assert _leases(rpc, N4) == [[30.0, [{"name": "ha1", "hypervisor": "fake"}]]] * 3
    # a node with no instance the master would recover holds no lease
    assert _leases(rpc, N2) == _leases(rpc, N3) == [[0.0, []]] * 3
    assert _leases(rpc, N1) == []                   # the master itself
    assert queue.jobs == []


def test_with_oob_everywhere_a_round_reads_no_instance(tmp_path, monkeypatch) -> None:
    """Every node powered out of band: no lease names an instance, so the rounds (every
    2 s) never go through the instances."""
    cfg, rpc, queue, clock, monitor, _ = _setup(tmp_path, oob="/usr/lib/oob")

    def refuse() -> Any:
        raise AssertionError("the instances were read")

    monkeypatch.setattr(cfg, "get_all_instances_info", refuse)
    _rounds(monitor, clock, 3)
    assert _leases(rpc, N4) == [[0.0, []]] * 3 and queue.jobs == []


def test_a_suspended_or_down_instance_is_not_covered(tmp_path) -> None:
    cfg, rpc, _, clock, monitor, _ = _setup(tmp_path)
    ha1 = next(i for i in cfg.get_all_instances_info().values() if i.name == "ha1")
    ha1.admin_state = constants.ADMINST_DOWN
    _rounds(monitor, clock, 1)
    ha1.admin_state = constants.ADMINST_UP
    ha1.tags.append(policy.SUSPEND_PREFIX)             # suspended for ever
    _rounds(monitor, clock, 1)
    assert _leases(rpc, N4) == [[0.0, []], [0.0, []]]


def test_a_silent_node_the_candidates_reach_is_left_alone(tmp_path) -> None:
    _, rpc, queue, clock, monitor, _ = _setup(tmp_path)
    rpc.set_failure("ha_lease", N4, "connection refused")
    rpc.set_handler("ha_node_reachable", lambda node, args: {"reachable": True, "error": ""})
    _rounds(monitor, clock, 10)
    assert rpc.calls_to("ha_node_reachable")          # asked, after the timeout
    assert queue.jobs == []


def _dies_after_one_round(rpc: FakeRpc) -> None:
    """node4 confirms its first lease, then never answers again."""
    answered: list[str] = []

    def lease(node: str, args: list[Any]) -> dict[str, Any]:
        if node == N4 and node in answered:
            raise errors.RpcError("connection refused")
        answered.append(node)
        return {"lease": args[0], "fenced": None}

    rpc.set_handler("ha_lease", lease)


def test_a_dead_node_that_never_confirmed_a_lease_is_not_recovered(tmp_path) -> None:
    _, rpc, queue, clock, monitor, waited = _setup(tmp_path)
    rpc.set_failure("ha_lease", N4, "connection refused")
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": False, "error": "refused"})
    _rounds(monitor, clock, 20)
    assert rpc.calls_to("ha_node_reachable")        # found dead...
    assert queue.jobs == [] and waited == []        # ...but it cannot be fenced


def test_a_dead_node_without_oob_is_waited_out_then_recovered(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor, waited = _setup(tmp_path)
    _dies_after_one_round(rpc)
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": False, "error": "refused"})
    _rounds(monitor, clock, 5)                       # 8 s of silence: not yet a suspect
    assert rpc.calls_to("ha_node_reachable") == []
    _rounds(monitor, clock, 1)
    asked = rpc.calls_to("ha_node_reachable")
    assert len(asked) == 1 and sorted(asked[0][0]) == [N2, N3] and asked[0][1][0] == N4
    assert queue.op_ids()[0] == ["OP_NODE_HA_FENCE"]
    fence = queue.jobs[0][0]
    assert fence["node_name"] == N4 and fence["fence"] == "lease"
    assert any(f"Node {N4} declared dead" in line for line in fence["messages"])
    # the job waits the lease (30 s) out from the last request (a relay tried in
    # vain: 5 s later), its RPC timeout and the margin (2 s each) more
    assert 30.0 < fence["lease_wait"] <= 30.0 + 5.0 + 2.0 + 2.0
    assert all(entry[0] == "gnt:ha" for job in queue.jobs for op in job
               for entry in op["reason"])
    # the lease (30 s) waited out from the last request before the failover, the
    # other nodes' leases renewed meanwhile (every 2 s), the dead node's never
    assert sum(waited) >= fence["lease_wait"] and max(waited) <= 2.0
    procs = [proc for proc, _, _ in rpc.calls]
    after = [nodes for proc, nodes, _ in rpc.calls[procs.index("ha_node_reachable"):]
             if proc == "ha_lease"]
    assert len(after) >= 30
    assert {n for nodes in after for n in nodes} == {N2, N3}
    assert queue.op_ids()[1:] == [["OP_NODE_HA_REPORT"],
                                  ["OP_NODE_HA_REPORT", "OP_INSTANCE_FAILOVER", "OP_TAGS_SET"]]
    # the relocation counted in the instance's tags, by the failover's own job
    assert queue.jobs[2][2]["tags"] == ["ganeti:ha:relocations:1"]
    report = queue.jobs[1][0]["messages"]
    assert any("leave other: not tagged for failover (disabled)" in line for line in report)
    failover = queue.jobs[2][1]
    assert failover["instance_name"] == "ha1" and failover["ignore_consistency"] is True
    assert failover["target_node"] in (N1, N2, N3)
    assert any("fenced by its self-fence lease" in line
               for line in queue.jobs[2][0]["messages"])


def test_a_dead_node_with_oob_is_powered_off_without_waiting(tmp_path) -> None:
    _, rpc, queue, clock, monitor, waited = _setup(tmp_path, oob="/usr/lib/oob")
    rpc.set_failure("ha_lease", N4, "connection refused")
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": False, "error": "refused"})
    _rounds(monitor, clock, 6)
    assert queue.op_ids()[0] == ["OP_NODE_HA_FENCE"]
    fence = queue.jobs[0][0]
    assert (fence["node_name"], fence["fence"], fence["lease_wait"]) == (N4, "oob", 0.0)
    assert all(entry[0] == "gnt:ha" for entry in fence["reason"])
    assert waited == []
    # with OOB the nodes hold no lease
    assert all(args[0] == 0.0 for _, args in rpc.calls_to("ha_lease"))


def test_a_failed_recovery_job_is_submitted_again_up_to_the_limit(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor, _ = _setup(tmp_path, oob="/usr/lib/oob")
    rpc.set_failure("ha_lease", N4, "connection refused")
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": False, "error": "refused"})
    queue.failing.add("ha1")
    _rounds(monitor, clock, 6)
    failovers = _failover_jobs(queue)
    assert len(failovers) == 2                      # the job and one restart (the default)
    # each failure counted in the instance's tags, by a job of its own: a new master
    # (which reads the configuration) leaves it alone until the tag is removed
    ha1 = cfg.get_instance_info_by_name("ha1")
    assert [t for t in ha1.tags if t.startswith("ganeti:ha:")] == ["ganeti:ha:failures:2"]


def test_a_refused_fence_job_recovers_nothing(tmp_path) -> None:
    _, rpc, queue, clock, monitor, _ = _setup(tmp_path, oob="/usr/lib/oob")
    rpc.set_failure("ha_lease", N4, "connection refused")
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": False, "error": "refused"})

    def refuse(ops: list[dict[str, Any]]) -> int:
        raise errors.JobQueueDrainError("drained")

    monitor.submit = refuse
    _rounds(monitor, clock, 6)
    assert queue.jobs == []


def test_turned_off_the_leases_are_released(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor, _ = _setup(tmp_path)
    _rounds(monitor, clock, 2)
    cfg.get_cluster_info().ha_recovery = False
    _rounds(monitor, clock, 3)
    assert [args[0] for args in _leases(rpc, N4)] == [30.0, 30.0, 0.0]   # released once


def test_an_instance_tagged_after_the_last_confirmed_lease_is_not_recovered(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor, waited = _setup(tmp_path)
    _dies_after_one_round(rpc)
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": False, "error": "refused"})
    _rounds(monitor, clock, 1)                       # node4 confirms a lease covering ha1
    other = next(i for i in cfg.get_all_instances_info().values() if i.name == "other")
    other.tags.append(FAILOVER)                      # too late: node4 never confirms it
    _rounds(monitor, clock, 6)
    assert _leases(rpc, N4)[1][1] == [{"name": "ha1", "hypervisor": "fake"},
                                      {"name": "other", "hypervisor": "fake"}]
    failovers = [job[1]["instance_name"] for job in _failover_jobs(queue)]
    assert failovers == ["ha1"]
    report = queue.jobs[1][0]["messages"]
    assert any(f"leave other: not covered by the self-fence lease {N4} last confirmed" in line
               for line in report)


def test_with_oob_every_tagged_instance_is_recovered(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor, _ = _setup(tmp_path, oob="/usr/lib/oob")
    _dies_after_one_round(rpc)
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": False, "error": "refused"})
    _rounds(monitor, clock, 1)
    other = next(i for i in cfg.get_all_instances_info().values() if i.name == "other")
    other.tags.append(FAILOVER)                      # the power-off stops it too
    _rounds(monitor, clock, 6)
    failovers = sorted(job[1]["instance_name"] for job in _failover_jobs(queue))
    assert failovers == ["ha1", "other"]


def test_a_dead_node_without_an_instance_to_recover_is_left_alone(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor, waited = _setup(tmp_path)
    ha1 = next(i for i in cfg.get_all_instances_info().values() if i.name == "ha1")
    ha1.tags.clear()                                 # nothing on node4 to recover: no lease
    _dies_after_one_round(rpc)
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": False, "error": "refused"})
    _rounds(monitor, clock, 10)
    assert rpc.calls_to("ha_node_reachable")
    assert queue.jobs == [] and waited == []


def _relays(rpc: FakeRpc) -> list[tuple[list[str], list[Any]]]:
    return rpc.calls_to("ha_lease_relay")


def test_a_node_cut_off_from_the_master_alone_gets_its_lease_through_a_candidate(tmp_path) -> None:
    """node4 does not answer the master, the candidates reach it: its lease goes through
    one of them each round (the same one while it works), and nothing is recovered."""
    _, rpc, queue, clock, monitor, _ = _setup(tmp_path)
    rpc.set_failure("ha_lease", N4, "Node node4: timed out")
    rpc.set_handler("ha_node_reachable", lambda node, args: {"reachable": True, "error": ""})
    forwarded: list[tuple[str, list[Any]]] = []

    def relay(via: str, args: list[Any]) -> dict[str, Any]:
        forwarded.append((via, args))
        return {"lease": args[3], "fenced": None}

    rpc.set_handler("ha_lease_relay", relay)
    _rounds(monitor, clock, 30)                     # 60 s: twice the lease
    assert queue.jobs == []
    # the first round asks every other candidate at once, then the first that
    # forwarded it alone, every round
    calls = _relays(rpc)
    assert sorted(calls[0][0]) == [N2, N3]
    assert all(nodes == [N2] for nodes, _ in calls[1:]) and len(calls) == 30
    node, address, master, lease, instances, timeout = calls[0][1]
    assert (node, master, lease) == (N4, N1, 30.0)
    assert instances == [{"name": "ha1", "hypervisor": "fake"}]
    assert monitor.watch is not None and monitor.watch.suspects(clock()) == [N4]  # silent still


def test_a_failing_relay_falls_back_to_the_other_candidates(tmp_path) -> None:
    _, rpc, queue, clock, monitor, _ = _setup(tmp_path)
    rpc.set_failure("ha_lease", N4, "Node node4: timed out")
    rpc.set_handler("ha_node_reachable", lambda node, args: {"reachable": True, "error": ""})
    broken: set[str] = set()

    def relay(via: str, args: list[Any]) -> dict[str, Any]:
        if via in broken:
            raise errors.RpcError("timed out")
        return {"lease": args[3], "fenced": None}

    rpc.set_handler("ha_lease_relay", relay)
    _rounds(monitor, clock, 2)
    assert _relays(rpc)[-1][0] == [N2]
    broken.add(N2)
    _rounds(monitor, clock, 1)                      # N2 fails: N3 asked in the same round
    assert [nodes for nodes, _ in _relays(rpc)[-2:]] == [[N2], [N3]]
    _rounds(monitor, clock, 1)
    assert _relays(rpc)[-1][0] == [N3]
    assert queue.jobs == []


def test_a_dead_node_whose_lease_went_through_a_candidate_is_waited_out_longer(tmp_path) -> None:
    """The last relayed lease may reach the node later than a direct one: the fence
    waits for it (the relay's timeout more)."""
    _, rpc, queue, clock, monitor, waited = _setup(tmp_path)
    rpc.set_failure("ha_lease", N4, "Node node4: timed out")
    relayed = {"on": True}

    def relay(via: str, args: list[Any]) -> dict[str, Any]:
        if not relayed["on"]:
            raise errors.RpcError("timed out")
        return {"lease": args[3], "fenced": None}

    rpc.set_handler("ha_lease_relay", relay)
    rpc.set_handler("ha_node_reachable",
                    lambda node, args: {"reachable": relayed["on"], "error": ""})
    _rounds(monitor, clock, 8)
    assert queue.jobs == []
    relayed["on"] = False                           # now nobody reaches it: dead
    _rounds(monitor, clock, 2)
    assert queue.jobs, "not recovered"
    # waited from the last relayed request: lease 30 s + relay delay + RPC timeout + margin,
    # less the 2 s round since it
    assert queue.jobs[0][0]["lease_wait"] >= 30.0 + 5.0 + 2.0 + 2.0 - 2.0 - 0.01


def test_turned_off_a_node_cut_off_from_the_master_is_released_through_a_candidate(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor, _ = _setup(tmp_path)
    _rounds(monitor, clock, 1)
    rpc.set_failure("ha_lease", N4, "Node node4: timed out")
    rpc.set_handler("ha_lease_relay", lambda via, args: {"lease": args[3], "fenced": None})
    cfg.get_cluster_info().ha_recovery = False
    _rounds(monitor, clock, 3)
    releases = [args for _, args in _relays(rpc) if args[3] == 0.0]
    assert len(releases) == 1 and releases[0][0] == N4


# --- a recovery cut short by a master failover, resumed ---------------------------
FENCED_AT = 1_799_999_990


def _fenced_by_an_old_master(tmp_path, fence: str = "oob", unfinished=None):  # type: ignore[no-untyped-def]
    """node4 fenced by an earlier master (offline, its record in its tags) whose
    failovers never ran; a new master's monitor with the record in its configuration."""
    cfg, rpc, queue, clock, _, waited = _setup(tmp_path, oob="/usr/lib/oob")
    node4 = cfg.get_node_info_by_name(N4)
    node4.offline = True
    node4.master_candidate = False
    node4.tags.append(recovery.fenced_tag(fence, FENCED_AT))
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    monitor = Monitor(ctx, queue.submit, queue.status, threading.Event(), clock=clock,
                      wall=lambda: 1_800_000_000.0, wait=lambda s: False,
                      unfinished=unfinished)
    return cfg, rpc, queue, clock, monitor


def _run_failovers(cfg: Any, queue: Queue) -> None:
    """What the queue's failover jobs did: each instance now primary on its target."""
    for job in _failover_jobs(queue):
        op = next(op for op in job if op["OP_ID"] == "OP_INSTANCE_FAILOVER")
        inst = cfg.get_instance_info_by_name(op["instance_name"])
        inst.primary_node = cfg.get_node_info_by_name(op["target_node"]).uuid


def test_a_new_master_resumes_the_recovery_of_a_fenced_node_once(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor = _fenced_by_an_old_master(tmp_path)
    _rounds(monitor, clock, 1)
    # the last (here the only) failover job also removes the node's fence record
    assert queue.op_ids() == [["OP_NODE_HA_REPORT"],
                              ["OP_NODE_HA_REPORT", "OP_INSTANCE_FAILOVER", "OP_TAGS_SET",
                               "OP_TAGS_DEL"]]
    unfence = queue.jobs[1][3]
    assert (unfence["kind"], unfence["name"]) == ("node", N4)
    assert unfence["tags"] == [recovery.fenced_tag("oob", FENCED_AT)]
    report = queue.jobs[0][0]["messages"]
    assert any("fenced by out-of-band power-off" in line and "resumed" in line
               for line in report)
    assert any("leave other: not tagged for failover" in line for line in report)
    failover = queue.jobs[1][1]
    assert failover["instance_name"] == "ha1" and failover["ignore_consistency"] is True
    assert all(entry[0] == "gnt:ha" for job in queue.jobs for op in job
               for entry in op["reason"])
    assert recovery.fenced_record(cfg.get_node_info_by_name(N4).tags) is None
    _run_failovers(cfg, queue)
    _rounds(monitor, clock, 5)
    assert len(queue.jobs) == 2                      # nothing submitted again


def test_a_record_left_with_nothing_to_recover_is_removed_by_a_job_of_its_own(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor = _fenced_by_an_old_master(tmp_path)
    cfg.get_instance_info_by_name("ha1").primary_node = "uuid-node2"   # moved already
    _rounds(monitor, clock, 3)
    assert queue.op_ids() == [["OP_TAGS_DEL"]]
    assert queue.jobs[0][0]["kind"] == "node" and queue.jobs[0][0]["name"] == N4
    assert recovery.fenced_record(cfg.get_node_info_by_name(N4).tags) is None


def test_a_resumed_recovery_waits_for_the_old_master_s_unfinished_jobs(tmp_path) -> None:
    left = [[17]]
    cfg, rpc, queue, clock, monitor = _fenced_by_an_old_master(
        tmp_path, unfinished=lambda: left[0])
    _rounds(monitor, clock, 3)
    assert queue.jobs == []                          # job 17 still queued or running
    # job 17 was the old master's failover: it ran, ha1 is no longer on node4
    cfg.get_instance_info_by_name("ha1").primary_node = "uuid-node2"
    left[0] = []
    _rounds(monitor, clock, 3)
    assert queue.op_ids() == [["OP_TAGS_DEL"]] and _failover_jobs(queue) == []


def test_a_resumed_lease_fence_starts_nothing_elsewhere(tmp_path) -> None:
    """Which instances the node's last lease named was known to the old master only:
    any may still run there, so nothing is started; the record is dropped."""
    cfg, rpc, queue, clock, monitor = _fenced_by_an_old_master(tmp_path, fence="lease")
    _rounds(monitor, clock, 3)
    assert queue.op_ids() == [["OP_TAGS_DEL"]]


def test_a_node_without_a_fence_record_is_not_resumed(tmp_path) -> None:
    cfg, rpc, queue, clock, monitor = _fenced_by_an_old_master(tmp_path)
    cfg.get_node_info_by_name(N4).tags.clear()      # offline by an operator's hand
    _rounds(monitor, clock, 3)
    assert queue.jobs == []
