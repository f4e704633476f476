"""Generic query opcodes (query2 through the job queue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti import constants
from ganeti.opcodes.base import OpCode, param

__all__ = ["OpQuery", "OpQueryFields", "ALL_OPCODES"]

_RESOURCES = [constants.QR_CLUSTER, constants.QR_INSTANCE, constants.QR_NODE, constants.QR_LOCK,
              constants.QR_GROUP, constants.QR_OS, constants.QR_JOB, constants.QR_EXPORT,
              constants.QR_NETWORK, constants.QR_FILTER, constants.QR_EXTSTORAGE]


@dataclass(kw_only=True)
class OpQuery(OpCode):
    """Query a resource: fields and rows, optionally filtered."""

    OP_DSC_FIELD = "what"

    what: str = param(choices=_RESOURCES)
    fields: list[str]
    qfilter: Any = None
    use_locking: bool = False


@dataclass(kw_only=True)
class OpQueryFields(OpCode):
    """Describe the fields of a resource (all of them when ``fields`` is null)."""

    OP_DSC_FIELD = "what"

    what: str = param(choices=_RESOURCES)
    fields: list[str] | None = None


ALL_OPCODES = (OpQuery, OpQueryFields)
