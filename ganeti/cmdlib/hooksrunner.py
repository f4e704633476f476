"""The master's hooks runner: run an LU's hooks, skipping nodes without scripts.

:class:`HooksRunner` is ``context.hooks_runner`` (wired by the master
daemon); :class:`HookDirsCache` remembers which hook directories each node
has, from its ``hooks_list`` answers, so that nodes without scripts for a
phase are not contacted (doc/design/replication.md, "Hooks").
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ganeti import constants
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import LogicalUnit
from ganeti.config import ConfigWriter
from ganeti.cmdlib.hooksmaster import HooksMaster
from ganeti.pathutils import Paths
from ganeti.rpc.client import RpcRunner

__all__ = ["HOOKS_LIST_TIMEOUT", "HookDirsCache", "HooksRunner"]

logger = logging.getLogger(__name__)

#: Seconds a ``hooks_list`` fan-out may take.
HOOKS_LIST_TIMEOUT = 10.0


class HookDirsCache:
    """Which ``hooks/<hpath>-<phase>.d`` directories have entries, per node.

    :meth:`nodes_to_run` is (through :class:`HooksRunner`) the HooksMaster
    ``node_filter``: it keeps the nodes that *may* have scripts for a path
    and phase and drops the others, so operations on a cluster without hook
    scripts make no ``hooks_runner`` RPC.

    **Exactness.**  Each call gives ``since``, the time the operation's
    hooks began (its pre phase; the post phase reuses that time).  A node's
    answer is used only if its ``hooks_list`` call *started* at or after
    ``since``, so a script present on a node when the operation's hooks
    began is always seen, as when the hooks runner itself was asked.
    Answers are shared (group commit): one ``hooks_list`` fan-out is in
    flight at a time, for the union of the nodes its waiters need, and it
    serves every operation whose hooks began before it started.  Many
    concurrent operations thus share one fan-out instead of making two
    each.

    * The master node (``local_node()``) is checked on the local
      filesystem (exact, no RPC).
    * A node whose answer failed (unreachable, offline) counts as having
      scripts everywhere: the normal hooks RPC is made and reports the
      problem as before.

    A directory holding only skipped entries (bad names, not executable)
    still counts as non-empty, so the hooks runner's report stays the same.
    """

    def __init__(self, rpc: RpcRunner, *, local_node: Callable[[], str] | None = None,
                 local_paths: Paths | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rpc = rpc
        self.local_node = local_node
        self.local_paths = local_paths
        self.clock = clock
        self._cond = threading.Condition()
        self._refreshing = False
        self._wanted: set[str] = set()
        # node -> (start time of the answering call, non-empty dir names or None = unknown)
        self._entries: dict[str, tuple[float, frozenset[str] | None]] = {}

    def invalidate(self, node: str | None = None) -> None:
        """Forget the answer of ``node`` (every node when None)."""
        with self._cond:
            if node is None:
                self._entries.clear()
            else:
                self._entries.pop(node, None)

    def _missing(self, nodes: list[str], since: float) -> list[str]:
        # with _cond held
        return [n for n in nodes
                if (e := self._entries.get(n)) is None or e[0] < since]

    def _ensure(self, nodes: list[str], since: float) -> None:
        """Make sure every node in ``nodes`` has an answer started at or after ``since``."""
        with self._cond:
            while True:
                missing = self._missing(nodes, since)
                if not missing:
                    return
                self._wanted.update(missing)
                if not self._refreshing:
                    break
                self._cond.wait(HOOKS_LIST_TIMEOUT + 5.0)
            self._refreshing = True
            todo = sorted(self._wanted)
            self._wanted.clear()
            started = self.clock()
        results: dict[str, Any] = {}
        try:
            results = self.rpc.call_hooks_list(todo, rpc_timeout=HOOKS_LIST_TIMEOUT)
        except Exception as exc:  # never let the shortcut break an operation
            logger.warning("Cannot list hook directories: %s", exc)
        finally:
            with self._cond:
                for node in todo:
                    res = results.get(node)
                    dirs: frozenset[str] | None = None
                    if res is not None and not res.fail_msg and isinstance(res.payload, list):
                        dirs = frozenset(str(d) for d in res.payload)
                    self._entries[node] = (started, dirs)
                self._refreshing = False
                self._cond.notify_all()

    def _local_has(self, dirname: str) -> bool:
        assert self.local_paths is not None
        try:
            with os.scandir(os.path.join(self.local_paths.hooks_base_dir, dirname)) as it:
                return any(True for _ in it)
        except FileNotFoundError:
            return False
        except OSError:
            return True   # let the hooks runner report it

    def nodes_to_run(self, nodes: list[str], hpath: str, phase: str,
                     since: float | None = None) -> list[str]:
        """The subset of ``nodes`` that may have scripts in ``<hpath>-<phase>.d``.

        ``since`` (default: now) is when the operation's hooks began.
        """
        if since is None:
            since = self.clock()
        dirname = f"{hpath}-{phase}.d"
        local = self.local_node() if self.local_node is not None and \
            self.local_paths is not None else None
        remote = [n for n in dict.fromkeys(nodes) if n != local]
        if remote:
            self._ensure(remote, since)
        with self._cond:
            entries = {n: self._entries.get(n) for n in remote}
        keep = []
        for node in nodes:
            if node == local:
                if self._local_has(dirname):
                    keep.append(node)
                continue
            entry = entries.get(node)
            if entry is None or entry[1] is None or dirname in entry[1]:
                keep.append(node)
        return keep


class HooksRunner:
    """``context.hooks_runner``: runs an LU's hooks through the ``hooks_runner`` RPC.

    The processor calls :meth:`run_hooks` with the pre phase before
    ``Exec`` (a failing script raises :class:`errors.HooksAbort`) and with
    the post phase after it (failures are logged).  The HooksMaster of the
    pre phase is kept on the LU so the post phase sees the same
    environment plus the ``GANETI_POST_*`` values.

    Nodes without scripts for the phase are not contacted
    (:class:`HookDirsCache`; ``paths`` enables the local check on the
    master).  The ``since`` of both phases is the moment the job was
    submitted (``lu.proc.job_submitted_at()``, wall clock, mapped onto
    ``clock``; the start of the pre phase when the LU runs outside a job):
    a script present on a node when the job was submitted always runs for
    it, so that the directory listings made for one operation serve every
    job submitted before them (doc/design/replication.md).
    """

    def __init__(self, cfg: ConfigWriter, rpc: RpcRunner, *, paths: Paths | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.rpc = rpc
        self.clock = clock
        self.wall_clock = wall_clock
        self.dirs_cache = HookDirsCache(rpc, local_node=cfg.get_master_node_name,
                                        local_paths=paths, clock=clock)

    def _master(self, lu: LogicalUnit[Any], feedback_fn: FeedbackFn | None) -> HooksMaster:
        hm = lu.hooks_master
        if hm is None:
            cluster = self.cfg.get_cluster_info()
            since = self._since(lu)
            cache = self.dirs_cache

            def node_filter(nodes: list[str], hpath: str, phase: str) -> list[str]:
                return cache.nodes_to_run(nodes, hpath, phase, since=since)

            hm = HooksMaster.from_lu(lu, self.rpc.call_hooks_runner, cluster.cluster_name,
                                     self.cfg.get_master_node_name(), log_fn=feedback_fn,
                                     node_filter=node_filter)
            lu.hooks_master = hm
        return hm

    def _since(self, lu: LogicalUnit[Any]) -> float:
        """``clock`` time of the job's submission (now, outside a job)."""
        now = self.clock()
        submitted_fn = getattr(getattr(lu, "proc", None), "job_submitted_at", None)
        submitted = submitted_fn() if submitted_fn is not None else None
        if submitted is None:
            return now
        # a wall clock set back since the submission gives "now" (strict)
        return now - max(0.0, self.wall_clock() - submitted)

    def run_hooks(self, lu: LogicalUnit[Any], phase: str,
                  feedback_fn: FeedbackFn | None = None) -> Any:
        """Run ``phase`` (pre/post) of ``lu``'s hooks; returns the per-node results."""
        if not getattr(lu, "HPATH", None) or self.rpc is None:
            return {}
        hm = self._master(lu, feedback_fn)
        if phase == constants.HOOKS_PHASE_PRE:
            return hm.run_pre()
        results = hm.run_post()
        callback = getattr(lu, "HooksCallBack", None)
        if callback is not None:
            callback(phase, results, feedback_fn)
        return results

    def run_path(self, lu: LogicalUnit[Any], hpath: str, htype: str, phase: str,
                 env: dict[str, Any], nodes: list[str],
                 feedback_fn: FeedbackFn | None = None) -> dict[str, list[tuple[str, int, str]]]:
        """Run one phase of ``hpath`` with an explicit environment (cluster verify)."""
        if self.rpc is None or not nodes:
            return {}
        cluster = self.cfg.get_cluster_info()
        hm = HooksMaster(self.rpc.call_hooks_runner, hpath=hpath, opcode=lu.op.OP_ID,
                         htype=htype, cluster_name=cluster.cluster_name,
                         master_name=self.cfg.get_master_node_name(), env_fn=lambda: env,
                         pre_nodes=nodes, post_nodes=nodes, log_fn=feedback_fn)
        return hm.run_phase(phase, nodes)
