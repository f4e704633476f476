"""Shared helpers for the locking tests: bounded threads and polling."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest


class Spawner:
    """Starts daemon threads, remembers exceptions, joins with a bound."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.results: dict[str, Any] = {}

    def __call__(self, fn: Callable[[], Any], name: str | None = None) -> threading.Thread:
        def run() -> None:
            try:
                self.results[threading.current_thread().name] = fn()
            except BaseException as exc:  # recorded for the test to inspect
                self.errors.append(exc)
                self.results[threading.current_thread().name] = exc

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def join(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"threads did not finish (deadlock?): {alive}"


@pytest.fixture
def spawn() -> Spawner:
    spawner = Spawner()
    yield spawner
    spawner.join()


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``cond`` until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.002)


def pending_count(info: dict[str, Any]) -> int:
    """Number of waiting threads in one monitor entry."""
    return sum(len(names) for _, names in info["pending"])


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., None]:
    return wait_until


@pytest.fixture(name="pending_count")
def pending_count_fixture() -> Callable[[dict[str, Any]], int]:
    return pending_count
