"""Query resources: job and lock."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors, locking, opcodes
from ganeti.cmdlib import query as cq
from ganeti.context import MasterContext
from ganeti.jqueue.job import QueuedJob, QueuedOpCode
from ganeti.pathutils import Paths


class FakeQueue:
    def __init__(self) -> None:
        self.jobs = {i: QueuedJob(id=i, ops=[QueuedOpCode.from_opcode(opcodes.OpTestDelay(duration=i))])
                     for i in (2, 10, 1)}

    def get_jobs(self, ids: Any) -> list[Any]:
        return [self.jobs.get(i) for i in (sorted(self.jobs) if ids is None else ids)]


def test_job_query_sorted_by_id_and_filtered() -> None:
    ctx = MasterContext(paths=Paths(root="/x"), jqueue=FakeQueue())
    res = cq.run_query(ctx, "job", ["id", "summary"], None)
    assert [row[0][1] for row in res["data"]] == [1, 2, 10]
    assert res["data"][0][1] == [0, ["TEST_DELAY(1.0)"]]
    res = cq.run_query(ctx, "job", ["id"], ["==", "id", 10])
    assert res["data"] == [[[0, 10]]]


def test_lock_query_through_monitor() -> None:
    monitor = locking.LockMonitor()
    glm = locking.GanetiLockManager(["n1"], [], [], monitor=monitor)
    ctx = MasterContext(paths=Paths(root="/x"), glm=glm, lock_monitor=monitor)
    glm.acquire(locking.LEVEL_CLUSTER, [locking.BGL], shared=True)
    try:
        res = cq.run_query(ctx, "lock", ["name", "mode"], ["==", "name", "cluster/BGL"])
    finally:
        glm.release(locking.LEVEL_CLUSTER)
    assert res["data"] == [[[0, "cluster/BGL"], [0, "shared"]]]


def test_unknown_resource_and_fields() -> None:
    with pytest.raises(errors.OpPrereqError):
        cq.run_query_fields("nothing", None)
    fields = cq.run_query_fields("job", None)["fields"]
    assert "status" in [f["name"] for f in fields]
    assert cq.run_query_fields("job", ["bogus"])["fields"][0]["kind"] == "unknown"
