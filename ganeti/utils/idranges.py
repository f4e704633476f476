"""Sets of positive integers (job ids) as sorted ``[[first, last], ...]`` ranges.

The wire form of a job log (doc/design/failover.md, "Catching up before
the vote"): an archive of many thousand consecutive ids is one pair.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["to_ranges", "from_ranges", "MAX_IDS"]

#: the most ids :func:`from_ranges` accepts (a sanity bound on what a peer sends)
MAX_IDS = 10_000_000


def to_ranges(ids: Iterable[int]) -> list[list[int]]:
    """``[[first, last], ...]``: the ids as sorted, disjoint, non-adjacent ranges."""
    out: list[list[int]] = []
    for value in sorted(set(ids)):
        if out and value == out[-1][1] + 1:
            out[-1][1] = value
        else:
            out.append([value, value])
    return out


def from_ranges(data: object) -> set[int] | str:
    """The ids of ``[[first, last], ...]``, or why the data is no such list (text)."""
    if not isinstance(data, list):
        return f"id ranges must be a list, not {type(data).__name__}"
    ids: set[int] = set()
    for item in data:
        if not (isinstance(item, list) and len(item) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in item)
                and 0 < item[0] <= item[1]):
            return f"invalid id range {str(item)[:40]!r}"
        if len(ids) + item[1] - item[0] + 1 > MAX_IDS:
            return f"more than {MAX_IDS} ids"
        ids.update(range(item[0], item[1] + 1))
    return ids
