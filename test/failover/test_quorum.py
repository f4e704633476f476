"""Asking the nodes (ganeti.failover.quorum) with a fake RPC runner and a fake clock."""

from __future__ import annotations

import threading

import pytest

from ganeti import errors
from ganeti.failover import quorum, vote
from ganeti.objects import Cluster, ConfigData, Node
from test.fakes.clock import FakeClock
from test.fakes.fakerpc import FakeRpc

NAMES = ["node1", "node2", "node3"]


def _data(epoch: int = 0) -> ConfigData:
    nodes = {f"u{i}": Node(name=n, uuid=f"u{i}", primary_ip=f"10.0.0.{i}",
                           master_candidate=True) for i, n in enumerate(NAMES, 1)}
    return ConfigData(cluster=Cluster(master_node="u1", master_epoch=epoch), nodes=nodes)


def _info(master: str = "node1", serial: int = 5, epoch: int = 0) -> dict:
    return {"master": master, "candidate": True, "config_serial": serial, "job_id": 10,
            "queue_serial": 10, "epoch": epoch, "reserved_job_id": 0}


def test_vote_retries_while_too_few_answer_then_succeeds():
    clock = FakeClock()
    rpc = FakeRpc()
    rounds = []

    def handler(node, args):
        rounds.append(node)
        if node == "node2" and len(rounds) < 7:
            raise errors.RpcTransportError("connection refused")
        if node == "node3":
            raise errors.RpcTransportError("connection refused")
        return _info()

    rpc.set_handler("master_vote_info", handler)
    logged = []
    dec = quorum.run_vote(rpc, _data(), "node1", mode=vote.MODE_STARTUP, retry_for=30.0,
                          clock=clock, sleep=clock.advance, log=logged.append)
    assert dec.ok, dec.message
    assert len(logged) == 2 and "Only 1 of 3 nodes answered" in logged[0]
    assert clock.now == 1002.0


def test_vote_gives_up_after_the_retry_time():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_vote_info", lambda node, args: _info())
    for node in ("node2", "node3"):
        rpc.set_failure("master_vote_info", node, "timed out")
    dec = quorum.run_vote(rpc, _data(), "node1", mode=vote.MODE_STARTUP, retry_for=5.0,
                          clock=clock, sleep=clock.advance)
    assert not dec.ok and dec.retry
    assert "node2, node3" in dec.reason and "timed out" in dec.message
    assert clock.now == pytest.approx(1005.0)


def test_vote_refused_at_once_for_newer_data():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_vote_info", lambda node, args: _info(serial=6 if node == "node3" else 5))
    dec = quorum.run_vote(rpc, _data(), "node1", mode=vote.MODE_STARTUP, retry_for=30.0,
                          clock=clock, sleep=clock.advance)
    assert not dec.ok and not dec.retry and dec.newer == ["node3"]
    assert clock.now == 1000.0


def test_vote_waits_for_a_preempted_rival_to_put_its_configuration_back():
    clock = FakeClock()
    rpc = FakeRpc()
    rounds = []

    def handler(node, args):
        rounds.append(node)
        if node == "node2" and len(rounds) < 7:      # the rival's own takeover data
            return _info(master="node2", serial=1005, epoch=131073)
        return _info()

    rpc.set_handler("master_vote_info", handler)
    logged = []
    dec = quorum.run_vote(rpc, _data(), "node1", mode=vote.MODE_FAILOVER, retry_for=15.0,
                          clock=clock, sleep=clock.advance, log=logged.append, claimed=196612)
    assert dec.ok, dec.message
    assert len(logged) == 2 and "waiting for them to put their configuration back" in logged[0]
    assert clock.now == 1002.0


def test_vote_uses_the_config_epoch_for_the_taker():
    rpc = FakeRpc()
    # the taker's own node daemon already accepted epoch 4 from another master
    rpc.set_handler("master_vote_info", lambda node, args: _info(epoch=4 if node == "node1"
                                                                  else 0))
    dec = quorum.run_vote(rpc, _data(epoch=3), "node1", mode=vote.MODE_STARTUP)
    assert not dec.ok and "no longer the master" in dec.reason


def test_vote_without_own_node_daemon():
    rpc = FakeRpc()
    rpc.set_handler("master_vote_info", lambda node, args: _info())
    rpc.set_failure("master_vote_info", "node1", "connection refused")
    dec = quorum.run_vote(rpc, _data(), "node1", mode=vote.MODE_STARTUP)
    assert not dec.ok and "own node daemon" in dec.reason


def test_renew_lease_returns_at_majority_without_waiting_for_a_hung_node():
    rpc = FakeRpc()
    gate = threading.Event()

    def handler(node, args):
        if node == "node3":
            gate.wait(10)
        return {"master": "node1", "epoch": args[1]}

    rpc.set_handler("master_lease", handler)
    try:
        count, failed = quorum.renew_lease(rpc, NAMES, "node1", 2, 1000, 70, timeout=10.0)
    finally:
        gate.set()
    assert count == 2 and failed == {"node3": "no answer yet"}
    assert all(args == ["node1", 2, 1000, 70] for _, args in rpc.calls_to("master_lease"))


def _guard(rpc: FakeRpc, clock: FakeClock, last: list[int]) -> quorum.MasterGuard:
    return quorum.MasterGuard(rpc, lambda: (NAMES, "node1", 0), lambda: last[0],
                              clock=clock, duration=6.0, timeout=1.0)


def test_guard_renews_before_accepting_and_refuses_without_majority():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    last = [0]
    guard = _guard(rpc, clock, last)
    guard.check_submit(5)
    assert len(rpc.calls_to("master_lease")) == 3
    guard.check_submit(1)                      # valid: no new round
    assert len(rpc.calls_to("master_lease")) == 3
    clock.advance(7.0)                         # expired, and now the others are gone
    for node in ("node2", "node3"):
        rpc.set_failure("master_lease", node, "timed out")
    with pytest.raises(errors.NotMasterError, match="master lease has expired.*1 of 3"):
        guard.check_submit(1)


def test_guard_renews_again_when_a_round_is_confirmed_too_late():
    clock = FakeClock()
    rpc = FakeRpc()
    slow = [2]            # the first round's answers take 7 s in all: longer than the lease

    def handler(node, args):
        if node == "node1" and slow[0]:
            slow[0] -= 1
            clock.advance(7.0)
        return {"master": "node1", "epoch": 0}

    rpc.set_handler("master_lease", handler)
    guard = _guard(rpc, clock, [0])
    guard.check_submit(1)                     # the second, fast round is in time
    assert len(rpc.calls_to("master_lease")) == 9
    slow[0] = 5                               # every round too late: refused after three
    clock.advance(7.0)
    with pytest.raises(errors.NotMasterError, match="master lease has expired"):
        guard.check_submit(1)
    assert len(rpc.calls_to("master_lease")) == 18


def test_guard_reserves_config_serials():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    serial = [10]
    guard = quorum.MasterGuard(rpc, lambda: (NAMES, "node1", 0), lambda: 0, lambda: serial[0],
                               clock=clock, duration=6.0, timeout=1.0)
    guard.check_config_write(11)
    args = rpc.calls_to("master_lease")[0][1]
    assert args[3] == 11 + guard.lease.block
    for node in ("node2", "node3"):
        rpc.set_failure("master_lease", node, "timed out")
    guard.check_config_write(12)               # within the lease and the reservation
    with pytest.raises(errors.NotMasterError, match="Configuration serials are reserved only"):
        guard.check_config_write(11 + guard.lease.block + 1)


_REFUSAL = ("Fenced: master epoch 0 (from node1) is older than epoch 65538 accepted from"
            " node2; master_lease refused")


def _wait_for(predicate, limit: float = 5.0) -> bool:
    done = threading.Event()
    for _ in range(int(limit / 0.01)):
        if predicate():
            return True
        done.wait(0.01)
    return predicate()


def test_guard_one_refusal_only_triggers_a_round():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    guard = _guard(rpc, clock, [0])
    guard.check_submit(1)
    rounds = len(rpc.calls_to("master_lease"))
    guard.on_fenced("node2", _REFUSAL)
    # a renewal round asks everybody; a majority still confirms: not fenced
    assert _wait_for(lambda: len(rpc.calls_to("master_lease")) >= rounds + 3)
    assert _wait_for(lambda: not guard._renew_lock.locked())
    assert guard.fenced is None
    guard.check_submit(1)
    guard.check_request()


def test_guard_fenced_by_a_majority_for_good():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    guard = _guard(rpc, clock, [0])
    steps: list[str] = []
    guard.on_step_down = steps.append
    guard.check_submit(1)
    for node in ("node2", "node3"):
        rpc.set_failure("master_lease", node, _REFUSAL)
    assert guard.renew() is False
    assert guard.fenced is not None and "the master is node2" in guard.fenced
    assert len(steps) == 1 and "2 of 3 nodes refused" in steps[0]
    with pytest.raises(errors.NotMasterError, match="no longer the master; the master is node2"):
        guard.check_submit(1)
    with pytest.raises(errors.NotMasterError, match="the master is node2"):
        guard.check_request()
    # for good: a later confirmation changes nothing
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    guard.renew()
    assert guard.fenced is not None and len(steps) == 1


def test_guard_drain_refuses_submissions_retryably_then_ends():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    guard = _guard(rpc, clock, [0])
    guard.drain(10.0)
    assert guard.draining
    with pytest.raises(errors.MasterFailingOverError, match="failing over"):
        guard.check_submit(1)
    guard.check_request()                      # queries still answered
    guard.check_config_write(1)                # running jobs still finish
    clock.advance(11.0)
    assert not guard.draining
    guard.check_submit(1)
    guard.drain(10.0)
    guard.drain(0)
    guard.check_submit(1)


def test_guard_counts_submissions_under_way_for_a_drain():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    guard = _guard(rpc, clock, [0])
    assert guard.wait_submissions(0.0)          # nothing under way
    with guard.submitting(1):
        guard.drain(10.0)                       # begins while this one runs
        assert not guard.wait_submissions(0.05)
        ended = threading.Event()
        waiter = threading.Thread(target=lambda: guard.wait_submissions(10) and ended.set())
        waiter.start()
        assert not ended.wait(0.1)
    waiter.join(10)
    assert ended.is_set()
    with pytest.raises(errors.MasterFailingOverError):
        with guard.submitting(1):               # refused: counted only while checked
            raise AssertionError("a refused submission must not run")
    assert guard.wait_submissions(0.0)
    guard.drain(0)
    with pytest.raises(ValueError):
        with guard.submitting(1):               # one that fails is no longer under way
            raise ValueError("bad job")
    assert guard.wait_submissions(0.0)


def test_guard_without_voting_enforces_only_the_reservation():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    for node in ("node2", "node3"):
        rpc.set_failure("master_lease", node, "timed out")
    last = [0]
    guard = quorum.MasterGuard(rpc, lambda: (NAMES, "node1", 0), lambda: last[0],
                               clock=clock, duration=6.0, timeout=1.0, enforce=False)
    guard.check_submit(5)                      # its own node recorded the reservation
    assert guard.lease.reserved == 5 + guard.lease.block
    clock.advance(60.0)                        # no expiry without voting
    last[0] = 10
    guard.check_submit(1)
    rpc.set_failure("master_lease", "node1", "timed out")   # now nobody records it
    last[0] = guard.lease.reserved
    with pytest.raises(errors.NotMasterError, match="reserved only up to"):
        guard.check_submit(1)


def test_new_master_from_refusals():
    assert quorum.new_master_from([_REFUSAL]) == "node2"
    assert quorum.new_master_from(["timed out"]) is None
    assert quorum.new_master_from([
        _REFUSAL, _REFUSAL.replace("65538", "131073").replace("node2;", "node3;")]) == "node3"


def test_guard_without_voting_needs_the_nodes_it_first_reached():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    rpc.set_failure("master_lease", "node3", "timed out")
    last = [0]
    guard = quorum.MasterGuard(rpc, lambda: (NAMES, "node1", 0), lambda: last[0],
                               clock=clock, duration=6.0, timeout=1.0, enforce=False)
    guard.check_submit(1)                      # node1 and node2 recorded it
    first = guard.lease.reserved
    rpc.set_failure("master_lease", "node2", "timed out")   # now cut off from node2
    last[0] = first
    with pytest.raises(errors.NotMasterError, match=f"reserved only up to {first}"):
        guard.check_submit(1)


def test_lease_voters_leave_out_only_offline_nodes_recorded_powered_off():
    data = _data()
    data.nodes["u2"].offline = True                     # offline but running: still a voter
    data.nodes["u3"].powered = False                    # unpowered but online: still a voter
    assert quorum.lease_voters(data) == NAMES
    data.nodes["u3"].offline = True
    assert quorum.lease_voters(data) == ["node1", "node2"]


def test_voter_change_counts_the_saved_voters_the_live_config_still_has():
    saved, live = _data(), _data()
    assert quorum.voter_change(saved, live) == (NAMES, [])
    del live.nodes["u3"]                                # removed: stops counting at once
    live.nodes["u4"] = Node(name="node4", uuid="u4")    # added: counts once saved
    assert quorum.voter_change(saved, live) == (["node1", "node2"], [])
    live.nodes["u2"].offline = True
    live.nodes["u2"].powered = False                    # leaving: a fresh majority
    assert quorum.voter_change(saved, live) == (["node1", "node2"], ["node2"])
    assert quorum.voter_change(live, saved) == (["node1"], [])   # node2 joins once saved


def test_a_write_that_takes_voters_out_needs_a_fresh_majority():
    clock = FakeClock()
    rpc = FakeRpc()
    rpc.set_handler("master_lease", lambda node, args: {"master": "node1", "epoch": 0})
    guard = quorum.MasterGuard(rpc, lambda: (NAMES, "node1", 0), lambda: 0, lambda: 10,
                               clock=clock, duration=6.0, timeout=1.0)
    guard.check_config_write(11)
    rounds = len(rpc.calls_to("master_lease"))
    guard.check_config_write(12)                        # a valid lease: no new round
    assert len(rpc.calls_to("master_lease")) == rounds
    guard.check_config_write(13, fresh=True)            # a round of its own, confirmed
    assert len(rpc.calls_to("master_lease")) == rounds + 3
    for node in ("node2", "node3"):                     # cut off, the lease still valid
        rpc.set_failure("master_lease", node, "timed out")
    guard.check_config_write(14)
    with pytest.raises(errors.NotMasterError, match="needs a majority of the voters now"):
        guard.check_config_write(15, fresh=True)
