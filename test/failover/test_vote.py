"""The master vote (ganeti.failover.vote): decisions from answers, no I/O."""

from __future__ import annotations

import pytest

from ganeti.failover.vote import (MODE_FAILOVER, MODE_STARTUP, NodeAnswer, answer_from_data,
                                  decide)

N = [f"node{i}" for i in range(1, 6)]


def cand(name: str, serial: int = 10, job: int = 100, qserial: int | None = None,
         master: str = "node1", epoch: int = 0, reserved: int = 0) -> NodeAnswer:
    return NodeAnswer(name, master, True, serial, job, job if qserial is None else qserial,
                      epoch, reserved)


def plain(name: str, master: str = "node1", epoch: int = 0, reserved: int = 0) -> NodeAnswer:
    return NodeAnswer(name, master, False, epoch=epoch, reserved_job_id=reserved)


def test_all_equal_failover_ok():
    taker = cand("node2")
    answers = {"node1": cand("node1"), "node3": cand("node3")}
    dec = decide(taker, N[:3], answers, mode=MODE_FAILOVER)
    assert dec.ok and not dec.retry
    assert dec.queue_serial == 100 and dec.config_serial == 11 and dec.epoch == 1


def test_startup_needs_majority_naming_taker():
    taker = cand("node1")
    answers = {"node2": cand("node2", master="node2"), "node3": cand("node3", master="node2")}
    dec = decide(taker, N[:3], answers, mode=MODE_STARTUP)
    assert not dec.ok and not dec.retry
    assert "Only 1 of 3 nodes name node1 as the master" in dec.reason
    assert "node2" in dec.reason


def test_startup_confirmed():
    taker = cand("node1")
    dec = decide(taker, N[:3], {"node2": cand("node2"), "node3": "connection refused"},
                 mode=MODE_STARTUP)
    assert dec.ok
    assert "node3" in dec.missing and "connection refused" in dec.message


def test_startup_refused_when_newer_epoch_accepted():
    taker = cand("node1", epoch=3)
    answers = {"node2": plain("node2", master="node1", epoch=4), "node3": cand("node3", epoch=3)}
    dec = decide(taker, N[:3], answers, mode=MODE_STARTUP)
    assert not dec.ok
    assert "epoch 4" in dec.reason and "node2" in dec.reason


@pytest.mark.parametrize("mode", [MODE_STARTUP, MODE_FAILOVER])
def test_two_nodes_other_down_refused(mode):
    taker = cand("node1" if mode == MODE_STARTUP else "node2")
    other = "node2" if taker.node == "node1" else "node1"
    dec = decide(taker, ["node1", "node2"], {other: "connection refused"}, mode=mode)
    assert not dec.ok and dec.retry
    assert "Only 1 of 2 nodes answered" in dec.reason
    assert other in dec.reason and "--no-voting --yes-do-it" in dec.reason


def test_two_nodes_other_down_override():
    dec = decide(cand("node2"), ["node1", "node2"], {"node1": "timed out"}, no_voting=True)
    assert dec.ok and "--no-voting" in dec.reason
    assert dec.config_serial == 11 and dec.epoch == 1


@pytest.mark.parametrize("field,value,label", [
    ("serial", 12, "config serial 12 there, 10 here"),
    ("job", 105, "job id 105 there, 100 here"),
    ("qserial", 107, "queue serial 107 there, 100 here"),
], ids=["config-serial", "job-id", "queue-serial"])
def test_stale_taker_refused_with_serials_side_by_side(field, value, label):
    taker = cand("node2")
    newer = cand("node3", **{field: value})
    dec = decide(taker, N[:3], {"node1": "down", "node3": newer})
    assert not dec.ok and not dec.retry
    assert dec.newer == ["node3"]
    assert label in dec.reason and "node3" in dec.reason
    # the table has both rows
    assert "node2" in dec.message and "(this node)" in dec.message


def test_stale_taker_override_jumps_above_everything():
    taker = cand("node2")
    dec = decide(taker, N[:3], {"node3": cand("node3", serial=12, job=105)}, no_voting=True)
    assert dec.ok
    assert dec.queue_serial == 105 and dec.config_serial == 13


def test_non_candidate_serials_do_not_count():
    taker = cand("node2")
    # a non-candidate answers only its master name (serials None)
    dec = decide(taker, N[:3], {"node1": plain("node1"), "node3": plain("node3")})
    assert dec.ok


def test_reserved_job_ids_raise_the_queue_serial():
    taker = cand("node2")
    dec = decide(taker, N[:3], {"node3": plain("node3", reserved=1100, epoch=2)})
    assert dec.ok
    assert dec.queue_serial == 1100 and dec.epoch == 3


def test_reserved_serials_raise_the_config_serial():
    dec = decide(cand("node2"), N[:3], {"node3": NodeAnswer("node3", "node1",
                                                             reserved_serial=1010)})
    assert dec.ok and dec.config_serial == 1011


def test_five_nodes_two_down_ok_three_down_refused():
    taker = cand("node2")
    ok = decide(taker, N, {"node3": cand("node3"), "node4": plain("node4"),
                           "node1": "down", "node5": "down"})
    assert ok.ok
    bad = decide(taker, N, {"node3": cand("node3"), "node1": "down", "node4": "down",
                            "node5": "down"})
    assert not bad.ok and bad.retry and "Only 2 of 5" in bad.reason


def test_answers_from_unknown_nodes_ignored():
    taker = cand("node2")
    dec = decide(taker, ["node1", "node2", "node3"],
                 {"x1": cand("x1"), "x2": cand("x2"), "node1": "down", "node3": "down"})
    assert not dec.ok and dec.retry


def test_newer_candidate_among_many_named():
    taker = cand("node1")
    answers = {"node2": cand("node2"), "node3": cand("node3", serial=11),
               "node4": cand("node4", job=101), "node5": plain("node5")}
    dec = decide(taker, N, answers, mode=MODE_STARTUP)
    assert dec.newer == ["node3", "node4"]
    assert "node3 (config serial 11 there, 10 here)" in dec.reason
    assert "node4 (job id 101 there, 100 here" in dec.reason


def test_answer_from_data():
    ans = answer_from_data("n", {"master": "m", "candidate": True, "config_serial": 3,
                                 "job_id": 4, "queue_serial": 5, "epoch": 2,
                                 "reserved_job_id": 9})
    assert ans == NodeAnswer("n", "m", True, 3, 4, 5, 2, 9)
    assert ans.highest_job_id == 9
    assert answer_from_data("n", {"master": "m"}) == NodeAnswer("n", "m")
    assert isinstance(answer_from_data("n", [1]), str)
    assert answer_from_data("n", {"master": 1, "job_id": True}).job_id is None


def test_exhaustive_three_nodes():
    """Every combination of up/down and newer/equal/older for two peers."""
    states = ["down", "older", "equal", "newer", "plain"]
    for s1 in states:
        for s3 in states:
            def mk(name, state):
                return {"down": "down", "older": cand(name, serial=9, job=99),
                        "equal": cand(name), "newer": cand(name, serial=11),
                        "plain": plain(name)}[state]
            dec = decide(cand("node2"), N[:3], {"node1": mk("node1", s1), "node3": mk("node3", s3)})
            up = sum(s != "down" for s in (s1, s3))
            expect = up >= 1 and "newer" not in (s1, s3)
            assert dec.ok == expect, (s1, s3, dec.reason)
            assert dec.retry == (up == 0)


def test_message_table_lines():
    dec = decide(cand("node2"), N[:3], {"node1": "connection refused", "node3": cand("node3")})
    lines = dec.message.splitlines()
    assert lines[1].split()[:2] == ["node", "answer"]
    assert lines[2].startswith("  node2")
    assert any("node1" in line and "no answer: connection refused" in line for line in lines)


def test_startup_fenced_reported_before_stale_data():
    taker = cand("node2", serial=4, epoch=2)
    answers = {"node1": cand("node1", serial=5, master="node3", epoch=3),
               "node3": cand("node3", serial=5, master="node3", epoch=3)}
    dec = decide(taker, N[:3], answers, mode=MODE_STARTUP)
    assert not dec.ok and "no longer the master" in dec.reason and "epoch 3" in dec.reason


def test_stale_nodes_listed():
    taker = cand("node1", serial=10)
    answers = {"node2": cand("node2", serial=9), "node3": plain("node3", master="node2"),
               "node4": cand("node4")}
    dec = decide(taker, N[:4], answers, mode=MODE_STARTUP)
    assert dec.ok and dec.stale == ["node2", "node3"]


def test_newer_data_of_a_preempted_rival_taker_is_waited_for():
    # node2 wrote its takeover configuration as a taker of epoch 131073; node4
    # holds a majority's claim of 196612: node2 cannot win any more
    taker = cand("node4", master="node1")
    answers = {"node1": cand("node1"), "node3": cand("node3"), "node5": cand("node5"),
               "node2": cand("node2", serial=2010, master="node2", epoch=131073)}
    dec = decide(taker, N, answers, mode=MODE_FAILOVER, claimed=196612)
    assert not dec.ok and dec.retry and dec.newer == ["node2"]
    assert "rival takers of older master epochs than 196612" in dec.reason
    assert "node2 (epoch 131073, config serial 2010 there, 10 here)" in dec.reason
    # without a claim, or when the rival's epoch is not older, it is plain newer data
    for kwargs in ({}, {"claimed": 131073}):
        dec = decide(taker, N, answers, mode=MODE_FAILOVER, **kwargs)
        assert not dec.ok and not dec.retry and "has stale data" in dec.reason
    # a node naming another master with newer data is never waited for
    answers["node3"] = cand("node3", serial=11)
    dec = decide(taker, N, answers, mode=MODE_FAILOVER, claimed=196612)
    assert not dec.ok and not dec.retry and dec.newer == ["node3", "node2"]
