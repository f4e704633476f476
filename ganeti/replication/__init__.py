"""Replication of the master's state to master candidates and nodes.

The master daemon builds one :class:`Replicator` and wires it as the
ConfigWriter's ``on_change`` and the job queue storage's ``replicate_*``
callbacks; the processor waits for :meth:`Replicator.wait_replicated`
before a job that changed the config reports success.  Design and
invariants: doc/design/replication.md.

* :mod:`ganeti.replication.core`: the :class:`ReplicationPlan`, every
  decision (targets, coalescing, order, stale candidates and their resync
  backoff, flushes), pure and driven by a clock;
* :mod:`ganeti.replication.driver`: the :class:`Replicator` threads that
  execute the plan's decisions as RPC calls and queue-file reads.

This package is master-side logic (layer 4 of ``ganeti/__init__.py``):
it imports mechanisms (config, ssconf, rpc) and is imported by
``cmdlib`` and the master daemon, never the other way round.
"""

from __future__ import annotations

from ganeti.replication.core import (QUEUE_COPY_CHUNK, QUEUE_RESYNC_INTERVAL,
                                     QUEUE_RESYNC_MAX_INTERVAL, REPLICATION_TIMEOUT,
                                     ReplicationPlan, replication_targets)
from ganeti.replication.driver import Replicator, copy_queue, read_queue_files, report_failures

__all__ = ["Replicator", "ReplicationPlan", "replication_targets", "report_failures",
           "read_queue_files", "copy_queue", "REPLICATION_TIMEOUT",
           "QUEUE_RESYNC_INTERVAL", "QUEUE_RESYNC_MAX_INTERVAL", "QUEUE_COPY_CHUNK"]
