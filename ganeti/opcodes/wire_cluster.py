"""Opcodes on the wire: the functions of the cluster, export, OS, query, tag and test opcodes (and the opcodes we only name).

GENERATED from the opcode classes by ``tools/gen_opwire.py``; do not edit.  Callers import
:mod:`ganeti.opcodes.wire`, which re-exports these; doc/design/contracts.md, "Adding an opcode".
Imports nothing but ``wire_base`` at run time (doc/cli-startup.md).
"""

from __future__ import annotations

from ganeti.opcodes.wire_base import (NOT_SENT, _op, OP_BACKUP_EXPORT, OP_BACKUP_PREPARE,
    OP_BACKUP_REMOVE, OP_CLUSTER_ACTIVATE_MASTER_IP, OP_CLUSTER_DEACTIVATE_MASTER_IP,
    OP_CLUSTER_DESTROY, OP_CLUSTER_POST_INIT, OP_CLUSTER_QUERY, OP_CLUSTER_REDIST_CONF,
    OP_CLUSTER_RENAME, OP_CLUSTER_RENEW_CRYPTO, OP_CLUSTER_REPAIR_DISK_SIZES, OP_CLUSTER_SET_PARAMS,
    OP_CLUSTER_VERIFY, OP_CLUSTER_VERIFY_CONFIG, OP_CLUSTER_VERIFY_DISKS, OP_CLUSTER_VERIFY_GROUP,
    OP_EXT_STORAGE_DIAGNOSE, OP_OS_DIAGNOSE, OP_OS_IMAGE_ADD, OP_OS_IMAGE_LIST, OP_OS_IMAGE_REMOVE,
    OP_QUERY, OP_QUERY_FIELDS, OP_TAGS_DEL, OP_TAGS_GET, OP_TAGS_SEARCH, OP_TAGS_SET,
    OP_TEST_ALLOCATOR, OP_TEST_DELAY, OP_TEST_JQUEUE, OP_TEST_OS_PARAMS)

# typing.TYPE_CHECKING without importing typing (the CLI's start-up path)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Unpack

    from ganeti.opcodes.wire_base import Envelope


__all__ = ["backup_export", "backup_prepare", "backup_remove", "cluster_activate_master_ip",
    "cluster_deactivate_master_ip", "cluster_destroy", "cluster_post_init", "cluster_query",
    "cluster_redist_conf", "cluster_rename", "cluster_renew_crypto", "cluster_repair_disk_sizes",
    "cluster_set_params", "cluster_verify", "cluster_verify_config", "cluster_verify_disks",
    "cluster_verify_group", "ext_storage_diagnose", "os_diagnose", "os_image_add", "os_image_list",
    "os_image_remove", "query", "query_fields", "tags_del", "tags_get", "tags_search", "tags_set",
    "test_allocator", "test_delay", "test_jqueue", "test_os_params"]


def backup_export(instance_name: str, *, instance_uuid: str | None = NOT_SENT,
        compress: str = NOT_SENT, shutdown_timeout: int = NOT_SENT, target_node: Any = NOT_SENT,
        target_node_uuid: str | None = NOT_SENT, shutdown: bool = NOT_SENT,
        remove_instance: bool = NOT_SENT, ignore_remove_failures: bool = NOT_SENT,
        mode: str = NOT_SENT, x509_key_name: list[Any] | None = NOT_SENT,
        destination_x509_ca: str | None = NOT_SENT, zero_free_space: bool = NOT_SENT,
        zeroing_timeout_fixed: int | None = NOT_SENT,
        zeroing_timeout_per_mib: float | None = NOT_SENT, long_sleep: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Export an instance (its config and disk images) to a node; returns (bool, [bool per
    disk]).
    """
    return _op(OP_BACKUP_EXPORT, locals())


def backup_prepare(instance_name: str, mode: str, *, instance_uuid: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Prepare an instance export (``local``: nothing to prepare; returns None)."""
    return _op(OP_BACKUP_PREPARE, locals())


def backup_remove(instance_name: str, *, instance_uuid: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Remove the exports of an instance (also of one no longer in the cluster)."""
    return _op(OP_BACKUP_REMOVE, locals())


def cluster_activate_master_ip(**envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Activate the master IP address on the master node (setup script ``start``)."""
    return _op(OP_CLUSTER_ACTIVATE_MASTER_IP, locals())


def cluster_deactivate_master_ip(**envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Deactivate the master IP address on the master node (setup script ``stop``)."""
    return _op(OP_CLUSTER_DEACTIVATE_MASTER_IP, locals())


def cluster_destroy(**envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Destroy the cluster: only possible with the master as the last node."""
    return _op(OP_CLUSTER_DESTROY, locals())


def cluster_post_init(**envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Run the cluster-init post hooks (submitted right after ``gnt-cluster init``)."""
    return _op(OP_CLUSTER_POST_INIT, locals())


def cluster_query(**envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Return the cluster information dict (same as LUXI QueryClusterInfo)."""
    return _op(OP_CLUSTER_QUERY, locals())


def cluster_redist_conf(**envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Push the configuration, ssconf and cluster files to all nodes."""
    return _op(OP_CLUSTER_REDIST_CONF, locals())


def cluster_rename(name: str, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Rename the cluster; the master IP becomes the new name's address."""
    return _op(OP_CLUSTER_RENAME, locals())


def cluster_renew_crypto(*, new_cluster_certificate: bool = NOT_SENT,
        new_rapi_cert: bool = NOT_SENT, rapi_cert_pem: Any | None = NOT_SENT,
        new_cluster_domain_secret: bool = NOT_SENT, cluster_domain_secret: Any | None = NOT_SENT,
        new_confd_hmac_key: bool = NOT_SENT, node_certificates: bool = NOT_SENT,
        renew_ssh_keys: bool = NOT_SENT, ssh_key_type: str | None = NOT_SENT,
        ssh_key_bits: int | None = NOT_SENT, verbose: bool = NOT_SENT, debug: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Renew cluster crypto material and push it to every online node."""
    return _op(OP_CLUSTER_RENEW_CRYPTO, locals())


def cluster_repair_disk_sizes(*, instances: list[str] = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Record the real sizes of instance disks where the configuration differs."""
    return _op(OP_CLUSTER_REPAIR_DISK_SIZES, locals())


def cluster_set_params(*, enabled_hypervisors: list[str] | None = NOT_SENT,
        hvparams: dict[str, dict[str, Any]] | None = NOT_SENT,
        beparams: dict[str, Any] | None = NOT_SENT, nicparams: dict[str, Any] | None = NOT_SENT,
        ndparams: dict[str, Any] | None = NOT_SENT,
        diskparams: dict[str, dict[str, Any]] | None = NOT_SENT,
        os_hvp: dict[str, dict[str, dict[str, Any]]] | None = NOT_SENT,
        osparams: dict[str, dict[str, Any]] | None = NOT_SENT,
        candidate_pool_size: int | None = NOT_SENT,
        enabled_disk_templates: list[str] | None = NOT_SENT,
        max_running_jobs: int | None = NOT_SENT, max_tracked_jobs: int | None = NOT_SENT,
        drbd_helper: str | None = NOT_SENT, default_iallocator: str | None = NOT_SENT,
        default_iallocator_params: dict[str, Any] | None = NOT_SENT,
        file_storage_dir: str | None = NOT_SENT, shared_file_storage_dir: str | None = NOT_SENT,
        vg_name: str | None = NOT_SENT, maintain_node_health: bool | None = NOT_SENT,
        auto_promote: bool | None = NOT_SENT, ha_recovery: bool | None = NOT_SENT,
        ha_node_timeout: int | None = NOT_SENT, ha_max_restart: int | None = NOT_SENT,
        ha_max_relocate: int | None = NOT_SENT, prealloc_wipe_disks: bool | None = NOT_SENT,
        modify_etc_hosts: bool | None = NOT_SENT, mac_prefix: str | None = NOT_SENT,
        master_netdev: str | None = NOT_SENT, master_netmask: int | None = NOT_SENT,
        use_external_mip_script: bool | None = NOT_SENT, uid_pool: list[Any] | None = NOT_SENT,
        add_uids: list[Any] | None = NOT_SENT, remove_uids: list[Any] | None = NOT_SENT,
        ipolicy: dict[str, Any] | None = NOT_SENT, hidden_os: list[Any] | None = NOT_SENT,
        blacklisted_os: list[Any] | None = NOT_SENT, install_image: str | None = NOT_SENT,
        instance_communication_network: str | None = NOT_SENT, zeroing_image: str | None = NOT_SENT,
        reserved_lvs: list[str] | None = NOT_SENT, gluster_storage_dir: str | None = NOT_SENT,
        compression_tools: list[str] | None = NOT_SENT,
        enabled_user_shutdown: bool | None = NOT_SENT,
        enabled_data_collectors: dict[str, bool] | None = NOT_SENT,
        data_collector_interval: dict[str, int] | None = NOT_SENT, force: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Change cluster parameters; only the given (non-null) fields change."""
    return _op(OP_CLUSTER_SET_PARAMS, locals())


def cluster_verify(*, group_name: str | None = NOT_SENT, error_codes: bool = NOT_SENT,
        debug_simulate_errors: bool = NOT_SENT, skip_checks: list[str] = NOT_SENT,
        ignore_errors: list[str] = NOT_SENT, verbose: bool = NOT_SENT,
        verify_clutter: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Submit one VERIFY_CONFIG job and one VERIFY_GROUP job per node group."""
    return _op(OP_CLUSTER_VERIFY, locals())


def cluster_verify_config(*, error_codes: bool = NOT_SENT, debug_simulate_errors: bool = NOT_SENT,
        ignore_errors: list[str] = NOT_SENT, verbose: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Verify the configuration and the cluster-wide state; result True if clean."""
    return _op(OP_CLUSTER_VERIFY_CONFIG, locals())


def cluster_verify_disks(*, group_name: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Submit one OP_GROUP_VERIFY_DISKS job per node group (or for ``group_name``)."""
    return _op(OP_CLUSTER_VERIFY_DISKS, locals())


def cluster_verify_group(group_name: str, *, error_codes: bool = NOT_SENT,
        debug_simulate_errors: bool = NOT_SENT, skip_checks: list[str] = NOT_SENT,
        ignore_errors: list[str] = NOT_SENT, verbose: bool = NOT_SENT,
        verify_clutter: bool = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Verify the nodes of one group; result True if no error was found."""
    return _op(OP_CLUSTER_VERIFY_GROUP, locals())


def ext_storage_diagnose(output_fields: list[str], *, names: list[str] = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Query the ExtStorage providers of the nodes (``gnt-storage``; the extstorage resource)."""
    return _op(OP_EXT_STORAGE_DIAGNOSE, locals())


def os_diagnose(output_fields: list[str], *, names: list[str] = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Query the OS definitions of the nodes (legacy; same data as the os resource)."""
    return _op(OP_OS_DIAGNOSE, locals())


def os_image_add(name: str, source: str, *, checksum: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Add an image to the master's OS image store (``gnt-os image add``; doc/images.md)."""
    return _op(OP_OS_IMAGE_ADD, locals())


def os_image_list(*, names: list[str] = NOT_SENT, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """The OS image store's entries (all, or those named), sorted by name."""
    return _op(OP_OS_IMAGE_LIST, locals())


def os_image_remove(name: str, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Remove an image from the OS image store (``gnt-os image remove``)."""
    return _op(OP_OS_IMAGE_REMOVE, locals())


def query(what: str, fields: list[str], *, qfilter: Any = NOT_SENT, use_locking: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Query a resource: fields and rows, optionally filtered."""
    return _op(OP_QUERY, locals())


def query_fields(what: str, *, fields: list[str] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Describe the fields of a resource (all of them when ``fields`` is null)."""
    return _op(OP_QUERY_FIELDS, locals())


def tags_del(kind: str, tags: list[str], *, name: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Remove tags from one object (all must be present)."""
    return _op(OP_TAGS_DEL, locals())


def tags_get(kind: str, *, name: str | None = NOT_SENT, use_locking: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """The tags of one object (``name`` is None for the cluster)."""
    return _op(OP_TAGS_GET, locals())


def tags_search(pattern: str, **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Search every tag for a regular expression; returns [(path, tag)]."""
    return _op(OP_TAGS_SEARCH, locals())


def tags_set(kind: str, tags: list[str], *, name: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Add tags to one object."""
    return _op(OP_TAGS_SET, locals())


def test_allocator(mode: str, *, direction: str = NOT_SENT, name: str = NOT_SENT,
        memory: int = NOT_SENT, vcpus: int = NOT_SENT, disks: list[dict[str, Any]] = NOT_SENT,
        nics: list[dict[str, Any]] = NOT_SENT, os: str = NOT_SENT, disk_template: str = NOT_SENT,
        tags: list[str] = NOT_SENT, hypervisor: str | None = NOT_SENT, spindle_use: int = NOT_SENT,
        group_name: str | None = NOT_SENT, instances: list[Any] = NOT_SENT,
        evac_mode: str = NOT_SENT, target_groups: list[str] = NOT_SENT,
        relocate_from: list[str] = NOT_SENT, iallocator: str | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Build an iallocator request (doc/protocols/iallocator.md): show its input document"""
    return _op(OP_TEST_ALLOCATOR, locals())


def test_delay(duration: float, *, on_master: bool = NOT_SENT, on_nodes: list[str] = NOT_SENT,
        on_node_uuids: list[str] | None = NOT_SENT, repeat: int = NOT_SENT,
        interruptible: bool = NOT_SENT, no_locks: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Sleep for a while on the master and/or on some nodes."""
    return _op(OP_TEST_DELAY, locals())


def test_jqueue(*, notify_waitlock: bool = NOT_SENT, notify_exec: bool = NOT_SENT,
        log_messages: list[str] = NOT_SENT, fail: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Write log messages and optionally fail (tests the queue itself)."""
    return _op(OP_TEST_JQUEUE, locals())


def test_os_params(*, osparams_secret: dict[str, Any] | None = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Check that secret OS parameters reach the master (Ganeti's ``gnt-debug test-osparams``)."""
    return _op(OP_TEST_OS_PARAMS, locals())
