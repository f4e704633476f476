"""ganeti.http.spare.SparePool with real forks: spares take handed-over connections, die, get replaced."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from fakes import FakeClock
from ganeti.http import spare as noded_spare

EXIT_NO_CONNECTION = 3


def _serve_one(channel: socket.socket) -> None:
    """A spare's body: answer the handed-over connection with our pid, or exit 3 without one."""
    conn = noded_spare.receive_connection(channel)
    if conn is None:
        os._exit(EXIT_NO_CONNECTION)
    conn.sendall(f"served by {os.getpid()}".encode())
    conn.close()
    os._exit(0)


def _exit_status(pid: int, timeout: float = 10.0) -> int:
    """Wait (bounded) for child ``pid``; its exit status."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    raise AssertionError(f"child {pid} did not exit")


@pytest.fixture
def pools():
    made: list[noded_spare.SparePool] = []
    yield made
    for pool in made:
        pool.stop()


def _pool(pools, count: int, run_spare=_serve_one, **kwargs) -> noded_spare.SparePool:
    pool = noded_spare.SparePool(count, run_spare, **kwargs)
    pools.append(pool)
    return pool


def test_refill_forks_the_spares_and_a_spare_serves_a_handed_over_connection(pools) -> None:
    pool = _pool(pools, 2)
    pool.refill()
    assert len(pool) == 2 and pool.refill_delay() is None
    idle = pool.pids
    ours, theirs = socket.socketpair()
    with ours, theirs:
        pid = pool.hand_over(ours)
        assert pid == idle[0]
        theirs.settimeout(10)
        assert theirs.recv(100) == f"served by {pid}".encode()
    assert _exit_status(pid) == 0
    assert pool.pids == idle[1:]
    assert pool.refill_delay() == 0.0   # one missing, no back-off
    pool.refill()
    assert len(pool) == 2 and idle[1] in pool.pids


def test_hand_over_without_spares_does_nothing(pools) -> None:
    pool = _pool(pools, 0)
    pool.refill()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert pool.hand_over(ours) is None
    assert pool.refill_delay() is None


def test_a_spare_that_died_is_skipped_and_killed(pools) -> None:
    pool = _pool(pools, 2)
    pool.refill()
    dead, alive = pool.pids
    os.kill(dead, signal.SIGKILL)
    assert _exit_status(dead) == -signal.SIGKILL   # its channel end is closed now
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert pool.hand_over(ours) == alive
        theirs.settimeout(10)
        assert theirs.recv(100) == f"served by {alive}".encode()
    assert _exit_status(alive) == 0


def test_a_dead_idle_spare_is_reaped_and_replaced_after_the_back_off(pools) -> None:
    clock = FakeClock()
    pool = _pool(pools, 1, clock=clock, retry_delay=0.2)
    pool.refill()
    [first] = pool.pids
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while len(pool) and time.monotonic() < deadline:
        pool.reap()
        time.sleep(0.01)
    assert len(pool) == 0
    assert pool.refill_delay() == pytest.approx(0.2)
    pool.refill()
    assert len(pool) == 0   # still backing off
    clock.advance(0.2)
    assert pool.refill_delay() == 0.0
    pool.refill()
    assert len(pool) == 1 and pool.pids != [first]


def test_spares_exit_when_their_channel_closes(pools) -> None:
    # what a spare sees when the parent dies; detach() is what any other child does
    pool = _pool(pools, 2)
    pool.refill()
    idle = pool.pids
    pool.detach()
    assert len(pool) == 0 and pool.count == 0
    pool.refill()
    assert len(pool) == 0   # a detached pool forks nothing
    assert [_exit_status(pid) for pid in idle] == [EXIT_NO_CONNECTION] * 2


def test_a_spare_body_that_returns_exits_1(pools) -> None:
    pool = _pool(pools, 1, run_spare=lambda channel: None)
    pool.refill()
    [pid] = pool.pids
    assert _exit_status(pid) == 1


def test_stop_terminates_and_reaps_every_spare(pools) -> None:
    pool = _pool(pools, 3)
    pool.refill()
    idle = pool.pids
    pool.stop()
    assert len(pool) == 0
    for pid in idle:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
