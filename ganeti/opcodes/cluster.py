"""Cluster-level opcodes."""

from __future__ import annotations

from dataclasses import dataclass

from ganeti.opcodes.base import OpCode

__all__ = ["OpClusterQuery", "ALL_OPCODES"]


@dataclass(kw_only=True)
class OpClusterQuery(OpCode):
    """Return the cluster information dict (same as LUXI QueryClusterInfo)."""


ALL_OPCODES = (OpClusterQuery,)
