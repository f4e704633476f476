"""Online device changes: hotplug of NICs and disks, disk growth seen by the guest.

The master sends the instance dict (see ``backend.instance``) in the state
where the device exists: after adding it to the config for ``add``, before
removing it for ``remove``; ``idx`` points into its ``nics`` or
``disks_info``.  The hypervisor does the work (doc/kvm.md, "Online
changes"); hypervisors without hotplug refuse with a
:class:`errors.HypervisorError` saying so.
"""

from __future__ import annotations

import logging
from typing import Any

from ganeti import constants, errors
from ganeti.backend import blockdev
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, procedure
from ganeti.backend.instance import (hypervisor_for, instance_disks_info, instance_spec,
                                     parse_instance)

__all__ = ["hotplug_supported", "hotplug_device", "instance_resize_disk"]

logger = logging.getLogger(__name__)

HOTPLUG_ACTION_ADD = "add"
HOTPLUG_ACTION_REMOVE = "remove"
HOTPLUG_ACTIONS = frozenset([HOTPLUG_ACTION_ADD, HOTPLUG_ACTION_REMOVE])
HOTPLUG_TARGET_NIC = "nic"
HOTPLUG_TARGET_DISK = "disk"
HOTPLUG_TARGETS = frozenset([HOTPLUG_TARGET_NIC, HOTPLUG_TARGET_DISK])


def _disk_at(instance: dict, idx: int) -> dict[str, Any]:
    disks = instance_disks_info(instance)
    if not 0 <= idx < len(disks):
        raise errors.OpExecError(f"Instance {instance.get('name')} has no disk {idx}")
    return disks[idx]


def _disk_path(ctx: NodeContext, disk: dict) -> str:
    """The local path the hypervisor was given for ``disk``."""
    template, spec = blockdev.parse_disk(disk)
    if template == constants.DT_DISKLESS:
        raise errors.StorageError("A diskless disk has no device to plug")
    return blockdev.storage_for(ctx, template).get_path(spec)


@procedure(FAST)
def hotplug_supported(ctx: NodeContext, instance: dict) -> None:
    """Raise unless devices of the running instance can be hotplugged now. -> None"""
    inst = parse_instance(instance)
    hypervisor_for(ctx, inst.hypervisor).hotplug_supported(inst.name)


@procedure(NORMAL)
def hotplug_device(ctx: NodeContext, instance: dict, action: str, dev_type: str,
                   idx: int) -> None:
    """Plug NIC/disk idx (dev_type nic|disk) of the instance in (action add; a disk is assembled
    first) or out (remove). -> None

    Plug NIC/disk ``idx`` of ``instance`` in (``add``) or out (``remove``).

    A disk being added is assembled first (as for a start); a removed disk
    stays assembled (the master removes its volume afterwards).
    """
    if action not in HOTPLUG_ACTIONS:
        raise errors.OpExecError(f"Invalid hotplug action {action!r}")
    if dev_type not in HOTPLUG_TARGETS:
        raise errors.OpExecError(f"Invalid hotplug device type {dev_type!r}")
    inst = parse_instance(instance)
    hv = hypervisor_for(ctx, inst.hypervisor)
    if dev_type == HOTPLUG_TARGET_NIC:
        if not 0 <= idx < len(inst.nics):
            raise errors.OpExecError(f"Instance {inst.name} has no NIC {idx}")
        nic = instance_spec(inst).nics[idx]
        if action == HOTPLUG_ACTION_ADD:
            hv.hot_add_nic(inst.name, nic, idx)
        else:
            hv.hot_del_nic(inst.name, nic)
        return
    disk = _disk_at(instance, idx)
    if action == HOTPLUG_ACTION_ADD:
        _, path = blockdev.assemble_disk(ctx, disk, inst.name, idx)
        hv.hot_add_disk(inst.name, path, str(disk.get("uuid") or ""), idx)
    else:
        hv.hot_del_disk(inst.name, _disk_path(ctx, disk))


@procedure(FAST)
def instance_resize_disk(ctx: NodeContext, instance: dict, idx: int) -> bool:
    """Tell the running instance its disk idx (disks_info) grew. -> True if the guest was told,
    False if it sees the size at its next start

    Tell the running instance that its disk ``idx`` grew (after blockdev_grow).

    Returns whether the guest was told (False: the hypervisor does not
    tell guests, or the instance does not run here: the guest sees the
    new size at its next start).
    """
    inst = parse_instance(instance)
    hv = hypervisor_for(ctx, inst.hypervisor)
    if inst.name not in hv.list_instances():
        return False
    disk = _disk_at(instance, idx)
    template, spec = blockdev.parse_disk(disk)
    size = blockdev.storage_for(ctx, template).get_size(spec) * 1024 * 1024
    return bool(hv.resize_disk(inst.name, _disk_path(ctx, disk), size))
