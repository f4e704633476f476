"""gnt-job and gnt-debug verbs against a fake LUXI client (no daemon)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes import FakeLuxi

from ganeti import cli
from ganeti.client import gnt_debug, gnt_job

JOB_FIELDS = [{"name": "id", "title": "ID", "kind": "number", "doc": ""},
              {"name": "status", "title": "Status", "kind": "text", "doc": ""},
              {"name": "summary", "title": "Summary", "kind": "other", "doc": ""}]


def run(module: Any, argv: list[str], cl: FakeLuxi) -> int:
    return cli.generic_main(module.commands, argv, module.__name__.split(".")[-1].replace("_", "-"),
                            client_factory=lambda: cl)


def test_job_list_default_fields_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    cl = FakeLuxi({"Query": {"fields": JOB_FIELDS, "data": [
        [[0, 1], [0, "success"], [0, ["TEST_DELAY(0.0)"]]],
        [[0, 12], [0, "error"], [0, ["TEST_DELAY(1.0)"]]]]}})
    assert run(gnt_job, ["list"], cl) == 0
    assert cl.calls == [("Query", ["job", ["id", "status", "summary"],
                                   ["!", ["?", "archived"]]])]
    assert capsys.readouterr().out.splitlines() == [
        "ID Status  Summary",
        " 1 success TEST_DELAY(0.0)",
        "12 error   TEST_DELAY(1.0)",
    ]


def test_job_list_ids_status_and_separator(capsys: pytest.CaptureFixture[str]) -> None:
    cl = FakeLuxi({"Query": {"fields": JOB_FIELDS[:2], "data": [[[0, 3], [0, "running"]]]}})
    assert run(gnt_job, ["list", "--no-headers", "--separator=|", "-o", "id,status",
                         "--running", "3", "4"], cl) == 0
    _, (what, fields, qfilter) = cl.calls[0]
    assert fields == ["id", "status"]
    assert qfilter == ["&", ["|", ["==", "id", 3], ["==", "id", 4]],
                       ["|", ["==", "status", "running"], ["==", "status", "canceling"]],
                       ["!", ["?", "archived"]]]
    assert capsys.readouterr().out == "3|running\n"


def test_job_list_filter_text() -> None:
    cl = FakeLuxi({"Query": {"fields": JOB_FIELDS, "data": []}})
    assert run(gnt_job, ["list", "-F", 'status == "error"'], cl) == 0
    assert cl.calls[0][1][2] == ["&", ["==", "status", "error"], ["!", ["?", "archived"]]]
    assert run(gnt_job, ["list", "--archived", "-F", 'status == "error"'], cl) == 0
    assert cl.calls[1][1][2] == ["==", "status", "error"]


def test_job_list_unknown_field_exit_14(capsys: pytest.CaptureFixture[str]) -> None:
    cl = FakeLuxi({"Query": {"fields": [{"name": "x", "title": "x", "kind": "unknown",
                                           "doc": ""}], "data": [[[1, None]]]}})
    assert run(gnt_job, ["list", "-o", "x"], cl) == 14
    assert "unknown field" in capsys.readouterr().err


def test_job_list_bad_id_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(gnt_job, ["list", "abc"], FakeLuxi({})) == 1
    assert "wrong_input" in capsys.readouterr().err


def test_job_info_prints_details(capsys: pytest.CaptureFixture[str]) -> None:
    row = [5, [{"OP_ID": "OP_TEST_DELAY", "duration": 0.5}], "success", 0,
           [100, 0], [100, 500000], [101, 0], ["success"],
           [[[1, [100, 600000], "message", "sleeping"]]], [None],
           [[100, 500000]], [[100, 500010]], [[101, 0]], [0]]
    cl = FakeLuxi({"QueryJobs": [row, None]})
    assert run(gnt_job, ["info", "5", "6"], cl) == 1
    assert cl.calls[0] == ("QueryJobs", [[5, 6], gnt_job.INFO_FIELDS])
    captured = capsys.readouterr()
    out = captured.out
    assert "Job ID: 5" in out and "Status: success" in out
    assert "- Opcode: OP_TEST_DELAY" in out and "duration: 0.5" in out
    import yaml
    job = yaml.safe_load(out)[0]
    assert job["Processing start"].endswith(" (delta 0.500000s)")
    assert job["Total processing time"] == "1.000000 seconds"
    assert job["Opcodes"][0]["Input fields"] == {"OP_ID": "OP_TEST_DELAY", "duration": 0.5}
    assert job["Opcodes"][0]["Execution log"][0]["Content"] == [1, "message", "sleeping"]
    assert "Job ID 6 not found" in captured.err


def test_job_cancel_archive_autoarchive_priority(capsys: pytest.CaptureFixture[str]) -> None:
    cl = FakeLuxi({"CancelJob": lambda jid, kill: [jid == 1, f"Job {jid} canceled" if jid == 1
                                                   else f"Job {jid} is running"],
                     "ArchiveJob": lambda jid: jid != 9,
                     "AutoArchiveJobs": [3, 0],
                     "ChangeJobPriority": [True, "ok"]})
    assert run(gnt_job, ["cancel", "--kill", "2"], cl) == 1       # not confirmed: no call
    assert "--yes-do-it" in capsys.readouterr().err and cl.calls == []
    assert run(gnt_job, ["cancel", "1"], cl) == 0
    assert run(gnt_job, ["cancel", "--kill", "--yes-do-it", "2"], cl) == 1
    assert run(gnt_job, ["archive", "1", "2"], cl) == 0
    assert run(gnt_job, ["archive", "9"], cl) == 1
    assert run(gnt_job, ["autoarchive", "all"], cl) == 0
    assert run(gnt_job, ["autoarchive", "6h"], cl) == 0
    assert run(gnt_job, ["change-priority", "--priority", "high", "4"], cl) == 0
    assert run(gnt_job, ["change-priority", "4"], cl) == 2
    assert cl.calls == [
        ("CancelJob", [1, False]), ("CancelJob", [2, True]),
        ("ArchiveJob", [1]), ("ArchiveJob", [2]), ("ArchiveJob", [9]),
        ("AutoArchiveJobs", [-1, 89]), ("AutoArchiveJobs", [21600, 89]),
        ("ChangeJobPriority", [4, -10]),
    ]
    captured = capsys.readouterr()
    assert "Job 1 canceled" in captured.out and "Job 2 is running" in captured.err
    assert "Failed to archive job 9" in captured.err
    assert "Archived 3 jobs, 0 unchecked left" in captured.out


def test_job_submit_file_submit_only(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ops.json"
    path.write_text(json.dumps([{"OP_ID": "OP_TEST_DELAY", "duration": 0},
                                {"OP_ID": "OP_TEST_DELAY", "duration": 1}]))
    cl = FakeLuxi({"SubmitJob": 33})
    assert run(gnt_job, ["submit", "--submit", "--priority", "low", str(path)], cl) == 0
    assert capsys.readouterr().err == "JobID: 33\n"
    ops = cl.calls[0][1][0]
    assert [op["duration"] for op in ops] == [0, 1]
    assert all(op["priority"] == 10 for op in ops)


def test_job_wait_exit_code_follows_job(capsys: pytest.CaptureFixture[str]) -> None:
    ok = FakeLuxi({"WaitForJobChange": [["success"], []],
                   "QueryJobs": [["success", ["success"], [None]]]})
    assert run(gnt_job, ["wait", "4"], ok) == 0
    bad = FakeLuxi({"WaitForJobChange": [["error"], []],
                    "QueryJobs": [["error", ["error"], [["OpExecError", ["it broke"]]]]]})
    assert run(gnt_job, ["wait", "4"], bad) == 1
    assert "Job 4 failed: Failure: command execution error:\nit broke" in capsys.readouterr().err


def test_debug_delay_builds_the_opcode(capsys: pytest.CaptureFixture[str]) -> None:
    cl = FakeLuxi({"SubmitJob": 8})
    assert run(gnt_debug, ["delay", "--submit", "-n", "n1", "-n", "n2", "--no-master",
                           "--repeat", "2", "--interruptible", "--no-locks",
                           "--priority", "high", "1.5"], cl) == 0
    op = cl.calls[0][1][0][0]
    assert {k: op[k] for k in ("OP_ID", "duration", "on_master", "on_nodes", "repeat",
                                "interruptible", "no_locks", "priority")} == {
        "OP_ID": "OP_TEST_DELAY", "duration": 1.5, "on_master": False, "on_nodes": ["n1", "n2"],
        "repeat": 2, "interruptible": True, "no_locks": True, "priority": -10}
    assert capsys.readouterr().err == "JobID: 8\n"


def test_debug_delay_bad_duration_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    cl = FakeLuxi({})
    assert run(gnt_debug, ["delay", "soon"], cl) == 2
    assert cl.calls == []
    assert "invalid duration" in capsys.readouterr().err


def test_debug_locks_table(capsys: pytest.CaptureFixture[str]) -> None:
    fields = [{"name": n, "title": t, "kind": "other", "doc": ""}
              for n, t in [("name", "Name"), ("mode", "Mode"), ("owner", "Owner"),
                           ("pending", "Pending")]]
    cl = FakeLuxi({"Query": {"fields": fields, "data": [
        [[0, "node/n1"], [0, "shared"], [0, ["job/3", "job/4"]],
         [0, [["exclusive", ["job/5"]]]]],
        [[0, "cluster/BGL"], [0, None], [0, None], [0, []]]]}})
    assert run(gnt_debug, ["locks", "node/n1"], cl) == 0
    assert cl.calls[0][1] == ["lock", ["name", "mode", "owner", "pending"],
                              ["|", ["==", "name", "node/n1"]]]
    assert capsys.readouterr().out.splitlines() == [
        "Name        Mode   Owner       Pending",
        "node/n1     shared job/3,job/4 exclusive:job/5",
        "cluster/BGL -      -           -",
    ]


def test_debug_submit_job_many(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ops.json"
    path.write_text(json.dumps([{"OP_ID": "OP_TEST_DELAY", "duration": 0}]))
    cl = FakeLuxi({"SubmitManyJobs": [[True, 1], [False, ["OpCodeError", ["bad", "wrong_input"]]]],
                     "WaitForJobChange": [["success"], []],
                     "QueryJobs": [["success", ["success"], [None]]]})
    code = run(gnt_debug, ["submit-job", "--job-repeat", "2", "--op-repeat", "3",
                           "--timing-stats", str(path)], cl)
    assert code == 1
    jobs = cl.calls[0][1][0]
    assert len(jobs) == 2 and all(len(ops) == 3 for ops in jobs)
    captured = capsys.readouterr()
    assert "Job 1 (" in captured.out and "C:job       2" in captured.out
    assert "Failed to submit job" in captured.err and "bad" in captured.err
