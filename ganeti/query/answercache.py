"""Encoded query answers kept while what they were made from is unchanged.

The master answers a few queries again and again with the same bytes
(``QueryClusterInfo``, ``gnt-instance list`` on an unchanged
configuration, ``gnt-job list``): :class:`AnswerCache` keeps them, so an
answer is encoded once per state of its source (doc/scale.md).  Two kinds
of entry:

* a whole response frame per *slot*, reused while the caller's key is
  equal and, when a ``source`` object is given, while that object is the
  very one the frame was made from (every commit of the configuration
  makes a new committed tree, so identity means "unchanged");
* the JSON text of ``job`` query rows made from job summaries
  (:meth:`AnswerCache.rows_json`), reused per job while its summary is the
  same object (a finished job keeps its summary until it is archived; a
  live one is summarized anew on every lookup, so its row is always fresh).

Pure bookkeeping: the caller makes the bytes; no I/O.  Thread-safe.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ganeti import constants, serializer

__all__ = ["AnswerCache"]


class AnswerCache:
    """Response frames per slot, and job query rows per summary (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # slot -> (key, weak reference to the source or None, frame)
        self._frames: dict[str, tuple[Hashable, weakref.ref[Any] | None, bytes]] = {}
        self._row_fields: tuple[str, ...] = ()
        self._rows: dict[int, tuple[Any, str]] = {}

    def frame(self, slot: str, key: Hashable, make: Callable[[], bytes], *,
              source: object | None = None) -> bytes:
        """The frame kept in ``slot`` for ``key`` (and ``source``), else ``make()``'s, kept.

        One frame per slot: a miss replaces the slot's frame.  ``make`` runs
        outside the lock; two threads missing at once both make the frame.
        """
        with self._lock:
            hit = self._frames.get(slot)
        if hit is not None and hit[0] == key and (
                source is None or (hit[1] is not None and hit[1]() is source)):
            return hit[2]
        made = make()
        ref = weakref.ref(source) if source is not None else None
        with self._lock:
            self._frames[slot] = (key, ref, made)
        return made

    def rows_json(self, summaries: Sequence[Any], fields: Sequence[str]) -> str:
        """The JSON list of the ``job`` query rows of ``summaries`` for ``fields``.

        Rows in the order given (None entries skipped), each
        ``[[RS_NORMAL, value], ...]`` as :func:`ganeti.query.query` makes it;
        ``fields`` must all be fields a job summary holds.  Rows are kept for
        one field list at a time (the last one asked for).
        """
        key = tuple(fields)
        normal = constants.RS_NORMAL
        parts = []
        with self._lock:
            old = self._rows if key == self._row_fields else {}
            new: dict[int, tuple[Any, str]] = {}
            for job in summaries:
                if job is None:
                    continue
                hit = old.get(job.id)
                if hit is not None and hit[0] is job:
                    text = hit[1]
                else:
                    text = serializer.dumps([[normal, job.get_field(f)] for f in key])
                new[job.id] = (job, text)
                parts.append(text)
            self._row_fields, self._rows = key, new
        return "[" + ",".join(parts) + "]"
