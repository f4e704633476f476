"""The real ganeti-masterd with its job queue on a 2 MiB tmpfs that fills up
(issue 19, item 1): no job is reported past what its file says, new jobs
are refused clearly, and the queue carries on by itself once there is room.

Mounting needs root (as in CI); elsewhere the test is skipped with the
reason, and test/jqueue/test_full_disk.py covers the same without root.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from ganeti import errors, serializer
from test.integration.host_helpers import fill, mount_tmpfs, skip_unless, umount
from test.integration.masterd_harness import MasterdHandle, prepare_root, start_masterd

DEADLINE = 40.0      # real seconds; the writer retries at most 10 s apart


def delay(duration: float = 0) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration}






@pytest.fixture
def full_disk_masterd(tmp_path):
    paths = prepare_root(os.path.join(tmp_path, "root"))
    skip_unless(mount_tmpfs(paths.queue_dir, "2m", "the queue"))
    handle = None
    try:
        handle = start_masterd(tmp_path, workers=4)
        yield handle
    finally:
        if handle is not None:
            handle.close()
        umount(paths.queue_dir)




def _on_disk(h: MasterdHandle, job_id: int) -> list[str]:
    with open(os.path.join(h.paths.queue_dir, f"job-{job_id}"), "rb") as fh:
        return [op["status"] for op in serializer.loads(fh.read())["ops"]]


def _shown(h: MasterdHandle, job_id: int) -> str:
    return h.call("QueryJobs", [[job_id], ["status"]])[0][0]


def _shown_ops(h: MasterdHandle, job_id: int) -> list[str]:
    return h.call("QueryJobs", [[job_id], ["opstatus"]])[0][0]


def _wait_shown(h: MasterdHandle, job_id: int, wanted: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while _shown(h, job_id) != wanted:
        assert time.monotonic() < deadline, f"job {job_id} is {_shown(h, job_id)}, not {wanted}"
        time.sleep(0.05)


def test_a_full_queue_disk_never_shows_an_unwritten_state(full_disk_masterd: MasterdHandle) -> None:
    h = full_disk_masterd
    # the second opcode logs 64 KiB: the job's file grows past what the
    # recycled inode of its last write holds, so that write needs new room
    running = h.call("SubmitJob", [[delay(1.0), {"OP_ID": "OP_TEST_JQUEUE",
                                                 "log_messages": ["x" * 65536]}]])
    _wait_shown(h, running, "running")
    filler = fill(h.paths.queue_dir)
    # the job ends; what cannot be written is not shown
    time.sleep(1.5)
    for _ in range(3):
        assert _shown_ops(h, running) == _on_disk(h, running)
        time.sleep(0.5)
    status = _shown(h, running)
    assert status in ("queued", "running")     # whichever was written last
    res = h.call("WaitForJobChange", [running, ["status"], [status], -1, 1])
    assert res == "nochange"
    # the queue drained itself: submissions are refused clearly, leave no file
    with pytest.raises(errors.JobQueueDrainError, match="cannot write its files"):
        h.call("SubmitJob", [[delay(0)]])
    assert h.call("QueryConfigValues", [["drain_flag"]]) == [True]
    assert sorted(n for n in os.listdir(h.paths.queue_dir) if n.startswith("job-")) == \
        [f"job-{running}"]
    # room again: the queue carries on without a restart
    os.unlink(filler)
    _wait_shown(h, running, "success")
    assert _on_disk(h, running) == ["success", "success"]
    assert h.call("QueryConfigValues", [["drain_flag"]]) == [False]
    new = h.call("SubmitJob", [[delay(0)]])
    _wait_shown(h, new, "success")
    assert _on_disk(h, new) == ["success"]
    with open(h.log_path, encoding="utf-8", errors="replace") as fh:
        assert "Cannot write job queue files" in fh.read()
