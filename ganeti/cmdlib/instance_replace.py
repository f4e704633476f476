"""``gnt-instance replace-disks``: new volumes under a mirrored instance's disks.

The modes (Ganeti's, doc/storage.md "Replacing disks"):

* ``replace_on_secondary`` / ``replace_on_primary`` (``-s``/``-p``): on that
  node, for each disk, new data and metadata volumes are made
  (``<name>.new``), DRBD lets go of the old ones (``drbd_detach_local``),
  the old ones are renamed ``<name>_replaced-<time>`` and the new ones take
  their names (``blockdev_rename``: the config does not change), DRBD
  attaches them with fresh metadata (``drbd_attach_local``) and the other
  node copies everything over; once in sync the old volumes are removed.
  The other node's data must be up to date (it is the copy's source).
* ``replace_new_secondary`` (``-n NODE`` or ``-I ALLOCATOR``): the disks are
  made on the new node (a new minor there, the same port and secret), the
  old secondary's devices go down, the primary disconnects, the config
  names the new node, the primary connects to it and copies everything
  over; then the old secondary's volumes are removed.  The primary's data
  must be up to date.
* ``replace_auto`` (``-a``): whichever side's data is not ``ok`` is
  replaced in place; nothing when both are fine; refused when both are not.

A stopped instance's disks are activated for the copy and shut down again
after it.  The copy is waited for, with progress (``drbd.wait_for_sync``).

With ``early_release`` (``--early-release``) the old volumes are removed
before the copy instead of after it, and the job lets go of its node
locks (the instance lock stays) for the wait, so other jobs on those
nodes need not wait for the resync; the price is that no old copy is
left should the copy fail (doc/storage.md, "Replacing disks").
"""

from __future__ import annotations

import copy
import time
from typing import Any

from ganeti import constants, errors, locking
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import allocator, drbd, lvm
from ganeti.cmdlib.common import expand_node
from ganeti.cmdlib.instance import (InstanceLU, check_node_online, check_node_usable,
                                    expand_instance)
from ganeti.iallocator import document
from ganeti.objects import Disk, Node
from ganeti.opcodes.instance import OpInstanceReplaceDisks

__all__ = ["LUInstanceReplaceDisks", "NEW_SUFFIX", "replaced_name"]

#: the suffix of the new volumes while they are made, before they take the old names
NEW_SUFFIX = ".new"


def replaced_name(name: str, when: float) -> str:
    """What an old volume is renamed to while its replacement takes its name."""
    return f"{name}_replaced-{int(when)}"


class LUInstanceReplaceDisks(InstanceLU[OpInstanceReplaceDisks]):
    """Replace the volumes under a drbd instance's disks (module docstring)."""

    HPATH = "mirrors-replace"

    def ExpandExtra(self) -> None:
        op = self.op
        new_secondary = op.mode == constants.REPLACE_DISK_CHG
        if new_secondary and not (op.remote_node or op.iallocator):
            raise errors.OpPrereqError("Replacing the secondary needs a new node (-n) or an"
                                       " iallocator (-I)", errors.ECODE_INVAL)
        if op.remote_node and op.iallocator:
            raise errors.OpPrereqError("Give either a new node or an iallocator, not both",
                                       errors.ECODE_INVAL)
        if not new_secondary and (op.remote_node or op.iallocator):
            raise errors.OpPrereqError(f"A new node or an iallocator goes with mode"
                                       f" {constants.REPLACE_DISK_CHG} only, not {op.mode}",
                                       errors.ECODE_INVAL)
        self.new_node_uuid: str | None = None
        if op.remote_node:
            node = expand_node(self.cfg, op.remote_node)
            op.remote_node = node.name
            self.new_node_uuid = node.uuid
            self.extra_node_uuids = [node.uuid]
        elif op.iallocator:
            inst = expand_instance(self.cfg, op.instance_name)
            self.extra_node_uuids = [u for u in self.cfg.get_all_nodes_info()
                                     if u != inst.primary_node]

    def DeclareLocks(self, level: int) -> None:
        super().DeclareLocks(level)
        if level == locking.LEVEL_NODE and self.extra_node_uuids:
            self.share_locks[locking.LEVEL_NODE] = 0     # volumes are made and removed

    # --- checks -----------------------------------------------------------------

    def CheckInstance(self) -> None:
        inst, op = self.instance, self.op
        if inst.disk_template not in constants.DTS_INT_MIRROR:
            raise errors.OpPrereqError(
                f"Instance {inst.name} has disk template {inst.disk_template}; only"
                f" mirrored ({', '.join(sorted(constants.DTS_INT_MIRROR))}) disks can be"
                " replaced", errors.ECODE_INVAL)
        for idx in op.disks:
            if idx >= len(self.disks):
                raise errors.OpPrereqError(f"Instance {inst.name} has no disk {idx} (it has"
                                           f" {len(self.disks)})", errors.ECODE_INVAL)
        self.indices = sorted(set(op.disks)) or list(range(len(self.disks)))
        snodes = drbd.secondary_nodes(self, self.disks, inst.primary_node)
        if len(snodes) != 1:
            raise errors.OpPrereqError(f"Instance {inst.name} has {len(snodes)} secondary"
                                       " nodes; expected one", errors.ECODE_STATE)
        self.snode: Node = snodes[0]
        check_node_online(self.pnode, " as primary node")
        mode: str | None = op.mode
        if mode == constants.REPLACE_DISK_AUTO:
            mode = self._auto_mode()
        self.mode = mode
        if mode is None:
            return
        if mode == constants.REPLACE_DISK_CHG:
            self._check_new_node()
            source = self.pnode
        else:
            target = self.pnode if mode == constants.REPLACE_DISK_PRI else self.snode
            source = self.snode if target is self.pnode else self.pnode
            check_node_online(target, " (its volumes are replaced)")
            self.target = target
        check_node_online(source, " (the copy's source)")
        bad = drbd.check_consistent(self, self._chosen(), source)
        if bad:
            raise errors.OpPrereqError(
                f"Disk(s) {', '.join(bad)} of instance {inst.name} are not up to date on"
                f" node {source.name}, the source of the copy; replace the volumes there"
                " first, or activate the disks and let them sync", errors.ECODE_STATE)
        lvm.check_vg_free(self, [self.target], lvm.required_vg_sizes(
            (c.logical_id[0], c.size) for d in self._chosen() for c in d.children))

    def _chosen(self) -> list[Disk]:
        return [self.disks[i] for i in self.indices]

    def _auto_mode(self) -> str | None:
        """The side to repair: the one whose data is not ``ok`` (None: neither)."""
        on_primary = drbd.check_consistent(self, self._chosen(), self.pnode)
        on_secondary = drbd.check_consistent(self, self._chosen(), self.snode) \
            if not self.snode.offline else [d.iv_name for d in self._chosen()]
        if on_primary and on_secondary:
            raise errors.OpPrereqError(
                f"Disks of instance {self.instance.name} are not up to date on both"
                f" {self.pnode.name} and {self.snode.name}; cannot repair them automatically",
                errors.ECODE_STATE)
        if on_primary:
            self.indices = [i for i in self.indices if self.disks[i].iv_name in on_primary]
            return constants.REPLACE_DISK_PRI
        if on_secondary:
            self.indices = [i for i in self.indices if self.disks[i].iv_name in on_secondary]
            return constants.REPLACE_DISK_SEC
        return None

    def _check_new_node(self) -> None:
        inst = self.instance
        if self.new_node_uuid is None:
            self._ask_allocator()
        assert self.new_node_uuid is not None
        node = self.cfg.get_node_info(self.new_node_uuid)
        if node is None:
            raise errors.OpPrereqError("The new secondary node disappeared", errors.ECODE_NOENT)
        if node.uuid == self.pnode.uuid:
            raise errors.OpPrereqError(f"The new secondary node {node.name} is the instance's"
                                       " primary node", errors.ECODE_INVAL)
        if node.uuid == self.snode.uuid:
            raise errors.OpPrereqError(f"Node {node.name} is already the secondary node of"
                                       f" {inst.name}", errors.ECODE_INVAL)
        check_node_usable(node, " as the new secondary node")
        self.target = node

    def _ask_allocator(self) -> None:
        inst = self.instance
        request = document.relocate_request(inst.name, inst.disk_template,
                                            [{"size": d.size} for d in self.disks],
                                            [self.snode.name])
        answer, _ = allocator.ask(self, self.op.iallocator, request)
        answer.require_success(allocator.allocator_name(self, self.op.iallocator)
                               or "ganeti-iallocator")
        node = expand_node(self.cfg, answer.nodes[0])
        self.LogInfo(f"Selected new secondary node {node.name} via the iallocator")
        self.new_node_uuid = node.uuid
        self.op.remote_node = node.name

    def HookExtra(self) -> dict[str, Any]:
        return {"MODE": self.op.mode, "NEW_SECONDARY": self.op.remote_node or "",
                "OLD_SECONDARY": self.snode.name if hasattr(self, "snode") else ""}

    # --- execution ------------------------------------------------------------------

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        if self.mode is None:
            feedback_fn(f"No disks of instance {inst.name} need replacing")
            return None
        was_active = inst.disks_active or inst.admin_state == constants.ADMINST_UP
        if not was_active:
            feedback_fn("* activating the instance's disks for the copy")
            self._activate()
        try:
            if self.mode == constants.REPLACE_DISK_CHG:
                self._replace_secondary(feedback_fn)
            else:
                self._replace_local(feedback_fn)
        finally:
            if not was_active:
                disks = self.cfg.get_instance_disks(inst.uuid)
                snodes = drbd.secondary_nodes(self, disks, inst.primary_node)
                drbd.shutdown_mirrors(self, disks, [self.pnode, *snodes])
        return None

    def _activate(self) -> None:
        """Set both sides up as secondaries (the instance does not run)."""
        inst = self.instance
        drbd.assemble_secondaries(self, inst.name, self.disks, inst.primary_node, strict=True)
        for idx, disk in enumerate(self.disks):
            self.require_rpc().call_blockdev_assemble(
                self.pnode.name, disk=drbd.rpc_disk(disk, self.cfg), instance_name=inst.name,
                as_primary=False, idx=idx,
            ).one(self.pnode.name, f"Cannot activate disk {disk.iv_name} on {self.pnode.name}")

    def _plain_dict(self, child: Disk, name: str) -> dict[str, Any]:
        twin = copy.deepcopy(child)
        twin.logical_id = [child.logical_id[0], name]
        return drbd.rpc_disk(twin, self.cfg)

    def _replace_local(self, feedback_fn: FeedbackFn) -> None:
        inst, node, rpc = self.instance, self.target, self.require_rpc()
        when = time.time()
        disks = self._chosen()
        made: list[dict[str, Any]] = []
        feedback_fn(f"* replacing the volumes of {', '.join(d.iv_name for d in disks)}"
                    f" on {node.name}")
        try:
            for disk in disks:
                for child in disk.children:
                    new = self._plain_dict(child, child.logical_id[1] + NEW_SUFFIX)
                    feedback_fn(f"  - creating {child.logical_id[0]}/{new['logical_id'][1]}")
                    rpc.call_blockdev_create(
                        node.name, disk=new, size=child.size, owner_instance_name=inst.name,
                        on_primary=False, info=constants.DISK_INFO_PREFIX + inst.name,
                        excl_stor=False,
                    ).one(node.name, f"Cannot create a new volume for {disk.iv_name}")
                    made.append(new)
        except errors.GanetiError:
            self._remove_plain(node, made)
            raise
        for disk in disks:
            feedback_fn(f"  - detaching the old volumes of {disk.iv_name}")
            try:
                rpc.call_drbd_detach_local(node.name, disks=[drbd.rpc_disk(disk, self.cfg)]).one(
                    node.name, f"Cannot detach the volumes of {disk.iv_name} on {node.name}")
            except errors.GanetiError:
                self._remove_plain(node, made)
                raise
            renames = []
            for child in disk.children:
                name = child.logical_id[1]
                renames.append([drbd.rpc_disk(child, self.cfg),
                                [child.logical_id[0], replaced_name(name, when)]])
                renames.append([self._plain_dict(child, name + NEW_SUFFIX),
                                [child.logical_id[0], name]])
            rpc.call_blockdev_rename(node.name, devlist=renames).one(
                node.name, f"Cannot rename the volumes of {disk.iv_name} on {node.name}")
            feedback_fn(f"  - attaching the new volumes of {disk.iv_name}")
            rpc.call_drbd_attach_local(node.name, disks=[drbd.rpc_disk(disk, self.cfg)],
                                       new_metadata=True).one(
                node.name, f"Cannot attach the new volumes of {disk.iv_name} on {node.name}")
        # the copy's source may have been left StandAlone (a split brain): connect it
        drbd.connect_standalone(self, self.snode if node is self.pnode else self.pnode, disks)
        old = [self._plain_dict(c, replaced_name(c.logical_id[1], when))
               for d in disks for c in d.children]
        if self.op.early_release:
            feedback_fn(f"* removing the old volumes on {node.name} (early release)")
            self._remove_plain(node, old)
            self._release_node_locks(feedback_fn)
        self._sync(disks, feedback_fn)
        if not self.op.early_release:
            feedback_fn(f"* removing the old volumes on {node.name}")
            self._remove_plain(node, old)

    def _release_node_locks(self, feedback_fn: FeedbackFn) -> None:
        """Let go of every node lock for the copy (``early_release``); the
        instance lock keeps the instance itself from changing."""
        if self.glm is None:
            return
        owned = {level: self.owned_locks(level)
                 for level in (locking.LEVEL_NODE_RES, locking.LEVEL_NODE)}
        nodes = set().union(*owned.values())
        if not nodes:
            return
        # the processor forgets the live data of the nodes still locked at the
        # end: these are not then, and their volumes changed
        cache = getattr(self.context, "node_info_cache", None)
        if cache is not None:
            cache.invalidate(nodes)
        for level, names in owned.items():
            if names:
                self.glm.release(level, names)
        feedback_fn("* node locks released for the copy (early release)")

    def _remove_plain(self, node: Node, dicts: list[dict[str, Any]]) -> None:
        for data in dicts:
            res = self.require_rpc().call_blockdev_remove([node.name], disk=data).get(node.name)
            if res is None or res.failed:
                self.LogWarning(f"Cannot remove volume {'/'.join(data['logical_id'])} on"
                                f" {node.name}: {res.fail_msg if res else 'no answer'};"
                                " remove it by hand (gnt-cluster verify lists it)")

    def _replace_secondary(self, feedback_fn: FeedbackFn) -> None:
        new, old = self.target, self.snode
        disks = self._chosen()
        minors: list[int] = []
        try:
            for _ in disks:
                minors.append(self.cfg.allocate_drbd_minor(new.uuid))
        except errors.ConfigurationError as exc:
            for minor in minors:
                self.cfg.release_drbd_minor(new.uuid, minor)
            raise errors.OpExecError(str(exc)) from None
        moved = [_with_secondary(d, old.uuid, new.uuid, m) for d, m in zip(disks, minors)]
        # the config objects change below: the old ones are kept to remove their volumes
        before = [copy.deepcopy(d) for d in disks]
        try:
            self._new_secondary(disks, moved, feedback_fn)
        finally:
            for minor in minors:
                self.cfg.release_drbd_minor(new.uuid, minor)
        if self.op.early_release:
            self._remove_old_secondary(before, feedback_fn)
            self._release_node_locks(feedback_fn)
        self._sync(moved, feedback_fn)
        if not self.op.early_release:
            self._remove_old_secondary(before, feedback_fn)

    def _remove_old_secondary(self, before: list[Disk], feedback_fn: FeedbackFn) -> None:
        """Remove the volumes of ``before`` (the disks as they were) on the old secondary."""
        old, rpc = self.snode, self.require_rpc()
        if old.offline:
            self.LogWarning(f"Node {old.name} is offline: its old volumes are left there")
            return
        feedback_fn(f"* removing the old volumes on {old.name}")
        for disk in before:
            res = rpc.call_blockdev_remove([old.name], disk=drbd.rpc_disk(disk, self.cfg)).get(
                old.name)
            if res is None or res.failed:
                self.LogWarning(f"Cannot remove the old volumes of {disk.iv_name} on"
                                f" {old.name}: {res.fail_msg if res else 'no answer'}")

    def _new_secondary(self, disks: list[Disk], moved: list[Disk],
                       feedback_fn: FeedbackFn) -> None:
        inst, new, old, rpc = self.instance, self.target, self.snode, self.require_rpc()
        pname = self.pnode.name
        created: list[Disk] = []
        try:
            for disk in moved:
                feedback_fn(f"* creating {disk.iv_name} on the new secondary {new.name}")
                created.append(disk)
                rpc.call_blockdev_create(
                    new.name, disk=drbd.rpc_disk(disk, self.cfg), size=disk.size,
                    owner_instance_name=inst.name, on_primary=False,
                    info=constants.DISK_INFO_PREFIX + inst.name, excl_stor=False,
                ).one(new.name, f"Cannot create {disk.iv_name} on {new.name}")
        except errors.GanetiError:
            for disk in created:
                rpc.call_blockdev_remove([new.name], disk=drbd.rpc_disk(disk, self.cfg))
            raise
        if not old.offline:
            feedback_fn(f"* shutting the old secondary {old.name} down")
            drbd.shutdown_mirrors(self, disks, [old])
        feedback_fn(f"* switching the primary {pname} to the new secondary")
        rpc.call_drbd_disconnect_net(pname, disks=drbd.rpc_disks(disks, self.cfg)).one(
            pname, f"Cannot disconnect the disks on {pname}")
        with self.cfg.batch():
            for disk, new_disk in zip(disks, moved):
                disk.logical_id = new_disk.logical_id
                disk.nodes = new_disk.nodes
                disk.children = new_disk.children
                self.cfg.update(disk)
        rpc.call_drbd_attach_net(pname, disks=drbd.rpc_disks(moved, self.cfg),
                                 multimaster=False).one(
            pname, f"Cannot connect the disks on {pname} to {new.name}")

    def _sync(self, disks: list[Disk], feedback_fn: FeedbackFn) -> None:
        if not drbd.wait_for_sync(self, self.pnode, disks, feedback_fn, cfg=self.cfg,
                                  instance=self.instance.name):
            if self.op.early_release:
                raise errors.OpExecError("The disks did not come in sync, and the old volumes"
                                         " were already removed (early release): the"
                                         " primary's data is the only copy")
            raise errors.OpExecError("The disks did not come in sync; the old volumes are"
                                     " kept (see gnt-cluster verify)")


def _with_secondary(disk: Disk, old: str, new: str, minor: int) -> Disk:
    """A copy of the DRBD ``disk`` with its end on ``old`` moved to ``new`` (``minor``). Pure."""
    twin = copy.deepcopy(disk)
    lid = list(disk.logical_id)
    end = 0 if lid[0] == old else 1
    lid[end] = new
    lid[3 + end] = minor
    twin.logical_id = lid
    twin.nodes = [n if n != old else new for n in disk.nodes]
    for child in twin.children:
        child.nodes = [n if n != old else new for n in child.nodes]
    return twin
