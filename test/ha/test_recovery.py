"""Node loss recovery decisions of ganeti/ha/recovery.py, on a fake clock."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes.clock import FakeClock  # noqa: E402

from ganeti.ha import recovery  # noqa: E402
from ganeti.ha.recovery import InstanceView, NodeView  # noqa: E402

CANDS = ["n1", "n2", "n3", "n4"]


# --- silence --------------------------------------------------------------------


def test_a_node_is_suspect_only_after_the_timeout_of_silence() -> None:
    clock = FakeClock()
    watch = recovery.SilenceWatch(10.0)
    watch.watch(["n2", "n3"], clock())
    clock.advance(6)
    watch.heard("n2", clock())
    clock.advance(3.9)
    assert watch.suspects(clock()) == []
    clock.advance(0.1)
    assert watch.suspects(clock()) == ["n3"]
    clock.advance(6)
    assert watch.suspects(clock()) == ["n2", "n3"]


def test_the_time_before_a_node_is_watched_is_not_silence() -> None:
    clock = FakeClock()
    watch = recovery.SilenceWatch(10.0)
    watch.watch(["n2"], clock())
    clock.advance(9)
    watch.watch(["n2", "n5"], clock())      # n5 added to the cluster now
    clock.advance(1)
    assert watch.suspects(clock()) == ["n2"]
    watch.heard("n9", clock())              # not watched: ignored
    assert watch.last_heard("n9") is None


def test_a_node_no_longer_online_is_forgotten() -> None:
    clock = FakeClock()
    watch = recovery.SilenceWatch(5.0)
    watch.watch(["n2", "n3"], clock())
    watch.sent("n3", clock())
    clock.advance(5)
    watch.watch(["n2"], clock())
    assert watch.suspects(clock()) == ["n2"]
    assert watch.last_sent("n3") is None


# --- the verdict -----------------------------------------------------------------


def test_dead_when_a_majority_of_candidates_cannot_reach_it() -> None:
    v = recovery.verdict("n4", "n1", CANDS, {"n2": False, "n3": False})
    assert v.dead
    assert v.confirmed == ("n1", "n2", "n3") and v.silent == ("n4",) and v.needed == 3
    assert v.describe().startswith("dead: ")


def test_partitioned_from_the_master_alone_is_not_dead() -> None:
    v = recovery.verdict("n4", "n1", CANDS, {"n2": True, "n3": True})
    assert not v.dead
    assert v.confirmed == ("n1",) and v.reached == ("n2", "n3")


@pytest.mark.parametrize("answers", [
    pytest.param({"n2": False, "n3": None}, id="one-candidate-silent"),
    pytest.param({"n2": False, "n3": True}, id="one-reaches-it"),
    pytest.param({"n2": False}, id="one-not-asked"),
])
def test_without_a_strict_majority_it_is_not_dead(answers) -> None:  # type: ignore[no-untyped-def]
    assert not recovery.verdict("n4", "n1", CANDS, answers).dead


def test_the_suspect_never_confirms_its_own_death() -> None:
    v = recovery.verdict("n3", "n1", ["n1", "n2", "n3"], {"n2": False, "n3": False})
    assert v.dead and v.confirmed == ("n1", "n2") and v.silent == ("n3",)


def test_a_non_candidate_suspect_counts_against_the_candidates_only() -> None:
    v = recovery.verdict("n9", "n1", ["n1", "n2", "n3"], {"n2": False, "n3": True})
    assert v.dead and v.needed == 2


def test_two_candidates_cannot_declare_the_other_dead() -> None:
    assert not recovery.verdict("n2", "n1", ["n1", "n2"], {}).dead


# --- the fence -------------------------------------------------------------------


def test_a_node_with_an_oob_program_is_powered_off() -> None:
    fence = recovery.choose_fence("n4", "/bin/oob", 100.0, None, 2.0)
    assert fence.kind == recovery.FENCE_OOB and fence.not_before == 0.0
    assert "/bin/oob" in fence.detail


def test_without_oob_the_master_waits_out_the_lease_of_the_last_request() -> None:
    fence = recovery.choose_fence("n4", "", 100.0, 20.0, 2.0)
    assert fence.kind == recovery.FENCE_LEASE
    assert fence.not_before == 100.0 + 2.0 + 20.0 + recovery.LEASE_MARGIN


def test_the_node_stops_its_instances_before_the_master_may_start_them() -> None:
    for lease in (4.0, 10.0, 20.0, 60.0):
        sent = 500.0
        fence = recovery.choose_fence("n4", "", sent, lease, 2.0)
        # the request arrived anywhere between sending and the RPC timeout
        for arrival in (sent, sent + 1.0, sent + 2.0):
            assert recovery.self_fence_at(arrival, lease) < fence.not_before
            assert recovery.self_fence_at(arrival, lease) >= arrival + lease / 2


def test_the_self_fence_lease_outlasts_a_master_autopromotion() -> None:
    assert recovery.self_fence_lease(5.0) == recovery.MIN_SELF_FENCE_LEASE
    assert recovery.self_fence_lease(40.0) == 80.0


def test_a_node_that_never_confirmed_a_lease_cannot_be_fenced() -> None:
    for lease, sent in ((None, 100.0), (30.0, None)):
        fence = recovery.choose_fence("n4", "", sent, lease, 2.0)
        assert fence.kind == recovery.FENCE_NONE and fence.not_before == float("inf")


def test_the_lease_bound_follows_what_the_node_confirmed() -> None:
    clock = FakeClock()
    watch = recovery.SilenceWatch(10.0)
    watch.watch(["n2"], clock())
    watch.sent("n2", clock(), 0.0)
    watch.heard("n2", clock(), 0.0)               # an OOB node: released
    assert watch.lease_bound("n2") is None
    watch.sent("n2", clock(), 30.0)               # OOB removed: a lease, not confirmed yet
    assert watch.lease_bound("n2") is None
    watch.heard("n2", clock(), 30.0)
    assert watch.lease_bound("n2") == 30.0
    watch.sent("n2", clock(), 60.0)               # the timeout raised: maybe held
    assert watch.lease_bound("n2") == 60.0
    watch.sent("n2", clock(), 0.0)                # a release, not confirmed: still held
    assert watch.lease_bound("n2") == 60.0
    watch.heard("n2", clock(), 0.0)
    assert watch.lease_bound("n2") is None


# --- the plan --------------------------------------------------------------------


def inst(name: str, *, template: str = "sharedfile", secondary: str | None = None,
         memory: int = 128, running: bool = True, repair: str | None = "failover",
         prio: int = 0) -> InstanceView:
    return InstanceView(name, template, secondary, memory, running, repair,
                        f"{repair} (instance)" if repair else "disabled", prio)


def nodes(**free: int) -> list[NodeView]:
    return [NodeView(name, mem) for name, mem in free.items()]


def test_tagged_instances_are_placed_by_priority_and_room() -> None:
    p = recovery.plan("n4", [inst("a", memory=300), inst("b", memory=300, prio=5),
                             inst("c", memory=300)], nodes(n2=700, n3=400), {}, 1)
    assert [(s.instance, s.target) for s in p.steps] == [("b", "n2"), ("a", "n2"), ("c", "n3")]
    assert all(s.ignore_consistency for s in p.steps)


def test_an_instance_that_fits_nowhere_is_reported_not_placed() -> None:
    p = recovery.plan("n4", [inst("a", memory=500), inst("b", memory=500)],
                      nodes(n2=600, n3=100), {}, 1)
    assert [s.instance for s in p.steps] == ["a"]
    assert p.skipped[0].instance == "b" and "N+1" in p.skipped[0].reason


def test_untagged_and_down_instances_are_reported() -> None:
    p = recovery.plan("n4", [inst("plain", repair=None), inst("fix", repair="fix-storage"),
                             inst("down", running=False), inst("up")],
                      nodes(n2=1000), {}, 1)
    assert [s.instance for s in p.steps] == ["up"]
    reasons = {s.instance: s.reason for s in p.skipped}
    assert reasons["plain"] == "not tagged for failover (disabled)"
    assert "not tagged for failover" in reasons["fix"]
    assert reasons["down"] == "administratively down"


def test_reinstall_allows_failover_too() -> None:
    p = recovery.plan("n4", [inst("a", repair="reinstall")], nodes(n2=1000), {}, 1)
    assert [s.instance for s in p.steps] == ["a"]


def test_drbd_goes_to_its_secondary_if_it_has_room() -> None:
    p = recovery.plan("n4", [inst("d1", template="drbd", secondary="n3", memory=200),
                             inst("d2", template="drbd", secondary="n3", memory=200),
                             inst("d3", template="drbd", secondary="n5")],
                      nodes(n2=5000, n3=300), {}, 1)
    assert [(s.instance, s.target) for s in p.steps] == [("d1", "n3")]
    reasons = {s.instance: s.reason for s in p.skipped}
    assert "N+1" in reasons["d2"] and "secondary n5" in reasons["d3"]


def test_local_disks_cannot_be_recovered() -> None:
    p = recovery.plan("n4", [inst("p", template="plain")], nodes(n2=1000), {}, 1)
    assert p.steps == () and "disks were on the dead node" in p.skipped[0].reason


def test_the_relocation_limit_holds() -> None:
    p = recovery.plan("n4", [inst("a"), inst("b")], nodes(n2=1000), {"a": 1}, 1)
    assert [s.instance for s in p.steps] == ["b"]
    assert p.skipped[0].reason == "relocation limit reached (1)"
    assert recovery.plan("n4", [inst("a")], nodes(n2=1000), {}, 0).steps == ()


def test_the_dead_node_never_takes_anything() -> None:
    p = recovery.plan("n4", [inst("a")], nodes(n4=9999, n2=200), {}, 1)
    assert [s.target for s in p.steps] == ["n2"]


def test_the_lease_covers_only_what_the_master_would_recover() -> None:
    covered = [i.name for i in (inst("tagged"), inst("reinstall", repair="reinstall"),
                                inst("drbd", template="drbd", secondary="n3"),
                                inst("untagged", repair=None),
                                inst("fix", repair="fix-storage"),
                                inst("down", running=False),
                                inst("plain", template="plain"),
                                inst("diskless", template="diskless"))
               if recovery.lease_covers(i)]
    assert covered == ["tagged", "reinstall", "drbd"]


def test_after_a_lease_fence_only_the_covered_instances_are_recovered() -> None:
    p = recovery.plan("n4", [inst("a"), inst("late"), inst("plain", repair=None)],
                      nodes(n2=1000), {}, 1, covered=frozenset(["a"]))
    assert [s.instance for s in p.steps] == ["a"]
    reasons = {s.instance: s.reason for s in p.skipped}
    assert "not covered by the self-fence lease n4 last confirmed" in reasons["late"]
    assert reasons["plain"] == "not tagged for failover (disabled)"
    # an out-of-band power-off (covered None) covers every instance
    assert len(recovery.plan("n4", [inst("a"), inst("late")], nodes(n2=1000), {}, 1,
                             covered=None).steps) == 2


def test_the_covered_instances_follow_the_confirmed_lease() -> None:
    clock = FakeClock()
    watch = recovery.SilenceWatch(10.0)
    watch.watch(["n2"], clock())
    assert watch.covered("n2") == frozenset()
    watch.sent("n2", clock(), 30.0, ["a"])
    assert watch.covered("n2") == frozenset()            # not confirmed yet
    watch.heard("n2", clock(), 30.0, ["a"])
    assert watch.covered("n2") == {"a"}
    watch.sent("n2", clock(), 30.0, ["a", "b"])           # b tagged: not confirmed yet
    assert watch.covered("n2") == {"a"}
    watch.heard("n2", clock(), 30.0, ["a", "b"])
    assert watch.covered("n2") == {"a", "b"}
    watch.sent("n2", clock(), 30.0, ["b"])                # a untagged: maybe arrived
    assert watch.covered("n2") == {"b"}
    watch.sent("n2", clock(), 30.0, ["a", "b"])           # tagged again: still maybe not
    assert watch.covered("n2") == {"b"}
    watch.heard("n2", clock(), 30.0, ["a", "b"])
    assert watch.covered("n2") == {"a", "b"}
    watch.sent("n2", clock(), 0.0, ["a"])                 # a release covers nothing
    assert watch.covered("n2") == frozenset()
    watch.heard("n2", clock(), 0.0)
    assert watch.covered("n2") == frozenset() and watch.lease_bound("n2") is None


def test_priority_tags() -> None:
    assert recovery.priority(["x", "ganeti:ha:priority:3", "ganeti:ha:priority:-1"]) == 3
    assert recovery.priority(["ganeti:ha:priority:high"]) == 0


def test_the_recovery_counts_are_read_from_the_tags() -> None:
    tags = ["x", "ganeti:ha:relocations:1", "ganeti:ha:relocations:2",   # a job cut short
            "ganeti:ha:relocations:lots", "ganeti:ha:failures:3"]
    assert recovery.count(tags, recovery.RELOCATIONS_PREFIX) == 2
    assert recovery.count(tags, recovery.FAILURES_PREFIX) == 3
    assert recovery.count(["x"], recovery.FAILURES_PREFIX) == 0
    assert recovery.count_tags(tags, recovery.RELOCATIONS_PREFIX) == [
        "ganeti:ha:relocations:1", "ganeti:ha:relocations:2", "ganeti:ha:relocations:lots"]
    assert recovery.describe_counts(tags) == "relocated 2 time(s) by recovery, 3 failed job(s)"
    assert recovery.describe_counts(["x"]) is None


def test_failed_jobs_are_retried_up_to_the_restart_limit() -> None:
    assert recovery.may_retry(1, 1) is True
    assert recovery.may_retry(2, 1) is False
    assert recovery.may_retry(1, 0) is False


def test_an_instance_over_a_limit_is_not_planned_nor_named_in_a_lease() -> None:
    moved = InstanceView("moved", "sharedfile", None, 128, True, "failover", "", 0, "fake", 1, 0)
    failing = InstanceView("failing", "sharedfile", None, 128, True, "failover", "", 0, "fake",
                           0, 2)
    fresh = inst("fresh")
    p = recovery.plan("n4", [moved, failing, fresh], nodes(n2=1000), {}, 1, None, 1)
    assert [s.instance for s in p.steps] == ["fresh"]
    assert [s.reason.split(" (")[0] for s in p.skipped] == ["restart limit reached",
                                                            "relocation limit reached"]
    assert "remove ganeti:ha:failures:2 to try again" in p.skipped[0].reason
    # its node's lease no longer names it: stopping it would buy no safety
    assert recovery.lease_covers(moved) is True
    assert recovery.lease_covers(moved, 1, 1) is False
    assert recovery.lease_covers(failing, 1, 1) is False
    assert recovery.lease_covers(fresh, 1, 1) is True
    assert recovery.lease_covers(moved, 2, 1) is True


def test_a_lease_is_relayed_by_the_last_good_candidate_first() -> None:
    cands = ["n1", "n2", "n3", "n4"]
    # neither the master (n1) nor the node itself (n4) relays
    assert recovery.relay_order("n4", "n1", cands, None) == ([], ["n2", "n3"])
    assert recovery.relay_order("n4", "n1", cands, "n3") == (["n3"], ["n2"])
    # a relay that is no longer a candidate is not asked first
    assert recovery.relay_order("n4", "n1", ["n1", "n2", "n4"], "n3") == ([], ["n2"])


def test_the_fence_record_round_trips_and_the_latest_wins() -> None:
    tag = recovery.fenced_tag(recovery.FENCE_OOB, 1_796_338_450.7)
    assert tag == "ganeti:ha:fenced:oob:1796338450"
    assert recovery.fenced_record([tag]) == ("oob", 1_796_338_450)
    assert recovery.fenced_record(["ganeti:ha:fenced:lease:5", "ganeti:ha:fenced:oob:3",
                                   "web"]) == ("lease", 5)
    # not ours or malformed: no record
    for tags in ([], ["ganeti:ha:fenced:"], ["ganeti:ha:fenced:none:5"],
                 ["ganeti:ha:fenced:oob:soon"], ["ganeti:ha:relocations:1"]):
        assert recovery.fenced_record(tags) is None


def test_a_resumed_recovery_covers_every_instance_only_after_a_power_off() -> None:
    assert recovery.resume_covered(recovery.FENCE_OOB) is None
    assert recovery.resume_covered(recovery.FENCE_LEASE) == frozenset()
    ha = recovery.InstanceView("web1", "sharedfile", None, 512, True, "failover",
                               "failover (instance)", 0, "fake")
    nodes = [recovery.NodeView("node2", 4096, "g")]
    assert [s.instance for s in recovery.plan(
        "node4", [ha], nodes, {}, 1, recovery.resume_covered("oob")).steps] == ["web1"]
    lease = recovery.plan("node4", [ha], nodes, {}, 1, recovery.resume_covered("lease"))
    assert lease.steps == () and "may still run there" in lease.skipped[0].reason


def _op(source: str) -> dict[str, object]:
    return {"OP_ID": "OP_INSTANCE_FAILOVER", "reason": [[source, "why", 1]]}


def test_only_unfinished_jobs_of_the_recovery_hold_a_resume_back() -> None:
    jobs = [(1, "success", [_op("gnt:ha")]), (2, "queued", [_op("gnt:ha")]),
            (3, "running", [{"OP_ID": "OP_NODE_HA_REPORT"}, _op("gnt:ha")]),
            (4, "running", [_op("gnt:opcode:failover")]), (5, "error", [_op("gnt:ha")]),
            (6, "waiting", [{"OP_ID": "OP_TEST_DELAY"}]), (7, None, []),
            (8, "canceling", [_op("gnt:ha")])]
    assert recovery.unfinished_ha_jobs(jobs) == [2, 3, 8]
