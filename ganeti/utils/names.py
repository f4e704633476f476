"""Short-name matching: ``node2`` for ``node2.example.com``, as Ganeti resolves names.

A name given by a user (CLI argument, RAPI path, opcode field) designates
the object whose full name is exactly that; failing that, the one object
whose name starts with it followed by a dot, compared without regard to
case (``Node2``, ``node2`` and ``node2.example`` all designate
``node2.example.com``).  Two candidates make the short name ambiguous: no
match.  Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["match_name", "expand_names"]


def match_name(key: str, names: Iterable[str]) -> str | None:
    """The full name in ``names`` that ``key`` designates, or None.

    Exact matches win; then case-insensitive full matches; then names
    beginning with ``key + "."`` (case-insensitive).  More than one
    candidate at the deciding step gives None.
    """
    if not isinstance(key, str) or not key:
        return None
    pool = list(names)
    if key in pool:
        return key
    folded = key.casefold()
    same = [n for n in pool if n.casefold() == folded]
    if same:
        return same[0] if len(same) == 1 else None
    prefix = folded + "."
    longer = [n for n in pool if n.casefold().startswith(prefix)]
    return longer[0] if len(longer) == 1 else None


def expand_names(wanted: Iterable[str], names: Iterable[str]) -> list[str]:
    """Each of ``wanted`` replaced by the full name it designates (unchanged if none)."""
    pool = list(names)
    return [match_name(w, pool) or w for w in wanted]
