"""New jobs are acknowledged only on a quorum (doc/design/replication.md, Invariant 1).

The storage hands each committed batch to ``replicate_batch`` and a
submission waits for ``wait_replicated`` with its answer; here both are
plain functions standing in for the replicator (whose quorum rules are
tested in test/replication/).  The queue under test is the real one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import pytest
from fakes import FakeClock, FlakyDisk

from ganeti import errors, serializer
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as st
from ganeti.pathutils import Paths

pytestmark = pytest.mark.timeout(60)


class Quorum:
    """Counts replicated batches; ``fail`` makes the next waits refuse."""

    def __init__(self) -> None:
        self.batches: list[dict[str, bytes]] = []
        self.urgent: list[bool] = []
        self.waited: list[object] = []
        self.fail = False
        self.lock = threading.Lock()

    def replicate(self, batch: dict[str, bytes], urgent: bool) -> int:
        with self.lock:
            self.batches.append(dict(batch))
            self.urgent.append(urgent)
            return len(self.batches)

    def wait(self, token: object) -> None:
        self.waited.append(token)
        if self.fail:
            raise errors.JobQueueQuorumError("stored on 1 of 3 master candidates")


RAN: list[str] = []


class Recorder:
    """Records the ``job=N`` of every opcode it runs."""

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        RAN.extend(r[1].split(";")[0] for r in op.reason if r[0].startswith("gnt:opcode:"))
        cbs.notify_start()
        return True


def _queue(paths: Paths, quorum: Quorum) -> JobQueue:
    storage = JobStorage(paths, sync_mode=st.SYNC_NONE, replicate_batch=quorum.replicate,
                         wait_replicated=quorum.wait)
    storage.open()
    q = JobQueue(storage, Recorder, workers=1)
    q.load()
    return q


def _on_disk(paths: Paths, job_id: int) -> dict[str, Any]:
    with open(os.path.join(paths.queue_dir, f"job-{job_id}"), "rb") as fh:
        return serializer.loads(fh.read())


def test_a_submission_waits_for_the_quorum_of_its_own_batch(tmp_path) -> None:
    quorum = Quorum()
    q = _queue(Paths(root=str(tmp_path)), quorum)
    try:
        job_id = q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        assert quorum.waited and isinstance(quorum.waited[-1], int)
        # the batch waited for holds the new job file and the queue serial
        names = {os.path.basename(p) for p in quorum.batches[quorum.waited[-1] - 1]}
        assert {f"job-{job_id}", "serial"} <= names
    finally:
        q.shutdown(5)


def test_new_jobs_and_starts_are_urgent_other_status_changes_not(tmp_path) -> None:
    """The replicator may hold a batch of status changes for company
    (doc/design/replication.md, "Held updates"); a new job's batch (someone
    waits for its quorum) and a job's start (a later master must not run a
    started job again) go at once."""
    quorum = Quorum()
    q = _queue(Paths(root=str(tmp_path)), quorum)
    try:
        job_id = q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        q.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                b'"success"' in data for batch in quorum.batches for data in batch.values()):
            time.sleep(0.01)
        with quorum.lock:
            seen = list(zip(quorum.batches, quorum.urgent))
        waited = quorum.waited[-1] - 1
        assert seen[waited][1] is True
        assert f"job-{job_id}" in {os.path.basename(p) for p in seen[waited][0]}

        def flags(word: bytes) -> list[bool]:
            return [urgent for batch, urgent in seen
                    if any(word in data for data in batch.values())]

        assert flags(b'"running"') and all(flags(b'"running"'))
        assert flags(b'"success"') and not any(flags(b'"success"'))
    finally:
        q.shutdown(5)


@pytest.mark.parametrize("many", [False, True], ids=["SubmitJob", "SubmitManyJobs"])
def test_a_job_without_quorum_is_refused_failed_and_its_id_never_reused(tmp_path,
                                                                        many: bool) -> None:
    paths = Paths(root=str(tmp_path))
    quorum = Quorum()
    q = _queue(paths, quorum)
    q.start()
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
    try:
        quorum.fail = True
        with pytest.raises(errors.JobQueueQuorumError, match="1 of 3"):
            if many:
                q.submit_many_jobs([[op], [op]])
            else:
                q.submit_job([op])
        refused = [1, 2] if many else [1]
        for job_id in refused:
            data = _on_disk(paths, job_id)        # written here, finished as failed
            assert [o["status"] for o in data["ops"]] == ["error"]
            assert data["ops"][0]["result"][0] == "JobQueueQuorumError"
            assert q.query_jobs([job_id], ["status"])[0] == ["error"]
        quorum.fail = False
        RAN.clear()
        good = q.submit_job([op])
        assert good == refused[-1] + 1
        q.wait_for_job_change(good, ["status"], None, -1, 1.0)
    finally:
        quorum.fail = False
        q.shutdown(5)
    # a restarted master finds the refused jobs finished, not queued
    q = _queue(paths, Quorum())
    try:
        q.start()
        assert [q.query_jobs([i], ["status"])[0] for i in refused] == [["error"]] * len(refused)
    finally:
        q.shutdown(5)
    assert not any(f"job={i}" in RAN for i in refused)


def test_each_new_job_file_records_the_epoch_of_the_master_that_accepted_it(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    epoch = [4]
    storage = JobStorage(paths, sync_mode=st.SYNC_NONE)
    storage.open()
    q = JobQueue(storage, Recorder, workers=1, epoch=lambda: epoch[0])
    q.load()
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
    try:
        first = q.submit_job([op])
        epoch[0] = 5
        second = q.submit_many_jobs([[op]])[0][1]
    finally:
        q.shutdown(5)
    assert _on_disk(paths, first)["epoch"] == 4 and _on_disk(paths, second)["epoch"] == 5


def _job_file_for_pickup(paths: Paths, job_id: int) -> None:
    """A queued job file written by another process (as PickupJob expects)."""
    q = _queue(Paths(root=str(paths.root) + "-other"), Quorum())
    try:
        other = q.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
    finally:
        q.shutdown(5)
    with open(os.path.join(str(paths.root) + "-other", "var/lib/ganeti/queue",
                           f"job-{other}"), "rb") as fh:
        data = serializer.loads(fh.read())
    data["id"] = job_id
    with open(os.path.join(paths.queue_dir, f"job-{job_id}"), "wb") as fh:
        fh.write(serializer.dumps(data).encode())


def test_a_picked_up_job_waits_for_its_quorum(tmp_path) -> None:
    paths = Paths(root=str(tmp_path / "root"))
    quorum = Quorum()
    q = _queue(paths, quorum)
    try:
        _job_file_for_pickup(paths, 7)
        q.pickup_job(7)
        # the batch waited for holds the adopted job's file and the raised serial
        names = {os.path.basename(p) for p in quorum.batches[quorum.waited[-1] - 1]}
        assert {"job-7", "serial"} <= names
        assert q.query_jobs([7], ["status"])[0] is not None
    finally:
        q.shutdown(5)


def test_a_pickup_without_quorum_is_refused_and_can_be_repeated(tmp_path) -> None:
    paths = Paths(root=str(tmp_path / "root"))
    quorum = Quorum()
    q = _queue(paths, quorum)
    try:
        _job_file_for_pickup(paths, 7)
        quorum.fail = True
        with pytest.raises(errors.JobQueueQuorumError, match="Job 7 not picked up"):
            q.pickup_job(7)
        assert q.query_jobs([7], ["status"]) == [None]      # not adopted
        quorum.fail = False
        q.pickup_job(7)                                     # the file stayed: adopted now
        assert q.query_jobs([7], ["status"])[0] == ["queued"]
    finally:
        q.shutdown(5)


# the quorum write and the local write at once ----------------------------------

class Events:
    """The order in which the storage writes locally and hands batches over."""

    def __init__(self) -> None:
        self.log: list[tuple[str, frozenset[str]]] = []

    def write(self, files: dict[str, bytes], **_: Any) -> None:
        self.log.append(("write", frozenset(os.path.basename(p) for p in files)))

    def replicate(self, batch: dict[str, bytes], urgent: bool) -> int:
        self.log.append(("send", frozenset(os.path.basename(p) for p in batch)))
        return len(self.log)


def test_a_new_jobs_batch_goes_to_the_candidates_before_its_local_write(tmp_path) -> None:
    """Group commit with the candidates (doc/design/replication.md, "New jobs:
    the quorum write"): a batch holding new jobs is handed over first, so the
    candidates write it while the master does; a status change only once it
    is durable here.  Each waits for the quorum of the batch that held it."""
    events, waited = Events(), []
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE,
                         write_files=events.write, replicate_batch=events.replicate,
                         wait_replicated=waited.append)
    storage.open()
    try:
        storage.write_jobs([(1, b"queued")], serial=True, quorum=True)
        storage.write_jobs([(1, b"running")], urgent=True)
    finally:
        storage.close()
    new, status = frozenset({"job-1", "serial"}), frozenset({"job-1"})
    assert events.log == [("send", new), ("write", new), ("write", status), ("send", status)]
    assert waited == [1]        # the token of the first hand-over, not of the second


def test_without_batch_replication_new_jobs_are_written_first(tmp_path) -> None:
    events = Events()
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE,
                         write_files=events.write,
                         replicate=lambda path, data: events.replicate({path: data}, True))
    storage.open()
    try:
        storage.write_jobs([(1, b"queued")], serial=True, quorum=True)
    finally:
        storage.close()
    assert [what for what, _ in events.log] == ["write", "send", "send"]


def test_a_new_job_whose_local_write_failed_after_it_went_out_is_withdrawn(
        tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    """Its files may be on the candidates but not here: the client is refused,
    the job's failed state follows its files to the candidates at once (so no
    later master runs it), is written here once the disk works again, and its
    id is never handed out again."""
    caplog.set_level(logging.CRITICAL, logger="ganeti.jqueue.storage")
    paths, quorum = Paths(root=str(tmp_path)), Quorum()
    disk, clock = FlakyDisk(), FakeClock()
    storage = JobStorage(paths, sync_mode=st.SYNC_NONE, write_files=disk, clock=clock,
                         wait=clock.wait, replicate_batch=quorum.replicate,
                         wait_replicated=quorum.wait)
    storage.open()
    q = JobQueue(storage, Recorder, workers=1)
    q.load()
    q.start()
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
    try:
        disk.full = True
        with pytest.raises(errors.JobQueueUnwrittenError, match="No space left"):
            q.submit_job([op])
        with quorum.lock:
            sent = [(batch, urgent) for batch, urgent in zip(quorum.batches, quorum.urgent)]
        first = [serializer.loads(d) for p, d in sent[0][0].items() if p.endswith("job-1")]
        last = [serializer.loads(d) for p, d in sent[-1][0].items() if p.endswith("job-1")]
        assert [o["status"] for o in first[0]["ops"]] == ["queued"]
        assert [o["status"] for o in last[0]["ops"]] == ["error"]
        assert last[0]["ops"][0]["result"][0] == "JobQueueUnwrittenError"
        assert quorum.urgent[-1] is True
        disk.full = False                  # space is back: the writer's retry runs
        clock.wait_for_waiters(1)
        clock.advance(st.RETRY_MAX)
        deadline = time.monotonic() + 10
        while q.query_jobs([1], ["status"])[0] != ["error"]:
            assert time.monotonic() < deadline, "the withdrawn job never finished"
            time.sleep(0.01)
        assert [o["status"] for o in _on_disk(paths, 1)["ops"]] == ["error"]
        RAN.clear()
        assert q.submit_job([op]) == 2
    finally:
        disk.full = False
        q.shutdown(5)
    assert "job=1" not in RAN
