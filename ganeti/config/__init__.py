"""The authoritative cluster configuration (``config.data``).

One :class:`ConfigWriter` per master daemon owns the :class:`ConfigData`
tree.  It loads ``config.data`` at construction and refuses a missing or
corrupt file with :class:`errors.ConfigurationError` (the file is never
rewritten then).  Every mutator bumps the config's ``serial_no`` (and the
changed object's ``serial_no``/``mtime``) and saves; it returns only once
a write that includes its serial is durable on disk.

**Locking and group commit.**  One internal re-entrant lock protects the
tree; every public method takes it.  A mutator changes the tree, bumps the
serial and serialises the whole config (a consistent snapshot) *under* the
lock, then releases it and waits for durability
(:class:`ganeti.utils.groupcommit.GroupCommitter`): the first waiting
thread finding no write in progress writes the newest snapshot
(``write_fn``, default: temporary file, fsync, rename, directory fsync)
and thereby commits every change made meanwhile with one fsync; the others
sleep.  Writes never overlap and their serials only grow.

**on_change.**  After each write, the writing thread calls
``on_change(data, serial)`` with the exact bytes written and the config
serial they hold, *with the config lock held*, in serial order, before any
mutator whose change the write carried returns.  Not every serial is
reported: one call may cover many changes.  The in-memory config may
already be newer than ``data`` (never older); read ``serial``, not
``get_serial_no()``.  The callback must return quickly and must not call
mutators.  The master daemon's callback
(``ganeti.replication.Replicator.on_config_change``) only queues the bytes;
replication happens outside the lock, and the job processor waits for it
(``wait_replicated``) before reporting success.
:meth:`ConfigWriter.last_saved_serial` tells a thread which serial its own
last (durable) save produced, without taking the lock.

**Live objects.**  Getters return the stored objects themselves (no
copies).  Change them only while holding the matching Ganeti lock, then
call :meth:`ConfigWriter.update` with the same object.

**Failures.**  Memory never stays ahead of the disk.  If a write fails
(``OSError``, e.g. ENOSPC) the old file is intact (temporary file +
rename), a CRITICAL line is logged, and under the config lock memory goes
back to the last durable document (:func:`configfile.restore_tree`: objects
touched by an unwritten change get their fields back in place, added ones
go, removed ones return, the serial is the file's).  Every mutator whose
change was not written raises :class:`errors.ConfigurationError` naming
the cause; no ``on_change`` runs for it, so nothing of it is replicated.
The next change is written as usual once there is room (no restart).
Unsaved in-place edits of other live objects are left alone.  A change
that cannot be serialised is undone the same way.  Only if the rollback
itself fails is the writer *broken*: later mutators raise and the master
daemon must be restarted.  An exception from ``on_change`` is raised in
the mutators its write carried; the file is written and the writer usable.

**Batches.**  ``with cfg.batch(): ...`` bumps the serial for every change
but snapshots (and waits) once, at the end of the outermost batch.

**Modules.**  :mod:`ganeti.config.reader` (``ConfigReader``: the getters
over one tree) and :mod:`ganeti.config.writer` (``ConfigWriter``: the
mutators, the durable write and the rollback).  The document itself
(read, decode, write, restore) is :mod:`ganeti.configfile`, the
consistency check :mod:`ganeti.configcheck`.
"""

from __future__ import annotations

from ganeti.config.reader import ConfigReader
from ganeti.config.writer import ConfigWriter, OnChange, WriteFn, load_config_data

__all__ = ["ConfigReader", "ConfigWriter", "OnChange", "WriteFn", "load_config_data"]
