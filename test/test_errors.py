"""Tests for ganeti.errors: the error tree and its wire encoding."""

from __future__ import annotations

import pytest

from ganeti import errors, serializer


def test_prereq_error_round_trip_keeps_class_message_and_code() -> None:
    err = errors.OpPrereqError("Instance x.example.com not found", errors.ECODE_NOENT)
    wire = serializer.loads(serializer.dumps(errors.encode_exception(err)))
    assert wire == ["OpPrereqError", ["Instance x.example.com not found", "unknown_entity"]]
    back = errors.decode_exception(wire)
    assert type(back) is errors.OpPrereqError
    assert str(back) == "Instance x.example.com not found"
    assert back.ecode == errors.ECODE_NOENT
    assert errors.get_error_code(back) == "unknown_entity"


@pytest.mark.parametrize("cls", [errors.ParameterError, errors.JobLost, errors.RemoteError,
                                 errors.ConfigurationError, errors.HooksAbort],
                         ids=lambda c: c.__name__)
def test_subclasses_round_trip(cls: type[errors.GanetiError]) -> None:
    back = errors.decode_exception(errors.encode_exception(cls("boom")))
    assert type(back) is cls
    assert "boom" in str(back)


def test_unknown_class_becomes_generic_error_naming_it() -> None:
    back = errors.decode_exception(["NoSuchError", ["something", 3]])
    assert type(back) is errors.GanetiError
    assert "NoSuchError" in str(back) and "something" in str(back)


@pytest.mark.parametrize("data", [None, "x", [], ["OpExecError"], [1, []], {"a": 1}],
                         ids=["none", "str", "empty", "short", "nonstr", "dict"])
def test_malformed_encoding_is_a_protocol_error(data: object) -> None:
    assert isinstance(errors.decode_exception(data), errors.ProtocolError)


def test_foreign_exception_is_encoded_as_exec_error() -> None:
    wire = errors.encode_exception(KeyError("k"))
    assert wire[0] == "OpExecError"
    assert "KeyError" in wire[1][0]


def test_maybe_raise_raises_only_encoded_errors() -> None:
    errors.maybe_raise(["not", "an error"])
    errors.maybe_raise({"x": 1})
    with pytest.raises(errors.JobQueueDrainError):
        errors.maybe_raise(["JobQueueDrainError", ["drained"]])


def test_error_codes_are_ganeti_strings() -> None:
    assert errors.ECODE_INVAL == "wrong_input"
    assert errors.ECODE_EXISTS == "already_exists"
    assert errors.ECODE_STATE == "wrong_state"
    assert errors.ECODE_NORES == "insufficient_resources"
    assert errors.ParameterError("bad").ecode == errors.ECODE_INVAL
