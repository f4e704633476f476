"""Helpers shared by the cluster, node and group logical units.

* Name expansion: :func:`expand_node`, :func:`expand_group`; nodes and
  instances also by a unique short name (:func:`find_node`,
  :func:`find_instance`, :mod:`ganeti.utils.names`).
* The master candidate pool: :func:`candidate_stats`,
  :func:`adjust_candidate_pool`, :func:`decide_self_promotion`.  A node is
  *eligible* when it is master capable, online and not drained; the pool
  is kept at ``min(candidate_pool_size, eligible nodes)``.
* Distribution of cluster files (:func:`redistribute`): ``config.data`` to
  the master candidates, certificates and ``known_hosts`` to every node,
  ssconf to every online node.
* Replication of config, ssconf and job files while the master runs is
  :mod:`ganeti.replication` (the master daemon wires it); per-node
  failures of a fan-out are logged by its :func:`report_failures`.
* Hooks: see :mod:`ganeti.cmdlib.hooksrunner`.
* The cluster domain secret of moves between clusters:
  :func:`read_domain_secret`.

Nodes are addressed by *name* in RPC calls (the resolver maps names to
addresses and skips offline nodes).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from ganeti import constants, errors, ssconf
from ganeti.aliases import FeedbackFn
from ganeti.config import ConfigReader, ConfigWriter
from ganeti.context import MasterContext
from ganeti.objects import Instance, Node, NodeGroup
from ganeti.pathutils import Paths
from ganeti.replication import report_failures
from ganeti.replication.core import REPLICATION_TIMEOUT
from ganeti.rpc.client import RpcRunner
from ganeti.rpc.defs import to_canonical
from ganeti.utils.names import match_name

__all__ = ["expand_node", "expand_group", "find_node", "find_instance", "is_eligible", "candidate_stats",
           "adjust_candidate_pool", "decide_self_promotion", "node_role",
           "files_for_all_nodes", "upload_files", "redistribute",
           "cluster_hooks_nodes", "select_named", "read_domain_secret"]

logger = logging.getLogger(__name__)


# --- names ----------------------------------------------------------------------

def find_node(cfg: ConfigReader, name: str) -> Node | None:
    """The node called ``name``, with that UUID, or with that unique short name."""
    node = cfg.get_node_info_by_name(name) or cfg.get_node_info(name)
    if node is None:
        full = match_name(name, cfg.get_node_names())
        node = cfg.get_node_info_by_name(full) if full else None
    return node


def find_instance(cfg: ConfigReader, name: str) -> Instance | None:
    """The instance called ``name`` or with that unique short name ("web" for
    "web.example.com", as the CLI and RAPI accept)."""
    inst = cfg.get_instance_info_by_name(name)
    if inst is None:
        full = match_name(name, cfg.get_instance_names())
        inst = cfg.get_instance_info_by_name(full) if full else None
    return inst


def expand_node(cfg: ConfigWriter, name: str | None, uuid: str | None = None) -> Node:
    """The node called ``name`` (or with ``uuid``, or a unique short name);
    OpPrereqError ECODE_NOENT if unknown."""
    node = None
    if uuid:
        node = cfg.get_node_info(uuid)
    if node is None and name:
        node = find_node(cfg, name)
    if node is None:
        raise errors.OpPrereqError(f"Node '{name or uuid}' is unknown", errors.ECODE_NOENT)
    return node


def expand_group(cfg: ConfigWriter, name: str | None) -> NodeGroup:
    """The node group called ``name`` (or with that UUID); ECODE_NOENT if unknown.

    ``None`` gives the default group.
    """
    if name is None:
        group = cfg.get_nodegroup(cfg.get_default_nodegroup())
        if group is None:  # the UUID comes from the same config
            raise errors.ConfigurationError("The default node group is not in the configuration")
        return group
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


def candidate_stats(cfg: ConfigWriter, exceptions: Iterable[str] = ()) -> tuple[int, int, int]:
    """``(current candidates, desired, possible)`` ignoring nodes in ``exceptions`` (UUIDs)."""
    skip = set(exceptions)
    nodes = [n for n in cfg.get_all_nodes_info().values() if n.uuid not in skip]
    current = sum(1 for n in nodes if n.master_candidate)
    possible = sum(1 for n in nodes if is_eligible(n))
    pool = cfg.get_cluster_info().candidate_pool_size
    return current, min(pool, possible), possible


def decide_self_promotion(cfg: ConfigWriter, exceptions: Iterable[str] = ()) -> bool:
    """Whether one more eligible node should become a candidate.

    The node in question is either not in the configuration yet (node add)
    or listed in ``exceptions`` (readd, modify): it is counted as one more
    eligible node on top of the others.
    """
    current, _, possible = candidate_stats(cfg, exceptions)
    pool = cfg.get_cluster_info().candidate_pool_size
    return current < min(pool, possible + 1)


def adjust_candidate_pool(cfg: ConfigWriter, exceptions: Iterable[str] = (),
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
                  paths.confd_hmac_key, paths.cluster_domain_secret, paths.rapi_users_file,
                  paths.rapi_tokens_file]
    return [p for p in candidates if os.path.isfile(p)]


def upload_files(rpc: RpcRunner, paths: Paths, node_names: list[str], files: Iterable[str],
                 feedback_fn: FeedbackFn | None = None,
                 rpc_timeout: float | None = None) -> list[str]:
    """Upload local ``files`` to ``node_names``; returns the nodes that failed any file.

    ``rpc_timeout`` bounds each upload (default: the procedure's own)."""
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
        results = rpc.call_upload_file(
            node_names, file_name=canonical, content=content, mode=mode, uid=None, gid=None,
            mtime=None, rpc_timeout=rpc_timeout)
        failed.update(report_failures(f"Upload of {canonical}", results, feedback_fn))
    return sorted(failed)


def _online_names(nodes: Iterable[Node], exclude: Iterable[str] = ()) -> list[str]:
    skip = set(exclude)
    return sorted(n.name for n in nodes if not n.offline and n.uuid not in skip)


def redistribute(context: MasterContext, feedback_fn: FeedbackFn | None = None,
                 node_uuids: Iterable[str] | None = None) -> list[str]:
    """Push config (candidates), cluster files (all) and ssconf (all) to nodes.

    ``node_uuids`` restricts the targets (default: every online node other
    than the master).  Returns the names of nodes where something failed.
    """
    cfg, rpc, paths = context.require_cfg(), context.rpc, context.paths
    master = cfg.get_master_node()
    nodes = [n for n in cfg.get_all_nodes_info().values() if n.uuid != master]
    if node_uuids is not None:
        wanted = set(node_uuids)
        nodes = [n for n in nodes if n.uuid in wanted]
    failed: set[str] = set()
    if rpc is not None and nodes:
        failed.update(upload_files(rpc, paths, _online_names(nodes), files_for_all_nodes(paths),
                                   feedback_fn))
    if context.replicator is None:
        failed.update(_push_config(cfg, rpc, paths, nodes, feedback_fn))
    else:
        # the replicator writes config and ssconf too, from its own thread: take its
        # lane, so that what is read here never lands after a newer push; bounded
        # like the replicator's own pushes, as they wait meanwhile
        # (doc/design/replication.md, "Redistribution")
        try:
            with context.replicator.config_lane():
                failed.update(_push_config(cfg, rpc, paths, nodes, feedback_fn,
                                           REPLICATION_TIMEOUT))
        except errors.OpExecError as exc:
            # the lane stayed busy: as a failed upload (the caller says how to retry)
            logger.warning("Configuration and ssconf not redistributed: %s", exc)
            if feedback_fn is not None:
                feedback_fn(f"Configuration and ssconf not redistributed: {exc}")
            failed.update(_online_names(nodes))
    return sorted(failed)


def _push_config(cfg: ConfigWriter, rpc: RpcRunner | None, paths: Paths, nodes: list[Node],
                 feedback_fn: FeedbackFn | None,
                 rpc_timeout: float | None = None) -> set[str]:
    """Config file (candidates) and ssconf (every online node, the master's own
    files too) as they are on disk now; the nodes where either failed."""
    # exactly what is on disk (the callers' own changes are durable by now)
    values = ssconf.compute_ssconf_values(cfg.committed().get_config_data())
    ssconf.write_ssconf_files(paths, values)
    failed: set[str] = set()
    all_names = _online_names(nodes)
    if rpc is None or not all_names:
        return failed
    cand_names = _online_names(n for n in nodes if n.master_candidate)
    if cand_names:
        failed.update(upload_files(rpc, paths, cand_names, [paths.config_file], feedback_fn,
                                   rpc_timeout))
    res = rpc.call_write_ssconf_files(all_names, values=values, rpc_timeout=rpc_timeout)
    failed.update(report_failures("Writing ssconf files", res, feedback_fn))
    return failed


# --- hooks ----------------------------------------------------------------------------

def cluster_hooks_nodes(cfg: ConfigWriter) -> tuple[list[str], list[str]]:
    """``([master], [master])``: where cluster-level hooks run."""
    master = cfg.get_master_node_name()
    return ([master], [master]) if master else ([], [])


def read_domain_secret(paths: Paths) -> str:
    """The cluster domain secret; OpPrereqError when it cannot be read."""
    try:
        with open(paths.cluster_domain_secret, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError as exc:
        raise errors.OpPrereqError(f"Cannot read the cluster domain secret: {exc}",
                                   errors.ECODE_ENVIRON) from exc
