"""NIC and disk modifications of ``OP_INSTANCE_SET_PARAMS``: their accepted forms and
the items they name.

``[[op, identifier, params], ...]`` (op ``add``/``modify``/``remove``) or
Ganeti's two-element forms ``[op, params]`` / ``[identifier, params]``; an
identifier is an index (-1: the last, or the end when adding) or, as in
Ganeti, the name or UUID of an existing item.  Pure: no config, no RPC.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.opcodes.instance import DDM_MODIFY, DDM_REMOVE, DDMS

__all__ = ["normalise_mods", "resolve_index"]


def normalise_mods(mods: list[Any], what: str) -> list[tuple[str, int | str, dict[str, Any]]]:
    """``[[op, identifier, params]]`` from the accepted forms; raises OpPrereqError.

    A ``name`` of ``none`` (any case) or ``""`` becomes None (no name).

    The identifier is an index (an int, or a text of one) or, as in Ganeti,
    the name or UUID of an existing NIC/disk (a text, resolved by
    :func:`resolve_index` against the items as the earlier changes leave them).
    """
    result: list[tuple[str, int | str, dict[str, Any]]] = []
    for entry in mods:
        if not isinstance(entry, (list, tuple)) or len(entry) not in (2, 3):
            raise errors.OpPrereqError(f"Invalid {what} modification {entry!r}",
                                       errors.ECODE_INVAL)
        if len(entry) == 2:
            first, params = entry
            if first in DDMS:
                op, ident = first, -1
            else:
                op, ident = DDM_MODIFY, first
        else:
            op, ident, params = entry
        if op not in DDMS:
            raise errors.OpPrereqError(f"Invalid {what} operation {op!r}", errors.ECODE_INVAL)
        if isinstance(ident, bool) or not isinstance(ident, (int, str)) or ident == "":
            raise errors.OpPrereqError(f"Invalid {what} index {ident!r}", errors.ECODE_INVAL)
        try:
            ident = int(ident)
        except ValueError:
            pass                    # a name or UUID
        if not isinstance(params, dict):
            raise errors.OpPrereqError(f"Invalid {what} parameters {params!r}",
                                       errors.ECODE_INVAL)
        if op == DDM_REMOVE and params:
            raise errors.OpPrereqError(f"No settings should be passed when removing a {what}"
                                       f" (got {sorted(params)})", errors.ECODE_INVAL)
        params = dict(params)
        name = params.get("name")
        if isinstance(name, str) and name.lower() in ("", "none"):
            params["name"] = None       # as Ganeti: name=none takes the name away
        result.append((op, ident, params))
    return result


def resolve_index(ident: int | str, items: list[tuple[str | None, str | None]], what: str, *,
           adding: bool = False) -> int:
    """The real index of ``ident`` among ``items`` (``(uuid, name)`` of each, in order).

    An index (-1 = the last, or the end when ``adding``), else a name or
    UUID of an item (not for ``adding``, as in Ganeti).  Raises
    :class:`errors.OpPrereqError` (``ECODE_NOENT`` for an unknown name).
    """
    count = len(items)
    if isinstance(ident, str):
        if adding:
            raise errors.OpPrereqError(f"Invalid {what} index {ident!r}: a new {what} is"
                                       " placed by index (-1 = at the end)", errors.ECODE_INVAL)
        for real, (uuid, name) in enumerate(items):
            if ident in (uuid, name):
                return real
        raise errors.OpPrereqError(f"Cannot find {what} with identifier {ident}",
                                   errors.ECODE_NOENT)
    limit = count + 1 if adding else count
    real = (limit - 1 if ident == -1 else ident)
    if not 0 <= real < limit:
        raise errors.OpPrereqError(f"Invalid {what} index {ident} (the instance has {count})",
                                   errors.ECODE_INVAL)
    return real
