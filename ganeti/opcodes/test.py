"""Opcodes for testing the job machinery: delays and scripted jobs."""

from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from ganeti import constants
from ganeti.opcodes.base import OpCode, param
from ganeti.private import Private

__all__ = ["OpTestDelay", "OpTestJqueue", "OpTestAllocator", "OpTestOsParams", "ALL_OPCODES",
           "MAX_DELAY", "MAX_REPEAT"]

#: Longest test delay, seconds (a day), and most repetitions of it.
MAX_DELAY = 86400.0
MAX_REPEAT = 10_000


@dataclass(kw_only=True)
class OpTestDelay(OpCode):
    """Sleep for a while on the master and/or on some nodes.

    ``repeat`` > 0 runs the delay that many times; ``no_locks`` false makes
    the opcode hold the node locks of ``on_nodes``, and the master node's
    with ``on_master`` (exclusive, as Ganeti's).
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


@dataclass(kw_only=True)
class OpTestAllocator(OpCode):
    """Build an iallocator request (doc/protocols/iallocator.md): show its input document
    (``direction`` ``in``) or run the allocator on it and show the answer (``out``).

    ``mode`` is the request type; the other fields are that request's keys
    (``name`` the instance, ``instances`` for node-evacuate, change-group and
    multi-allocate).  Changes nothing.
    """

    OP_DSC_FIELD = "iallocator"

    direction: str = param(constants.IALLOCATOR_DIR_IN, choices=constants.IALLOCATOR_DIRECTIONS)
    mode: str = param(choices=["allocate", "multi-allocate", "relocate", "node-evacuate",
                               "change-group", "allocate-secondary"])
    name: str = ""
    memory: int = param(128, min=1)
    vcpus: int = param(1, min=1)
    disks: list[dict[str, Any]] = param([])
    nics: list[dict[str, Any]] = param([])
    os: str = ""
    disk_template: str = constants.DT_DISKLESS
    tags: list[str] = param([])
    hypervisor: str | None = None
    spindle_use: int = param(1, min=0)
    group_name: str | None = None
    instances: list[Any] = param([])
    evac_mode: str = param(constants.NODE_EVAC_ALL, choices=constants.NODE_EVAC_MODES)
    target_groups: list[str] = param([])
    relocate_from: list[str] = param([])
    iallocator: str | None = None


@dataclass(kw_only=True)
class OpTestOsParams(OpCode):
    """Check that secret OS parameters reach the master (Ganeti's ``gnt-debug test-osparams``).

    The values are private (doc/protocols/opcodes.md, "Private parameters"):
    the job file holds ``<redacted>`` for each, and the LU names the keys only.
    """

    osparams_secret: dict[str, Private] | None = None


ALL_OPCODES = (OpTestDelay, OpTestJqueue, OpTestAllocator, OpTestOsParams)
