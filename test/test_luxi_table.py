"""The LUXI table (``luxi.METHODS``) is the one list of LUXI methods: the
generated client methods are fresh, and the master's handlers and the
client's methods take exactly the row's arguments."""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from types import ModuleType
from typing import Any

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))

from ganeti import errors, luxi  # noqa: E402
from ganeti.server.luxi_handlers import LuxiDispatcher  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = list(luxi.METHODS.values())


def _generator() -> ModuleType:
    path = os.path.join(REPO, "tools", "gen_luxi_client.py")
    spec = importlib.util.spec_from_file_location("gen_luxi_client", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_client_methods_are_fresh() -> None:
    gen = _generator()
    with open(gen.TARGET, encoding="utf-8") as fh:
        text = fh.read()
    assert gen.splice(text, gen.render()) == text, \
        "ganeti/luxi.py is stale: run tools/gen_luxi_client.py"


def test_the_freshness_check_sees_a_stale_block() -> None:
    gen = _generator()
    with open(gen.TARGET, encoding="utf-8") as fh:
        text = fh.read()
    stale = text.replace('"""Set or clear the job queue drain flag."""', '"""Old doc."""')
    assert stale != text and gen.splice(stale, gen.render()) != stale


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_the_handler_takes_the_rows_arguments(row: luxi.Method) -> None:
    handler = getattr(LuxiDispatcher, row.name)
    params = list(inspect.signature(handler).parameters.values())[1:]
    assert [p.name for p in params] == row.arg_names()
    optional = [p.name for p in params if p.default is not inspect.Parameter.empty]
    assert optional == [n.rstrip("?") for n, _ in row.args if n.endswith("?")]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_the_client_method_takes_the_rows_arguments(row: luxi.Method) -> None:
    method = getattr(luxi.Client, row.client)
    params = list(inspect.signature(method).parameters.values())[1:]
    names = [p.name for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert names == row.arg_names()
    for name in row.defaults:
        assert name in names
    # and one keyword of the client's own, never sent: this call's read timeout
    assert [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY] == \
        ["read_timeout"]


class _TimeoutSeen(luxi.Client):
    """A client whose one seam records the read timeout each call asked for."""

    def __init__(self) -> None:
        super().__init__("(no socket)", rw_timeout=180.0)
        self.seen: list[tuple[str, list[Any], float | None]] = []

    def call(self, method: str, args: list[Any], *, timeout: float | None = None) -> Any:
        self.seen.append((method, list(args), timeout))
        return [0, 0]


def test_read_timeout_sets_the_calls_read_timeout_and_nothing_on_the_wire() -> None:
    client = _TimeoutSeen()
    client.QueryJobs([1], ["status"])
    client.QueryJobs([1], ["status"], read_timeout=5.0)
    client.AutoArchiveJobs(3600.0, 30.0)            # a long poll: at least its wait + 10
    client.AutoArchiveJobs(3600.0, 30.0, read_timeout=60.0)
    client.WaitForJobChangeOnce(7, ["status"], None, -1, 200.0)
    assert client.seen == [
        ("QueryJobs", [[1], ["status"]], None),
        ("QueryJobs", [[1], ["status"]], 5.0),
        ("AutoArchiveJobs", [3600.0, 30.0], 180.0),
        ("AutoArchiveJobs", [3600.0, 30.0], 60.0),
        ("WaitForJobChange", [7, ["status"], None, -1, 200.0], 210.0),
    ]


def test_the_generator_refuses_an_argument_named_read_timeout() -> None:
    gen = _generator()
    row = luxi.Method("Bad", (("read_timeout", float),), idempotent=True, result="Any",
                      doc="A row whose argument would shadow the client's keyword.")
    with pytest.raises(SystemExit, match="reserved"):
        gen._method(row)


def test_every_type_is_a_validator_annotation_and_wait_arguments_exist() -> None:
    from ganeti import wiretypes
    for row in ROWS:
        for raw, tp in row.args:
            assert wiretypes.annotation_text(tp), (row.name, raw)
        assert row.wait is None or row.wait in row.arg_names()


def test_the_client_checks_arguments_before_sending() -> None:
    """A wrong argument is refused on the client with the master's message, nothing sent."""
    client = luxi.Client("/nonexistent/socket")   # a send would raise NoMasterError
    with pytest.raises(errors.ParameterError, match="CancelJob: Parameter 'job_id' must be a job id"):
        client.CancelJob({"a": 1})   # type: ignore[arg-type]
    with pytest.raises(errors.ParameterError, match="QueryTags takes 2 argument"):
        client.call("QueryTags", ["cluster"])


def test_the_fake_is_shaped_by_the_table() -> None:
    from fakes import FakeLuxi
    from fakes.fakeluxi import NoAnswer
    from ganeti import opcodes

    fake = FakeLuxi({"QueryTags": ["a"]})
    assert fake.QueryTags("cluster", None) == ["a"]
    assert fake.SubmitJob([opcodes.OpTestDelay(duration=0.0)]) == 1   # objects become dicts
    assert fake.submitted[0][0]["OP_ID"] == "OP_TEST_DELAY"
    assert fake.calls[0] == ("QueryTags", ["cluster", None])
    with pytest.raises(errors.ParameterError, match="QueryTags: Parameter 'kind'"):
        fake.QueryTags(5, None)   # type: ignore[arg-type]
    with pytest.raises(errors.ProtocolError, match="Unknown or unsupported LUXI method"):
        fake.call("QueryNothing", [[], ["uuid"]])
    with pytest.raises(NoAnswer):
        fake.QueryClusterInfo()
    with pytest.raises(errors.ProgrammerError, match="no LUXI method"):
        FakeLuxi({"QueryTag": []})
    # calls the table refuses were not recorded; one without an answer was
    assert [name for name, _ in fake.calls] == ["QueryTags", "SubmitJob", "QueryClusterInfo"]
