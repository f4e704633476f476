"""ganeti.cli: option parsing, generic_main, error texts, job following."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from fakes import FakeLuxi

from ganeti import cli, constants, errors


def _client(changes: list[Any] | None = None, final: list[Any] | None = None,
            job_id: int = 17) -> FakeLuxi:
    """A fake LUXI client: WaitForJobChange answers from ``changes`` in turn."""
    script = list(changes or [])
    return FakeLuxi({"SubmitJob": job_id,
                     "WaitForJobChange": lambda *args: script.pop(0),
                     "QueryJobs": [final or ["success", ["success"], [None]]]})


def _entry(serial: int, msg: str, ts: float = 1795993310.5) -> list[Any]:
    return [serial, [int(ts), int((ts % 1) * 1e6)], "message", msg]


# --- options ------------------------------------------------------------------

@pytest.mark.parametrize("selected,expected", [
    (None, ["id", "status"]),
    ("name", ["name"]),
    ("a,b", ["a", "b"]),
    ("+summary,priority", ["id", "status", "summary", "priority"]),
], ids=["default", "replace", "list", "append"])
def test_parse_fields(selected: str | None, expected: list[str]) -> None:
    assert cli.parse_fields(selected, ["id", "status"]) == expected


@pytest.mark.parametrize("text,value", [("low", 10), ("normal", 0), ("HIGH", -10), ("-20", -20)])
def test_parse_priority(text: str, value: int) -> None:
    assert cli.parse_priority(text) == value


@pytest.mark.parametrize("text", ["urgent", "20", "-21"])
def test_parse_priority_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        cli.parse_priority(text)


@pytest.mark.parametrize("text,seconds", [("30", 30), ("30s", 30), ("5m", 300), ("6h", 21600),
                                          ("1d", 86400), ("2w", 1209600)])
def test_parse_timespec(text: str, seconds: int) -> None:
    assert cli.parse_timespec(text) == seconds


@pytest.mark.parametrize("text", ["", "x", "1y", "-5", "1.5h"])
def test_parse_timespec_rejects(text: str) -> None:
    with pytest.raises(errors.OpPrereqError):
        cli.parse_timespec(text)


def test_check_arguments_counts() -> None:
    assert cli.check_arguments(cli.ARGS_ONE_JOB, ["1"]) is None
    assert "Not enough" in cli.check_arguments(cli.ARGS_ONE_JOB, [])
    assert "Too many" in cli.check_arguments(cli.ARGS_ONE_JOB, ["1", "2"])
    assert "no arguments" in cli.check_arguments(cli.ARGS_NONE, ["x"])
    assert cli.check_arguments(cli.ARGS_MANY_JOBS, []) is None
    assert cli.check_arguments(cli.ARGS_MANY_JOBS, ["1"] * 50) is None


def test_option_rejects_bad_flags() -> None:
    with pytest.raises(errors.ProgrammerError):
        cli.Option("submit")


# --- generic_main -------------------------------------------------------------

def _echo(opts: Any, args: list[str]) -> int:
    cli.to_stdout(json.dumps({"args": args, "submit": opts.submit_only,
                              "priority": opts.priority, "output": opts.output}))
    return 0


def _fail(opts: Any, args: list[str]) -> int:
    raise errors.OpPrereqError("Instance 'x' not known", errors.ECODE_NOENT)


def _crash(opts: Any, args: list[str]) -> int:
    raise RuntimeError("boom")


COMMANDS: dict[str, cli.Command] = {
    "echo": (_echo, [cli.ArgUnknown(min=1, max=2)],
             [cli.SUBMIT_OPT, cli.PRIORITY_OPT, cli.FIELDS_OPT], "[options] A [B]", "Echo args"),
    "fail": (_fail, cli.ARGS_NONE, [], "", "Always fails"),
    "crash": (_crash, cli.ARGS_NONE, [], "", "Raises a foreign exception"),
}


def test_generic_main_parses_options_and_args(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.generic_main(COMMANDS, ["echo", "a", "--submit", "--priority", "high",
                                       "-o", "+x", "b"], "gnt-test")
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "args": ["a", "b"], "submit": True, "priority": -10, "output": "+x"}


def test_generic_main_negative_number_is_an_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.generic_main(COMMANDS, ["echo", "-1"], "gnt-test") == 0
    assert json.loads(capsys.readouterr().out)["args"] == ["-1"]


@pytest.mark.parametrize("argv", [[], ["nosuch"], ["echo"], ["echo", "a", "b", "c"],
                                  ["echo", "a", "--bogus"], ["echo", "a", "--priority", "x"]],
                         ids=["no-verb", "unknown-verb", "too-few", "too-many", "bad-option",
                              "bad-priority"])
def test_generic_main_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.generic_main(COMMANDS, argv, "gnt-test") == cli.EXIT_USAGE
    assert capsys.readouterr().err


def test_generic_main_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.generic_main(COMMANDS, ["--help"], "gnt-test") == 0
    out = capsys.readouterr().out
    assert "echo" in out and "Always fails" in out
    assert cli.generic_main(COMMANDS, ["echo", "--help"], "gnt-test") == 0
    out = capsys.readouterr().out
    assert "gnt-test echo [options] A [B]" in out and "--submit" in out
    assert cli.generic_main(COMMANDS, ["--version"], "gnt-test") == 0
    assert constants.RELEASE_VERSION in capsys.readouterr().out


def test_generic_main_formats_prereq_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.generic_main(COMMANDS, ["fail"], "gnt-test") == cli.EXIT_FAILURE
    assert capsys.readouterr().err == (
        "Failure: prerequisites not met for this operation:\n"
        "error type: unknown_entity, error details:\nInstance 'x' not known\n")


def test_generic_main_unhandled_exception(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.generic_main(COMMANDS, ["crash"], "gnt-test") == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "Unhandled exception: RuntimeError: boom" in err
    assert "Traceback" in err


def test_generic_main_no_master(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(constants.ENV_ROOTDIR, str(tmp_path))

    def query(opts: Any, args: list[str]) -> int:
        cli.get_client(opts).QueryClusterInfo()
        return 0

    code = cli.generic_main({"q": (query, cli.ARGS_NONE, [], "", "")}, ["q"], "gnt-test")
    assert code == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "Cannot communicate with the master daemon" in err and str(tmp_path) in err


@pytest.mark.parametrize("err,start", [
    (errors.OpExecError("disk failed"), "Failure: command execution error:\ndisk failed"),
    (errors.JobQueueDrainError("x"), "Failure: the job queue is marked for drain"),
    (errors.JobLost("Job 5 not found"), "Error checking job status: Job 5 not found"),
    (errors.JobQueueQuorumError("Job 7 not acknowledged: stored on 1 of 3"),
     "Failure: the job was not stored on a majority of the master candidates"),
    (errors.LuxiTimeoutError("t"), "Timeout while talking to the master daemon"),
    (errors.HooksAbort("pre hook"), "Failure: hooks execution failed:\npre hook"),
    (errors.ConfigurationError("bad"), "Unhandled Ganeti error: bad"),
    (errors.ParameterError("duration: must be >= 0"), "Failure: prerequisites not met"),
])
def test_format_error(err: Exception, start: str) -> None:
    code, msg = cli.format_error(err)
    assert code == cli.EXIT_FAILURE
    assert msg.startswith(start)


# --- opcode options and job following ----------------------------------------------

class _Opts:
    def __init__(self, **kw: Any) -> None:
        self.priority = None
        self.dry_run = False
        self.debug = 0
        self.reason = None
        self.submit_only = False
        self.print_jobid = False
        self.command = "gnt-debug delay"
        self.client_factory = None
        self.__dict__.update(kw)


def test_set_generic_opcode_opts() -> None:
    ops = [{"OP_ID": "OP_TEST_DELAY", "duration": 0}]
    opts = _Opts(priority=-10, dry_run=True, debug=2, reason="maintenance")
    cli.set_generic_opcode_opts(ops, opts, command="gnt-debug delay", clock=lambda: 123)
    assert ops[0]["priority"] == -10 and ops[0]["dry_run"] is True
    assert ops[0]["debug_level"] == 2
    assert ops[0]["reason"] == [["gnt:client:gnt-debug", "delay", 123],
                                ["gnt:user", "maintenance", 123]]


def test_op_to_dict_copies_dicts_and_converts_objects() -> None:
    op = {"OP_ID": "OP_TEST_DELAY"}
    assert cli.op_to_dict(op) == op and cli.op_to_dict(op) is not op
    opcodes = pytest.importorskip("ganeti.opcodes")
    data = cli.op_to_dict(opcodes.OpTestDelay(duration=2.0))
    assert data["OP_ID"] == "OP_TEST_DELAY" and data["duration"] == 2.0


def test_poll_job_prints_log_lines_and_returns_results(capsys: pytest.CaptureFixture[str]) -> None:
    ts = 1795993310.25
    cl = _client(changes=[
        [["running"], [_entry(1, "first", ts)]],
        "nochange",
        [["success"], [_entry(2, "second", ts), _entry(3, "third", ts)]],
    ], final=["success", ["success"], [42]])
    assert cli.poll_job(17, cl) == [42]
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{time.ctime(ts)} first", f"{time.ctime(ts)} second",
                   f"{time.ctime(ts)} third"]
    waits = cl.args_of("WaitForJobChange")
    assert waits[0][2:4] == [None, -1]
    assert waits[1][2:4] == [["running"], 1]
    assert waits[2][2:4] == [["running"], 1]


def test_poll_job_raises_the_job_error() -> None:
    cl = _client(changes=[[["error"], []]],
                    final=["error", ["error"], [["OpPrereqError", ["bad node", "unknown_entity"]]]])
    with pytest.raises(errors.OpPrereqError) as info:
        cli.poll_job(3, cl, feedback_fn=None)
    assert info.value.ecode == "unknown_entity"


def test_poll_job_canceled_and_lost() -> None:
    with pytest.raises(errors.OpExecError, match="canceled"):
        cli.poll_job(3, _client(changes=[[["canceled"], []]],
                                final=["canceled", ["canceled"], [None]]))
    with pytest.raises(errors.JobLost):
        cli.poll_job(3, _client(changes=[None]))


def test_job_result_partial_failure() -> None:
    with pytest.raises(errors.OpExecError, match="partial failure"):
        cli.job_result(1, "error", ["success", "error"], [None, "disk broke"])


def test_submit_or_send_submit_only_prints_jobid_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    cl = _client()
    opts = _Opts(submit_only=True)
    assert cli.submit_or_send({"OP_ID": "OP_TEST_DELAY", "duration": 0}, opts, cl) is None
    captured = capsys.readouterr()
    assert captured.err == "JobID: 17\n" and captured.out == ""
    assert [c[0] for c in cl.calls] == ["SubmitJob"]
    sent = cl.calls[0][1][0][0]
    assert sent["reason"][0][:2] == ["gnt:client:gnt-debug", "delay"]


def test_submit_or_send_waits_without_submit() -> None:
    cl = _client(changes=[[["success"], []]], final=["success", ["success"], ["done"]])
    assert cli.submit_or_send({"OP_ID": "OP_TEST_DELAY"}, _Opts(), cl) == "done"


def test_load_opcode_file(tmp_path: Any) -> None:
    good = tmp_path / "ops.json"
    good.write_text(json.dumps([{"OP_ID": "OP_TEST_DELAY", "duration": 1}]))
    assert cli.load_opcode_file(str(good)) == [{"OP_ID": "OP_TEST_DELAY", "duration": 1}]
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"OP_ID": "OP_TEST_DELAY"}))
    assert len(cli.load_opcode_file(str(single))) == 1
    for name, text in [("bad.json", "{not json"), ("empty.json", "[]"), ("nums.json", "[1, 2]")]:
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(errors.OpPrereqError):
            cli.load_opcode_file(str(path))
    with pytest.raises(errors.OpPrereqError, match="Cannot read"):
        cli.load_opcode_file(str(tmp_path / "missing.json"))


def test_build_query_filter() -> None:
    assert cli.build_query_filter([], False) is None
    assert cli.build_query_filter(["1", "2"], False, namefield="id", isnumeric=True) == \
        ["|", ["==", "id", 1], ["==", "id", 2]]
    assert cli.build_query_filter(['status == "error"'], False, namefield="id") == \
        ["==", "status", "error"]
    with pytest.raises(errors.OpPrereqError):
        cli.build_query_filter(["x"], False, namefield="id", isnumeric=True)


def test_cli_import_is_lean() -> None:
    # A CLI process must not pay for the heavy modules before it needs them
    # (the opcode classes: it builds opcodes with the import-free ganeti.opcodes.wire).
    import subprocess
    import sys
    code = ("import sys; import ganeti.client.gnt_debug, ganeti.client.gnt_job, ganeti.luxi; "
            "bad = [m for m in ('dataclasses', 'json', 'ganeti.opcodes.base', "
            "'ganeti.opcodes.registry', "
            "'ganeti.query', 'ganeti.pathutils', 'logging', 'simplejson', 'shutil') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == "[]"
