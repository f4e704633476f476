"""Node storage opcodes: list, modify and repair the storage units of nodes.

A storage unit is what a storage type keeps instance disks in on a node:
for ``file`` and ``sharedfile`` the storage directory (doc/storage.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti import constants
from ganeti.opcodes.base import OpCode, param

__all__ = ["OpNodeQueryStorage", "OpNodeModifyStorage", "OpRepairNodeStorage",
           "OpNodeQueryvols", "VOLUME_FIELDS", "ALL_OPCODES"]

#: ``gnt-node volumes`` fields (Ganeti's): node, device path, volume group (here:
#: the storage directory), volume name (the file below it), size (MiB), instance
VOLUME_FIELDS = ("node", "phys", "vg", "name", "size", "instance")

_TYPES = sorted(constants.STORAGE_TYPES)


@dataclass(kw_only=True)
class OpNodeQueryStorage(OpCode):
    """The storage units of ``nodes`` (all nodes when empty): one row per unit,
    the values of ``output_fields`` in order."""

    OP_DSC_FIELD = "storage_type"

    output_fields: list[str]
    storage_type: str | None = param(None, choices=_TYPES)
    nodes: list[str] = param([])
    name: str | None = None


@dataclass(kw_only=True)
class OpNodeModifyStorage(OpCode):
    """Change fields (``changes``, e.g. ``allocatable``) of one storage unit."""

    OP_DSC_FIELD = "node_name"

    node_name: str
    node_uuid: str | None = None
    storage_type: str = param(choices=_TYPES)
    name: str
    changes: dict[str, Any] = param({})


@dataclass(kw_only=True)
class OpRepairNodeStorage(OpCode):
    """Repair one storage unit (Ganeti: fix the consistency of an LVM volume group)."""

    OP_DSC_FIELD = "node_name"

    node_name: str
    node_uuid: str | None = None
    storage_type: str = param(choices=_TYPES)
    name: str
    ignore_consistency: bool = False


@dataclass(kw_only=True)
class OpNodeQueryvols(OpCode):
    """The volumes (here: the disk files of the file storage directories) of ``nodes``
    (all nodes when empty): one row of ``output_fields`` values (texts) per volume."""

    output_fields: list[str]
    nodes: list[str] = param([])


ALL_OPCODES = (OpNodeQueryStorage, OpNodeModifyStorage, OpRepairNodeStorage, OpNodeQueryvols)
