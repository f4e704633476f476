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
  online node (and is written locally).  When more than half of the
  targets fail, an error is logged, otherwise a warning.
* Hooks: :class:`HooksRunner` is ``context.hooks_runner``.

Nodes are addressed by *name* in RPC calls (the resolver maps names to
addresses and skips offline nodes).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ganeti import constants, errors, ssconf
from ganeti.hooksmaster import HooksMaster
from ganeti.objects import Node, NodeGroup
from ganeti.pathutils import Paths
from ganeti.rpc.defs import to_canonical

__all__ = ["expand_node", "expand_group", "is_eligible", "candidate_stats",
           "adjust_candidate_pool", "decide_self_promotion", "node_role",
           "files_for_all_nodes", "upload_files", "redistribute", "Replicator",
           "HooksRunner", "report_failures", "cluster_hooks_nodes"]

logger = logging.getLogger(__name__)

FeedbackFn = Callable[[str], None]

#: Seconds a replication fan-out may take: it runs under the config lock, so a
#: hung candidate must not stall every config change for a full RPC timeout.
REPLICATION_TIMEOUT = 15.0


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

class Replicator:
    """Keeps master candidates (config, queue) and nodes (ssconf) up to date.

    ``on_config_change(data)`` is the ConfigWriter ``on_change`` callback;
    ``replicate_job_file(path, data)`` and ``replicate_rename(old, new)`` are
    the JobStorage callbacks.  The target lists are recomputed from the
    config on every config change (so job replication never takes the
    config lock).  Without RPC only the local ssconf files are written.
    """

    def __init__(self, paths: Paths, rpc: Any, *, timeout: float = REPLICATION_TIMEOUT) -> None:
        self.paths = paths
        self.rpc = rpc
        self.timeout = timeout
        self._lock = threading.Lock()
        self._candidates: list[str] = []
        self._nodes: list[str] = []
        self._last_ssconf: dict[str, str] | None = None

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

    def on_config_change(self, cfg: Any, data: bytes) -> None:
        """Replicate ``config.data`` bytes to candidates; ssconf to every node."""
        self.refresh_targets(cfg)
        values = ssconf.compute_ssconf_values(cfg.get_config_data())
        ssconf_changed = values != self._last_ssconf
        if ssconf_changed:
            ssconf.write_ssconf_files(self.paths, values)
        candidates, nodes = self.targets()
        if self.rpc is None:
            self._last_ssconf = values
            return
        if candidates:
            canonical = to_canonical(self.paths.root, self.paths.config_file)
            res = self.rpc.call("upload_file", candidates,
                                [canonical, data.decode("utf-8"), 0o640, None, None, None],
                                timeout=self.timeout)
            report_failures("Configuration replication", res)
        if nodes and ssconf_changed:
            res = self.rpc.call("write_ssconf_files", nodes, [values], timeout=self.timeout)
            failed = report_failures("ssconf update", res)
            if not failed:
                self._last_ssconf = values
            else:
                self._last_ssconf = None
        elif ssconf_changed:
            self._last_ssconf = values

    def replicate_job_file(self, path: str, data: bytes) -> None:
        """Send one job queue file to the candidates."""
        candidates, _ = self.targets()
        if self.rpc is None or not candidates:
            return
        canonical = to_canonical(self.paths.root, path)
        res = self.rpc.call("jobqueue_update", candidates, [canonical, data.decode("utf-8")],
                            timeout=self.timeout)
        report_failures(f"Job queue replication of {os.path.basename(path)}", res)

    def replicate_rename(self, old: str, new: str) -> None:
        """Rename a job queue file on the candidates (archiving)."""
        candidates, _ = self.targets()
        if self.rpc is None or not candidates:
            return
        rename = [[to_canonical(self.paths.root, old), to_canonical(self.paths.root, new)]]
        res = self.rpc.call("jobqueue_rename", candidates, [rename], timeout=self.timeout)
        report_failures("Job queue rename replication", res)


# --- hooks ----------------------------------------------------------------------------

def cluster_hooks_nodes(cfg: Any) -> tuple[list[str], list[str]]:
    """``([master], [master])``: where cluster-level hooks run."""
    master = cfg.get_master_node_name()
    return ([master], [master]) if master else ([], [])


class HooksRunner:
    """``context.hooks_runner``: runs an LU's hooks through the ``hooks_runner`` RPC.

    The processor calls :meth:`run_hooks` with the pre phase before
    ``Exec`` (a failing script raises :class:`errors.HooksAbort`) and with
    the post phase after it (failures are logged).  The HooksMaster of the
    pre phase is kept on the LU so the post phase sees the same
    environment plus the ``GANETI_POST_*`` values.
    """

    def __init__(self, cfg: Any, rpc: Any) -> None:
        self.cfg = cfg
        self.rpc = rpc

    def _master(self, lu: Any, feedback_fn: FeedbackFn | None) -> HooksMaster:
        hm = getattr(lu, "_hooks_master", None)
        if hm is None:
            cluster = self.cfg.get_cluster_info()
            hm = HooksMaster.from_lu(lu, self.rpc.call_hooks_runner, cluster.cluster_name,
                                     self.cfg.get_master_node_name(), log_fn=feedback_fn)
            lu._hooks_master = hm
        return hm

    def run_hooks(self, lu: Any, phase: str, feedback_fn: FeedbackFn | None = None) -> Any:
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

    def run_path(self, lu: Any, hpath: str, htype: str, phase: str,
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
