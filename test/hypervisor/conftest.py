"""Fixtures shared by the hypervisor tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fakes.fakeqmp import FakeQmp


@pytest.fixture
def qmp_peer() -> Iterator[Callable[..., FakeQmp]]:
    """Makes scripted QMP peers (test/fakes/fakeqmp.py): ``qmp_peer(answers, after=...)``.

    At teardown each is closed, which fails the test if a client sent it a
    command or argument outside its table.
    """
    made: list[FakeQmp] = []

    def make(answers: dict[str, Any] | None = None, **kwargs: Any) -> FakeQmp:
        made.append(FakeQmp(answers, **kwargs))
        return made[-1]

    yield make
    for fake in made:
        fake.close()
