"""Node logical units (add, remove, modify, power-cycle) and the ``node`` query resource.

Node add expects the new node's daemon to be running already with the
cluster certificate (``gnt-node add`` sets it up over SSH); the LU checks
its protocol version over RPC, adds it to the configuration and the lock
manager, decides its master candidate role from the pool size and pushes
the cluster files, ssconf and (for a candidate) the job queue to it.

Node modify keeps the candidate pool full (auto-promotion) and tells a
node that lost the candidate role (and is not going offline) to drop its
``config.data`` (``cmdlib.roles.demote_from_candidates``); a node that
becomes a candidate gets the current config and the job queue again.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import Any

from ganeti import constants, errors, locking, parameters, query
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import os_image_replica
from ganeti.cmdlib.base import LogicalUnit, NoHooksLU
from ganeti.cmdlib.common import (adjust_candidate_pool, candidate_stats,
                                  decide_self_promotion, expand_group, expand_node,
                                  is_eligible, node_role, redistribute, select_named)
from ganeti.cmdlib.oob import oob_program
from ganeti.cmdlib.roles import DEMOTE_FLUSH_TIMEOUT, demote_from_candidates
from ganeti.config import ConfigReader
from ganeti.context import MasterContext
from ganeti.ha import recovery
from ganeti.objects import Cluster, Node, NodeGroup
from ganeti.opcodes.node import OpNodeAdd, OpNodePowercycle, OpNodeRemove, OpNodeSetParams
from ganeti.replication import copy_queue
from ganeti.rpc.client import RpcRunner, StaticResolver, default_noded_port
from ganeti.utils import validation

__all__ = ["LUNodeAdd", "LUNodeRemove", "LUNodeSetParams", "LUNodePowercycle",
           "NODE_FIELDS", "collect_nodes", "rpc_for_address", "sync_queue_to"]

logger = logging.getLogger(__name__)


def _check_ip(value: str, what: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise errors.OpPrereqError(f"Invalid {what} '{value}'", errors.ECODE_INVAL) from None


def _check_secondary_ip(cfg: ConfigReader, value: str, node_uuid: str | None) -> str:
    """A node's new secondary IP: an IPv4 address (as Ganeti's) no other node uses."""
    sip = _check_ip(value, "secondary IP")
    if ipaddress.ip_address(sip).version != 4:
        raise errors.OpPrereqError(f"Secondary IP ({sip}) needs to be a valid IPv4 address",
                                   errors.ECODE_INVAL)
    for other in cfg.get_all_nodes_info().values():
        if other.uuid != node_uuid and sip in (other.primary_ip, other.secondary_ip):
            raise errors.OpPrereqError(f"IP address {sip} is already used by node"
                                       f" {other.name}", errors.ECODE_NOTUNIQUE)
    return sip


def rpc_for_address(rpc: RpcRunner, name: str, address: str) -> Any:
    """An RPC runner reaching ``name`` at ``address`` (a node not (yet) usable via config).

    A runner offering ``for_addresses({name: address})`` (the test fake) is
    asked for it; otherwise a runner sharing the transport and timeouts is built.
    """
    maker = getattr(rpc, "for_addresses", None)
    if maker is not None:
        return maker({name: address})
    port = getattr(rpc.resolver, "port", None) or default_noded_port()
    return RpcRunner(StaticResolver({name: (address, port, False)}), rpc.transport,
                     timeouts=rpc.timeouts, fence=getattr(rpc, "fence", None))


def _check_version(rpc: RpcRunner, name: str, address: str) -> None:
    res = rpc_for_address(rpc, name, address).call_version([name])[name]
    if res.fail_msg:
        raise errors.OpPrereqError(f"Cannot contact the node daemon of {name}: {res.fail_msg}",
                                   errors.ECODE_ENVIRON)
    if res.payload != constants.PROTOCOL_VERSION:
        raise errors.OpPrereqError(
            f"Node {name} speaks protocol version {res.payload}, this master"
            f" {constants.PROTOCOL_VERSION}", errors.ECODE_ENVIRON)


def sync_queue_to(context: MasterContext, node_name: str) -> None:
    """Copy the master's unarchived job files (and serial/version) to a new candidate.

    Through the replicator when there is one (ordered with the job-file
    updates, see :meth:`ganeti.replication.Replicator.replicate_queue_to`), waiting a bounded
    time for it; otherwise directly (:func:`ganeti.replication.copy_queue`).
    """
    if context.rpc is None:
        return
    replicator = getattr(context, "replicator", None)
    if replicator is not None:
        replicator.replicate_queue_to([node_name])
        if not replicator.flush(DEMOTE_FLUSH_TIMEOUT):
            logger.warning("Job queue copy to %s still in flight", node_name)
        return
    copy_queue(context.rpc, context.paths, [node_name])


def welcome_candidates(lu: LogicalUnit[Any], names: list[str], feedback_fn: FeedbackFn) -> None:
    """What new master candidates ``names`` get beyond the config: the job queue
    (:func:`sync_queue_to`) and the OS image store, its images and then its index
    (doc/images.md, "Replication")."""
    for name in names:
        sync_queue_to(lu.context, name)
    if names and lu.rpc is not None:
        os_image_replica.replicate_store(lu, None, feedback_fn, nodes=names)


def _node_env(node: Node) -> dict[str, Any]:
    return {"OP_TARGET": node.name, "NODE_NAME": node.name, "NODE_PIP": node.primary_ip,
            "NODE_SIP": node.secondary_ip, "MASTER_CAPABLE": str(node.master_capable),
            "VM_CAPABLE": str(node.vm_capable)}


class LUNodeAdd(LogicalUnit[OpNodeAdd]):
    """Add (or re-add) a node; runs with the BGL held exclusively."""

    HPATH = "node-add"
    HTYPE = constants.HTYPE_NODE

    def CheckArguments(self) -> None:
        self.node_name = validation.check_hostname(self.op.node_name, "node name")
        # the addresses given (checked); CheckPrereq fills in the missing ones
        self.given_pip = _check_ip(self.op.primary_ip, "primary IP") \
            if self.op.primary_ip is not None else None
        self.given_sip = _check_ip(self.op.secondary_ip, "secondary IP") \
            if self.op.secondary_ip is not None else None

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        cfg = self.cfg
        existing = cfg.get_node_info_by_name(self.node_name)
        if self.op.readd and existing is None:
            raise errors.OpPrereqError(f"Node {self.node_name} is not in the configuration",
                                       errors.ECODE_NOENT)
        if not self.op.readd and existing is not None:
            raise errors.OpPrereqError(f"Node {self.node_name} is already in the configuration",
                                       errors.ECODE_EXISTS)
        if existing is not None and existing.uuid == cfg.get_master_node():
            raise errors.OpPrereqError("Cannot re-add the master node", errors.ECODE_INVAL)
        primary_ip = self.given_pip
        if primary_ip is None:
            if existing is not None:
                primary_ip = existing.primary_ip
            else:
                try:
                    primary_ip = socket.gethostbyname(self.node_name)
                except OSError as exc:
                    raise errors.OpPrereqError(
                        f"Cannot resolve node name {self.node_name}: {exc}",
                        errors.ECODE_RESOLVER) from exc
        self.primary_ip: str = primary_ip
        if self.given_sip is not None:
            _check_secondary_ip(cfg, self.given_sip, existing.uuid if existing else None)
        self.secondary_ip: str = self.given_sip or (
            existing.secondary_ip if existing else primary_ip)
        for other in cfg.get_all_nodes_info().values():
            if existing is not None and other.uuid == existing.uuid:
                continue
            if self.primary_ip in (other.primary_ip, other.secondary_ip):
                raise errors.OpPrereqError(
                    f"IP address {self.primary_ip} is already used by node {other.name}",
                    errors.ECODE_NOTUNIQUE)
        self.group = expand_group(cfg, self.op.group) if self.op.group else (
            expand_group(cfg, None) if existing is None else self._group_of(existing))
        self.ndparams = parameters.check_params("nd", self.op.ndparams)
        self.existing = existing
        if self.rpc is None:
            raise errors.OpPrereqError("Node RPC is not available on this master",
                                       errors.ECODE_ENVIRON)
        _check_version(self.rpc, self.node_name, self.primary_ip)

    def _group_of(self, node: Node) -> NodeGroup:
        group = self.cfg.get_nodegroup(node.group)
        if group is None:
            raise errors.ConfigurationError(f"Group {node.group} of node {node.name} is not in"
                                            " the configuration")
        return group

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.node_name, "NODE_NAME": self.node_name,
                "NODE_PIP": self.primary_ip, "NODE_SIP": self.secondary_ip,
                "MASTER_CAPABLE": str(self.op.master_capable is not False),
                "VM_CAPABLE": str(self.op.vm_capable is not False)}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        master = self.cfg.get_master_node_name()
        return [master], [master, self.node_name]

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        cfg = self.cfg
        if self.existing is not None:
            node = self.existing
            node.offline = False
            node.drained = False
            node.primary_ip = self.primary_ip
            node.secondary_ip = self.secondary_ip
            node.group = self.group.uuid
            if self.op.master_capable is not None:
                node.master_capable = self.op.master_capable
            if self.op.vm_capable is not None:
                node.vm_capable = self.op.vm_capable
            if self.op.ndparams is not None:
                node.ndparams = self.ndparams
            node.master_candidate = (is_eligible(node)
                                     and decide_self_promotion(cfg, [node.uuid]))
            cfg.update(node)
            feedback_fn(f"Readded node {node.name}")
        else:
            node = Node(name=self.node_name, primary_ip=self.primary_ip,
                        secondary_ip=self.secondary_ip, group=self.group.uuid,
                        master_capable=self.op.master_capable is not False,
                        vm_capable=self.op.vm_capable is not False,
                        ndparams=self.ndparams)
            node.master_candidate = node.master_capable and decide_self_promotion(cfg)
            cfg.add_node(node)
            if self.glm is not None:
                for level in (locking.LEVEL_NODE, locking.LEVEL_NODE_RES):
                    self.glm.add(level, [node.uuid])
        if node.master_candidate:
            feedback_fn(f"Node {node.name} is a master candidate")
        failed = redistribute(self.context, feedback_fn, [node.uuid])
        if failed:
            self.LogWarning(f"Distributing files to {node.name} failed; run"
                            " 'gnt-cluster redist-conf' once it is reachable")
        if node.master_candidate:
            welcome_candidates(self, [node.name], feedback_fn)
        return None


class LUNodeRemove(LogicalUnit[OpNodeRemove]):
    """Remove a node: not the master, not a node with instances."""

    HPATH = "node-remove"
    HTYPE = constants.HTYPE_NODE

    def ExpandNames(self) -> None:
        self.node = expand_node(self.cfg, self.op.node_name, self.op.node_uuid)
        self.needed_locks = {locking.LEVEL_NODE: [self.node.uuid],
                             locking.LEVEL_NODE_RES: [self.node.uuid]}

    def CheckPrereq(self) -> None:
        node = self.node
        if node.uuid == self.cfg.get_master_node():
            raise errors.OpPrereqError("Node is the master node, failover to another node is"
                                       " required", errors.ECODE_INVAL)
        primary, secondary = self.cfg.node_instances(node.uuid)
        for inst_uuid in primary + secondary:
            inst = self.cfg.get_instance_info(inst_uuid)
            raise errors.OpPrereqError(
                f"Instance {inst.name if inst else inst_uuid} is still running on the node,"
                " please remove it first", errors.ECODE_INVAL)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.node.name, "NODE_NAME": self.node.name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        others = [n.name for n in self.cfg.get_all_nodes_info().values()
                  if n.uuid != self.node.uuid and not n.offline]
        master = self.cfg.get_master_node_name()
        return [master], sorted(others)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        """Run the post hooks on the node, drop it from the config, then tell it to leave.

        As in Ganeti, the node's own post hooks run first (afterwards it is
        no longer reachable as a cluster node; the others run theirs after
        Exec).  Then no replication aimed at the node as a candidate can
        follow its leaving and recreate its cluster files: the node is out of
        the config first and replication already in flight is flushed
        (bounded) before the node is contacted at its address.
        """
        node = self.node
        self._run_own_post_hooks()
        self.cfg.remove_node(node.uuid)
        if self.glm is not None:
            for level in (locking.LEVEL_NODE_RES, locking.LEVEL_NODE):
                self.glm.remove(level, [node.uuid])
        welcome_candidates(self, adjust_candidate_pool(self.cfg, (), feedback_fn), feedback_fn)
        if self.rpc is not None and not node.offline:
            flush = getattr(getattr(self.context, "replicator", None), "flush", None)
            if flush is not None and not flush(DEMOTE_FLUSH_TIMEOUT):
                self.LogWarning(f"Replication still in flight while {node.name} leaves")
            runner = rpc_for_address(self.rpc, node.name, node.primary_ip)
            res = runner.call_node_leave_cluster([node.name], modify_ssh_setup=False)[node.name]
            if res.fail_msg:
                self.LogWarning(f"Errors encountered on the remote node while leaving"
                                f" the cluster: {res.fail_msg}")
        return None


    def _run_own_post_hooks(self) -> None:
        """The removed node's post hooks (failures are warnings, as all post hooks)."""
        hm = self.hooks_master   # set when the pre hooks ran
        if hm is None or self.node.offline:
            return
        results = hm.run_phase(constants.HOOKS_PHASE_POST, [self.node.name])
        for entries in results.values():
            for script, status, output in entries:
                if status == constants.HKR_FAIL:
                    self.LogWarning(f"Post hook {script} failed on node {self.node.name}:"
                                    f" {output.strip()}")


class LUNodeSetParams(LogicalUnit[OpNodeSetParams]):
    """Change a node's role flags and parameters, keeping the candidate pool full."""

    HPATH = "node-modify"
    HTYPE = constants.HTYPE_NODE
    _FLAGS = ("master_candidate", "offline", "drained")

    def CheckArguments(self) -> None:
        op = self.op
        changes = [op.master_candidate, op.offline, op.drained, op.master_capable,
                   op.vm_capable, op.secondary_ip, op.ndparams, op.powered]
        if all(c is None for c in changes):
            raise errors.OpPrereqError("Please pass at least one modification",
                                       errors.ECODE_INVAL)
        if sum(1 for f in self._FLAGS if getattr(op, f) is True) > 1:
            raise errors.OpPrereqError("Can't set the node into more than one state at the"
                                       " same time", errors.ECODE_INVAL)
        self.might_demote = (op.master_candidate is False or op.offline is True
                             or op.drained is True or op.master_capable is False)

    def ExpandNames(self) -> None:
        self.node = expand_node(self.cfg, self.op.node_name, self.op.node_uuid)
        if self.might_demote and self.op.auto_promote:
            self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}
        else:
            self.needed_locks = {locking.LEVEL_NODE: [self.node.uuid]}

    def CheckPrereq(self) -> None:
        op, node, cfg = self.op, self.node, self.cfg
        is_master = node.uuid == cfg.get_master_node()
        if is_master and (self.might_demote or op.offline or op.drained):
            raise errors.OpPrereqError("The master role can be changed only via master"
                                       " failover", errors.ECODE_INVAL)
        new = {"offline": node.offline if op.offline is None else op.offline,
               "drained": node.drained if op.drained is None else op.drained,
               "master_capable": (node.master_capable if op.master_capable is None
                                  else op.master_capable)}
        eligible_after = new["master_capable"] and not new["offline"] and not new["drained"]
        if op.master_candidate and not eligible_after:
            why = ("offline" if new["offline"] else "drained" if new["drained"]
                   else "not master capable")
            raise errors.OpPrereqError(f"Node {node.name} is {why}, it cannot be a master"
                                       " candidate", errors.ECODE_STATE)
        new_mc = node.master_candidate
        if op.master_candidate is not None:
            new_mc = op.master_candidate
        elif not eligible_after:
            new_mc = False
        elif not is_eligible(node) and eligible_after and not node.master_candidate:
            # becoming eligible again: take a free place in the pool
            new_mc = decide_self_promotion(cfg, [node.uuid])
        self.demoting = node.master_candidate and not new_mc
        if self.demoting:
            remaining, should, _ = candidate_stats(cfg, [node.uuid])
            if remaining < should and not op.auto_promote:
                raise errors.OpPrereqError(
                    f"Not enough master candidates (desired {should}, new value will be"
                    f" {remaining}), please use --auto-promote or make another node a"
                    " candidate first", errors.ECODE_STATE)
        if oob_program(cfg, node):
            if op.offline is False and not (node.powered or op.powered is True):
                raise errors.OpPrereqError(f"Node {node.name} needs to be turned on before its"
                                           " offline status can be reset", errors.ECODE_STATE)
        elif op.powered is not None:
            raise errors.OpPrereqError(f"Unable to change powered state for node {node.name}"
                                       " as it does not support out-of-band handling",
                                       errors.ECODE_STATE)
        if op.offline is False and node.offline and self.rpc is not None:
            _check_version(self.rpc, node.name, node.primary_ip)
        self.new_mc = new_mc
        self.new_flags = new
        self.ndparams = (parameters.check_params("nd", op.ndparams, allow_default=True)
                         if op.ndparams is not None else None)
        if op.secondary_ip is not None:
            self.secondary_ip = _check_secondary_ip(cfg, op.secondary_ip, node.uuid)
        if op.vm_capable is False and not op.force:
            primary, secondary = cfg.node_instances(node.uuid)
            if primary or secondary:
                raise errors.OpPrereqError(f"Node {node.name} has instances, it cannot be"
                                           " made non-vm-capable", errors.ECODE_STATE)

    def BuildHooksEnv(self) -> dict[str, Any]:
        op = self.op
        return {"OP_TARGET": self.node.name, "NODE_NAME": self.node.name,
                "MASTER_CANDIDATE": str(op.master_candidate), "OFFLINE": str(op.offline),
                "DRAINED": str(op.drained), "MASTER_CAPABLE": str(op.master_capable),
                "VM_CAPABLE": str(op.vm_capable)}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        nodes = [self.cfg.get_master_node_name(), self.node.name]
        return nodes, nodes

    def Exec(self, feedback_fn: FeedbackFn) -> list[list[Any]]:
        op, node = self.op, self.node
        result: list[list[Any]] = []
        was_mc = node.master_candidate
        came_online = node.offline and op.offline is False
        if came_online:
            # back in service: node loss recovery's fence record no longer applies
            fenced = [t for t in node.tags if t.startswith(recovery.FENCED_PREFIX)]
            if fenced:
                node.tags = [t for t in node.tags if t not in fenced]
                result.append(["tags", f"removed {', '.join(fenced)}"])
        for key in ("offline", "drained", "master_capable"):
            value = self.new_flags[key]
            if value != getattr(node, key):
                setattr(node, key, value)
                result.append([key, str(value)])
        if op.vm_capable is not None and op.vm_capable != node.vm_capable:
            node.vm_capable = op.vm_capable
            result.append(["vm_capable", str(op.vm_capable)])
        if op.powered is not None and op.powered != node.powered:
            node.powered = op.powered
            result.append(["powered", str(op.powered)])
        if op.secondary_ip is not None:
            node.secondary_ip = self.secondary_ip
            result.append(["secondary_ip", self.secondary_ip])
        if self.ndparams is not None:
            node.ndparams = parameters.update_params(node.ndparams, self.ndparams)
            result.append(["ndparams", dict(node.ndparams)])
        if self.new_mc != was_mc:
            node.master_candidate = self.new_mc
            if op.master_candidate is not None:
                result.append(["master_candidate", str(self.new_mc)])
            elif self.new_mc:
                result.append(["master_candidate", "auto-promotion"])
            else:
                reason = ("offline" if node.offline else "drain" if node.drained
                          else "master_capable")
                result.append(["master_candidate", f"auto-demotion due to {reason}"])
        self.cfg.update(node)
        promoted: list[str] = []
        if self.demoting and op.auto_promote:
            promoted = adjust_candidate_pool(self.cfg, [node.uuid], feedback_fn)
        if self.new_mc and not was_mc:
            redistribute(self.context, feedback_fn, [node.uuid])
            promoted = [node.name, *promoted]
        elif came_online:
            redistribute(self.context, feedback_fn, [node.uuid])
        welcome_candidates(self, promoted, feedback_fn)
        if self.demoting and not node.offline:
            demote_from_candidates(self.context, [node.name], self.LogWarning)
        return result


class LUNodePowercycle(NoHooksLU[OpNodePowercycle]):
    """Hard-reset a node through its hypervisor (``gnt-node powercycle``).

    Takes no locks: a node that needs power-cycling may be stuck holding
    anything.  The master itself needs ``force``.  One RPC to the node; the
    node answers first and cycles afterwards (``backend.node.node_powercycle``),
    so the job's result is the node's confirmation, not proof of the reboot.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.node = expand_node(self.cfg, self.op.node_name, self.op.node_uuid)
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        if self.node.uuid == self.cfg.get_master_node() and not self.op.force:
            raise errors.OpPrereqError("The node is the master and the force parameter was"
                                       " not set", errors.ECODE_INVAL)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        cluster = self.cfg.get_cluster_info()
        hv_name = cluster.primary_hypervisor
        hvparams = dict(cluster.hvparams.get(hv_name, {}))
        res = self.require_rpc().call_node_powercycle(
            [self.node.name], hypervisor=hv_name, hvparams=hvparams)[self.node.name]
        res.raise_on_failure(f"Failed to schedule the power cycle of {self.node.name}")
        return res.payload


# --- query resource ------------------------------------------------------------------

class NodeQueryData:
    """What the node field getters read: config snapshot plus optional live data."""

    def __init__(self, cfg: ConfigReader, live: dict[str, Any] | None) -> None:
        data = cfg.get_config_data()
        self.master_uuid = data.cluster.master_node
        self.cluster = data.cluster
        self.groups = data.nodegroups
        self.live = live
        self.pinst: dict[str, list[str]] = {u: [] for u in data.nodes}
        self.sinst: dict[str, list[str]] = {u: [] for u in data.nodes}
        for inst in data.instances.values():
            self.pinst.setdefault(inst.primary_node, []).append(inst.name)
            for disk_uuid in inst.disks:
                disk = data.disks.get(disk_uuid)
                for nuuid in (disk.nodes if disk else []):
                    if nuuid != inst.primary_node and inst.name not in self.sinst.setdefault(
                            nuuid, []):
                        self.sinst[nuuid].append(inst.name)


def _live(key: str, sub: str | None = None) -> Any:
    def getter(ctx: NodeQueryData, node: Node) -> Any:
        if node.offline:
            return query.OFFLINE
        if ctx.live is None:
            return query.NODATA
        info = ctx.live.get(node.uuid)
        if info is None:
            return query.UNAVAIL
        if sub is not None:
            storage = [s for s in info.get("storage", []) if "storage_size" in s]
            if not storage:
                return query.UNAVAIL
            return storage[0].get(sub, query.UNAVAIL)
        return info.get(key, query.UNAVAIL)
    return getter


_LIVE = frozenset(["live"])


def _spindles(ctx: NodeQueryData, node: Node) -> Any:
    """Spindles (``sptotal``/``spfree``): only exclusive LVM storage counts them.

    The storage types implemented here (file, sharedfile, diskless) have no
    spindles, so a node whose storage answered reports 0.
    """
    value = _live("", "storage_size")(ctx, node)
    return value if isinstance(value, query.fields.Sentinel) else 0


def _powered(ctx: Any, node: Any) -> Any:
    """``powered``: unavailable without an out-of-band program, as in Ganeti (nothing
    could know or change the node's power)."""
    nd = parameters.fill_ndparams(ctx.cluster, ctx.groups.get(node.group), node)
    return node.powered if nd.get("oob_program") else query.UNAVAIL


def _group_name(ctx: NodeQueryData, node: Node) -> Any:
    group = ctx.groups.get(node.group)
    return group.name if group else query.UNAVAIL


NODE_FIELDS = query.make_table([
    query.simple_field("name", "Node", constants.QFT_TEXT, "Node name", "name"),
    query.simple_field("pip", "PrimaryIP", constants.QFT_TEXT, "Primary IP address",
                       "primary_ip"),
    query.simple_field("sip", "SecondaryIP", constants.QFT_TEXT, "Secondary IP address",
                       "secondary_ip"),
    query.simple_field("master_candidate", "MasterC", constants.QFT_BOOL,
                       "Whether node is a master candidate", "master_candidate"),
    query.simple_field("master_capable", "MasterCapable", constants.QFT_BOOL,
                       "Whether node can become a master candidate", "master_capable"),
    query.simple_field("vm_capable", "VMCapable", constants.QFT_BOOL,
                       "Whether node can host instances", "vm_capable"),
    query.simple_field("drained", "Drained", constants.QFT_BOOL,
                       "Whether node is drained", "drained"),
    query.simple_field("offline", "Offline", constants.QFT_BOOL,
                       "Whether node is marked offline", "offline"),
    query.FieldDef("powered", "Powered", constants.QFT_BOOL,
                   "Whether node is thought to be powered on", _powered),
    query.FieldDef("master", "IsMaster", constants.QFT_BOOL, "Whether node is master",
                   lambda ctx, n: n.uuid == ctx.master_uuid),
    query.FieldDef("role", "Role", constants.QFT_TEXT,
                   "Node role; \"M\" for master, \"C\" for master candidate, \"R\" for"
                   " regular, \"D\" for drained, \"O\" for offline",
                   lambda ctx, n: node_role(n, ctx.master_uuid)),
    query.FieldDef("group", "Group", constants.QFT_TEXT, "Node group", _group_name),
    query.simple_field("group.uuid", "GroupUUID", constants.QFT_TEXT, "UUID of node group",
                       "group"),
    query.FieldDef("ndparams", "NodeParameters", constants.QFT_OTHER,
                   "Merged node parameters (cluster, group and node)",
                   lambda ctx, n: parameters.fill_ndparams(ctx.cluster, ctx.groups.get(n.group),
                                                           n)),
    query.FieldDef("custom_ndparams", "CustomNodeParameters", constants.QFT_OTHER,
                   "Custom node parameters (set on the node itself)",
                   lambda ctx, n: dict(n.ndparams)),
    query.FieldDef("pinst_cnt", "Pinst", constants.QFT_NUMBER,
                   "Number of instances with this node as primary",
                   lambda ctx, n: len(ctx.pinst.get(n.uuid, []))),
    query.FieldDef("sinst_cnt", "Sinst", constants.QFT_NUMBER,
                   "Number of instances with this node as secondary",
                   lambda ctx, n: len(ctx.sinst.get(n.uuid, []))),
    query.FieldDef("pinst_list", "PriInstances", constants.QFT_OTHER,
                   "List of instances with this node as primary",
                   lambda ctx, n: sorted(ctx.pinst.get(n.uuid, []))),
    query.FieldDef("sinst_list", "SecInstances", constants.QFT_OTHER,
                   "List of instances with this node as secondary",
                   lambda ctx, n: sorted(ctx.sinst.get(n.uuid, []))),
    query.FieldDef("mtotal", "MTotal", constants.QFT_UNIT, "Total amount of memory of"
                   " physical machine", _live("memory_total"), _LIVE),
    query.FieldDef("mnode", "MNode", constants.QFT_UNIT, "Amount of memory used by node"
                   " (dom0 for Xen)", _live("memory_dom0"), _LIVE),
    query.FieldDef("mfree", "MFree", constants.QFT_UNIT, "Memory available for instance"
                   " allocations", _live("memory_free"), _LIVE),
    query.FieldDef("dtotal", "DTotal", constants.QFT_UNIT, "Total disk space in volume group",
                   _live("", "storage_size"), _LIVE),
    query.FieldDef("dfree", "DFree", constants.QFT_UNIT, "Available disk space in volume"
                   " group", _live("", "storage_free"), _LIVE),
    query.FieldDef("sptotal", "SpTotal", constants.QFT_NUMBER, "Total number of spindles"
                   " (0: the node's storage types count no spindles)", _spindles, _LIVE),
    query.FieldDef("spfree", "SpFree", constants.QFT_NUMBER, "Available spindles"
                   " (0: the node's storage types count no spindles)", _spindles, _LIVE),
    query.FieldDef("ctotal", "CTotal", constants.QFT_NUMBER, "Number of logical processors",
                   _live("cpu_total"), _LIVE),
    query.FieldDef("cnodes", "CNodes", constants.QFT_NUMBER, "Number of NUMA domains on node",
                   _live("cpu_nodes"), _LIVE),
    query.FieldDef("csockets", "CSockets", constants.QFT_NUMBER, "Number of physical CPU"
                   " sockets", _live("cpu_sockets"), _LIVE),
    query.FieldDef("cnos", "CNOs", constants.QFT_NUMBER, "Number of logical processors used"
                   " by the node OS", _live("cpu_dom0"), _LIVE),
    query.FieldDef("bootid", "BootID", constants.QFT_TEXT, "Random UUID renewed for each"
                   " system reboot", _live("bootid"), _LIVE),
    query.tags_field(), query.uuid_field("Node"), query.serial_no_field("Node"),
    *query.timestamp_fields("Node"),
])


def _file_storage_units(cluster: Cluster) -> list[list[Any]]:
    if constants.DT_FILE in cluster.enabled_disk_templates and cluster.file_storage_dir:
        return [[constants.DT_FILE, cluster.file_storage_dir, {}]]
    if (constants.DT_SHARED_FILE in cluster.enabled_disk_templates
            and cluster.shared_file_storage_dir):
        return [[constants.DT_SHARED_FILE, cluster.shared_file_storage_dir, {}]]
    return []


def _storage_units(cluster: Cluster) -> list[list[Any]]:
    """The storage units node_info reports, the one DFree/DTotal and the
    iallocator's free_disk/total_disk show first: the cluster's volume group
    (``lvm-vg``) when an LVM template is enabled and a VG is set, before the
    file storage unit if an LVM template is enabled before the file ones
    (as in Ganeti: the first enabled template's storage counts)."""
    units = _file_storage_units(cluster)
    enabled = cluster.enabled_disk_templates
    lvm_at = [i for i, t in enumerate(enabled) if t in constants.DTS_LVM]
    if not lvm_at or not cluster.volume_group_name:
        return units
    vg_unit = [constants.ST_LVM_VG, cluster.volume_group_name, {}]
    file_at = [i for i, t in enumerate(enabled) if t in constants.DTS_FILEBASED]
    if not file_at or lvm_at[0] < file_at[0]:
        return [vg_unit, *units]
    return [*units, vg_unit]


def collect_live(context: MasterContext, nodes: list[Node]) -> dict[str, Any]:
    """``{node uuid: node_info payload}`` for the online nodes that answered.

    Answers younger than the context's ``node_info_cache`` allows are
    reused (``cmdlib.liveinfo``); only the other nodes are asked.
    """
    online = [n for n in nodes if not n.offline]
    if context.rpc is None or not online:
        return {}
    cache = getattr(context, "node_info_cache", None)
    live: dict[str, Any] = {}
    if cache is not None:
        live, missing, started = cache.lookup(n.uuid for n in online)
        wanted = set(missing)
        online = [n for n in online if n.uuid in wanted]
        if not online:
            return live
    cluster = context.committed_cfg().get_cluster_info()
    hv = cluster.primary_hypervisor
    results = context.rpc.call_node_info(
        [n.name for n in online], storage_units=_storage_units(cluster),
        hv_specs=[[hv, dict(cluster.hvparams.get(hv, {}))]])
    fetched: dict[str, Any] = {}
    for node in online:
        res = results.get(node.name)
        if res is not None and not res.fail_msg and isinstance(res.payload, dict):
            fetched[node.uuid] = res.payload
        elif res is not None:
            logger.warning("node_info on %s failed: %s", node.name, res.fail_msg)
    if cache is not None:
        cache.store(started, fetched)
    live.update(fetched)
    return live


def collect_nodes(context: MasterContext, qfilter: Any, needs: set[str]) -> tuple[list[Any], Any]:
    """The ``node`` resource's collect function (query2).

    Explicitly named nodes that do not exist raise OpPrereqError ECODE_NOENT.
    """
    cfg = context.committed_cfg()
    nodes = select_named(cfg.get_all_nodes_info().values(),
                         query.requested_names(qfilter, "name"), "Node(s)")
    live = collect_live(context, nodes) if "live" in needs else None
    return nodes, NodeQueryData(cfg, live)
