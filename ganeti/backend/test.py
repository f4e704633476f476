"""Procedures for tests and the test opcodes."""

from __future__ import annotations

from ganeti import errors
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import NORMAL, procedure

__all__ = ["test_delay"]

MAX_TEST_DELAY = 86400.0


@procedure(NORMAL)
def test_delay(ctx: NodeContext, duration: float) -> None:
    """Sleep for duration seconds (tests and opcode OpTestDelay).

    Sleep ``duration`` seconds (0 .. one day); used by OpTestDelay.
    """
    if not 0 <= duration <= MAX_TEST_DELAY:
        raise errors.OpExecError(f"Invalid delay {duration!r}: must be 0..{MAX_TEST_DELAY:g} seconds")
    ctx.sleep(duration)
