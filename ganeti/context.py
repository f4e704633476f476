"""The master daemon's context: the shared objects, built once.

:class:`MasterContext` is created in :mod:`ganeti.server.masterd` and
passed down to the processor, the logical units and the job queue.  No
module keeps these objects in globals.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ganeti import errors
from ganeti.pathutils import Paths
from ganeti.progress import RuntimeTable

if TYPE_CHECKING:
    from ganeti.cmdlib.hooksrunner import HooksRunner
    from ganeti.cmdlib.liveinfo import NodeInfoCache
    from ganeti.config import ConfigReader, ConfigWriter
    from ganeti.events import EventBus
    from ganeti.jqueue import JobQueue
    from ganeti.locking import GanetiLockManager, LockMonitor
    from ganeti.metrics.master import MasterMetrics
    from ganeti.rpc.client import RpcRunner

__all__ = ["MasterContext", "ConfigReplicator"]


class ConfigReplicator(Protocol):
    """What the master-side logic asks of the configuration/queue replicator."""

    def wait_replicated(self, serial: int, timeout: float | None = None) -> bool:
        """Wait until the master candidates were sent config ``serial`` (or newer)."""

    def config_lane(self, timeout: float | None = None) -> AbstractContextManager[None]:
        """Run a block with no config push under way and none starting."""

    def replicate_queue_to(self, node_names: Iterable[str]) -> None:
        """Queue a copy of the unarchived job queue to ``node_names``."""

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far was sent; False on timeout."""

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the replication thread; False if it did not end in time."""


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
    * ``replicator``: a :class:`ConfigReplicator` (the master daemon's
      :class:`ganeti.replication.Replicator`), or None (nothing to wait for).
    * ``paths``: the node's :class:`ganeti.pathutils.Paths`.
    * ``node_info_cache``: a :class:`ganeti.cmdlib.liveinfo.NodeInfoCache`
      for the live fields of node queries, or None (always ask the nodes).
    * ``events``: the :class:`ganeti.events.EventBus` job, instance and node
      events are published on (LUXI ``WaitForEvents``), or None.
    * ``metrics``: the :class:`ganeti.metrics.master.MasterMetrics` the
      processor reports lock waits to, or None.
    * ``runtime_jobs``: the :class:`ganeti.progress.RuntimeTable` of disk
      copies running in jobs, merged into the instances' ``jobs`` runtime
      field (doc/progress.md, "Runtime jobs").
    """

    paths: Paths
    cfg: ConfigWriter | None = None
    glm: GanetiLockManager | None = None
    rpc: RpcRunner | None = None
    jqueue: JobQueue | None = None
    lock_monitor: LockMonitor | None = None
    hooks_runner: HooksRunner | None = None
    replicator: ConfigReplicator | None = None
    node_info_cache: NodeInfoCache | None = None
    events: EventBus | None = None
    metrics: MasterMetrics | None = None
    runtime_jobs: RuntimeTable = field(default_factory=RuntimeTable)

    def require_cfg(self) -> ConfigWriter:
        """``cfg``; :class:`errors.ProgrammerError` in a context without one."""
        if self.cfg is None:
            raise errors.ProgrammerError("This master context has no configuration")
        return self.cfg

    def committed_cfg(self) -> ConfigReader:
        """The committed configuration (``cfg.committed()``), what every query reads.

        Readers never see a change before it is durable, nor one that fails
        and is undone (see :mod:`ganeti.config`); take it once per answer.
        :class:`errors.ProgrammerError` in a context without a config.
        """
        return self.require_cfg().committed()

    def require_rpc(self) -> RpcRunner:
        """``rpc``; :class:`errors.OpExecError` in a context without node RPC."""
        if self.rpc is None:
            raise errors.OpExecError("Node RPC is not available on this master")
        return self.rpc

    def require_jqueue(self) -> JobQueue:
        """``jqueue``; :class:`errors.ProgrammerError` in a context without one."""
        if self.jqueue is None:
            raise errors.ProgrammerError("This master context has no job queue")
        return self.jqueue
