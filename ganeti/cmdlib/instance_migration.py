"""Moving instances between nodes: migrate (live/non-live), failover; the base of
``move`` (:mod:`ganeti.cmdlib.instance_move`).

* **migrate**: ``migration_info`` on the source, disks assembled and
  ``accept_instance`` on the target, ``instance_migrate`` on the source,
  polling ``instance_get_migration_status``, then ``finalize_migration_dst``
  and ``finalize_migration_src``; the config's primary node changes only
  after success.  ``cleanup`` reconciles the config with where the
  instance actually runs after an interrupted migration: the side with
  the guest's current state keeps it (resumed when paused), the other
  side's leftover qemu is removed (:func:`cleanup_plan`), and so is its
  copy of the UEFI/TPM state.  Without a target node, a non-drbd
  instance's cleanup asks every other node which has the instance
  (:mod:`ganeti.cmdlib.migration_locate`).
* **failover**: stop on the source, start on the target.
* the UEFI NVRAM and TPM state of a kvm instance (``firmware``/``tpm``) is
  copied to the target before it starts there, or before the target's qemu
  is started for a migration (:mod:`ganeti.cmdlib.firmware_state`).

Migrations and disk copies write typed progress entries into the job log
and always a final one (doc/progress.md, "Progress entries"); a disk copy
also shows in the instance's ``jobs`` runtime field while it runs.

A ``drbd`` instance fails over and migrates to its secondary node only
(doc/storage.md, "DRBD"): a live migration reconnects its mirrors allowing
two primaries for the copy (``drbd_disconnect_net``/``drbd_attach_net``),
makes the target primary, moves the memory, then the source becomes the
secondary (``blockdev_close``) and the mirrors are reconnected with one
primary; a failure or ``--cleanup`` leaves one primary, where the guest runs.
Otherwise migrate and failover need disks every node can reach (``diskless``,
``sharedfile``); ``file`` instances move with ``move``, or with ``migrate
--with-disks`` (``with_disks``): the disks are created on the target and
copied while the guest runs (kvm, ``instance_mirror.DiskCopy``; a stopped
instance's disks are copied offline), the config's primary node and the
disks' node switch over only after success, and the old files are removed
then; any failure leaves the instance on the source, unchanged, and
removes the target's files (doc/kvm.md, "Migration with disks").  A target node in
another node group must meet that group's instance policy; with
``ignore_ipolicy`` the refusal becomes a warning (doc/ipolicy.md,
"Enforcement").
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from ganeti import constants, errors, parameters, progress
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import (allocator, drbd, firmware_state, instance_mirror,
                           migration_locate, os_image, policy)
from ganeti.cmdlib.instance import (InstanceLU, check_node_online, disk_rpc_dicts, expand_instance)
from ganeti.cmdlib.migration_plan import (CLEANUP_CONFLICT, CLEANUP_LEFTOVER, CLEANUP_NOTHING,
                                          CLEANUP_SOURCE, CLEANUP_TARGET, cleanup_plan,
                                          local_disks_cleanup_plan, migration_summary)
from ganeti.cmdlib.common import expand_node
from ganeti.iallocator import document
from ganeti.objects import Node
from ganeti.opcodes.instance import OpInstanceFailover, OpInstanceMigrate, OpInstanceMove
from ganeti.rpc.results import RpcResults

__all__ = ["TargetLU", "LUInstanceMigrate", "LUInstanceFailover", "MIGRATION_POLL",
           "COPY_CHUNK", "cleanup_plan", "local_disks_cleanup_plan", "migration_summary",
           "CLEANUP_NOTHING", "CLEANUP_SOURCE", "CLEANUP_LEFTOVER", "CLEANUP_TARGET",
           "CLEANUP_CONFLICT"]

MIGRATION_POLL = 0.2
MIGRATION_MAX_WAIT = 600.0
COPY_CHUNK = instance_mirror.COPY_CHUNK
_SHARED = frozenset([constants.DT_DISKLESS, constants.DT_SHARED_FILE])
#: hypervisor states of a qemu that still answers (its disk copies can be cancelled)
_ALIVE = frozenset(["running", "paused", "migrating"])


#: The opcodes with a target node.
_TargetOpT = TypeVar("_TargetOpT", OpInstanceMigrate, OpInstanceFailover, OpInstanceMove)


class TargetLU(InstanceLU[_TargetOpT]):
    """An instance LU with a target node: given, the drbd secondary, the allocator's,
    the node a migration cleanup finds, or else the first other usable node."""

    NEED_SHARED_STORAGE = True
    #: mirrored templates this operation handles although their disks are not shared
    MIRRORED_OK: frozenset[str] = frozenset()
    #: what the refusal of an instance on local disks suggests
    LOCAL_DISKS_HINT = "use 'move' instead"
    #: without a target node, ask the allocator (``iallocator``, or the
    #: cluster's default when it has one); else the first other usable node
    USE_ALLOCATOR = True
    #: an instance on mirrored disks (drbd) goes to its secondary node, nowhere else
    MIRROR_TO_SECONDARY = True
    #: ``cleanup`` without a target node asks every other node (migration_locate)
    LOCATE_CLEANUP_TARGET = False
    #: whether the target received the UEFI/TPM state (_carry_firmware)
    _fw_carried = False

    def ExpandExtra(self) -> None:
        inst = expand_instance(self.cfg, self.op.instance_name)
        self.allocator_name: str | None = getattr(self.op, "iallocator", None)
        if self.op.target_node and self.allocator_name:
            raise errors.OpPrereqError("Give either a target node or an iallocator, not both",
                                       errors.ECODE_INVAL)
        if self.MIRROR_TO_SECONDARY and inst.disk_template in constants.DTS_INT_MIRROR:
            self._expand_secondary_target(inst)
            return
        if self.op.target_node:
            target = expand_node(self.cfg, self.op.target_node)
        elif self.LOCATE_CLEANUP_TARGET and getattr(self.op, "cleanup", False):
            # the node the migration was going to: every other node is asked in
            # CheckPrereq (migration_locate), never the first one or an allocator
            self.target_uuid = ""
            self.extra_node_uuids = [u for u in self.cfg.get_all_nodes_info()
                                     if u != inst.primary_node]
            return
        elif (self.USE_ALLOCATOR and not getattr(self.op, "cleanup", False)
              and (self.allocator_name or self.cfg.get_cluster_info().default_iallocator)):
            # the allocator picks the target in CheckPrereq, with every node locked
            self.target_uuid = ""
            self.extra_node_uuids = [u for u in self.cfg.get_all_nodes_info()
                                     if u != inst.primary_node]
            return
        else:
            candidates = [n for n in sorted(self.cfg.get_all_nodes_info().values(),
                                            key=lambda n: n.name)
                          if n.uuid != inst.primary_node and not n.offline and n.vm_capable
                          and not n.drained]
            if not candidates:
                raise errors.OpPrereqError(f"No target node available for {inst.name}",
                                           errors.ECODE_NORES)
            target = candidates[0]
        self.target_uuid = target.uuid
        self.extra_node_uuids = [target.uuid]

    def _expand_secondary_target(self, inst: Any) -> None:
        """The target of a mirrored instance: its secondary node (a given target node
        or an allocator must agree)."""
        disks = self.cfg.get_instance_disks(inst.uuid)
        snodes = [n for n in drbd.secondary_nodes(self, disks, inst.primary_node)]
        if not snodes:
            raise errors.OpPrereqError(f"Instance {inst.name} has no secondary node",
                                       errors.ECODE_STATE)
        if self.allocator_name:
            raise errors.OpPrereqError(
                f"Instance {inst.name} has disk template {inst.disk_template}: it can only"
                f" move to its secondary node {snodes[0].name}, no allocator is asked",
                errors.ECODE_INVAL)
        if self.op.target_node:
            target = expand_node(self.cfg, self.op.target_node)
            if target.uuid != snodes[0].uuid:
                raise errors.OpPrereqError(
                    f"Instance {inst.name} has disk template {inst.disk_template}: it can"
                    f" only move to its secondary node {snodes[0].name}, not {target.name}"
                    " (change the secondary with replace-disks first)", errors.ECODE_INVAL)
        self.target_uuid = snodes[0].uuid
        self.extra_node_uuids = [snodes[0].uuid]

    def _ask_allocator(self) -> None:
        """Set the target from a ``relocate`` request (off the primary node)."""
        inst = self.instance
        pnode = self.cfg.get_node_info(inst.primary_node)
        request = document.relocate_request(inst.name, inst.disk_template,
                                            [{"size": d.size} for d in self.disks],
                                            [pnode.name if pnode else inst.primary_node],
                                            with_disks=self.copies_disks())
        answer, _ = allocator.ask(self, self.allocator_name, request)
        answer.require_success(allocator.allocator_name(self, self.allocator_name)
                               or "ganeti-iallocator")
        target = expand_node(self.cfg, answer.nodes[0])
        self.LogInfo(f"Selected target node {target.name} via the iallocator")
        self.target_uuid = target.uuid

    def _lookup_target(self) -> None:
        if not self.target_uuid:
            self._ask_allocator()
        target = self.cfg.get_node_info(self.target_uuid)
        if target is None:
            raise errors.OpPrereqError("The target node disappeared", errors.ECODE_NOENT)
        self.target: Node = target

    def CheckInstance(self) -> None:
        inst = self.instance
        self._lookup_target()
        if self.target.uuid == inst.primary_node:
            raise errors.OpPrereqError(f"Instance {inst.name} is already on node"
                                       f" {self.target.name}", errors.ECODE_INVAL)
        check_node_online(self.target, " as target node")
        if not self.target.vm_capable:
            raise errors.OpPrereqError(f"Node {self.target.name} is not vm_capable",
                                       errors.ECODE_STATE)
        if self.NEED_SHARED_STORAGE and inst.disk_template not in _SHARED \
                and inst.disk_template not in self.MIRRORED_OK and not self.copies_disks():
            raise errors.OpPrereqError(
                f"Instance {inst.name} has disk template {inst.disk_template}, whose disks"
                f" only exist on the primary node; {self.LOCAL_DISKS_HINT}",
                errors.ECODE_STATE)
        # a move into another node group must meet that group's policy (doc/ipolicy.md)
        ignored = policy.check_target_node(self.cfg, inst, self.target,
                                           ignore=self.op.ignore_ipolicy)
        if ignored:
            self.LogWarning(ignored)

    def copies_disks(self) -> bool:
        """Whether this operation copies local disks to the target (default: no)."""
        return False

    def HookExtra(self) -> dict[str, Any]:
        return {"OLD_PRIMARY": self.pnode.name, "NEW_PRIMARY": self.target.name,
                "TARGET_NODE": self.target.name}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        nodes, _ = super().BuildHooksNodes()
        if self.target.name not in nodes:
            nodes.append(self.target.name)
        return nodes, nodes

    def _switch_primary(self) -> None:
        inst = self.instance
        with self.cfg.batch():
            for disk in self.disks:
                # a mirror keeps both nodes (the old primary is the secondary now)
                rest = disk.nodes if disk.dev_type in constants.DTS_INT_MIRROR \
                    else disk.nodes[1:]
                disk.nodes = [self.target.uuid] + [n for n in rest if n != self.target.uuid]
                self.cfg.update(disk)
            inst.primary_node = self.target.uuid
            self.cfg.update(inst)

    def _carry_firmware(self, src: Node, feedback_fn: FeedbackFn,
                        required: bool = False) -> None:
        """The UEFI NVRAM and TPM state to the target (firmware_state.py); an
        offline source has nothing to give.  :meth:`_drop_left` later."""
        self._fw_carried = not src.offline and firmware_state.carry(
            self, self.instance, src.name, self.target.name, feedback_fn, required=required)

    def _drop_left(self, src: Node) -> None:
        """The instance runs (or lives) on the target: what it left on the source
        goes, its stale UEFI/TPM copy and its cloud-init seed and metadata entry
        (the target builds its own when the instance starts there)."""
        firmware_state.drop_left(self, self.instance, src.name, self._fw_carried)
        if os_image.image_of(self.instance.osparams) is not None and not src.offline:
            os_image.remove_seed(self, src.name, self.instance.name)

    def _start_on_target(self, feedback_fn: FeedbackFn) -> None:
        """Make the target the primary and start the instance there if it should run."""
        inst, dst = self.instance, self.target
        self.pnode = dst
        if inst.admin_state == constants.ADMINST_UP:
            feedback_fn(f"* starting instance {inst.name} on {dst.name}")
            data = self.rpc_instance()
            self.require_rpc().call_instance_start(
                dst.name, instance=data, disks=data["disks_info"], startup_paused=False,
            ).one(dst.name, f"Could not start instance {inst.name} on {dst.name}")

    def _running_on(self, node_name: str) -> dict[str, Any] | None:
        inst = self.instance
        return self.require_rpc().call_instance_info(
            node_name, instance_name=inst.name, hypervisor=inst.hypervisor, hvparams={}).one(node_name)

    def _assemble_on_target(self) -> None:
        for idx, disk in enumerate(self.disks):
            if disk.dev_type == constants.DT_DISKLESS:
                continue
            self.require_rpc().call_blockdev_assemble(
                self.target.name, disk=disk_rpc_dicts([disk], self.cfg)[0], instance_name=self.instance.name,
                as_primary=True, idx=idx,
            ).one(self.target.name, f"Could not assemble disk {idx} on {self.target.name}")

    def _shutdown_disks(self, node_name: str, keep_mirror: bool = False) -> None:
        """Shut the disks down on ``node_name``; with ``keep_mirror`` a DRBD disk only
        becomes secondary there (a migration: the mirror stays connected)."""
        for disk in self.disks:
            if disk.dev_type == constants.DT_DISKLESS or self.rpc is None:
                continue
            if keep_mirror and drbd.is_drbd(disk):
                res = self.rpc.call_blockdev_close(
                    [node_name], disks=[drbd.rpc_disk(disk, self.cfg)]).get(node_name)
            else:
                res = self.rpc.call_blockdev_shutdown(
                    [node_name], disk=disk_rpc_dicts([disk], self.cfg)[0]).get(node_name)
            if res is None or res.failed:
                self.LogWarning(f"Could not shut down disk {disk.iv_name} on {node_name}:"
                                f" {res.fail_msg if res is not None else 'no answer'}")

    def _mirrored(self) -> bool:
        return self.instance.disk_template in constants.DTS_INT_MIRROR

    def _drbd_reconnect(self, multimaster: bool, primary: Node,
                        feedback_fn: FeedbackFn) -> None:
        drbd.reconnect_mirrors(self, self.disks, [self.pnode, self.target], multimaster,
                               primary, feedback_fn, instance=self.instance.name)


class LUInstanceMigrate(TargetLU[OpInstanceMigrate]):
    """Migrate a running instance to another node (live unless mode non-live)."""

    HPATH = "instance-migrate"
    MIRRORED_OK = constants.DTS_INT_MIRROR
    LOCAL_DISKS_HINT = ("migrate it with --with-disks (the disks are copied while it runs)"
                        " or use 'move'")
    LOCATE_CLEANUP_TARGET = True
    #: ``--cleanup`` found no other node with the instance: only the primary is cleaned up
    only_source = False

    def CheckArguments(self) -> None:
        if self.op.mode is not None and self.op.live is not None:
            raise errors.OpPrereqError("Give either mode or live, not both", errors.ECODE_INVAL)
        if self.op.with_disks and self.op.cleanup:
            raise errors.OpPrereqError("--cleanup cannot be combined with --with-disks",
                                       errors.ECODE_INVAL)

    def copies_disks(self) -> bool:
        return self.op.with_disks

    def CheckInstance(self) -> None:
        if self.op.cleanup:
            # the target is wherever it might be running; the usual checks
            # would refuse a half-done state
            self._cleanup_target()
            return
        inst = self.instance
        super().CheckInstance()
        check_node_online(self.pnode, " as primary node")
        if inst.admin_state != constants.ADMINST_UP and not self.op.with_disks \
                and not self._failover_allowed():    # as Ganeti: nothing to migrate
            raise errors.OpPrereqError(
                f"Instance {inst.name} is marked {inst.admin_state}, it cannot be migrated;"
                " use failover, or migrate --allow-failover", errors.ECODE_STATE)
        if inst.disk_template in constants.DTS_INT_MIRROR and self.op.with_disks:
            raise errors.OpPrereqError(f"Instance {inst.name} has mirrored disks: migrate it"
                                       " without --with-disks", errors.ECODE_INVAL)
        if inst.disk_template in constants.DTS_INT_MIRROR \
                and inst.admin_state == constants.ADMINST_UP:
            bad = drbd.check_consistent(self, self.disks, self.target)
            if bad:
                raise errors.OpPrereqError(
                    f"Disk(s) {', '.join(bad)} of instance {inst.name} are not up to date on"
                    f" the target node {self.target.name}; a migration needs both sides in"
                    " sync (activate the disks and let them sync, or use failover"
                    " --ignore-consistency when the primary is dead)", errors.ECODE_STATE)
        if self.op.with_disks:
            if inst.disk_template not in instance_mirror.LOCAL_TEMPLATES:
                raise errors.OpPrereqError(
                    f"Instance {inst.name} has disk template {inst.disk_template}: its disks"
                    " are not local to one node; migrate it without --with-disks",
                    errors.ECODE_INVAL)
            if inst.admin_state == constants.ADMINST_UP and \
                    inst.hypervisor not in constants.HTS_DISK_MIRROR:
                raise errors.OpPrereqError(
                    f"Hypervisor {inst.hypervisor} cannot migrate instance {inst.name} with"
                    " its disks while it runs; use 'move'", errors.ECODE_STATE)

    def _cleanup_target(self) -> None:
        """The target of ``--cleanup``: the given node (not the primary), the drbd
        secondary, or the one other node that has the instance (migration_locate);
        with none, ``self.target`` is the primary and only it is cleaned up."""
        inst = self.instance
        if self.target_uuid:
            self._lookup_target()
            if self.target.uuid == inst.primary_node:
                raise errors.OpPrereqError(
                    f"Node {self.target.name} is the primary node of instance {inst.name};"
                    " give the node its migration was going to", errors.ECODE_INVAL)
            return
        found = migration_locate.locate_target(self, inst)
        self.target = found or self.pnode
        self.only_source = found is None

    def _always_failover(self) -> bool:
        """The instance's ``always_failover`` backend parameter (filled)."""
        return bool(parameters.fill_beparams(self.cfg.get_cluster_info(),
                                             self.instance.beparams).get("always_failover"))

    def _failover_allowed(self) -> bool:
        return self.op.allow_failover or self._always_failover()

    def _live(self) -> bool:
        if self.op.live is not None:
            return self.op.live
        if self.op.mode is not None:
            return self.op.mode == constants.HT_MIGRATION_LIVE
        hvp = parameters.fill_instance_hvparams(self.cfg.get_cluster_info(), self.instance)
        return hvp.get("migration_mode", constants.HT_MIGRATION_LIVE) == \
            constants.HT_MIGRATION_LIVE

    def HookExtra(self) -> dict[str, Any]:
        extra = super().HookExtra()
        extra.update({"MIGRATE_LIVE": self._live(), "MIGRATE_CLEANUP": self.op.cleanup,
                      "MIGRATE_WITH_DISKS": self.op.with_disks})
        return extra

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        if self.op.cleanup:
            return self._cleanup(feedback_fn)
        inst = self.instance
        src, dst = self.pnode, self.target
        live = self._live()
        running = self._running_on(src.name)
        if running is None or running.get("state") != 0:
            if inst.admin_state == constants.ADMINST_UP:
                if self.op.allow_failover and not self.op.with_disks:
                    feedback_fn(f"Instance {inst.name} is not running on {src.name}"
                                " (--allow-failover)")
                    return self._fail_over(feedback_fn)
                raise errors.OpExecError(f"Instance {inst.name} is not running on {src.name};"
                                         " cannot migrate it (use failover, or migrate"
                                         " --allow-failover)")
            if self.op.with_disks:
                return self._move_stopped(feedback_fn)
            feedback_fn(f"Instance {inst.name} is stopped: failing over (primary node only)")
            self._carry_firmware(src, feedback_fn)
            self._switch_primary()
            self._drop_left(src)
            return None
        if not self.op.with_disks and self._always_failover():
            # as Ganeti: such an instance is failed over, stopped here and started there
            feedback_fn(f"Instance {inst.name} is configured to always fail over: stopping"
                        f" it on {src.name}")
            self.require_rpc().call_instance_shutdown(
                src.name, instance=self.rpc_instance(),
                timeout=constants.DEFAULT_SHUTDOWN_TIMEOUT,
            ).one(src.name, f"Could not shutdown {inst.name} on {src.name}")
            return self._fail_over(feedback_fn)
        data = self.rpc_instance()
        if self.op.with_disks:
            return self._migrate_with_disks(feedback_fn, data, live)
        feedback_fn(f"* checking and preparing the migration {src.name} -> {dst.name}")
        info = self.require_rpc().call_migration_info(
            src.name, instance=data,
        ).one(src.name, f"Could not get migration information from {src.name}")
        mirrored = self._mirrored()
        if mirrored:
            self._drbd_reconnect(True, src, feedback_fn)
        success = False
        try:
            self._assemble_on_target()
            self._carry_firmware(src, feedback_fn, required=True)
            accepted = self.require_rpc().call_accept_instance(
                dst.name, instance=data, info=info, target=dst.primary_ip,
            ).one(dst.name, f"Target node {dst.name} refused the instance")
            feedback_fn(f"* migrating instance {inst.name} ({'live' if live else 'non-live'})")
            try:
                self._migrate_memory(data, live, accepted or {}, feedback_fn)
                success = True
            finally:
                self._finalize(data, info, success, live)
        finally:
            if not success:
                self._shutdown_disks(dst.name, keep_mirror=mirrored)
                if mirrored:
                    self._drbd_reconnect(False, src, feedback_fn)
        self._switch_primary()
        self._shutdown_disks(src.name, keep_mirror=mirrored)
        self._drop_left(src)
        if mirrored:
            self._drbd_reconnect(False, dst, feedback_fn)
        feedback_fn(f"* done: {inst.name} now runs on {dst.name}")
        return None

    def _fail_over(self, feedback_fn: FeedbackFn) -> Any:
        """Fail over instead (the instance is not running, or was just stopped for
        ``always_failover``): start it on the target if it should run."""
        inst, src, dst = self.instance, self.pnode, self.target
        feedback_fn(f"* failing {inst.name} over from {src.name} to {dst.name}")
        if not src.offline:
            self._shutdown_disks(src.name)
        self._carry_firmware(src, feedback_fn)
        self._switch_primary()
        if self._mirrored():
            drbd.assemble_secondaries(self, inst.name, self.disks, dst.uuid)
        self._start_on_target(feedback_fn)
        self._drop_left(src)
        return None

    def _migrate_memory(self, data: dict[str, Any], live: bool, accepted: dict[str, Any],
                        feedback_fn: FeedbackFn) -> None:
        """``instance_migrate`` (``accepted``: the target's answer to accept_instance)
        and its status polled until it completed (else raise).

        Typed progress entries from each status, and always a final one
        (doc/progress.md, "Progress entries").  The disk mirrors of a
        migration with disks reported their own progress until in sync
        (:class:`instance_mirror.DiskCopy`), so the statuses' ``disks``
        are left out here.
        """
        inst, src, dst = self.instance, self.pnode, self.target
        tracker = progress.MigrationProgress(lambda op: self.progress_reporter(op))
        with tracker:
            self.require_rpc().call_instance_migrate(
                src.name, instance=data, target_node=dst.name, target_address=dst.primary_ip, live=live,
                target_info=accepted).one(src.name, f"Could not migrate instance {inst.name}")
            deadline = time.monotonic() + MIGRATION_MAX_WAIT
            while True:
                status = self.require_rpc().call_instance_get_migration_status(
                    src.name, instance=data).one(src.name) or {}
                tracker.update({k: v for k, v in status.items() if k != "disks"})
                state = status.get("status")
                if state == "completed":
                    summary = migration_summary(status)
                    if summary:
                        feedback_fn(f"* memory sent: {summary}")
                    return
                if state in ("failed", "cancelled"):
                    raise errors.OpExecError(f"Migration of {inst.name} {state}:"
                                             f" {status.get('info', '')}")
                if time.monotonic() > deadline:
                    raise errors.OpExecError(f"Migration of {inst.name} did not finish"
                                             " in time")
                time.sleep(MIGRATION_POLL)

    def _disk_copy(self, feedback_fn: FeedbackFn, data: dict[str, Any]
                   ) -> instance_mirror.DiskCopy:
        return instance_mirror.DiskCopy(self, data, self.disks, self.pnode, self.target,
                                        feedback_fn)

    def _move_stopped(self, feedback_fn: FeedbackFn) -> Any:
        """``--with-disks`` of a stopped instance: copy its disks offline, then switch."""
        inst, dst = self.instance, self.target
        copy = self._disk_copy(feedback_fn, self.rpc_instance())
        feedback_fn(f"Instance {inst.name} is not running; copying its disks to {dst.name}")
        self._shutdown_disks(self.pnode.name)
        try:
            copy.create_target_disks()
            copy.copy_offline()
        except errors.GanetiError:
            copy.remove_target_disks()
            raise
        self._carry_firmware(self.pnode, feedback_fn)
        self._switch_primary()
        copy.remove_source_disks()
        self._drop_left(self.pnode)
        feedback_fn(f"* done: {inst.name} (stopped) now lives on {dst.name}")
        return None

    def _migrate_with_disks(self, feedback_fn: FeedbackFn, data: dict[str, Any],
                            live: bool) -> Any:
        """Create the disks on the target, mirror them, migrate memory, switch over.

        The config changes only once the target runs the instance; before
        that, every failure undoes the target side and resumes the source.
        """
        inst, src, dst = self.instance, self.pnode, self.target
        copy = self._disk_copy(feedback_fn, data)
        feedback_fn(f"* preparing the migration with disks {src.name} -> {dst.name}")
        info = self.require_rpc().call_migration_info(
            src.name, instance=data,
        ).one(src.name, f"Could not get migration information from {src.name}")
        on_target = False     # an incoming instance may exist on the target
        resuming = False      # the target was asked to resume the guest
        try:
            copy.create_target_disks()
            self._assemble_on_target()
            self._carry_firmware(src, feedback_fn, required=True)
            on_target = True
            accepted = self.require_rpc().call_accept_instance(
                dst.name, instance=data, info=info, target=dst.primary_ip,
            ).one(dst.name, f"Target node {dst.name} refused the instance")
            copy.mirror()
            feedback_fn(f"* migrating instance {inst.name} ({'live' if live else 'non-live'})")
            self._migrate_memory(data, live, accepted or {}, feedback_fn)
            copy.complete()
            resuming = True
            self.require_rpc().call_instance_finalize_migration_dst(
                dst.name, instance=data, info=info, success=True,
            ).one(dst.name, f"Could not resume {inst.name} on {dst.name}")
        except errors.GanetiError as exc:
            if not (resuming and self._runs_on(dst.name)):
                copy.abort()
                if on_target:
                    self._finalize(data, info, False, live)
                copy.remove_target_disks()
                raise
            # the answer was lost, but the guest runs there on complete disks
            self.LogWarning(f"{exc}; the instance runs on {dst.name} all the same")
        res = self.require_rpc().call_instance_finalize_migration_src(
            [src.name], instance=data, success=True, live=live).get(src.name)
        if res is None or res.failed:
            self.LogWarning(f"instance_finalize_migration_src on {src.name} failed:"
                            f" {res.fail_msg if res else 'no answer'}")
        self._switch_primary()
        self._shutdown_disks(src.name)
        copy.remove_source_disks()
        self._drop_left(src)
        feedback_fn(f"* done: {inst.name} and its disks are now on {dst.name}")
        return None

    def _runs_on(self, node_name: str) -> bool:
        """Whether the instance's guest runs on ``node_name`` (False when unsure)."""
        try:
            info = self._running_on(node_name)
        except errors.GanetiError:
            return False
        return info is not None and info.get("hv_state") == "running"

    def _finalize(self, data: dict[str, Any], info: Any, success: bool, live: bool) -> None:
        src, dst = self.pnode, self.target
        rpc = self.require_rpc()
        steps: list[tuple[str, Callable[[], RpcResults]]] = [
            (dst.name, lambda: rpc.call_instance_finalize_migration_dst(
                dst.name, instance=data, info=info, success=success)),
            (src.name, lambda: rpc.call_instance_finalize_migration_src(
                src.name, instance=data, success=success, live=live)),
        ]
        for node, step in steps:
            results = step()
            res = results.get(node)
            if res is None or res.failed:
                msg = f"{results.procedure} on {node} failed: {res.fail_msg if res else 'no answer'}"
                if success:
                    raise errors.OpExecError(msg)
                self.LogWarning(msg)

    def _cleanup(self, feedback_fn: FeedbackFn) -> Any:
        """Reconcile after an interrupted migration (see :func:`cleanup_plan`).

        Asks both nodes what they run; the side that has the guest's
        current state keeps it (resumed if it is paused) and the other
        side's leftover (an incoming or a fully sent qemu) is removed.
        """
        inst = self.instance
        if self.only_source:
            return self._cleanup_source(feedback_fn)
        states: dict[str, str | None] = {}
        for node in (self.pnode, self.target):
            if node is None or node.offline:
                states[node.uuid if node else ""] = None
                continue
            info = self.require_rpc().call_instance_info(
                node.name, instance_name=inst.name, hypervisor=inst.hypervisor, hvparams={},
            ).one(node.name)
            states[node.uuid] = migration_locate.hv_state(info)
        src_state, dst_state = states[self.pnode.uuid], states[self.target.uuid]
        local = inst.disk_template in instance_mirror.LOCAL_TEMPLATES
        plan = (local_disks_cleanup_plan if local else cleanup_plan)(src_state, dst_state)
        src, dst = self.pnode, self.target
        if plan == CLEANUP_CONFLICT:
            raise errors.OpExecError(f"Instance {inst.name} runs on both {src.name} and"
                                     f" {dst.name}; stop one of them by hand")
        data = self.rpc_instance()
        # an interrupted --with-disks: the losing side's disks go, after its qemu
        local_copy = self._disk_copy(feedback_fn, data) if local else None
        if plan == CLEANUP_NOTHING:
            if local_copy is not None:
                local_copy.cleanup(target_won=False, source_runs=src_state in _ALIVE)
            if self._mirrored():
                # a migration stopped before the memory moved may have left two primaries
                self._shutdown_disks(dst.name, keep_mirror=True)
                self._drbd_reconnect(False, src, feedback_fn)
            self._settle_firmware(src, dst)
            feedback_fn(f"Instance {inst.name} is where the config says ({src.name});"
                        " nothing to clean up")
            return None
        live = self._live()
        if plan == CLEANUP_TARGET:
            feedback_fn(f"Instance {inst.name} runs on {dst.name}: finishing the migration"
                        " and updating the config")
            if dst_state != "running":
                self.require_rpc().call_instance_finalize_migration_dst(
                    dst.name, instance=data, info={}, success=True,
                ).one(dst.name, f"Could not resume instance {inst.name} on {dst.name}")
            if src_state is not None:
                self._warn_failed(src.name, self.require_rpc().call_instance_finalize_migration_src(
                    src.name, instance=data, success=True, live=live))
            self._switch_primary()
            self.pnode = dst
            self._shutdown_disks(src.name, keep_mirror=self._mirrored())
        else:
            feedback_fn(f"Instance {inst.name} stays on {src.name}: removing what the"
                        f" migration left on {dst.name}")
            if dst_state is not None:
                self._warn_failed(dst.name, self.require_rpc().call_instance_finalize_migration_dst(
                    dst.name, instance=data, info={}, success=False))
                self._shutdown_disks(dst.name, keep_mirror=self._mirrored())
            if plan == CLEANUP_SOURCE and src_state != "running":
                self.require_rpc().call_instance_finalize_migration_src(
                    src.name, instance=data, success=False, live=live,
                ).one(src.name, f"Could not resume instance {inst.name} on {src.name}")
        if local_copy is not None:
            local_copy.cleanup(target_won=plan == CLEANUP_TARGET,
                               source_runs=src_state in _ALIVE)
        if plan == CLEANUP_TARGET:
            self._settle_firmware(dst, src)
        else:
            self._settle_firmware(src, dst)
        if self._mirrored():
            self.pnode = src
            self._drbd_reconnect(False, dst if plan == CLEANUP_TARGET else src, feedback_fn)
        return None

    def _cleanup_source(self, feedback_fn: FeedbackFn) -> Any:
        """``--cleanup`` when no other node has the instance: a guest the
        migration left paused or fully sent on the primary is resumed."""
        inst, src = self.instance, self.pnode
        info = None if src.offline else self._running_on(src.name)
        state = migration_locate.hv_state(info)
        if cleanup_plan(state, None) != CLEANUP_SOURCE:
            feedback_fn(f"Instance {inst.name} is where the config says ({src.name}) and no"
                        " other node has it; nothing to clean up")
            return None
        feedback_fn(f"Instance {inst.name} is {state} on {src.name} and no other node has"
                    " it: resuming it there")
        self.require_rpc().call_instance_finalize_migration_src(
            src.name, instance=self.rpc_instance(), success=False, live=self._live(),
        ).one(src.name, f"Could not resume instance {inst.name} on {src.name}")
        return None

    def _settle_firmware(self, keep: Node, drop: Node) -> None:
        """After a cleanup the instance lives on ``keep``: ``drop``'s copy of its
        UEFI/TPM state goes, as after a migration (firmware_state.settle)."""
        if not keep.offline and not drop.offline:
            firmware_state.settle(self, self.instance, keep.name, drop.name)

    def _warn_failed(self, node: str, results: RpcResults) -> None:
        """Warn about a finalize call whose failure is fine (the leftover may be gone)."""
        res = results.get(node)
        if res is None or res.failed:
            self.LogWarning(f"{results.procedure} on {node} failed:"
                            f" {res.fail_msg if res else 'no answer'}")


class LUInstanceFailover(TargetLU[OpInstanceFailover]):
    """Stop the instance on its primary node and start it on the target."""

    HPATH = "instance-failover"
    MIRRORED_OK = constants.DTS_INT_MIRROR

    def HookExtra(self) -> dict[str, Any]:
        extra = super().HookExtra()
        extra["SHUTDOWN_TIMEOUT"] = self.op.shutdown_timeout
        extra["IGNORE_CONSISTENCY"] = self.op.ignore_consistency
        return extra

    def CheckInstance(self) -> None:
        super().CheckInstance()
        inst = self.instance
        active = inst.admin_state == constants.ADMINST_UP or inst.disks_active
        if inst.disk_template in constants.DTS_INT_MIRROR and active:
            bad = drbd.check_consistent(self, self.disks, self.target)
            if bad and not self.op.ignore_consistency:
                raise errors.OpPrereqError(
                    f"Disk(s) {', '.join(bad)} of instance {inst.name} are not up to date on"
                    f" the target node {self.target.name}; failing over would lose data"
                    " (use --ignore-consistency if the primary node is dead)",
                    errors.ECODE_STATE)
            if bad:
                self.LogWarning(f"Disk(s) {', '.join(bad)} are not up to date on"
                                f" {self.target.name}; failing over anyway")

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        src = self.pnode
        if not src.offline:
            feedback_fn(f"* shutting down instance {inst.name} on {src.name}")
            res = self.require_rpc().call_instance_shutdown(
                [src.name], instance=self.rpc_instance(), timeout=self.op.shutdown_timeout).get(src.name)
            if res is None or res.failed:
                msg = f"Could not shutdown {inst.name} on {src.name}:" \
                      f" {res.fail_msg if res else 'no answer'}"
                if not self.op.ignore_consistency:
                    raise errors.OpExecError(msg + " (use ignore_consistency to continue)")
                self.LogWarning(msg)
            self._shutdown_disks(src.name)
        self._carry_firmware(src, feedback_fn)
        self._switch_primary()
        if inst.disk_template in constants.DTS_INT_MIRROR \
                and inst.admin_state == constants.ADMINST_UP:
            # the old primary becomes the secondary: its side waits for the new primary
            drbd.assemble_secondaries(self, inst.name, self.disks, self.target.uuid)
        self._start_on_target(feedback_fn)
        self._drop_left(src)
        return None
