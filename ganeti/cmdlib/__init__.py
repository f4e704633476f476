"""Logical units: one class per opcode (``OpFooBar`` -> ``LUFooBar``).

:data:`LU_REGISTRY` maps an ``OP_ID`` to its LU class; it is built from the
``LU*`` classes of the modules in ``_MODULES`` (add a domain module there).
See :mod:`ganeti.cmdlib.base` for how to write an LU.
"""

from __future__ import annotations

from types import ModuleType

from ganeti.cmdlib import cluster, cluster_maint, query, test
from ganeti.cmdlib import instance_create, instance_migration, instance_operation, instance_query, instance_set_params, os, tags  # noqa: E501
from ganeti.cmdlib import instance_move, instance_recreate, instance_replace
from ganeti.cmdlib import backup, group, network, node, node_storage, roles, verify
from ganeti.cmdlib import allocator, relocation
from ganeti.cmdlib import node_fence, oob
from ganeti.cmdlib import extstorage, os_image_lu
from ganeti.cmdlib.base import LogicalUnit, NoHooksLU
from ganeti.opcodes.base import op_id_from_class_name

__all__ = ["LU_REGISTRY", "LogicalUnit", "NoHooksLU"]

_MODULES: tuple[ModuleType, ...] = (test, cluster, cluster_maint, query)
_MODULES += (instance_create, instance_operation, instance_migration, instance_set_params, instance_query, tags, os)  # noqa: E501
_MODULES += (node, group, verify)
_MODULES += (roles, backup)
_MODULES += (node_storage, instance_move, instance_recreate, instance_replace)
_MODULES += (allocator, relocation)
_MODULES += (network,)
_MODULES += (oob, node_fence)
_MODULES += (extstorage, os_image_lu)


def _build_registry() -> dict[str, type[LogicalUnit]]:
    registry: dict[str, type[LogicalUnit]] = {}
    for mod in _MODULES:
        for name in mod.__all__:
            cls = getattr(mod, name)
            if isinstance(cls, type) and issubclass(cls, LogicalUnit) and name.startswith("LU"):
                registry[op_id_from_class_name("Op" + name[2:])] = cls
    return registry


LU_REGISTRY: dict[str, type[LogicalUnit]] = _build_registry()
