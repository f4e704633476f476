"""Job dependencies on the real ganeti-masterd: cycles by absolute ids
(doc/protocols/jobs.md, "Dependencies") fail every job in the cycle."""

from __future__ import annotations

import pytest

from test.integration.masterd_harness import MasterdHandle, start_masterd

DEADLINE = 30.0


@pytest.fixture
def masterd(tmp_path):
    handle = start_masterd(tmp_path, workers=4)
    try:
        yield handle
    finally:
        handle.close()


def _wait_final(masterd: MasterdHandle, job_id: int) -> str:
    prev = None
    for _ in range(int(DEADLINE)):  # bounded: WaitForJobChange waits at most 1 s a round
        res = masterd.call("WaitForJobChange", [job_id, ["status"], prev, -1, 1])
        if res != "nochange":
            prev = res[0]
            if prev[0] in ("success", "error", "canceled"):
                return str(prev[0])
    raise AssertionError(f"job {job_id} did not finish: {prev}")


def test_two_jobs_waiting_for_each_other_both_fail(masterd: MasterdHandle) -> None:
    probe = masterd.call("SubmitJob", [[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]])
    first, second = probe + 1, probe + 2
    res = masterd.call("SubmitManyJobs", [[
        [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "depends": [[second, []]]}],
        [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "depends": [[first, ["success"]]]}],
    ]])
    assert res == [[True, first], [True, second]]
    for job_id in (first, second):
        assert _wait_final(masterd, job_id) == "error"
        result = masterd.call("QueryJobs", [[job_id], ["opresult"]])[0][0][0]
        assert result[0] == "OpExecError"
        assert "dependency cycle" in result[1][0]
        assert str(first) in result[1][0] and str(second) in result[1][0]
    locks = masterd.call("Query", ["lock", ["name"], None])["data"]
    assert not [r for r in locks if r[0][1].startswith("job/")]
