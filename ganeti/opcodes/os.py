"""OS opcodes."""

from __future__ import annotations

from dataclasses import dataclass

from ganeti.opcodes.base import OpCode, param

__all__ = ["OpOsDiagnose", "OpExtStorageDiagnose", "ALL_OPCODES"]


@dataclass(kw_only=True)
class OpOsDiagnose(OpCode):
    """Query the OS definitions of the nodes (legacy; same data as the os resource)."""

    output_fields: list[str]
    names: list[str] = param([])


@dataclass(kw_only=True)
class OpExtStorageDiagnose(OpCode):
    """Query the ExtStorage providers of the nodes (``gnt-storage``; the extstorage resource)."""

    output_fields: list[str]
    names: list[str] = param([])


ALL_OPCODES = (OpOsDiagnose, OpExtStorageDiagnose)
