"""LogicalUnit.LogProgress / progress_reporter: typed entries in the opcode log."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import constants, errors, opcodes, progress
from ganeti.cmdlib.base import NoHooksLU
from ganeti.context import MasterContext
from ganeti.pathutils import Paths
from fakes.clock import FakeClock


class _Proc:
    def __init__(self) -> None:
        self.logged: list[tuple[str, Any]] = []

    def log(self, *args: Any) -> None:
        self.logged.append((args[0], args[1]))


class _LU(NoHooksLU[opcodes.OpCode]):
    def ExpandNames(self) -> None:
        pass


def _lu() -> tuple[_LU, _Proc]:
    proc = _Proc()
    ctx = MasterContext(paths=Paths(root="/nonexistent"), cfg=None, glm=None, rpc=None)
    op = opcodes.from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 0})
    return _LU(proc, op, ctx), proc  # type: ignore[arg-type]


def test_log_progress_writes_the_contract_dict() -> None:
    lu, proc = _lu()
    lu.LogProgress("migration", 5, 10, rate=1.0, eta=5.0)
    lu.LogProgress("migration", 10, 10, done=True)
    assert proc.logged == [
        (constants.ELOG_PROGRESS, progress.entry("migration", 5, 10, rate=1.0, eta=5.0)),
        (constants.ELOG_PROGRESS, progress.entry("migration", 10, 10, done=True))]


def test_progress_reporter_always_ends_with_one_final_entry() -> None:
    lu, proc = _lu()
    clock = FakeClock(0.0)
    with pytest.raises(errors.OpExecError):
        with lu.progress_reporter("disk-copy", end=100, clock=clock) as rep:
            rep.update(10)
            clock.advance(2)
            rep.update(60)
            raise errors.OpExecError("checksum mismatch")
    msgs = [m for t, m in proc.logged if t == constants.ELOG_PROGRESS]
    assert [m["cur"] for m in msgs] == [10, 60, 60]
    assert [m["done"] for m in msgs] == [False, False, True]
    assert msgs[-1]["error"] == "checksum mismatch"
