"""ExtStorage provider procedures (``gnt-storage``; :mod:`ganeti.storage.extstorage`)."""

from __future__ import annotations

from typing import Any

from ganeti.backend import blockdev
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, procedure
from ganeti.storage import extstorage

__all__ = ["extstorage_diagnose"]


@procedure(FAST)
def extstorage_diagnose(ctx: NodeContext) -> list[list[Any]]:
    """[[name, path, status, diagnose, parameters [[name, doc], ...]], ...] of the ExtStorage
    search path, in search order.

    Every entry of the ExtStorage search path, in search order.

    Rows are Ganeti's ``[name, path, status, diagnose, parameters]``:
    ``path`` canonical, ``status`` True when the provider is valid,
    ``diagnose`` the reason when it is not (else ""), ``parameters``
    ``[[name, doc], ...]`` of its ``parameters.list``.  A name may appear
    more than once; the first row is the one in effect.
    """
    rows = []
    for name, path in extstorage.search(ctx.paths.es_search_path):
        diag = extstorage.diagnose(name, path, blockdev.wire_path(ctx, path))
        rows.append([diag.name, diag.path, diag.valid, diag.diagnose,
                     [list(p) for p in diag.parameters]])
    return rows
