"""Migration with local disks, node side: the disk copy around a live migration.

The master calls these between ``accept_instance`` and ``instance_migrate``
and before the finalize calls (doc/kvm.md, "Migration with disks"); each
hands the instance dict (``backend.instance``) to the hypervisor's
``mirror_*`` method.  Hypervisors that cannot copy disks while the guest
runs (not in ``constants.HTS_DISK_MIRROR``) refuse.
"""

from __future__ import annotations

from typing import Any

from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, procedure
from ganeti.backend.instance import hypervisor_for, instance_spec, parse_instance

__all__ = ["instance_mirror_accept", "instance_mirror_start", "instance_mirror_status",
           "instance_mirror_finish", "instance_mirror_release"]


@procedure(NORMAL)
def instance_mirror_accept(ctx: NodeContext, instance: dict, address: str) -> dict[str, Any]:
    """Target: export the incoming instance's disks for writing on address. -> {host, port,
    exports: [{device, size}]}

    Target: export the incoming instance's disks on ``address`` (this node's).
    """
    inst = parse_instance(instance)
    return hypervisor_for(ctx, inst.hypervisor).mirror_accept(inst.name, address)


@procedure(NORMAL)
def instance_mirror_start(ctx: NodeContext, instance: dict, target: dict) -> list[str]:
    """Source: copy every disk to the target's exports (the accept result), at
    migration_bandwidth. -> [device]

    Source: start copying every disk to ``target`` (instance_mirror_accept's result).
    """
    inst = parse_instance(instance)
    return hypervisor_for(ctx, inst.hypervisor).mirror_start(instance_spec(inst), target)


@procedure(FAST)
def instance_mirror_status(ctx: NodeContext, instance: dict) -> dict[str, Any]:
    """Source: {status active|ready|failed, info, disks: [{device, cur, end, ready, speed}]}.

    Source: ``{"status": active|ready|failed, "info", "disks": [...]}``.
    """
    inst = parse_instance(instance)
    return hypervisor_for(ctx, inst.hypervisor).mirror_status(inst.name)


@procedure(NORMAL)
def instance_mirror_finish(ctx: NodeContext, instance: dict, success: bool) -> None:
    """Source: complete the disk copies (success; the guest is stopped) or abort them. -> None

    Source: complete the copies (success: the guest is stopped) or abort them.
    """
    inst = parse_instance(instance)
    hypervisor_for(ctx, inst.hypervisor).mirror_finish(inst.name, success)


@procedure(FAST)
def instance_mirror_release(ctx: NodeContext, instance: dict) -> None:
    """Target: stop exporting the disks (before the guest resumes there). -> None"""
    inst = parse_instance(instance)
    hypervisor_for(ctx, inst.hypervisor).mirror_release(inst.name)
