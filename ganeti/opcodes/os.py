"""OS opcodes."""

from __future__ import annotations

from dataclasses import dataclass

from ganeti.opcodes.base import OpCode, param

__all__ = ["OpOsDiagnose", "OpExtStorageDiagnose", "OpOsImageAdd", "OpOsImageRemove",
           "OpOsImageList", "ALL_OPCODES"]


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


@dataclass(kw_only=True)
class OpOsImageAdd(OpCode):
    """Add an image to the master's OS image store (``gnt-os image add``; doc/images.md)."""

    OP_DSC_FIELD = "name"
    name: str = param(doc="The image's name in the store (a safe file name)")
    source: str = param(doc="An absolute path on the master, or an http(s) URL")
    checksum: str | None = param(None, doc="Expected sha256:HEX of the image")


@dataclass(kw_only=True)
class OpOsImageRemove(OpCode):
    """Remove an image from the OS image store (``gnt-os image remove``)."""

    OP_DSC_FIELD = "name"
    name: str = param(doc="The image's name in the store")


@dataclass(kw_only=True)
class OpOsImageList(OpCode):
    """The OS image store's entries (all, or those named), sorted by name."""

    names: list[str] = param([])


ALL_OPCODES = (OpOsDiagnose, OpExtStorageDiagnose, OpOsImageAdd, OpOsImageRemove, OpOsImageList)
