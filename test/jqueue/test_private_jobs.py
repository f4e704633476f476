"""Private opcode values in the job queue: in memory for the processor, redacted on disk
and in answers (doc/protocols/opcodes.md, "Private parameters")."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from ganeti import constants, errors, redact
from ganeti.jqueue import JobQueue, JobStorage
from ganeti.jqueue import storage as st
from ganeti.pathutils import Paths
from ganeti.private import REDACTED, reveal

CANARY = "canary-9d2b7a"
TIMEOUT = 10.0


class Recorder:
    """Records the private values each opcode ran with; holds ops while ``gate`` is clear."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.gate = threading.Event()
        self.gate.set()

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        cbs.notify_start()
        self.gate.wait(TIMEOUT)
        self.seen.append(reveal(op.osparams_private))
        cbs.feedback(f"installing with {op.osparams_private}")
        return {"changes": [["os_private/secret", op.osparams_private["secret"]]]}


def _queue(root: str, proc: Recorder) -> JobQueue:
    storage = JobStorage(Paths(root=root), sync_mode=st.SYNC_NONE)
    storage.open()
    q = JobQueue(storage, lambda: proc, workers=1)
    q.load()
    return q


def _op() -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i1", "disk_template": "diskless",
            "osparams_private": {"secret": CANARY}}


def _wait_final(q: JobQueue, job_id: int) -> str:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        status = q.query_jobs([job_id], ["status"])[0][0]
        if status in constants.JOBS_FINALIZED:
            return str(status)
        time.sleep(0.01)
    raise AssertionError(f"job {job_id} did not finish")


def _queue_bytes(root: str) -> bytes:
    data = b""
    for base, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(base, name), "rb") as fh:
                data += fh.read()
    return data


def test_processor_gets_the_value_disk_and_answers_do_not(tmp_path) -> None:
    proc = Recorder()
    q = _queue(str(tmp_path), proc)
    q.start()
    try:
        job_id = q.submit_job([_op()])
        assert _wait_final(q, job_id) == "success"
        assert proc.seen == [{"secret": CANARY}]
        answer = repr(q.query_jobs([job_id], ["ops", "opresult", "oplog", "summary"]))
        assert CANARY not in answer and REDACTED in answer
        assert CANARY.encode() not in _queue_bytes(str(tmp_path))
    finally:
        q.shutdown(5)


def test_job_read_back_from_disk_fails_asking_to_resubmit(tmp_path) -> None:
    proc = Recorder()
    proc.gate.clear()
    q = _queue(str(tmp_path), proc)
    q.start()
    first = q.submit_job([_op()])            # runs, held at the gate
    second = q.submit_job([_op()])           # queued behind it (one worker)
    assert CANARY.encode() not in _queue_bytes(str(tmp_path))
    q.shutdown(0.2)
    proc.gate.set()
    q = _queue(str(tmp_path), Recorder())
    q.start()
    try:
        assert _wait_final(q, second) == "error"
        result = q.query_jobs([second], ["opresult"])[0][0][0]
        assert result[0] == "ParameterError" and "submit the job again" in result[1][0]
        assert q.query_jobs([first], ["status"])[0][0] == "error"   # master stopped under it
    finally:
        q.shutdown(5)


class Leaky:
    """A processor whose feedback, result and error quote the private values in clear."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def execute_opcode(self, op: Any, cbs: Any) -> Any:
        cbs.notify_start()
        values = reveal(op.osparams_private)
        cbs.feedback(f"OS said: invalid value '{values['secret']}'")
        if self.fail:
            raise errors.OpPrereqError(f"OS refused '{values['secret']}' and 'config-only-1'",
                                       errors.ECODE_INVAL)
        return {"echo": values["secret"], "config": "config-only-1"}


@pytest.mark.parametrize("fail", [True, False], ids=["error", "result"])
def test_values_quoted_in_results_errors_and_logs_are_scrubbed(tmp_path, fail: bool) -> None:
    storage = JobStorage(Paths(root=str(tmp_path)), sync_mode=st.SYNC_NONE)
    storage.open()
    # a value the master knows from elsewhere (its config), and the job's own
    red = redact.Redactor([redact.VersionedSource(lambda: 0, lambda: ["config-only-1"])])
    q = JobQueue(storage, lambda: Leaky(fail), workers=1, redactor=red)
    q.load()
    q.start()
    try:
        job_id = q.submit_job([_op()])
        assert _wait_final(q, job_id) == ("error" if fail else "success")
        answer = repr(q.query_jobs([job_id], ["opresult", "oplog"]))
        assert CANARY not in answer and "config-only-1" not in answer
        assert f"invalid value '{REDACTED}'" in answer
        on_disk = _queue_bytes(str(tmp_path))
        assert CANARY.encode() not in on_disk and b"config-only-1" not in on_disk
        assert red.scrub(CANARY) == CANARY     # released once the job is final
    finally:
        q.shutdown(5)
