"""The replication plan (ganeti.replication.core): decisions only, a fake clock, no threads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes.clock import FakeClock  # noqa: E402

from ganeti.objects import Cluster, ConfigData, Node  # noqa: E402
from ganeti.replication import core  # noqa: E402
from ganeti.replication.core import (ConfigSend, DrainFlag, FileUpdate,  # noqa: E402
                                     JobOp, LaneBatch, PushOutcome, QueueCopy, Renames,
                                     ReplicationPlan)

C2, C3, N4 = "node2", "node3", "node4"
SSCONF = {"master_node": "node1"}


def _plan(clock: FakeClock | None = None, **kw) -> ReplicationPlan:
    plan = ReplicationPlan(clock or FakeClock(), **kw)
    plan.set_targets([C2, C3], [C2, C3, N4])
    return plan


def _config(plan: ReplicationPlan) -> ConfigSend:
    send = plan.take_config()
    assert send is not None
    return send


def _lane(plan: ReplicationPlan, node: str = C2, **kw) -> LaneBatch:
    batch = plan.take_lane(node, **kw)
    assert batch is not None
    return batch


def _push(plan: ReplicationPlan, serial: int, ssconf: dict[str, str] | None = None,
          outcome: PushOutcome | None = None) -> ConfigSend:
    """Queue, take and complete one config push; returns what was handed out."""
    assert plan.queue_config(serial, b"cfg-%d" % serial, dict(ssconf or SSCONF))
    send = _config(plan)
    plan.config_done(send, PushOutcome([]) if outcome is None else outcome)
    return send


def _send_jobs(plan: ReplicationPlan, node: str = C2) -> list[JobOp]:
    """Take and confirm one lane batch of ``node``; returns its operations."""
    batch = _lane(plan, node)
    plan.lane_done(batch, len(batch.segments))
    return [seg.op for seg in batch.segments]


def _stale_after_failure(plan: ReplicationPlan, node: str = C3) -> None:
    plan.queue_job_op(FileUpdate({"q/job-1": b"1"}))
    batch = _lane(plan, node)
    plan.lane_done(batch, 0)          # the node failed it
    for other in plan.lane_nodes():   # the others confirmed it
        if other != node and not plan.lane_busy(other) and other not in plan.stale():
            _send_jobs(plan, other)


# --- targets ------------------------------------------------------------------------

def test_targets_are_online_nodes_without_the_master() -> None:
    nodes = {f"u{i}": Node(name=f"node{i}", uuid=f"u{i}", master_candidate=i <= 3,
                           offline=i == 5)
             for i in (5, 4, 3, 2, 1)}
    data = ConfigData(cluster=Cluster(master_node="u1"), nodes=nodes)
    assert core.replication_targets(data) == (["node2", "node3"], ["node2", "node3", "node4"])


def test_a_push_goes_to_the_targets_of_its_time() -> None:
    plan = _plan()
    plan.queue_config(1, b"one", SSCONF)
    plan.set_targets([C2], [C2, C3, N4])          # a later change demoted node3
    send = _config(plan)
    assert send.push.candidates == [C2, C3] and send.push.nodes == [C2, C3, N4]


# --- config pushes ------------------------------------------------------------------

def test_pending_config_pushes_coalesce_to_the_newest() -> None:
    plan = _plan()
    for serial in (1, 2, 3):
        assert plan.queue_config(serial, b"cfg-%d" % serial, SSCONF)
    send = _config(plan)
    assert (send.push.serial, send.push.data) == (3, b"cfg-3")
    assert plan.take_config() is None               # nothing left: one push for three


def test_stale_config_bytes_never_replace_newer_ones() -> None:
    plan = _plan()
    assert plan.queue_config(5, b"new", SSCONF)
    assert not plan.queue_config(4, b"old", SSCONF)   # late, out of order
    assert not plan.queue_config(5, b"again", SSCONF)
    assert _config(plan).push.data == b"new"


def test_one_config_push_at_a_time() -> None:
    plan = _plan()
    plan.queue_config(1, b"one", SSCONF)
    first = _config(plan)
    plan.queue_config(2, b"two", SSCONF)
    assert plan.config_busy and plan.config_pending and plan.take_config() is None
    plan.config_done(first, PushOutcome([]))
    assert _config(plan).push.serial == 2


def test_a_held_config_lane_hands_out_no_push_until_released() -> None:
    plan = _plan()
    plan.queue_config(1, b"one", SSCONF)
    first = _config(plan)
    assert plan.hold_config() is False                # a push is under way: not taken
    plan.config_done(first, PushOutcome([]))
    assert plan.hold_config() is True
    plan.queue_config(2, b"two", SSCONF)              # queued while held: it waits
    assert plan.config_pending and plan.take_config() is None
    assert plan.hold_config() is False                # one holder at a time
    plan.release_config()
    assert _config(plan).push.serial == 2


def test_a_wanted_config_lane_gets_the_turn_after_the_push_under_way() -> None:
    plan = _plan()
    plan.queue_config(1, b"one", SSCONF)
    first = _config(plan)
    plan.want_config()                                # a holder waits for the push
    plan.queue_config(2, b"two", SSCONF)
    plan.config_done(first, PushOutcome([]))
    assert plan.take_config() is None                 # no new push jumps the queue
    assert plan.hold_config() is True
    plan.unwant_config()
    plan.release_config()
    assert not plan.config_wanted and _config(plan).push.serial == 2


def test_a_serial_counts_as_replicated_once_attempted_even_if_nodes_failed() -> None:
    plan = _plan()
    plan.queue_config(7, b"seven", SSCONF)
    assert plan.queued_serial() == 7 and plan.replicated_serial() == 0
    send = _config(plan)
    assert plan.replicated_serial() == 0             # in flight: not yet
    plan.config_done(send, PushOutcome([C2, C3]))
    assert plan.replicated_serial() == 7


def test_a_push_that_broke_off_still_counts_as_attempted() -> None:
    plan = _plan()
    _push(plan, 1)
    plan.queue_config(2, b"two", {"master_node": "other"})
    send = _config(plan)
    plan.config_done(send, None)                     # unexpected error: nothing known
    assert plan.replicated_serial() == 2
    assert plan.stale() == set()                     # it carried no job files
    assert plan.take_config() is None


def test_ssconf_goes_to_the_other_nodes_only_when_changed() -> None:
    plan = _plan()
    first = _push(plan, 1)
    assert first.ssconf_changed and first.ssconf_nodes == [N4]
    second = _push(plan, 2)
    assert not second.ssconf_changed and second.ssconf_nodes == []
    third = _push(plan, 3, {"master_node": "node2"})
    assert third.ssconf_changed and third.ssconf_nodes == [N4]


@pytest.mark.parametrize("outcome", [PushOutcome([C3]), PushOutcome([], ssconf_nodes_failed=True)],
                         ids=["candidate-failed", "ssconf-node-failed"])
def test_failed_ssconf_delivery_is_resent_with_the_next_push(outcome: PushOutcome) -> None:
    plan = _plan()
    _push(plan, 1, outcome=outcome)
    assert _push(plan, 2).ssconf_changed             # same values, sent again
    assert not _push(plan, 3).ssconf_changed         # delivered everywhere now


def test_a_candidate_failing_an_unchanged_ssconf_push_does_not_force_a_resend() -> None:
    plan = _plan()
    _push(plan, 1)
    _push(plan, 2, outcome=PushOutcome([C3]))        # values unchanged: not part of it
    assert not _push(plan, 3).ssconf_changed


def test_a_broken_off_push_keeps_the_last_delivered_ssconf() -> None:
    plan = _plan()
    _push(plan, 1)
    plan.queue_config(2, b"two", SSCONF)
    plan.config_done(_config(plan), None)
    assert not _push(plan, 3).ssconf_changed


# --- the job-file stream and its lanes ---------------------------------------------

def test_a_config_push_carries_no_job_files() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"q/job-7": b"7"}))
    plan.queue_config(1, b"one", SSCONF)
    _config(plan)
    assert plan.lane_pending(C2) and plan.lane_pending(C3)   # the lanes send them


def test_job_updates_coalesce_and_renames_keep_their_place() -> None:
    plan = _plan()
    for op in (FileUpdate({"job-1": b"1b", "job-2": b"2a"}), FileUpdate({"job-1": b"1c"}),
               Renames([("job-1", "archive/job-1")]), FileUpdate({"job-2": b"2b"}),
               FileUpdate({"job-2": b"2c"})):
        plan.queue_job_op(op)
    expected = [FileUpdate({"job-1": b"1c", "job-2": b"2a"}),
                Renames([("job-1", "archive/job-1")]), FileUpdate({"job-2": b"2c"})]
    assert _send_jobs(plan, C2) == expected
    assert _send_jobs(plan, C3) == expected      # every lane gets the same stream


def test_renames_and_copies_append_and_the_last_drain_flag_wins() -> None:
    plan = _plan()
    for op in (Renames([("a", "b")]), Renames([("c", "d")]), DrainFlag(True), DrainFlag(False),
               QueueCopy([C2]), QueueCopy([C3])):
        plan.queue_job_op(op)
    assert _send_jobs(plan) == [Renames([("a", "b"), ("c", "d")]), DrainFlag(False),
                                QueueCopy([C2, C3])]


def test_a_queue_copy_goes_only_to_its_nodes() -> None:
    plan = _plan()
    plan.queue_job_op(QueueCopy([C3]))
    assert plan.take_lane(C2) is None and _send_jobs(plan, C3) == [QueueCopy([C3])]


def test_a_lane_has_one_batch_on_the_wire() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"job-1": b"1a"}))
    batch = _lane(plan, C2)
    plan.queue_job_op(FileUpdate({"job-1": b"1b"}))
    assert plan.lane_busy(C2) and plan.take_lane(C2) is None
    plan.lane_done(batch, 1)
    assert _send_jobs(plan, C2) == [FileUpdate({"job-1": b"1b"})]
    assert plan.take_lane(C2) is None                  # idle, nobody stale


def test_lanes_do_not_wait_for_each_other() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"job-1": b"1a"}))
    held = _lane(plan, C3)                              # C3's batch hangs
    assert _send_jobs(plan, C2) == [FileUpdate({"job-1": b"1a"})]
    plan.queue_job_op(FileUpdate({"job-1": b"1b"}))
    plan.queue_job_op(FileUpdate({"job-2": b"2a"}))
    assert _send_jobs(plan, C2) == [FileUpdate({"job-1": b"1b", "job-2": b"2a"})]
    plan.lane_done(held, 1)
    # C3 then gets what it missed, in order, in the segments the others took
    assert _send_jobs(plan, C3) == [FileUpdate({"job-1": b"1b", "job-2": b"2a"})]


def test_a_segment_taken_by_a_lane_takes_no_more_merges() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"job-1": b"1a"}))
    first = _lane(plan, C2)
    plan.queue_job_op(FileUpdate({"job-1": b"1b"}))
    assert first.segments[0].op == FileUpdate({"job-1": b"1a"})   # unchanged on the wire
    assert [seg.op for seg in _lane(plan, C3).segments] == [
        FileUpdate({"job-1": b"1a"}), FileUpdate({"job-1": b"1b"})]


def test_a_failing_lane_skips_its_backlog_and_becomes_stale() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"job-1": b"1"}))
    batch = _lane(plan, C3)
    plan.queue_job_op(FileUpdate({"job-2": b"2"}))      # queued while C3 fails
    plan.lane_done(batch, 0)
    assert plan.stale() == {C3} and plan.take_lane(C3) is None   # the resync brings it all


def test_flush_marks_cover_what_was_queued_before_them() -> None:
    plan = _plan()
    assert plan.flushed(plan.flush_mark())           # nothing queued: flushed
    plan.queue_job_op(FileUpdate({"job-1": b"1"}))
    plan.queue_config(3, b"three", SSCONF)
    mark = plan.flush_mark()
    b2, b3 = _lane(plan, C2), _lane(plan, C3)
    plan.queue_job_op(DrainFlag(True))               # after the mark: not waited for
    plan.lane_done(b2, 1)
    assert not plan.flushed(mark)                    # C3's lane is still on the wire
    plan.lane_done(b3, 1)
    assert not plan.flushed(mark)                    # the config push is still to go
    plan.config_done(_config(plan), PushOutcome([]))
    assert plan.flushed(mark) and not plan.flushed(plan.flush_mark())


def test_job_operations_go_to_the_current_candidates() -> None:
    plan = _plan()
    assert plan.candidates() == [C2, C3]
    plan.set_targets([C2], [C2, C3, N4])
    assert plan.candidates() == [C2] and plan.lane_nodes() == [C2]
    assert plan.still_candidates([C3, C2, N4]) == [C2]
    plan.queue_job_op(DrainFlag(True))
    plan.set_targets([C2, C3], [C2, C3, N4])         # promoted again: from now on
    assert plan.take_lane(C3) is None
    plan.queue_job_op(DrainFlag(False))
    assert _send_jobs(plan, C3) == [DrainFlag(False)]


# --- stale candidates and their resync ----------------------------------------------

def test_the_first_resync_waits_one_interval() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    _stale_after_failure(plan)
    assert plan.stale() == {C3} and not plan.resync_due()
    assert plan.resync_wait() == pytest.approx(core.QUEUE_RESYNC_INTERVAL)
    assert plan.take_lane(C3) is None and plan.stale() == {C3}    # not due: kept
    clock.advance(core.QUEUE_RESYNC_INTERVAL)
    batch = _lane(plan, C3)
    assert batch.resync and batch.segments == [] and plan.stale() == set()
    plan.lane_done(batch, 0)


def test_a_due_resync_follows_the_lane_segments() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    _stale_after_failure(plan)
    clock.advance(core.QUEUE_RESYNC_INTERVAL)
    plan.queue_job_op(Renames([("a", "b")]))
    batch = _lane(plan, C3)
    assert batch.resync and [seg.op for seg in batch.segments] == [Renames([("a", "b")])]


def test_each_node_has_its_own_resync_time() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    _stale_after_failure(plan, C3)
    clock.advance(3.0)
    _stale_after_failure(plan, C2)
    _stale_after_failure(plan, C3)                   # more failures do not postpone it
    clock.advance(core.QUEUE_RESYNC_INTERVAL - 3.0)
    assert plan.resync_due(C3) and not plan.resync_due(C2)
    assert plan.resync_wait(C2) == pytest.approx(3.0)
    assert _lane(plan, C3).resync and not _lane(plan, C2).resync


def test_the_resync_backoff_doubles_up_to_a_minute_and_resets_on_success() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    _stale_after_failure(plan)
    waits = []
    for _ in range(6):
        clock.advance(plan.resync_wait())
        batch = _lane(plan, C3)
        assert batch.resync
        plan.lane_done(batch, 0, resync_failed=True)     # the copy failed too
        waits.append(plan.resync_wait())
    assert waits == [10.0, 20.0, 40.0, 60.0, 60.0, 60.0]
    clock.advance(60.0)
    plan.lane_done(_lane(plan, C3), 0)                   # it worked
    _stale_after_failure(plan)
    assert plan.resync_wait() == core.QUEUE_RESYNC_INTERVAL


def test_resync_wait_is_never_below_a_short_pause() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    assert plan.resync_wait() is None                # nobody stale: wait for work
    _stale_after_failure(plan)
    clock.advance(100.0)
    assert plan.resync_wait() == 0.05


def test_a_stale_node_that_left_the_candidates_is_forgotten() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    _stale_after_failure(plan)
    plan.set_targets([C2], [C2, C3, N4])             # demoted
    clock.advance(core.QUEUE_RESYNC_INTERVAL)
    assert plan.take_lane(C3) is None and plan.stale() == set()
    assert not plan.resync_due()


def test_an_idle_queue_still_resyncs_a_stale_candidate() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    _stale_after_failure(plan)
    assert plan.take_lane(C3) is None                # not due yet
    clock.advance(core.QUEUE_RESYNC_INTERVAL)
    assert plan.lane_pending(C3)
    assert plan.take_lane(C3, resync_alone=False) is None
    mark = plan.flush_mark()
    batch = _lane(plan, C3)
    assert batch.segments == [] and batch.resync
    assert not plan.flushed(plan.flush_mark())       # a flush now waits for the resync
    plan.lane_done(batch, 0)
    assert plan.flushed(mark) and plan.flushed(plan.flush_mark())
    assert plan.take_lane(C3) is None                # caught up: no more copies


def test_the_resync_interval_is_a_parameter() -> None:
    clock = FakeClock()
    plan = _plan(clock, resync_interval=0.5, resync_max_interval=1.0)
    _stale_after_failure(plan)
    clock.advance(0.5)
    plan.lane_done(_lane(plan, C3), 0, resync_failed=True)
    assert plan.resync_wait() == 1.0


# --- a whole queue in parts ---------------------------------------------------------

def test_a_queue_copy_is_split_into_parts_of_about_the_chunk_size() -> None:
    files = [(f"job-{i}", b"x" * 4) for i in range(1, 6)]
    parts = core.plan_queue_copy(files, chunk=10)
    assert [[name for name, _ in part] for part in parts] == [
        ["job-1", "job-2"], ["job-3", "job-4"], ["job-5"]]


def test_a_file_larger_than_the_chunk_gets_a_part_of_its_own() -> None:
    parts = core.plan_queue_copy([("a", b"x" * 30), ("b", b"y")], chunk=10)
    assert [[name for name, _ in part] for part in parts] == [["a"], ["b"]]


def test_an_empty_queue_is_one_empty_part() -> None:
    assert core.plan_queue_copy([]) == [[]]          # still one jobqueue_sync


def test_candidate_lag_counts_the_serials_a_failing_candidate_missed() -> None:
    plan = _plan()
    assert plan.candidate_lag() == {C2: 0, C3: 0}          # nothing pushed yet
    _push(plan, 5)
    _push(plan, 6, outcome=PushOutcome([C3]))
    _push(plan, 7, outcome=PushOutcome([C3]))
    assert plan.candidate_lag() == {C2: 0, C3: 2}          # C3 has 5, the master 7
    assert plan.queue_config(8, b"cfg-8", SSCONF)
    assert plan.candidate_lag() == {C2: 1, C3: 3}          # queued, not pushed yet
    plan.config_done(_config(plan), PushOutcome([]))
    assert plan.candidate_lag() == {C2: 0, C3: 0}          # it caught up


def test_candidate_lag_of_a_first_failed_push_is_at_least_one() -> None:
    plan = _plan()
    _push(plan, 9, outcome=PushOutcome([C2]))
    assert plan.candidate_lag() == {C2: 1, C3: 0}


# --- quorum of new job files (doc/design/replication.md, Invariant 1) ----------------

@pytest.mark.parametrize("others, need", [(0, 0), (1, 1), (2, 1), (3, 2), (4, 2)],
                         ids=["alone", "two", "three", "four", "five"])
def test_quorum_needed_is_a_strict_majority_with_the_master(others: int, need: int) -> None:
    assert core.quorum_needed(others) == need
    assert (need + 1) * 2 > others + 1          # with the master's copy: a strict majority
    assert need * 2 <= others + 1               # one fewer is not


def test_a_file_update_is_known_once_a_majority_confirmed_it() -> None:
    plan = _plan()
    seq = plan.queue_job_op(FileUpdate({"q/job-1": b"1"}))
    assert plan.quorum_outcome(seq) == (False, None)
    held = _lane(plan, C3)                                      # C3 does not answer
    assert plan.quorum_outcome(seq) == (False, None)
    _send_jobs(plan, C2)
    assert plan.quorum_outcome(seq) == (True, None)             # master + C2: 2 of 3
    plan.lane_done(held, 0)
    assert plan.quorum_outcome(seq) == (True, None)             # decided stays decided


def test_decisions_count_only_reports_that_decided_a_quorum() -> None:
    # the driver wakes the submitters waiting for a quorum only when this grew
    plan = _plan()
    plan.queue_job_op(FileUpdate({"q/job-1": b"1"}))
    first, second = _lane(plan, C2), _lane(plan, C3)
    before = plan.decisions
    plan.lane_done(first, len(first.segments))
    assert plan.decisions == before + 1                        # master + C2: decided
    plan.lane_done(second, len(second.segments))
    assert plan.decisions == before + 1                        # C3's confirmation adds nothing
    plan.queue_job_op(FileUpdate({"q/job-2": b"2"}))
    failing = _lane(plan, C2)
    plan.lane_done(failing, 0)
    assert plan.decisions == before + 1                        # C3 may still confirm it
    third = _lane(plan, C3)
    plan.lane_done(third, 0)
    assert plan.decisions == before + 2                        # failed: decided too


def test_a_file_update_on_a_minority_fails_every_operation_merged_into_it() -> None:
    plan = _plan()
    first = plan.queue_job_op(FileUpdate({"q/job-1": b"1"}))
    second = plan.queue_job_op(FileUpdate({"q/job-2": b"2"}))     # merged with the first
    b2 = _lane(plan, C2)
    assert len(b2.segments) == 1
    assert plan.lane_done(b2, 0) == []             # C3 may still make it
    assert plan.quorum_outcome(first) == (False, None)
    failures = plan.lane_done(_lane(plan, C3), 0)
    assert len(failures) == 1
    for seq in (first, second):
        known, why = plan.quorum_outcome(seq)
        assert known and why == failures[0]
        assert "1 of 3" in why and "node2, node3" in why


def test_a_later_file_update_gets_its_own_outcome() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"q/job-1": b"1"}))
    plan.lane_done(_lane(plan, C2), 0)
    plan.lane_done(_lane(plan, C3), 0)
    later = plan.queue_job_op(FileUpdate({"q/job-3": b"3"}))
    _send_jobs(plan, C3)
    assert plan.quorum_outcome(later) == (True, None)            # only its own send counts


def test_a_demoted_candidate_no_longer_counts_for_a_pending_quorum() -> None:
    plan = ReplicationPlan(FakeClock())
    plan.set_targets([C2, C3, N4], [C2, C3, N4])                 # need 2 of 3
    seq = plan.queue_job_op(FileUpdate({"q/job-1": b"1"}))
    _send_jobs(plan, C2)
    plan.set_targets([C2, C3], [C2, C3, N4])                     # N4 demoted
    plan.lane_done(_lane(plan, C3), 0)
    known, why = plan.quorum_outcome(seq)
    assert known and why is not None and "node3, node4" in why


def test_without_other_candidates_the_master_alone_is_the_quorum() -> None:
    plan = ReplicationPlan(FakeClock())
    plan.set_targets([], [N4])
    seq = plan.queue_job_op(FileUpdate({"q/job-1": b"1"}))
    assert plan.quorum_outcome(seq) == (True, None)
    assert plan.flushed(plan.flush_mark())


# held updates (core.LAZY_DELAY) ------------------------------------------------------

def test_a_held_update_waits_for_its_delay_then_goes() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    plan.queue_job_op(FileUpdate({"job-1": b"running"}), hold=True)
    assert plan.take_lane(C2) is None and not plan.lane_pending(C2)
    wait = plan.lane_wait(C2)
    assert wait is not None and 0 < wait <= core.LAZY_DELAY
    clock.advance(core.LAZY_DELAY)
    assert plan.lane_pending(C2)
    assert _send_jobs(plan, C2) == [FileUpdate({"job-1": b"running"})]
    assert plan.lane_wait(C2) is None                   # nothing left, nobody stale


def test_an_urgent_update_takes_the_held_ones_along_in_one_request() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"job-1": b"success"}), hold=True)
    plan.queue_job_op(FileUpdate({"job-2": b"queued", "serial": b"2"}))
    assert _send_jobs(plan, C2) == [
        FileUpdate({"job-1": b"success", "job-2": b"queued", "serial": b"2"})]


def test_a_due_operation_of_another_kind_takes_the_held_updates_first() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"job-1": b"success"}), hold=True)
    plan.queue_job_op(Renames([("job-1", "archive/job-1")]))
    # order kept: the held update goes first, in the same batch
    assert _send_jobs(plan, C2) == [FileUpdate({"job-1": b"success"}),
                                    Renames([("job-1", "archive/job-1")])]


def test_a_held_update_merged_after_an_urgent_one_goes_at_once() -> None:
    plan = _plan()
    plan.queue_job_op(FileUpdate({"job-2": b"queued"}))
    plan.queue_job_op(FileUpdate({"job-1": b"success"}), hold=True)
    assert _send_jobs(plan, C2) == [FileUpdate({"job-2": b"queued", "job-1": b"success"})]


def test_held_updates_go_at_once_when_not_holding_or_when_a_resync_is_due() -> None:
    clock = FakeClock()
    plan = _plan(clock)
    plan.queue_job_op(FileUpdate({"job-1": b"a"}), hold=True)
    batch = _lane(plan, C2, hold=False)                 # a stopping replicator sends all
    assert [seg.op for seg in batch.segments] == [FileUpdate({"job-1": b"a"})]
    _stale_after_failure(plan, C3)
    clock.advance(core.QUEUE_RESYNC_INTERVAL)
    plan.queue_job_op(FileUpdate({"job-1": b"b"}), hold=True)
    resync = _lane(plan, C3)
    assert resync.resync and FileUpdate({"job-1": b"b"}) in [seg.op for seg in resync.segments]
