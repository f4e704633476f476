"""Job filter rules through the real daemons: ``gnt-filter`` and the queue (doc/jobfilters.md).

A 2-node virtual cluster.  The rules are made with our ``gnt-filter``;
their effect is watched on ``gnt-debug delay`` jobs: REJECT cancels a job
naming the rule, PAUSE keeps jobs queued until the rule goes, ACCEPT lets
chosen jobs past a later PAUSE, RATE_LIMIT keeps at most n running, and a
REJECT added later cancels the queued jobs it matches.  The rules are
configuration: they are on the other node, and the master that node
becomes by a failover applies them.
"""

from __future__ import annotations

import re
import time

import pytest

from ganeti import serializer
from failover_helpers import MASTERD_ARGS, failover
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(600)

N1, N2 = "node1.vcluster", "node2.vcluster"
DELAY_OP = '[["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]'


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcflt"), nodes=2, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        yield cluster


def add(vc: VirtualCluster, *args: str, node: str | None = None) -> str:
    uuid = vc.ok("gnt-filter", "add", *args, node=node).strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", uuid), uuid
    return uuid


def submit_delay(vc: VirtualCluster, *args: str, node: str | None = None) -> int:
    out = vc.ok("gnt-debug", "delay", "--submit", "--print-jobid", *args, node=node)
    return int(out.split()[0])


def status(vc: VirtualCluster, job_id: int, node: str | None = None) -> str:
    return vc.ok("gnt-job", "list", "--no-headers", "-o", "status", str(job_id),
                 node=node).strip()


def wait_status(vc: VirtualCluster, job_id: int, wanted: str, node: str | None = None,
                timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = status(vc, job_id, node)
        if seen == wanted:
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} is {seen}, not {wanted}")


def uuids(vc: VirtualCluster, node: str | None = None) -> list[str]:
    return vc.ok("gnt-filter", "list", "--no-headers", "-o", "uuid", node=node).split()


def test_add_list_info_delete(vc):
    before = submit_delay(vc, "0")
    wait_status(vc, before, "success")
    uuid = add(vc, "--priority", "3", "--predicates", DELAY_OP, "--action", "RATE_LIMIT 4",
               "--reason", "maintenance 42")
    assert uuids(vc) == [uuid]
    lines = vc.ok("gnt-filter", "info", uuid).splitlines()
    assert lines[0] == f"UUID: {uuid}"
    # the watermark (second line, as Ganeti's QA reads it) is the highest job id then
    assert int(lines[1].split("Watermark: ")[1]) == before
    assert lines[2:5] == ["  Priority: 3",
                          '  Predicates: [["opcode",["=","OP_ID","OP_TEST_DELAY"]]]',
                          "  Action: RATE_LIMIT 4"]
    trail = serializer.loads(lines[5].split("Reason trail: ")[1])
    assert trail[0][:2] == ["gnt:user", "maintenance 42"] and trail[-1][0] == "luxid"
    out = vc.ok("gnt-filter", "list", "--no-headers", "--separator", "|",
                "-o", "priority,action")
    assert out.strip() == "3|RATE_LIMIT,4"
    fields = vc.ok("gnt-filter", "list-fields", "--no-headers").split("\n")
    assert [f.split()[0] for f in fields if f] == ["action", "predicates", "priority",
                                                    "reason_trail", "uuid", "watermark"]
    assert vc.run("gnt-filter", "list", "-o", "nosuchfield").returncode == 14
    vc.ok("gnt-filter", "delete", uuid)
    assert uuids(vc) == []


@pytest.mark.parametrize("args, words", [
    (("add", "--action", "DROP"), "Invalid filter action 'DROP'"),
    (("add", "--action", "RATE_LIMIT 0"), "RATE_LIMIT takes a positive integer"),
    (("add", "--predicates", "[["), "not valid JSON"),
    (("add", "--predicates", '[["nodeid", ["=", "id", 1]]]'), "jobid, opcode, reason"),
    (("add", "--predicates", '[["jobid", ["=", "name", "x"]]]'), "unknown field 'name'"),
    (("add", "--priority", "-1"), "non-negative integer"),
    (("replace", "not-a-uuid"), "Unable to parse UUID"),
    (("delete", "0b8d4c6e-7d43-4d3e-9d40-28b1b2a1f1a3"), "does not exist"),
])
def test_bad_input_is_refused_and_changes_nothing(vc, args, words):
    res = vc.run("gnt-filter", *args)
    assert res.returncode != 0
    assert words in res.stdout + res.stderr
    assert uuids(vc) == []


def test_reject_cancels_new_jobs_naming_the_rule(vc):
    uuid = add(vc, "--predicates", DELAY_OP, "--action", "REJECT")
    try:
        res = vc.run("gnt-debug", "delay", "0.01")
        assert res.returncode != 0
        assert f"rejected by job filter rule {uuid}" in res.stdout + res.stderr
        job = int(vc.ok("gnt-job", "list", "--no-headers", "-o", "id").split()[-1])
        assert status(vc, job) == "canceled"
        assert uuid in vc.ok("gnt-job", "info", str(job))
    finally:
        vc.ok("gnt-filter", "delete", uuid)
    vc.ok("gnt-debug", "delay", "0.01")


def test_pause_holds_jobs_and_accept_lets_chosen_ones_through(vc):
    accept = add(vc, "--priority", "0", "--action", "ACCEPT",
                 "--predicates", '[["reason", ["=~", "reason", "allow this"]]]')
    pause = add(vc, "--priority", "1", "--action", "PAUSE",
                "--predicates", '[["jobid", [">", "id", "watermark"]]]')
    try:
        held = submit_delay(vc, "0.01")
        allowed = submit_delay(vc, "--reason", "allow this", "0.01")
        wait_status(vc, allowed, "success")
        time.sleep(1.0)
        assert status(vc, held) == "queued"
        vc.ok("gnt-filter", "delete", pause)
        wait_status(vc, held, "success")
    finally:
        vc.run("gnt-filter", "delete", pause)
        vc.ok("gnt-filter", "delete", accept)


def test_rate_limit_keeps_n_running_and_a_later_reject_cancels_queued_jobs(vc):
    limit = add(vc, "--priority", "1", "--predicates", DELAY_OP, "--action", "RATE_LIMIT 2")
    # --no-locks: without it each delay holds the master node's lock (as Ganeti's) and
    # the second would wait for the first, not for the rule
    jobs = [submit_delay(vc, "--no-locks", "--interruptible", "300") for _ in range(4)]
    reject = None
    try:
        wait_status(vc, jobs[0], "running")
        wait_status(vc, jobs[1], "running")
        time.sleep(1.0)
        assert [status(vc, j) for j in jobs[2:]] == ["queued", "queued"]
        # one slot frees: exactly one more starts
        vc.ok("gnt-job", "cancel", "--kill", "--yes-do-it", str(jobs[0]))
        wait_status(vc, jobs[0], "canceled")
        wait_status(vc, jobs[2], "running")
        time.sleep(1.0)
        assert status(vc, jobs[3]) == "queued"
        # a REJECT rule placed before the limit cancels the queued job, not the running ones
        reject = add(vc, "--priority", "0", "--action", "REJECT",
                     "--predicates", f'[["jobid", ["=", "id", {jobs[3]}]]]')
        wait_status(vc, jobs[3], "canceled")
        assert reject in vc.ok("gnt-job", "info", str(jobs[3]))
        assert [status(vc, j) for j in jobs[1:3]] == ["running", "running"]
    finally:
        for job in jobs:
            vc.run("gnt-job", "cancel", "--kill", "--yes-do-it", str(job))
        vc.ok("gnt-filter", "delete", limit)
        if reject:
            vc.ok("gnt-filter", "delete", reject)


def test_rules_are_configuration_and_survive_a_master_failover(vc):
    uuid = add(vc, "--predicates", DELAY_OP, "--action", "REJECT")
    # the rule is on the other node (the configuration is replicated) ...
    rc, out = failover(vc, N2)
    assert rc == 0, out
    try:
        assert uuids(vc, node=N2) == [uuid]
        # ... and the new master applies it
        res = vc.run("gnt-debug", "delay", "0.01", node=N2)
        assert res.returncode != 0 and uuid in res.stdout + res.stderr
        vc.ok("gnt-filter", "delete", uuid, node=N2)
        vc.ok("gnt-debug", "delay", "0.01", node=N2)
    finally:
        rc, out = failover(vc, N1)
        assert rc == 0, out


def test_adhoc_rate_limit_by_reason(vc):
    # Ganeti's QA (TestAdHocReasonRateLimit): no rule, a reason "rate-limit:2:..."
    jobs = [submit_delay(vc, "--no-locks", "--interruptible", "--reason=rate-limit:2:hello",
                         "300") for _ in range(3)]
    try:
        wait_status(vc, jobs[0], "running")
        wait_status(vc, jobs[1], "running")
        time.sleep(1.0)
        assert status(vc, jobs[2]) == "queued"
        other = submit_delay(vc, "--no-locks", "--reason=rate-limit:2:another", "0.01")
        wait_status(vc, other, "success")          # another bucket is not held
        vc.ok("gnt-job", "cancel", "--kill", "--yes-do-it", str(jobs[0]))
        wait_status(vc, jobs[2], "running")
    finally:
        for job in jobs:
            vc.run("gnt-job", "cancel", "--kill", "--yes-do-it", str(job))


def test_a_rule_pauses_instance_creations_until_it_accepts_them(vc):
    from instance_helpers import NOCHECK
    pause = add(vc, "--action", "PAUSE",
                "--predicates", '[["opcode", ["=", "OP_ID", "OP_INSTANCE_CREATE"]]]')
    name = "paused1.example.com"
    try:
        out = vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N1,
                    "--no-start", *NOCHECK, "--submit", "--print-jobid", name)
        job = int(out.split()[0])
        vc.ok("gnt-debug", "delay", "0.01")          # other jobs run meanwhile
        time.sleep(1.0)
        assert status(vc, job) == "queued"
        assert name not in vc.ok("gnt-instance", "list", "--no-headers", "-o", "name")
        # the same rule, now accepting: the creation runs
        vc.ok("gnt-filter", "replace", "--action", "ACCEPT", "--predicates",
              '[["opcode", ["=", "OP_ID", "OP_INSTANCE_CREATE"]]]', pause)
        wait_status(vc, job, "success")
        assert name in vc.ok("gnt-instance", "list", "--no-headers", "-o", "name")
    finally:
        vc.ok("gnt-filter", "delete", pause)
        vc.run("gnt-instance", "remove", "-f", name)
