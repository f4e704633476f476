"""The master daemon's context: the shared objects, built once.

:class:`MasterContext` is created in :mod:`ganeti.server.masterd` and
passed down to the processor, the logical units and the job queue.  No
module keeps these objects in globals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganeti.pathutils import Paths

__all__ = ["MasterContext"]


@dataclass
class MasterContext:
    """Everything the master-side logic needs.

    * ``cfg``: the :class:`ganeti.config.ConfigWriter` (None only in tests).
    * ``glm``: the :class:`ganeti.locking.GanetiLockManager` (None: no locking).
    * ``rpc``: the :class:`ganeti.rpc.client.RpcRunner` (None: no node RPC).
    * ``jqueue``: the :class:`ganeti.jqueue.JobQueue` (set after creation).
    * ``lock_monitor``: the :class:`ganeti.locking.LockMonitor`.
    * ``hooks_runner``: object with ``run_hooks(lu, phase, feedback_fn)``,
      or None (hooks are skipped).
    * ``replicator``: object with ``wait_replicated(serial) -> bool``
      (:class:`ganeti.replication.Replicator`), or None (nothing to wait for).
    * ``paths``: the node's :class:`ganeti.pathutils.Paths`.
    * ``node_info_cache``: a :class:`ganeti.cmdlib.liveinfo.NodeInfoCache`
      for the live fields of node queries, or None (always ask the nodes).
    """

    paths: Paths
    cfg: Any = None
    glm: Any = None
    rpc: Any = None
    jqueue: Any = None
    lock_monitor: Any = None
    hooks_runner: Any = None
    replicator: Any = None
    node_info_cache: Any = None
