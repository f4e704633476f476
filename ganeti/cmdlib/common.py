"""Helpers shared by the cluster, node and group logical units.

* Name expansion: :func:`expand_node`, :func:`expand_group`.
* The master candidate pool: :func:`candidate_stats`,
  :func:`adjust_candidate_pool`, :func:`decide_self_promotion`.  A node is
  *eligible* when it is master capable, online and not drained; the pool
  is kept at ``min(candidate_pool_size, eligible nodes)``.
* Distribution of cluster files (:func:`redistribute`): ``config.data`` to
  the master candidates, certificates and ``known_hosts`` to every node,
  ssconf to every online node.
* Replication (seed 004, "Job Queue"): :class:`Replicator` is wired by the
  master daemon as the ConfigWriter's ``on_change`` and the JobStorage's
  ``replicate``/``replicate_rename``.  Config and job files go to the
  online master candidates other than the master; ssconf goes to every
  online node (and is written locally).  The network work runs in the
  replicator's own threads, coalesced (doc/design/replication.md); jobs
  wait for :meth:`Replicator.wait_replicated` before reporting success.
  When more than half of the targets fail, an error is logged, otherwise
  a warning.
* Hooks: see :mod:`ganeti.cmdlib.hooksrunner`.

Nodes are addressed by *name* in RPC calls (the resolver maps names to
addresses and skips offline nodes).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ganeti import constants, errors, ssconf
from ganeti.objects import Node, NodeGroup
from ganeti.pathutils import Paths
from ganeti.rpc.defs import to_canonical

__all__ = ["expand_node", "expand_group", "is_eligible", "candidate_stats",
           "adjust_candidate_pool", "decide_self_promotion", "node_role",
           "files_for_all_nodes", "upload_files", "redistribute", "Replicator",
           "report_failures", "cluster_hooks_nodes",
           "select_named"]

logger = logging.getLogger(__name__)

FeedbackFn = Callable[[str], None]

#: Seconds a replication fan-out may take: jobs wait for config replication
#: before reporting success, so a hung candidate must not stall them for a
#: full RPC timeout.
REPLICATION_TIMEOUT = 15.0
# How long the job replication thread leaves freshly queued job files for a
# config push (already pending or in flight) to carry in the same RPC.
JOB_LINGER = 0.05
#: seconds before resynchronising a candidate that missed job-file updates; it
#: doubles while the node keeps failing, up to QUEUE_RESYNC_MAX_INTERVAL
QUEUE_RESYNC_INTERVAL = 5.0
QUEUE_RESYNC_MAX_INTERVAL = 60.0


# --- names ----------------------------------------------------------------------

def expand_node(cfg: Any, name: str | None, uuid: str | None = None) -> Node:
    """The node called ``name`` (or with ``uuid``); OpPrereqError ECODE_NOENT if unknown."""
    node = None
    if uuid:
        node = cfg.get_node_info(uuid)
    if node is None and name:
        node = cfg.get_node_info_by_name(name)
        if node is None:
            # accept a unique short name ("node2" for "node2.example.com")
            matches = [n for n in cfg.get_all_nodes_info().values()
                       if n.name.split(".")[0] == name]
            node = matches[0] if len(matches) == 1 else None
    if node is None:
        raise errors.OpPrereqError(f"Node '{name or uuid}' is unknown", errors.ECODE_NOENT)
    return node


def expand_group(cfg: Any, name: str | None) -> NodeGroup:
    """The node group called ``name`` (or with that UUID); ECODE_NOENT if unknown.

    ``None`` gives the default group.
    """
    if name is None:
        return cfg.get_nodegroup(cfg.get_default_nodegroup())
    group = cfg.get_nodegroup_by_name(name) or cfg.get_nodegroup(name)
    if group is None:
        raise errors.OpPrereqError(f"Node group '{name}' is unknown", errors.ECODE_NOENT)
    return group


def select_named(items: Iterable[Any], names: list[Any] | None, what: str, *,
                 verdict: str = "unknown") -> list[Any]:
    """The ``items`` (objects with ``.name``) called ``names``, in that order.

    Without ``names`` (None or empty) all items, in their order.  Names that
    match no item raise :class:`errors.OpPrereqError` (ECODE_NOENT) with the
    message ``"<what> <missing names> <verdict>"``, e.g. "Node(s) x unknown".
    """
    items = list(items)
    if not names:
        return items
    by_name = {item.name: item for item in items}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise errors.OpPrereqError(f"{what} {', '.join(map(str, missing))} {verdict}",
                                   errors.ECODE_NOENT)
    return [by_name[n] for n in names]


def node_role(node: Node, master_uuid: str) -> str:
    """Ganeti's one-letter role: M (master), C, D (drained), O (offline), R."""
    if node.uuid == master_uuid:
        return constants.NR_MASTER
    if node.master_candidate:
        return constants.NR_MCANDIDATE
    if node.drained:
        return constants.NR_DRAINED
    if node.offline:
        return constants.NR_OFFLINE
    return constants.NR_REGULAR


# --- candidate pool ---------------------------------------------------------------

def is_eligible(node: Node) -> bool:
    """Whether ``node`` may be a master candidate."""
    return node.master_capable and not node.offline and not node.drained


def candidate_stats(cfg: Any, exceptions: Iterable[str] = ()) -> tuple[int, int, int]:
    """``(current candidates, desired, possible)`` ignoring nodes in ``exceptions`` (UUIDs)."""
    skip = set(exceptions)
    nodes = [n for n in cfg.get_all_nodes_info().values() if n.uuid not in skip]
    current = sum(1 for n in nodes if n.master_candidate)
    possible = sum(1 for n in nodes if is_eligible(n))
    pool = cfg.get_cluster_info().candidate_pool_size
    return current, min(pool, possible), possible


def decide_self_promotion(cfg: Any, exceptions: Iterable[str] = ()) -> bool:
    """Whether one more eligible node should become a candidate.

    The node in question is either not in the configuration yet (node add)
    or listed in ``exceptions`` (readd, modify): it is counted as one more
    eligible node on top of the others.
    """
    current, _, possible = candidate_stats(cfg, exceptions)
    pool = cfg.get_cluster_info().candidate_pool_size
    return current < min(pool, possible + 1)


def adjust_candidate_pool(cfg: Any, exceptions: Iterable[str] = (),
                          feedback_fn: FeedbackFn | None = None) -> list[str]:
    """Promote eligible nodes (sorted by name) until the pool is full.

    Nodes in ``exceptions`` (UUIDs) are never promoted.  Returns the names
    of the promoted nodes; each promotion is saved with ``cfg.update``.
    """
    skip = set(exceptions)
    current, desired, _ = candidate_stats(cfg, skip)
    promoted: list[str] = []
    if current >= desired:
        return promoted
    for node in sorted(cfg.get_all_nodes_info().values(), key=lambda n: n.name):
        if current >= desired:
            break
        if node.uuid in skip or node.master_candidate or not is_eligible(node):
            continue
        node.master_candidate = True
        cfg.update(node)
        current += 1
        promoted.append(node.name)
    if promoted and feedback_fn is not None:
        feedback_fn(f"Promoted nodes to master candidate role: {', '.join(promoted)}")
    if current < cfg.get_cluster_info().candidate_pool_size and feedback_fn is not None:
        _, _, possible = candidate_stats(cfg)
        if current < possible:
            feedback_fn(f"Master candidate pool has {current} nodes, fewer than possible")
    return promoted


# --- files ------------------------------------------------------------------------

def files_for_all_nodes(paths: Paths) -> list[str]:
    """Local cluster files every node gets (those that exist on the master)."""
    candidates = [paths.server_pem, paths.client_pem, paths.known_hosts_file, paths.rapi_pem,
                  paths.confd_hmac_key, paths.cluster_domain_secret, paths.rapi_users_file]
    return [p for p in candidates if os.path.isfile(p)]


def report_failures(what: str, results: dict[str, Any],
                    feedback_fn: FeedbackFn | None = None) -> list[str]:
    """Log per-node failures of one fan-out; returns the failing node names.

    More than half of the (non-offline) targets failing is an error in the
    log (seed 004), fewer a warning.
    """
    failed = [name for name, res in results.items() if res.fail_msg and not res.offline]
    tried = [name for name, res in results.items() if not res.offline]
    if failed:
        level = logging.ERROR if len(failed) * 2 > len(tried) else logging.WARNING
        for name in failed:
            logger.log(level, "%s failed on node %s: %s", what, name, results[name].fail_msg)
            if feedback_fn is not None:
                feedback_fn(f"Warning: {what} failed on node {name}: {results[name].fail_msg}")
    return failed


def upload_files(rpc: Any, paths: Paths, node_names: list[str], files: Iterable[str],
                 feedback_fn: FeedbackFn | None = None) -> list[str]:
    """Upload local ``files`` to ``node_names``; returns the nodes that failed any file."""
    failed: set[str] = set()
    if not node_names:
        return []
    for path in files:
        try:
            with open(path, encoding="utf-8") as fh:
                content = fh.read()
            mode = os.stat(path).st_mode & 0o7777
        except OSError as exc:
            logger.warning("Cannot read %s for distribution: %s", path, exc)
            continue
        canonical = to_canonical(paths.root, path)
        results = rpc.call_upload_file(node_names, canonical, content, mode, None, None, None)
        failed.update(report_failures(f"Upload of {canonical}", results, feedback_fn))
    return sorted(failed)


def _online_names(nodes: Iterable[Node], exclude: Iterable[str] = ()) -> list[str]:
    skip = set(exclude)
    return sorted(n.name for n in nodes if not n.offline and n.uuid not in skip)


def redistribute(context: Any, feedback_fn: FeedbackFn | None = None,
                 node_uuids: Iterable[str] | None = None) -> list[str]:
    """Push config (candidates), cluster files (all) and ssconf (all) to nodes.

    ``node_uuids`` restricts the targets (default: every online node other
    than the master).  Returns the names of nodes where something failed.
    """
    cfg, rpc, paths = context.cfg, context.rpc, context.paths
    master = cfg.get_master_node()
    nodes = [n for n in cfg.get_all_nodes_info().values() if n.uuid != master]
    if node_uuids is not None:
        wanted = set(node_uuids)
        nodes = [n for n in nodes if n.uuid in wanted]
    values = ssconf.compute_ssconf_values(cfg.get_config_data())
    ssconf.write_ssconf_files(paths, values)
    if rpc is None:
        return []
    all_names = _online_names(nodes)
    cand_names = _online_names(n for n in nodes if n.master_candidate)
    failed: set[str] = set()
    if cand_names:
        failed.update(upload_files(rpc, paths, cand_names, [paths.config_file], feedback_fn))
    if all_names:
        failed.update(upload_files(rpc, paths, all_names, files_for_all_nodes(paths),
                                   feedback_fn))
        res = rpc.call_write_ssconf_files(all_names, values)
        failed.update(report_failures("Writing ssconf files", res, feedback_fn))
    return sorted(failed)


# --- replication --------------------------------------------------------------------

def read_queue_files(paths: Paths) -> tuple[int, list[tuple[str, bytes]]]:
    """``(serial, files)``: the queue serial, then ``(path, content)`` of the
    unarchived job files, ``serial``, ``version`` and ``drain``.

    The serial is read first, so every job file created after the listing
    has a higher id.  Files that vanish meanwhile (archived) are skipped;
    any other error is raised (``OSError``): a partial list must never be
    taken for the whole queue.
    """
    try:
        with open(os.path.join(paths.queue_dir, "serial"), "rb") as fh:
            serial = int(fh.read().strip() or b"0")
    except FileNotFoundError:
        serial = 0
    except ValueError as exc:
        raise OSError(f"Unreadable queue serial: {exc}") from exc
    out = []
    for name in sorted(os.listdir(paths.queue_dir)):
        if not (name.startswith("job-") or name in ("serial", "version", "drain")):
            continue
        path = os.path.join(paths.queue_dir, name)
        try:
            with open(path, "rb") as fh:
                out.append((path, fh.read()))
        except FileNotFoundError:
            continue
    return serial, out


#: bytes of job files per request when a whole queue is copied to a candidate
QUEUE_COPY_CHUNK = 4 << 20


def copy_queue(rpc: Any, paths: Paths, node_names: list[str], *,
               timeout: float | None = None,
               still_wanted: Callable[[list[str]], list[str]] | None = None) -> list[str]:
    """Give ``node_names`` the master's whole unarchived queue; returns the nodes that failed.

    The files (read now) go in ``jobqueue_update_many`` requests of about
    :data:`QUEUE_COPY_CHUNK` bytes, the last part in ``jobqueue_sync``
    together with every top-level name and the queue serial, so the node
    then archives the job files (up to that serial) the master no longer
    has and drops a drain flag the master has not got.  ``still_wanted``
    filters the targets before each request (nodes that stopped being
    candidates meanwhile get nothing more).  If the master's queue cannot
    be read, nothing is sent and every target counts as failed.
    """
    targets = list(dict.fromkeys(node_names))
    try:
        serial, files = read_queue_files(paths)
    except OSError as exc:
        logger.error("Cannot read the job queue to copy it to %s: %s", ", ".join(targets), exc)
        return targets
    names = [os.path.basename(path) for path, _ in files]
    chunks: list[list[list[str]]] = [[]]
    size = 0
    for path, data in files:
        if chunks[-1] and size + len(data) > QUEUE_COPY_CHUNK:
            chunks.append([])
            size = 0
        chunks[-1].append([to_canonical(paths.root, path), data.decode("utf-8")])
        size += len(data)
    failed: list[str] = []
    for idx, chunk in enumerate(chunks):
        if still_wanted is not None:
            targets = still_wanted(targets)
        if not targets:
            break
        if idx < len(chunks) - 1:
            res = rpc.call("jobqueue_update_many", targets, [chunk], timeout=timeout)
        else:
            res = rpc.call("jobqueue_sync", targets, [chunk, names, serial], timeout=timeout)
        bad = report_failures("Job queue copy", res)
        failed.extend(bad)
        targets = [name for name in targets if name not in bad]
    return failed


class _ConfigPush:
    """One config state to replicate (the newest wins)."""

    __slots__ = ("serial", "data", "candidates", "nodes", "ssconf")

    def __init__(self, serial: int, data: bytes, candidates: list[str], nodes: list[str],
                 ssconf_values: dict[str, str]) -> None:
        self.serial = serial
        self.data = data
        self.candidates = candidates
        self.nodes = nodes
        self.ssconf = ssconf_values


class Replicator:
    """Keeps master candidates (config, queue) and nodes (ssconf) up to date.

    Design (doc/design/replication.md): nothing slow runs under the config
    lock or in the job queue's writer thread.  Two background threads
    (started on first use) do the network work and *coalesce*:

    * **config** (``on_config_change(cfg, data, serial)``, the
      ConfigWriter's ``on_change``, called in serial order once ``data``
      (holding ``serial``) is durable on the master, with the config lock
      held): records the newest ``(serial, bytes, targets, ssconf values)``
      and returns.  The config
      thread sends only the newest pending state: ``upload_file`` of
      ``config.data`` to the online candidates and, when the ssconf values
      changed, the local ssconf files plus ``write_ssconf_files`` to every
      online node, the two fan-outs in parallel.  Then it marks that serial
      replicated.  :meth:`wait_replicated` blocks until a serial (or a newer
      one) has been pushed: the processor calls it after ``Exec`` so a job
      never reports success before its config change reached the candidates.
    * **jobs** (``replicate_job_files(batch)`` after each group commit,
      ``replicate_rename(old, new)`` on archiving, ``replicate_drain_flag``,
      ``replicate_queue_to`` for new candidates): an ordered list of
      operations; consecutive updates merge into one ``{file: content}``
      (latest content per file wins), renames keep their place relative to
      updates.  Each update segment is one ``jobqueue_update_many`` RPC per
      candidate (all candidates in parallel), each rename segment one
      ``jobqueue_rename``.

    A config push to the candidates is one ``replicate_state`` RPC each,
    carrying the config bytes, the ssconf values when they changed, and
    the first pending job-file update segment (so a job's files and its
    config change usually travel together).  While a config push is
    pending or in flight the job thread lingers up to :data:`JOB_LINGER`
    before sending job files on its own.  Job-file sends never overlap
    (``_job_busy``), so a candidate gets each file's versions in order.

    Failures are logged by :func:`report_failures` (more than half of the
    targets failing is an error, seed 004); a later push sends the full
    newest data again, so a candidate that missed one catches up.  A
    candidate that missed a job-file operation is *stale*: after
    :data:`QUEUE_RESYNC_INTERVAL` seconds (doubling while it keeps failing,
    up to :data:`QUEUE_RESYNC_MAX_INTERVAL`) the job thread sends it the
    whole queue (:func:`copy_queue`; what it holds beyond that, up to the
    master's serial, gets archived), after the pending operations or on
    its own when the queue is idle; :meth:`flush` waits for such a copy.  Without
    RPC only the local ssconf files are written.  :meth:`flush` waits for
    everything queued so far; :meth:`stop` flushes and ends the threads.
    """

    def __init__(self, paths: Paths, rpc: Any, *, timeout: float = REPLICATION_TIMEOUT,
                 job_linger: float = JOB_LINGER) -> None:
        self.paths = paths
        self.rpc = rpc
        self.timeout = timeout
        self.job_linger = job_linger
        self._lock = threading.Lock()
        self._candidates: list[str] = []
        self._nodes: list[str] = []
        self._last_ssconf: dict[str, str] | None = None
        self._cond = threading.Condition()
        self._stopped = False
        # config state (under _cond)
        self._cfg_pending: _ConfigPush | None = None
        self._cfg_queued_serial = 0
        self._cfg_done_serial = 0
        self._cfg_busy = False
        self._cfg_thread: threading.Thread | None = None
        # job files (under _cond): [kind, payload, upto] with kind "update"
        # ({path: bytes}), "rename" ([(old, new)]), "sync" ([node names]) or
        # "drain" ([flags], the last wins); upto = _job_queued after
        # the last operation merged into the segment
        self._job_ops: list[list[Any]] = []
        self._job_queued = 0
        self._job_done = 0
        self._job_busy = False
        self._job_thread: threading.Thread | None = None
        # candidates that missed a job-file operation (under _lock)
        self._queue_stale: set[str] = set()
        self._resync_at = 0.0
        self._resync_backoff = QUEUE_RESYNC_INTERVAL

    # targets ---------------------------------------------------------------------
    def refresh_targets(self, cfg: Any) -> None:
        """Recompute the candidate and node lists from ``cfg``."""
        data = cfg.get_config_data()
        master = data.cluster.master_node
        others = [n for n in data.nodes.values() if n.uuid != master]
        with self._lock:
            self._candidates = _online_names(n for n in others if n.master_candidate)
            self._nodes = _online_names(others)

    def targets(self) -> tuple[list[str], list[str]]:
        """``(candidates, all other online nodes)`` as node names."""
        with self._lock:
            return list(self._candidates), list(self._nodes)

    # threads -----------------------------------------------------------------------
    def _ensure_thread(self, attr: str, target: Callable[[], None], name: str) -> None:
        # called with _cond held; after stop() the caller's thread does the work
        if self._stopped:
            return
        thread = getattr(self, attr)
        if thread is None or not thread.is_alive():
            thread = threading.Thread(target=target, name=name, daemon=True)
            setattr(self, attr, thread)
            thread.start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far was sent; False on timeout."""
        with self._cond:
            cfg_target, job_target = self._cfg_queued_serial, self._job_queued
            return self._cond.wait_for(
                lambda: self._cfg_done_serial >= cfg_target and self._job_done >= job_target,
                timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Flush (up to ``timeout``), then end the threads; True if all was sent."""
        done = self.flush(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for thread in (self._cfg_thread, self._job_thread):
            if thread is not None:
                thread.join(timeout=5)
        return done

    # config ------------------------------------------------------------------------
    def on_config_change(self, cfg: Any, data: bytes, serial: int) -> None:
        """ConfigWriter ``on_change``: queue ``data``, the bytes of config ``serial``.

        ``serial`` is the one written in ``data`` (with group commit the
        in-memory config may already be newer, never older).  Called with
        the config lock held, so the targets and ssconf values read here are
        consistent; they may belong to a newer serial than ``data``, which
        is harmless: the push of that newer serial follows.  A serial older
        than one already queued is ignored.  Returns at once.
        """
        self.refresh_targets(cfg)
        values = ssconf.compute_ssconf_values(cfg.get_config_data())
        candidates, nodes = self.targets()
        push = _ConfigPush(serial, data, candidates, nodes, values)
        with self._cond:
            if serial <= self._cfg_queued_serial:
                return      # stale (out of order): never replace newer bytes
            self._cfg_pending = push
            self._cfg_queued_serial = max(self._cfg_queued_serial, serial)
            self._ensure_thread("_cfg_thread", self._config_loop, "replicator-config")
            self._cond.notify_all()
            inline = self._stopped
        if inline:
            self._config_loop(once=True)

    def replicated_serial(self) -> int:
        """The newest config serial whose replication has been attempted."""
        with self._cond:
            return self._cfg_done_serial

    def wait_replicated(self, serial: int, timeout: float | None = None) -> bool:
        """Wait until config ``serial`` (or newer) was pushed to the candidates.

        Returns False when ``timeout`` (default: twice the RPC timeout plus
        five seconds, as one push may be in flight before ours) runs out or
        the serial was never queued (a failed local write).  Per-node
        failures of the push do not make it False: they are logged.
        """
        if timeout is None:
            timeout = 2 * self.timeout + 5.0
        with self._cond:
            if serial > self._cfg_queued_serial:
                return False    # never handed to us (failed local write, not wired)
            return self._cond.wait_for(lambda: self._cfg_done_serial >= serial, timeout)

    def _config_loop(self, once: bool = False) -> None:
        while True:
            with self._cond:
                if once:
                    self._cond.wait_for(lambda: not self._cfg_busy)
                else:
                    self._cond.wait_for(lambda: self._cfg_pending is not None or self._stopped)
                push = self._cfg_pending
                if push is None:
                    return
                self._cfg_pending = None
                self._cfg_busy = True
                files: dict[str, bytes] | None = None
                upto = 0
                if not once and not self._job_busy and self._job_ops \
                        and self._job_ops[0][0] == "update":
                    _, files, upto = self._job_ops.pop(0)
                    self._job_busy = True
            try:
                self._push_config(push, files or {})
            except Exception:  # the thread must survive anything
                logger.exception("Configuration replication of serial %s failed", push.serial)
            with self._cond:
                self._cfg_busy = False
                self._cfg_done_serial = max(self._cfg_done_serial, push.serial)
                if files is not None:
                    self._job_busy = False
                    self._job_done = max(self._job_done, upto)
                self._cond.notify_all()
            if once:
                return

    def _push_config(self, push: _ConfigPush, files: dict[str, bytes]) -> None:
        """Send ``push`` (and the job ``files`` it carries) to its targets."""
        values = push.ssconf
        ssconf_changed = values != self._last_ssconf
        if ssconf_changed:
            ssconf.write_ssconf_files(self.paths, values)
        if self.rpc is None:
            self._last_ssconf = values
            return
        ssconf_failed: list[str] = []
        worker: threading.Thread | None = None
        others = [n for n in push.nodes if n not in push.candidates]
        if others and ssconf_changed:
            def _ssconf() -> None:
                res = self.rpc.call("write_ssconf_files", others, [values],
                                    timeout=self.timeout)
                ssconf_failed.extend(report_failures("ssconf update", res))
            worker = threading.Thread(target=_ssconf, name="replicator-ssconf", daemon=True)
            worker.start()
        if push.candidates:
            canonical = to_canonical(self.paths.root, self.paths.config_file)
            items = [[to_canonical(self.paths.root, path), data.decode("utf-8")]
                     for path, data in files.items()]
            res = self.rpc.call("replicate_state", push.candidates,
                                [[canonical, push.data.decode("utf-8")],
                                 values if ssconf_changed else None, items],
                                timeout=self.timeout)
            failed = report_failures("Configuration replication", res)
            if items:
                self._mark_stale(failed)   # they missed the job files it carried
            if ssconf_changed:
                ssconf_failed.extend(failed)
        if worker is not None:
            worker.join(self.timeout + 5.0)
            if worker.is_alive():
                ssconf_failed.append("(timeout)")
        # a failed node gets the values again with the next change
        self._last_ssconf = None if ssconf_failed else values

    # job files -----------------------------------------------------------------------
    def replicate_job_files(self, batch: dict[str, bytes]) -> None:
        """Queue the files of one committed batch ``{path: content}``; returns at once."""
        if batch:
            self._queue_job_op("update", dict(batch))

    def replicate_job_file(self, path: str, data: bytes) -> None:
        """Queue one job queue file (see :meth:`replicate_job_files`)."""
        self.replicate_job_files({path: data})

    def replicate_rename(self, old: str, new: str) -> None:
        """Queue the rename of a job queue file (archiving), ordered after earlier updates."""
        self._queue_job_op("rename", [(old, new)])

    def replicate_drain_flag(self, flag: bool) -> None:
        """Queue setting (True) or clearing (False) the candidates' queue drain flag."""
        self._queue_job_op("drain", [bool(flag)])

    def replicate_queue_to(self, node_names: Iterable[str]) -> None:
        """Queue a copy of the whole (unarchived) job queue to new candidates.

        Ordered like every other job-file operation: the files are read from
        the master's disk when the copy is sent, and any update queued after
        this call is sent after it, so a new candidate never ends with a
        version older than the master's (as a copy sent outside this stream,
        racing with a newer update, could leave it).
        """
        names = list(dict.fromkeys(node_names))
        if names:
            self._queue_job_op("sync", names)

    def _queue_job_op(self, kind: str, payload: dict[str, bytes] | list[Any]) -> None:
        # merges into the last segment when it is of the same kind (order is kept)
        with self._cond:
            self._job_queued += 1
            if self._job_ops and self._job_ops[-1][0] == kind:
                last = self._job_ops[-1]
                if kind == "update":
                    last[1].update(payload)
                else:
                    last[1].extend(payload)
                last[2] = self._job_queued
            else:
                self._job_ops.append([kind, payload, self._job_queued])
            self._ensure_thread("_job_thread", self._job_loop, "replicator-jobs")
            self._cond.notify_all()
            inline = self._stopped
        if inline:
            self._job_loop(once=True)

    def _job_loop(self, once: bool = False) -> None:
        while True:
            with self._cond:
                if once:
                    self._cond.wait_for(lambda: not self._job_busy)
                else:
                    # idle with a stale candidate: wake up for its next resync
                    self._cond.wait_for(
                        lambda: bool(self._job_ops) or self._stopped or self._resync_due(),
                        self._resync_wait())
                    if self._cfg_pending is not None or self._cfg_busy:
                        # a config push may carry them: give it a moment
                        self._cond.wait_for(
                            lambda: self._stopped or not self._job_ops
                            or (self._cfg_pending is None and not self._cfg_busy),
                            self.job_linger)
                    self._cond.wait_for(lambda: not self._job_busy or self._stopped)
                resync_only = not self._job_ops and not self._job_busy \
                    and not once and not self._stopped and self._resync_due()
                if (not self._job_ops and not resync_only) or self._job_busy:
                    if once or self._stopped:
                        return
                    continue
                self._job_busy = True
                ops, self._job_ops = self._job_ops, []
                if ops:
                    upto = ops[-1][2]
                else:   # a resync on its own: flush() waits for it like for an operation
                    self._job_queued += 1
                    upto = self._job_queued
            for kind, payload, _ in ops:
                try:
                    if kind == "update":
                        self._send_updates(payload)
                    elif kind == "sync":
                        self._send_queue(payload)
                    elif kind == "drain":
                        self._send_drain(payload[-1])   # the last setting wins
                    else:
                        self._send_renames(payload)
                except Exception:
                    logger.exception("Job queue replication failed")
            try:
                self._resync_stale()
            except Exception:
                logger.exception("Job queue resynchronisation failed")
            with self._cond:
                self._job_busy = False
                self._job_done = max(self._job_done, upto)
                self._cond.notify_all()
            if once:
                return

    def _send_updates(self, files: dict[str, bytes]) -> None:
        candidates, _ = self.targets()
        if self.rpc is None or not candidates:
            return
        items = [[to_canonical(self.paths.root, path), data.decode("utf-8")]
                 for path, data in files.items()]
        res = self.rpc.call("jobqueue_update_many", candidates, [items], timeout=self.timeout)
        names = ", ".join(sorted(os.path.basename(p) for p in files))
        self._mark_stale(report_failures(f"Job queue replication of {names}", res))

    def _mark_stale(self, node_names: Iterable[str]) -> None:
        """Remember candidates that missed a job-file operation.

        The first resync comes one backoff interval later (an immediate one
        would most likely fail the same way, and could cross a request of
        the failed operation still running on the node).
        """
        names = set(node_names)
        if not names:
            return
        with self._lock:
            if not self._queue_stale:
                self._resync_at = time.monotonic() + self._resync_backoff
            self._queue_stale.update(names)

    def _resync_due(self) -> bool:
        with self._lock:
            return bool(self._queue_stale) and time.monotonic() >= self._resync_at

    def _resync_wait(self) -> float | None:
        """Seconds until a stale candidate's next resync (None: nobody is stale)."""
        with self._lock:
            if not self._queue_stale:
                return None
            return max(0.05, self._resync_at - time.monotonic())

    def _resync_stale(self) -> None:
        """Send the whole queue to candidates that missed an operation.

        Runs after the operations taken from the list, so it reads files at
        least as new as any of them (or on its own when the queue is idle);
        at most every :data:`QUEUE_RESYNC_INTERVAL` seconds while a node keeps
        failing.  Nodes that are no longer candidates are forgotten.
        """
        candidates, _ = self.targets()
        with self._lock:
            if not self._queue_stale or time.monotonic() < self._resync_at:
                return
            stale = sorted(self._queue_stale & set(candidates))
            self._queue_stale.clear()
        if not stale:
            return
        logger.info("Resynchronising the job queue of %s", ", ".join(stale))
        self._send_queue(stale)
        with self._lock:
            if self._queue_stale:     # still failing: back off (doubling, bounded)
                self._resync_backoff = min(self._resync_backoff * 2, QUEUE_RESYNC_MAX_INTERVAL)
                self._resync_at = time.monotonic() + self._resync_backoff
            else:
                self._resync_backoff = QUEUE_RESYNC_INTERVAL

    def _send_queue(self, node_names: list[str]) -> None:
        # only to current candidates (re-checked before each part): the targets
        # are refreshed by the config change that promoted a node before its
        # LU asks for the copy
        if self.rpc is None:
            return

        def still_wanted(names: list[str]) -> list[str]:
            candidates = set(self.targets()[0])
            return [name for name in names if name in candidates]

        self._mark_stale(copy_queue(self.rpc, self.paths, list(node_names),
                                    timeout=self.timeout, still_wanted=still_wanted))

    def _send_drain(self, flag: bool) -> None:
        candidates, _ = self.targets()
        if self.rpc is None or not candidates:
            return
        res = self.rpc.call("jobqueue_set_drain_flag", candidates, [flag], timeout=self.timeout)
        self._mark_stale(report_failures("Job queue drain flag replication", res))

    def _send_renames(self, pairs: list[tuple[str, str]]) -> None:
        candidates, _ = self.targets()
        if self.rpc is None or not candidates:
            return
        rename = [[to_canonical(self.paths.root, old), to_canonical(self.paths.root, new)]
                  for old, new in pairs]
        res = self.rpc.call("jobqueue_rename", candidates, [rename], timeout=self.timeout)
        self._mark_stale(report_failures("Job queue rename replication", res))


# --- hooks ----------------------------------------------------------------------------

def cluster_hooks_nodes(cfg: Any) -> tuple[list[str], list[str]]:
    """``([master], [master])``: where cluster-level hooks run."""
    master = cfg.get_master_node_name()
    return ([master], [master]) if master else ([], [])

