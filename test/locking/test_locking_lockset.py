"""Tests for ganeti.locking.LockSet."""

from __future__ import annotations

import threading

import pytest
from fakes.clock import FakeClock

from ganeti import errors, locking
from ganeti.locking import sharedlock

pytestmark = pytest.mark.timeout(30)

NAMES = ["a", "b", "c", "d"]


def _info(lset: locking.LockSet) -> dict[str, dict]:
    return {item["name"]: item for item in lset.get_lock_info()}


def _waiters(lset: locking.LockSet) -> int:
    return sum(len(n) for item in lset.get_lock_info() for _, n in item["pending"])


def _fake_timed() -> tuple[locking.LockSet, FakeClock]:
    """A set whose timeouts run on a fake clock (only ``advance`` ends them)."""
    clock = FakeClock()
    return locking.LockSet(NAMES, "test", clock=clock, wait=clock.wait), clock


def test_acquire_names_and_release() -> None:
    lset = locking.LockSet(NAMES, "test")
    assert lset.acquire(["c", "a"]) == {"a", "c"}
    assert lset.is_owned()
    assert not lset.owning_all()
    assert lset.list_owned() == {"a", "c"}
    assert lset.is_owned_name("a", shared=False)
    assert not lset.is_owned_name("b")
    lset.release(["a"])
    assert lset.list_owned() == {"c"}
    lset.release()
    assert not lset.is_owned()
    assert lset.list_owned() == set()


def test_single_string_name() -> None:
    lset = locking.LockSet(NAMES, "test")
    assert lset.acquire("b", shared=True) == {"b"}
    assert lset.is_owned_name("b", shared=True)
    lset.release()


def test_acquire_twice_in_set_raises() -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(["a"])
    with pytest.raises(errors.LockError):
        lset.acquire(["b"])
    with pytest.raises(errors.LockError):
        lset.acquire(locking.ALL_SET)
    lset.release()


def test_unknown_name_raises_and_holds_nothing() -> None:
    lset = locking.LockSet(NAMES, "test")
    with pytest.raises(errors.LockError, match="zzz"):
        lset.acquire(["a", "zzz"])
    assert not lset.is_owned()
    assert lset.acquire(locking.ALL_SET, timeout=0) is not None
    lset.release()


def test_release_unowned_raises() -> None:
    lset = locking.LockSet(NAMES, "test")
    with pytest.raises(errors.LockError):
        lset.release()
    lset.acquire(["a"])
    with pytest.raises(errors.LockError):
        lset.release(["b"])
    lset.release()


def test_timeout_leaves_nothing_held(spawn) -> None:
    lset, clock = _fake_timed()
    lset.acquire(["c"])
    spawn(lambda: (lset.acquire(["a", "b", "c"], timeout=10), lset.is_owned()), name="t")
    clock.wait_for_waiters(1)
    rows = _info(lset)
    assert rows["test/a"]["owner"] == rows["test/b"]["owner"] == ["t"]
    assert rows["test/c"]["pending"] == [["exclusive", ["t"]]]
    clock.advance(10)
    spawn.join()
    assert spawn.results["t"] == (None, False)
    lset.release()
    # a and b were released again by the timed-out thread.
    assert lset.acquire(locking.ALL_SET, timeout=0) == set(NAMES)
    lset.release()


def test_one_timeout_for_all_the_names(spawn, wait_until) -> None:
    lset, clock = _fake_timed()
    lset.acquire(["a", "c"])
    spawn(lambda: lset.acquire(["a", "b", "c"], timeout=10), name="t")
    clock.wait_for_waiters(1)
    clock.advance(6)
    clock.wait_for_waiters(1)          # still waiting for a
    lset.release(["a"])                # a and b are granted; c is left
    wait_until(lambda: _info(lset)["test/c"]["pending"] == [["exclusive", ["t"]]])
    assert _info(lset)["test/b"]["owner"] == ["t"]
    clock.wait_for_waiters(1)
    assert clock.deadlines == [1010.0]  # what is left of the 10 s, not 10 s more
    clock.advance(4)
    spawn.join()
    assert spawn.results["t"] is None
    lset.release()
    assert lset.acquire(locking.ALL_SET, timeout=0) == set(NAMES)
    lset.release()


def test_all_set_blocks_names_and_other_all(spawn) -> None:
    lset = locking.LockSet(NAMES, "test")
    assert lset.acquire(locking.ALL_SET) == set(NAMES)
    assert lset.owning_all()
    assert lset.list_owned() == set(NAMES)
    spawn(lambda: lset.acquire(["b"], shared=True, timeout=0), name="one")
    spawn(lambda: lset.acquire(locking.ALL_SET, shared=True, timeout=0), name="all")
    spawn.join()
    assert spawn.results == {"one": None, "all": None}
    lset.release()
    assert not lset.is_owned()


def test_shared_all_allows_shared_names_not_exclusive(spawn) -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(locking.ALL_SET, shared=True)
    spawn(lambda: (lset.acquire(["a"], shared=True, timeout=1), lset.release())[0], name="s")
    spawn(lambda: lset.acquire(["a"], timeout=0), name="x")
    spawn.join()
    assert spawn.results["s"] == {"a"}
    assert spawn.results["x"] is None
    lset.release()


def test_exclusive_all_waits_for_name_holders(spawn, wait_until) -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(["d"], shared=True)
    spawn(lambda: (lset.acquire(locking.ALL_SET, timeout=5), lset.release())[0], name="all")
    wait_until(lambda: _waiters(lset) == 1)
    # Behind the queued whole-set request, new name requests wait (fairness).
    spawn(lambda: lset.acquire(["a"], shared=True, timeout=0), name="late")
    spawn.threads[-1].join(5)
    assert spawn.results["late"] is None
    lset.release()
    spawn.join()
    assert spawn.results["all"] == set(NAMES)


def test_different_names_in_parallel(spawn) -> None:
    lset = locking.LockSet(NAMES, "test")
    barrier = threading.Barrier(len(NAMES), timeout=5)

    def worker(name: str) -> bool:
        assert lset.acquire([name], timeout=5) == {name}
        barrier.wait()  # all four hold their exclusive lock at the same time
        lset.release()
        return True

    for name in NAMES:
        spawn(lambda name=name: worker(name), name=name)
    spawn.join()
    assert not spawn.errors


def test_partial_release_of_all_keeps_the_rest(spawn) -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(locking.ALL_SET)
    lset.release(["a", "b"])
    assert not lset.owning_all()
    assert lset.list_owned() == {"c", "d"}
    assert lset.is_owned_name("c", shared=False)
    spawn(lambda: (lset.acquire(["a", "b"], timeout=1), lset.release())[0], name="ab")
    spawn(lambda: lset.acquire(["c"], timeout=0), name="c")
    spawn.join()
    assert spawn.results == {"ab": {"a", "b"}, "c": None}
    lset.release()
    assert not lset.is_owned()


def test_partial_release_of_shared_all() -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(locking.ALL_SET, shared=True)
    lset.release(["a"])
    assert lset.list_owned() == {"b", "c", "d"}
    assert lset.is_owned_name("b", shared=True)
    lset.release(["b", "c", "d"])
    assert not lset.is_owned()


def test_downgrade_names_and_all(spawn) -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(["a", "b"])
    lset.downgrade(["a"])
    assert lset.is_owned_name("a", shared=True)
    assert lset.is_owned_name("b", shared=False)
    lset.release()
    lset.acquire(locking.ALL_SET)
    lset.downgrade()
    assert lset.owning_all()
    spawn(lambda: (lset.acquire(["c"], shared=True, timeout=1), lset.release())[0], name="s")
    spawn.join()
    assert spawn.results["s"] == {"c"}
    lset.release()


def test_add_and_acquire_new_name() -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.add(["e"])
    assert "e" in lset.names()
    assert lset.acquire(["e"]) == {"e"}
    lset.release()
    with pytest.raises(errors.LockError):
        lset.add(["e"])


def test_add_acquired() -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.add("e", acquired=True)
    assert lset.list_owned() == {"e"}
    assert lset.is_owned_name("e", shared=False)
    lset.release()
    lset.add(["f"], acquired=True, shared=True)
    assert lset.is_owned_name("f", shared=True)
    lset.release()
    assert not lset.is_owned()


def test_add_while_owning_shared_raises() -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(["a"], shared=True)
    with pytest.raises(errors.LockError):
        lset.add(["x"])
    lset.release()


def test_add_waits_for_whole_set_owner(spawn, wait_until) -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(locking.ALL_SET, shared=True)
    spawn(lambda: lset.add(["new"]), name="adder")
    wait_until(lambda: _waiters(lset) == 1)
    assert "new" not in lset.names()
    lset.release()
    spawn.join()
    assert "new" in lset.names()


def test_whole_set_owner_adds_and_owns() -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(locking.ALL_SET)
    lset.add(["e"])
    assert lset.list_owned() == set(NAMES) | {"e"}
    lset.release(["a"])
    assert lset.list_owned() == {"b", "c", "d", "e"}
    lset.release()


def test_remove_requires_exclusive(spawn) -> None:
    lset = locking.LockSet(NAMES, "test")
    with pytest.raises(errors.LockError):
        lset.remove(["a"])
    lset.acquire(["a", "b"], shared=True)
    with pytest.raises(errors.LockError):
        lset.remove(["a"])
    lset.release()
    lset.acquire(["a", "b"])
    assert lset.remove(["a", "nonexistent"]) == ["a"]
    assert lset.names() == {"b", "c", "d"}
    assert lset.list_owned() == {"b"}
    lset.release()
    with pytest.raises(errors.LockError):
        lset.acquire(["a"])
    assert not lset.is_owned()


def test_remove_last_owned_ends_ownership() -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(["a"])
    assert lset.remove("a") == ["a"]
    assert not lset.is_owned()


def test_remove_wakes_waiters_with_error(spawn, wait_until) -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(["b"])
    requests = [(["a", "b"], False), (["b", "c"], True), (["b"], False)]
    for i, (names, shared) in enumerate(requests):
        spawn(lambda names=names, shared=shared: lset.acquire(names, shared=shared, timeout=10),
              name=f"w{i}")
    wait_until(lambda: sum(len(n) for _, n in _info(lset)["test/b"]["pending"]) == 3)
    assert lset.remove(["b"]) == ["b"]
    spawn.join()
    assert len(spawn.errors) == 3
    assert all(isinstance(e, errors.LockError) for e in spawn.errors)
    # The failed waiters released "a" again.
    assert lset.acquire(locking.ALL_SET, timeout=0) == {"a", "c", "d"}
    lset.release()


def test_remove_with_whole_set() -> None:
    lset = locking.LockSet(NAMES, "test")
    lset.acquire(locking.ALL_SET)
    assert lset.remove(["c", "d"]) == ["c", "d"]
    assert lset.list_owned() == {"a", "b"}
    lset.release()
    lset.acquire(locking.ALL_SET, shared=True)
    with pytest.raises(errors.LockError):
        lset.remove(["a"])
    lset.release()


def test_monitor_shows_whole_set_owner_on_members(spawn, wait_until) -> None:
    monitor = locking.LockMonitor()
    lset = locking.LockSet(["x1", "x2"], "instance", monitor=monitor)
    me = threading.current_thread().name
    lset.acquire(locking.ALL_SET, shared=True)
    spawn(lambda: (lset.acquire(["x2"], timeout=5), lset.release())[0], name="writer")
    wait_until(lambda: _waiters(lset) == 1)
    rows = monitor.query()
    assert [r["name"] for r in rows] == ["instance/[lockset]", "instance/x1", "instance/x2"]
    by_name = {r["name"]: r for r in rows}
    assert by_name["instance/x1"] == {"name": "instance/x1", "mode": "shared",
                                      "owner": [me], "pending": []}
    assert by_name["instance/[lockset]"]["owner"] == [me]
    assert by_name["instance/[lockset]"]["pending"] == [["exclusive", ["writer"]]]
    lset.release()
    spawn.join()
    wait_until(lambda: all(r["owner"] == [] for r in monitor.query()))


def test_member_owner_in_monitor() -> None:
    lset = locking.LockSet(["x1", "x2"], "node")
    lset.acquire(["x2"])
    rows = _info(lset)
    assert rows["node/x2"]["mode"] == "exclusive"
    assert rows["node/x2"]["owner"] == [threading.current_thread().name]
    assert rows["node/x1"]["owner"] == []
    assert rows["node/[lockset]"]["mode"] is None
    lset.release()


def test_whole_set_acquire_does_not_touch_members(monkeypatch) -> None:
    # The point of the set-level lock: cost independent of the size.
    lset = locking.LockSet([f"i{n}" for n in range(500)], "instance")
    touched: list[str] = []

    def counting(self, *args, **kwargs):
        touched.append(self.name)
        return sharedlock.ModeLock._acquire(self, *args, **kwargs)

    monkeypatch.setattr(sharedlock.SharedLock, "_acquire", counting, raising=False)
    assert len(lset.acquire(locking.ALL_SET) or ()) == 500
    lset.release()
    assert touched == []
    assert lset.acquire(["i7"]) == {"i7"}     # (the counter does count member acquires)
    lset.release()
    assert touched == ["instance/i7"]
