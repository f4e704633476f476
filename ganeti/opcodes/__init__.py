"""Opcodes: one typed dataclass per operation, and their JSON form.

The classes live in one module per domain (``instance``, ``node``, ...);
:mod:`ganeti.opcodes.registry` holds ``OP_REGISTRY`` (every ``OP_ID`` to
its class), :func:`~ganeti.opcodes.registry.from_dict` and
:func:`~ganeti.opcodes.registry.to_dict`.  Front ends build opcodes with
:mod:`ganeti.opcodes.wire`, generated from the classes, which imports
nothing: so this package's ``__init__`` imports nothing either (the
``gnt-*`` start-up budget, doc/cli-startup.md) and loads the registry on
the first use of one of its names (``opcodes.OP_REGISTRY``,
``opcodes.from_dict``, ``opcodes.instance``...).
"""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing: this package is on the CLI's
# start-up path through ganeti.opcodes.wire (doc/cli-startup.md)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ganeti.opcodes import backup, cluster, group, instance, network, node, node_storage
    from ganeti.opcodes import os, query, tags, test
    from ganeti.opcodes.base import OpCode, param
    from ganeti.opcodes.registry import OP_REGISTRY, from_dict, to_dict
    from ganeti.opcodes.cluster import OpClusterQuery
    from ganeti.opcodes.query import OpQuery, OpQueryFields
    from ganeti.opcodes.test import OpTestDelay, OpTestJqueue

__all__ = ["OP_REGISTRY", "OpCode", "param", "from_dict", "to_dict",
           "OpTestDelay", "OpTestJqueue", "OpClusterQuery", "OpQuery", "OpQueryFields",
           "backup", "cluster", "group", "instance", "network", "node", "node_storage", "os",
           "query", "tags", "test"]


def __getattr__(name: str) -> object:
    """The registry's names and the domain modules, loaded on first use."""
    if name not in __all__:   # e.g. "wire" before "from ganeti.opcodes import wire" loads it
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib   # not "from ganeti.opcodes import": that asks this hook again
    registry = importlib.import_module("ganeti.opcodes.registry")   # and every domain module
    found = globals().get(name)
    if found is not None:
        return found
    if name in registry.__all__:
        found = globals()[name] = getattr(registry, name)   # asked once: hot paths use it
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
