"""Opcodes on the wire: the functions of the instance opcodes.

GENERATED from the opcode classes by ``tools/gen_opwire.py``; do not edit.  Callers import
:mod:`ganeti.opcodes.wire`, which re-exports these; doc/design/contracts.md, "Adding an opcode".
Imports nothing but ``wire_base`` at run time (doc/cli-startup.md).
"""

from __future__ import annotations

from ganeti.opcodes.wire_base import (NOT_SENT, _op, OP_INSTANCE_ACTIVATE_DISKS,
    OP_INSTANCE_CHANGE_GROUP, OP_INSTANCE_CONSOLE, OP_INSTANCE_CREATE, OP_INSTANCE_DEACTIVATE_DISKS,
    OP_INSTANCE_FAILOVER, OP_INSTANCE_GROW_DISK, OP_INSTANCE_MIGRATE, OP_INSTANCE_MOVE,
    OP_INSTANCE_MULTI_ALLOC, OP_INSTANCE_QUERY_DATA, OP_INSTANCE_REBOOT, OP_INSTANCE_RECREATE_DISKS,
    OP_INSTANCE_REINSTALL, OP_INSTANCE_REMOVE, OP_INSTANCE_RENAME, OP_INSTANCE_REPLACE_DISKS,
    OP_INSTANCE_SET_PARAMS, OP_INSTANCE_SHUTDOWN, OP_INSTANCE_STARTUP)

# typing.TYPE_CHECKING without importing typing (the CLI's start-up path)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Unpack

    from ganeti.opcodes.wire_base import Envelope


__all__ = ["instance_activate_disks", "instance_change_group", "instance_console",
    "instance_create", "instance_deactivate_disks", "instance_failover", "instance_grow_disk",
    "instance_migrate", "instance_move", "instance_multi_alloc", "instance_query_data",
    "instance_reboot", "instance_recreate_disks", "instance_reinstall", "instance_remove",
    "instance_rename", "instance_replace_disks", "instance_set_params", "instance_shutdown",
    "instance_startup"]


def instance_activate_disks(instance_name: str, *, ignore_size: bool = NOT_SENT,
        wait_for_sync: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Assemble the disks of an instance; returns [(node, iv_name, path)]."""
    return _op(OP_INSTANCE_ACTIVATE_DISKS, locals())


def instance_change_group(instance_name: str, *, target_groups: list[str] = NOT_SENT,
        iallocator: str | None = NOT_SENT, early_release: bool = NOT_SENT,
        plan_only: bool = NOT_SENT, apply_plan: dict[str, Any] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Move an instance to another node group (jobs from the allocator); result as evacuate."""
    return _op(OP_INSTANCE_CHANGE_GROUP, locals())


def instance_console(instance_name: str, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """How to reach the console of a running instance (a console dict)."""
    return _op(OP_INSTANCE_CONSOLE, locals())


def instance_create(instance_name: str, *, mode: str = NOT_SENT, os_type: str | None = NOT_SENT,
        osparams: dict[str, Any] = NOT_SENT, osparams_private: dict[str, Any] = NOT_SENT,
        osparams_secret: dict[str, Any] | None = NOT_SENT, force_variant: bool = NOT_SENT,
        disk_template: str | None = NOT_SENT, disks: list[dict[str, Any]] = NOT_SENT,
        nics: list[dict[str, Any]] = NOT_SENT, beparams: dict[str, Any] = NOT_SENT,
        hvparams: dict[str, Any] = NOT_SENT, hypervisor: str | None = NOT_SENT,
        pnode: str | None = NOT_SENT, snode: str | None = NOT_SENT,
        iallocator: str | None = NOT_SENT, group_name: str | None = NOT_SENT,
        start: bool = NOT_SENT, no_install: bool = NOT_SENT, wait_for_sync: bool = NOT_SENT,
        name_check: bool = NOT_SENT, ip_check: bool = NOT_SENT, conflicts_check: bool = NOT_SENT,
        tags: list[str] = NOT_SENT, file_storage_dir: str | None = NOT_SENT,
        file_driver: str | None = NOT_SENT, ignore_ipolicy: bool = NOT_SENT,
        opportunistic_locking: bool = NOT_SENT, src_node: str | None = NOT_SENT,
        src_node_uuid: str | None = NOT_SENT, src_path: str | None = NOT_SENT,
        identify_defaults: bool = NOT_SENT, source_handshake: list[Any] | None = NOT_SENT,
        source_x509_ca: str | None = NOT_SENT, source_instance_name: str | None = NOT_SENT,
        source_shutdown_timeout: int = NOT_SENT, compress: str = NOT_SENT,
        instance_communication: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Create an instance: allocate disks, install the OS, start it."""
    return _op(OP_INSTANCE_CREATE, locals())


def instance_deactivate_disks(instance_name: str, *, force: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Shut down the disks of a stopped instance."""
    return _op(OP_INSTANCE_DEACTIVATE_DISKS, locals())


def instance_failover(instance_name: str, *, ignore_consistency: bool = NOT_SENT,
        shutdown_timeout: int = NOT_SENT, target_node: str | None = NOT_SENT,
        iallocator: str | None = NOT_SENT, cleanup: bool = NOT_SENT,
        ignore_ipolicy: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Fail an instance over: stop it, start it on another node."""
    return _op(OP_INSTANCE_FAILOVER, locals())


def instance_grow_disk(instance_name: str, disk: int, amount: int, *, absolute: bool = NOT_SENT,
        wait_for_sync: bool = NOT_SENT, ignore_ipolicy: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Grow one disk by ``amount`` MiB (or to ``amount`` with ``absolute``)."""
    return _op(OP_INSTANCE_GROW_DISK, locals())


def instance_migrate(instance_name: str, *, mode: str | None = NOT_SENT,
        live: bool | None = NOT_SENT, target_node: str | None = NOT_SENT,
        iallocator: str | None = NOT_SENT, cleanup: bool = NOT_SENT,
        allow_failover: bool = NOT_SENT, allow_runtime_changes: bool = NOT_SENT,
        ignore_ipolicy: bool = NOT_SENT, ignore_hvversions: bool = NOT_SENT,
        with_disks: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Live (or non-live) migrate an instance to another node."""
    return _op(OP_INSTANCE_MIGRATE, locals())


def instance_move(instance_name: str, target_node: str, *, shutdown_timeout: int = NOT_SENT,
        compress: str = NOT_SENT, ignore_consistency: bool = NOT_SENT,
        ignore_ipolicy: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Move an instance by copying its disks to ``target_node``."""
    return _op(OP_INSTANCE_MOVE, locals())


def instance_multi_alloc(*, instances: list[dict[str, Any]] = NOT_SENT,
        iallocator: str | None = NOT_SENT, opportunistic_locking: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Create many instances placed together by the allocator (one create job each)."""
    return _op(OP_INSTANCE_MULTI_ALLOC, locals())


def instance_query_data(*, instances: list[str] = NOT_SENT, static: bool = NOT_SENT,
        use_locking: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Detailed data of instances (``gnt-instance info``), by name."""
    return _op(OP_INSTANCE_QUERY_DATA, locals())


def instance_reboot(instance_name: str, *, reboot_type: str = NOT_SENT,
        ignore_secondaries: bool = NOT_SENT, shutdown_timeout: int = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Reboot a running instance (soft, hard or full)."""
    return _op(OP_INSTANCE_REBOOT, locals())


def instance_recreate_disks(instance_name: str, *, disks: list[Any] = NOT_SENT,
        nodes: list[str] = NOT_SENT, iallocator: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Recreate the missing volumes of a stopped instance's disks."""
    return _op(OP_INSTANCE_RECREATE_DISKS, locals())


def instance_reinstall(instance_name: str, *, os_type: str | None = NOT_SENT,
        force_variant: bool = NOT_SENT, osparams: dict[str, Any] | None = NOT_SENT,
        osparams_private: dict[str, Any] | None = NOT_SENT,
        osparams_secret: dict[str, Any] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Reinstall the OS of a stopped instance (optionally a new OS)."""
    return _op(OP_INSTANCE_REINSTALL, locals())


def instance_remove(instance_name: str, *, shutdown_timeout: int = NOT_SENT,
        ignore_failures: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Remove an instance: stop it, remove its disks and its config entry."""
    return _op(OP_INSTANCE_REMOVE, locals())


def instance_rename(instance_name: str, new_name: str, *, name_check: bool = NOT_SENT,
        ip_check: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Rename a stopped instance; returns the new name."""
    return _op(OP_INSTANCE_RENAME, locals())


def instance_replace_disks(instance_name: str, mode: str, *, disks: list[int] = NOT_SENT,
        remote_node: str | None = NOT_SENT, iallocator: str | None = NOT_SENT,
        early_release: bool = NOT_SENT, ignore_ipolicy: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Replace the volumes of a mirrored (drbd) instance's disks: on its primary or"""
    return _op(OP_INSTANCE_REPLACE_DISKS, locals())


def instance_set_params(instance_name: str, *, nics: list[Any] = NOT_SENT,
        disks: list[Any] = NOT_SENT, beparams: dict[str, Any] = NOT_SENT,
        hvparams: dict[str, Any] = NOT_SENT, osparams: dict[str, Any] | None = NOT_SENT,
        osparams_private: dict[str, Any] | None = NOT_SENT, os_name: str | None = NOT_SENT,
        force_variant: bool = NOT_SENT, offline: bool | None = NOT_SENT,
        runtime_mem: int | None = NOT_SENT, force: bool = NOT_SENT, wait_for_sync: bool = NOT_SENT,
        disk_template: str | None = NOT_SENT, remote_node: str | None = NOT_SENT,
        remote_node_uuid: str | None = NOT_SENT, conflicts_check: bool = NOT_SENT,
        iallocator: str | None = NOT_SENT, hotplug: bool = NOT_SENT,
        hotplug_if_possible: bool = NOT_SENT, ignore_ipolicy: bool = NOT_SENT,
        pnode: str | None = NOT_SENT, instance_communication: bool | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Change an instance's parameters, NICs and disks; returns the changes."""
    return _op(OP_INSTANCE_SET_PARAMS, locals())


def instance_shutdown(instance_name: str, *, timeout: int = NOT_SENT, force: bool = NOT_SENT,
        ignore_offline_nodes: bool = NOT_SENT, no_remember: bool = NOT_SENT,
        admin_state_source: str | None = NOT_SENT, expected_admin_state: str | None = NOT_SENT,
        expected_admin_state_source: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Stop an instance (soft for ``timeout`` seconds, then hard)."""
    return _op(OP_INSTANCE_SHUTDOWN, locals())


def instance_startup(instance_name: str, *, force: bool = NOT_SENT,
        ignore_offline_nodes: bool = NOT_SENT, hvparams: dict[str, Any] = NOT_SENT,
        beparams: dict[str, Any] = NOT_SENT, no_remember: bool = NOT_SENT,
        startup_paused: bool = NOT_SENT, expected_admin_state: str | None = NOT_SENT,
        expected_admin_state_source: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Start an instance (and remember it should run, unless no_remember)."""
    return _op(OP_INSTANCE_STARTUP, locals())
