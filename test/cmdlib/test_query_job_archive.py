"""The ``job`` query resource and archived jobs (Ganeti 3.x ``archived`` semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors, opcodes
from ganeti.cmdlib import query as cq
from ganeti.context import MasterContext
from ganeti.jqueue.job import QueuedJob, QueuedOpCode
from ganeti.pathutils import Paths

UNARCHIVED = ["!", ["?", "archived"]]


def _job(job_id: int, archived: bool) -> QueuedJob:
    job = QueuedJob(id=job_id, ops=[QueuedOpCode.from_opcode(opcodes.OpTestDelay(duration=0))])
    job.ops[0].status = "success"
    job.archived = archived
    return job


class RecordingQueue:
    """Jobs 1, 3 unarchived, 2, 4 archived; records whether the archive was scanned."""

    def __init__(self) -> None:
        self.live = {i: _job(i, False) for i in (1, 3)}
        self.archive = {i: _job(i, True) for i in (2, 4)}
        self.archive_scans = 0
        self.lookups: list[Any] = []

    def get_jobs(self, ids: Any) -> list[Any]:
        self.lookups.append(ids)
        if ids is None:
            return [self.live[i] for i in sorted(self.live)]
        return [self.live.get(i) or self.archive.get(i) for i in ids]

    def get_archived_jobs(self, exclude: Any = ()) -> list[Any]:
        self.archive_scans += 1
        return [self.archive[i] for i in sorted(self.archive) if i not in exclude]


def _ids(ctx: MasterContext, qfilter: Any, fields: list[str] | None = None) -> list[Any]:
    res = cq.run_query(ctx, "job", fields or ["id"], qfilter)
    return [[cell[1] for cell in row] for row in res["data"]]


@pytest.fixture
def ctx() -> MasterContext:
    return MasterContext(paths=Paths(root="/x"), jqueue=RecordingQueue())


def test_unarchived_conjunct_never_scans_the_archive(ctx: MasterContext) -> None:
    assert _ids(ctx, UNARCHIVED) == [[1], [3]]
    assert _ids(ctx, ["&", ["==", "status", "success"], UNARCHIVED]) == [[1], [3]]
    assert _ids(ctx, ["&", ["&", UNARCHIVED], [">", "id", 1]]) == [[3]]
    assert ctx.jqueue.archive_scans == 0


def test_without_the_conjunct_archived_jobs_are_included(ctx: MasterContext) -> None:
    assert _ids(ctx, None, ["id", "archived"]) == [[1, False], [2, True], [3, False], [4, True]]
    assert _ids(ctx, ["?", "archived"]) == [[2], [4]]
    # the exclusion below a "|" is just a filter: the archive is read, then filtered
    assert _ids(ctx, ["|", UNARCHIVED, ["==", "id", 4]]) == [[1], [3], [4]]
    assert ctx.jqueue.archive_scans == 3


def test_id_conjunct_limits_the_lookup(ctx: MasterContext) -> None:
    queue = ctx.jqueue
    ids_filter = ["|", ["==", "id", 2], ["==", "id", 3], ["==", "id", 9]]
    assert _ids(ctx, ["&", ids_filter, UNARCHIVED]) == [[3]]
    assert _ids(ctx, ids_filter) == [[2], [3]]
    assert queue.lookups == [[2, 3, 9], [2, 3, 9]]
    assert queue.archive_scans == 0


def test_archived_field_definition_and_bad_values() -> None:
    fields = cq.run_query_fields("job", ["archived"])["fields"]
    assert fields == [{"name": "archived", "title": "Archived", "kind": "bool",
                       "doc": "Whether the job is archived"}]
    ctx = MasterContext(paths=Paths(root="/x"), jqueue=RecordingQueue())
    with pytest.raises(errors.QueryFilterParseError):
        cq.run_query(ctx, "job", ["id"], ["==", "archived", "yes"])
