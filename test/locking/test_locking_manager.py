"""Tests for ganeti.locking.GanetiLockManager and LockMonitor."""

from __future__ import annotations

import gc
import threading

import pytest
from fakes.clock import FakeClock

from ganeti import errors, locking
from ganeti.locking import (
    ALL_SET,
    BGL,
    LEVEL_CLUSTER,
    LEVEL_INSTANCE,
    LEVEL_NODE,
    LEVEL_NODE_RES,
    LEVEL_NODEGROUP,
)

pytestmark = pytest.mark.timeout(30)


def _glm(monitor: locking.LockMonitor | None = None) -> locking.GanetiLockManager:
    return locking.GanetiLockManager(["node1", "node2"], ["default"],
                                     ["inst1.example.com", "inst2.example.com"], monitor=monitor)


def test_level_constants() -> None:
    assert locking.LEVELS == [0, 1, 2, 3, 4]
    assert locking.LEVEL_NAMES == {0: "cluster", 1: "instance", 2: "nodegroup", 3: "node",
                                   4: "node-res"}
    assert locking.ALL_SET is None
    assert locking.BGL == "BGL"


def test_names_per_level() -> None:
    glm = _glm()
    assert glm.names(LEVEL_CLUSTER) == {BGL}
    assert glm.names(LEVEL_INSTANCE) == {"inst1.example.com", "inst2.example.com"}
    assert glm.names(LEVEL_NODEGROUP) == {"default"}
    assert glm.names(LEVEL_NODE) == glm.names(LEVEL_NODE_RES) == {"node1", "node2"}
    with pytest.raises(errors.ProgrammerError):
        glm.names(99)


def test_acquire_in_order_and_release_in_reverse() -> None:
    glm = _glm()
    assert glm.acquire(LEVEL_CLUSTER, [BGL], shared=True) == {BGL}
    assert glm.acquire(LEVEL_INSTANCE, ["inst1.example.com"]) == {"inst1.example.com"}
    assert glm.acquire(LEVEL_NODEGROUP, ALL_SET, shared=True) == {"default"}
    assert glm.acquire(LEVEL_NODE, ["node1", "node2"]) == {"node1", "node2"}
    assert glm.acquire(LEVEL_NODE_RES, ["node2"]) == {"node2"}
    assert glm.owning_all(LEVEL_NODEGROUP)
    assert glm.list_owned(LEVEL_NODE) == {"node1", "node2"}
    assert glm.check_owned(LEVEL_INSTANCE, "inst1.example.com", shared=False)
    assert not glm.check_owned(LEVEL_INSTANCE, ["inst2.example.com"])
    for level in reversed(locking.LEVELS):
        glm.release(level)
    assert not any(glm.is_owned(level) for level in locking.LEVELS)


def test_release_all_frees_every_level_of_the_caller_only(spawn) -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
    glm.acquire(LEVEL_INSTANCE, ["inst1.example.com"])
    glm.acquire(LEVEL_NODE, ALL_SET, shared=True)
    glm.acquire(LEVEL_NODE_RES, ["node2"])
    other_holds = threading.Event()
    release_other = threading.Event()

    def other() -> None:
        glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
        glm.acquire(LEVEL_INSTANCE, ["inst2.example.com"])
        other_holds.set()
        release_other.wait(10)
        glm.release_all()

    thread = spawn(other)
    assert other_holds.wait(10)
    glm.release_all()
    assert not any(glm.is_owned(level) for level in locking.LEVELS)
    # the other thread's locks are untouched: inst2 is still taken
    assert glm.acquire(LEVEL_CLUSTER, [BGL], shared=True) == {BGL}
    assert glm.acquire(LEVEL_INSTANCE, ["inst2.example.com"], timeout=0) is None
    glm.release_all()
    release_other.set()
    thread.join(10)
    assert not spawn.errors
    glm.acquire(LEVEL_CLUSTER, [BGL])          # exclusive: nobody holds anything now
    glm.release_all()
    glm.release_all()                          # holding nothing: nothing to do


@pytest.mark.parametrize("held,wanted", [
    (LEVEL_NODE, LEVEL_INSTANCE),
    (LEVEL_NODE, LEVEL_NODEGROUP),
    (LEVEL_NODE_RES, LEVEL_NODE),
    (LEVEL_INSTANCE, LEVEL_CLUSTER),
], ids=["node-then-instance", "node-then-group", "noderes-then-node", "instance-then-bgl"])
def test_acquire_out_of_order_raises(held: int, wanted: int) -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
    glm.acquire(held, ALL_SET)
    with pytest.raises(errors.LockError, match="while owning level"):
        glm.acquire(wanted, ALL_SET, timeout=0)
    if wanted != LEVEL_CLUSTER:
        assert not glm.is_owned(wanted)
    glm.release(held)
    glm.release(LEVEL_CLUSTER)


def test_bgl_required_for_other_levels() -> None:
    glm = _glm()
    for level in locking.LEVELS[1:]:
        with pytest.raises(errors.LockError, match="BGL"):
            glm.acquire(level, ALL_SET, shared=True)


def test_release_bgl_while_holding_others_raises() -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, [BGL])
    glm.acquire(LEVEL_NODE, ["node1"])
    with pytest.raises(errors.LockError):
        glm.release(LEVEL_CLUSTER)
    with pytest.raises(errors.LockError):
        glm.release(LEVEL_CLUSTER, [BGL])
    assert glm.is_owned(LEVEL_CLUSTER)
    glm.release(LEVEL_NODE)
    glm.release(LEVEL_CLUSTER)


def test_release_whole_lower_level_while_holding_higher_raises() -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
    glm.acquire(LEVEL_INSTANCE, ["inst1.example.com", "inst2.example.com"])
    glm.acquire(LEVEL_NODE, ["node1"])
    with pytest.raises(errors.LockError):
        glm.release(LEVEL_INSTANCE)
    # Explicit partial release of a lower level is allowed.
    glm.release(LEVEL_INSTANCE, ["inst2.example.com"])
    assert glm.list_owned(LEVEL_INSTANCE) == {"inst1.example.com"}
    glm.release(LEVEL_NODE)
    glm.release(LEVEL_INSTANCE)
    glm.release(LEVEL_CLUSTER)


def test_add_and_remove_locks() -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
    glm.add(LEVEL_INSTANCE, "inst3.example.com", acquired=True)
    assert glm.list_owned(LEVEL_INSTANCE) == {"inst3.example.com"}
    assert glm.remove(LEVEL_INSTANCE, ["inst3.example.com"]) == ["inst3.example.com"]
    assert "inst3.example.com" not in glm.names(LEVEL_INSTANCE)
    assert not glm.is_owned(LEVEL_INSTANCE)
    glm.add(LEVEL_NODE, ["node3"])
    glm.add(LEVEL_NODE_RES, ["node3"])
    assert "node3" in glm.names(LEVEL_NODE_RES)
    with pytest.raises(errors.ProgrammerError):
        glm.add(LEVEL_CLUSTER, ["BGL2"])
    with pytest.raises(errors.ProgrammerError):
        glm.remove(LEVEL_CLUSTER, [BGL])
    glm.release(LEVEL_CLUSTER)


def test_add_checks_level_order() -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, [BGL])
    glm.acquire(LEVEL_NODE, ["node1"])
    with pytest.raises(errors.LockError):
        glm.add(LEVEL_INSTANCE, ["inst9"], acquired=True)
    glm.release(LEVEL_NODE)
    glm.release(LEVEL_CLUSTER)


def test_acquire_removed_instance_raises() -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
    glm.acquire(LEVEL_INSTANCE, ["inst1.example.com"])
    glm.remove(LEVEL_INSTANCE, "inst1.example.com")
    with pytest.raises(errors.LockError):
        glm.acquire(LEVEL_INSTANCE, ["inst1.example.com"])
    assert not glm.is_owned(LEVEL_INSTANCE)
    glm.release(LEVEL_CLUSTER)


def test_exclusive_bgl_excludes_everyone(spawn) -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, [BGL])
    spawn(lambda: glm.acquire(LEVEL_CLUSTER, [BGL], shared=True, timeout=0), name="other")
    spawn.join()
    assert spawn.results["other"] is None
    glm.release(LEVEL_CLUSTER)


def test_timeout_returns_none_and_holds_nothing(spawn) -> None:
    clock = FakeClock()
    glm = locking.GanetiLockManager(["node1", "node2"], ["default"], [], clock=clock,
                                    wait=clock.wait)
    glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
    glm.acquire(LEVEL_NODE, ["node2"])

    def other() -> tuple:
        glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
        got = glm.acquire(LEVEL_NODE, ALL_SET, timeout=5)
        owned = glm.is_owned(LEVEL_NODE)
        glm.release(LEVEL_CLUSTER)
        return got, owned

    spawn(other, name="other")
    clock.wait_for_waiters(1)
    assert clock.deadlines == [1005.0]
    clock.advance(5)
    spawn.join()
    assert spawn.results["other"] == (None, False)
    glm.release(LEVEL_NODE)
    glm.release(LEVEL_CLUSTER)


def test_monitor_query_all_levels(spawn, wait_until) -> None:
    monitor = locking.LockMonitor()
    glm = _glm(monitor)
    me = threading.current_thread().name
    glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
    glm.acquire(LEVEL_INSTANCE, ["inst1.example.com"])

    def waiter() -> None:
        glm.acquire(LEVEL_CLUSTER, [BGL], shared=True)
        glm.acquire(LEVEL_INSTANCE, ["inst1.example.com"], timeout=5)
        glm.release(LEVEL_INSTANCE)
        glm.release(LEVEL_CLUSTER)

    spawn(waiter, name="job-2")
    wait_until(lambda: any(r["pending"] for r in monitor.query()
                           if r["name"] == "instance/inst1.example.com"))
    rows = monitor.query()
    names = [r["name"] for r in rows]
    assert names == sorted(names)
    assert "cluster/BGL" in names and "node/node1" in names and "node-res/node2" in names
    by_name = {r["name"]: r for r in rows}
    assert by_name["cluster/BGL"]["mode"] == "shared"
    assert by_name["cluster/BGL"]["owner"] == sorted([me, "job-2"])
    assert by_name["instance/inst1.example.com"] == {
        "name": "instance/inst1.example.com", "mode": "exclusive", "owner": [me],
        "pending": [["exclusive", ["job-2"]]]}
    assert by_name["instance/inst2.example.com"]["owner"] == []
    glm.release(LEVEL_INSTANCE)
    glm.release(LEVEL_CLUSTER)
    spawn.join()
    assert all(r["owner"] == [] and r["pending"] == [] for r in monitor.query())


class _JobDeps:
    def get_lock_info(self) -> list[dict]:
        return [{"name": "job/123", "mode": None, "owner": [],
                 "pending": [["success", ["job/456"]]]}]


def test_monitor_providers_weak_and_strong() -> None:
    monitor = locking.LockMonitor()
    provider = _JobDeps()
    monitor.register(provider)
    monitor.register(provider)
    assert [r["name"] for r in monitor.query()] == ["job/123"]
    del provider
    gc.collect()
    assert monitor.query() == []
    kept = _JobDeps()
    monitor.register(kept, weak=False)
    monitor.unregister(kept)
    assert monitor.query() == []
    with pytest.raises(errors.ProgrammerError):
        monitor.register(object())  # type: ignore[arg-type]
