"""Tag LUs: get/set/delete tags of the cluster, nodes, groups, instances; search.

The object is locked (instance by name, node by UUID, group by UUID;
the cluster through an exclusive BGL) while its tags change.
"""

from __future__ import annotations

import re
from typing import Any

from ganeti import constants, errors, locking
from ganeti.cmdlib.base import NoHooksLU
from ganeti.utils import validation

__all__ = ["LUTagsGet", "LUTagsSet", "LUTagsDel", "LUTagsSearch", "tag_target"]


def tag_target(cfg: Any, kind: str, name: str | None) -> Any:
    """The config object holding the tags; OpPrereqError when unknown."""
    if kind == constants.TAG_CLUSTER:
        return cfg.get_cluster_info()
    if not name:
        raise errors.OpPrereqError(f"Tag kind '{kind}' needs an object name", errors.ECODE_INVAL)
    if kind == constants.TAG_INSTANCE:
        obj = cfg.get_instance_info_by_name(name)
    elif kind == constants.TAG_NODE:
        obj = cfg.get_node_info_by_name(name) or cfg.get_node_info(name)
    elif kind == constants.TAG_NODEGROUP:
        obj = cfg.get_nodegroup_by_name(name) or cfg.get_nodegroup(name)
    else:
        raise errors.OpPrereqError(f"Tags of kind '{kind}' are not supported",
                                   errors.ECODE_INVAL)
    if obj is None:
        raise errors.OpPrereqError(f"{kind.capitalize()} '{name}' not known", errors.ECODE_NOENT)
    return obj


class _TagsLU(NoHooksLU):
    REQ_BGL = False
    SHARED = 0

    def ExpandNames(self) -> None:
        op = self.op
        obj = tag_target(self.cfg, op.kind, op.name)
        self.needed_locks = {}
        if op.kind == constants.TAG_CLUSTER:
            self.REQ_BGL = not self.SHARED  # type: ignore[misc]
        elif op.kind == constants.TAG_INSTANCE:
            self.needed_locks[locking.LEVEL_INSTANCE] = [obj.name]
        elif op.kind == constants.TAG_NODE:
            self.needed_locks[locking.LEVEL_NODE] = [obj.uuid]
        elif op.kind == constants.TAG_NODEGROUP:
            self.needed_locks[locking.LEVEL_NODEGROUP] = [obj.uuid]
        self.share_locks = {lvl: self.SHARED for lvl in self.needed_locks}

    def CheckPrereq(self) -> None:
        self.target = tag_target(self.cfg, self.op.kind, self.op.name)


class LUTagsGet(_TagsLU):
    """Return the tags of one object (sorted)."""

    SHARED = 1

    def ExpandNames(self) -> None:
        super().ExpandNames()
        if not self.op.use_locking:
            self.needed_locks = {}

    def Exec(self, feedback_fn: Any) -> Any:
        return sorted(self.target.tags)


def _check_tags(tags: list[str]) -> None:
    for tag in tags:
        try:
            validation.check_tag(tag)
        except errors.TagError as exc:
            raise errors.OpPrereqError(f"Invalid tag {tag!r}: {exc}", errors.ECODE_INVAL) from None


class LUTagsSet(_TagsLU):
    """Add tags to one object."""

    def CheckArguments(self) -> None:
        _check_tags(self.op.tags)

    def CheckPrereq(self) -> None:
        super().CheckPrereq()
        new = set(self.target.tags) | set(self.op.tags)
        if len(new) > constants.MAX_TAGS_PER_OBJ:
            raise errors.OpPrereqError(f"Too many tags (max {constants.MAX_TAGS_PER_OBJ})",
                                       errors.ECODE_INVAL)

    def Exec(self, feedback_fn: Any) -> Any:
        obj = self.target
        obj.tags = sorted(set(obj.tags) | set(self.op.tags))
        self.cfg.update(obj)
        return None


class LUTagsDel(_TagsLU):
    """Remove tags (all must be present) from one object."""

    def CheckArguments(self) -> None:
        _check_tags(self.op.tags)

    def CheckPrereq(self) -> None:
        super().CheckPrereq()
        missing = sorted(set(self.op.tags) - set(self.target.tags))
        if missing:
            raise errors.OpPrereqError(f"Tag(s) {', '.join(repr(t) for t in missing)} not found",
                                       errors.ECODE_NOENT)

    def Exec(self, feedback_fn: Any) -> Any:
        obj = self.target
        obj.tags = sorted(set(obj.tags) - set(self.op.tags))
        self.cfg.update(obj)
        return None


class LUTagsSearch(NoHooksLU):
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

    def Exec(self, feedback_fn: Any) -> Any:
        data = self.cfg.get_config_data()
        objs: list[tuple[str, Any]] = [("/cluster", data.cluster)]
        objs += [(f"/instances/{i.name}", i) for i in data.instances.values()]
        objs += [(f"/nodes/{n.name}", n) for n in data.nodes.values()]
        objs += [(f"/nodegroup/{g.name}", g) for g in data.nodegroups.values()]
        result = []
        for path, obj in objs:
            for tag in sorted(obj.tags):
                if self.regex.search(tag):
                    result.append([path, tag])
        return sorted(result)
