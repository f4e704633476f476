"""Cluster maintenance LUs: rename the cluster, repair recorded disk sizes.

``OP_CLUSTER_RENAME`` gives the cluster a new name; the master IP becomes
the address the new name resolves to (``$GANETI_HOSTS_FILE`` first, then
DNS, as at ``gnt-cluster init``).  When that address differs from the
current master IP, it must not answer yet; the master IP is then moved
(down with the old address, up with the new one).  The new name reaches
every node with the ssconf files (``cluster_name``), which the master
daemon replicates after every configuration change.

``OP_CLUSTER_REPAIR_DISK_SIZES`` asks each primary node for the real size
of its instances' disks (``blockdev_getdimensions``) and records the size
in MiB where the configuration says otherwise (doc/commands.md).
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, locking
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import drbd
from ganeti.cmdlib.base import LogicalUnit, NoHooksLU
from ganeti.cmdlib.instance import expand_instance
from ganeti.cmdlib.roles import activate_master_ip, deactivate_master_ip, master_ip_params
from ganeti.objects import Disk, Instance
from ganeti.opcodes.cluster import OpClusterRename, OpClusterRepairDiskSizes
from ganeti.rpc.client import default_noded_port
from ganeti.utils import net as netutils
from ganeti.utils import validation

__all__ = ["LUClusterRename", "LUClusterRepairDiskSizes", "size_mismatches"]

#: seconds the check that the new master IP is free waits for an answer
IP_CHECK_TIMEOUT = 5.0
_MIB = 1024 * 1024


class LUClusterRename(LogicalUnit[OpClusterRename]):
    """Rename the cluster (with the big lock held exclusively).

    Refused (nothing changes): a name that is not a host name or does not
    resolve (``ECODE_RESOLVER``), neither name nor address changing, a new
    address that already answers (``ECODE_NOTUNIQUE``).
    """

    HPATH = "cluster-rename"
    HTYPE = constants.HTYPE_CLUSTER

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        cluster = self.cfg.get_cluster_info()
        self.old_name = cluster.cluster_name
        self.new_name = validation.check_hostname(self.op.name, "cluster name")
        try:
            self.new_ip = netutils.resolve_host(self.new_name)
        except errors.ResolverError as exc:
            raise errors.OpPrereqError(f"Cannot resolve the new cluster name {exc}",
                                       errors.ECODE_RESOLVER) from None
        if self.new_name == self.old_name and self.new_ip == cluster.master_ip:
            raise errors.OpPrereqError("Neither the name nor the IP address of the cluster"
                                       " has changed", errors.ECODE_INVAL)
        if self.new_ip != cluster.master_ip and netutils.tcp_ping(
                self.new_ip, default_noded_port(), IP_CHECK_TIMEOUT):
            raise errors.OpPrereqError(f"The given cluster IP address ({self.new_ip}) is"
                                       " reachable and does not belong to the current"
                                       " cluster", errors.ECODE_NOTUNIQUE)

    def BuildHooksEnv(self) -> dict[str, Any]:
        return {"OP_TARGET": self.cfg.get_cluster_info().cluster_name,
                "NEW_NAME": self.op.name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        master = self.cfg.get_master_node_name()
        return [master], [master]

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        cluster = self.cfg.get_cluster_info()
        move_ip = self.new_ip != cluster.master_ip
        if move_ip:
            try:
                deactivate_master_ip(self.cfg, self.rpc, master_ip_params(self.cfg))
            except errors.OpExecError as exc:
                self.LogWarning(f"Could not disable the master IP {cluster.master_ip}: {exc}")
            cluster.master_ip = self.new_ip
        cluster.cluster_name = self.new_name
        self.cfg.update(cluster)
        if move_ip:
            try:
                activate_master_ip(self.cfg, self.rpc)
            except errors.OpExecError as exc:
                self.LogWarning(f"Could not re-enable the master IP {self.new_ip} on the"
                                f" master, please restart it manually: {exc}")
        if move_ip:
            self.LogInfo(f"The master IP is now {self.new_ip}")
        return self.new_name


def size_mismatches(disks: list[Disk], dimensions: Any) -> list[int | str | None]:
    """Compare recorded disk sizes with a node's ``blockdev_getdimensions`` answer.

    One outcome per disk of ``disks`` (in the order they were asked for):
    None when the recorded size is right, the real size in MiB when it
    differs, or a warning text (a missing disk, an answer that is not
    ``[size in bytes, spindles]``; never a change).
    """
    if not isinstance(dimensions, list) or len(dimensions) != len(disks):
        return [f"invalid answer {dimensions!r}"] * len(disks)
    out: list[int | str | None] = []
    for disk, dims in zip(disks, dimensions):
        size = dims[0] if isinstance(dims, list) and len(dims) == 2 else None
        if dims is None:
            out.append("did not return size information (missing?)")
        elif not isinstance(size, int) or isinstance(size, bool) or size < 0:
            out.append(f"did not return valid size information ({dims!r})")
        else:
            out.append(size // _MIB if size // _MIB != disk.size else None)
    return out


class LUClusterRepairDiskSizes(NoHooksLU[OpClusterRepairDiskSizes]):
    """Record the real size of instance disks (all instances, or the given ones).

    Locking: the instances exclusively (their disks may change), their
    primary nodes shared.  Diskless instances and instances whose primary
    node is offline are skipped (the latter with a warning).  Result:
    ``[[instance, disk index, "size", new size in MiB], ...]``.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        if self.op.instances:
            names = [expand_instance(self.cfg, name).name for name in self.op.instances]
            self.wanted: list[str] | None = sorted(set(names))
            self.needed_locks = {locking.LEVEL_INSTANCE: list(self.wanted)}
        else:
            self.wanted = None
            self.needed_locks = {locking.LEVEL_INSTANCE: locking.ALL_SET}
        self.needed_locks[locking.LEVEL_NODE] = []
        self.share_locks = {locking.LEVEL_NODE: 1}

    def _instances(self) -> list[Instance]:
        names = self.wanted
        if names is None:
            names = sorted(self.owned_locks(locking.LEVEL_INSTANCE)) if self.glm is not None \
                else self.cfg.get_instance_names()
        found = (self.cfg.get_instance_info_by_name(name) for name in names)
        return [inst for inst in found if inst is not None]

    def DeclareLocks(self, level: int) -> None:
        if level == locking.LEVEL_NODE:
            self.needed_locks[level] = sorted({i.primary_node for i in self._instances()})

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        per_node: dict[str, list[tuple[Instance, int, Disk]]] = {}
        for inst in self._instances():
            node = self.cfg.get_node_info(inst.primary_node)
            if node is None:
                continue
            if node.offline:
                self.LogWarning(f"Primary node {node.name} of instance {inst.name} is"
                                " offline; its disks are not checked")
                continue
            for idx, disk in enumerate(self.cfg.get_instance_disks(inst.uuid)):
                if disk.dev_type != constants.DT_DISKLESS:
                    per_node.setdefault(node.name, []).append((inst, idx, disk))
        if not per_node:
            return []
        disks = {name: [drbd.rpc_disk(d, self.cfg) for _, _, d in entries]
                 for name, entries in per_node.items()}
        results = self.require_rpc().per_node(disks, lambda rpc, node: rpc.call_blockdev_getdimensions(
            node, disks=disks[node]))
        changed: list[list[Any]] = []
        for node_name, payload in results.answered(
                sorted(per_node), lambda node, why: self.LogWarning(
                    f"Failure in blockdev_getdimensions call to node {node}: {why}")):
            entries = per_node[node_name]
            outcomes = size_mismatches([d for _, _, d in entries], payload)
            for (inst, idx, disk), outcome in zip(entries, outcomes):
                if isinstance(outcome, str):
                    self.LogWarning(f"Disk {idx} of instance {inst.name} {outcome}, ignoring")
                elif outcome is not None:
                    self.LogInfo(f"Disk {idx} of instance {inst.name} has mismatched size,"
                                 f" correcting: recorded {disk.size}, actual {outcome}")
                    disk.size = outcome
                    self.cfg.update(disk)
                    changed.append([inst.name, idx, "size", outcome])
        return changed
