"""The job queue storage on a full disk: failed writes are retried with a
bounded backoff on an injected clock, in order (issue 19, item 1).

The files are written through :class:`fakes.FlakyDisk`, which fails with
ENOSPC on demand.
"""

from __future__ import annotations

import threading
import time

from fakes import FakeClock, FlakyDisk

from ganeti import errors
from ganeti.jqueue import JobStorage
from ganeti.jqueue import storage as st
from ganeti.pathutils import Paths

TIMEOUT = 10.0


def test_retry_delay_doubles_and_is_bounded() -> None:
    assert [st.retry_delay(n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 10, 10]
    assert st.retry_delay(10 ** 6) == st.RETRY_MAX


def test_writer_backs_off_on_the_injected_clock(tmp_path) -> None:
    disk, clock = FlakyDisk(), FakeClock()
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE, write_files=disk,
                         clock=clock, wait=clock.wait)
    storage.open()
    disk.full = True
    done = threading.Event()
    t = threading.Thread(target=lambda: (storage.write_jobs([(1, b"one")], retry=True),
                                         done.set()))
    t.start()
    try:
        start = clock.now
        for attempt, waited in enumerate([0.5, 1.0, 2.0, 4.0], start=1):
            disk.wait_failures(attempt)
            clock.wait_for_waiters(1)
            assert clock.deadlines == [clock.now + waited]
            assert not done.is_set()
            clock.advance(waited)
        assert clock.now - start == 7.5
        disk.wait_failures(5)
        disk.full = False
        clock.wait_for_waiters(1)
        assert clock.deadlines == [clock.now + 8.0]
        clock.advance(8.0)
        t.join(TIMEOUT)
        assert done.is_set() and storage.read_job(1) == b"one"
        assert storage.write_error is None
    finally:
        disk.full = False
        storage.close()


def test_pending_writes_of_a_file_keep_their_order_while_failing(tmp_path) -> None:
    disk, clock = FlakyDisk(), FakeClock()
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE, write_files=disk,
                         clock=clock, wait=clock.wait)
    storage.open()
    try:
        disk.full = True
        storage.write_jobs([(1, b"old")], wait=False)
        disk.wait_failures(1)
        storage.write_jobs([(1, b"new"), (2, b"two")], wait=False)
        disk.full = False
        clock.wait_for_waiters(1)
        clock.advance(st.RETRY_MAX)
        deadline = time.monotonic() + TIMEOUT
        while storage.read_job(2) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert storage.read_job(1) == b"new"
        assert all(w.get(storage.job_path(1)) != b"old" for w in disk.writes[1:])
    finally:
        storage.close()


def test_closing_a_failing_storage_ends_the_waiting_writers(tmp_path) -> None:
    disk, clock = FlakyDisk(), FakeClock()
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE, write_files=disk,
                         clock=clock, wait=clock.wait)
    storage.open()
    disk.full = True
    failed: list[BaseException] = []

    def write() -> None:
        try:
            storage.write_jobs([(1, b"x")], retry=True)
        except errors.JobQueueError as exc:
            failed.append(exc)

    t = threading.Thread(target=write)
    t.start()
    disk.wait_failures(1)
    storage.close()
    t.join(TIMEOUT)
    assert len(failed) == 1 and storage.read_job(1) is None
