"""Cluster-level logical units and the ``cluster`` query resource.

Verification lives in :mod:`ganeti.cmdlib.verify`; shared helpers (candidate
pool, file distribution, hooks) in :mod:`ganeti.cmdlib.common`; candidate
demotion and the master IP (and its two LUs) in :mod:`ganeti.cmdlib.roles`.

Cluster modify moves the master IP when ``master_netdev`` or
``master_netmask`` changes (deactivate with the old values, activate with
the new ones), and after a pool size change promotes (larger pool) or
demotes (smaller pool) candidates; a new instance communication network is
created and connected to every node group by a follow-up job
(:mod:`ganeti.cmdlib.instance_communication`).  Cluster destroy deactivates the master
IP.  Renew-crypto renews the cluster certificate, the RAPI certificate and
the cluster domain secret (each on request) on every online node.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import secrets
from typing import Any

from ganeti import constants, crypto, errors, locking, parameters, query, serializer
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import instance_communication as communication
from ganeti.cmdlib import cluster_sshkeys, lvm, os_image_replica, policy
from ganeti.utils import validation
from ganeti.cmdlib.base import LogicalUnit, NoHooksLU
from ganeti.cmdlib.common import (adjust_candidate_pool, cluster_hooks_nodes,
                                  redistribute, upload_files)
from ganeti.cmdlib.instance_networks import find_network
from ganeti.cmdlib.node import welcome_candidates
from ganeti.cmdlib.roles import (activate_master_ip, deactivate_master_ip,
                                 demote_from_candidates, master_ip_params,
                                 shrink_candidate_pool)
from ganeti.config import ConfigReader
from ganeti.context import MasterContext
from ganeti.iallocator import runner
from ganeti.objects import Cluster
from ganeti.opcodes.cluster import (OpClusterDestroy, OpClusterPostInit, OpClusterQuery,
                                    OpClusterRedistConf, OpClusterRenewCrypto,
                                    OpClusterSetParams)
from ganeti.utils import io as uio

__all__ = ["LUClusterQuery", "LUClusterPostInit", "LUClusterDestroy", "LUClusterSetParams",
           "LUClusterRedistConf", "LUClusterRenewCrypto", "cluster_info", "CLUSTER_FIELDS",
           "collect_cluster"]

logger = logging.getLogger(__name__)


def cluster_info(cfg: ConfigReader) -> dict[str, Any]:
    """The QueryClusterInfo dict (also the result of OP_CLUSTER_QUERY), from ``cfg``
    (the committed config: ``cfg.committed()``)."""
    cluster = cfg.get_cluster_info()
    master = cfg.get_node_info(cluster.master_node) if cluster.master_node else None
    data = serializer.to_data(cluster)
    return {
        "software_version": constants.RELEASE_VERSION,
        "protocol_version": constants.PROTOCOL_VERSION,
        "config_version": constants.CONFIG_VERSION,
        "os_api_version": max(constants.OS_API_VERSIONS),
        "export_version": constants.EXPORT_VERSION,
        "vcs_version": "",
        "architecture": [platform.architecture()[0], platform.machine()],
        "name": cluster.cluster_name,
        "master": master.name if master is not None else cluster.master_node,
        "default_hypervisor": cluster.primary_hypervisor,
        "enabled_hypervisors": data["enabled_hypervisors"],
        "hvparams": data["hvparams"],
        # as Ganeti's: only the enabled hypervisors' OS-specific parameters
        "os_hvp": {os_name: {hv: params for hv, params in per_hv.items()
                             if hv in cluster.enabled_hypervisors}
                   for os_name, per_hv in data["os_hvp"].items()},
        "beparams": data["beparams"],
        "osparams": data["osparams"],
        "nicparams": data["nicparams"],
        "ndparams": data["ndparams"],
        "diskparams": data["diskparams"],
        "ipolicy": data["ipolicy"],
        "candidate_pool_size": cluster.candidate_pool_size,
        "master_netdev": cluster.master_netdev,
        "master_netmask": cluster.master_netmask,
        "use_external_mip_script": cluster.use_external_mip_script,
        "volume_group_name": cluster.volume_group_name,
        "file_storage_dir": cluster.file_storage_dir,
        "shared_file_storage_dir": cluster.shared_file_storage_dir,
        "gluster_storage_dir": cluster.gluster_storage_dir,
        "maintain_node_health": cluster.maintain_node_health,
        "auto_promote": cluster.auto_promote,
        "ha_recovery": cluster.ha_recovery,
        "ha_node_timeout": cluster.ha_node_timeout,
        "ha_max_restart": cluster.ha_max_restart,
        "ha_max_relocate": cluster.ha_max_relocate,
        "ctime": cluster.ctime,
        "mtime": cluster.mtime,
        "uuid": cluster.uuid,
        "tags": sorted(cluster.tags),
        "uid_pool": data["uid_pool"],
        "default_iallocator": cluster.default_iallocator,
        "default_iallocator_params": data["default_iallocator_params"],
        "reserved_lvs": data["reserved_lvs"],
        "primary_ip_version": 6 if cluster.primary_ip_family == 10 else 4,
        "prealloc_wipe_disks": cluster.prealloc_wipe_disks,
        "hidden_os": data["hidden_os"],
        "blacklisted_os": data["blacklisted_os"],
        "enabled_disk_templates": data["enabled_disk_templates"],
        "enabled_user_shutdown": cluster.enabled_user_shutdown,
        "compression_tools": data["compression_tools"],
        "max_running_jobs": cluster.max_running_jobs,
        "max_tracked_jobs": cluster.max_tracked_jobs,
        "modify_etc_hosts": cluster.modify_etc_hosts,
        "modify_ssh_setup": cluster.modify_ssh_setup,
        "ssh_key_type": cluster.ssh_key_type,
        "ssh_key_bits": cluster.ssh_key_bits,
        # the rest of Ganeti 3.0's key set (doc/compat.md, "Results")
        "mac_prefix": cluster.mac_prefix,
        "drbd_usermode_helper": cluster.drbd_usermode_helper,
        "install_image": cluster.install_image,
        "zeroing_image": cluster.zeroing_image,
        "instance_communication_network": cluster.instance_communication_network,
        "enabled_data_collectors": {name: bool(dc.get("active", True))
                                    for name, dc in cluster.data_collectors.items()},
        "data_collector_interval": {name: int(dc.get("interval", 0))
                                    for name, dc in cluster.data_collectors.items()},
    }


class LUClusterQuery(NoHooksLU[OpClusterQuery]):
    """Return the cluster information (no locks beyond a shared BGL)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        return cluster_info(self.cfg.committed())


class LUClusterPostInit(LogicalUnit[OpClusterPostInit]):
    """Run the cluster-init post hooks (the CLI submits it after init)."""

    HPATH = "cluster-init"
    HTYPE = constants.HTYPE_CLUSTER

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.get_cluster_info().cluster_name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return [], cluster_hooks_nodes(self.cfg)[1]

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        return True


class LUClusterDestroy(LogicalUnit[OpClusterDestroy]):
    """Check that the cluster can be destroyed; returns the master node's name.

    The caller (``gnt-cluster destroy``) then stops the daemons and removes
    the files; the configuration is left untouched here.
    """

    HPATH = "cluster-destroy"
    HTYPE = constants.HTYPE_CLUSTER

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        cfg = self.cfg
        master = cfg.get_master_node()
        others = sorted(n.name for n in cfg.get_all_nodes_info().values() if n.uuid != master)
        if others:
            raise errors.OpPrereqError(f"There are still {len(others)} node(s) in this cluster"
                                       f" ({', '.join(others)})", errors.ECODE_INVAL)
        instances = cfg.get_instance_names()
        if instances:
            raise errors.OpPrereqError(f"There are still {len(instances)} instance(s) in this"
                                       " cluster", errors.ECODE_INVAL)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.get_cluster_info().cluster_name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return [], []

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        try:
            deactivate_master_ip(self.cfg, self.rpc)
        except errors.OpExecError as exc:
            self.LogWarning(f"Error disabling the master IP address: {exc}")
        return self.cfg.get_master_node_name()


_MAC_PREFIX_RE = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$")
_NETDEV_RE = re.compile(r"^[A-Za-z0-9_.:@][A-Za-z0-9_.:@-]{0,63}$")


_IALLOC_PARAM_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def _iallocator_params(params: dict[str, Any]) -> dict[str, Any]:
    """Check ``default_iallocator_params``: option names to values, each passed to
    the allocator as ``--name=value`` (``True``: a bare ``--name``; ``False``:
    left out); ``"True"``/``"False"`` strings from the CLI become booleans
    (doc/protocols/iallocator.md, "Running")."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if not isinstance(key, str) or not _IALLOC_PARAM_RE.match(key):
            raise errors.ParameterError(f"Invalid iallocator parameter name {key!r}"
                                        " (lowercase letters, digits, '-' and '_')",
                                        errors.ECODE_INVAL)
        if isinstance(value, str) and value in ("True", "False"):
            value = value == "True"
        if not isinstance(value, (str, int, float, bool)) or (
                isinstance(value, str) and any(c.isspace() for c in value)):
            raise errors.ParameterError(f"Invalid value {value!r} for iallocator parameter"
                                        f" '{key}' (a word or a number)", errors.ECODE_INVAL)
        out[key] = value
    return out
_AF_INET6 = 10


def _check_uid_pool(value: Any, where: str) -> list[list[int]]:
    result = []
    for entry in value or []:
        if isinstance(entry, int) and not isinstance(entry, bool):
            lo = hi = entry
        elif (isinstance(entry, (list, tuple)) and len(entry) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) for v in entry)):
            lo, hi = entry
        else:
            raise errors.ParameterError(f"Invalid {where} entry {entry!r}: expected a user id"
                                        " or [low, high]", errors.ECODE_INVAL)
        if lo < 0 or hi < lo:
            raise errors.ParameterError(f"Invalid {where} range {entry!r}", errors.ECODE_INVAL)
        result.append([lo, hi])
    return result


_URL_RE = re.compile(r"^(https?|ftps?)://[^\s]+$")
_NETWORK_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def _check_image(value: str) -> str:
    """``install_image``: '' (none), an absolute path or a URL (http, https, ftp, ftps)."""
    if value and not (_URL_RE.match(value) or (os.path.isabs(value) and "\0" not in value)):
        raise errors.ParameterError(f"Install image must be an absolute path or a URL, got"
                                    f" {value!r}", errors.ECODE_INVAL)
    return value


def _check_network_name(value: str) -> str:
    """``instance_communication_network``: '' (none) or a network name."""
    if value and not _NETWORK_NAME_RE.match(value):
        raise errors.ParameterError(f"Invalid instance communication network name {value!r}"
                                    " (letters, digits, '_', '.' and '-')", errors.ECODE_INVAL)
    return value


#: OpClusterSetParams parameters accepted at the cluster's current value only
_CURRENT_ONLY = ("zeroing_image", "reserved_lvs", "gluster_storage_dir", "compression_tools",
                 "enabled_user_shutdown")
_CURRENT_ONLY_PER_COLLECTOR = ("enabled_data_collectors", "data_collector_interval")


def _check_unchanged(op: OpClusterSetParams, info: dict[str, Any]) -> None:
    """Refuse a Ganeti 3.0 parameter we take but cannot change yet unless it is given at
    the cluster's current value (``info`` is :func:`cluster_info`): so what ``GET
    /2/info`` answered can be sent back to ``PUT /2/modify``, as Ganeti's QA does."""
    for name in _CURRENT_ONLY:
        value = getattr(op, name)
        if value is not None and value != info[name]:
            raise errors.OpPrereqError(f"Changing '{name}' is not supported yet; only its"
                                       f" current value {info[name]!r} is accepted",
                                       errors.ECODE_INVAL)
    for name in _CURRENT_ONLY_PER_COLLECTOR:
        for collector, value in (getattr(op, name) or {}).items():
            current = info[name].get(collector)
            if value != current:
                raise errors.OpPrereqError(
                    f"Changing '{name}' of data collector '{collector}' is not supported"
                    f" yet; only its current value {current!r} is accepted",
                    errors.ECODE_INVAL)


def _apply_os_list(current: list[str], mods: list[Any], where: str) -> list[str]:
    result = list(current)
    for mod in mods:
        if (not isinstance(mod, (list, tuple)) or len(mod) != 2
                or mod[0] not in ("add", "remove") or not isinstance(mod[1], str)):
            raise errors.ParameterError(f"Invalid {where} modification {mod!r}: expected"
                                        " [\"add\"|\"remove\", os_name]", errors.ECODE_INVAL)
        if mod[0] == "add" and mod[1] not in result:
            result.append(mod[1])
        elif mod[0] == "remove" and mod[1] in result:
            result.remove(mod[1])
    return result


class LUClusterSetParams(LogicalUnit[OpClusterSetParams]):
    """Change cluster parameters; everything is checked before anything changes."""

    HPATH = "cluster-modify"
    HTYPE = constants.HTYPE_CLUSTER

    def ExpandNames(self) -> None:
        self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}
        self.share_locks = {locking.LEVEL_NODE: 1}

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.get_cluster_info().cluster_name,
                "NEW_VG_NAME": self.op.vg_name or ""}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        return cluster_hooks_nodes(self.cfg)

    def CheckPrereq(self) -> None:  # noqa: C901 - one check per parameter
        op, cfg = self.op, self.cfg
        cluster = cfg.get_cluster_info()
        new: dict[str, Any] = {}
        instances = list(cfg.get_all_instances_info().values())
        if op.enabled_hypervisors is not None:
            hvs = list(dict.fromkeys(op.enabled_hypervisors))
            if not hvs:
                raise errors.OpPrereqError("At least one hypervisor must be enabled",
                                           errors.ECODE_INVAL)
            used = sorted({i.hypervisor for i in instances} - set(hvs))
            if used:
                raise errors.OpPrereqError(f"Hypervisor(s) {', '.join(used)} still used by"
                                           " instances; cannot disable them", errors.ECODE_STATE)
            new["enabled_hypervisors"] = hvs
        if op.enabled_disk_templates is not None:
            dts = list(dict.fromkeys(op.enabled_disk_templates))
            if not dts:
                raise errors.OpPrereqError("At least one disk template must be enabled",
                                           errors.ECODE_INVAL)
            used = sorted({i.disk_template for i in instances} - set(dts))
            if used:
                raise errors.OpPrereqError(f"Disk template(s) {', '.join(used)} still used by"
                                           " instances; cannot disable them", errors.ECODE_STATE)
            new["enabled_disk_templates"] = dts
        if op.hvparams is not None:
            hvparams = {hv: dict(v) for hv, v in cluster.hvparams.items()}
            for hv, values in op.hvparams.items():
                checked = parameters.check_params("hv", values, hv, allow_default=True)
                hvparams[hv] = parameters.update_params(hvparams.get(hv), checked)
            new["hvparams"] = hvparams
        if op.os_hvp is not None:
            os_hvp = {o: {hv: dict(p) for hv, p in v.items()} for o, v in cluster.os_hvp.items()}
            for os_name, per_hv in op.os_hvp.items():
                entry = os_hvp.setdefault(os_name, {})
                for hv, values in per_hv.items():
                    checked = parameters.check_params("hv", values, hv, allow_default=True)
                    entry[hv] = parameters.update_params(entry.get(hv), checked)
                    if not entry[hv]:
                        del entry[hv]
                if not entry:
                    del os_hvp[os_name]
            new["os_hvp"] = os_hvp
        for name, ns in (("beparams", "be"), ("nicparams", "nic")):
            values = getattr(op, name)
            if values is not None:
                checked = parameters.check_params(ns, values, allow_default=True)
                current = getattr(cluster, name)
                new[name] = {**current, "default": parameters.update_params(
                    current.get("default"), checked)}
        if op.ndparams is not None:
            checked = parameters.check_params("nd", op.ndparams, allow_default=True)
            new["ndparams"] = parameters.update_params(cluster.ndparams, checked)
        if op.diskparams is not None:
            diskparams = {t: dict(v) for t, v in cluster.diskparams.items()}
            for template, values in op.diskparams.items():
                checked = parameters.check_params("disk", values, template=template,
                                                  allow_default=True)
                diskparams[template] = parameters.update_params(diskparams.get(template),
                                                                checked)
            new["diskparams"] = diskparams
        if op.osparams is not None:
            osparams = {o: dict(v) for o, v in cluster.osparams.items()}
            for os_name, values in op.osparams.items():
                checked = parameters.check_params("os", values, allow_default=True)
                osparams[os_name] = parameters.update_params(osparams.get(os_name), checked)
                if not osparams[os_name]:
                    del osparams[os_name]
            new["osparams"] = osparams
        if op.drbd_helper is not None:
            if not os.path.isabs(op.drbd_helper):
                raise errors.ParameterError(f"Invalid DRBD usermode helper {op.drbd_helper!r}:"
                                            " an absolute path is needed", errors.ECODE_INVAL)
            new["drbd_usermode_helper"] = op.drbd_helper
        for name in ("candidate_pool_size", "max_running_jobs", "max_tracked_jobs",
                     "default_iallocator", "maintain_node_health", "prealloc_wipe_disks",
                     "modify_etc_hosts", "master_netdev", "use_external_mip_script",
                     "auto_promote", "ha_recovery", "ha_node_timeout", "ha_max_restart",
                     "ha_max_relocate"):
            value = getattr(op, name)
            if value is not None:
                new[name] = value
        if op.default_iallocator_params is not None:
            new["default_iallocator_params"] = _iallocator_params(op.default_iallocator_params)
        if op.default_iallocator:
            # refuse a name no allocator answers to (doc/protocols/iallocator.md, "Running")
            runner.resolve(op.default_iallocator, self.context.paths.iallocator_search_path)
        if op.master_netdev and not _NETDEV_RE.match(op.master_netdev):
            raise errors.ParameterError(f"Invalid master network device '{op.master_netdev}'",
                                        errors.ECODE_INVAL)
        if op.master_netmask is not None:
            limit = 128 if cluster.primary_ip_family == _AF_INET6 else 32
            if not 0 <= op.master_netmask <= limit:
                raise errors.ParameterError(f"Invalid master netmask {op.master_netmask}"
                                            f" (0..{limit})", errors.ECODE_INVAL)
            new["master_netmask"] = op.master_netmask
        enabled = new.get("enabled_disk_templates", cluster.enabled_disk_templates)
        for name, template in (("file_storage_dir", constants.DT_FILE),
                               ("shared_file_storage_dir", constants.DT_SHARED_FILE)):
            value = getattr(op, name)
            if value is not None:
                if value and not os.path.isabs(value):
                    raise errors.ParameterError(f"Parameter '{name}' must be an absolute"
                                                f" path, got {value!r}", errors.ECODE_INVAL)
                if not value and template in enabled:     # as Ganeti
                    raise errors.OpPrereqError(
                        f"Unsetting the '{template}' storage directory while having"
                        f" '{template}' storage enabled is not permitted", errors.ECODE_INVAL)
                new[name] = os.path.normpath(value) if value else value
        self._check_vg_name(cluster, new)
        if op.mac_prefix is not None:
            prefix = op.mac_prefix.lower()
            if not _MAC_PREFIX_RE.match(prefix):
                raise errors.ParameterError(f"Invalid MAC prefix '{op.mac_prefix}' (expected"
                                            " xx:xx:xx)", errors.ECODE_INVAL)
            new["mac_prefix"] = prefix
        uid_pool = None
        if op.uid_pool is not None:
            uid_pool = _check_uid_pool(op.uid_pool, "uid_pool")
        if op.add_uids is not None or op.remove_uids is not None:
            base = uid_pool if uid_pool is not None else [list(e) for e in cluster.uid_pool]
            add = _check_uid_pool(op.add_uids, "add_uids")
            remove = _check_uid_pool(op.remove_uids, "remove_uids")
            uid_pool = [e for e in base if e not in remove] + [e for e in add if e not in base]
        if uid_pool is not None:
            new["uid_pool"] = uid_pool
        if op.ipolicy is not None:
            new["ipolicy"], broken = policy.cluster_policy_change(
                cfg, op.ipolicy, new.get("enabled_disk_templates",
                                         cluster.enabled_disk_templates))
            if broken:
                self.LogWarning("After the ipolicy change the following instances violate"
                                f" it: {', '.join(broken)}")
        if op.install_image is not None:
            new["install_image"] = _check_image(op.install_image)
        if op.instance_communication_network is not None:
            self._check_communication_network(cluster, new)
        if op.hidden_os is not None:
            new["hidden_os"] = _apply_os_list(cluster.hidden_os, op.hidden_os, "hidden_os")
        if op.blacklisted_os is not None:
            new["blacklisted_os"] = _apply_os_list(cluster.blacklisted_os, op.blacklisted_os,
                                                   "blacklisted_os")
        _check_unchanged(op, cluster_info(cfg))
        self.new_values = new

    def _check_communication_network(self, cluster: Cluster, new: dict[str, Any]) -> None:
        """``instance_communication_network``: a valid name; an existing network of
        that name gets Ganeti's warnings about settings differing from its own."""
        name = _check_network_name(self.op.instance_communication_network or "")
        net = find_network(self.cfg, name) if name else None
        for warning in communication.network_warnings(net) if net is not None else []:
            self.LogWarning(warning)
        if name != cluster.instance_communication_network:
            new["instance_communication_network"] = name

    def _communication_network_jobs(self, name: str) -> Any:
        """Create the instance communication network ``name`` if missing and connect
        it to every node group, by one follow-up job as Ganeti (result
        ``{"jobs": ...}``); None when nothing is to do."""
        ops = communication.ensure_network_ops(
            name, find_network(self.cfg, name), self.cfg.get_all_nodegroups_info().values())
        if not ops:
            return None
        return {"jobs": self.proc.submit_many_jobs(communication.one_job(ops))}

    def _check_vg_name(self, cluster: Cluster, new: dict[str, Any]) -> None:
        """``vg_name`` ('' removes it; a new one must exist on the online
        vm-capable nodes) and Ganeti's rule that plain/drbd need one, checked
        when either changes."""
        op = self.op
        if op.vg_name is not None:
            new["volume_group_name"] = validation.check_vg_name(op.vg_name) if op.vg_name \
                else None
        if op.vg_name == "":
            users = sorted(i.name for i in self.cfg.get_all_instances_info().values()
                           if i.disk_template in constants.DTS_LVM)
            if users:
                raise errors.OpPrereqError("Cannot remove the volume group name while"
                                           f" instances use LVM disks: {', '.join(users)}",
                                           errors.ECODE_STATE)
        if op.vg_name is None and "enabled_disk_templates" not in new:
            return
        validation.check_lvm_templates(
            new.get("enabled_disk_templates", cluster.enabled_disk_templates),
            new.get("volume_group_name", cluster.volume_group_name))
        vg = new.get("volume_group_name")
        if vg and vg != cluster.volume_group_name:
            # as Ganeti: the group must exist on every node that can host instances
            lvm.check_vg_free(self, [n for n in self.cfg.get_all_nodes_info().values()
                                     if not n.offline and n.vm_capable], {vg: 0})

    def _moves_master_ip(self, cluster: Cluster) -> bool:
        return any(key in self.new_values and self.new_values[key] != getattr(cluster, key)
                   for key in ("master_netdev", "master_netmask"))

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        cluster = self.cfg.get_cluster_info()
        comm = self.op.instance_communication_network
        if comm is not None:
            old = cluster.instance_communication_network
            for message in communication.change_messages(
                    old, comm, bool(old) and find_network(self.cfg, old) is not None):
                feedback_fn(message)
        if not self.new_values:
            if comm is None:
                feedback_fn("Cluster parameters unchanged")
            return None
        move_ip = self._moves_master_ip(cluster)
        if move_ip and cluster.master_netdev:
            feedback_fn(f"Shutting down the master IP on the current netdev"
                        f" ({cluster.master_netdev})")
            try:
                deactivate_master_ip(self.cfg, self.rpc, master_ip_params(self.cfg),
                                     cluster.use_external_mip_script)
            except errors.OpExecError as exc:
                if not self.op.force:
                    raise errors.OpExecError(f"{exc}; use --force to change the master"
                                             " network settings anyway") from exc
                self.LogWarning(f"Could not disable the master IP: {exc}")
        for name, value in self.new_values.items():
            setattr(cluster, name, value)
        self.cfg.update(cluster)
        if "candidate_pool_size" in self.new_values:
            welcome_candidates(self, adjust_candidate_pool(self.cfg, (), feedback_fn),
                               feedback_fn)
            demoted = shrink_candidate_pool(self.cfg, feedback_fn)
            demote_from_candidates(self.context, demoted, self.LogWarning)
        if move_ip and cluster.master_netdev:
            feedback_fn(f"Starting the master IP on the new netdev ({cluster.master_netdev})")
            try:
                activate_master_ip(self.cfg, self.rpc)
            except errors.OpExecError as exc:
                self.LogWarning(f"Could not re-enable the master IP on the master, please"
                                f" restart it manually: {exc}")
        if self.new_values.get("instance_communication_network"):
            return self._communication_network_jobs(self.new_values[
                "instance_communication_network"])
        return None


class LUClusterRedistConf(NoHooksLU[OpClusterRedistConf]):
    """Push config, ssconf and cluster files to every node (bumps the config serial)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}
        self.share_locks = {locking.LEVEL_NODE: 1}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        self.cfg.update(self.cfg.get_cluster_info())
        failed = redistribute(self.context, feedback_fn)
        if failed:
            self.LogWarning(f"Redistribution failed on: {', '.join(failed)}")
        if self.rpc is not None:
            # the OS image store's images a master candidate lacks (doc/images.md)
            os_image_replica.replicate_store(self, None, feedback_fn)
        return None


class LUClusterRenewCrypto(NoHooksLU[OpClusterRenewCrypto]):
    """Renew the cluster certificate, RAPI certificate and/or domain secret.

    Each renewed file is written on the master and uploaded to every other
    online node (``upload_file``; all three are on its allow-list).  Node
    daemons and the master daemon load the cluster certificate when they
    start: they keep using the old one until restarted (``gnt-cluster
    renew-crypto`` restarts them); the master's own copy is replaced last,
    after the nodes accepted the new one.  The RAPI certificate and the
    domain secret are written on the master first.  Failing nodes are
    reported as warnings.  ``renew_ssh_keys`` replaces the cluster SSH key
    pair on every online node in two steps (:mod:`ganeti.cmdlib.cluster_sshkeys`);
    there a failing node fails the job.
    """

    def ExpandNames(self) -> None:
        self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}
        self.share_locks = {locking.LEVEL_NODE: 1}

    def CheckArguments(self) -> None:
        op = self.op
        if op.new_rapi_cert and op.rapi_cert_pem is not None:
            raise errors.OpPrereqError("Only one of new_rapi_cert and rapi_cert_pem can be"
                                       " given", errors.ECODE_INVAL)
        if op.new_cluster_domain_secret and op.cluster_domain_secret is not None:
            raise errors.OpPrereqError("Only one of new_cluster_domain_secret and"
                                       " cluster_domain_secret can be given",
                                       errors.ECODE_INVAL)
        pem = str(op.rapi_cert_pem.get()) if op.rapi_cert_pem is not None else None
        if pem is not None and (
                "PRIVATE KEY-----" not in pem or "-----BEGIN CERTIFICATE-----" not in pem):
            raise errors.OpPrereqError("The RAPI certificate must hold a private key and a"
                                       " certificate (PEM)", errors.ECODE_INVAL)
        if op.cluster_domain_secret is not None and not str(op.cluster_domain_secret.get()).strip():
            raise errors.OpPrereqError("The cluster domain secret must not be empty",
                                       errors.ECODE_INVAL)
        if not (op.new_cluster_certificate or op.new_rapi_cert or op.rapi_cert_pem is not None
                or op.new_cluster_domain_secret or op.cluster_domain_secret is not None
                or op.new_confd_hmac_key or op.node_certificates or op.renew_ssh_keys):
            raise errors.OpPrereqError("Nothing to renew", errors.ECODE_INVAL)

    def CheckPrereq(self) -> None:
        """For ``renew_ssh_keys``: the master's cluster key, the new key's type and size.

        The type defaults to the cluster's, the size as upstream's.  Checked
        here so that a missing or bad ``id_cluster.pub`` or a bad type/size
        refuses the job before any certificate or secret is renewed.
        """
        self.ssh_renewal: cluster_sshkeys.Renewal | None = None
        if self.op.renew_ssh_keys:
            cluster = self.cfg.get_cluster_info()
            self.ssh_renewal = cluster_sshkeys.check_renewal(
                self.cfg, self.context.paths, self.op.ssh_key_type or cluster.ssh_key_type,
                self.op.ssh_key_bits)

    def _other_nodes(self) -> list[str]:
        master = self.cfg.get_master_node()
        return sorted(n.name for n in self.cfg.get_all_nodes_info().values()
                      if n.uuid != master and not n.offline)

    def _distribute(self, path: str) -> None:
        others = self._other_nodes()
        if self.rpc is None or not others:
            return
        failed = upload_files(self.rpc, self.context.paths, others, [path])
        for name in failed:
            self.LogWarning(f"Cannot update {os.path.basename(path)} on {name}")

    def _renew_cluster_cert(self) -> str:
        paths = self.context.paths
        key_pem, cert_pem = crypto.generate_self_signed_cert(
            self.cfg.get_cluster_info().cluster_name)
        tmp = paths.server_pem + ".new"
        crypto.write_pem_pair(tmp, key_pem, cert_pem)
        try:
            others = self._other_nodes()
            if self.rpc is not None and others:
                with open(tmp, encoding="utf-8") as fh:
                    content = fh.read()
                canonical = "/" + os.path.relpath(paths.server_pem, paths.root)
                res = self.rpc.call_upload_file(
                    others, file_name=canonical, content=content, mode=0o600, uid=None, gid=None,
                    mtime=None)
                for name in sorted(n for n, r in res.items() if r.fail_msg):
                    self.LogWarning(f"Cannot update the certificate on {name}:"
                                    f" {res[name].fail_msg}")
            if os.path.exists(paths.client_pem):
                crypto.write_pem_pair(paths.client_pem, key_pem, cert_pem)
            os.replace(tmp, paths.server_pem)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return crypto.cert_fingerprint(cert_pem)

    def _renew_rapi_cert(self) -> str:
        paths = self.context.paths
        tmp = paths.rapi_pem + ".new"
        try:
            if self.op.rapi_cert_pem is not None:
                uio.write_file_atomic(tmp, str(self.op.rapi_cert_pem.get()), mode=0o600)
                try:
                    key_pem, cert_pem = crypto.load_pem_pair(tmp)
                    fingerprint = crypto.cert_fingerprint(cert_pem)
                except errors.CertificateError as exc:
                    raise errors.OpExecError(f"Invalid RAPI certificate: {exc}") from exc
            else:
                key_pem, cert_pem = crypto.generate_self_signed_cert(
                    self.cfg.get_cluster_info().cluster_name)
                fingerprint = crypto.cert_fingerprint(cert_pem)
            crypto.write_pem_pair(tmp, key_pem, cert_pem)
            os.replace(tmp, paths.rapi_pem)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        self._distribute(paths.rapi_pem)
        return fingerprint

    def _renew_domain_secret(self) -> None:
        paths = self.context.paths
        if self.op.cluster_domain_secret is not None:
            secret = str(self.op.cluster_domain_secret.get()).strip()
        else:
            secret = secrets.token_hex(32)
        uio.write_file_atomic(paths.cluster_domain_secret, secret + "\n", mode=0o400)
        self._distribute(paths.cluster_domain_secret)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        op = self.op
        if op.new_confd_hmac_key:
            paths = self.context.paths
            uio.write_file_atomic(paths.confd_hmac_key, secrets.token_hex(32) + "\n",
                                  mode=0o400)
            self._distribute(paths.confd_hmac_key)
            feedback_fn("Confd HMAC key distributed")
        if op.new_rapi_cert or op.rapi_cert_pem is not None:
            feedback_fn(f"RAPI certificate {self._renew_rapi_cert()} distributed")
        if op.new_cluster_domain_secret or op.cluster_domain_secret is not None:
            self._renew_domain_secret()
            feedback_fn("Cluster domain secret distributed")
        if self.ssh_renewal is not None:   # always ours: modify_ssh_setup is not asked
            feedback_fn("Renewing SSH keys")
            cluster_sshkeys.renew_ssh_keys(self.cfg, self.rpc, self.context.paths,
                                           self.ssh_renewal, feedback_fn, self.LogWarning)
        if not (op.new_cluster_certificate or op.node_certificates):
            return None
        fingerprint = self._renew_cluster_cert()
        feedback_fn(f"New cluster certificate {fingerprint} distributed; restart the"
                    " node daemons and the master daemon to use it")
        return fingerprint


# --- query resource --------------------------------------------------------------

def _info_field(name: str, title: str, kind: str, doc: str, key: str | None = None) -> Any:
    src = key or name
    return query.FieldDef(name, title, kind, doc, lambda ctx, item: item.get(src, query.NODATA))


CLUSTER_FIELDS = query.make_table([
    _info_field("name", "Name", constants.QFT_TEXT, "Cluster name"),
    _info_field("master_node", "Master", constants.QFT_TEXT, "Master node name", "master"),
    _info_field("uuid", "UUID", constants.QFT_TEXT, "Cluster UUID"),
    _info_field("tags", "Tags", constants.QFT_OTHER, "Tags"),
    _info_field("ctime", "CTime", constants.QFT_TIMESTAMP, "Creation timestamp"),
    _info_field("mtime", "MTime", constants.QFT_TIMESTAMP, "Modification timestamp"),
    _info_field("serial_no", "SerialNo", constants.QFT_NUMBER, "Configuration serial number"),
    _info_field("architecture", "Architecture", constants.QFT_OTHER,
                "Architecture of the master daemon"),
    _info_field("drain_flag", "QueueDrained", constants.QFT_BOOL,
                "Whether the job queue is drained"),
    _info_field("software_version", "SoftwareVersion", constants.QFT_TEXT, "Software version"),
    _info_field("protocol_version", "ProtocolVersion", constants.QFT_NUMBER,
                "RPC protocol version"),
    _info_field("config_version", "ConfigVersion", constants.QFT_NUMBER,
                "Configuration format version"),
    _info_field("os_api_version", "OsApiVersion", constants.QFT_NUMBER, "OS API version"),
    _info_field("export_version", "ExportVersion", constants.QFT_NUMBER, "Export version"),
    _info_field("default_hypervisor", "DefaultHypervisor", constants.QFT_TEXT,
                "Default hypervisor"),
    _info_field("enabled_hypervisors", "EnabledHypervisors", constants.QFT_OTHER,
                "Enabled hypervisors"),
    _info_field("enabled_disk_templates", "EnabledDiskTemplates", constants.QFT_OTHER,
                "Enabled disk templates"),
    _info_field("candidate_pool_size", "CandidatePoolSize", constants.QFT_NUMBER,
                "Master candidate pool size"),
    _info_field("master_netdev", "MasterNetdev", constants.QFT_TEXT, "Master network device"),
    _info_field("master_ip", "MasterIP", constants.QFT_TEXT, "Master IP address"),
    _info_field("file_storage_dir", "FileStorageDir", constants.QFT_TEXT,
                "File storage directory"),
    _info_field("maintain_node_health", "MaintainNodeHealth", constants.QFT_BOOL,
                "Whether node health is maintained"),
    _info_field("volume_group_name", "VgName", constants.QFT_TEXT, "LVM volume group"),
    _info_field("max_running_jobs", "MaxRunningJobs", constants.QFT_NUMBER,
                "Maximum number of running jobs"),
    _info_field("max_tracked_jobs", "MaxTrackedJobs", constants.QFT_NUMBER,
                "Maximum number of tracked jobs"),
])


def collect_cluster(context: MasterContext, qfilter: Any, needs: set[str]) -> tuple[list[Any], Any]:
    """The ``cluster`` resource: one item, the cluster info dict plus a few extras."""
    cfg = context.committed_cfg()
    info = cluster_info(cfg)
    cluster = cfg.get_cluster_info()
    info["serial_no"] = cfg.get_serial_no()
    info["master_ip"] = cluster.master_ip
    jq = context.jqueue
    info["drain_flag"] = bool(jq.is_drained()) if jq is not None else False
    return [info], None
