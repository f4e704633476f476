"""Node opcodes: add, remove, modify, power-cycle, out-of-band commands, the HA fence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti import constants
from ganeti.opcodes.base import OpCode, param

__all__ = ["OpNodeAdd", "OpNodeRemove", "OpNodeSetParams", "OpNodePowercycle", "OpNodeEvacuate",
           "OpNodeMigrate", "OpOobCommand", "OpNodeHaFence", "OpNodeHaReport", "HA_FENCES",
           "ALL_OPCODES"]

#: the fences of :class:`OpNodeHaFence`: out-of-band power-off, the self-fence lease
HA_FENCES = ("oob", "lease")


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


@dataclass(kw_only=True)
class OpOobCommand(OpCode):
    """Run the out-of-band program of nodes (default: all) and check its answer.

    Result: per node, sorted by name, ``[[RS_NORMAL, name], [status, data]]``
    (doc/oob.md).
    """

    node_names: list[str] = param([], doc="nodes to run the command against (default: all)")
    node_uuids: list[str] | None = None
    command: str = param(choices=constants.OOB_COMMANDS, doc="the out-of-band command")
    timeout: int = param(constants.OOB_TIMEOUT, min=1,
                         doc="seconds before the out-of-band program is killed")
    ignore_status: bool = param(False, doc="power off nodes not marked offline")
    force_master: bool = param(False, doc="allow power-off and power-cycle of the master"
                                          " (not in Ganeti 3.0, doc/compat.md)")
    power_delay: float = param(constants.OOB_POWER_DELAY, min=0,
                               doc="seconds to wait between powering on two nodes")


#: The relocation opcodes' plan fields (doc/protocols/iallocator.md, "Plans"):
#: ``plan_only`` returns the job graph instead of submitting it;
#: ``apply_plan`` submits exactly a plan made by ``plan_only``.
PLAN_DOC = "return the plan (jobs, moves, N+1 state) instead of submitting jobs"
APPLY_DOC = "submit exactly this plan (refused when the config serial changed since)"
WITH_DISKS_DOC = ("also move instances on local (file) disks by copying the disks: live with"
                  " the running ones (kvm), offline with the stopped ones (doc/kvm.md)")


@dataclass(kw_only=True)
class OpNodeEvacuate(OpCode):
    """Move the instances off a node; result ``{"jobs": [[ok, id|error], ...], ...}``."""

    OP_DSC_FIELD = "node_name"

    node_name: str
    node_uuid: str | None = None
    mode: str = param(constants.NODE_EVAC_ALL, choices=constants.NODE_EVAC_MODES)
    remote_node: str | None = None
    iallocator: str | None = None
    early_release: bool = False
    ignore_soft_errors: bool = False
    with_disks: bool = param(False, doc=WITH_DISKS_DOC)
    plan_only: bool = param(False, doc=PLAN_DOC)
    apply_plan: dict[str, Any] | None = param(None, doc=APPLY_DOC)


@dataclass(kw_only=True)
class OpNodeMigrate(OpCode):
    """Live-migrate the primary instances off a node (one job each); result as evacuate."""

    OP_DSC_FIELD = "node_name"

    node_name: str
    node_uuid: str | None = None
    mode: str | None = param(None, choices=sorted(constants.HT_MIGRATION_MODES))
    live: bool | None = None
    target_node: str | None = None
    iallocator: str | None = None
    allow_runtime_changes: bool = True
    ignore_ipolicy: bool = False
    with_disks: bool = param(False, doc=WITH_DISKS_DOC)


@dataclass(kw_only=True)
class OpNodeHaFence(OpCode):
    """Fence a node node loss recovery declared dead; result: the fence and its confirmation.

    Marks it offline, then powers it off out of band or waits its self-fence
    lease out (doc/ha.md, "Node loss recovery").
    """

    OP_DSC_FIELD = "node_name"

    node_name: str
    node_uuid: str | None = None
    fence: str = param(choices=HA_FENCES, doc="oob: power it off with its oob_program;"
                       " lease: wait lease_wait seconds for its self-fence lease to run out")
    lease_wait: float = param(0.0, min=0, max=86400,
                              doc="seconds, from the start of the opcode, before the lease"
                                  " fence is confirmed")
    messages: list[str] = param([], doc="lines written to the job log first (the verdict)")
    timeout: int = param(constants.OOB_TIMEOUT, min=1,
                         doc="seconds before the out-of-band program is killed")


@dataclass(kw_only=True)
class OpNodeHaReport(OpCode):
    """Write node loss recovery's lines about a dead node to the job log (doc/ha.md)."""

    OP_DSC_FIELD = "node_name"

    node_name: str
    messages: list[str] = param([], doc="the lines: the verdict, the fence, the plan")


ALL_OPCODES = (OpNodeAdd, OpNodeRemove, OpNodeSetParams, OpNodePowercycle, OpNodeEvacuate,
               OpNodeMigrate, OpOobCommand, OpNodeHaFence, OpNodeHaReport)
