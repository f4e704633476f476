"""``gnt-instance modify -t``: converting a stopped instance's disks between
``plain`` and ``drbd`` (doc/storage.md, "Converting between plain and drbd").

* ``plain`` -> ``drbd`` (``-t drbd -n SNODE``): on the new secondary the
  whole mirror is made (data and metadata volumes, the DRBD device, as a
  secondary); on the primary a metadata volume is made and the existing
  volume is renamed to the mirror's data volume, so the data stays where
  it is.  The primary's side is then set up over it with fresh metadata
  and made primary with force (``drbd_adopt_local``): DRBD copies the
  whole disk to the secondary, which the job waits for (unless
  ``--no-wait-for-sync``).  The disks keep their UUIDs.
* ``drbd`` -> ``plain`` (``-t plain``): the mirrors are taken down on both
  nodes, the primary's data volume becomes the plain volume (renamed to
  ``<uuid>.disk<N>``), the metadata volume and everything on the old
  secondary are removed.

* ``file`` <-> ``sharedfile`` (``-t sharedfile``, ``-t file``): each disk is
  made again below the other template's storage directory on the primary
  node, the data copied there by the node (``blockdev_convert``), the
  configuration switched, and the old files removed.  The disks keep their
  UUIDs.

The instance must be stopped with its disks deactivated.  A failure before
the configuration changes undoes what was made; after it, the leftovers
are warnings that name them (``gnt-cluster verify`` lists them too).
"""

from __future__ import annotations

import copy
import uuid as uuidlib
from typing import Any

from ganeti import constants, errors, locking
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import allocator, drbd, lvm
from ganeti.cmdlib.common import expand_node
from ganeti.cmdlib.instance import (check_node_online, check_node_usable, expand_instance,
                                    file_logical_id, storage_dir_for)
from ganeti.iallocator import document
from ganeti.objects import Disk, Node

__all__ = ["CONVERSIONS", "check_arguments", "expand_extra", "declare_locks", "check",
           "convert"]

#: the (from, to) disk template conversions modify -t does
CONVERSIONS = frozenset({(constants.DT_PLAIN, constants.DT_DRBD8),
                         (constants.DT_DRBD8, constants.DT_PLAIN),
                         (constants.DT_FILE, constants.DT_SHARED_FILE),
                         (constants.DT_SHARED_FILE, constants.DT_FILE)})
#: the conversions between file based templates (a copy on the primary node)
_FILE_TEMPLATES = frozenset({constants.DT_FILE, constants.DT_SHARED_FILE})


def check_arguments(op: Any, other_changes: bool) -> None:
    """Refuse a conversion combined with other disk or NIC changes, and a
    secondary node for anything but a conversion to ``drbd``. Pure."""
    if op.disk_template is None:
        if op.remote_node or op.iallocator:
            raise errors.OpPrereqError("A secondary node (-n) or an iallocator goes only with"
                                       " a conversion to drbd (-t drbd)", errors.ECODE_INVAL)
        return
    if other_changes:
        raise errors.OpPrereqError("A disk template conversion cannot be combined with"
                                   " other disk or NIC changes; run them one after the other",
                                   errors.ECODE_INVAL)
    if op.remote_node and op.iallocator:
        raise errors.OpPrereqError("Give either the secondary node (-n) or an iallocator"
                                   " (-I), not both", errors.ECODE_INVAL)
    if op.disk_template == constants.DT_DRBD8 and not (op.remote_node or op.iallocator):
        raise errors.OpPrereqError("Converting to drbd needs the secondary node (-n NODE) or"
                                   " an iallocator to choose it (-I NAME)", errors.ECODE_INVAL)
    if op.disk_template != constants.DT_DRBD8 and (op.remote_node or op.iallocator):
        raise errors.OpPrereqError(f"A secondary node or an iallocator goes only with -t"
                                   f" {constants.DT_DRBD8}, not -t {op.disk_template}",
                                   errors.ECODE_INVAL)


def expand_extra(lu: Any) -> None:
    """The new secondary joins the node locks (with an iallocator, every node of the
    primary's group: any may be chosen); a conversion holds them exclusively
    (volumes are made, renamed and removed)."""
    op = lu.op
    if op.disk_template is None:
        return
    if op.remote_node:
        node = expand_node(lu.cfg, op.remote_node)
        op.remote_node = node.name
        op.remote_node_uuid = node.uuid
        lu.extra_node_uuids = [node.uuid]
    elif op.iallocator:
        inst = expand_instance(lu.cfg, op.instance_name)
        pnode = lu.cfg.get_node_info(inst.primary_node)
        group = pnode.group if pnode is not None else None
        lu.extra_node_uuids = sorted(u for u, n in lu.cfg.get_all_nodes_info().items()
                                     if u != inst.primary_node and n.group == group)


def declare_locks(lu: Any, level: int) -> None:
    """Node locks exclusive for a conversion (call from ``DeclareLocks``)."""
    if lu.op.disk_template is not None and level in (locking.LEVEL_NODE,
                                                      locking.LEVEL_NODE_RES):
        lu.share_locks[level] = 0


def check(lu: Any) -> None:
    """Refuse a conversion that cannot go ahead; sets ``lu.convert_snode``."""
    op, inst, cfg = lu.op, lu.instance, lu.cfg
    current, target = inst.disk_template, op.disk_template
    if target == current:
        raise errors.OpPrereqError(f"Instance {inst.name} already has disk template"
                                   f" {current}", errors.ECODE_INVAL)
    if (current, target) not in CONVERSIONS:
        supported = ", ".join(f"{a} -> {b}" for a, b in sorted(CONVERSIONS))
        raise errors.OpPrereqError(f"Cannot convert instance {inst.name} from {current} to"
                                   f" {target} (supported: {supported})", errors.ECODE_INVAL)
    cluster = cfg.get_cluster_info()
    if target not in cluster.enabled_disk_templates:
        raise errors.OpPrereqError(f"Disk template {target} is not enabled in this cluster"
                                   f" (enabled: {', '.join(cluster.enabled_disk_templates)})",
                                   errors.ECODE_STATE)
    if inst.admin_state == constants.ADMINST_UP:
        raise errors.OpPrereqError(f"Instance {inst.name} is marked to be up; stop it before"
                                   " converting its disks", errors.ECODE_STATE)
    if inst.disks_active:
        raise errors.OpPrereqError(f"The disks of instance {inst.name} are active; deactivate"
                                   " them first (gnt-instance deactivate-disks)",
                                   errors.ECODE_STATE)
    check_node_online(lu.pnode, " as primary node")
    lu.convert_snode = None
    if target == constants.DT_DRBD8:
        if op.iallocator and not op.remote_node:
            _ask_allocator(lu)
        snode = cfg.get_node_info(op.remote_node_uuid)
        if snode is None:
            raise errors.OpPrereqError(f"Node {op.remote_node} disappeared",
                                       errors.ECODE_NOENT)
        if snode.uuid == lu.pnode.uuid:
            raise errors.OpPrereqError(f"The secondary node {snode.name} is the instance's"
                                       " primary node", errors.ECODE_INVAL)
        check_node_usable(snode, " as the secondary node")
        for node in (lu.pnode, snode):
            if lvm.exclusive_storage(cluster, node, cfg.get_nodegroup(node.group)):
                raise errors.OpPrereqError(f"Node {node.name} has exclusive storage: the drbd"
                                           " template cannot be used there",
                                           errors.ECODE_STATE)
        lvm.check_vg_free(lu, [snode], lvm.required_vg_sizes(
            (d.logical_id[0], drbd.drbd_disk_size(d.size)) for d in lu.disks))
        lvm.check_vg_free(lu, [lu.pnode], lvm.required_vg_sizes(
            (d.logical_id[0], constants.DRBD_META_SIZE) for d in lu.disks))
        lu.convert_snode = snode


def _ask_allocator(lu: Any) -> None:
    """Let the iallocator choose the secondary (an ``allocate-secondary`` request)."""
    op = lu.op
    answer, _ = allocator.ask(lu, op.iallocator,
                              document.allocate_secondary_request(lu.instance.name))
    answer.require_success(allocator.allocator_name(lu, op.iallocator) or "ganeti-iallocator")
    node = expand_node(lu.cfg, answer.nodes[0])
    if node.uuid not in lu.extra_node_uuids:
        raise errors.OpPrereqError(f"The iallocator chose node {node.name}, which is not in the"
                                   " primary node's group", errors.ECODE_INVAL)
    lu.LogInfo(f"Selected secondary node {node.name} via the iallocator")
    op.remote_node = node.name
    op.remote_node_uuid = node.uuid


def convert(lu: Any, feedback_fn: FeedbackFn) -> None:
    """Run the conversion :func:`check` accepted."""
    if lu.op.disk_template == constants.DT_DRBD8:
        _plain_to_drbd(lu, lu.convert_snode, feedback_fn)
    elif lu.op.disk_template in _FILE_TEMPLATES:
        _file_to_file(lu, feedback_fn)
    else:
        _drbd_to_plain(lu, feedback_fn)


def _file_to_file(lu: Any, feedback_fn: FeedbackFn) -> None:
    """``file`` <-> ``sharedfile``: new files, the data copied, the config switched,
    the old files removed.  A failure before the switch removes the new files."""
    inst, cfg, pnode, target = lu.instance, lu.cfg, lu.pnode, lu.op.disk_template
    paths = getattr(lu.context, "paths", None)
    storage_dir = storage_dir_for(cfg.get_cluster_info(), target, None,
                                  paths.root if paths is not None else None)
    old: list[Disk] = [copy.deepcopy(d) for d in lu.disks]
    new: list[Disk] = []
    for idx, disk in enumerate(old):
        made = copy.deepcopy(disk)
        made.dev_type = target
        made.logical_id = file_logical_id(storage_dir, inst.name, disk.uuid, idx,
                                          disk.logical_id[0] if disk.logical_id else "loop")
        new.append(made)
    rpc = lu.require_rpc()
    created: list[Disk] = []
    try:
        feedback_fn(f"* creating the {target} disks on {pnode.name}")
        for made in new:
            _create(lu, pnode, made, on_primary=True, what=f"disk {made.logical_id[1]}")
            created.append(made)
        for idx, (src, dst) in enumerate(zip(old, new)):
            feedback_fn(f"* copying the data of disk {idx} ({src.size} MiB) to"
                        f" {dst.logical_id[1]}")
            rpc.call_blockdev_convert(pnode.name, src=drbd.rpc_disk(src, cfg),
                                      dst=drbd.rpc_disk(dst, cfg)).one(
                pnode.name, f"Cannot copy disk {idx} on {pnode.name}")
    except errors.GanetiError:
        for made in created:
            drbd.remove_mirror_disk(lu, made, [pnode], f"new disk {made.logical_id[1]}")
        raise
    with cfg.batch():
        for disk, made in zip(lu.disks, new):
            disk.dev_type = made.dev_type
            disk.logical_id = made.logical_id
            cfg.update(disk)
        inst.disk_template = target
        cfg.update(inst)
    feedback_fn(f"* removing the old {old[0].dev_type if old else ''} disks")
    for disk in old:
        drbd.remove_mirror_disk(lu, disk, [pnode], f"old disk {disk.logical_id[1]}")


def _create(lu: Any, node: Node, disk: Disk, *, on_primary: bool, what: str) -> None:
    inst = lu.instance
    lu.require_rpc().call_blockdev_create(
        node.name, disk=drbd.rpc_disk(disk, lu.cfg), size=disk.size,
        owner_instance_name=inst.name, on_primary=on_primary,
        info=constants.DISK_INFO_PREFIX + inst.name, excl_stor=False,
    ).one(node.name, f"Cannot create {what} on {node.name}")


def _rename(lu: Any, node: Node, pairs: list[tuple[Disk, list[str]]], what: str) -> None:
    devlist = [[drbd.rpc_disk(disk, lu.cfg), new_id] for disk, new_id in pairs]
    lu.require_rpc().call_blockdev_rename(node.name, devlist=devlist).one(
        node.name, f"Cannot rename {what} on {node.name}")


def _plain_to_drbd(lu: Any, snode: Node, feedback_fn: FeedbackFn) -> None:
    inst, cfg, pnode = lu.instance, lu.cfg, lu.pnode
    disks: list[Disk] = list(lu.disks)
    reserved: list[tuple[str, str, int, int, int]] = []
    try:
        mirrors = []
        for idx, disk in enumerate(disks):
            try:
                port, pminor, sminor = cfg.allocate_drbd(pnode.uuid, snode.uuid)
            except errors.ConfigurationError as exc:
                raise errors.OpExecError(str(exc)) from None
            reserved.append((pnode.uuid, snode.uuid, port, pminor, sminor))
            mirrors.append(drbd.make_drbd_disk(
                uuid=disk.uuid, index=idx, size=disk.size, vg=disk.logical_id[0],
                mode=disk.mode, name=disk.name, nodes=(pnode.uuid, snode.uuid), port=port,
                minors=(pminor, sminor), secret=drbd.new_secret(),
                child_uuids=(str(uuidlib.uuid4()), str(uuidlib.uuid4())),
                spindles=disk.spindles))
        _prepare_volumes(lu, snode, disks, mirrors, feedback_fn)
        with cfg.batch():
            for disk, mirror in zip(disks, mirrors):
                disk.dev_type = mirror.dev_type
                disk.logical_id = mirror.logical_id
                disk.nodes = mirror.nodes
                disk.children = mirror.children
                disk.iv_name = mirror.iv_name
                cfg.update(disk)
            inst.disk_template = constants.DT_DRBD8
            cfg.update(inst)
    finally:
        cfg.release_drbd(reserved)
    feedback_fn(f"* setting the mirrors up on {pnode.name} over the existing data")
    try:
        lu.require_rpc().call_drbd_adopt_local(
            pnode.name, disks=drbd.rpc_disks(disks, cfg),
        ).one(pnode.name, f"Cannot set the mirrors up on {pnode.name}")
        if lu.op.wait_for_sync:
            if not drbd.wait_for_sync(lu, pnode, disks, feedback_fn, cfg=cfg,
                                      instance=inst.name):
                lu.LogWarning("The mirrors did not come in sync; gnt-cluster verify-disks"
                              " activates them again")
        else:
            feedback_fn("* not waiting for the sync (--no-wait-for-sync): the copy goes on"
                        " while the disks are active; activate them to let it finish")
    finally:
        if lu.op.wait_for_sync:
            drbd.shutdown_mirrors(lu, disks, [pnode, snode])


def _prepare_volumes(lu: Any, snode: Node, disks: list[Disk], mirrors: list[Disk],
                     feedback_fn: FeedbackFn) -> None:
    """Make the secondary's mirrors and the primary's metadata volumes, and rename
    the primary's volumes to the mirrors' data volumes; all undone on failure."""
    pnode = lu.pnode
    on_snode: list[Disk] = []
    metas: list[Disk] = []
    renamed: list[tuple[Disk, Disk]] = []
    try:
        for mirror in mirrors:
            feedback_fn(f"* creating {mirror.iv_name} on the secondary {snode.name}")
            _create(lu, snode, mirror, on_primary=False, what=f"the mirror of {mirror.iv_name}")
            on_snode.append(mirror)
        for mirror in mirrors:
            meta = mirror.children[1]
            feedback_fn(f"* creating the metadata volume of {mirror.iv_name} on {pnode.name}")
            _create(lu, pnode, meta, on_primary=True,
                    what=f"the metadata volume of {mirror.iv_name}")
            metas.append(meta)
        for disk, mirror in zip(disks, mirrors):
            data = mirror.children[0]
            feedback_fn(f"* renaming {'/'.join(disk.logical_id)} to"
                        f" {'/'.join(data.logical_id)} on {pnode.name}")
            _rename(lu, pnode, [(disk, list(data.logical_id))], f"the volume of {disk.iv_name}")
            renamed.append((disk, data))
    except errors.GanetiError:
        for disk, data in reversed(renamed):
            try:
                _rename(lu, pnode, [(data, list(disk.logical_id))],
                        f"the volume of {disk.iv_name} back")
            except errors.GanetiError as exc:
                lu.LogWarning(f"{exc}: the data of {disk.iv_name} is now in volume"
                              f" {'/'.join(data.logical_id)}")
        for meta in metas:
            drbd.remove_mirror_disk(lu, meta, [pnode], f"volume {'/'.join(meta.logical_id)}")
        for mirror in on_snode:
            drbd.remove_mirror_disk(lu, mirror, [snode], f"the new mirror of {mirror.iv_name}")
        raise


def _drbd_to_plain(lu: Any, feedback_fn: FeedbackFn) -> None:
    inst, cfg, pnode = lu.instance, lu.cfg, lu.pnode
    disks: list[Disk] = list(lu.disks)
    snodes = drbd.secondary_nodes(lu, disks, inst.primary_node)
    feedback_fn("* taking the mirrors down")
    drbd.shutdown_mirrors(lu, disks, [pnode, *snodes], strict=True)
    old = [copy.deepcopy(d) for d in disks]      # the volumes to remove afterwards
    plain_ids = [lvm.lv_logical_id(d.children[0].logical_id[0], d.uuid, idx)
                 for idx, d in enumerate(disks)]
    feedback_fn(f"* keeping the data volumes on {pnode.name} as the plain disks")
    _rename(lu, pnode, [(d.children[0], pid) for d, pid in zip(disks, plain_ids)],
            "the data volumes")
    with cfg.batch():
        for disk, pid in zip(disks, plain_ids):
            disk.dev_type = constants.DT_PLAIN
            disk.logical_id = pid
            disk.nodes = [pnode.uuid]
            disk.children = []
            cfg.update(disk)
        inst.disk_template = constants.DT_PLAIN
        cfg.update(inst)
    feedback_fn("* removing the metadata volumes and the old secondary's volumes")
    for disk in old:
        drbd.remove_mirror_disk(lu, disk.children[1], [pnode],
                                f"volume {'/'.join(disk.children[1].logical_id)}")
        for snode in snodes:
            if snode.offline:
                lu.LogWarning(f"Node {snode.name} is offline: the volumes of {disk.iv_name}"
                              " are left there")
                continue
            for child in disk.children:
                drbd.remove_mirror_disk(lu, child, [snode],
                                        f"volume {'/'.join(child.logical_id)}")
