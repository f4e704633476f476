"""Opcode validation, JSON form and summaries."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ganeti import errors, opcodes
from ganeti.opcodes.base import OpCode, op_id_from_class_name, param


@pytest.mark.parametrize("name,op_id", [("OpTestDelay", "OP_TEST_DELAY"),
                                        ("OpClusterQuery", "OP_CLUSTER_QUERY"),
                                        ("OpQueryFields", "OP_QUERY_FIELDS")])
def test_op_id_from_class_name(name: str, op_id: str) -> None:
    assert op_id_from_class_name(name) == op_id


def test_registry_has_all_basic_opcodes() -> None:
    assert {"OP_TEST_DELAY", "OP_TEST_JQUEUE", "OP_CLUSTER_QUERY", "OP_QUERY",
            "OP_QUERY_FIELDS"} <= set(opcodes.OP_REGISTRY)
    for op_id, cls in opcodes.OP_REGISTRY.items():
        assert cls.OP_ID == op_id


def test_minimal_opcode_gets_defaults_and_roundtrips() -> None:
    op = opcodes.from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 1})
    assert isinstance(op, opcodes.OpTestDelay)
    assert op.duration == 1.0 and isinstance(op.duration, float)
    data = opcodes.to_dict(op)
    assert data["OP_ID"] == "OP_TEST_DELAY"
    for key in ("dry_run", "debug_level", "priority", "depends", "comment", "reason",
                "on_master", "on_nodes", "on_node_uuids", "repeat", "interruptible", "no_locks"):
        assert key in data
    assert opcodes.from_dict(data) == op


def test_summary_uses_dsc_field() -> None:
    assert opcodes.from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 0}).summary() == "TEST_DELAY(0.0)"
    assert opcodes.from_dict({"OP_ID": "OP_CLUSTER_QUERY"}).summary() == "CLUSTER_QUERY"
    q = opcodes.from_dict({"OP_ID": "OP_QUERY", "what": "job", "fields": ["id"]})
    assert q.summary() == "QUERY(job)"


@pytest.mark.parametrize("data,exc,needle", [
    ("not a dict", errors.OpCodeError, "expected a dict"),
    ({"duration": 1}, errors.OpCodeError, "OP_ID"),
    ({"OP_ID": "OP_NO_SUCH"}, errors.OpCodeError, "OP_NO_SUCH"),
    ({"OP_ID": "OP_TEST_DELAY"}, errors.ParameterError, "duration"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": "1"}, errors.ParameterError, "duration"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": True}, errors.ParameterError, "duration"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": -1}, errors.ParameterError, "duration"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "bogus": 2}, errors.ParameterError, "bogus"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": 20}, errors.ParameterError, "priority"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": -21}, errors.ParameterError, "priority"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "on_nodes": "n1"}, errors.ParameterError, "on_nodes"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "on_nodes": [1]}, errors.ParameterError, "on_nodes"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "depends": [[1, ["running"]]]},
     errors.ParameterError, "depends"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "depends": [1]}, errors.ParameterError, "depends"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "depends": [[0, []]]}, errors.ParameterError, "depends"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "reason": [["src", "why"]]},
     errors.ParameterError, "reason"),
    ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "debug_level": -1}, errors.ParameterError,
     "debug_level"),
    ({"OP_ID": "OP_QUERY", "what": "nothing", "fields": []}, errors.ParameterError, "what"),
], ids=lambda v: str(v)[:40])
def test_invalid_opcodes_are_refused(data: object, exc: type, needle: str) -> None:
    with pytest.raises(exc) as info:
        opcodes.from_dict(data)
    assert needle in str(info.value)
    assert info.value.ecode == errors.ECODE_INVAL


def test_valid_envelope_values_are_kept() -> None:
    op = opcodes.from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 0, "priority": -20,
                            "depends": [[-1, []], [5, ["success", "error"]]],
                            "reason": [["gnt:user", "testing", 123]], "comment": "hi",
                            "dry_run": True, "debug_level": 2})
    assert op.priority == -20
    assert op.depends == [[-1, []], [5, ["success", "error"]]]
    assert op.reason == [["gnt:user", "testing", 123]]


def test_default_lists_are_not_shared() -> None:
    a = opcodes.OpTestDelay(duration=0)
    b = opcodes.OpTestDelay(duration=0)
    a.on_nodes.append("x")
    assert b.on_nodes == []


_CREATE = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i1", "disk_template": "file",
           "os_type": "tinyos", "pnode": "node1"}


@pytest.mark.parametrize("image, ok", [
    ("/srv/images/a.img", True), ("http://example.com/a.img", True),
    ("https://example.com/a.img", True), ("ftp://example.com/a.img", True),
    ("ftps://example.com/a.img", True), ("NonExistantOsForQa", True),
    ("images/a.img", False), ("file:///srv/a.img", False), ("", False), (7, False),
    ("default", False)], ids=str)
def test_os_image_is_an_absolute_path_or_a_url(image: object, ok: bool) -> None:
    # Ganeti's CheckOSImage, at instance creation and reinstall; a bare name is an image
    # of the store (ours: the LU refuses a name the store does not have)
    for data in (_CREATE, {"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "i1"}):
        params = {**data, "osparams": {"os-image": image}}
        if ok:
            opcodes.from_dict(params)
        else:
            with pytest.raises(errors.ParameterError, match="absolute path or a URL"):
                opcodes.from_dict(params)


def test_os_image_default_resets_it_in_a_change_only() -> None:
    modify = {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i1"}
    assert opcodes.from_dict({**modify, "osparams": {"os-image": "default"}}).osparams == {
        "os-image": "default"}
    with pytest.raises(errors.ParameterError, match="absolute path or a URL"):
        opcodes.from_dict({**modify, "osparams": {"os-image": "NonExistantOsForQa"}})
    assert opcodes.from_dict({**modify, "osparams": {"other": "x"}}).osparams == {"other": "x"}


def test_fields_left_at_their_defaults_skip_only_defaults_that_passed_the_checks() -> None:
    """validate() skips a field still holding its immutable default only when
    that default passed the field's checks unchanged: a default the checks
    refuse or normalise is checked every time."""
    @dataclass(kw_only=True)
    class OpWidgetTune(OpCode):
        """Tune a widget (test only)."""
        level: int = param(3, min=0, max=5)
        ratio: float = param(1)               # normalised to 1.0: not skipped
        name: str = param(None)               # refused: must be given
        mode: str = param("fast", choices=["fast", "slow"])

    op = OpWidgetTune(name="w1")
    assert (op.level, op.ratio, op.mode) == (3, 1.0, "fast")
    assert isinstance(op.ratio, float)
    with pytest.raises(errors.ParameterError, match="name"):
        OpWidgetTune()
    with pytest.raises(errors.ParameterError, match="level"):
        OpWidgetTune(name="w1", level=6)
    with pytest.raises(errors.ParameterError, match="mode"):
        OpWidgetTune(name="w1", mode="medium")
    op.level = 9                               # changed after construction: checked again
    with pytest.raises(errors.ParameterError, match="level"):
        op.validate()
