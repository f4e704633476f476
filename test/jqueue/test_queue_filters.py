"""JobQueue with job filter rules (scripted processor, no masterd; doc/jobfilters.md)."""

from __future__ import annotations

import threading
import time

import pytest

from ganeti import constants
from ganeti.jqueue import filters as jf
from jqueue.test_queue import Env, delay

TIMEOUT = 10.0


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    e.gate = threading.Event()
    e.queue.start()
    yield e
    e.gate.set()
    e.queue.shutdown(5)


def rule(uuid: str, action, predicates=None, priority: int = 0) -> jf.FilterRule:
    return jf.FilterRule(uuid, 0, priority, predicates or [], action, [])


def status(env: Env, job_id: int) -> str:
    (row,) = env.queue.query_jobs([job_id], ["status"])
    return row[0]


def wait_for(cond, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def gated(env: Env) -> int:
    return env.queue.submit_job([delay(0, comment="gate")])


def test_a_rejected_submission_is_stored_canceled_naming_the_rule(env):
    env.queue.set_filter_rules([rule("r1", jf.REJECT)])
    job_id = env.queue.submit_job([delay(0)])
    assert status(env, job_id) == constants.JOB_STATUS_CANCELED
    (row,) = env.queue.query_jobs([job_id], ["opresult"])
    assert row[0] == ["Job rejected by job filter rule r1"]
    assert env.order == []          # never run


def test_rate_limit_starts_at_most_n_and_the_next_when_one_ends(env):
    env.queue.set_filter_rules([rule("lim", [jf.RATE_LIMIT, 2])])
    jobs = [gated(env) for _ in range(3)]
    wait_for(lambda: env.queue.filter_gate.held() == {jobs[2]: "lim"}, "the third job held")
    wait_for(lambda: len(env.order) == 2, "two jobs in the processor")
    time.sleep(0.2)
    assert len(env.order) == 2 and env.queue.filter_gate.slots_taken() == {"lim": 2}
    assert status(env, jobs[2]) == constants.JOB_STATUS_QUEUED
    env.gate.set()
    for job in jobs:
        assert env.wait_final(job) == constants.JOB_STATUS_SUCCESS
    assert env.queue.filter_gate.slots_taken() == {}


def test_a_held_job_can_be_canceled_and_leaves_the_gate(env):
    env.queue.set_filter_rules([rule("p", jf.PAUSE)])
    job_id = env.queue.submit_job([delay(0)])
    wait_for(lambda: job_id in env.queue.filter_gate.held(), "the job held")
    assert env.queue.cancel_job(job_id)[0] is True
    assert status(env, job_id) == constants.JOB_STATUS_CANCELED
    assert env.queue.filter_gate.held() == {}


def test_new_rules_release_paused_jobs_and_reject_queued_ones(env):
    env.queue.set_filter_rules([rule("p", jf.PAUSE)])
    first = env.queue.submit_job([delay(0)])
    second = env.queue.submit_job([delay(0, comment="doomed")])
    wait_for(lambda: len(env.queue.filter_gate.held()) == 2, "both jobs held")
    env.queue.set_filter_rules([rule("r", jf.REJECT, [["opcode", ["=", "comment", "doomed"]]])])
    assert env.wait_final(first) == constants.JOB_STATUS_SUCCESS
    assert env.wait_final(second) == constants.JOB_STATUS_CANCELED
    (row,) = env.queue.query_jobs([second], ["opresult"])
    assert row[0] == ["Job rejected by job filter rule r"]


def test_a_running_job_is_not_touched_by_a_new_reject(env):
    job_id = gated(env)
    wait_for(lambda: len(env.order) == 1, "the job in the processor")
    env.queue.set_filter_rules([rule("r", jf.REJECT)])
    env.gate.set()
    assert env.wait_final(job_id) == constants.JOB_STATUS_SUCCESS


def test_a_job_waiting_for_a_dependency_gives_its_slot_back(tmp_path):
    # RATE_LIMIT 1: y (more urgent) is taken first and waits for x; if y kept its
    # slot, x could never start and neither job would ever end
    env = Env(tmp_path, workers=1)
    env.gate = threading.Event()
    try:
        env.queue.start()
        env.queue.set_filter_rules([rule("lim", [jf.RATE_LIMIT, 1],
                                         [["opcode", ["=", "comment", "lim"]]])])
        blocker = gated(env)
        wait_for(lambda: len(env.order) == 1, "the blocker in the processor")
        x = env.queue.submit_job([delay(0, comment="lim")])
        y = env.queue.submit_job([delay(0, comment="lim", priority=-10,
                                        depends=[[x, ["success"]]])])
        env.gate.set()
        for job in (blocker, x, y):
            assert env.wait_final(job) == constants.JOB_STATUS_SUCCESS
        assert env.queue.filter_gate.slots_taken() == {}
    finally:
        env.gate.set()
        env.queue.shutdown(5)


def test_new_rules_count_the_jobs_workers_have_taken(env):
    # a job taken by a worker is still "queued" until its opcode runs: it keeps
    # its slot when the rules change, so the held job stays held
    limit = rule("lim", [jf.RATE_LIMIT, 1])
    env.queue.set_filter_rules([limit])
    first, second = gated(env), gated(env)
    wait_for(lambda: env.queue.filter_gate.held() == {second: "lim"}, "the second job held")
    env.queue.set_filter_rules([limit, rule("c", jf.CONTINUE, priority=1)])
    time.sleep(0.3)
    assert len(env.order) == 1 and env.queue.filter_gate.slots_taken() == {"lim": 1}
    env.gate.set()
    assert env.wait_final(first) == env.wait_final(second) == constants.JOB_STATUS_SUCCESS


def test_only_jobs_that_have_not_begun_to_run_are_filtered(env):
    from ganeti.jqueue.control import JobControl
    from ganeti.jqueue.job import QueuedJob
    job_id = env.queue.submit_job([delay(0), delay(0)])
    (job,) = env.queue.get_jobs([job_id])
    assert isinstance(job, QueuedJob) and JobControl._unstarted(job)
    job.ops[0].status = constants.OP_STATUS_SUCCESS      # half run (as after a restart)
    job.ops[0].exec_timestamp = [1, 0]
    assert not JobControl._unstarted(job)


def test_adhoc_rate_limit_by_reason_keeps_n_running(env):
    def limited() -> int:
        return env.queue.submit_job([delay(0, comment="gate",
                                           reason=[["gnt:user", "rate-limit:2:hello", 1]])])
    jobs = [limited() for _ in range(3)]
    wait_for(lambda: env.queue.filter_gate.held() == {jobs[2]: "rate-limit:2:hello"},
             "the third job held")
    wait_for(lambda: len(env.order) == 2, "two jobs in the processor")
    env.gate.set()
    for job in jobs:
        assert env.wait_final(job) == constants.JOB_STATUS_SUCCESS
    assert env.queue.filter_gate.slots_taken() == {}
