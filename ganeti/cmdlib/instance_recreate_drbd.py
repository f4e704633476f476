"""``gnt-instance recreate-disks`` of a ``drbd`` instance (doc/storage.md,
"Recreating mirrors").

Without ``-n`` a selected mirror whose volumes are gone from *both* of its
nodes is made again there, with the same logical id; a mirror that lost
its volumes on one node only is refused (``replace-disks -p|-s`` copies
the other side's data back; recreating would throw it away), and so is
one that has both (as in Ganeti: only missing disks are recreated).  With ``-n PNODE:SNODE`` every disk is made anew on
those two nodes (new minors, port and secret) and the instance's primary
becomes ``PNODE``: the way back for an instance whose nodes are both lost.
The mirrors are made on the secondary, then the primary (empty data,
initially synced), and taken down once in sync (the instance is stopped).
The data is not restored.
"""

from __future__ import annotations

import copy
from typing import Any

from ganeti import errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import drbd, lvm
from ganeti.cmdlib.instance import check_node_usable
from ganeti.objects import Disk, Node

__all__ = ["check_missing", "check_move", "check_nothing_left", "recreate", "move"]


def _exists(lu: Any, node: Node, disk: Disk) -> bool:
    found = lu.require_rpc().call_blockdev_find(node.name, disk=drbd.rpc_disk(disk, lu.cfg)).one(
        node.name, f"Cannot look for disk {disk.iv_name} on {node.name}")
    return found is not None


def _nodes_of(lu: Any, disk: Disk) -> tuple[Node, Node]:
    """(primary, secondary) of the mirror ``disk`` as the instance uses it now."""
    pnode = lu.pnode
    peer = lu.cfg.get_node_info(drbd.drbd_peer(disk, pnode.uuid) or "")
    if peer is None:
        raise errors.OpPrereqError(f"Disk {disk.iv_name} of instance {lu.instance.name} has"
                                   " no secondary node in the configuration",
                                   errors.ECODE_STATE)
    return pnode, peer


def check_missing(lu: Any, indices: list[int]) -> list[tuple[int, Disk]]:
    """The selected mirrors, all gone from both their nodes; refuses any other."""
    missing = []
    need: dict[str, dict[str, int]] = {}
    for idx in indices:
        disk = lu.disks[idx]
        pnode, snode = _nodes_of(lu, disk)
        for node in (pnode, snode):
            if node.offline:
                raise errors.OpPrereqError(f"Node {node.name} of disk {idx} is offline; give"
                                           " other nodes with -n PNODE:SNODE",
                                           errors.ECODE_STATE)
        here = {node.name: _exists(lu, node, disk) for node in (pnode, snode)}
        if all(here.values()):
            raise errors.OpPrereqError(
                f"Disk {idx} of instance {lu.instance.name} exists on {pnode.name} and"
                f" {snode.name}; recreate-disks makes only missing disks (leave it out with"
                " --disk, or give other nodes with -n PNODE:SNODE)", errors.ECODE_STATE)
        if any(here.values()):
            lost = next(name for name, ok in here.items() if not ok)
            side = "-p" if lost == pnode.name else "-s"
            raise errors.OpPrereqError(
                f"Disk {idx} of instance {lu.instance.name} lost its volumes on {lost} only;"
                f" 'gnt-instance replace-disks {side}' copies them back from the other node"
                " (recreating would discard its data)", errors.ECODE_STATE)
        missing.append((idx, disk))
        for node in (pnode, snode):
            vg = disk.children[0].logical_id[0]
            per = need.setdefault(node.name, {})
            per[vg] = per.get(vg, 0) + drbd.drbd_disk_size(disk.size)
    for name, sizes in need.items():
        node = lu.cfg.get_node_info_by_name(name)
        lvm.check_vg_free(lu, [node], sizes)
    return missing


def check_move(lu: Any, nodes: list[Node], indices: list[int]) -> tuple[Node, Node]:
    """The two new nodes of ``-n PNODE:SNODE``: distinct, usable, with room, and
    holding no volume of the instance."""
    if len(nodes) != 2 or nodes[0].uuid == nodes[1].uuid:
        raise errors.OpPrereqError("A drbd instance's disks are recreated on two distinct"
                                   " nodes: -n PNODE:SNODE", errors.ECODE_INVAL)
    if indices != list(range(len(lu.disks))):
        raise errors.OpPrereqError("Recreating the disks on other nodes takes all of them"
                                   " (leave out --disk)", errors.ECODE_INVAL)
    current = set(lu.cfg.get_instance_nodes(lu.instance.uuid))
    for node, role in zip(nodes, ("primary", "secondary")):
        check_node_usable(node, f" as the new {role} node")
        # one of its nodes again only once its volumes are gone there (Ganeti's QA
        # destroys them, then asks an allocator, which may name a node they were on)
        if node.uuid in current and any(_exists(lu, node, d) for d in lu.disks):
            raise errors.OpPrereqError(
                f"Node {node.name} already holds volumes of instance {lu.instance.name}:"
                " recreate its disks on their own nodes (-n PNODE:SNODE as they are) or on"
                " two other nodes; 'gnt-instance replace-disks -n' moves one side",
                errors.ECODE_INVAL)
    lvm.check_vg_free(lu, nodes, lvm.required_vg_sizes(
        (d.children[0].logical_id[0], drbd.drbd_disk_size(d.size)) for d in lu.disks))
    return nodes[0], nodes[1]


def check_nothing_left(lu: Any) -> None:
    """Refuse to let an allocator move an instance whose online nodes still hold any of
    its volumes (intact or half-lost mirrors would be abandoned for empty disks:
    recreate in place, ``replace-disks``, or name the nodes with ``-n``)."""
    for uuid in lu.cfg.get_instance_nodes(lu.instance.uuid):
        node = lu.cfg.get_node_info(uuid)
        if node is None or node.offline:
            continue
        if any(_exists(lu, node, d) for d in lu.disks):
            raise errors.OpPrereqError(
                f"Node {node.name} still holds volumes of instance {lu.instance.name}: an"
                " iallocator moves the disks only of an instance whose volumes are gone"
                " (recreate them in place without -I, use replace-disks, or name the new"
                " nodes with -n PNODE:SNODE)", errors.ECODE_STATE)


def _make(lu: Any, disks: list[Disk], pnode: Node, snode: Node,
          feedback_fn: FeedbackFn) -> None:
    """Create ``disks`` on the secondary, then the primary; all removed on failure."""
    made: list[Disk] = []
    try:
        for disk in disks:
            made.append(disk)
            drbd.make_mirror(lu, lu.instance.name, disk, (pnode, snode), feedback_fn,
                             verb="recreate")
    except BaseException:
        for disk in made:
            drbd.remove_mirror_disk(lu, disk, (snode, pnode))
        raise


def _settle(lu: Any, disks: list[Disk], pnode: Node, snode: Node,
            feedback_fn: FeedbackFn) -> None:
    try:
        if not drbd.wait_for_sync(lu, pnode, disks, feedback_fn, cfg=lu.cfg,
                                  instance=lu.instance.name):
            lu.LogWarning("The new mirrors did not come in sync; activating the disks"
                          " resumes the copy")
    finally:
        drbd.shutdown_mirrors(lu, disks, [pnode, snode])


def recreate(lu: Any, missing: list[tuple[int, Disk]], feedback_fn: FeedbackFn) -> None:
    """Make the mirrors of ``missing`` again on their own nodes (same logical id)."""
    disks = [d for _, d in missing]
    pnode, snode = _nodes_of(lu, disks[0])
    _make(lu, disks, pnode, snode, feedback_fn)
    _settle(lu, disks, pnode, snode, feedback_fn)


def move(lu: Any, pnode: Node, snode: Node, feedback_fn: FeedbackFn) -> None:
    """Make every disk anew on ``pnode``/``snode`` and move the instance there."""
    cfg, inst = lu.cfg, lu.instance
    reserved: list[tuple[str, str, int, int, int]] = []
    new: list[Disk] = []
    try:
        for disk in lu.disks:
            try:
                port, pminor, sminor = cfg.allocate_drbd(pnode.uuid, snode.uuid)
            except errors.ConfigurationError as exc:
                raise errors.OpExecError(str(exc)) from None
            reserved.append((pnode.uuid, snode.uuid, port, pminor, sminor))
            twin = copy.deepcopy(disk)
            twin.logical_id = [pnode.uuid, snode.uuid, port, pminor, sminor, drbd.new_secret()]
            twin.nodes = [pnode.uuid, snode.uuid]
            for child in twin.children:
                child.nodes = [pnode.uuid, snode.uuid]
            new.append(twin)
        _make(lu, new, pnode, snode, feedback_fn)
        with cfg.batch():
            for disk, twin in zip(lu.disks, new):
                disk.logical_id, disk.nodes, disk.children = (twin.logical_id, twin.nodes,
                                                              twin.children)
                cfg.update(disk)
            inst.primary_node = pnode.uuid
            cfg.update(inst)
    finally:
        cfg.release_drbd(reserved)
    feedback_fn(f"* instance {inst.name} now has {pnode.name} as primary and {snode.name}"
                " as secondary node")
    _settle(lu, list(lu.disks), pnode, snode, feedback_fn)
