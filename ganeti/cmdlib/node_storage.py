"""Storage units of nodes: list, modify, repair (``gnt-node list-storage`` & co.).

A storage unit is the place a storage type keeps instance disks in on one
node.  This project lists the units of the file based types, ``file`` and
``sharedfile`` (the storage directory), and of LVM, ``lvm-vg`` (volume
groups) and ``lvm-pv`` (physical volumes); every other type of Ganeti's
list is refused with a clear error.  As in Ganeti, only LVM physical
volumes have a modifiable field (``allocatable``, node procedure
``storage_modify``) and only LVM volume groups a repair operation
(``fix-consistency``, ``storage_execute``), so modifying or repairing a file
storage unit is refused (doc/storage.md).

Listing takes the node locks shared (like Ganeti, which is why RAPI's
``GET /2/nodes/[node]/storage`` needs a write user).
"""

from __future__ import annotations

import os
from typing import Any

from ganeti import constants, errors, locking, query
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.cmdlib.common import expand_node
from ganeti.cmdlib.instance import storage_dir_for
from ganeti.objects import Cluster, Node, disk_tree
from ganeti.opcodes.node_storage import (VOLUME_FIELDS, OpNodeModifyStorage,
                                         OpNodeQueryStorage, OpNodeQueryvols,
                                         OpRepairNodeStorage)

__all__ = ["LUNodeQueryStorage", "LUNodeModifyStorage", "LURepairNodeStorage", "LUNodeQueryvols",
           "volume_rows",
           "default_storage_type", "check_storage_type"]

#: the fields the master fills in itself (the node reports the others)
_MASTER_FIELDS = frozenset([constants.SF_NODE, constants.SF_TYPE])


def default_storage_type(cluster: Cluster) -> str:
    """The storage type to list when none is given: ``lvm-vg`` when ``plain`` is
    enabled before the file based templates, else that of the first enabled
    file based one (``file`` before ``sharedfile``)."""
    enabled = cluster.enabled_disk_templates
    if constants.DT_PLAIN in enabled and not any(
            t in constants.DTS_FILEBASED for t in enabled[:enabled.index(constants.DT_PLAIN)]):
        return constants.ST_LVM_VG
    for stype in (constants.ST_FILE, constants.ST_SHARED_FILE):
        if constants.STORAGE_TYPE_TEMPLATE[stype] in cluster.enabled_disk_templates:
            return stype
    raise errors.OpPrereqError("No storage type to report: none of the enabled disk"
                               " templates has reportable storage (supported:"
                               f" {', '.join(sorted(constants.STS_REPORT))}); give a storage"
                               " type", errors.ECODE_INVAL)


def check_storage_type(cluster: Cluster, stype: str) -> None:
    """Refuse storage types this project cannot handle or the cluster has not enabled."""
    if stype not in constants.STORAGE_TYPES:
        raise errors.OpPrereqError(f"Unknown storage type '{stype}'", errors.ECODE_INVAL)
    if stype not in constants.STS_REPORT:
        raise errors.OpPrereqError(
            f"Storage type '{stype}' is not supported by this cluster software (supported:"
            f" {', '.join(sorted(constants.STS_REPORT))})", errors.ECODE_INVAL)
    template = constants.STORAGE_TYPE_TEMPLATE[stype]
    if template not in cluster.enabled_disk_templates:
        raise errors.OpPrereqError(f"Storage type '{stype}' is not enabled: disk template"
                                   f" '{template}' is not among the cluster's enabled disk"
                                   " templates", errors.ECODE_STATE)


class LUNodeQueryStorage(NoHooksLU[OpNodeQueryStorage]):
    """List the storage units of nodes: rows of ``output_fields`` values.

    Rows come sorted by node name, then unit name.  Offline nodes and nodes
    that cannot host instances are skipped; a node that does not answer is
    a warning in the job log, not a failure.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        op = self.op
        unknown = [f for f in op.output_fields if f not in constants.VALID_STORAGE_FIELDS]
        if unknown:
            raise errors.OpPrereqError(f"Unknown output field(s): {', '.join(unknown)}"
                                       f" (valid: {', '.join(constants.VALID_STORAGE_FIELDS)})",
                                       errors.ECODE_INVAL)
        if not op.output_fields:
            raise errors.OpPrereqError("No output fields given", errors.ECODE_INVAL)
        cluster = self.cfg.get_cluster_info()
        self.storage_type = op.storage_type or default_storage_type(cluster)
        if op.nodes:
            self.nodes = [expand_node(self.cfg, name) for name in op.nodes]
            self.needed_locks = {locking.LEVEL_NODE: [n.uuid for n in self.nodes]}
        else:
            self.nodes = []
            self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}
        self.share_locks = {locking.LEVEL_NODE: 1}

    def CheckPrereq(self) -> None:
        cluster = self.cfg.get_cluster_info()
        check_storage_type(cluster, self.storage_type)
        if not self.nodes:
            self.nodes = list(self.cfg.get_all_nodes_info().values())
        self.nodes = [self.cfg.get_node_info(n.uuid) or n for n in self.nodes]

    def _su_args(self) -> list[Any]:
        if self.storage_type in (constants.ST_LVM_VG, constants.ST_LVM_PV):
            return []
        paths = getattr(self.context, "paths", None)
        return [storage_dir_for(self.cfg.get_cluster_info(),
                                constants.STORAGE_TYPE_TEMPLATE[self.storage_type], None,
                                paths.root if paths is not None else None)]

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        fields = list(self.op.output_fields)
        asked = [constants.SF_NAME] + [f for f in fields if f not in _MASTER_FIELDS
                                       and f != constants.SF_NAME]
        wanted: list[Node] = sorted((n for n in self.nodes if not n.offline and n.vm_capable),
                                    key=lambda n: query.nice_sort_key(n.name))
        if not wanted:
            return []
        results = self.require_rpc().call_storage_list(
            [n.name for n in wanted], su_name=self.storage_type, su_args=self._su_args(),
            name=self.op.name, fields=asked)
        rows: list[list[Any]] = []
        for name, payload in results.answered(
                [n.name for n in wanted],
                lambda node, why: self.LogWarning(f"Cannot get the storage units of {node}: {why}")):
            units = [dict(zip(asked, unit)) for unit in payload or []]
            for unit in sorted(units, key=lambda u: query.nice_sort_key(str(u[constants.SF_NAME]))):
                unit[constants.SF_NODE] = name
                unit[constants.SF_TYPE] = self.storage_type
                rows.append([unit[f] for f in fields])
        return rows


class LUNodeModifyStorage(NoHooksLU[OpNodeModifyStorage]):
    """Change fields of one storage unit; refused for types without modifiable fields."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        op = self.op
        self.node = expand_node(self.cfg, op.node_name, op.node_uuid)
        op.node_name = self.node.name
        modifiable = constants.MODIFIABLE_STORAGE_FIELDS.get(op.storage_type)
        if modifiable is None:
            raise errors.OpPrereqError(f"Storage units of type '{op.storage_type}' can not be"
                                       " modified", errors.ECODE_INVAL)
        extra = sorted(set(op.changes) - modifiable)
        if extra:
            raise errors.OpPrereqError(f"Storage units of type '{op.storage_type}' have no"
                                       f" modifiable field(s) {', '.join(extra)}",
                                       errors.ECODE_INVAL)
        self.needed_locks = {locking.LEVEL_NODE: [self.node.uuid]}

    def CheckPrereq(self) -> None:
        check_storage_type(self.cfg.get_cluster_info(), self.op.storage_type)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        op = self.op
        self.require_rpc().call_storage_modify(
            self.node.name, su_name=op.storage_type, su_args=[], name=op.name,
            changes=dict(op.changes)).one(self.node.name, f"Cannot modify storage unit"
                                                          f" '{op.name}' on {self.node.name}")
        return None


class LURepairNodeStorage(NoHooksLU[OpRepairNodeStorage]):
    """Repair one storage unit; refused for types without a repair operation."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        op = self.op
        self.node = expand_node(self.cfg, op.node_name, op.node_uuid)
        op.node_name = self.node.name
        operations = constants.VALID_STORAGE_OPERATIONS.get(op.storage_type, frozenset())
        if constants.SO_FIX_CONSISTENCY not in operations:
            raise errors.OpPrereqError(f"Storage units of type '{op.storage_type}' can not be"
                                       " repaired", errors.ECODE_INVAL)
        self.needed_locks = {locking.LEVEL_NODE: [self.node.uuid]}

    def CheckPrereq(self) -> None:
        check_storage_type(self.cfg.get_cluster_info(), self.op.storage_type)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        op = self.op
        self.require_rpc().call_storage_execute(
            self.node.name, su_name=op.storage_type, su_args=[], name=op.name,
            op=constants.SO_FIX_CONSISTENCY).one(
                self.node.name, f"Cannot repair storage unit '{op.name}' on {self.node.name}")
        return None


_MIB = 1024 * 1024


def volume_rows(node_name: str, files: list[Any], owners: dict[str, str],
                fields: list[str]) -> list[list[str]]:
    """``gnt-node volumes`` rows of one node from its ``volume_list`` answer, sorted
    by path: ``phys`` the file's path, ``vg`` its storage directory, ``name`` the
    path below it (for a logical volume: ``/dev/<vg>/<lv>``, the VG, the LV), ``size`` MiB (rounded down), ``instance`` the owner of the
    disk with that path in ``owners`` (``{path: instance name}``) or ``-``.
    Values are texts, as Ganeti's."""
    rows = []
    for directory, name, size in files:
        # an LVM row names its volume group, a file row its (absolute) directory
        phys = os.path.join(directory, name) if directory.startswith("/") \
            else f"/dev/{directory}/{name}"
        values = {"node": node_name, "phys": phys, "vg": directory, "name": name,
                  "size": str(int(size) // _MIB), "instance": owners.get(phys, "-")}
        rows.append((phys, [values[f] for f in fields]))
    return [row for _, row in sorted(rows, key=lambda r: r[0])]


class LUNodeQueryvols(NoHooksLU[OpNodeQueryvols]):
    """List the disk files of the enabled file based templates' storage directories
    and the logical volumes of the cluster's volume group on nodes, with the
    instance each belongs to.

    Offline nodes are skipped; a node that does not answer is a warning.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        unknown = [f for f in self.op.output_fields if f not in VOLUME_FIELDS]
        if unknown or not self.op.output_fields:
            raise errors.OpPrereqError(f"Unknown output fields selected: {', '.join(unknown)}"
                                       f" (valid: {', '.join(VOLUME_FIELDS)})",
                                       errors.ECODE_INVAL)
        if self.op.nodes:
            self.nodes = [expand_node(self.cfg, name) for name in self.op.nodes]
            self.needed_locks = {locking.LEVEL_NODE: [n.uuid for n in self.nodes]}
        else:
            self.nodes = []
            self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}
        self.share_locks = {locking.LEVEL_NODE: 1}

    def _units(self) -> list[list[str]]:
        cluster = self.cfg.get_cluster_info()
        paths = getattr(self.context, "paths", None)
        units = [[stype, storage_dir_for(cluster, constants.STORAGE_TYPE_TEMPLATE[stype], None,
                                         paths.root if paths is not None else None)]
                 for stype in (constants.ST_FILE, constants.ST_SHARED_FILE)
                 if constants.STORAGE_TYPE_TEMPLATE[stype] in cluster.enabled_disk_templates]
        if cluster.volume_group_name and any(t in constants.DTS_LVM
                                             for t in cluster.enabled_disk_templates):
            units.append([constants.ST_LVM_VG, cluster.volume_group_name])
        return units

    def _owners(self) -> dict[str, dict[str, str]]:
        """``{node uuid: {disk path: instance name}}`` of the file based and plain disks."""
        out: dict[str, dict[str, str]] = {}
        for inst in self.cfg.get_all_instances_info().values():
            for disk in (d for top in self.cfg.get_instance_disks(inst.uuid)
                         for d in disk_tree(top)):
                if disk.dev_type in (constants.DT_FILE, constants.DT_SHARED_FILE) \
                        and len(disk.logical_id) == 2:
                    for node_uuid in disk.nodes or [inst.primary_node]:
                        out.setdefault(node_uuid, {})[
                            os.path.normpath(str(disk.logical_id[1]))] = inst.name
                elif disk.dev_type == constants.DT_PLAIN and len(disk.logical_id) == 2:
                    vg, lv = disk.logical_id
                    for node_uuid in disk.nodes or [inst.primary_node]:
                        out.setdefault(node_uuid, {})[f"/dev/{vg}/{lv}"] = inst.name
        return out

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        nodes = self.nodes or list(self.cfg.get_all_nodes_info().values())
        wanted = sorted((n for n in nodes if not n.offline),
                        key=lambda n: query.nice_sort_key(n.name))
        units = self._units()
        if not wanted or not units:
            return []
        results = self.require_rpc().call_volume_list([n.name for n in wanted], units=units)
        owners = self._owners()
        rows: list[list[str]] = []
        uuids = {n.name: n.uuid for n in wanted}
        for name, payload in results.answered(
                uuids, lambda node, why: self.LogWarning(
                    f"Can't compute volume data on node {node}: {why}")):
            rows += volume_rows(name, payload or [], owners.get(uuids[name], {}),
                                list(self.op.output_fields))
        return rows
