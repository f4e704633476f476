"""Private values (doc/protocols/opcodes.md, "Private parameters"): redacted wherever written."""

from __future__ import annotations

import copy

import pytest

from ganeti import errors, opcodes, serializer
from ganeti.private import REDACTED, Private, reveal

CANARY = "canary-5f1e0c"


def _create(**kw: object) -> dict[str, object]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i1", "disk_template": "diskless",
            "os_type": "tinyos", **kw}


def test_private_is_redacted_in_text_and_json() -> None:
    value = Private(CANARY)
    assert value.get() == CANARY
    for text in (repr(value), str(value), f"{value}", serializer.dumps({"a": [value]}),
                 serializer.dumps({"a": value}, pretty=True), repr(copy.deepcopy([value]))):
        assert CANARY not in text and REDACTED in text
    assert copy.deepcopy(value).get() == CANARY
    assert reveal({"a": value, "b": "plain"}) == {"a": CANARY, "b": "plain"}


@pytest.mark.parametrize("data", [
    _create(osparams_private={"secret": CANARY}),
    {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i1",
     "osparams_private": {"secret": CANARY}},
    {"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "i1",
     "osparams_private": {"secret": CANARY}},
    {"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "cluster_domain_secret": CANARY},
], ids=["create", "modify", "reinstall", "renew-crypto"])
def test_private_opcode_fields_never_serialise_in_clear(data: dict[str, object]) -> None:
    op = opcodes.from_dict(data)
    text = serializer.dumps(opcodes.to_dict(op)) + repr(op)
    assert CANARY not in text and REDACTED in text


def test_value_kept_for_the_logical_unit() -> None:
    op = opcodes.from_dict(_create(osparams_private={"secret": CANARY, "n": 3}))
    assert reveal(op.osparams_private) == {"secret": CANARY, "n": 3}


def test_redacted_marker_is_refused_with_resubmit_hint() -> None:
    # what an opcode rebuilt from its job file holds in place of the value
    data = serializer.loads(serializer.dumps(opcodes.to_dict(
        opcodes.from_dict(_create(osparams_private={"secret": CANARY})))))
    with pytest.raises(errors.ParameterError, match="submit the job again") as info:
        opcodes.from_dict(data)
    assert "osparams_private.secret" in str(info.value)


def test_non_scalar_private_value_is_refused() -> None:
    with pytest.raises(errors.ParameterError, match="osparams_private.x"):
        opcodes.from_dict(_create(osparams_private={"x": ["a"]}))
