"""Export opcodes (doc/exports.md): prepare, export and remove instance exports.

Parameter names are upstream Ganeti's.  ``local`` exports to a node of
this cluster; ``remote`` sends the disks to a remote import of another
cluster sharing the domain secret, after ``OP_BACKUP_PREPARE`` in
``remote`` mode made the transfer key (doc/exports.md, "Moves between
clusters"; :mod:`ganeti.cmdlib.backup_remote`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti import constants
from ganeti.opcodes.base import OpCode, param
from ganeti.opcodes.instance import OpInstanceBase

__all__ = ["OpBackupPrepare", "OpBackupExport", "OpBackupRemove", "ALL_OPCODES"]

_MODES = sorted(constants.EXPORT_MODES)


@dataclass(kw_only=True)
class OpBackupPrepare(OpCode):
    """Prepare an instance export (``local``: nothing to prepare; returns None)."""

    OP_DSC_FIELD = "instance_name"

    instance_name: str
    instance_uuid: str | None = None
    mode: str = param(choices=_MODES)


@dataclass(kw_only=True)
class OpBackupExport(OpInstanceBase):
    """Export an instance (its config and disk images) to a node; returns (bool, [bool per disk])."""

    instance_uuid: str | None = None
    compress: str = "none"
    shutdown_timeout: int = param(120, min=0)
    target_node: Any = None
    target_node_uuid: str | None = None
    shutdown: bool = True
    remove_instance: bool = False
    ignore_remove_failures: bool = False
    mode: str = param(constants.EXPORT_MODE_LOCAL, choices=_MODES)
    x509_key_name: list[Any] | None = None
    destination_x509_ca: str | None = None
    zero_free_space: bool = False
    zeroing_timeout_fixed: int | None = None
    zeroing_timeout_per_mib: float | None = None
    long_sleep: bool = False


@dataclass(kw_only=True)
class OpBackupRemove(OpCode):
    """Remove the exports of an instance (also of one no longer in the cluster)."""

    OP_DSC_FIELD = "instance_name"

    instance_name: str
    instance_uuid: str | None = None


ALL_OPCODES = (OpBackupPrepare, OpBackupExport, OpBackupRemove)
