"""Hostile input against a real ganeti-masterd, over raw LUXI (issue: never lose
a job, never let one request take the master down).

Non-finite numbers, lone surrogates, out-of-range and oversized opcode
parameters and wrong-typed method arguments are refused at submission
with a clear error and leave no job; stored data that is not valid
Unicode does not crash ``gnt-job``; untrusted ``queue/job-<id>`` entries
are quarantined at start-up and by ``PickupJob``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ganeti import errors, luxi, opcodes, serializer
from ganeti.jqueue.job import QueuedJob, QueuedOpCode, job_to_disk, split_time
from test.integration.masterd_harness import LuxiConnection, MasterdHandle, start_masterd

REPO = Path(__file__).resolve().parents[2]
DELAY0 = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
BIG = 2 ** 64

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def master(tmp_path: Path):
    handle = start_masterd(tmp_path, workers=2)
    try:
        yield handle
    finally:
        handle.kill()


def _raw_call(master: MasterdHandle, frame: bytes) -> dict[str, Any]:
    """Send one hand-written request frame; the decoded response dict."""
    with LuxiConnection(master.socket_path, timeout=30) as conn:
        conn.send_raw(frame + luxi.ETX)
        return serializer.loads(conn.recv_frame())


def _job_ids(master: MasterdHandle) -> list[int]:
    return [row[0] for row in master.call("QueryJobs", [None, ["id"]])]


def _wait_final(master: MasterdHandle, job_id: int, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = master.call("QueryJobs", [[job_id], ["status"]])[0][0]
        if status in ("success", "error", "canceled"):
            return status
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} not finished in {timeout}s")


def _refused(response: dict[str, Any], needle: str) -> str:
    assert response["success"] is False, response
    text = serializer.dumps(response["result"])
    assert needle in text, text
    return text


def _gnt_job(master: MasterdHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "gnt-job"), *args],
                          env=master.env, capture_output=True, text=True, timeout=60)


def test_infinite_duration_is_refused_and_a_restart_loses_no_job(master: MasterdHandle) -> None:
    ok = master.call("SubmitJob", [[DELAY0]])
    for number in (b"1e400", b"-1e400", b"1E999"):
        frame = (b'{"method":"SubmitJob","args":[[{"OP_ID":"OP_TEST_DELAY","duration":'
                 + number + b'}]]}')
        _refused(_raw_call(master, frame), "out of range")
    after = master.call("SubmitJob", [[DELAY0]])
    assert after == ok + 1                      # the refusals took no id and left no job
    assert _job_ids(master) == [ok, after]
    assert _wait_final(master, after) == "success"
    master.stop()
    master.restart()
    rows = master.call("QueryJobs", [[ok, after], ["id", "status"]])
    assert rows == [[ok, "success"], [after, "success"]]


@pytest.mark.parametrize("frame", [
    b'{"method":"SubmitJob","args":[[{"OP_ID":"OP_TEST_DELAY","duration":0,'
    b'"comment":"x\\ud800"}]]}',
    b'{"method":"SubmitJob","args":[[{"OP_ID":"OP_INSTANCE_CREATE",'
    b'"instance_name":"i\\udfff.example.com","disk_template":"diskless","no_install":true}]]}',
    b'{"method":"SubmitManyJobs","args":[[[{"OP_ID":"OP_TEST_DELAY","duration":0,'
    b'"reason":[["\\ud800","x",1]]}]]]}',
], ids=["comment", "instance-name", "reason"])
def test_lone_surrogates_are_refused_at_submission(master: MasterdHandle, frame: bytes) -> None:
    _refused(_raw_call(master, frame), "lone surrogate")
    assert _job_ids(master) == []


def test_gnt_job_shows_a_stored_job_with_a_lone_surrogate(master: MasterdHandle) -> None:
    """A job file written before input was checked: list and info must not crash."""
    job_id = master.call("SubmitJob", [[{**DELAY0, "comment": "plain"}]])
    assert _wait_final(master, job_id) == "success"
    master.stop()
    path = os.path.join(master.paths.queue_dir, f"job-{job_id}")
    data = serializer.loads(open(path, "rb").read())
    data["ops"][0]["input"]["comment"] = "x\ud800"
    data["ops"][0]["log"] = [[1, [1, 0], "message", "log x\udfff"]]
    with open(path, "wb") as fh:
        fh.write(serializer.dumps_bytes(data))   # ASCII escapes: \ud800
    master.restart()
    listing = _gnt_job(master, "list")
    assert listing.returncode == 0, listing.stderr
    assert str(job_id) in listing.stdout
    info = _gnt_job(master, "info", str(job_id))
    assert info.returncode == 0, info.stderr
    assert "Traceback" not in info.stderr
    assert "\\ud800" in info.stdout or "\\udfff" in info.stdout, info.stdout


def _job_file(job_id: int, status: str = "queued") -> bytes:
    qop = QueuedOpCode.from_opcode(opcodes.OpTestDelay(duration=0))
    qop.status = status
    job = QueuedJob(id=job_id, ops=[qop], received_timestamp=split_time(time.time()))
    if status == "success":
        qop.end_timestamp = job.end_timestamp = [1000, 0]
    return serializer.dumps_bytes(job_to_disk(job))


def test_untrusted_queue_entries_are_quarantined_and_masterd_starts(
        master: MasterdHandle, tmp_path: Path) -> None:
    first = master.call("SubmitJob", [[DELAY0]])
    assert _wait_final(master, first) == "success"
    master.stop()
    qdir = master.paths.queue_dir
    outside = tmp_path / "planted-job"
    outside.write_bytes(_job_file(first + 1))
    os.symlink(outside, os.path.join(qdir, f"job-{first + 1}"))     # adopted and run before
    os.mkdir(os.path.join(qdir, f"job-{first + 2}"))                 # masterd did not start
    with open(os.path.join(qdir, f"job-{first + 3}"), "wb") as fh:   # served as first + 3
        fh.write(_job_file(first, "success"))
    master.restart()
    assert _job_ids(master) == [first]
    assert master.call("QueryJobs", [[first + 1, first + 2, first + 3], ["id"]]) == [
        None, None, None]
    quarantine = os.path.join(qdir, "quarantine")
    assert sorted(os.listdir(quarantine)) == [f"job-{first + i}" for i in (1, 2, 3)]
    assert outside.exists() and os.path.islink(os.path.join(quarantine, f"job-{first + 1}"))
    with open(master.log_path, encoding="utf-8", errors="replace") as fh:
        lines = [ln for ln in fh if "Quarantined untrusted queue entry" in ln]
    assert len(lines) == 3, lines
    # ids go on above the quarantined ones
    assert master.call("SubmitJob", [[DELAY0]]) == first + 4

    # PickupJob: a symbolic link planted while the master runs
    os.symlink(outside, os.path.join(qdir, f"job-{first + 9}"))
    with pytest.raises(errors.JobFileCorrupted, match="symbolic link"):
        master.call("PickupJob", [first + 9])
    assert f"job-{first + 9}" in os.listdir(quarantine)
    assert master.call("QueryJobs", [[first + 9], ["id"]]) == [None]


@pytest.mark.parametrize("method,args,needle", [
    ("CancelJob", [{"a": 1}], "'job_id' must be a job id"),
    ("QueryJobs", [[{"a": 1}], ["id"]], "'job_ids[0]' must be a job id"),
    ("QueryJobs", [None, [{"a": 1}]], "'fields[0]' must be a string"),
    ("ArchiveJob", [[1]], "'job_id' must be a job id"),
    ("ChangeJobPriority", [1, "high"], "'priority' must be an integer"),
    ("WaitForJobChange", [{"a": 1}, ["status"], None, None, 1], "'job_id'"),
    ("QueryNodes", [None, ["name"], "yes"], "'use_locking' must be a boolean"),
    ("SubmitJob", ["OP_TEST_DELAY"], "'ops' must be a list of objects"),
], ids=lambda v: v if isinstance(v, str) and v.isalpha() else None)
def test_wrong_typed_luxi_arguments_get_a_clear_error(master: MasterdHandle, method: str,
                                                      args: list[Any], needle: str) -> None:
    job_id = master.call("SubmitJob", [[DELAY0]])
    response = LuxiConnection(master.socket_path, timeout=30).call_raw(method, args)
    text = _refused(response, needle)
    assert "ParameterError" in text and "wrong_input" in text
    assert _wait_final(master, job_id) == "success"      # and the daemon carries on


def _create(**kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "inst1.example.com",
            "disk_template": "diskless", "os_type": "debootstrap", "pnode": "node1.example.com",
            "name_check": False, "ip_check": False, **kw}


@pytest.mark.parametrize("op,needle", [
    ({**DELAY0, "duration": BIG}, "duration"),
    ({**DELAY0, "debug_level": BIG}, "debug_level"),
    ({**DELAY0, "repeat": BIG}, "repeat"),
    ({**DELAY0, "depends": [[BIG, ["success"]]]}, "depends"),
    (_create(disk_template="plain", disks=[{"size": BIG}]), "disks[0].size"),
    (_create(beparams={"maxmem": BIG}), "maxmem"),
    (_create(beparams={"vcpus": BIG}), "vcpus"),
    (_create(nics=[{"mac": "auto"}] * 1_000_000), "at most 8"),
    (_create(disk_template="plain", disks=[{"size": 1}] * 17), "at most 16"),
    (_create(tags=["t"] * 100_000), "tags"),
], ids=["duration", "debug_level", "repeat", "depends", "disk-size", "maxmem", "vcpus",
        "million-nics", "17-disks", "tags"])
def test_out_of_range_and_oversized_opcodes_are_refused_at_submission(
        master: MasterdHandle, op: dict[str, Any], needle: str) -> None:
    with pytest.raises(errors.ParameterError) as info:
        master.call("SubmitJob", [[op]], timeout=60)
    assert needle in str(info.value) and info.value.ecode == errors.ECODE_INVAL
    assert "OverflowError" not in str(info.value)
    assert _job_ids(master) == []
