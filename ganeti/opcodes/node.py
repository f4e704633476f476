"""Node opcodes: add, remove, modify, power-cycle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti.opcodes.base import OpCode

__all__ = ["OpNodeAdd", "OpNodeRemove", "OpNodeSetParams", "OpNodePowercycle", "ALL_OPCODES"]


@dataclass(kw_only=True)
class OpNodeAdd(OpCode):
    """Add a node whose node daemon already runs (set up by the CLI over SSH).

    ``readd`` re-adds a node already in the configuration (its UUID is kept).
    """

    OP_DSC_FIELD = "node_name"

    node_name: str
    primary_ip: str | None = None
    secondary_ip: str | None = None
    readd: bool = False
    group: str | None = None
    master_capable: bool | None = None
    vm_capable: bool | None = None
    ndparams: dict[str, Any] | None = None
    node_setup: bool = False
    hv_state: dict[str, Any] | None = None
    disk_state: dict[str, Any] | None = None


@dataclass(kw_only=True)
class OpNodeRemove(OpCode):
    """Remove a node (not the master, not one with instances)."""

    OP_DSC_FIELD = "node_name"

    node_name: str
    node_uuid: str | None = None


@dataclass(kw_only=True)
class OpNodeSetParams(OpCode):
    """Change a node's flags; result: list of ``[param, new value]``."""

    OP_DSC_FIELD = "node_name"

    node_name: str
    node_uuid: str | None = None
    force: bool = False
    master_candidate: bool | None = None
    offline: bool | None = None
    drained: bool | None = None
    auto_promote: bool = False
    master_capable: bool | None = None
    vm_capable: bool | None = None
    secondary_ip: str | None = None
    ndparams: dict[str, Any] | None = None
    powered: bool | None = None


@dataclass(kw_only=True)
class OpNodePowercycle(OpCode):
    """Hard-reset a node through its hypervisor (``force`` is needed for the master)."""

    OP_DSC_FIELD = "node_name"

    node_name: str
    node_uuid: str | None = None
    force: bool = False


ALL_OPCODES = (OpNodeAdd, OpNodeRemove, OpNodeSetParams, OpNodePowercycle)
