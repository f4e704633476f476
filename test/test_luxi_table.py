"""The LUXI table (``luxi.METHODS``) is the one list of LUXI methods, declared
by the master's ``@luxi_method`` handlers: the generated table
(``ganeti/luxi_table.py``) and client methods are fresh, and the master's
handlers and the client's methods take exactly the row's arguments."""

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
from ganeti.luxi import OPS  # noqa: E402
from ganeti.server.luxi_handlers import LuxiDispatcher  # noqa: E402
from ganeti.wiretypes import JobId  # noqa: E402

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


def _fields(row: luxi.Method) -> tuple[Any, ...]:
    return (row.name, row.args, row.idempotent, row.wait, row.result, row.doc, row.client,
            row.defaults)


def test_the_generated_table_is_fresh() -> None:
    gen = _generator()
    with open(gen.TABLE, encoding="utf-8") as fh:
        committed = fh.read()
    assert committed == gen.render_table(gen.collect()), \
        "ganeti/luxi_table.py is stale: run tools/gen_luxi_client.py"
    assert gen.main(["--check"]) == 0


def test_the_table_is_what_the_handlers_declare() -> None:
    declared = _generator().collect()
    assert [_fields(row) for row in declared] == [_fields(row) for row in ROWS]


def test_every_public_handler_declares_a_method() -> None:
    public = [name for name in vars(LuxiDispatcher) if name[:1].isupper()]
    assert sorted(public) == sorted(luxi.METHODS)
    assert all(hasattr(getattr(LuxiDispatcher, name), "__luxi_method__") for name in public)


class _Handlers:
    """Handlers as a new LUXI method would be written."""

    @luxi.luxi_method(idempotent=True, wait="timeout", client="PollOnce",
                      defaults={"timeout": "30.0"})
    def Poll(self, job_id: JobId, names: list[str] | None, timeout: float,
             deep: bool = False) -> dict[str, Any]:
        """Wait for something; returns what changed.

        More for the reader of the master.
        """
        return {}

    @luxi.luxi_method(idempotent=False, result="int")
    def Submit(self, ops: OPS, filter_: object) -> Any:
        """Submit it."""


def test_a_handler_declares_its_row() -> None:
    gen = _generator()
    poll, submit = gen.collect(_Handlers)
    assert _fields(poll) == (
        "Poll", (("job_id", JobId), ("names", list[str] | None), ("timeout", float),
                 ("deep?", bool)),
        True, "timeout", "dict[str, Any]", "Wait for something; returns what changed.",
        "PollOnce", {"timeout": "30.0", "deep": "False"})
    assert _fields(submit) == ("Submit", (("ops", OPS), ("filter_", object)), False, None,
                               "int", "Submit it.", "Submit", {})
    text = gen.render_table([poll, submit])
    assert '("Poll", (("job_id", JobId), ("names", list[str] | None)' in text
    assert '("deep?", bool)' in text and '{"timeout": "30.0", "deep": "False"}' in text
    namespace: dict[str, Any] = {}
    exec(compile(text, "luxi_table", "exec"), namespace)   # the table reads back the same
    rows = [luxi._row(*row) for row in namespace["ROWS"]]
    assert [_fields(r) for r in rows] == [_fields(poll), _fields(submit)]
    assert "def PollOnce(self, job_id: int | str, names: list[str] | None," \
        " timeout: float = 30.0," in gen.render([poll]).replace("\n", " ").replace("  ", "")


class _Bad:
    @luxi.luxi_method(idempotent=True)
    def AnyArg(self, value: Any) -> int:
        """Any is not a wire type."""
        return 0

    @luxi.luxi_method(idempotent=True)
    def NoDoc(self, value: int) -> int:
        return 0

    @luxi.luxi_method(idempotent=True)
    def Order(self, first: int = 0, second: int = 1, third: str = "x") -> int:
        """Fine: optional arguments trail."""
        return 0

    @luxi.luxi_method(idempotent=True)
    def Gap(self, first: int = 0, *, second: int) -> int:
        """Keyword-only parameters are not wire arguments."""
        return 0

    @luxi.luxi_method(idempotent=True, wait="seconds")
    def Wait(self, timeout: float) -> int:
        """wait names an argument that is not there."""
        return 0

    @luxi.luxi_method(idempotent=True)
    def NoResult(self):  # type: ignore[no-untyped-def]
        """No result type."""

    def Plain(self, value: int) -> int:
        """Not decorated."""
        return 0


@pytest.mark.parametrize("name, message", [
    ("AnyArg", "Any is no wire type"), ("NoDoc", "docstring"),
    ("Gap", "plain positional"), ("Wait", "wait names no argument"),
    ("NoResult", "result="), ("Plain", "not decorated"),
])
def test_the_generator_refuses_a_bad_declaration(name: str, message: str) -> None:
    gen = _generator()
    with pytest.raises(ValueError, match=message):
        gen.declared_method(getattr(_Bad, name))
    assert gen.declared_method(_Bad.Order).args == (("first?", int), ("second?", int),
                                                    ("third?", str))


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
