"""Releasing the locks of threads that ended holding them (``release_ended_owners``;
``gnt-debug wconfd cleanuplocks``)."""

from __future__ import annotations

import threading

import pytest

from ganeti import locking
from ganeti.locking import ALL_SET, BGL, LEVEL_CLUSTER, LEVEL_INSTANCE, LEVEL_NODE

pytestmark = pytest.mark.timeout(30)


def _glm() -> locking.GanetiLockManager:
    return locking.GanetiLockManager(["node1", "node2"], ["default"], ["inst1"])


def _end_holding(glm: locking.GanetiLockManager, name: str, shared: bool = False,
                 nodes: list[str] | None = None) -> None:
    def body() -> None:
        glm.acquire(LEVEL_CLUSTER, BGL, shared=True)
        glm.acquire(LEVEL_NODE, ALL_SET if nodes is None else nodes, shared=shared)
    thread = threading.Thread(target=body, name=name)
    thread.start()
    thread.join(10)


def test_nothing_to_release_while_owners_live() -> None:
    glm = _glm()
    glm.acquire(LEVEL_CLUSTER, BGL)
    glm.acquire(LEVEL_INSTANCE, ["inst1"])
    assert glm.release_ended_owners() == []
    assert glm.list_owned(LEVEL_INSTANCE) == {"inst1"}


def test_the_locks_of_an_ended_thread_are_released_and_waiters_get_them() -> None:
    glm = _glm()
    _end_holding(glm, "job/9", nodes=["node1"])
    got = threading.Event()

    def waiter() -> None:
        glm.acquire(LEVEL_CLUSTER, BGL)          # exclusive: waits for job/9's shared BGL
        glm.acquire(LEVEL_NODE, ["node1"])
        got.set()
        glm.release(LEVEL_NODE)
        glm.release(LEVEL_CLUSTER)
    thread = threading.Thread(target=waiter, name="job/10")
    thread.start()
    assert not got.wait(0.2)
    freed = glm.release_ended_owners()
    assert sorted(freed) == [("cluster/BGL", "job/9"), ("cluster/[lockset]", "job/9"),
                             ("node/[lockset]", "job/9"), ("node/node1", "job/9")]
    assert got.wait(10)
    thread.join(10)
    assert glm.release_ended_owners() == []


def test_a_whole_set_hold_of_an_ended_thread_is_released() -> None:
    glm = _glm()
    _end_holding(glm, "job/5", shared=True)
    assert ("node/[lockset]", "job/5") in glm.release_ended_owners()
    glm.acquire(LEVEL_CLUSTER, BGL)
    assert glm.acquire(LEVEL_NODE, ALL_SET, timeout=1) == {"node1", "node2"}
