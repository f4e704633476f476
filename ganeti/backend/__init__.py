"""Node-side functions, one per ``rpc.defs`` row, split by domain.

A backend function is named like its RPC procedure, takes a
:class:`~ganeti.backend.context.NodeContext` first and then exactly the
row's arguments (same names, same order), and returns plain JSON data.
Failures raise a :class:`errors.GanetiError`; the node daemon turns it
into ``[false, message]``.  Each domain module lists exactly its
procedures in ``__all__`` (helpers and constants that other modules use
stay importable, but out of it); :func:`get_function` finds them through
:data:`DOMAIN_MODULES`, so adding a module means adding its name there.
``test/rpc/test_rpc_defs.py`` checks these lists against the rows.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

from ganeti import errors
from ganeti.backend.context import NodeContext

__all__ = ["NodeContext", "DOMAIN_MODULES", "all_functions", "get_function"]

DOMAIN_MODULES = ("node", "files", "jobqueue", "hooks", "test", "instance", "blockdev", "os",
                  "masterip", "replication", "impexp", "remoteimpexp", "storageunits",
                  "fencing", "hotplug", "mirror", "joblog", "drbd", "osimage", "extstorage",
                  "sshkeys", "ha", "firmware")


@functools.lru_cache(maxsize=1)
def all_functions() -> dict[str, Callable[..., Any]]:
    """Procedure name -> backend function: the ``__all__`` of every domain module."""
    table: dict[str, Callable[..., Any]] = {}
    for modname in DOMAIN_MODULES:
        module = importlib.import_module(f"{__name__}.{modname}")
        for name in module.__all__:
            if name in table:
                raise errors.ProgrammerError(f"Backend function {name} defined twice")
            table[name] = getattr(module, name)
    return table


def get_function(name: str) -> Callable[..., Any]:
    """The backend function of procedure ``name``.

    Raises :class:`errors.ProgrammerError` if a declared procedure has no
    backend function (the table test prevents that).
    """
    try:
        return all_functions()[name]
    except KeyError:
        raise errors.ProgrammerError(f"No backend function for procedure {name!r}") from None
