"""Node group logical units (add, remove, rename, assign nodes) and the ``group`` resource."""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, locking, parameters, query
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.common import cluster_hooks_nodes, expand_group, expand_node, select_named
from ganeti.config import ConfigWriter
from ganeti.context import MasterContext
from ganeti.objects import NodeGroup
from ganeti.opcodes.group import OpGroupAdd, OpGroupAssignNodes, OpGroupRemove, OpGroupRename
from ganeti.utils import validation

__all__ = ["LUGroupAdd", "LUGroupRemove", "LUGroupRename", "LUGroupAssignNodes",
           "GROUP_FIELDS", "collect_groups"]


class LUGroupAdd(LogicalUnit[OpGroupAdd]):
    """Add a node group."""

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

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.op.group_name, "GROUP_NAME": self.op.group_name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        group = NodeGroup(name=self.op.group_name,
                          alloc_policy=self.op.alloc_policy or constants.ALLOC_POLICY_PREFERRED,
                          ndparams=self.ndparams, diskparams=self.diskparams,
                          ipolicy=dict(self.op.ipolicy or {}))
        self.cfg.add_nodegroup(group)
        if self.glm is not None:
            self.glm.add(locking.LEVEL_NODEGROUP, [group.uuid])
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


# --- query resource ----------------------------------------------------------------

class GroupQueryData:
    """Members and instances per group, computed once per query."""

    def __init__(self, cfg: ConfigWriter) -> None:
        data = cfg.get_config_data()
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
                   lambda ctx, g: dict(g.ndparams)),
    query.FieldDef("diskparams", "DiskParameters", constants.QFT_OTHER, "Disk parameters",
                   lambda ctx, g: dict(g.diskparams)),
    query.FieldDef("ipolicy", "InstancePolicy", constants.QFT_OTHER, "Instance policy",
                   lambda ctx, g: dict(g.ipolicy)),
    query.FieldDef("networks", "Networks", constants.QFT_OTHER, "Connected networks",
                   lambda ctx, g: sorted(g.networks)),
    query.tags_field(), query.uuid_field("Group"), query.serial_no_field("Group"),
    *query.timestamp_fields("Group"),
])


def collect_groups(context: MasterContext, qfilter: Any, needs: set[str]) -> tuple[list[Any], Any]:
    """The ``group`` resource; unknown explicitly named groups raise ECODE_NOENT."""
    cfg = context.require_cfg()
    groups = select_named(cfg.get_all_nodegroups_info().values(),
                          query.requested_names(qfilter, "name"), "Node group(s)")
    return groups, GroupQueryData(cfg)
