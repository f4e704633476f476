"""The opcode registry: every opcode class by ``OP_ID``, and their JSON form.

``OP_REGISTRY`` maps every ``OP_ID`` to its class.  :func:`from_dict`
builds a validated opcode from Ganeti's JSON dict (``{"OP_ID": ..., ...}``);
:func:`to_dict` gives that dict back, with every field.  Add a domain
module by listing its ``ALL_OPCODES`` in ``_MODULES`` below (and rerun
``python -m ganeti.opcodes.wiregen --write``: doc/design/contracts.md,
"Adding an opcode").  :mod:`ganeti.opcodes` re-exports these names lazily.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any

from ganeti import errors
from ganeti.opcodes import cluster, query, test
from ganeti.opcodes import instance, os, tags
from ganeti.opcodes import backup, group, network, node, node_storage
from ganeti.opcodes.base import OpCode, build, param
from ganeti.opcodes.cluster import OpClusterQuery
from ganeti.opcodes.query import OpQuery, OpQueryFields
from ganeti.opcodes.test import OpTestDelay, OpTestJqueue

__all__ = ["OP_REGISTRY", "OpCode", "param", "from_dict", "to_dict",
           "OpTestDelay", "OpTestJqueue", "OpClusterQuery", "OpQuery", "OpQueryFields"]

_MODULES: tuple[ModuleType, ...] = (test, cluster, query)
_MODULES += (instance, tags, os)
_MODULES += (node, group)
_MODULES += (backup,)
_MODULES += (node_storage,)
_MODULES += (network,)

OP_REGISTRY: dict[str, type[OpCode]] = {
    cls.OP_ID: cls for mod in _MODULES for cls in mod.ALL_OPCODES
}


def from_dict(data: Any) -> OpCode:
    """Build and validate an opcode from its JSON dict.

    Raises :class:`errors.OpCodeError` when ``data`` is not a dict or names
    no known opcode, and :class:`errors.ParameterError` (naming the field)
    for unknown, missing or wrongly typed parameters.
    """
    if not isinstance(data, dict):
        raise errors.OpCodeError(f"Invalid opcode: expected a dict, got {type(data).__name__}",
                                 errors.ECODE_INVAL)
    op_id = data.get("OP_ID")
    if not isinstance(op_id, str):
        raise errors.OpCodeError("Invalid opcode: 'OP_ID' missing or not a string", errors.ECODE_INVAL)
    cls = OP_REGISTRY.get(op_id)
    if cls is None:
        raise errors.OpCodeError(f"Unknown opcode '{op_id}'", errors.ECODE_INVAL)
    return build(cls, {k: v for k, v in data.items() if k != "OP_ID"})


def to_dict(op: OpCode) -> dict[str, Any]:
    """The JSON dict of ``op``: every field plus ``OP_ID``."""
    result: dict[str, Any] = {}
    for f in dataclasses.fields(op):
        value = getattr(op, f.name)
        if isinstance(value, (list, dict)):
            value = _copy(value)
        result[f.name] = value
    result["OP_ID"] = op.OP_ID
    return result


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value
