"""The one validator of every wire (ganeti.wiretypes): annotations, messages,
generated text, and that node RPC, LUXI and opcodes all go through it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

import pytest

from ganeti import errors, luxi, wiretypes
from ganeti.opcodes import registry
from ganeti.private import REDACTED, Private
from ganeti.rpc import defs
from ganeti.wiretypes import JobId, check_value


@pytest.mark.parametrize("tp, value, expected", [
    (int, 3, 3), (float, 3, 3.0), (float, 2.5, 2.5), (bool, False, False), (str, "x", "x"),
    (None, None, None), (object, {"any": [1, {2}]}, {"any": [1, {2}]}),
    (int | None, None, None), (Optional[str], "a", "a"), (list[int], (1, 2), [1, 2]),
    (list[float], [1], [1.0]), (tuple[int, ...], [1, 2], [1, 2]),
    (dict[str, int], {"a": 1}, {"a": 1}), (dict[str, object], {"a": object}, {"a": object}),
    (list, (1, "x"), (1, "x")), (dict, {1: 2}, {1: 2}), (Literal["a", "b"], "b", "b"),
    (JobId, 7, 7), (JobId, "17", "17"), (list[JobId] | None, [1, "2"], [1, "2"]),
    (Any, {"a": [1, 2.5, None, "s"]}, {"a": [1, 2.5, None, "s"]}),
], ids=repr)
def test_accepted_values_come_back_normalised(tp: Any, value: Any, expected: Any) -> None:
    assert check_value(tp, value, "p") == expected


@pytest.mark.parametrize("tp, value, message", [
    (int, True, "Parameter 'p' must be an integer, got True"),
    (int, 2 ** 63, "Parameter 'p' is out of range"),
    (float, float("nan"), "Parameter 'p' must be a finite number"),
    (float, "1", "Parameter 'p' must be a number, got '1'"),
    (bool, 0, "Parameter 'p' must be a boolean, got 0"),
    (str | None, 5, "Parameter 'p' must be a string or null, got 5"),
    (list[str] | None, ["a", 1], r"Parameter 'p\[1\]' must be a string, got 1"),
    (list[str], "abc", "Parameter 'p' must be a list of strings, got 'abc'"),
    (dict[str, int], {"a": "b"}, "Parameter 'p.a' must be an integer"),
    (dict[str, object], {1: 2}, "Parameter 'p key' must be a string, got 1"),
    (list[dict[str, object]], [[]], r"Parameter 'p\[0\]' must be an object, got \[\]"),
    (Literal["a", "b"], "c", r"must be one of \['a', 'b'\], got 'c'"),
    (JobId, 0, r"must be a job id \(a positive integer\), got 0"),
    (JobId, "x1", "must be a job id"),
    (Any, {"a": [float("inf")]}, r"Parameter 'p.a\[0\]' must be a finite number"),
    (Private, REDACTED, "submit the job again"),
    (int, "x" * 200, r"got 'xxxx.*\.\.\.$"),
], ids=repr)
def test_refused_values_name_the_item_and_what_was_expected(tp: Any, value: Any,
                                                            message: str) -> None:
    with pytest.raises(errors.ParameterError, match=message) as info:
        check_value(tp, value, "p")
    assert info.value.args[1] == errors.ECODE_INVAL


def test_the_length_bound_is_the_callers_choice() -> None:
    with pytest.raises(errors.ParameterError, match="3 entries, at most 2"):
        check_value(list[int], [1, 2, 3], "p", max_items=2)
    assert check_value(list[int], list(range(20_000)), "p", max_items=None)[-1] == 19_999
    with pytest.raises(errors.ParameterError, match="at most 10000"):
        check_value(list[int], list(range(20_000)), "p")


def test_private_values_are_wrapped() -> None:
    assert check_value(Private, "s3cret", "p") == Private("s3cret")


@pytest.mark.parametrize("tp, text", [
    (int, "int"), (float | None, "float | None"), (list[str] | None, "list[str] | None"),
    (dict[str, Any], "dict[str, Any]"), (object, "Any"), (JobId, "int | str"),
    (tuple[int, ...], "tuple[int, ...]"), (Literal["a"], "Literal['a']"),
])
def test_annotation_text_is_python_source(tp: Any, text: str) -> None:
    assert wiretypes.annotation_text(tp) == text


def test_annotation_text_takes_overrides() -> None:
    assert wiretypes.annotation_text(dict | None, {dict: "JsonDict"}) == "JsonDict | None"


def test_the_module_stays_light() -> None:
    """The LUXI client imports it in every gnt-* command: no typing, no math."""
    import subprocess
    import sys
    code = ("import sys; import ganeti.wiretypes; "
            "print(sorted(m for m in ('typing', 'math', 'dataclasses', 're') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_every_wire_goes_through_the_one_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Node RPC, LUXI and opcodes each call wiretypes.check_value for their arguments."""
    seen: list[tuple[Any, str]] = []
    real = wiretypes.check_value

    def spy(tp: Any, value: Any, where: str, max_items: int | None = 10_000) -> Any:
        seen.append((tp, where))
        return real(tp, value, where, max_items)

    monkeypatch.setattr(wiretypes, "check_value", spy)
    import ganeti.opcodes.base as opbase
    monkeypatch.setattr(opbase, "check_value", spy)
    assert defs.check_args(defs.CALLS["test_delay"], [1.5]) is None
    assert (float, "duration") in seen
    luxi.check_args("SetDrainFlag", [True])
    assert (bool, "flag") in seen
    registry.from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 0})
    assert any(where == "duration" for _, where in seen)


def test_the_same_wrong_value_reads_the_same_on_every_wire() -> None:
    rpc = defs.check_args(defs.CALLS["test_delay"], ["soon"])
    with pytest.raises(errors.ParameterError) as on_luxi:
        luxi.check_args("SetWatcherPause", ["soon"])
    with pytest.raises(errors.ParameterError) as on_opcode:
        registry.from_dict({"OP_ID": "OP_TEST_DELAY", "duration": "soon"})
    assert rpc == "test_delay: Parameter 'duration' must be a number, got 'soon'"
    assert str(on_luxi.value.args[0]) == ("SetWatcherPause: Parameter 'until' must be a number"
                                         " or null, got 'soon'")
    assert "Parameter 'duration' must be a number, got 'soon'" in str(on_opcode.value.args[0])


@dataclass
class _Thing:
    size: int


def test_other_classes_are_checked_by_instance() -> None:
    thing = _Thing(1)
    assert check_value(_Thing, thing, "p") is thing
    with pytest.raises(errors.ParameterError, match="must be of type _Thing"):
        check_value(_Thing, {"size": 1}, "p")
