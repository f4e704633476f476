"""Opcodes for testing the job machinery: delays and scripted jobs."""

from __future__ import annotations

from dataclasses import dataclass

from ganeti.opcodes.base import OpCode, param

__all__ = ["OpTestDelay", "OpTestJqueue", "ALL_OPCODES", "MAX_DELAY", "MAX_REPEAT"]

#: Longest test delay, seconds (a day), and most repetitions of it.
MAX_DELAY = 86400.0
MAX_REPEAT = 10_000


@dataclass(kw_only=True)
class OpTestDelay(OpCode):
    """Sleep for a while on the master and/or on some nodes.

    ``repeat`` > 0 runs the delay that many times; ``no_locks`` false makes
    the opcode take the node locks of ``on_nodes`` (shared).
    """

    OP_DSC_FIELD = "duration"

    duration: float = param(min=0, max=MAX_DELAY, doc="seconds to sleep")
    on_master: bool = True
    on_nodes: list[str] = param([])
    on_node_uuids: list[str] | None = None
    repeat: int = param(0, min=0, max=MAX_REPEAT)
    interruptible: bool = False
    no_locks: bool = True


@dataclass(kw_only=True)
class OpTestJqueue(OpCode):
    """Write log messages and optionally fail (tests the queue itself)."""

    OP_DSC_FIELD = "fail"

    notify_waitlock: bool = False
    notify_exec: bool = False
    log_messages: list[str] = param([])
    fail: bool = False


ALL_OPCODES = (OpTestDelay, OpTestJqueue)
