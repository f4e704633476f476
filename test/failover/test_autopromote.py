"""The master autopromotion's decisions (ganeti/failover/autopromote.py): timers in,
actions out, on a fake clock."""

from __future__ import annotations

import pytest

from ganeti.failover import autopromote as ap
from ganeti.failover.vote import NodeAnswer
from test.fakes.clock import FakeClock

M = "node1"


def _view(contact: float | None, *, enabled: bool = True, candidate: bool = True,
          master: bool = False) -> ap.LocalView:
    return ap.LocalView(enabled=enabled, candidate=candidate, master=master, contact=contact)


def test_timeouts_follow_the_lease() -> None:
    assert ap.master_timeout(6.0) == 9.0
    assert ap.master_timeout(1.0) == ap.MIN_TIMEOUT
    assert ap.heartbeat_interval(6.0) == 2.0
    assert ap.heartbeat_interval(6.0) * 3 < ap.master_timeout(6.0)


@pytest.mark.parametrize("view", [_view(None, enabled=False), _view(None, candidate=False),
                                  _view(None, master=True)],
                         ids=["disabled", "not-candidate", "master"])
def test_nothing_happens_unless_an_enabled_candidate(view: ap.LocalView) -> None:
    clock = FakeClock()
    watch = ap.Watch(9.0)
    for _ in range(10):
        assert watch.tick(clock(), view) == ap.IDLE
        clock.advance(5.0)
    assert watch.next_due(clock(), view) is None


def test_check_after_the_timeout_without_renewal() -> None:
    clock = FakeClock()
    watch = ap.Watch(9.0, retry=5.0)
    contact = clock()
    assert watch.tick(clock(), _view(contact)) == ap.IDLE
    clock.advance(8.9)
    assert watch.tick(clock(), _view(contact)) == ap.IDLE
    assert watch.next_due(clock(), _view(contact)) == pytest.approx(contact + 9.0)
    clock.advance(0.2)
    assert watch.tick(clock(), _view(contact)) == ap.CHECK
    # not again at once, nor while the check runs
    assert watch.tick(clock(), _view(contact)) == ap.IDLE
    clock.advance(5.0)
    assert watch.tick(clock(), _view(contact), busy=True) == ap.IDLE
    assert watch.tick(clock(), _view(contact)) == ap.CHECK


def test_a_renewal_restarts_the_timer() -> None:
    clock = FakeClock()
    watch = ap.Watch(9.0)
    watch.tick(clock(), _view(clock()))
    for _ in range(10):
        clock.advance(8.0)
        assert watch.tick(clock(), _view(clock() - 1.0)) == ap.IDLE


def test_a_new_master_epoch_restarts_the_timer() -> None:
    clock = FakeClock()
    watch = ap.Watch(9.0)
    contact = clock()
    watch.tick(clock(), _view(contact))
    clock.advance(8.0)
    # the takeover's configuration arrives before the new master's first renewal
    new = ap.LocalView(enabled=True, candidate=True, master=False, contact=contact, epoch=65538)
    assert watch.tick(clock(), new) == ap.IDLE
    clock.advance(8.0)
    assert watch.tick(clock(), new) == ap.IDLE
    clock.advance(1.5)
    assert watch.tick(clock(), new) == ap.CHECK


def test_enabling_does_not_count_the_silence_before() -> None:
    clock = FakeClock()
    watch = ap.Watch(9.0)
    old_contact = clock() - 3600.0
    assert watch.tick(clock(), _view(old_contact, enabled=False)) == ap.IDLE
    clock.advance(100.0)
    assert watch.tick(clock(), _view(old_contact)) == ap.IDLE   # armed now
    clock.advance(8.0)
    assert watch.tick(clock(), _view(old_contact)) == ap.IDLE
    clock.advance(1.5)
    assert watch.tick(clock(), _view(old_contact)) == ap.CHECK


def _ans(node: str, *, age: float | None = 60.0, serial: int = 10, job: int = 5,
         master: str = M, candidate: bool = True) -> NodeAnswer:
    return NodeAnswer(node, master, candidate, config_serial=serial, job_id=job,
                      queue_serial=job, contact_age=age)


CANDS = ["node1", "node2", "node3"]


def test_gone_when_a_majority_of_candidates_confirms() -> None:
    got = ap.elect(M, CANDS, {"node1": "connection refused", "node2": _ans("node2"),
                              "node3": _ans("node3")}, 9.0)
    assert got.gone and got.winner == "node2"   # equal data: the first name


def test_highest_serial_then_job_id_wins() -> None:
    answers = {"node2": _ans("node2", serial=10, job=9), "node3": _ans("node3", serial=11, job=1),
               "node4": _ans("node4", serial=11, job=3)}
    assert ap.elect(M, CANDS + ["node4"], answers, 9.0).winner == "node4"


def test_not_gone_while_one_of_two_candidates_hears_the_master() -> None:
    got = ap.elect(M, CANDS, {"node2": _ans("node2"), "node3": _ans("node3", age=4.0)}, 9.0)
    assert not got.gone and got.winner is None
    assert "node3 heard from node1 4.0s ago" in got.reason
    # half the timeout is silence enough for the others
    assert ap.elect(M, CANDS, {"node2": _ans("node2"), "node3": _ans("node3", age=4.5)},
                    9.0).gone


def test_a_lone_candidate_never_promotes_itself() -> None:
    got = ap.elect(M, CANDS, {"node2": _ans("node2"), "node3": "no answer"}, 9.0)
    assert not got.gone and "1 of 3" in got.reason


def test_a_candidate_naming_another_master_does_not_confirm() -> None:
    got = ap.elect(M, CANDS, {"node2": _ans("node2"), "node3": _ans("node3", master="node3")},
                   9.0)
    assert not got.gone and "node3 names node3" in got.reason


def test_never_renewed_counts_as_silent() -> None:
    got = ap.elect(M, CANDS, {"node2": _ans("node2", age=None), "node3": _ans("node3", age=None)},
                   9.0)
    assert got.gone


def test_every_candidate_computes_the_same_winner() -> None:
    answers = {"node2": _ans("node2", job=7), "node3": _ans("node3", job=7),
               "node4": _ans("node4", job=6)}
    names = CANDS + ["node4"]
    winners = {ap.elect(M, order, answers, 9.0).winner
               for order in (names, list(reversed(names)), names[1:] + names[:1])}
    assert winners == {"node2"}
