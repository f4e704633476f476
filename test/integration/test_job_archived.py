"""Archived jobs in gnt-job list/info, and LUXI PickupJob, against a real ganeti-masterd."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ganeti import errors, opcodes, serializer
from ganeti.jqueue.job import (REASON_SRC_PICKUP, QueuedJob, QueuedOpCode, job_to_disk,
                               split_time)

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(240)

from masterd_harness import start_masterd  # noqa: E402

DELAY0 = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
FAIL = {"OP_ID": "OP_TEST_JQUEUE", "fail": True}


@pytest.fixture
def master(tmp_path: Path):
    handle = start_masterd(tmp_path, workers=4)
    try:
        yield handle
    finally:
        handle.kill()


def gnt_job(master: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "gnt-job"), *args],
                          env=master.env, capture_output=True, text=True, timeout=60)


def wait_final(master: Any, job_id: int, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = master.call("QueryJobs", [[job_id], ["status"]])[0]
        if row is not None and row[0] in ("success", "error", "canceled"):
            return row[0]
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish")


def rows(proc: subprocess.CompletedProcess[str]) -> list[list[str]]:
    assert proc.returncode == 0, proc.stderr
    return [line.split(":") for line in proc.stdout.splitlines()]


def test_list_hides_archived_jobs_unless_asked(master: Any) -> None:
    ok = [master.call("SubmitJob", [[DELAY0]]) for _ in range(3)]
    failed = master.call("SubmitJob", [[FAIL]])
    for job_id in ok:
        assert wait_final(master, job_id) == "success"
    assert wait_final(master, failed) == "error"
    assert master.call("ArchiveJob", [ok[0]]) is True
    assert master.call("ArchiveJob", [failed]) is True
    archive = os.path.join(master.paths.queue_archive_dir, "0")
    assert sorted(os.listdir(archive)) == sorted([f"job-{ok[0]}", f"job-{failed}"])

    plain = rows(gnt_job(master, "list", "--no-headers", "--separator=:", "-o", "id,status"))
    assert plain == [[str(ok[1]), "success"], [str(ok[2]), "success"]]

    everything = rows(gnt_job(master, "list", "--archived", "--no-headers", "--separator=:",
                              "-o", "id,status,archived"))
    assert everything == [[str(ok[0]), "success", "Y"], [str(ok[1]), "success", "N"],
                          [str(ok[2]), "success", "N"], [str(failed), "error", "Y"]]

    # filters combine with --archived: status, ids, filter text
    assert rows(gnt_job(master, "list", "--archived", "--error", "--no-headers",
                        "--separator=:", "-o", "id,archived")) == [[str(failed), "Y"]]
    assert rows(gnt_job(master, "list", "--error", "--no-headers", "-o", "id")) == []
    assert rows(gnt_job(master, "list", "--archived", "--no-headers", "-o", "id",
                        str(ok[0]), str(ok[1]))) == [[str(ok[0])], [str(ok[1])]]
    assert rows(gnt_job(master, "list", "--no-headers", "-o", "id",
                        str(ok[0]), str(ok[1]))) == [[str(ok[1])]]
    assert rows(gnt_job(master, "list", "--archived", "--no-headers", "-o", "id",
                        "-F", "archived and status == \"success\"")) == [[str(ok[0])]]

    # the default columns (summary needs the whole archived job)
    proc = gnt_job(master, "list", "--archived")
    assert proc.returncode == 0, proc.stderr
    assert "TEST_JQUEUE" in proc.stdout and "TEST_DELAY" in proc.stdout
    assert "TEST_JQUEUE" not in gnt_job(master, "list").stdout

    # Query over LUXI without the exclusion sees the archive too
    res = master.call("Query", ["job", ["id", "archived"], None])
    assert [[c[1] for c in row] for row in res["data"]] == [
        [ok[0], True], [ok[1], False], [ok[2], False], [failed, True]]

    # gnt-job info and QueryJobs of an archived id
    info = gnt_job(master, "info", str(failed))
    assert info.returncode == 0, info.stderr
    assert f"Job ID: {failed}" in info.stdout and "Status: error" in info.stdout
    assert "Opcode failure was requested" in info.stdout
    assert master.call("QueryJobs", [[ok[0], 999], ["id", "status", "archived"]]) == [
        [ok[0], "success", True], None]
    # QueryJobs without ids: the unarchived jobs only (as before)
    assert [r[0] for r in master.call("QueryJobs", [None, ["id"]])] == [ok[1], ok[2]]


def _write_job(master: Any, job_id: int, ops: list[opcodes.OpCode]) -> bytes:
    job = QueuedJob(id=job_id, ops=[QueuedOpCode.from_opcode(op) for op in ops],
                    received_timestamp=split_time(time.time()))
    data = serializer.dumps(job_to_disk(job)).encode()
    path = os.path.join(master.paths.queue_dir, f"job-{job_id}")
    with open(path + ".tmp", "wb") as fh:
        fh.write(data)
    os.rename(path + ".tmp", path)
    return data


def _serial(master: Any) -> int:
    with open(master.paths.queue_serial_file) as fh:
        return int(fh.read())


def test_pickup_job_runs_a_job_written_by_another_process(master: Any) -> None:
    first = master.call("SubmitJob", [[DELAY0]])
    assert wait_final(master, first) == "success"
    new_id = first + 10
    _write_job(master, new_id, [opcodes.OpTestDelay(duration=0.05, repeat=2)])
    assert master.call("PickupJob", [new_id]) is None
    assert _serial(master) == new_id
    # follow it like any job
    prev: Any = None
    deadline = time.monotonic() + 30
    logs: list[Any] = []
    while True:
        assert time.monotonic() < deadline
        res = master.call("WaitForJobChange", [new_id, ["status"], prev, -1, 5])
        if res == "nochange":
            continue
        prev, new_logs = res
        logs.extend(new_logs)
        if prev[0] in ("success", "error", "canceled"):
            break
    assert prev == ["success"]
    row = master.call("QueryJobs", [[new_id], ["ops", "opstatus"]])[0]
    assert row[1] == ["success"]
    assert row[0][0]["reason"][-1][0] == REASON_SRC_PICKUP
    assert master.call("SubmitJob", [[DELAY0]]) == new_id + 1

    # the adopted job survives a restart
    master.restart()
    assert master.call("QueryJobs", [[new_id], ["status"]]) == [["success"]]
    assert master.call("SubmitJob", [[DELAY0]]) == new_id + 2


def test_pickup_job_refusals_change_nothing(master: Any) -> None:
    known = master.call("SubmitJob", [[DELAY0]])
    assert wait_final(master, known) == "success"
    known_path = os.path.join(master.paths.queue_dir, f"job-{known}")
    known_data = open(known_path, "rb").read()
    with open(os.path.join(master.paths.queue_dir, f"job-{known + 3}"), "w") as fh:
        fh.write("{garbage")
    before = (master.call("QueryJobs", [None, ["id", "status"]]), _serial(master),
              sorted(os.listdir(master.paths.queue_dir)))
    for job_id, exc_class in [(known, errors.JobQueueError), (known + 2, errors.JobLost),
                              (known + 3, errors.JobFileCorrupted),
                              ("nope", errors.ParameterError)]:
        with pytest.raises(exc_class):
            master.call("PickupJob", [job_id])
        after = (master.call("QueryJobs", [None, ["id", "status"]]), _serial(master),
                 sorted(os.listdir(master.paths.queue_dir)))
        assert after == before, job_id
    assert open(known_path, "rb").read() == known_data
    with pytest.raises(errors.ParameterError):
        master.call("PickupJob", [])
    # the daemon is fine and ids go on from the unchanged serial
    assert master.call("SubmitJob", [[DELAY0]]) == known + 1
