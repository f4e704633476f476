"""Instance lifecycle LUs: remove, startup, shutdown, reboot, reinstall, rename, console.

All lock the instance exclusively and its nodes shared (see
:class:`ganeti.cmdlib.instance.InstanceLU`), so operations on different
instances run in parallel.
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, locking, parameters
from ganeti.aliases import FeedbackFn
from ganeti.objects import Instance, disk_tree
from ganeti.cmdlib import drbd, firmware_state, os_image
from ganeti.cmdlib.instance import (InstanceLU, check_node_online,
                                    disk_rpc_dicts, file_logical_id, remove_instance_lock,
                                    with_secret_osparams)
from ganeti.cmdlib.instance_create import check_instance_name, check_ip_free
from ganeti.opcodes.instance import (OpInstanceConsole, OpInstanceReboot, OpInstanceReinstall,
                                     OpInstanceRemove, OpInstanceRename, OpInstanceShutdown,
                                     OpInstanceStartup)
from ganeti.private import reveal
from ganeti.utils import validation

#: Marker of instance_start's refusal of a running instance (the node
#: side's ``backend.instance.ALREADY_RUNNING``; the master may not import
#: the backend, a test keeps the two equal).
ALREADY_RUNNING = "is already running"

__all__ = ["LUInstanceRemove", "LUInstanceStartup", "LUInstanceShutdown", "LUInstanceReboot",
           "LUInstanceReinstall", "LUInstanceRename", "LUInstanceConsole",
           "shutdown_instance", "remove_disks", "check_os", "check_expected_admin_state",
           "check_stopped"]


def shutdown_instance(lu: InstanceLU, timeout: int, *, ignore_failures: bool = False) -> None:
    """Stop the instance on its primary node (instance_shutdown RPC)."""
    pnode = lu.pnode
    if pnode.offline:
        lu.LogWarning(f"Primary node {pnode.name} is offline; not stopping the instance")
        return
    try:
        lu.require_rpc().call_instance_shutdown(
            pnode.name, instance=lu.rpc_instance(), timeout=timeout,
        ).one(pnode.name, f"Could not shutdown instance {lu.instance.name} on node {pnode.name}")
    except errors.OpExecError as exc:
        if not ignore_failures:
            raise
        lu.LogWarning(str(exc))


def remove_disks(lu: InstanceLU, *, ignore_failures: bool = False) -> None:
    """Remove every disk volume of the instance on its nodes."""
    for disk in lu.disks:
        if disk.dev_type == constants.DT_DISKLESS:
            continue
        holders = list(disk.nodes)
        if drbd.is_drbd(disk):     # both ends, whatever the node list says
            holders += [u for u in disk.logical_id[:2] if u not in holders]
        for uuid in holders:
            node = lu.cfg.get_node_info(uuid)
            if node is None or node.offline:
                continue
            try:
                lu.require_rpc().call_blockdev_remove(
                    node.name, disk=disk_rpc_dicts([disk], lu.cfg)[0],
                ).one(node.name, f"Could not remove disk {disk.iv_name} on node {node.name}")
            except errors.OpExecError as exc:
                if not ignore_failures:
                    raise
                lu.LogWarning(str(exc))


def check_os(lu: InstanceLU, node_name: str, os_name: str, osparams: dict[str, Any],
             hidden: dict[str, Any] | None = None) -> None:
    """Check through ``os_validate`` that the OS exists (and takes the params).

    ``hidden``: the private and secret OS parameters (plain values), sent
    apart so that the node scrubs them from what it says and logs.  The
    image parameters (``os-image``, ``os-image-checksum``) are Ganeti's own,
    not the OS's: they are left out, as at creation (doc/images.md).
    """
    if lu.rpc is None:
        return
    res = lu.rpc.call_os_validate(
        [node_name], required=True, osname=os_name, checks=["parameters"],
        osparams=os_image.without_image_params(osparams),
        osparams_private=os_image.without_image_params(hidden or {})).get(node_name)
    if res is None or res.failed:
        raise errors.OpPrereqError(f"OS '{os_name}' not usable on node {node_name}:"
                                   f" {res.fail_msg if res else 'no answer'}",
                                   errors.ECODE_INVAL)


class LUInstanceRemove(InstanceLU[OpInstanceRemove]):
    """Stop the instance, remove its disks and its configuration."""

    HPATH = "instance-remove"

    def HookExtra(self) -> dict[str, Any]:
        return {"SHUTDOWN_TIMEOUT": self.op.shutdown_timeout}

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        nodes, _ = super().BuildHooksNodes()
        master = self.cfg.get_master_node_name()
        return nodes, [master] if master else []

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        feedback_fn(f"Shutting down instance {inst.name} on node {self.pnode.name}")
        shutdown_instance(self, self.op.shutdown_timeout, ignore_failures=self.op.ignore_failures)
        feedback_fn(f"Removing the disks of instance {inst.name}")
        remove_disks(self, ignore_failures=self.op.ignore_failures)
        if os_image.image_of(inst.osparams) is not None and not self.pnode.offline:
            os_image.remove_seed(self, self.pnode.name, inst.name)
        firmware_state.remove_everywhere(self, inst)
        self.cfg.remove_instance(inst.uuid)
        remove_instance_lock(self, inst.name)
        return None


def check_expected_admin_state(inst: Instance, state: str | None, source: str | None,
                               action: str) -> None:
    """Refuse unless ``inst``'s admin state (and its source) is what the job expected.

    ``state``/``source`` None expect nothing.  Called under the instance's
    lock, so an operator's start or stop after the client decided (the
    watcher decides minutes before its job runs) is never undone.  Raises
    :class:`errors.OpPrereqError` (``ECODE_STATE``); its message contains
    :data:`constants.ADMIN_STATE_CHANGED`.
    """
    if (state is None or inst.admin_state == state) and \
            (source is None or inst.admin_state_source == source):
        return
    expected = " ".join(filter(None, [state and f"'{state}'",
                                      source and f"(source {source})"]))
    raise errors.OpPrereqError(
        f"Instance {inst.name}: {constants.ADMIN_STATE_CHANGED} since the job was submitted:"
        f" it is '{inst.admin_state}' (source {inst.admin_state_source}), the job expected"
        f" {expected}; not {action} it", errors.ECODE_STATE)


class LUInstanceStartup(InstanceLU[OpInstanceStartup]):
    """Start the instance on its primary node.

    With ``expected_admin_state``/``_source`` the start is refused when the
    instance's admin state is no longer that (:func:`check_expected_admin_state`).
    """

    HPATH = "instance-start"

    def CheckInstance(self) -> None:
        inst = self.instance
        check_expected_admin_state(inst, self.op.expected_admin_state,
                                   self.op.expected_admin_state_source, "starting")
        if inst.admin_state == constants.ADMINST_OFFLINE:
            raise errors.OpPrereqError(f"Instance {inst.name} is marked offline",
                                       errors.ECODE_STATE)
        check_node_online(self.pnode, " as primary node")
        cluster = self.cfg.get_cluster_info()
        try:
            self.be_override = parameters.check_params("be", self.op.beparams)
            self.hv_override = parameters.check_params("hv", self.op.hvparams, inst.hypervisor)
        except errors.ParameterError as exc:
            raise errors.OpPrereqError(str(exc), errors.ECODE_INVAL) from None
        del cluster

    def HookExtra(self) -> dict[str, Any]:
        return {"FORCE": self.op.force}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        if not self.op.no_remember:
            self.cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP)
        data = self.rpc_instance(beparams=self.be_override, hvparams=self.hv_override)
        # one RPC: the node refuses a running instance (message with
        # ALREADY_RUNNING) and cleans up one that shut down by itself
        if self.rpc is None:
            raise errors.OpExecError("Node RPC is not available on this master")
        # mirrors: the secondaries first, so that the primary finds its peer
        drbd.assemble_secondaries(self, inst.name, self.disks, inst.primary_node)
        res = self.rpc.call_instance_start(
            [self.pnode.name], instance=data, disks=data["disks_info"],
            startup_paused=self.op.startup_paused).get(self.pnode.name)
        if res is None:
            raise errors.OpExecError(f"Could not start instance {inst.name}: no answer"
                                     f" from node {self.pnode.name}")
        if res.fail_msg and not res.offline and ALREADY_RUNNING in res.fail_msg:
            feedback_fn(f"Instance {inst.name} is already running")
            return None
        res.raise_on_failure(f"Could not start instance {inst.name}")
        if self.instance.disks and not self.instance.disks_active:
            self.cfg.set_instance_disks_active(inst.uuid, True)
        return None


class LUInstanceShutdown(InstanceLU[OpInstanceShutdown]):
    """Stop the instance (soft for ``timeout`` seconds, then hard)."""

    HPATH = "instance-stop"

    def CheckInstance(self) -> None:
        check_expected_admin_state(self.instance, self.op.expected_admin_state,
                                   self.op.expected_admin_state_source, "stopping")
        if self.instance.admin_state == constants.ADMINST_OFFLINE:
            if not self.op.force:
                raise errors.OpPrereqError(f"Instance {self.instance.name} is marked offline",
                                           errors.ECODE_STATE)
            self.LogWarning("Ignoring the offline instance check (--force)")
        if not self.op.ignore_offline_nodes:
            check_node_online(self.pnode, " as primary node")

    def HookExtra(self) -> dict[str, Any]:
        return {"TIMEOUT": self.op.timeout}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        # an offline instance (stopped with --force) stays offline, as in Ganeti
        if not self.op.no_remember and inst.admin_state != constants.ADMINST_OFFLINE:
            source = self.op.admin_state_source or constants.ADMIN_SOURCE
            self.cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_DOWN, source)
        if self.pnode.offline:
            feedback_fn(f"Primary node {self.pnode.name} is offline; only the state changed")
            return None
        self.require_rpc().call_instance_shutdown(
            self.pnode.name, instance=self.rpc_instance(), timeout=self.op.timeout,
        ).one(self.pnode.name, f"Could not shutdown instance {inst.name}")
        # as Ganeti: a stopped instance's disks are shut down (mirrors on the primary
        # first), and they count as inactive (a conversion, for one, needs that)
        if any(drbd.is_drbd(d) for d in self.disks):
            drbd.shutdown_mirrors(self, self.disks, [self.pnode] + drbd.secondary_nodes(
                self, self.disks, inst.primary_node))
        # the other disks only when marked active (a start or activate-disks assembled
        # them); a shutdown pays no extra node call otherwise
        for disk in self.disks if inst.disks_active else []:
            if drbd.is_drbd(disk) or disk.dev_type == constants.DT_DISKLESS:
                continue
            res = self.require_rpc().call_blockdev_shutdown(
                [self.pnode.name], disk=disk_rpc_dicts([disk], self.cfg)[0]).get(self.pnode.name)
            if res is None or res.failed:
                self.LogWarning(f"Could not shut down disk {disk.iv_name} on"
                                f" {self.pnode.name}: {res.fail_msg if res else 'no answer'}")
        if inst.disks_active:
            self.cfg.set_instance_disks_active(inst.uuid, False)
        return None


class LUInstanceReboot(InstanceLU[OpInstanceReboot]):
    """Reboot the instance: soft, hard (stop + start) or full (with disks).

    As in Ganeti, an instance that is not running (stopped, or marked
    down) is started, whatever the type, and marked up; only an instance
    marked offline is refused.
    """

    HPATH = "instance-reboot"

    def CheckInstance(self) -> None:
        if self.instance.admin_state == constants.ADMINST_OFFLINE:
            raise errors.OpPrereqError(f"Instance {self.instance.name} is marked offline"
                                       " (mark it online first)", errors.ECODE_STATE)
        check_node_online(self.pnode, " as primary node")

    def HookExtra(self) -> dict[str, Any]:
        return {"REBOOT_TYPE": self.op.reboot_type, "SHUTDOWN_TIMEOUT": self.op.shutdown_timeout}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        data = self.rpc_instance()
        live = self.require_rpc().call_instance_info(
            self.pnode.name, instance_name=inst.name, hypervisor=inst.hypervisor,
            hvparams=data["hvparams"]).one(self.pnode.name)
        running = live is not None and live.get("state") == 0
        if not running or self.op.reboot_type == constants.REBOOT_FULL:
            if running:
                self.require_rpc().call_instance_shutdown(
                    self.pnode.name, instance=data, timeout=self.op.shutdown_timeout,
                ).one(self.pnode.name, f"Could not shutdown {inst.name}")
            elif live is not None:
                self.require_rpc().call_instance_shutdown(
                    self.pnode.name, instance=data, timeout=0).one(self.pnode.name)
            else:
                feedback_fn(f"Instance {inst.name} was not running, starting it now")
                # mirrors of a stopped instance are down: the secondaries first
                drbd.assemble_secondaries(self, inst.name, self.disks, inst.primary_node)
            self.require_rpc().call_instance_start(
                self.pnode.name, instance=data, disks=data["disks_info"], startup_paused=False,
            ).one(self.pnode.name, f"Could not start instance {inst.name} for the full reboot")
            if self.disks and not inst.disks_active:
                self.cfg.set_instance_disks_active(inst.uuid, True)
        else:
            self.require_rpc().call_instance_reboot(
                self.pnode.name, instance=data, reboot_type=self.op.reboot_type,
                shutdown_timeout=self.op.shutdown_timeout,
            ).one(self.pnode.name, f"Could not reboot instance {inst.name}")
        self.cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP)
        return None


def check_stopped(lu: InstanceLU, what: str) -> None:
    """Refuse (``ECODE_STATE``) an instance marked up or running on its primary node.

    ``what`` ends the message ("stop it before ``what``").  An offline
    primary node is not asked.
    """
    inst = lu.instance
    if inst.admin_state == constants.ADMINST_UP:
        raise errors.OpPrereqError(f"Instance {inst.name} is marked to be up; stop it before"
                                   f" {what}", errors.ECODE_STATE)
    if lu.rpc is not None and not lu.pnode.offline:
        live = lu.require_rpc().call_instance_info(
            lu.pnode.name, instance_name=inst.name, hypervisor=inst.hypervisor, hvparams={},
        ).one(lu.pnode.name)
        if live is not None and live.get("state") == 0:
            raise errors.OpPrereqError(f"Instance {inst.name} is running on {lu.pnode.name};"
                                       f" stop it before {what}", errors.ECODE_STATE)


class LUInstanceReinstall(InstanceLU[OpInstanceReinstall]):
    """Reinstall the OS (optionally another one) of a stopped instance."""

    HPATH = "instance-reinstall"

    def CheckInstance(self) -> None:
        inst = self.instance
        check_node_online(self.pnode, " as primary node")
        check_stopped(self, "reinstalling")
        self.new_os = self.op.os_type or inst.os
        try:
            self.new_osparams = parameters.check_params("os", self.op.osparams) \
                if self.op.osparams is not None else dict(inst.osparams)
            self.new_osparams_private = parameters.update_params(
                inst.osparams_private, reveal(self.op.osparams_private))
        except errors.ParameterError as exc:
            raise errors.OpPrereqError(str(exc), errors.ECODE_INVAL) from None
        os_image.check_seed_params(self.new_osparams)
        #: an image-based reinstall (doc/images.md): the image first, then the OS scripts
        self.os_image = os_image.image_of(self.new_osparams)
        if self.os_image is not None:
            disks = self.cfg.get_instance_disks(inst.uuid)
            if not disks:
                raise errors.OpPrereqError("An OS image needs a disk to be written to",
                                           errors.ECODE_INVAL)
            self.image_disk = disks[0]
            os_image.check_local_image(self.os_image, self.new_osparams.get(
                os_image.CHECKSUM_PARAM), self.image_disk.size, self.context.paths)
            if not self.new_os:
                return      # the OS scripts run after the image when there is an OS
        if not self.new_os:
            raise errors.OpPrereqError(f"Instance {inst.name} has no OS; give one",
                                       errors.ECODE_INVAL)
        cluster = self.cfg.get_cluster_info()
        check_os(self, self.pnode.name, self.new_os,
                 os_image.without_image_params(
                     parameters.fill_osparams(cluster, self.new_os, self.new_osparams)),
                 {**self.new_osparams_private, **reveal(self.op.osparams_secret)})

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        facts = None
        if self.os_image is not None:
            # staged and checked first: a refused image changes nothing
            facts = os_image.stage_image(self, self.pnode.name, inst.name, self.os_image,
                                         self.new_osparams.get(os_image.CHECKSUM_PARAM),
                                         self.image_disk.size, feedback_fn)
        try:
            if (self.new_os != inst.os or self.new_osparams != inst.osparams
                    or self.new_osparams_private != inst.osparams_private):
                inst.os = self.new_os
                inst.osparams = self.new_osparams
                inst.osparams_private = self.new_osparams_private
                self.cfg.update(inst)
        except BaseException:
            if facts is not None:
                os_image.drop_staged(self, self.pnode.name, inst.name)
            raise
        if facts is not None:
            node = self.pnode.name
            os_image.write_image(self, node, inst.name, self.rpc_instance()["disks_info"][0],
                                 facts, feedback_fn)
            os_image.build_seed(self, node, inst, feedback_fn)
            if not self.new_os:
                return None
        feedback_fn(f"Running the instance OS create scripts on {self.pnode.name}")
        self.require_rpc().call_instance_os_add(
            self.pnode.name, instance=with_secret_osparams(self.rpc_instance(), self.op.osparams_secret),
            reinstall=True, debug=self.op.debug_level or 0,
        ).one(self.pnode.name, f"Could not install OS for instance {inst.name} on {self.pnode.name}")
        return None


class LUInstanceRename(InstanceLU[OpInstanceRename]):
    """Rename a stopped instance (config, disk files, OS rename script).

    With ``name_check`` the new name must resolve and the instance takes the
    resolved FQDN; with ``ip_check`` its address must not be in use.  A
    rename to the instance's own name (burnin's rename-same) changes no
    name and only runs the OS rename script again.
    """

    HPATH = "instance-rename"

    def CheckArguments(self) -> None:
        if self.op.ip_check and not self.op.name_check:
            raise errors.OpPrereqError("Cannot do an IP address check without a name check"
                                       " (use --no-ip-check too)", errors.ECODE_INVAL)
        validation.check_hostname(self.op.new_name, "instance name")
        self.new_ip: str | None = None
        if self.op.name_check:
            self.op.new_name, self.new_ip = check_instance_name(self, self.op.new_name)

    def ExpandExtra(self) -> None:
        if self.op.new_name == self.op.instance_name:
            return
        if self.cfg.get_instance_info_by_name(self.op.new_name) is not None \
                or self.cfg.get_node_info_by_name(self.op.new_name) is not None:
            raise errors.OpPrereqError(f"Name '{self.op.new_name}' is already in use",
                                       errors.ECODE_EXISTS)

    def CheckInstance(self) -> None:
        check_node_online(self.pnode, " as primary node")
        if self.op.new_name != self.instance.name \
                and self.cfg.get_instance_info_by_name(self.op.new_name) is not None:
            raise errors.OpPrereqError(f"Instance '{self.op.new_name}' is already in the"
                                       " cluster", errors.ECODE_EXISTS)
        check_stopped(self, "renaming")
        if self.op.ip_check and self.new_ip is not None:
            check_ip_free(self.new_ip, self.op.new_name)

    def HookExtra(self) -> dict[str, Any]:
        return {"INSTANCE_NEW_NAME": self.op.new_name}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        old_name = inst.name
        new_name = self.op.new_name
        if new_name == old_name:
            self._run_os_rename(old_name)
            return new_name
        if self.glm is not None:
            try:
                self.glm.add(locking.LEVEL_INSTANCE, new_name, acquired=True)
            except errors.LockError as exc:
                raise errors.OpExecError(f"Cannot lock new name {new_name}: {exc}") from exc
        renames = []
        for idx, disk in enumerate(self.disks):
            if disk.dev_type in constants.DTS_FILEBASED and disk.logical_id:
                driver, path = disk.logical_id[0], disk.logical_id[1]
                storage_dir = path.rsplit("/", 2)[0]
                renames.append((disk, file_logical_id(storage_dir, new_name, disk.uuid, idx,
                                                      driver)))
        if renames:
            devlist = [[disk_rpc_dicts([d], self.cfg)[0], new_id] for d, new_id in renames]
            self.require_rpc().call_blockdev_rename(
                self.pnode.name, devlist=devlist,
            ).one(self.pnode.name, f"Could not rename the disks of {old_name}")
        with self.cfg.batch():
            for disk, new_id in renames:
                disk.logical_id = new_id
                self.cfg.update(disk)
            self.cfg.rename_instance(inst.uuid, new_name)
        remove_instance_lock(self, old_name)
        self.op.instance_name = new_name
        self._label_disks(new_name)
        renamed = self.cfg.get_instance_info(inst.uuid)
        if renamed is not None and os_image.image_of(renamed.osparams) is not None:
            os_image.rename_seed(self, self.pnode.name, renamed, old_name, feedback_fn)
        self._run_os_rename(old_name)
        return new_name

    def _label_disks(self, new_name: str) -> None:
        """Tag the instance's logical volumes with its new name (their
        ``originstname+`` tag, as at creation); a failure is only a warning."""
        # plain disks, and the volumes under a drbd disk (on both of its nodes)
        volumes = [d for top in self.disks for d in disk_tree(top)
                   if d.dev_type == constants.DT_PLAIN]
        if not volumes or self.rpc is None:
            return
        for disk in volumes:
            for uuid in disk.nodes or [self.pnode.uuid]:
                found = self.cfg.get_node_info(uuid)
                if found is None or found.offline:
                    continue
                node = found.name
                res = self.rpc.call_blockdev_setinfo(
                    [node], disk=disk_rpc_dicts([disk], self.cfg)[0],
                    info=constants.DISK_INFO_PREFIX + new_name).get(node)
                if res is None or res.failed:
                    self.LogWarning(f"Could not update the tag of disk {disk.uuid} on {node}:"
                                    f" {res.fail_msg if res else 'no answer'}")

    def _run_os_rename(self, old_name: str) -> None:
        """The OS rename script on the primary; a failure is only a warning."""
        inst = self.instance
        if not inst.os or self.rpc is None:
            return
        res = self.rpc.call_instance_run_rename(
            [self.pnode.name], instance=self.rpc_instance(), old_name=old_name,
            debug=self.op.debug_level or 0)
        r = res.get(self.pnode.name)
        if r is None or r.failed:
            self.LogWarning(f"Could not run the OS rename script for {inst.name}:"
                            f" {r.fail_msg if r else 'no answer'}")


class LUInstanceConsole(InstanceLU[OpInstanceConsole]):
    """Describe how to reach the console of a running instance."""

    LOCK_NODES = False

    def CheckInstance(self) -> None:
        check_node_online(self.pnode, " as primary node")

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        inst = self.instance
        live = self.require_rpc().call_instance_info(
            self.pnode.name, instance_name=inst.name, hypervisor=inst.hypervisor, hvparams={},
        ).one(self.pnode.name)
        if live is None or live.get("state") != 0:
            raise errors.OpExecError(f"Instance {inst.name} is not running")
        return self.require_rpc().call_instance_console_info(
            self.pnode.name, instance=self.rpc_instance(),
        ).one(self.pnode.name, f"Could not get the console of {inst.name}")

