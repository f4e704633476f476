"""Type-level bounds of opcode parameters, checked at submission (ganeti/opcodes/base.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import constants, errors, opcodes
from ganeti.opcodes.base import MAX_ITEMS

BIG = 2 ** 64


def _delay(**kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": 0, **kw}


def _create(**kw: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "inst1.example.com",
            "disk_template": "plain", "disks": [{"size": 128}], "pnode": "node1",
            "os_type": "debootstrap", **kw}


@pytest.mark.parametrize("data,needle", [
    (_delay(duration=BIG), "duration"),
    (_delay(duration=float("inf")), "duration"),
    (_delay(duration=1e300), "duration"),
    (_delay(debug_level=BIG), "debug_level"),
    (_delay(repeat=BIG), "repeat"),
    (_delay(repeat=10 ** 6), "repeat"),
    (_delay(priority=BIG), "priority"),
    (_delay(depends=[[BIG, ["success"]]]), "depends[0]"),
    (_delay(depends=[[-BIG, ["success"]]]), "depends[0]"),
    (_delay(depends=[[1, ["success"] * 6]]), "depends[0]"),
    (_delay(reason=[["src", "why", BIG]]), "reason[0]"),
    (_delay(on_nodes=["n"] * (MAX_ITEMS + 1)), "on_nodes"),
    (_create(disks=[{"size": BIG}]), "disks[0].size"),
    (_create(disks=[{"size": "99999999999T"}]), "disks[0].size"),
    (_create(disks=[{"size": float("inf")}]), "disks"),
    (_create(disks=[{"size": 128, "spindles": BIG}]), "disks"),
    (_create(beparams={"maxmem": BIG}), "maxmem"),
    (_create(beparams={"minmem": BIG}), "minmem"),
    (_create(beparams={"vcpus": BIG}), "vcpus"),
    (_create(beparams={"memory": "1048577G"}), "maxmem"),
    (_create(hvparams={"migration_port": BIG}), "hvparams.migration_port"),
    (_create(osparams={"x": [BIG]}), "osparams.x[0]"),
    (_create(nics=[{}] * (constants.MAX_NICS + 1)), "nics"),
    (_create(disks=[{"size": 1}] * (constants.MAX_DISKS + 1)), "disks"),
    ({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i", "beparams": {"maxmem": BIG}},
     "maxmem"),
    ({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i",
      "disks": [["add", -1, {"size": BIG}]]}, "disks[0]"),
    ({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i", "nics": [["add", -1, {}]] * 17},
     "nics"),
    ({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "i", "beparams": {"vcpus": 0}}, "vcpus"),
    ({"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "i", "disk": 0, "amount": BIG},
     "amount"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_out_of_range_values_are_refused_at_submission(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(errors.ParameterError) as info:
        opcodes.from_dict(data)
    assert needle in str(info.value), str(info.value)
    assert info.value.ecode == errors.ECODE_INVAL


def test_a_million_nics_are_refused_before_they_are_checked_one_by_one() -> None:
    with pytest.raises(errors.ParameterError, match="1000000 entries, at most 8"):
        opcodes.from_dict(_create(nics=[{"mac": "auto"}] * 1_000_000))


def test_values_inside_the_bounds_are_kept() -> None:
    op = opcodes.from_dict(_create(
        disks=[{"size": "10G"}] * constants.MAX_DISKS, nics=[{}] * constants.MAX_NICS,
        beparams={"maxmem": "2G", "vcpus": 4, "memory": 512}, depends=[[-1, ["success"]]],
        osparams={"big": 2 ** 63 - 1}))
    assert op.beparams == {"maxmem": "2G", "vcpus": 4, "memory": 512}   # checked, not changed
    assert len(op.disks) == constants.MAX_DISKS and len(op.nics) == constants.MAX_NICS
    delay = opcodes.from_dict(_delay(duration=86400, repeat=10_000, debug_level=3))
    assert delay.duration == 86400.0
    change = opcodes.from_dict({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i",
                                "beparams": {"maxmem": "default"}})
    assert change.beparams == {"maxmem": "default"}
