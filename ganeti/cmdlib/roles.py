"""Node roles beyond the config flags: candidate demotion and the master IP.

Master candidate demotion
-------------------------
A node that stops being a master candidate (``gnt-node modify -C no``,
auto-demotion by ``-O yes``/``-D yes``/``--master-capable no``, or a
smaller ``candidate_pool_size``) no longer receives config replication
(the :class:`~ganeti.replication.Replicator` targets only candidates), so
its ``config.data`` would go stale: :func:`demote_from_candidates` calls
``node_demote_from_mc`` there, which backs the file up and removes it.
:func:`shrink_candidate_pool` picks the candidates to demote when the pool
size was lowered.  A promoted node gets the current config again from the
LU that promoted it (``redistribute``) and from the replicator.

Master IP
---------
:func:`master_ip_params` describes the master IP from the config;
:func:`activate_master_ip` / :func:`deactivate_master_ip` run
``node_activate_master_ip`` / ``node_deactivate_master_ip`` on the master
node (the node side runs the setup script, see ``backend.masterip``).
With an empty ``master_netdev`` they do nothing and return False.
:class:`LUClusterActivateMasterIp` / :class:`LUClusterDeactivateMasterIp`
run them as opcodes, with the ``master-ip-turnup`` / ``master-ip-turndown``
hooks on the master node.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, TypeVar

from ganeti import constants, errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.common import cluster_hooks_nodes
from ganeti.config import ConfigWriter
from ganeti.context import MasterContext
from ganeti.opcodes.cluster import OpClusterActivateMasterIp, OpClusterDeactivateMasterIp
from ganeti.replication import REPLICATION_TIMEOUT
from ganeti.rpc.client import RpcRunner

__all__ = ["shrink_candidate_pool", "demote_from_candidates", "master_ip_params",
           "master_ip_hooks_env", "activate_master_ip", "deactivate_master_ip",
           "LUClusterActivateMasterIp", "LUClusterDeactivateMasterIp",
           "DEMOTE_FLUSH_TIMEOUT"]

logger = logging.getLogger(__name__)

#: Seconds to wait for replication in flight before a node drops its config.
DEMOTE_FLUSH_TIMEOUT = 2 * REPLICATION_TIMEOUT + 5.0
_AF_INET6 = 10


# --- master candidate demotion ---------------------------------------------------

def shrink_candidate_pool(cfg: ConfigWriter, feedback_fn: FeedbackFn | None = None) -> list[str]:
    """Demote candidates beyond ``candidate_pool_size`` (the master counts and stays).

    Non-master candidates are demoted in reverse name order (the opposite
    of ``adjust_candidate_pool``), each saved with ``cfg.update``.  Returns
    the demoted names; the caller then runs :func:`demote_from_candidates`.
    """
    master = cfg.get_master_node()
    pool = cfg.get_cluster_info().candidate_pool_size
    nodes = list(cfg.get_all_nodes_info().values())
    current = sum(1 for n in nodes if n.master_candidate)
    demoted: list[str] = []
    for node in sorted(nodes, key=lambda n: n.name, reverse=True):
        if current <= pool:
            break
        if node.uuid == master or not node.master_candidate:
            continue
        node.master_candidate = False
        cfg.update(node)
        current -= 1
        demoted.append(node.name)
    if demoted and feedback_fn is not None:
        feedback_fn(f"Demoted nodes from the master candidate role: {', '.join(demoted)}")
    return demoted


def demote_from_candidates(context: MasterContext, node_names: Iterable[str],
                           warn_fn: FeedbackFn | None = None) -> list[str]:
    """Make the demoted ``node_names`` drop their ``config.data``.

    Call it once the configuration that demoted them is saved: replication
    in flight is flushed first (bounded by :data:`DEMOTE_FLUSH_TIMEOUT`), so
    no push still aimed at a node as a candidate recreates the file later.
    Offline nodes are skipped by the RPC layer.  Failures are logged and
    given to ``warn_fn``; they never fail the operation.  Returns the names
    of the nodes where the call failed.
    """
    names = sorted(set(node_names))
    rpc = context.rpc
    if not names or rpc is None:
        return []
    flush = getattr(getattr(context, "replicator", None), "flush", None)
    if flush is not None and not flush(DEMOTE_FLUSH_TIMEOUT):
        logger.warning("Replication still in flight while demoting %s", ", ".join(names))
    results = rpc.call_node_demote_from_mc(names)
    failed = []
    for name in names:
        res = results.get(name)
        if res is None or res.offline:
            continue
        if res.fail_msg:
            failed.append(name)
            msg = f"Could not demote node {name} from master candidate: {res.fail_msg}"
            logger.warning("%s", msg)
            if warn_fn is not None:
                warn_fn(msg)
        else:
            logger.info("Node %s dropped its configuration (backup %s)", name, res.payload)
    return failed


# --- master IP ----------------------------------------------------------------------

def master_ip_params(cfg: ConfigWriter) -> dict[str, Any]:
    """``{uuid, name, ip, netmask, netdev, ip_family}`` of the master IP, from ``cfg``."""
    cluster = cfg.get_cluster_info()
    return {"uuid": cluster.master_node, "name": cfg.get_master_node_name(),
            "ip": cluster.master_ip, "netmask": cluster.master_netmask,
            "netdev": cluster.master_netdev, "ip_family": cluster.primary_ip_family}


def master_ip_hooks_env(params: dict[str, Any]) -> dict[str, Any]:
    """The hooks variables of the master IP (without the ``GANETI_`` prefix)."""
    return {"MASTER_NETDEV": params["netdev"], "MASTER_IP": params["ip"],
            "MASTER_NETMASK": str(params["netmask"]),
            "CLUSTER_IP_VERSION": "6" if params["ip_family"] == _AF_INET6 else "4"}


def _call(rpc: RpcRunner | None, params: dict[str, Any], use_external: bool, what: str) -> bool:
    if not params.get("netdev"):
        logger.info("No master network device configured; master IP %s skipped", what)
        return False
    if rpc is None:
        raise errors.OpExecError(f"Cannot {what} the master IP: node RPC is not available")
    node = params["name"]
    method = (rpc.call_node_activate_master_ip if what == "activate"
              else rpc.call_node_deactivate_master_ip)
    res = method(node, master_params=params, use_external_mip_script=use_external)[node]
    if res.fail_msg:
        raise errors.OpExecError(f"Could not {what} the master IP {params['ip']} on"
                                 f" {params['netdev']} of node {node}: {res.fail_msg}")
    return True


def activate_master_ip(cfg: ConfigWriter, rpc: RpcRunner | None,
                       params: dict[str, Any] | None = None,
                       use_external: bool | None = None) -> bool:
    """Bring the master IP up on the master node.

    ``params``/``use_external`` default to the current config.  Returns
    False when there is no master network device (nothing done); raises
    :class:`errors.OpExecError` with the node's message on failure.
    """
    params = master_ip_params(cfg) if params is None else params
    if use_external is None:
        use_external = cfg.get_cluster_info().use_external_mip_script
    return _call(rpc, params, use_external, "activate")


def deactivate_master_ip(cfg: ConfigWriter, rpc: RpcRunner | None,
                         params: dict[str, Any] | None = None,
                         use_external: bool | None = None) -> bool:
    """Take the master IP down on the master node (see :func:`activate_master_ip`)."""
    params = master_ip_params(cfg) if params is None else params
    if use_external is None:
        use_external = cfg.get_cluster_info().use_external_mip_script
    return _call(rpc, params, use_external, "deactivate")


_MasterIpOpT = TypeVar("_MasterIpOpT", OpClusterActivateMasterIp, OpClusterDeactivateMasterIp)


class _MasterIpLU(LogicalUnit[_MasterIpOpT]):
    """Shared parts: no locks besides the shared BGL, hooks on the master."""

    HTYPE = constants.HTYPE_CLUSTER
    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        self.params = master_ip_params(self.cfg)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.get_cluster_info().cluster_name,
                **master_ip_hooks_env(master_ip_params(self.cfg))}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)


class LUClusterActivateMasterIp(_MasterIpLU[OpClusterActivateMasterIp]):
    """Activate the master IP on the master node (hooks: master-ip-turnup)."""

    HPATH = "master-ip-turnup"

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        if not activate_master_ip(self.cfg, self.rpc, self.params):
            feedback_fn("No master network device is configured; nothing to activate")
        return None


class LUClusterDeactivateMasterIp(_MasterIpLU[OpClusterDeactivateMasterIp]):
    """Deactivate the master IP on the master node (hooks: master-ip-turndown)."""

    HPATH = "master-ip-turndown"

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        if not deactivate_master_ip(self.cfg, self.rpc, self.params):
            feedback_fn("No master network device is configured; nothing to deactivate")
        return None
