"""Tests for ganeti.locking.SharedLock."""

from __future__ import annotations

import gc
import threading
import time

import pytest
from fakes.clock import FakeClock

from ganeti import errors, locking

pytestmark = pytest.mark.timeout(30)


def _pending(lock: locking.SharedLock) -> int:
    return sum(len(names) for _, names in lock.get_lock_info()[0]["pending"])


def _fake_timed(name: str = "l") -> tuple[locking.SharedLock, FakeClock]:
    """A lock whose timeouts run on a fake clock (only ``advance`` ends them)."""
    clock = FakeClock()
    return locking.SharedLock(name, clock=clock, wait=clock.wait), clock


def test_exclusive_acquire_release() -> None:
    lock = locking.SharedLock("l")
    assert lock.acquire() is True
    assert lock.is_owned()
    assert lock.is_owned(shared=False)
    assert not lock.is_owned(shared=True)
    lock.release()
    assert not lock.is_owned()


def test_shared_holders_coexist(spawn) -> None:
    lock = locking.SharedLock("l")
    assert lock.acquire(shared=True)
    spawn(lambda: (lock.acquire(shared=True, timeout=2), lock.release())[0], name="other")
    spawn.join()
    assert spawn.results["other"] is True
    lock.release()


def test_exclusive_times_out_against_shared(spawn) -> None:
    lock, clock = _fake_timed()
    lock.acquire(shared=True)
    spawn(lambda: lock.acquire(timeout=10), name="x")
    clock.wait_for_waiters(1)
    assert clock.deadlines == [1010.0]
    clock.advance(9.5)            # wakes the waiter: it re-reads the clock and waits on
    clock.wait_for_waiters(1)
    assert clock.deadlines == [1010.0]
    assert _pending(lock) == 1 and "x" not in spawn.results
    clock.advance(0.5)
    spawn.join()
    assert spawn.results["x"] is False
    assert _pending(lock) == 0
    lock.release()


def test_timeout_zero_only_tries(spawn) -> None:
    lock = locking.SharedLock("l")
    lock.acquire()
    spawn(lambda: lock.acquire(shared=True, timeout=0), name="t")
    spawn.join()
    assert spawn.results["t"] is False
    lock.release()
    assert lock.acquire(timeout=0)
    lock.release()


@pytest.mark.parametrize("first_shared", [True, False], ids=["shared", "exclusive"])
@pytest.mark.parametrize("second_shared", [True, False], ids=["shared", "exclusive"])
def test_reacquire_raises_at_once(first_shared: bool, second_shared: bool) -> None:
    lock = locking.SharedLock("l")
    lock.acquire(shared=first_shared)
    with pytest.raises(errors.LockError):
        lock.acquire(shared=second_shared, timeout=None)
    lock.release()


def test_release_unheld_raises() -> None:
    lock = locking.SharedLock("l")
    with pytest.raises(errors.LockError):
        lock.release()


def test_invalid_priority() -> None:
    lock = locking.SharedLock("l")
    with pytest.raises(errors.ProgrammerError):
        lock.acquire(priority=20)
    with pytest.raises(errors.ProgrammerError):
        lock.acquire(priority=-21)


def test_downgrade_lets_shared_waiters_in(spawn, wait_until) -> None:
    lock = locking.SharedLock("l")
    lock.acquire()
    got = threading.Event()
    done = threading.Event()

    def reader() -> None:
        assert lock.acquire(shared=True, timeout=5)
        got.set()
        done.wait(5)
        lock.release()

    spawn(reader)
    wait_until(lambda: _pending(lock) == 1)
    assert not got.is_set()
    lock.downgrade()
    assert got.wait(5)
    assert lock.is_owned(shared=True)
    done.set()
    spawn.join()
    lock.release()


def test_downgrade_requires_exclusive() -> None:
    lock = locking.SharedLock("l")
    with pytest.raises(errors.LockError):
        lock.downgrade()
    lock.acquire(shared=True)
    with pytest.raises(errors.LockError):
        lock.downgrade()
    lock.release()


def test_delete_wakes_waiters_with_error(spawn, wait_until) -> None:
    lock = locking.SharedLock("l")
    lock.acquire()
    for i in range(3):
        spawn(lambda: lock.acquire(shared=bool(i % 2), timeout=10), name=f"w{i}")
    wait_until(lambda: _pending(lock) == 3)
    assert lock.delete() is True
    spawn.join()
    assert len(spawn.errors) == 3
    assert all(isinstance(e, errors.LockError) for e in spawn.errors)
    with pytest.raises(errors.LockError):
        lock.acquire()
    with pytest.raises(errors.LockError):
        lock.acquire(shared=True, timeout=0)
    assert lock.get_lock_info()[0]["owner"] == []


def test_delete_by_shared_owner_raises() -> None:
    lock = locking.SharedLock("l")
    lock.acquire(shared=True)
    with pytest.raises(errors.LockError):
        lock.delete()
    lock.release()


def test_delete_unowned_acquires_first(spawn) -> None:
    lock, clock = _fake_timed()
    lock.acquire(shared=True)
    spawn(lambda: lock.delete(timeout=5), name="d")
    clock.wait_for_waiters(1)
    assert _pending(lock) == 1
    clock.advance(5)
    spawn.join()
    assert spawn.results["d"] is False
    assert not lock.deleted
    lock.release()
    assert lock.delete(timeout=1) is True
    assert lock.deleted


def test_priority_order_then_fifo(spawn, wait_until) -> None:
    lock = locking.SharedLock("l")
    lock.acquire()
    order: list[str] = []
    # (name, priority) in submission order
    requests = [("a", 5), ("b", 0), ("c", 5), ("d", -10), ("e", 0), ("f", 19)]
    for idx, (name, prio) in enumerate(requests):
        def take(prio: int = prio) -> None:
            assert lock.acquire(priority=prio, timeout=10)
            order.append(threading.current_thread().name)
            lock.release()
        spawn(take, name=name)
        wait_until(lambda idx=idx: _pending(lock) == idx + 1)  # queued in this order
    lock.release()
    spawn.join()
    assert order == ["d", "b", "e", "a", "c", "f"]


def test_consecutive_shared_waiters_granted_together(spawn, wait_until) -> None:
    lock = locking.SharedLock("l")
    lock.acquire()
    barrier = threading.Barrier(3, timeout=5)
    events: list[str] = []

    def reader() -> None:
        assert lock.acquire(shared=True, timeout=10)
        barrier.wait()  # passes only if all three hold the lock at once
        events.append("r")
        lock.release()

    def writer() -> None:
        assert lock.acquire(timeout=10)
        events.append("w")
        lock.release()

    for i in range(3):
        spawn(reader, name=f"r{i}")
        wait_until(lambda i=i: _pending(lock) == i + 1)
    spawn(writer, name="w")
    wait_until(lambda: _pending(lock) == 4)
    info = lock.get_lock_info()[0]
    assert info["pending"] == [["shared", ["r0", "r1", "r2"]], ["exclusive", ["w"]]]
    lock.release()
    spawn.join()
    assert not spawn.errors
    assert events == ["r", "r", "r", "w"]


def test_exclusive_waiter_blocks_new_shared(spawn, wait_until) -> None:
    lock = locking.SharedLock("l")
    lock.acquire(shared=True)
    order: list[str] = []

    def take(shared: bool) -> None:
        assert lock.acquire(shared=shared, timeout=10)
        order.append(threading.current_thread().name)
        lock.release()

    spawn(lambda: take(False), name="writer")
    wait_until(lambda: _pending(lock) == 1)
    # A newcomer of equal priority must queue behind the writer, although
    # it could share the lock with us.
    spawn(lambda: take(True), name="late")
    wait_until(lambda: _pending(lock) == 2)
    assert lock.get_lock_info()[0]["pending"] == [["exclusive", ["writer"]],
                                                  ["shared", ["late"]]]
    lock.release()
    spawn.join()
    assert order == ["writer", "late"]


def test_higher_priority_shared_passes_lower_priority_writer(spawn, wait_until) -> None:
    lock = locking.SharedLock("l")
    lock.acquire(shared=True)
    spawn(lambda: (lock.acquire(timeout=10, priority=10), lock.release())[0], name="writer")
    wait_until(lambda: _pending(lock) == 1)
    spawn(lambda: (lock.acquire(shared=True, timeout=0, priority=-5), lock.release())[0],
          name="urgent")
    spawn.threads[-1].join(5)
    assert spawn.results["urgent"] is True
    lock.release()


def test_no_starvation_under_continuous_shared_traffic(spawn) -> None:
    lock = locking.SharedLock("l")
    stop = threading.Event()
    readers_running = threading.Barrier(5, timeout=5)

    def reader() -> int:
        count = 0
        readers_running.wait()
        deadline = time.monotonic() + 10
        while not stop.is_set() and time.monotonic() < deadline:
            if lock.acquire(shared=True, timeout=1):
                time.sleep(0.001)
                lock.release()
                count += 1
        return count

    for i in range(4):
        spawn(reader, name=f"reader{i}")
    readers_running.wait()
    time.sleep(0.05)  # the readers keep the lock shared all the time now
    start = time.monotonic()
    got = lock.acquire(timeout=5)
    waited = time.monotonic() - start
    if got:
        lock.release()
    stop.set()
    spawn.join()
    assert got, f"exclusive waiter starved ({waited:.2f}s)"
    assert all(spawn.results[f"reader{i}"] > 0 for i in range(4))


def test_waiter_timeout_unblocks_those_behind(spawn, wait_until) -> None:
    lock, clock = _fake_timed()
    lock.acquire(shared=True)
    spawn(lambda: lock.acquire(timeout=5), name="writer")
    clock.wait_for_waiters(1)
    spawn(lambda: (lock.acquire(shared=True), lock.release())[0], name="reader")
    wait_until(lambda: _pending(lock) == 2)
    clock.advance(5)
    spawn.join()
    # The reader got in once the writer ahead of it gave up, while we still hold it.
    assert spawn.results["writer"] is False
    assert spawn.results["reader"] is True
    lock.release()


def test_mutual_exclusion_counter(spawn) -> None:
    lock = locking.SharedLock("l")
    state = {"inside": 0, "max": 0, "total": 0}

    def worker() -> None:
        for _ in range(200):
            assert lock.acquire(timeout=10)
            state["inside"] += 1
            state["max"] = max(state["max"], state["inside"])
            time.sleep(0)
            state["total"] += 1
            state["inside"] -= 1
            lock.release()

    for i in range(4):
        spawn(worker, name=f"m{i}")
    spawn.join(20)
    assert not spawn.errors
    assert state == {"inside": 0, "max": 1, "total": 800}


def test_monitor_registration_and_info(spawn, wait_until) -> None:
    monitor = locking.LockMonitor()
    lock = locking.SharedLock("mylock", monitor=monitor)
    lock.acquire(shared=True)
    spawn(lambda: lock.acquire(timeout=5) and lock.release(), name="waiter")
    wait_until(lambda: _pending(lock) == 1)
    (info,) = monitor.query()
    assert info == {"name": "mylock", "mode": "shared",
                    "owner": [threading.current_thread().name],
                    "pending": [["exclusive", ["waiter"]]]}
    lock.release()
    spawn.join()
    assert monitor.query()[0]["mode"] is None


def test_monitor_forgets_dropped_locks() -> None:
    monitor = locking.LockMonitor()
    temp = locking.SharedLock("temp", monitor=monitor)
    assert [r["name"] for r in monitor.query()] == ["temp"]
    del temp
    gc.collect()
    assert monitor.query() == []
