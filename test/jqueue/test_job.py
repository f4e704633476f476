"""Job model: status calculation, disk format, fields."""

from __future__ import annotations

import ast
import pathlib

import pytest

import ganeti.jqueue
from ganeti import constants, errors, opcodes, serializer
from ganeti.jqueue.job import (OP_TRANSITIONS, QueuedJob, QueuedOpCode, calc_status,
                               check_op_transition, copy_job, get_job_field, job_from_disk,
                               job_to_disk, set_op_status, split_time)

Q, W, R, S, E, C, CI = ("queued", "waiting", "running", "success", "error", "canceled",
                        "canceling")


@pytest.mark.parametrize("statuses,expected", [
    ([Q], Q), ([S], S), ([S, S], S), ([S, Q], Q), ([W, Q], W), ([S, R, Q], R),
    ([E, Q], E), ([S, E, E], E), ([C, C], C), ([CI, Q], CI), ([S, W], W),
    ([R, E], E), ([Q, E], E),
], ids=lambda v: ",".join(v) if isinstance(v, list) else v)
def test_calc_status(statuses: list[str], expected: str) -> None:
    assert calc_status(statuses) == expected


def test_split_time() -> None:
    assert split_time(1.5) == [1, 500000]
    assert split_time(2.0) == [2, 0]
    assert split_time(1.9999999) == [2, 0]


def _job() -> QueuedJob:
    ops = [QueuedOpCode.from_opcode(opcodes.OpTestDelay(duration=1, priority=5)),
           QueuedOpCode.from_opcode(opcodes.OpClusterQuery(priority=-3))]
    return QueuedJob(id=7, ops=ops, received_timestamp=[1, 2])


def test_disk_format_has_exact_keys_and_roundtrips() -> None:
    job = _job()
    job.add_log(10.25, constants.ELOG_MESSAGE, "hello", 0)
    data = serializer.loads(serializer.dumps(job_to_disk(job)))
    assert set(data) == {"id", "ops", "received_timestamp", "start_timestamp", "end_timestamp"}
    assert set(data["ops"][0]) == {"input", "status", "result", "log", "priority",
                                   "start_timestamp", "exec_timestamp", "end_timestamp"}
    assert data["ops"][0]["log"] == [[1, [10, 250000], "message", "hello"]]
    again = job_from_disk(data)
    assert again.log_serial == 1
    assert job_to_disk(again) == data
    assert again.ops[0].get_op() == job.ops[0].op


@pytest.mark.parametrize("data", [[], {"id": 1}, {"id": "x", "ops": []}, {"id": 1, "ops": []},
                                  {"id": 1, "ops": [{"input": {}, "status": "bogus"}]}])
def test_corrupt_disk_data(data: object) -> None:
    with pytest.raises(errors.JobFileCorrupted):
        job_from_disk(data)


def test_priority_is_lowest_of_unfinished_ops() -> None:
    job = _job()
    assert job.priority() == -3
    set_op_status(job.ops[1], constants.OP_STATUS_RUNNING)
    set_op_status(job.ops[1], constants.OP_STATUS_SUCCESS)
    assert job.priority() == 5


def test_fields() -> None:
    job = _job()
    assert get_job_field(job, "summary") == ["TEST_DELAY(1.0)", "CLUSTER_QUERY"]
    assert get_job_field(job, "opstatus") == [Q, Q]
    assert get_job_field(job, "oppriority") == [5, -3]
    assert get_job_field(job, "received_ts") == [1, 2]
    assert get_job_field(job, "archived") is False
    with pytest.raises(errors.ParameterError):
        get_job_field(job, "nope")


ALLOWED = sorted((old, new) for old, news in OP_TRANSITIONS.items() for new in news)
FORBIDDEN = sorted((old, new) for old in constants.JOB_STATUS_ALL for new in constants.JOB_STATUS_ALL
                   if new not in OP_TRANSITIONS[old])


def _op(status: str) -> QueuedOpCode:
    return QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0}, status=status)


def test_transition_table_covers_every_status_and_ends_at_the_final_ones() -> None:
    assert set(OP_TRANSITIONS) == constants.JOB_STATUS_ALL
    assert all(news <= constants.JOB_STATUS_ALL for news in OP_TRANSITIONS.values())
    assert {s for s, news in OP_TRANSITIONS.items() if not news} == constants.OPS_FINALIZED


@pytest.mark.parametrize("old,new", ALLOWED, ids=[f"{o}->{n}" for o, n in ALLOWED])
def test_allowed_transition(old: str, new: str) -> None:
    op = _op(old)
    check_op_transition(old, new)
    set_op_status(op, new)
    assert op.status == new


@pytest.mark.parametrize("old,new", FORBIDDEN, ids=[f"{o}->{n}" for o, n in FORBIDDEN])
def test_forbidden_transition_raises_and_changes_nothing(old: str, new: str) -> None:
    op = _op(old)
    with pytest.raises(errors.ProgrammerError, match=f"'{old}' -> '{new}'"):
        set_op_status(op, new)
    assert op.status == old


@pytest.mark.parametrize("old,new", [("bogus", Q), (Q, "bogus"), (Q, None)])
def test_unknown_status_is_never_a_legal_transition(old: str, new: str) -> None:
    with pytest.raises(errors.ProgrammerError):
        check_op_transition(old, new)


def test_only_set_op_status_assigns_a_status() -> None:
    # the table rules only if nothing else writes ``.status`` in the queue package
    # (the constructors of JobStub and JobSummary store the status of a job as shown)
    allowed = {"set_op_status", "__init__"}
    found = []
    for path in sorted(pathlib.Path(ganeti.jqueue.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for node in ast.walk(func):
                targets = (node.targets if isinstance(node, ast.Assign) else
                           [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
                if any(isinstance(t, ast.Attribute) and t.attr == "status" for t in targets):
                    name = getattr(func, "name", "<lambda>")
                    if name not in allowed or (name == "__init__" and path.name not in ("job.py", "summary.py")):
                        found.append(f"{path.name}:{node.lineno} in {name}")
    assert found == []


def test_copy_job_is_equal_and_independent_where_the_queue_changes_it() -> None:
    op = opcodes.OpTestDelay(duration=0.5)
    job = QueuedJob(7, [QueuedOpCode.from_opcode(op), QueuedOpCode.from_opcode(op)],
                    received_timestamp=[1, 2], extra={"owner": "x"})
    job.ops[0].log.append([1, [1, 2], "message", "hello"])
    new = copy_job(job)
    assert new == job and type(new) is QueuedJob and type(new.ops[0]) is QueuedOpCode
    assert job_to_disk(new) == job_to_disk(job)
    new.ops[0].status = "running"
    new.ops[0].log.append([2, [1, 3], "message", "more"])
    new.ops.append(QueuedOpCode.from_opcode(op))
    new.extra["owner"] = "y"
    new.start_timestamp = [3, 4]
    assert [o.status for o in job.ops] == [Q, Q] and len(job.ops[0].log) == 1
    assert job.extra == {"owner": "x"} and job.start_timestamp is None
    assert new.ops[1].op is job.ops[1].op          # shallow: the opcode itself is shared
