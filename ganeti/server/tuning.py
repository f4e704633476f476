"""Process tuning of the daemons, in one place: the C heap (glibc ``mallopt``,
``malloc_trim``) and the cyclic garbage collector.

A daemon names its :class:`Tuning` when it calls
:func:`ganeti.server.daemon.run_daemon`; the runner applies it around the
daemon's ``prepare_fn`` (:func:`before_prepare`, :func:`after_prepare`).
Why each knob is there, with figures: doc/scale.md.

* ``malloc_arenas``: at most that many glibc arenas (``M_ARENA_MAX``).  By
  default every thread that allocates may get its own arena (up to eight
  per core), and each keeps the memory freed in it.
* ``fixed_mmap_threshold``: every C allocation of :data:`MMAP_THRESHOLD`
  bytes or more gets its own mapping, for good (``M_MMAP_THRESHOLD``), so
  a big block goes back to the system when it is freed.
* ``freeze_after_prepare``: no collections while the daemon loads (it makes
  only long-lived objects), then collect once and move what was loaded out
  of the collector's sight (``gc.freeze``), so a big query later does not
  pay a full collection over the configuration.

The heap knobs are no-ops where there is no glibc.  :func:`release_memory`
(``malloc_trim``) is for the request paths that just freed a large buffer;
the forking server core (:mod:`ganeti.http.forking`, below this layer)
keeps its own ``gc.freeze`` before forking and ``gc.disable`` in a child.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

__all__ = ["Tuning", "MASTERD", "RAPI", "MMAP_THRESHOLD", "before_prepare", "after_prepare",
           "release_memory", "limit_malloc_arenas", "fix_mmap_threshold"]

#: glibc ``mallopt`` parameter numbers of ``M_ARENA_MAX`` and ``M_MMAP_THRESHOLD``
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
#: C allocations at least this large get their own mapping (glibc's initial default)
MMAP_THRESHOLD = 128 * 1024


@dataclass(frozen=True)
class Tuning:
    """What the daemon runner sets up for one daemon (see the module docstring)."""

    malloc_arenas: int | None = None
    fixed_mmap_threshold: bool = False
    freeze_after_prepare: bool = False


#: the master daemon: LUXI and job worker threads answering large queries
MASTERD = Tuning(malloc_arenas=2, fixed_mmap_threshold=True, freeze_after_prepare=True)
#: the RAPI daemon: request threads handling large bodies and decoding large
#: query answers (a full collection over the loaded modules per big decode)
RAPI = Tuning(malloc_arenas=2, fixed_mmap_threshold=True, freeze_after_prepare=True)


def _mallopt(param: int, value: int) -> bool:
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(param, value))


def release_memory() -> None:
    """Give freed C heap memory back to the system (glibc ``malloc_trim``; no-op elsewhere)."""
    try:
        import ctypes
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def limit_malloc_arenas(count: int = 2) -> bool:
    """Let the C heap use at most ``count`` glibc arenas; call before starting threads.

    False where there is no glibc.
    """
    return _mallopt(_M_ARENA_MAX, count)


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Give every C allocation of ``size`` bytes or more its own mapping, for good.

    By default glibc raises this threshold to the size of each mapped block
    freed (up to 32 MiB), after which multi-MiB buffers come from the heap
    and their space stays with the process (doc/scale.md).  False where
    there is no glibc.
    """
    return _mallopt(_M_MMAP_THRESHOLD, size)


def before_prepare(tuning: Tuning) -> None:
    """Apply ``tuning`` before the daemon prepares (no threads of its own yet)."""
    if tuning.freeze_after_prepare:
        gc.disable()
    if tuning.malloc_arenas is not None:
        limit_malloc_arenas(tuning.malloc_arenas)
    if tuning.fixed_mmap_threshold:
        fix_mmap_threshold()


def after_prepare(tuning: Tuning) -> None:
    """Apply ``tuning`` once the daemon has prepared, before it serves: collect
    once, then keep every object alive now out of later collections."""
    if tuning.freeze_after_prepare:
        gc.collect()
        gc.freeze()
        gc.enable()
