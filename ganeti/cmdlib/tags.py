"""Tag LUs: get/set/delete tags of the cluster, nodes, groups, instances; search.

The object is locked (instance by name, node by UUID, group by UUID;
the cluster through an exclusive BGL) while its tags change.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from ganeti import constants, errors, locking
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.cmdlib.common import find_instance, find_node
from ganeti.cmdlib.instance_networks import find_network
from ganeti.config import ConfigWriter
from ganeti.objects import Cluster, Instance, Network, Node, NodeGroup
from ganeti.opcodes.tags import OpTagsDel, OpTagsGet, OpTagsSearch, OpTagsSet
from ganeti.utils import validation

__all__ = ["LUTagsGet", "LUTagsSet", "LUTagsDel", "LUTagsSearch", "tag_target", "TagTarget"]


#: The config objects that carry tags.
TagTarget = Cluster | Instance | Node | NodeGroup | Network


def tag_target(cfg: ConfigWriter, kind: str, name: str | None) -> TagTarget:
    """The config object holding the tags; OpPrereqError when unknown."""
    if kind == constants.TAG_CLUSTER:
        return cfg.get_cluster_info()
    if not name:
        raise errors.OpPrereqError(f"Tag kind '{kind}' needs an object name", errors.ECODE_INVAL)
    obj: Instance | Node | NodeGroup | Network | None
    if kind == constants.TAG_INSTANCE:
        obj = find_instance(cfg, name)
    elif kind == constants.TAG_NODE:
        obj = find_node(cfg, name)
    elif kind == constants.TAG_NODEGROUP:
        obj = cfg.get_nodegroup_by_name(name) or cfg.get_nodegroup(name)
    elif kind == constants.TAG_NETWORK:
        obj = find_network(cfg, name)
    else:
        raise errors.OpPrereqError(f"Tags of kind '{kind}' are not supported",
                                   errors.ECODE_INVAL)
    if obj is None:
        raise errors.OpPrereqError(f"{kind.capitalize()} '{name}' not known", errors.ECODE_NOENT)
    return obj


#: The opcodes naming one tagged object (``kind`` and ``name``).
_TagOpT = TypeVar("_TagOpT", OpTagsGet, OpTagsSet, OpTagsDel)


class _TagsLU(NoHooksLU[_TagOpT]):
    REQ_BGL = False
    SHARED = 0

    def ExpandNames(self) -> None:
        op = self.op
        obj = tag_target(self.cfg, op.kind, op.name)
        self.needed_locks = {}
        if isinstance(obj, (Cluster, Network)):     # no lock level of its own
            self.REQ_BGL = not self.SHARED
        elif isinstance(obj, Instance):
            self.needed_locks[locking.LEVEL_INSTANCE] = [obj.name]
        elif isinstance(obj, Node):
            self.needed_locks[locking.LEVEL_NODE] = [obj.uuid]
        else:
            self.needed_locks[locking.LEVEL_NODEGROUP] = [obj.uuid]
        self.share_locks = {lvl: self.SHARED for lvl in self.needed_locks}

    def CheckPrereq(self) -> None:
        self.target = tag_target(self.cfg, self.op.kind, self.op.name)


class LUTagsGet(_TagsLU[OpTagsGet]):
    """Return the tags of one object (sorted)."""

    SHARED = 1

    def ExpandNames(self) -> None:
        super().ExpandNames()
        if not self.op.use_locking:
            self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        return sorted(self.target.tags)


def _check_tags(tags: list[str]) -> None:
    for tag in tags:
        try:
            validation.check_tag(tag)
        except errors.TagError as exc:
            raise errors.OpPrereqError(f"Invalid tag {tag!r}: {exc}", errors.ECODE_INVAL) from None


class LUTagsSet(_TagsLU[OpTagsSet]):
    """Add tags to one object."""

    def CheckArguments(self) -> None:
        _check_tags(self.op.tags)

    def CheckPrereq(self) -> None:
        super().CheckPrereq()
        new = set(self.target.tags) | set(self.op.tags)
        if len(new) > constants.MAX_TAGS_PER_OBJ:
            raise errors.OpPrereqError(f"Too many tags (max {constants.MAX_TAGS_PER_OBJ})",
                                       errors.ECODE_INVAL)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        obj = self.target
        obj.tags = sorted(set(obj.tags) | set(self.op.tags))
        self.cfg.update(obj)
        return None


class LUTagsDel(_TagsLU[OpTagsDel]):
    """Remove tags (all must be present) from one object."""

    def CheckArguments(self) -> None:
        _check_tags(self.op.tags)

    def CheckPrereq(self) -> None:
        super().CheckPrereq()
        missing = sorted(set(self.op.tags) - set(self.target.tags))
        if missing:
            raise errors.OpPrereqError(f"Tag(s) {', '.join(repr(t) for t in missing)} not found",
                                       errors.ECODE_NOENT)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        obj = self.target
        obj.tags = sorted(set(obj.tags) - set(self.op.tags))
        self.cfg.update(obj)
        return None


class LUTagsSearch(NoHooksLU[OpTagsSearch]):
    """Search all tags for a regex; returns ``[[path, tag], ...]``."""

    REQ_BGL = False

    def CheckArguments(self) -> None:
        try:
            self.regex = re.compile(self.op.pattern)
        except re.error as exc:
            raise errors.OpPrereqError(f"Invalid search pattern {self.op.pattern!r}: {exc}",
                                       errors.ECODE_INVAL) from None

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        data = self.cfg.get_config_data()
        objs: list[tuple[str, Any]] = [("/cluster", data.cluster)]
        objs += [(f"/instances/{i.name}", i) for i in data.instances.values()]
        objs += [(f"/nodes/{n.name}", n) for n in data.nodes.values()]
        objs += [(f"/nodegroup/{g.name}", g) for g in data.nodegroups.values()]
        objs += [(f"/network/{n.name}", n) for n in data.networks.values()]
        result = []
        for path, obj in objs:
            for tag in sorted(obj.tags):
                if self.regex.search(tag):
                    result.append([path, tag])
        return sorted(result)
