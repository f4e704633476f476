"""Randomized concurrency tests: seeded schedules of many threads.

Every thread picks random levels (in order), random names or the whole
level, random modes and random timeouts.  A shared tracker records who
holds what (registered after acquiring, unregistered before releasing),
so any overlap that breaks mutual exclusion is caught.  Every run is
bounded: a deadlock shows up as threads that do not finish.
"""

from __future__ import annotations

import itertools
import random
import threading
import time

import pytest

from ganeti import errors, locking
from ganeti.locking import ALL_SET, BGL, LEVEL_CLUSTER

pytestmark = pytest.mark.timeout(60)

TIMEOUTS = [None, 0.0, 0.002, 0.01, 0.05]
JOIN_BOUND = 30.0


class Tracker:
    """Who holds which lock, as the threads themselves report it."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._excl: dict[tuple, str] = {}
        self._shared: dict[tuple, set[str]] = {}
        self.violations: list[str] = []

    def enter(self, key: tuple, shared: bool, me: str) -> None:
        with self._mutex:
            if key in self._excl:
                self.violations.append(f"{me} got {key} while {self._excl[key]} holds it exclusively")
            if shared:
                self._shared.setdefault(key, set()).add(me)
            else:
                if self._shared.get(key):
                    self.violations.append(f"{me} got {key} exclusively while shared by "
                                           f"{sorted(self._shared[key])}")
                self._excl[key] = me

    def leave(self, key: tuple, shared: bool, me: str) -> None:
        with self._mutex:
            if shared:
                self._shared[key].discard(me)
            else:
                del self._excl[key]

    def empty(self) -> bool:
        with self._mutex:
            return not self._excl and not any(self._shared.values())


def _run_threads(targets: list, names: list[str]) -> list[BaseException]:
    failures: list[BaseException] = []

    def wrap(fn):
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                failures.append(exc)
        return run

    threads = [threading.Thread(target=wrap(fn), name=name, daemon=True)
               for fn, name in zip(targets, names)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + JOIN_BOUND
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, f"deadlock: threads still running after {JOIN_BOUND}s: {alive}"
    return failures


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_manager_schedule(seed: int) -> None:
    monitor = locking.LockMonitor()
    level_names = {
        locking.LEVEL_INSTANCE: [f"inst{i}" for i in range(8)],
        locking.LEVEL_NODEGROUP: ["g1", "g2"],
        locking.LEVEL_NODE: [f"node{i}" for i in range(5)],
    }
    level_names[locking.LEVEL_NODE_RES] = list(level_names[locking.LEVEL_NODE])
    glm = locking.GanetiLockManager(level_names[locking.LEVEL_NODE],
                                    level_names[locking.LEVEL_NODEGROUP],
                                    level_names[locking.LEVEL_INSTANCE], monitor=monitor)
    tracker = Tracker()
    stats = {"ops": 0, "timeouts": 0}
    stats_mutex = threading.Lock()
    n_threads, n_rounds = 8, 120

    def worker(idx: int) -> None:
        rng = random.Random(seed * 1000 + idx)
        me = threading.current_thread().name
        for _ in range(n_rounds):
            held: list[tuple[int, list[str], bool]] = []
            ops = timeouts = 0
            bgl_shared = rng.random() < 0.9
            ops += 1
            if glm.acquire(LEVEL_CLUSTER, [BGL], shared=bgl_shared,
                           timeout=rng.choice(TIMEOUTS)) is None:
                timeouts += 1
            else:
                held.append((LEVEL_CLUSTER, [BGL], bgl_shared))
                for key in [(LEVEL_CLUSTER, BGL)]:
                    tracker.enter(key, bgl_shared, me)
                for level in locking.LEVELS[1:]:
                    if rng.random() < 0.4:
                        continue
                    shared = rng.random() < 0.5
                    if rng.random() < 0.15:
                        wanted = ALL_SET
                    else:
                        wanted = rng.sample(level_names[level],
                                            rng.randint(1, len(level_names[level])))
                    ops += 1
                    got = glm.acquire(level, wanted, shared=shared,
                                      timeout=rng.choice(TIMEOUTS),
                                      priority=rng.choice([-5, 0, 0, 5]))
                    if got is None:
                        timeouts += 1
                        assert not glm.is_owned(level)
                        break
                    assert got == glm.list_owned(level)
                    for name in got:
                        tracker.enter((level, name), shared, me)
                    held.append((level, sorted(got), shared))
                time.sleep(rng.choice([0, 0.0002, 0.0005, 0.001]))
                # Sometimes give back part of a lower level early.
                if len(held) >= 3 and rng.random() < 0.3:
                    level, names, shared = held[1]
                    if len(names) > 1:
                        drop = names[: len(names) // 2]
                        for name in drop:
                            tracker.leave((level, name), shared, me)
                        glm.release(level, drop)
                        held[1] = (level, names[len(names) // 2:], shared)
                        assert glm.list_owned(level) == set(held[1][1])
            for level, names, shared in reversed(held):
                for name in names:
                    tracker.leave((level, name), shared, me)
                glm.release(level)
            assert not any(glm.is_owned(level) for level in locking.LEVELS)
            with stats_mutex:
                stats["ops"] += ops
                stats["timeouts"] += timeouts

    failures = _run_threads([lambda i=i: worker(i) for i in range(n_threads)],
                            [f"job-{i}" for i in range(n_threads)])
    assert not failures, failures
    assert not tracker.violations, tracker.violations[:5]
    assert tracker.empty()
    assert stats["ops"] >= n_threads * n_rounds
    print(f"seed {seed}: {stats['ops']} acquire calls, {stats['timeouts']} timed out")
    # All locks are free: the monitor says so, and everything can be taken at once.
    for row in monitor.query():
        assert row["owner"] == [] and row["pending"] == [], row
    assert glm.acquire(LEVEL_CLUSTER, ALL_SET, timeout=0) == {BGL}
    for level in locking.LEVELS[1:]:
        assert glm.acquire(level, ALL_SET, timeout=0) == set(level_names[level])
    for level in reversed(locking.LEVELS):
        glm.release(level)


@pytest.mark.parametrize("seed", [11, 12])
def test_random_lockset_with_add_remove(seed: int) -> None:
    lset = locking.LockSet([f"n{i}" for i in range(10)], "set")
    tracker = Tracker()
    counter = itertools.count()
    counter_mutex = threading.Lock()
    n_threads, n_rounds = 6, 150

    def fresh_name() -> str:
        with counter_mutex:
            return f"new{next(counter)}"

    def worker(idx: int) -> None:
        rng = random.Random(seed * 1000 + idx)
        me = threading.current_thread().name
        for _ in range(n_rounds):
            shared = rng.random() < 0.4
            current = sorted(lset.names())
            if rng.random() < 0.1:
                wanted = ALL_SET
            else:
                wanted = rng.sample(current, min(len(current), rng.randint(1, 3)))
            try:
                got = lset.acquire(wanted, shared=shared, timeout=rng.choice(TIMEOUTS))
            except errors.LockError:
                # A name was removed before or while we waited: nothing held.
                assert not lset.is_owned()
                continue
            if got is None:
                assert not lset.is_owned()
                continue
            for name in got:
                tracker.enter(name, shared, me)
            time.sleep(rng.choice([0, 0, 0.0005]))
            if not shared and got and rng.random() < 0.3:
                victim = rng.choice(sorted(got))
                tracker.leave(victim, shared, me)
                assert lset.remove([victim]) == [victim]
                got.discard(victim)
                if got or wanted is ALL_SET:
                    # Still owning something (or the whole set): add in place.
                    new = fresh_name()
                    lset.add([new], acquired=True)
                    got.add(new)
                    tracker.enter(new, False, me)
                else:
                    lset.add([fresh_name()])
            if got:
                for name in got:
                    tracker.leave(name, shared, me)
                lset.release()
            assert not lset.is_owned()

    failures = _run_threads([lambda i=i: worker(i) for i in range(n_threads)],
                            [f"w{i}" for i in range(n_threads)])
    assert not failures, failures
    assert not tracker.violations, tracker.violations[:5]
    assert tracker.empty()
    names = lset.names()
    assert len(names) == 10  # every remove was paired with an add
    for row in lset.get_lock_info():
        assert row["owner"] == [] and row["pending"] == [], row
    assert lset.acquire(ALL_SET, timeout=0) == names
    lset.release()
