"""Node group opcodes: add, remove, rename, assign nodes, set parameters, verify disks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti import constants
from ganeti.opcodes.base import OpCode, param
from ganeti.opcodes.node import APPLY_DOC, PLAN_DOC

__all__ = ["OpGroupAdd", "OpGroupRemove", "OpGroupRename", "OpGroupAssignNodes",
           "OpGroupSetParams", "OpGroupVerifyDisks", "OpGroupEvacuate", "ALL_OPCODES"]


@dataclass(kw_only=True)
class OpGroupParamsBase(OpCode):
    """What a node group is made with (OpGroupAdd) and changed by (OpGroupSetParams)."""

    OP_DSC_FIELD = "group_name"

    group_name: str
    alloc_policy: str | None = param(None, choices=constants.VALID_ALLOC_POLICIES)
    ndparams: dict[str, Any] | None = None
    diskparams: dict[str, dict[str, Any]] | None = None
    ipolicy: dict[str, Any] | None = None
    hv_state: dict[str, Any] | None = None
    disk_state: dict[str, Any] | None = None


@dataclass(kw_only=True)
class OpGroupAdd(OpGroupParamsBase):
    """Add a node group."""


@dataclass(kw_only=True)
class OpGroupRemove(OpCode):
    """Remove an empty node group."""

    OP_DSC_FIELD = "group_name"

    group_name: str


@dataclass(kw_only=True)
class OpGroupRename(OpCode):
    """Rename a node group."""

    OP_DSC_FIELD = "group_name"

    group_name: str
    new_name: str


@dataclass(kw_only=True)
class OpGroupAssignNodes(OpCode):
    """Move nodes into a node group."""

    OP_DSC_FIELD = "group_name"

    group_name: str
    nodes: list[str]
    force: bool = False


@dataclass(kw_only=True)
class OpGroupSetParams(OpGroupParamsBase):
    """Change a node group's allocation policy and parameters.

    ``ipolicy`` is a change set (doc/ipolicy.md): ``"default"`` resets a
    key to the cluster's value.  Result: ``[[param, new value], ...]``.
    """


@dataclass(kw_only=True)
class OpGroupVerifyDisks(OpCode):
    """Check the disks of a group's instances (doc/protocols/opcodes.md, "Verify disks").

    Result: ``[{node: error}, [instance with inactive disks, ...],
    {instance: [[node, disk index], ...]}]`` (missing disks).
    """

    OP_DSC_FIELD = "group_name"

    group_name: str


@dataclass(kw_only=True)
class OpGroupEvacuate(OpCode):
    """Move every instance of a group to other groups; result as OP_NODE_EVACUATE."""

    OP_DSC_FIELD = "group_name"

    group_name: str
    target_groups: list[str] = param([])
    iallocator: str | None = None
    early_release: bool = False
    sequential: bool = False
    force_failover: bool = False
    plan_only: bool = param(False, doc=PLAN_DOC)
    apply_plan: dict[str, Any] | None = param(None, doc=APPLY_DOC)


ALL_OPCODES = (OpGroupAdd, OpGroupRemove, OpGroupRename, OpGroupAssignNodes, OpGroupSetParams,
               OpGroupVerifyDisks, OpGroupEvacuate)
