"""JobTable: live, finished, reserved and corrupt ids; lookups that read back from disk."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from ganeti import constants, errors, opcodes, serializer
from ganeti.jqueue import storage as st
from ganeti.jqueue.job import JobStub, QueuedJob, QueuedOpCode, job_to_disk
from ganeti.jqueue.storage import JobStorage
from ganeti.jqueue.table import JobTable
from ganeti.pathutils import Paths


@pytest.fixture
def storage(tmp_path: Any) -> Iterator[JobStorage]:
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE)
    storage.open()
    yield storage
    storage.close()


def _job(job_id: int, status: str = constants.OP_STATUS_QUEUED,
         end: list[int] | None = None) -> QueuedJob:
    op = QueuedOpCode.from_opcode(opcodes.OpTestDelay(duration=0))
    op.status = status                  # a fixture: as read from a job file
    return QueuedJob(id=job_id, ops=[op], end_timestamp=end)


def _write(storage: JobStorage, job: QueuedJob) -> None:
    storage.write_jobs([(job.id, serializer.dumps(job_to_disk(job)).encode())])


def test_allocated_ids_are_known_but_not_listed_until_registered(storage: JobStorage) -> None:
    table = JobTable(storage)
    with table.lock:
        ids = table.allocate(2)
        assert ids == [1, 2] and table.knows(1) and table.knows(2)
        assert table.ids() == []
        table.add_live(_job(1))
        table.unreserve([2])
        assert table.ids() == [1] and table.live_count() == 1
        assert table.knows(1) and not table.knows(2)
        assert table.allocate(1) == [3]          # an unreserved id is never handed out again


def test_reserve_existing_raises_the_serial_and_refuses_known_ids(storage: JobStorage) -> None:
    table = JobTable(storage)
    with table.lock:
        assert table.reserve_existing(7) is True
        assert storage.last_id == 7
        assert table.reserve_existing(3) is False
        with pytest.raises(errors.JobQueueError, match="already known"):
            table.reserve_existing(7)
        table.add_live(_job(7))
        with pytest.raises(errors.JobQueueError, match="already known"):
            table.reserve_existing(7)


def test_finished_job_becomes_a_stub_and_stays_cached(storage: JobStorage) -> None:
    table = JobTable(storage)
    job = _job(1)
    with table.lock:
        table.add_live(job)
        assert table.live(1) is job and table.get("1") is job
        job.finalize_ops(0, constants.OP_STATUS_CANCELED, "canceled", 1234.5)
        table.add_finished(job, now=99.0)
        assert table.live(1) is None and table.live_count() == 0
        stub = table.stub(1)
        assert stub is not None and (stub.status, stub.end) == ("canceled", 1234)
        assert table.finished_ids() == [1] and table.ids() == [1]
        assert table.get(1) is job             # from the cache: no file was written
        assert table.status_of(1) == "canceled"


def test_finished_job_without_end_time_gets_now(storage: JobStorage) -> None:
    table = JobTable(storage)
    with table.lock:
        table.add_finished(_job(4, constants.OP_STATUS_SUCCESS), now=50.0)
        stub = table.stub(4)
        assert stub is not None and stub.end == 50.0


def test_finished_jobs_are_read_back_when_not_cached(storage: JobStorage) -> None:
    table = JobTable(storage, cache_size=1)
    first, second = _job(1, "success", [10, 0]), _job(2, "error", [20, 0])
    for job in (first, second):
        _write(storage, job)
    with table.lock:
        table.add_finished(first, now=0)
        table.add_finished(second, now=0)       # pushes job 1 out of the cache
        again = table.get(1)
        assert again is not None and again is not first
        assert again.status() == "success" and again.archived is False
        assert table.get(1) is again            # cached now


def test_stub_only_jobs_are_read_on_demand(storage: JobStorage) -> None:
    table = JobTable(storage)
    _write(storage, _job(5, "success", [10, 0]))
    with table.lock:
        table.add_stub(5, JobStub("success", 10))
        table.add_stub(6, JobStub("error", None))   # its file is gone
        assert table.status_of(5) == "success"      # the stub answers, no read
        job = table.get(5)
        assert job is not None and job.id == 5
        assert table.get(6) is None and table.status_of(6) == "error"


def test_archived_jobs_are_found_only_when_asked_and_never_cached(storage: JobStorage) -> None:
    table = JobTable(storage)
    _write(storage, _job(3, "success", [10, 0]))
    assert storage.archive_jobs([3]) == [3]
    with table.lock:
        assert table.get(3, archived=False) is None
        job = table.get(3)
        assert job is not None and job.archived is True
        assert table.get(3) is not job
        assert table.status_of(3) == "success"
        assert table.ids() == []


def test_remove_archived_forgets_stub_and_cache(storage: JobStorage) -> None:
    table = JobTable(storage)
    with table.lock:
        table.add_finished(_job(1, "success", [1, 0]), now=0)
        table.remove_archived([1, 99])
        assert table.stub(1) is None and table.get(1) is None and table.ids() == []


@pytest.mark.parametrize("job_id", ["x", None, "", [1], "1.0"])
def test_lookup_of_nonsense_ids_is_none(storage: JobStorage, job_id: Any) -> None:
    table = JobTable(storage)
    with table.lock:
        table.add_live(_job(1))
        assert table.get(job_id) is None


def test_unreadable_finished_job_is_none(storage: JobStorage) -> None:
    table = JobTable(storage)
    storage.write_jobs([(8, b"{corrupt")])
    with table.lock:
        table.add_stub(8, JobStub("success", None))
        assert table.get(8) is None


def test_corrupt_ids_are_cleared_when_the_job_is_registered(storage: JobStorage) -> None:
    table = JobTable(storage)
    with table.lock:
        for job_id in (4, 2, 9):
            table.add_corrupt(job_id)
        assert table.corrupt_ids() == [4, 2, 9]
        table.add_live(_job(2))
        table.add_finished(_job(9, "success"), now=0)
        assert table.corrupt_ids() == [4]


def test_a_finished_job_replaced_by_a_symlink_is_not_followed(storage: JobStorage,
                                                              tmp_path: Any, caplog) -> None:
    # the stub was registered at start-up; later job-9 became a link to a job file
    # elsewhere: the table must not serve that file as job 9
    outside = tmp_path / "outside"
    outside.write_bytes(serializer.dumps(job_to_disk(_job(9, "success", [1, 0]))).encode())
    os.symlink(outside, storage.job_path(9))
    os.makedirs(os.path.dirname(storage.archived_path(10)))
    os.symlink(outside, storage.archived_path(10))
    table = JobTable(storage)
    with table.lock:
        table.add_stub(9, JobStub("success", None))
        assert table.get(9) is None and table.get(10) is None
    assert "job-9 is a symbolic link" in caplog.text
    assert "job-10 is a symbolic link" in caplog.text
