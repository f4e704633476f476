"""The master lease (ganeti.failover.lease): pure state, a fake clock."""

from __future__ import annotations

from ganeti.failover.lease import ASYNC, SYNC, MasterLease
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
