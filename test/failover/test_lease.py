"""The master lease (ganeti.failover.lease): pure state, a fake clock."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.failover.lease import (ASYNC, EPOCH_STRIDE, SYNC, MasterLease, epoch_parts,
                                   next_epoch, taker_rank)
from test.fakes.clock import FakeClock


def test_lease_cycle():
    clock = FakeClock()
    lease = MasterLease(clock, duration=6.0, block=100)
    assert lease.need(0, 1) == SYNC
    assert "expired" in lease.refusal(0, 1)
    renewal = lease.start_renewal(0, 1)
    assert renewal.reserve == 101
    clock.advance(1.0)                    # the confirmation arrives a second later
    lease.confirmed(renewal)
    assert lease.refusal(0, 1) is None
    assert lease.need(0, 1) is None
    clock.advance(2.5)                    # half of the lease since it was sent
    assert lease.need(0, 1) == ASYNC
    clock.advance(2.5)                    # counted from the send time: expired
    assert lease.need(0, 1) == SYNC and lease.refusal(0, 1) is not None


def test_an_expiry_says_whether_it_was_never_confirmed_or_confirmed_too_late():
    clock = FakeClock()
    lease = MasterLease(clock, duration=1.0)
    assert "no confirmation yet" in lease.refusal(0, 1)
    renewal = lease.start_renewal(0, 1)
    clock.advance(1.5)                    # a round slower than the lease itself
    lease.confirmed(renewal)
    why = lease.refusal(0, 1)
    assert "later than the 1 s lease" in why and "no confirmation yet" not in why


def test_reservation_limits_ids():
    clock = FakeClock()
    lease = MasterLease(clock, duration=6.0, block=100)
    lease.confirmed(lease.start_renewal(0))
    assert lease.refusal(99, 1) is None
    assert lease.need(60, 1) == ASYNC     # past half the block
    assert "reserved only up to 100" in lease.refusal(100, 1)
    assert lease.need(100, 1) == SYNC
    lease.confirmed(lease.start_renewal(100, 1))
    assert lease.reserved == 201 and lease.refusal(100, 1) is None


def test_failed_renewal_reason_and_fence_is_final():
    clock = FakeClock()
    lease = MasterLease(clock)
    lease.failed("1 of 3 confirmed")
    assert "1 of 3 confirmed" in lease.refusal(0, 1)
    lease.confirmed(lease.start_renewal(0))
    lease.fence("fenced by node2")
    lease.fence("later reason")
    assert lease.refusal(0, 1) == "fenced by node2"


NODES = ["node3", "node1", "node2"]


def test_concurrent_takers_get_distinct_ordered_epochs():
    seen = 0
    epochs = [next_epoch(seen, taker_rank(NODES, me)) for me in ("node1", "node2", "node3")]
    assert len(set(epochs)) == 3
    assert epochs == sorted(epochs)                    # the higher rank wins
    assert [epoch_parts(e) for e in epochs] == [(1, 1), (1, 2), (1, 3)]
    # the next takeover, by any node, is above all of them
    assert next_epoch(max(epochs), taker_rank(NODES, "node1")) > max(epochs)
    assert epoch_parts(next_epoch(max(epochs), 1)) == (2, 1)


def test_next_epoch_above_old_style_epochs():
    # epochs of clusters made before the ranks (0, 1, 2 ...) stay below
    assert next_epoch(2, 1) == EPOCH_STRIDE + 1
    assert taker_rank(NODES, "elsewhere") == 0


def test_next_epoch_refuses_a_bad_rank():
    with pytest.raises(errors.ProgrammerError):
        next_epoch(0, EPOCH_STRIDE)


def test_lease_without_time_checks_reservations_only():
    clock = FakeClock()
    lease = MasterLease(clock, duration=6.0, block=100)
    assert lease.refusal(0, 1, timed=False) is not None        # nothing reserved yet
    lease.confirmed(lease.start_renewal(0, 1))
    clock.advance(60.0)
    assert lease.refusal(0, 1, timed=False) is None
    assert lease.need(0, 1, timed=False) is None
    assert "reserved only up to 101" in lease.refusal(101, 1, timed=False)
