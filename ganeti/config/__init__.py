"""The authoritative cluster configuration (``config.data``).

One :class:`ConfigWriter` per master daemon owns the configuration.  It
loads ``config.data`` at construction and refuses a missing or
corrupt file with :class:`errors.ConfigurationError` (the file is never
rewritten then).  Every mutator bumps the config's ``serial_no`` (and the
changed object's ``serial_no``/``mtime``) and saves; it returns only once
a write that includes its serial is durable on disk.

**Two trees: working and committed (copy on write).**  The writer's own
getters and mutators work on the *working* tree, which logical units
change in place (holding the matching Ganeti locks).  Readers -- every
query (LUXI ``Query``, ``QueryClusterInfo``, ``QueryConfigValues``,
``QueryTags``, RAPI reads through them), ssconf, replication targets,
config events -- read :meth:`ConfigWriter.committed` instead: a
:class:`ConfigReader` over the *committed* tree, which is exactly the
newest ``config.data`` on disk.  A change shows there only once its write
is durable, and a change whose write fails never shows at all.  Each
snapshot is a published tree (:mod:`ganeti.config.commit`): the previous
one with the objects saved since then deep-copied from the working tree;
unchanged objects are shared, so a snapshot costs the changed objects.
That published tree is what is serialised, written and replicated; on a
durable write it becomes the committed one.  Nobody changes a published
object.

**Locking and group commit.**  One internal re-entrant lock protects the
working tree; every public method of the writer takes it (readers of the
committed tree never do).  A mutator changes the working tree, bumps the
serial and publishes a snapshot *under* the lock (the copies of the
objects it saved: a consistent tree), then releases it and waits for
durability (:class:`ganeti.utils.groupcommit.GroupCommitter`): the first
waiting thread finding no write in progress serialises the newest
snapshot and writes it (``write_fn``, default: temporary file, fsync,
rename, directory fsync), without the config lock, and thereby commits
every change made meanwhile with one serialisation and one fsync; the
others sleep.  Writes never overlap and their serials only grow.

**on_change.**  After each write, the writing thread calls
``on_change(data, serial)`` with the exact bytes written and the config
serial they hold, *with the config lock held*, in serial order, before any
mutator whose change the write carried returns.  Not every serial is
reported: one call may cover many changes.  The working config may
already be newer than ``data`` (never older); read ``serial``, not
``get_serial_no()``.  :meth:`ConfigWriter.committed` is exactly the tree
of ``serial`` during the call (compute ssconf values from it).  The callback must return quickly and must not call
mutators.  The master daemon's callback
(``ganeti.replication.Replicator.on_config_change``) only queues the bytes;
replication happens outside the lock, and the job processor waits for it
(``wait_replicated``) before reporting success.
:meth:`ConfigWriter.last_saved_serial` tells a thread which serial its own
last (durable) save produced, without taking the lock.

**Working objects.**  The writer's getters return its working objects
themselves (no copies).  Change them only while holding the matching
Ganeti lock, then call :meth:`ConfigWriter.update` with the same object.
Until then the edit is in the working tree only: not in any query, and
not in the file even if another change is written meanwhile (a snapshot
copies saved objects only).  Objects from :meth:`ConfigWriter.committed`
are shared by every reader and must never be changed.

**Failures.**  Memory never stays ahead of the disk.  If a write fails
(``OSError``, e.g. ENOSPC) the old file is intact (temporary file +
rename), a CRITICAL line is logged, readers keep the committed tree
(they never saw the change), and under the config lock the working tree
goes back to the last durable document (:func:`configfile.restore_tree`: objects
touched by an unwritten change get their fields back in place, added ones
go, removed ones return, the serial is the file's).  Every mutator whose
change was not written raises :class:`errors.ConfigurationError` naming
the cause; no ``on_change`` runs for it, so nothing of it is replicated.
The next change is written as usual once there is room (no restart).
Unsaved in-place edits of other working objects are left alone.  A change
that cannot be serialised fails its write the same way (with every other
change that write carried: serialising happens at write time).  Only if the rollback
itself fails is the writer *broken*: later mutators raise and the master
daemon must be restarted.  An exception from ``on_change`` is raised in
the mutators its write carried; the file is written and the writer usable.

**Batches.**  ``with cfg.batch(): ...`` bumps the serial for every change
but snapshots (and waits) once, at the end of the outermost batch.

**Modules.**  :mod:`ganeti.config.reader` (``ConfigReader``: the getters
over one tree), :mod:`ganeti.config.commit` (publishing: the copy-on-write
snapshot trees and which one is committed) and :mod:`ganeti.config.writer`
(``ConfigWriter``: the mutators, the durable write and the rollback).  The document itself
(read, decode, write, restore) is :mod:`ganeti.config.file`, the
consistency check :mod:`ganeti.config.check`.
"""

from __future__ import annotations

from ganeti.config.reader import ConfigReader
from ganeti.config.writer import ConfigWriter, OnChange, WriteFn, load_config_data

__all__ = ["ConfigReader", "ConfigWriter", "OnChange", "WriteFn", "load_config_data"]
