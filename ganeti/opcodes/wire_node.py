"""Opcodes on the wire: the functions of the node, storage, node group and network opcodes.

GENERATED from the opcode classes by ``tools/gen_opwire.py``; do not edit.  Callers import
:mod:`ganeti.opcodes.wire`, which re-exports these; doc/design/contracts.md, "Adding an opcode".
Imports nothing but ``wire_base`` at run time (doc/cli-startup.md).
"""

from __future__ import annotations

from ganeti.opcodes.wire_base import (NOT_SENT, _op, OP_GROUP_ADD, OP_GROUP_ASSIGN_NODES,
    OP_GROUP_EVACUATE, OP_GROUP_REMOVE, OP_GROUP_RENAME, OP_GROUP_SET_PARAMS, OP_GROUP_VERIFY_DISKS,
    OP_NETWORK_ADD, OP_NETWORK_CONNECT, OP_NETWORK_DISCONNECT, OP_NETWORK_REMOVE,
    OP_NETWORK_SET_PARAMS, OP_NODE_ADD, OP_NODE_EVACUATE, OP_NODE_HA_FENCE, OP_NODE_HA_REPORT,
    OP_NODE_MIGRATE, OP_NODE_MODIFY_STORAGE, OP_NODE_POWERCYCLE, OP_NODE_QUERYVOLS,
    OP_NODE_QUERY_STORAGE, OP_NODE_REMOVE, OP_NODE_SET_PARAMS, OP_OOB_COMMAND,
    OP_REPAIR_NODE_STORAGE)

# typing.TYPE_CHECKING without importing typing (the CLI's start-up path)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Unpack

    from ganeti.opcodes.wire_base import Envelope


__all__ = ["group_add", "group_assign_nodes", "group_evacuate", "group_remove", "group_rename",
    "group_set_params", "group_verify_disks", "network_add", "network_connect",
    "network_disconnect", "network_remove", "network_set_params", "node_add", "node_evacuate",
    "node_ha_fence", "node_ha_report", "node_migrate", "node_modify_storage", "node_powercycle",
    "node_queryvols", "node_query_storage", "node_remove", "node_set_params", "oob_command",
    "repair_node_storage"]


def group_add(group_name: str, *, alloc_policy: str | None = NOT_SENT,
        ndparams: dict[str, Any] | None = NOT_SENT,
        diskparams: dict[str, dict[str, Any]] | None = NOT_SENT,
        ipolicy: dict[str, Any] | None = NOT_SENT, hv_state: dict[str, Any] | None = NOT_SENT,
        disk_state: dict[str, Any] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Add a node group."""
    return _op(OP_GROUP_ADD, locals())


def group_assign_nodes(group_name: str, nodes: list[str], *, force: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Move nodes into a node group."""
    return _op(OP_GROUP_ASSIGN_NODES, locals())


def group_evacuate(group_name: str, *, target_groups: list[str] = NOT_SENT,
        iallocator: str | None = NOT_SENT, early_release: bool = NOT_SENT,
        sequential: bool = NOT_SENT, force_failover: bool = NOT_SENT, plan_only: bool = NOT_SENT,
        apply_plan: dict[str, Any] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Move every instance of a group to other groups; result as OP_NODE_EVACUATE."""
    return _op(OP_GROUP_EVACUATE, locals())


def group_remove(group_name: str, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Remove an empty node group."""
    return _op(OP_GROUP_REMOVE, locals())


def group_rename(group_name: str, new_name: str, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Rename a node group."""
    return _op(OP_GROUP_RENAME, locals())


def group_set_params(group_name: str, *, alloc_policy: str | None = NOT_SENT,
        ndparams: dict[str, Any] | None = NOT_SENT,
        diskparams: dict[str, dict[str, Any]] | None = NOT_SENT,
        ipolicy: dict[str, Any] | None = NOT_SENT, hv_state: dict[str, Any] | None = NOT_SENT,
        disk_state: dict[str, Any] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Change a node group's allocation policy and parameters."""
    return _op(OP_GROUP_SET_PARAMS, locals())


def group_verify_disks(group_name: str, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Check the disks of a group's instances (doc/protocols/opcodes.md, "Verify disks")."""
    return _op(OP_GROUP_VERIFY_DISKS, locals())


def network_add(network_name: str, network: str, *, gateway: str | None = NOT_SENT,
        network6: str | None = NOT_SENT, gateway6: str | None = NOT_SENT,
        mac_prefix: str | None = NOT_SENT, add_reserved_ips: list[str] | None = NOT_SENT,
        conflicts_check: bool = NOT_SENT, tags: list[str] = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Add an IP network with its address pool."""
    return _op(OP_NETWORK_ADD, locals())


def network_connect(group_name: str, network_name: str, network_mode: str, network_link: str, *,
        network_vlan: str = NOT_SENT, conflicts_check: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Connect a network to a node group with a NIC mode, link and VLAN."""
    return _op(OP_NETWORK_CONNECT, locals())


def network_disconnect(group_name: str, network_name: str,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Disconnect a network from a node group (no instance there may use it)."""
    return _op(OP_NETWORK_DISCONNECT, locals())


def network_remove(network_name: str, *, force: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Remove a network connected to no node group."""
    return _op(OP_NETWORK_REMOVE, locals())


def network_set_params(network_name: str, *, gateway: str | None = NOT_SENT,
        network6: str | None = NOT_SENT, gateway6: str | None = NOT_SENT,
        mac_prefix: str | None = NOT_SENT, add_reserved_ips: list[str] | None = NOT_SENT,
        remove_reserved_ips: list[str] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Change a network's gateways, IPv6 network, MAC prefix and reserved addresses."""
    return _op(OP_NETWORK_SET_PARAMS, locals())


def node_add(node_name: str, *, primary_ip: str | None = NOT_SENT,
        secondary_ip: str | None = NOT_SENT, readd: bool = NOT_SENT, group: str | None = NOT_SENT,
        master_capable: bool | None = NOT_SENT, vm_capable: bool | None = NOT_SENT,
        ndparams: dict[str, Any] | None = NOT_SENT, node_setup: bool = NOT_SENT,
        hv_state: dict[str, Any] | None = NOT_SENT, disk_state: dict[str, Any] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Add a node whose node daemon already runs (set up by the CLI over SSH)."""
    return _op(OP_NODE_ADD, locals())


def node_evacuate(node_name: str, *, node_uuid: str | None = NOT_SENT, mode: str = NOT_SENT,
        remote_node: str | None = NOT_SENT, iallocator: str | None = NOT_SENT,
        early_release: bool = NOT_SENT, ignore_soft_errors: bool = NOT_SENT,
        with_disks: bool = NOT_SENT, plan_only: bool = NOT_SENT,
        apply_plan: dict[str, Any] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Move the instances off a node; result ``{"jobs": [[ok, id|error], ...], ...}``."""
    return _op(OP_NODE_EVACUATE, locals())


def node_ha_fence(node_name: str, fence: str, *, node_uuid: str | None = NOT_SENT,
        lease_wait: float = NOT_SENT, messages: list[str] = NOT_SENT, timeout: int = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Fence a node node loss recovery declared dead; result: the fence and its confirmation."""
    return _op(OP_NODE_HA_FENCE, locals())


def node_ha_report(node_name: str, *, messages: list[str] = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Write node loss recovery's lines about a dead node to the job log (doc/ha.md)."""
    return _op(OP_NODE_HA_REPORT, locals())


def node_migrate(node_name: str, *, node_uuid: str | None = NOT_SENT, mode: str | None = NOT_SENT,
        live: bool | None = NOT_SENT, target_node: str | None = NOT_SENT,
        iallocator: str | None = NOT_SENT, allow_runtime_changes: bool = NOT_SENT,
        ignore_ipolicy: bool = NOT_SENT, with_disks: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Live-migrate the primary instances off a node (one job each); result as evacuate."""
    return _op(OP_NODE_MIGRATE, locals())


def node_modify_storage(node_name: str, storage_type: str, name: str, *,
        node_uuid: str | None = NOT_SENT, changes: dict[str, Any] = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Change fields (``changes``, e.g. ``allocatable``) of one storage unit."""
    return _op(OP_NODE_MODIFY_STORAGE, locals())


def node_powercycle(node_name: str, *, node_uuid: str | None = NOT_SENT, force: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Hard-reset a node through its hypervisor (``force`` is needed for the master)."""
    return _op(OP_NODE_POWERCYCLE, locals())


def node_queryvols(output_fields: list[str], *, nodes: list[str] = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """The volumes (here: the disk files of the file storage directories) of ``nodes``"""
    return _op(OP_NODE_QUERYVOLS, locals())


def node_query_storage(output_fields: list[str], *, storage_type: str | None = NOT_SENT,
        nodes: list[str] = NOT_SENT, name: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """The storage units of ``nodes`` (all nodes when empty): one row per unit,"""
    return _op(OP_NODE_QUERY_STORAGE, locals())


def node_remove(node_name: str, *, node_uuid: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Remove a node (not the master, not one with instances)."""
    return _op(OP_NODE_REMOVE, locals())


def node_set_params(node_name: str, *, node_uuid: str | None = NOT_SENT, force: bool = NOT_SENT,
        master_candidate: bool | None = NOT_SENT, offline: bool | None = NOT_SENT,
        drained: bool | None = NOT_SENT, auto_promote: bool = NOT_SENT,
        master_capable: bool | None = NOT_SENT, vm_capable: bool | None = NOT_SENT,
        secondary_ip: str | None = NOT_SENT, ndparams: dict[str, Any] | None = NOT_SENT,
        powered: bool | None = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Change a node's flags; result: list of ``[param, new value]``."""
    return _op(OP_NODE_SET_PARAMS, locals())


def oob_command(command: str, *, node_names: list[str] = NOT_SENT,
        node_uuids: list[str] | None = NOT_SENT, timeout: int = NOT_SENT,
        ignore_status: bool = NOT_SENT, force_master: bool = NOT_SENT,
        power_delay: float = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Run the out-of-band program of nodes (default: all) and check its answer."""
    return _op(OP_OOB_COMMAND, locals())


def repair_node_storage(node_name: str, storage_type: str, name: str, *,
        node_uuid: str | None = NOT_SENT, ignore_consistency: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Repair one storage unit (Ganeti: fix the consistency of an LVM volume group)."""
    return _op(OP_REPAIR_NODE_STORAGE, locals())
