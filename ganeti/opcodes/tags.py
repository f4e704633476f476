"""Tag opcodes: get, set, delete and search tags of the cluster and its objects."""

from __future__ import annotations

from dataclasses import dataclass

from ganeti import constants
from ganeti.opcodes.base import OpCode, param

__all__ = ["OpTagsGet", "OpTagsSet", "OpTagsDel", "OpTagsSearch", "ALL_OPCODES"]

_KINDS = sorted(constants.VALID_TAG_TYPES)


@dataclass(kw_only=True)
class OpTagsGet(OpCode):
    """The tags of one object (``name`` is None for the cluster)."""

    OP_DSC_FIELD = "name"

    kind: str = param(choices=_KINDS)
    name: str | None = None
    use_locking: bool = False


@dataclass(kw_only=True)
class OpTagsSet(OpCode):
    """Add tags to one object."""

    OP_DSC_FIELD = "name"

    kind: str = param(choices=_KINDS)
    name: str | None = None
    tags: list[str]


@dataclass(kw_only=True)
class OpTagsDel(OpCode):
    """Remove tags from one object (all must be present)."""

    OP_DSC_FIELD = "name"

    kind: str = param(choices=_KINDS)
    name: str | None = None
    tags: list[str]


@dataclass(kw_only=True)
class OpTagsSearch(OpCode):
    """Search every tag for a regular expression; returns [(path, tag)]."""

    OP_DSC_FIELD = "pattern"

    pattern: str


ALL_OPCODES = (OpTagsGet, OpTagsSet, OpTagsDel, OpTagsSearch)
