"""GroupCommitter: leader-based group commit."""

from __future__ import annotations

import threading

import pytest

from ganeti import errors
from ganeti.utils.groupcommit import GroupCommitter

pytestmark = pytest.mark.timeout(30)


def test_single_producer_writes_and_waits() -> None:
    written: list[int] = []
    gc = GroupCommitter(lambda s, d: written.append(s), durable_serial=3)
    gc.wait(3)                                # already durable
    gc.queue(4, b"x")
    gc.wait(4)
    assert written == [4] and gc.durable_serial() == 4 and gc.writes == 1


def test_queued_snapshots_coalesce_into_the_newest() -> None:
    written: list[tuple[int, bytes]] = []
    gc = GroupCommitter(lambda s, d: written.append((s, d)))
    for s in (1, 2, 3):
        gc.queue(s, str(s).encode())
    gc.wait(1)
    gc.wait(3)
    assert written == [(3, b"3")]
    with pytest.raises(errors.ProgrammerError):
        gc.queue(2, b"old")


def test_write_failure_breaks_the_committer() -> None:
    def fail(serial: int, data: bytes) -> None:
        raise OSError(5, "I/O error")

    gc = GroupCommitter(fail)
    gc.queue(1, b"a")
    with pytest.raises(OSError):
        gc.wait(1)
    assert isinstance(gc.broken, OSError)
    gc.queue(2, b"b")
    with pytest.raises(OSError):
        gc.wait(2)


def test_waiters_share_one_write_while_a_write_is_in_flight() -> None:
    gate = threading.Event()
    entered = threading.Event()
    written: list[int] = []

    def write(serial: int, data: bytes) -> None:
        entered.set()
        if serial == 1:
            assert gate.wait(10)
        written.append(serial)

    gc = GroupCommitter(write)
    gc.queue(1, b"1")
    lead = threading.Thread(target=gc.wait, args=(1,))
    lead.start()
    assert entered.wait(10)
    waiters = []
    for s in (2, 3, 4):
        gc.queue(s, b"n")
        waiters.append(threading.Thread(target=gc.wait, args=(s,)))
        waiters[-1].start()
    gate.set()
    for t in [lead, *waiters]:
        t.join(10)
        assert not t.is_alive()
    assert written == [1, 4]
