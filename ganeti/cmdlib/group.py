"""Node group logical units (add, remove, rename, assign nodes, set parameters, verify
disks) and the ``group`` resource."""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, ipolicy, locking, parameters, query
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import drbd, policy
from ganeti.cmdlib import instance_communication as communication
from ganeti.cmdlib.instance_networks import find_network
from ganeti.cmdlib.base import LogicalUnit, NoHooksLU
from ganeti.cmdlib.common import cluster_hooks_nodes, expand_group, expand_node, select_named
from ganeti.config import ConfigReader
from ganeti.context import MasterContext
from ganeti.objects import Disk, Instance, NodeGroup
from ganeti.opcodes.group import (OpGroupAdd, OpGroupAssignNodes, OpGroupRemove, OpGroupRename,
                                  OpGroupSetParams, OpGroupVerifyDisks)
from ganeti.utils import validation

__all__ = ["LUGroupAdd", "LUGroupRemove", "LUGroupRename", "LUGroupAssignNodes",
           "LUGroupSetParams", "LUGroupVerifyDisks", "GROUP_FIELDS", "collect_groups", "disks_should_be_active"]

_MIB = 1024 * 1024


class LUGroupAdd(LogicalUnit[OpGroupAdd]):
    """Add a node group; connected to the instance communication network, if the
    cluster has one, by a follow-up job (result ``{"jobs": ...}``)."""

    HPATH = "group-add"
    HTYPE = constants.HTYPE_GROUP

    def CheckArguments(self) -> None:
        validation.check_hostname(self.op.group_name, "group name")

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        if self.cfg.get_nodegroup_by_name(self.op.group_name) is not None:
            raise errors.OpPrereqError(f"Desired group name '{self.op.group_name}' already"
                                       " exists as a node group", errors.ECODE_EXISTS)
        self.ndparams = parameters.check_params("nd", self.op.ndparams)
        self.diskparams = {t: parameters.check_params("disk", v, template=t)
                           for t, v in (self.op.diskparams or {}).items()}
        self.ipolicy: dict[str, Any] = {}
        if self.op.ipolicy:
            self.ipolicy, _ = policy.group_policy_change(self.cfg, NodeGroup(), self.op.ipolicy)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.op.group_name, "GROUP_NAME": self.op.group_name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        group = NodeGroup(name=self.op.group_name,
                          alloc_policy=self.op.alloc_policy or constants.ALLOC_POLICY_PREFERRED,
                          ndparams=self.ndparams, diskparams=self.diskparams,
                          ipolicy=self.ipolicy)
        self.cfg.add_nodegroup(group)
        if self.glm is not None:
            self.glm.add(locking.LEVEL_NODEGROUP, [group.uuid])
        # as Ganeti: a follow-up job connects the instance communication network
        network = self.cfg.get_cluster_info().instance_communication_network
        if network and find_network(self.cfg, network) is not None:
            return {"jobs": self.proc.submit_many_jobs(communication.one_job(
                [communication.connect_op(group.uuid, network)]))}
        return None


class LUGroupRemove(LogicalUnit[OpGroupRemove]):
    """Remove an empty node group (not the last one)."""

    HPATH = "group-remove"
    HTYPE = constants.HTYPE_GROUP

    def ExpandNames(self) -> None:
        self.group = expand_group(self.cfg, self.op.group_name)
        self.needed_locks = {locking.LEVEL_NODEGROUP: [self.group.uuid]}

    def CheckPrereq(self) -> None:
        members = [n.name for n in self.cfg.get_all_nodes_info().values()
                   if n.group == self.group.uuid]
        if members:
            raise errors.OpPrereqError(f"Group '{self.group.name}' not empty, has the"
                                       f" following nodes: {', '.join(sorted(members))}",
                                       errors.ECODE_STATE)
        if len(self.cfg.get_all_nodegroups_info()) == 1:
            raise errors.OpPrereqError("Cannot remove the last node group", errors.ECODE_STATE)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.group.name, "GROUP_NAME": self.group.name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        self.cfg.remove_nodegroup(self.group.uuid)
        if self.glm is not None:
            self.glm.remove(locking.LEVEL_NODEGROUP, [self.group.uuid])
        return None


class LUGroupRename(LogicalUnit[OpGroupRename]):
    """Rename a node group; returns the new name."""

    HPATH = "group-rename"
    HTYPE = constants.HTYPE_GROUP

    def ExpandNames(self) -> None:
        self.group = expand_group(self.cfg, self.op.group_name)
        self.needed_locks = {locking.LEVEL_NODEGROUP: [self.group.uuid]}

    def CheckPrereq(self) -> None:
        validation.check_hostname(self.op.new_name, "group name")
        if self.cfg.get_nodegroup_by_name(self.op.new_name) is not None:
            raise errors.OpPrereqError(f"Desired new name '{self.op.new_name}' clashes with"
                                       " existing node group", errors.ECODE_EXISTS)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.group.name, "OLD_NAME": self.group.name,
                "NEW_NAME": self.op.new_name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        self.group.name = self.op.new_name
        try:
            self.cfg.update(self.group)
        except errors.ConfigurationError as exc:
            raise errors.OpExecError(str(exc)) from exc
        return self.op.new_name


class LUGroupAssignNodes(LogicalUnit[OpGroupAssignNodes]):
    """Move nodes into a group (refused for nodes with instances unless forced)."""

    HPATH = "group-modify"
    HTYPE = constants.HTYPE_GROUP

    def ExpandNames(self) -> None:
        self.group = expand_group(self.cfg, self.op.group_name)
        self.nodes = [expand_node(self.cfg, name) for name in self.op.nodes]
        self.needed_locks = {locking.LEVEL_NODEGROUP: locking.ALL_SET,
                             locking.LEVEL_NODE: [n.uuid for n in self.nodes]}

    def CheckPrereq(self) -> None:
        if self.op.force:
            return
        for node in self.nodes:
            primary, secondary = self.cfg.node_instances(node.uuid)
            if secondary and node.group != self.group.uuid:
                raise errors.OpPrereqError(f"Node {node.name} has instances spanning node"
                                           " groups; use force to move it anyway",
                                           errors.ECODE_STATE)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.group.name, "GROUP_NAME": self.group.name,
                "NODES": " ".join(n.name for n in self.nodes)}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        with self.cfg.batch():
            for node in self.nodes:
                if node.group != self.group.uuid:
                    node.group = self.group.uuid
                    self.cfg.update(node)
        return None


class LUGroupSetParams(LogicalUnit[OpGroupSetParams]):
    """Change a group's allocation policy, node/disk parameters and instance policy.

    Everything is checked before anything changes.  An instance policy
    change that makes instances of the group violate it is made anyway,
    with a warning naming them (as Ganeti does).  Returns ``[[param, new
    value], ...]``.
    """

    HPATH = "group-modify"
    HTYPE = constants.HTYPE_GROUP
    REQ_BGL = False

    def CheckArguments(self) -> None:
        op = self.op
        if all(v is None for v in (op.alloc_policy, op.ndparams, op.diskparams, op.ipolicy,
                                   op.hv_state, op.disk_state)):
            raise errors.OpPrereqError("Please pass at least one modification",
                                       errors.ECODE_INVAL)

    def ExpandNames(self) -> None:
        self.group = expand_group(self.cfg, self.op.group_name)
        self.needed_locks = {locking.LEVEL_NODEGROUP: [self.group.uuid]}

    def CheckPrereq(self) -> None:
        op, group = self.op, self.group
        self.new: dict[str, Any] = {}
        if op.alloc_policy is not None:
            self.new["alloc_policy"] = op.alloc_policy
        if op.ndparams is not None:
            checked = parameters.check_params("nd", op.ndparams, allow_default=True)
            self.new["ndparams"] = parameters.update_params(group.ndparams, checked)
        if op.diskparams is not None:
            diskparams = {t: dict(v) for t, v in group.diskparams.items()}
            for template, values in op.diskparams.items():
                checked = parameters.check_params("disk", values, template=template,
                                                  allow_default=True)
                diskparams[template] = parameters.update_params(diskparams.get(template),
                                                                checked)
                if not diskparams[template]:
                    del diskparams[template]
            self.new["diskparams"] = diskparams
        if op.ipolicy is not None:
            self.new["ipolicy"], broken = policy.group_policy_change(self.cfg, group,
                                                                     op.ipolicy)
            if broken:
                self.LogWarning("After the ipolicy change the following instances violate"
                                f" it: {', '.join(broken)}")

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.group.name, "GROUP_NAME": self.group.name,
                "NEW_ALLOC_POLICY": self.op.alloc_policy or ""}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        changes: list[list[Any]] = []
        for name, value in self.new.items():
            setattr(self.group, name, value)
            changes.append([name, value])
        if self.op.hv_state is not None or self.op.disk_state is not None:
            self.LogWarning("hv_state and disk_state are not kept; ignored")
        if self.new:
            self.cfg.update(self.group)
        return changes


def disks_should_be_active(inst: Instance) -> bool:
    """Whether the disks of ``inst`` should be assembled on its primary node.

    They should when the instance should run (admin state up) or when its
    disks were activated (``disks_active``, e.g. ``gnt-instance
    activate-disks`` on a stopped instance).
    """
    return inst.admin_state == constants.ADMINST_UP or inst.disks_active


class LUGroupVerifyDisks(NoHooksLU[OpGroupVerifyDisks]):
    """Check the disk files of a group's instances on their nodes.

    One ``blockdev_getstatus`` RPC per node of the group (offline nodes are
    skipped) reports each disk's size and whether it is assembled.  The
    result is Ganeti's triple (doc/protocols/opcodes.md, "Verify disks"):
    ``[{node: error}, [instances with inactive disks], {instance: [[node,
    disk index], ...]}]``.  An instance is listed with inactive disks when
    a disk of it that exists is not assembled on the primary node although
    it should be (:func:`disks_should_be_active`).  A disk whose file has
    another size than the configuration says is reported as a warning in
    the job log.  Nothing is changed: the caller activates the disks.

    Locking: the group, its nodes and the instances whose primary node is
    in the group, all shared; the instance list is computed before its
    locks are taken, so an instance that moves in meanwhile is checked by
    the next run.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.group = expand_group(self.cfg, self.op.group_name)
        self.needed_locks = {locking.LEVEL_INSTANCE: [],
                             locking.LEVEL_NODEGROUP: [self.group.uuid],
                             locking.LEVEL_NODE: []}
        self.share_locks = {locking.LEVEL_INSTANCE: 1, locking.LEVEL_NODEGROUP: 1,
                            locking.LEVEL_NODE: 1}

    def _group_nodes(self) -> set[str]:
        return {n.uuid for n in self.cfg.get_all_nodes_info().values()
                if n.group == self.group.uuid}

    def DeclareLocks(self, level: int) -> None:
        if level == locking.LEVEL_INSTANCE:
            members = self._group_nodes()
            self.needed_locks[level] = sorted(
                i.name for i in self.cfg.get_all_instances_info().values()
                if i.primary_node in members)
        elif level == locking.LEVEL_NODE:
            nodes = self._group_nodes()
            for inst in self._instances():
                nodes.update(self.cfg.get_instance_nodes(inst.uuid))
            self.needed_locks[level] = sorted(nodes)

    def _instances(self) -> list[Instance]:
        """The locked instances still in the group, with disks, by name."""
        members = self._group_nodes()
        locked = self.owned_locks(locking.LEVEL_INSTANCE)
        found = []
        for inst in self.cfg.get_all_instances_info().values():
            if (inst.primary_node in members and inst.disk_template != constants.DT_DISKLESS
                    and (self.glm is None or inst.name in locked)):
                found.append(inst)
        return sorted(found, key=lambda i: i.name)

    def _targets(self) -> dict[str, list[tuple[Instance, int, Disk]]]:
        """``{node name: [(instance, disk index, disk), ...]}`` for the online nodes."""
        targets: dict[str, list[tuple[Instance, int, Disk]]] = {}
        for inst in self._instances():
            for idx, disk in enumerate(self.cfg.get_instance_disks(inst.uuid)):
                if disk.dev_type == constants.DT_DISKLESS:
                    continue
                for node_uuid in disk.nodes or [inst.primary_node]:
                    node = self.cfg.get_node_info(node_uuid)
                    if node is not None and not node.offline:
                        targets.setdefault(node.name, []).append((inst, idx, disk))
        return targets

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        targets = self._targets()
        node_errors: dict[str, str] = {}
        inactive: set[str] = set()
        missing: dict[str, list[list[Any]]] = {}
        if not targets:
            return [node_errors, [], missing]
        disks: dict[str, list[Any]] = {
            name: [[drbd.rpc_disk(disk, self.cfg), inst.name, idx] for inst, idx, disk in entries]
            for name, entries in targets.items()}
        results = self.require_rpc().per_node(disks, lambda rpc, node: rpc.call_blockdev_getstatus(
            node, disks=disks[node]))
        for node_name in sorted(targets):
            entries = targets[node_name]
            res = results.get(node_name)
            if res is None or res.failed:
                msg = res.fail_msg if res is not None else "no answer"
                if res is not None and res.offline:
                    continue
                self.LogWarning(f"Error gathering disk data on node {node_name}: {msg}")
                node_errors[node_name] = str(msg)
                continue
            payload = res.payload
            if not isinstance(payload, list) or len(payload) != len(entries):
                node_errors[node_name] = f"invalid blockdev_getstatus answer: {payload!r}"
                continue
            for (inst, idx, disk), status in zip(entries, payload):
                if status is None:
                    self.LogWarning(f"Disk {idx} of instance {inst.name} is missing on node"
                                    f" {node_name}")
                    missing.setdefault(inst.name, []).append([node_name, idx])
                    continue
                size, active = status
                if size != disk.size * _MIB:
                    self.LogWarning(f"Disk {idx} of instance {inst.name} on node {node_name}"
                                    f" has the wrong size: {size} bytes, expected"
                                    f" {disk.size} MiB ({disk.size * _MIB} bytes)")
                primary = self.cfg.get_node_info(inst.primary_node)
                if (not active and primary is not None and primary.name == node_name
                        and disks_should_be_active(inst)):
                    inactive.add(inst.name)
        return [node_errors, sorted(inactive),
                {name: sorted(missing[name]) for name in sorted(missing)}]


# --- query resource ----------------------------------------------------------------

class GroupQueryData:
    """Members and instances per group, computed once per query."""

    def __init__(self, cfg: ConfigReader) -> None:
        data = cfg.get_config_data()
        self.cluster = data.cluster
        self.nodes: dict[str, list[str]] = {u: [] for u in data.nodegroups}
        node_group = {}
        for node in data.nodes.values():
            self.nodes.setdefault(node.group, []).append(node.name)
            node_group[node.uuid] = node.group
        self.pinst: dict[str, list[str]] = {u: [] for u in data.nodegroups}
        for inst in data.instances.values():
            group = node_group.get(inst.primary_node)
            if group is not None:
                self.pinst.setdefault(group, []).append(inst.name)


GROUP_FIELDS = query.make_table([
    query.simple_field("name", "Group", constants.QFT_TEXT, "Group name", "name"),
    query.simple_field("alloc_policy", "AllocPolicy", constants.QFT_TEXT,
                       "Allocation policy for group", "alloc_policy"),
    query.FieldDef("node_cnt", "Nodes", constants.QFT_NUMBER, "Number of nodes",
                   lambda ctx, g: len(ctx.nodes.get(g.uuid, []))),
    query.FieldDef("node_list", "NodeList", constants.QFT_OTHER, "List of nodes",
                   lambda ctx, g: sorted(ctx.nodes.get(g.uuid, []))),
    query.FieldDef("pinst_cnt", "Instances", constants.QFT_NUMBER,
                   "Number of primary instances",
                   lambda ctx, g: len(ctx.pinst.get(g.uuid, []))),
    query.FieldDef("pinst_list", "InstanceList", constants.QFT_OTHER,
                   "List of primary instances",
                   lambda ctx, g: sorted(ctx.pinst.get(g.uuid, []))),
    query.FieldDef("ndparams", "NDParams", constants.QFT_OTHER, "Node parameters",
                   lambda ctx, g: parameters.fill_ndparams(ctx.cluster, g)),
    query.FieldDef("custom_ndparams", "CustomNDParams", constants.QFT_OTHER,
                   "Custom node parameters", lambda ctx, g: dict(g.ndparams)),
    query.FieldDef("diskparams", "DiskParameters", constants.QFT_OTHER, "Disk parameters",
                   lambda ctx, g: {t: parameters.fill_diskparams(ctx.cluster, t, g)
                                   for t in sorted(ctx.cluster.diskparams.keys()
                                                   | g.diskparams.keys())}),
    query.FieldDef("custom_diskparams", "CustomDiskParameters", constants.QFT_OTHER,
                   "Custom disk parameters", lambda ctx, g: {t: dict(v) for t, v in
                                                            g.diskparams.items()}),
    query.FieldDef("ipolicy", "InstancePolicy", constants.QFT_OTHER,
                   "Instance policy limitations (merged)",
                   lambda ctx, g: ipolicy.fill_ipolicy(ctx.cluster.ipolicy, g.ipolicy)),
    query.FieldDef("custom_ipolicy", "CustomInstancePolicy", constants.QFT_OTHER,
                   "Custom instance policy limitations",
                   lambda ctx, g: dict(g.ipolicy)),
    # ours (Ganeti 3.0 has networks only as gnt-network's): unlisted
    query.FieldDef("networks", "Networks", constants.QFT_OTHER, "Connected networks",
                   lambda ctx, g: sorted(g.networks), listed=False),
    query.tags_field(), query.uuid_field("Group"), query.serial_no_field("Group"),
    *query.timestamp_fields("Group"),
])


def collect_groups(context: MasterContext, qfilter: Any, needs: set[str]) -> tuple[list[Any], Any]:
    """The ``group`` resource; unknown explicitly named groups raise ECODE_NOENT."""
    cfg = context.committed_cfg()
    groups = select_named(cfg.get_all_nodegroups_info().values(),
                          query.requested_names(qfilter, "name"), "Node group(s)")
    return groups, GroupQueryData(cfg)
