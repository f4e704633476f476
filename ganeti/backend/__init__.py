"""Node-side functions, one per node procedure, split by domain.

A backend function *declares* its procedure (doc/design/contracts.md,
"Adding a node procedure"): decorated with
``@procedure(TIMEOUT_CLASS, fenced=..., offline=..., keepalive=...)``
(:mod:`ganeti.rpc.procedure`), it is named like the procedure, takes a
:class:`~ganeti.backend.context.NodeContext` first and then the
procedure's arguments in wire order, annotated with their wire types
(``str``, ``int``, ``float``, ``bool``, ``list``, ``dict``, or one of them
``| None``), and the first paragraph of its docstring is the procedure's
one-line doc.  It returns plain JSON data; failures raise a
:class:`errors.GanetiError`, which the node daemon turns into
``[false, message]``.  ``python -m ganeti.rpc.gen`` reads these functions
and writes the table (``rpc/table.py``) and the master's stubs; the master
never imports this package.

Each domain module lists exactly its procedures in ``__all__`` (helpers
and constants that other modules use stay importable, but out of it);
:func:`get_function` finds the decorated functions through
:data:`DOMAIN_MODULES`, so adding a module means adding its name there.
``test/rpc/test_rpc_defs.py`` checks the table and these lists against
the functions.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

from ganeti import errors
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import spec_of

__all__ = ["NodeContext", "DOMAIN_MODULES", "all_functions", "get_function"]

DOMAIN_MODULES = ("node", "files", "jobqueue", "hooks", "test", "instance", "blockdev", "os",
                  "masterip", "replication", "impexp", "remoteimpexp", "storageunits",
                  "fencing", "hotplug", "mirror", "joblog", "drbd", "osimage", "extstorage",
                  "sshkeys", "ha", "firmware")


@functools.lru_cache(maxsize=1)
def all_functions() -> dict[str, Callable[..., Any]]:
    """Procedure name -> backend function: the ``@procedure`` functions of every domain module."""
    table: dict[str, Callable[..., Any]] = {}
    for modname in DOMAIN_MODULES:
        module = importlib.import_module(f"{__name__}.{modname}")
        for name, obj in vars(module).items():
            if spec_of(obj) is None or obj.__module__ != module.__name__:
                continue
            if name in table:
                raise errors.ProgrammerError(f"Backend function {name} defined twice")
            table[name] = obj
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
