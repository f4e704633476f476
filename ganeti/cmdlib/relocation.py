"""Relocations as dependent jobs: node evacuate/migrate, change-group, group evacuate, multi-alloc.

Each LU asks the allocator (doc/protocols/iallocator.md) which moves to make and
submits its ``jobs`` through the job queue's many-jobs path: one job per
instance, later jobs depending on earlier ones by relative ids.  The
result is ``{"jobs": [[true, id] | [false, error], ...], "failed":
[[instance, reason], ...]}`` (``node-evac-res1``); the instances the
allocator could not place are in ``failed`` (and logged as warnings), the
others still move.

Instances with a non-mirrored template (``file``, ``plain``) are not sent
to the allocator: they are reported in ``failed`` with a message naming
``gnt-instance move`` and ``--with-disks``.  With ``with_disks`` (node
evacuate and node migrate), ``file`` instances are sent too (the request
carries ``with-disks``) and move by ``OP_INSTANCE_MIGRATE`` with
``with_disks``: live with their disks when they run on a hypervisor of
``constants.HTS_DISK_MIRROR``, offline copies when stopped; a running one on
another hypervisor is reported in ``failed``.  Shared-storage instances move
by migration (running) or failover (stopped); DRBD steps
(``OP_INSTANCE_REPLACE_DISKS``) are generated for allocators to use once
DRBD exists.

``plan_only`` returns ``{"plan": ...}`` (:func:`ganeti.iallocator.plan.make_plan`)
instead of submitting; ``apply_plan`` submits exactly such a plan, refused
(ECODE_STATE) when the config serial changed since it was made.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ganeti import constants, errors, opcodes
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import allocator
from ganeti.cmdlib.instance_mirror import LOCAL_TEMPLATES
from ganeti.cmdlib.base import NoHooksLU
from ganeti.cmdlib.instance import expand_instance
from ganeti.cmdlib.common import expand_node
from ganeti.iallocator import document, plan
from ganeti.iallocator.answer import Failure
from ganeti.iallocator.model import is_int_mirror, is_mirrored, not_mirrored_reason
from ganeti.objects import Instance
from ganeti.opcodes.group import OpGroupEvacuate
from ganeti.opcodes.instance import OpInstanceChangeGroup, OpInstanceCreate, OpInstanceMultiAlloc
from ganeti.opcodes.node import OpNodeEvacuate, OpNodeMigrate
from ganeti.opcodes import wire

__all__ = ["LUNodeEvacuate", "LUNodeMigrate", "LUInstanceChangeGroup", "LUGroupEvacuate",
           "LUInstanceMultiAlloc"]

_RelocOpT = TypeVar("_RelocOpT", OpNodeEvacuate, OpNodeMigrate, OpInstanceChangeGroup,
                    OpGroupEvacuate)


class _RelocationLU(NoHooksLU[_RelocOpT]):
    """Common part: pick the instances, ask the allocator, plan or submit.

    Subclasses implement :meth:`instances_to_move` and :meth:`request`, and
    may override :meth:`direct_jobs` (moves to a given node, no allocator)
    and :meth:`adjust` (rewrite the allocator's opcodes).  No locks: the
    LU reads one config snapshot and only submits jobs, which lock what they
    change.
    """

    REQ_BGL = False
    EARLY_RELEASE = True

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def instances_to_move(self) -> list[Instance]:
        """The instances concerned, in a stable order."""
        raise NotImplementedError

    def request(self, names: list[str]) -> dict[str, Any]:
        """The allocator request for the movable instances ``names``."""
        raise NotImplementedError

    def direct_jobs(self, insts: list[Instance]) -> list[list[dict[str, Any]]] | None:
        """Jobs without the allocator (a target node was given), or None."""
        return None

    def adjust(self, op: dict[str, Any]) -> dict[str, Any]:
        """Rewrite one opcode of the allocator's answer (default: unchanged)."""
        return op

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        op = self.op
        apply = getattr(op, "apply_plan", None)
        if apply is not None:
            if not isinstance(apply, dict) or (apply.get("opcode") or {}).get("OP_ID") != op.OP_ID:
                raise errors.OpPrereqError(f"The plan was not made by {op.OP_ID}",
                                           errors.ECODE_INVAL)
            jobs = plan.check_plan(apply, self.cfg.get_serial_no())
            failed = [Failure(str(f[0]), f[1]) for f in apply.get("failed") or []
                      if isinstance(f, list) and len(f) == 2]
            return self._submit(jobs, failed, feedback_fn)
        serial = self.cfg.get_serial_no()
        insts = self.instances_to_move()
        with_disks = bool(getattr(op, "with_disks", False))
        failed = [Failure(i.name, _unmovable_reason(i, with_disks))
                  for i in insts if _unmovable_reason(i, with_disks)]
        movable = [i for i in insts if not _unmovable_reason(i, with_disks)]
        request = self.request([i.name for i in movable] or [i.name for i in insts])
        doc = allocator.build_document(self, request)
        raw: list[list[dict[str, Any]]] = []
        if movable:
            direct = self.direct_jobs(movable)
            if direct is not None:
                raw = direct
            else:
                answer, _ = allocator.ask(self, getattr(op, "iallocator", None), request, doc)
                answer.require_success(allocator.allocator_name(self, op.iallocator)
                                       or "ganeti-iallocator")
                raw = [[self.adjust(o) for o in job] for job in answer.jobs]
                failed += answer.failed
        jobs = plan.answer_jobs(raw, early_release=bool(getattr(op, "early_release", False)))
        if getattr(op, "plan_only", False):
            source = opcodes.to_dict(op)
            source["plan_only"] = False
            source.pop("apply_plan", None)
            return {"plan": plan.make_plan(doc, jobs, failed, serial=serial, opcode=source)}
        return self._submit(jobs, failed, feedback_fn)

    def _submit(self, jobs: list[list[dict[str, Any]]], failed: list[Failure],
                feedback_fn: FeedbackFn) -> dict[str, Any]:
        for fail in failed:
            self.LogWarning(f"Cannot move instance {fail.instance}: {fail.reason or 'no reason'}")
        results = self.proc.submit_many_jobs(jobs) if jobs else []
        if jobs:
            feedback_fn(f"Submitted {len(jobs)} job(s) moving instances")
        return {"jobs": results, "failed": [[f.instance, f.reason] for f in failed]}


def _unmovable_reason(inst: Instance, with_disks: bool) -> str:
    """Why ``inst`` cannot be relocated here ("" when it can)."""
    if is_mirrored(inst.disk_template):
        return ""
    if not with_disks or inst.disk_template not in LOCAL_TEMPLATES:
        return not_mirrored_reason(inst.name, inst.disk_template)
    if inst.admin_state == constants.ADMINST_UP and \
            inst.hypervisor not in constants.HTS_DISK_MIRROR:
        return (f"instance {inst.name} runs on hypervisor {inst.hypervisor}, which cannot"
                " migrate it with its disks; stop it first or use 'gnt-instance move'")
    return ""


def _chain(jobs: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Make each job wait for the previous one (they share the target node)."""
    for index, job in enumerate(jobs):
        if index:
            job[0]["depends"] = [[-1, []]]
    return jobs


def _move_opcode(inst: Instance, target: str | None) -> dict[str, Any]:
    if inst.disk_template in LOCAL_TEMPLATES:     # only sent with with_disks
        op: dict[str, Any] = wire.instance_migrate(instance_name=inst.name, with_disks=True)
        if target is not None:
            op["target_node"] = target
        return op
    build = wire.instance_migrate if inst.admin_state == constants.ADMINST_UP \
        else wire.instance_failover
    op = build(instance_name=inst.name)
    if target is not None:
        op["target_node"] = target
    return op


class LUNodeEvacuate(_RelocationLU[OpNodeEvacuate]):
    """Move a node's instances (primary, secondary or all) elsewhere in its group."""

    def CheckArguments(self) -> None:
        if self.op.remote_node and self.op.iallocator:
            raise errors.OpPrereqError("Give either a remote node or an iallocator, not both",
                                       errors.ECODE_INVAL)

    def ExpandNames(self) -> None:
        node = expand_node(self.cfg, self.op.node_name)
        self.op.node_name = node.name
        self.node_uuid = node.uuid
        self.remote_name: str | None = None
        if self.op.remote_node:
            remote = expand_node(self.cfg, self.op.remote_node)
            if remote.uuid == node.uuid:
                raise errors.OpPrereqError("Can not evacuate a node onto itself",
                                           errors.ECODE_INVAL)
            self.remote_name = remote.name
        self.needed_locks = {}

    def instances_to_move(self) -> list[Instance]:
        primaries, secondaries = self.cfg.node_instances(self.node_uuid)
        wanted: list[str] = []
        if self.op.mode in (constants.NODE_EVAC_PRI, constants.NODE_EVAC_ALL):
            wanted += primaries
        if self.op.mode in (constants.NODE_EVAC_SEC, constants.NODE_EVAC_ALL):
            wanted += secondaries
        insts = [self.cfg.get_instance_info(u) for u in dict.fromkeys(wanted)]
        return sorted((i for i in insts if i is not None), key=lambda i: i.name)

    def request(self, names: list[str]) -> dict[str, Any]:
        return document.node_evacuate_request(names, self.op.mode,
                                              with_disks=self.op.with_disks)

    def direct_jobs(self, insts: list[Instance]) -> list[list[dict[str, Any]]] | None:
        if self.remote_name is None:
            return None
        jobs = []
        for inst in insts:
            if is_int_mirror(inst.disk_template):
                jobs.append([wire.instance_replace_disks(instance_name=inst.name,
                                                         mode="replace_new_secondary",
                                                         remote_node=self.remote_name)])
            else:
                jobs.append([_move_opcode(inst, self.remote_name)])
        return _chain(jobs)


class LUNodeMigrate(_RelocationLU[OpNodeMigrate]):
    """Migrate every primary instance off a node (targets from the allocator, or target_node)."""

    def CheckArguments(self) -> None:
        if self.op.mode is not None and self.op.live is not None:
            raise errors.OpPrereqError("Give either mode or live, not both", errors.ECODE_INVAL)

    def ExpandNames(self) -> None:
        node = expand_node(self.cfg, self.op.node_name)
        self.op.node_name = node.name
        self.node_uuid = node.uuid
        self.target_name = expand_node(self.cfg, self.op.target_node).name \
            if self.op.target_node else None
        self.needed_locks = {}

    def instances_to_move(self) -> list[Instance]:
        primaries, _ = self.cfg.node_instances(self.node_uuid)
        insts = [self.cfg.get_instance_info(u) for u in primaries]
        return sorted((i for i in insts if i is not None), key=lambda i: i.name)

    def request(self, names: list[str]) -> dict[str, Any]:
        return document.node_evacuate_request(names, constants.NODE_EVAC_PRI,
                                              with_disks=self.op.with_disks)

    def adjust(self, op: dict[str, Any]) -> dict[str, Any]:
        if op.get("OP_ID") not in (wire.OP_INSTANCE_MIGRATE, wire.OP_INSTANCE_FAILOVER):
            return op
        new = wire.instance_migrate(instance_name=op["instance_name"],
                                    allow_runtime_changes=self.op.allow_runtime_changes,
                                    ignore_ipolicy=self.op.ignore_ipolicy)
        inst = self.cfg.get_instance_info_by_name(op["instance_name"])
        if inst is not None and inst.admin_state != constants.ADMINST_UP:
            new["allow_failover"] = True    # a stopped instance only changes its primary node
        for key in ("target_node", "depends", "with_disks"):
            if key in op:
                new[key] = op[key]
        if self.op.mode is not None:
            new["mode"] = self.op.mode
        if self.op.live is not None:
            new["live"] = self.op.live
        return new

    def direct_jobs(self, insts: list[Instance]) -> list[list[dict[str, Any]]] | None:
        if self.target_name is None:
            return None
        return _chain([[self.adjust(_move_opcode(i, self.target_name))] for i in insts])


class LUInstanceChangeGroup(_RelocationLU[OpInstanceChangeGroup]):
    """Move one instance into another node group (any other, or one of ``target_groups``)."""

    def ExpandNames(self) -> None:
        inst = expand_instance(self.cfg, self.op.instance_name)
        self.op.instance_name = inst.name
        self.inst_uuid = inst.uuid
        self.targets = allocator.group_uuids(self, self.op.target_groups)
        node = self.cfg.get_node_info(inst.primary_node)
        if node is not None and self.targets and self.targets == [node.group]:
            raise errors.OpPrereqError(f"Instance {inst.name} is already in group"
                                       f" {self.op.target_groups[0]}", errors.ECODE_INVAL)
        self.needed_locks = {}

    def instances_to_move(self) -> list[Instance]:
        inst = self.cfg.get_instance_info(self.inst_uuid)
        if inst is None:
            raise errors.OpPrereqError(f"Instance '{self.op.instance_name}' disappeared",
                                       errors.ECODE_NOENT)
        return [inst]

    def request(self, names: list[str]) -> dict[str, Any]:
        return document.change_group_request(names, self.targets)


class LUGroupEvacuate(_RelocationLU[OpGroupEvacuate]):
    """Move every instance of a node group into other groups."""

    def ExpandNames(self) -> None:
        group = self.cfg.get_nodegroup_by_name(self.op.group_name) \
            or self.cfg.get_nodegroup(self.op.group_name)
        if group is None:
            raise errors.OpPrereqError(f"Node group '{self.op.group_name}' not known",
                                       errors.ECODE_NOENT)
        self.op.group_name = group.name
        self.group_uuid = group.uuid
        targets = allocator.group_uuids(self, self.op.target_groups)
        if group.uuid in targets:
            raise errors.OpPrereqError(f"Group {group.name} cannot be its own evacuation"
                                       " target", errors.ECODE_INVAL)
        self.targets = targets or sorted(u for u in self.cfg.get_all_nodegroups_info()
                                         if u != group.uuid)
        if not self.targets:
            raise errors.OpPrereqError("There are no other node groups to evacuate to",
                                       errors.ECODE_INVAL)
        self.needed_locks = {}

    def instances_to_move(self) -> list[Instance]:
        data = self.cfg.get_config_data()
        members = {u for u, n in data.nodes.items() if n.group == self.group_uuid}
        insts = [i for i in data.instances.values()
                 if i.primary_node in members
                 or any(n in members for n in self.cfg.get_instance_nodes(i.uuid))]
        return sorted(insts, key=lambda i: i.name)

    def request(self, names: list[str]) -> dict[str, Any]:
        return document.change_group_request(names, self.targets)


class LUInstanceMultiAlloc(NoHooksLU[OpInstanceMultiAlloc]):
    """Place many new instances with one multi-allocate request; one create job each.

    Either every instance names its primary node (no allocator) or none
    does.  Result: ``{"jobs": [...], "allocatable": [names], "failed": [names]}``.
    """

    REQ_BGL = False

    def CheckArguments(self) -> None:
        self.creates: list[OpInstanceCreate] = []
        if not self.op.instances:
            raise errors.OpPrereqError("No instances given", errors.ECODE_INVAL)
        for idx, data in enumerate(self.op.instances):
            fields = {k: v for k, v in data.items() if k != "OP_ID"}
            if data.get("OP_ID", wire.OP_INSTANCE_CREATE) != wire.OP_INSTANCE_CREATE:
                raise errors.OpPrereqError(f"Instance {idx}: not an OP_INSTANCE_CREATE",
                                           errors.ECODE_INVAL)
            try:
                create = opcodes.from_dict({**fields, "OP_ID": wire.OP_INSTANCE_CREATE})
            except errors.GanetiError as exc:
                raise errors.OpPrereqError(f"Instance {idx}: {exc}", errors.ECODE_INVAL) from None
            assert isinstance(create, OpInstanceCreate)
            self.creates.append(create)
        missing = [c.instance_name for c in self.creates if not c.disk_template]
        if missing:
            raise errors.OpPrereqError(f"No disk template given for {', '.join(missing)}",
                                       errors.ECODE_INVAL)
        with_node = [c for c in self.creates if c.pnode]
        if with_node and len(with_node) != len(self.creates):
            raise errors.OpPrereqError("Either all instances name their nodes or none does",
                                       errors.ECODE_INVAL)
        if with_node and self.op.iallocator:
            raise errors.OpPrereqError("Give nodes or an iallocator, not both",
                                       errors.ECODE_INVAL)
        names = [c.instance_name for c in self.creates]
        if len(set(names)) != len(names):
            raise errors.OpPrereqError("Instance names must be unique", errors.ECODE_INVAL)

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        cluster = self.cfg.get_cluster_info()
        creates = self.creates
        failed: list[str] = []
        if not creates[0].pnode:
            requests = [allocator.allocate_request_for(
                cluster, name=c.instance_name, disk_template=c.disk_template or "", disks=c.disks,
                nics=c.nics, beparams=c.beparams, os_name=c.os_type or "", tags=c.tags,
                hypervisor=c.hypervisor or cluster.primary_hypervisor,
                group_name=c.group_name) for c in creates]
            answer, _ = allocator.ask(self, self.op.iallocator,
                                      document.multi_allocate_request(requests))
            answer.require_success(allocator.allocator_name(self, self.op.iallocator)
                                   or "ganeti-iallocator")
            placed = dict(answer.allocated)
            failed = [c.instance_name for c in creates if c.instance_name not in placed]
            for create in creates:
                nodes = placed.get(create.instance_name)
                if nodes:
                    create.pnode = nodes[0]
                    create.snode = nodes[1] if len(nodes) > 1 else None
            creates = [c for c in creates if c.pnode]
        for name in failed:
            self.LogWarning(f"The allocator could not place instance {name}")
        jobs = [[opcodes.to_dict(c)] for c in creates]
        results = self.proc.submit_many_jobs(jobs) if jobs else []
        return {"jobs": results, "allocatable": [c.instance_name for c in creates],
                "failed": failed}
