"""Opcodes on the wire: one typed keyword function per opcode, returning its dict.

GENERATED from the opcode classes by ``tools/gen_opwire.py``; do not edit (test/opcodes/
test_wire.py fails when this file is stale).  doc/design/contracts.md, "Adding an opcode".

``instance_startup("web1", force=True)`` returns ``{"OP_ID": "OP_INSTANCE_STARTUP",
"instance_name": "web1", "force": True}``: a keyword left out is not sent (the master applies
the opcode class's default), a keyword given is sent as given, ``None`` included, unless it is
:data:`NOT_SENT` (``force=opts.force or NOT_SENT``: sent only when true).  :func:`drop_none`
leaves out the ``None`` values instead (a front end's "option not given").  Code that names an
opcode without building one (a table keyed by ``OP_ID``, a check of an answer) uses the
``OP_*`` constants here, never a string: ``test/opcodes/test_no_op_literals.py`` refuses
``"OP_..."`` literals outside ``ganeti/opcodes/``.

Imports nothing at run time: the ``gnt-*`` commands keep their start-up budget (doc/cli-startup.md).
"""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing (the CLI's start-up path)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypedDict, Unpack


class _NotSent:
    """The default of every optional keyword: the key is not sent."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_SENT"


#: the default of every optional keyword: not sent (the master's default applies)
NOT_SENT: Any = _NotSent()


def _op(op_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """The opcode dict: ``params`` (a function's ``locals()``) with its envelope merged in;
    a keyword that is neither the opcode's nor the envelope's is a ``TypeError``."""
    unknown = set(params["envelope"]) - _ENVELOPE_KEYS
    if unknown:
        raise TypeError(f"{op_id} has no parameter {', '.join(sorted(unknown))}")
    sent = {**params, **params["envelope"]}
    return {"OP_ID": op_id, **{k: v for k, v in sent.items()
                               if k != "envelope" and v is not NOT_SENT}}


def drop_none(op: dict[str, Any]) -> dict[str, Any]:
    """``op`` without its ``None`` values (options a front end was not given)."""
    return {k: v for k, v in op.items() if v is not None}


__all__ = ["NOT_SENT", "OP_IDS", "drop_none", "OP_BACKUP_EXPORT", "OP_BACKUP_PREPARE",
    "OP_BACKUP_REMOVE", "OP_CLUSTER_ACTIVATE_MASTER_IP", "OP_CLUSTER_DEACTIVATE_MASTER_IP",
    "OP_CLUSTER_DESTROY", "OP_CLUSTER_POST_INIT", "OP_CLUSTER_QUERY", "OP_CLUSTER_REDIST_CONF",
    "OP_CLUSTER_RENAME", "OP_CLUSTER_RENEW_CRYPTO", "OP_CLUSTER_REPAIR_DISK_SIZES",
    "OP_CLUSTER_SET_PARAMS", "OP_CLUSTER_VERIFY", "OP_CLUSTER_VERIFY_CONFIG",
    "OP_CLUSTER_VERIFY_DISKS", "OP_CLUSTER_VERIFY_GROUP", "OP_EXT_STORAGE_DIAGNOSE", "OP_GROUP_ADD",
    "OP_GROUP_ASSIGN_NODES", "OP_GROUP_EVACUATE", "OP_GROUP_REMOVE", "OP_GROUP_RENAME",
    "OP_GROUP_SET_PARAMS", "OP_GROUP_VERIFY_DISKS", "OP_INSTANCE_ACTIVATE_DISKS",
    "OP_INSTANCE_CHANGE_GROUP", "OP_INSTANCE_CONSOLE", "OP_INSTANCE_CREATE",
    "OP_INSTANCE_DEACTIVATE_DISKS", "OP_INSTANCE_FAILOVER", "OP_INSTANCE_GROW_DISK",
    "OP_INSTANCE_MIGRATE", "OP_INSTANCE_MOVE", "OP_INSTANCE_MULTI_ALLOC", "OP_INSTANCE_QUERY_DATA",
    "OP_INSTANCE_REBOOT", "OP_INSTANCE_RECREATE_DISKS", "OP_INSTANCE_REINSTALL",
    "OP_INSTANCE_REMOVE", "OP_INSTANCE_RENAME", "OP_INSTANCE_REPLACE_DISKS",
    "OP_INSTANCE_SET_PARAMS", "OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_STARTUP", "OP_NETWORK_ADD",
    "OP_NETWORK_CONNECT", "OP_NETWORK_DISCONNECT", "OP_NETWORK_REMOVE", "OP_NETWORK_SET_PARAMS",
    "OP_NODE_ADD", "OP_NODE_EVACUATE", "OP_NODE_HA_FENCE", "OP_NODE_HA_REPORT", "OP_NODE_MIGRATE",
    "OP_NODE_MODIFY_STORAGE", "OP_NODE_POWERCYCLE", "OP_NODE_QUERYVOLS", "OP_NODE_QUERY_STORAGE",
    "OP_NODE_REMOVE", "OP_NODE_SET_PARAMS", "OP_OOB_COMMAND", "OP_OS_DIAGNOSE", "OP_OS_IMAGE_ADD",
    "OP_OS_IMAGE_LIST", "OP_OS_IMAGE_REMOVE", "OP_QUERY", "OP_QUERY_FIELDS",
    "OP_REPAIR_NODE_STORAGE", "OP_TAGS_DEL", "OP_TAGS_GET", "OP_TAGS_SEARCH", "OP_TAGS_SET",
    "OP_TEST_ALLOCATOR", "OP_TEST_DELAY", "OP_TEST_JQUEUE", "OP_TEST_OS_PARAMS", "backup_export",
    "backup_prepare", "backup_remove", "cluster_activate_master_ip", "cluster_deactivate_master_ip",
    "cluster_destroy", "cluster_post_init", "cluster_query", "cluster_redist_conf",
    "cluster_rename", "cluster_renew_crypto", "cluster_repair_disk_sizes", "cluster_set_params",
    "cluster_verify", "cluster_verify_config", "cluster_verify_disks", "cluster_verify_group",
    "ext_storage_diagnose", "group_add", "group_assign_nodes", "group_evacuate", "group_remove",
    "group_rename", "group_set_params", "group_verify_disks", "instance_activate_disks",
    "instance_change_group", "instance_console", "instance_create", "instance_deactivate_disks",
    "instance_failover", "instance_grow_disk", "instance_migrate", "instance_move",
    "instance_multi_alloc", "instance_query_data", "instance_reboot", "instance_recreate_disks",
    "instance_reinstall", "instance_remove", "instance_rename", "instance_replace_disks",
    "instance_set_params", "instance_shutdown", "instance_startup", "network_add",
    "network_connect", "network_disconnect", "network_remove", "network_set_params", "node_add",
    "node_evacuate", "node_ha_fence", "node_ha_report", "node_migrate", "node_modify_storage",
    "node_powercycle", "node_queryvols", "node_query_storage", "node_remove", "node_set_params",
    "oob_command", "os_diagnose", "os_image_add", "os_image_list", "os_image_remove", "query",
    "query_fields", "repair_node_storage", "tags_del", "tags_get", "tags_search", "tags_set",
    "test_allocator", "test_delay", "test_jqueue", "test_os_params"]

#: the ``OP_ID`` of every opcode the master implements
OP_BACKUP_EXPORT = "OP_BACKUP_EXPORT"
OP_BACKUP_PREPARE = "OP_BACKUP_PREPARE"
OP_BACKUP_REMOVE = "OP_BACKUP_REMOVE"
OP_CLUSTER_ACTIVATE_MASTER_IP = "OP_CLUSTER_ACTIVATE_MASTER_IP"
OP_CLUSTER_DEACTIVATE_MASTER_IP = "OP_CLUSTER_DEACTIVATE_MASTER_IP"
OP_CLUSTER_DESTROY = "OP_CLUSTER_DESTROY"
OP_CLUSTER_POST_INIT = "OP_CLUSTER_POST_INIT"
OP_CLUSTER_QUERY = "OP_CLUSTER_QUERY"
OP_CLUSTER_REDIST_CONF = "OP_CLUSTER_REDIST_CONF"
OP_CLUSTER_RENAME = "OP_CLUSTER_RENAME"
OP_CLUSTER_RENEW_CRYPTO = "OP_CLUSTER_RENEW_CRYPTO"
OP_CLUSTER_REPAIR_DISK_SIZES = "OP_CLUSTER_REPAIR_DISK_SIZES"
OP_CLUSTER_SET_PARAMS = "OP_CLUSTER_SET_PARAMS"
OP_CLUSTER_VERIFY = "OP_CLUSTER_VERIFY"
OP_CLUSTER_VERIFY_CONFIG = "OP_CLUSTER_VERIFY_CONFIG"
OP_CLUSTER_VERIFY_DISKS = "OP_CLUSTER_VERIFY_DISKS"
OP_CLUSTER_VERIFY_GROUP = "OP_CLUSTER_VERIFY_GROUP"
OP_EXT_STORAGE_DIAGNOSE = "OP_EXT_STORAGE_DIAGNOSE"
OP_GROUP_ADD = "OP_GROUP_ADD"
OP_GROUP_ASSIGN_NODES = "OP_GROUP_ASSIGN_NODES"
OP_GROUP_EVACUATE = "OP_GROUP_EVACUATE"
OP_GROUP_REMOVE = "OP_GROUP_REMOVE"
OP_GROUP_RENAME = "OP_GROUP_RENAME"
OP_GROUP_SET_PARAMS = "OP_GROUP_SET_PARAMS"
OP_GROUP_VERIFY_DISKS = "OP_GROUP_VERIFY_DISKS"
OP_INSTANCE_ACTIVATE_DISKS = "OP_INSTANCE_ACTIVATE_DISKS"
OP_INSTANCE_CHANGE_GROUP = "OP_INSTANCE_CHANGE_GROUP"
OP_INSTANCE_CONSOLE = "OP_INSTANCE_CONSOLE"
OP_INSTANCE_CREATE = "OP_INSTANCE_CREATE"
OP_INSTANCE_DEACTIVATE_DISKS = "OP_INSTANCE_DEACTIVATE_DISKS"
OP_INSTANCE_FAILOVER = "OP_INSTANCE_FAILOVER"
OP_INSTANCE_GROW_DISK = "OP_INSTANCE_GROW_DISK"
OP_INSTANCE_MIGRATE = "OP_INSTANCE_MIGRATE"
OP_INSTANCE_MOVE = "OP_INSTANCE_MOVE"
OP_INSTANCE_MULTI_ALLOC = "OP_INSTANCE_MULTI_ALLOC"
OP_INSTANCE_QUERY_DATA = "OP_INSTANCE_QUERY_DATA"
OP_INSTANCE_REBOOT = "OP_INSTANCE_REBOOT"
OP_INSTANCE_RECREATE_DISKS = "OP_INSTANCE_RECREATE_DISKS"
OP_INSTANCE_REINSTALL = "OP_INSTANCE_REINSTALL"
OP_INSTANCE_REMOVE = "OP_INSTANCE_REMOVE"
OP_INSTANCE_RENAME = "OP_INSTANCE_RENAME"
OP_INSTANCE_REPLACE_DISKS = "OP_INSTANCE_REPLACE_DISKS"
OP_INSTANCE_SET_PARAMS = "OP_INSTANCE_SET_PARAMS"
OP_INSTANCE_SHUTDOWN = "OP_INSTANCE_SHUTDOWN"
OP_INSTANCE_STARTUP = "OP_INSTANCE_STARTUP"
OP_NETWORK_ADD = "OP_NETWORK_ADD"
OP_NETWORK_CONNECT = "OP_NETWORK_CONNECT"
OP_NETWORK_DISCONNECT = "OP_NETWORK_DISCONNECT"
OP_NETWORK_REMOVE = "OP_NETWORK_REMOVE"
OP_NETWORK_SET_PARAMS = "OP_NETWORK_SET_PARAMS"
OP_NODE_ADD = "OP_NODE_ADD"
OP_NODE_EVACUATE = "OP_NODE_EVACUATE"
OP_NODE_HA_FENCE = "OP_NODE_HA_FENCE"
OP_NODE_HA_REPORT = "OP_NODE_HA_REPORT"
OP_NODE_MIGRATE = "OP_NODE_MIGRATE"
OP_NODE_MODIFY_STORAGE = "OP_NODE_MODIFY_STORAGE"
OP_NODE_POWERCYCLE = "OP_NODE_POWERCYCLE"
OP_NODE_QUERYVOLS = "OP_NODE_QUERYVOLS"
OP_NODE_QUERY_STORAGE = "OP_NODE_QUERY_STORAGE"
OP_NODE_REMOVE = "OP_NODE_REMOVE"
OP_NODE_SET_PARAMS = "OP_NODE_SET_PARAMS"
OP_OOB_COMMAND = "OP_OOB_COMMAND"
OP_OS_DIAGNOSE = "OP_OS_DIAGNOSE"
OP_OS_IMAGE_ADD = "OP_OS_IMAGE_ADD"
OP_OS_IMAGE_LIST = "OP_OS_IMAGE_LIST"
OP_OS_IMAGE_REMOVE = "OP_OS_IMAGE_REMOVE"
OP_QUERY = "OP_QUERY"
OP_QUERY_FIELDS = "OP_QUERY_FIELDS"
OP_REPAIR_NODE_STORAGE = "OP_REPAIR_NODE_STORAGE"
OP_TAGS_DEL = "OP_TAGS_DEL"
OP_TAGS_GET = "OP_TAGS_GET"
OP_TAGS_SEARCH = "OP_TAGS_SEARCH"
OP_TAGS_SET = "OP_TAGS_SET"
OP_TEST_ALLOCATOR = "OP_TEST_ALLOCATOR"
OP_TEST_DELAY = "OP_TEST_DELAY"
OP_TEST_JQUEUE = "OP_TEST_JQUEUE"
OP_TEST_OS_PARAMS = "OP_TEST_OS_PARAMS"
OP_IDS = frozenset({OP_BACKUP_EXPORT, OP_BACKUP_PREPARE, OP_BACKUP_REMOVE,
    OP_CLUSTER_ACTIVATE_MASTER_IP, OP_CLUSTER_DEACTIVATE_MASTER_IP, OP_CLUSTER_DESTROY,
    OP_CLUSTER_POST_INIT, OP_CLUSTER_QUERY, OP_CLUSTER_REDIST_CONF, OP_CLUSTER_RENAME,
    OP_CLUSTER_RENEW_CRYPTO, OP_CLUSTER_REPAIR_DISK_SIZES, OP_CLUSTER_SET_PARAMS, OP_CLUSTER_VERIFY,
    OP_CLUSTER_VERIFY_CONFIG, OP_CLUSTER_VERIFY_DISKS, OP_CLUSTER_VERIFY_GROUP,
    OP_EXT_STORAGE_DIAGNOSE, OP_GROUP_ADD, OP_GROUP_ASSIGN_NODES, OP_GROUP_EVACUATE,
    OP_GROUP_REMOVE, OP_GROUP_RENAME, OP_GROUP_SET_PARAMS, OP_GROUP_VERIFY_DISKS,
    OP_INSTANCE_ACTIVATE_DISKS, OP_INSTANCE_CHANGE_GROUP, OP_INSTANCE_CONSOLE, OP_INSTANCE_CREATE,
    OP_INSTANCE_DEACTIVATE_DISKS, OP_INSTANCE_FAILOVER, OP_INSTANCE_GROW_DISK, OP_INSTANCE_MIGRATE,
    OP_INSTANCE_MOVE, OP_INSTANCE_MULTI_ALLOC, OP_INSTANCE_QUERY_DATA, OP_INSTANCE_REBOOT,
    OP_INSTANCE_RECREATE_DISKS, OP_INSTANCE_REINSTALL, OP_INSTANCE_REMOVE, OP_INSTANCE_RENAME,
    OP_INSTANCE_REPLACE_DISKS, OP_INSTANCE_SET_PARAMS, OP_INSTANCE_SHUTDOWN, OP_INSTANCE_STARTUP,
    OP_NETWORK_ADD, OP_NETWORK_CONNECT, OP_NETWORK_DISCONNECT, OP_NETWORK_REMOVE,
    OP_NETWORK_SET_PARAMS, OP_NODE_ADD, OP_NODE_EVACUATE, OP_NODE_HA_FENCE, OP_NODE_HA_REPORT,
    OP_NODE_MIGRATE, OP_NODE_MODIFY_STORAGE, OP_NODE_POWERCYCLE, OP_NODE_QUERYVOLS,
    OP_NODE_QUERY_STORAGE, OP_NODE_REMOVE, OP_NODE_SET_PARAMS, OP_OOB_COMMAND, OP_OS_DIAGNOSE,
    OP_OS_IMAGE_ADD, OP_OS_IMAGE_LIST, OP_OS_IMAGE_REMOVE, OP_QUERY, OP_QUERY_FIELDS,
    OP_REPAIR_NODE_STORAGE, OP_TAGS_DEL, OP_TAGS_GET, OP_TAGS_SEARCH, OP_TAGS_SET,
    OP_TEST_ALLOCATOR, OP_TEST_DELAY, OP_TEST_JQUEUE, OP_TEST_OS_PARAMS})


if TYPE_CHECKING:
    class Envelope(TypedDict, total=False):
        """The fields every opcode has (``OpCode``'s); any may be left out."""

        dry_run: bool | None
        debug_level: int | None
        priority: int
        depends: list[Any] | None
        comment: str | None
        reason: list[Any]


#: the keywords ``**envelope`` takes (``_op`` refuses any other)
_ENVELOPE_KEYS = frozenset({"dry_run", "debug_level", "priority", "depends", "comment", "reason"})


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


def repair_node_storage(node_name: str, storage_type: str, name: str, *,
        node_uuid: str | None = NOT_SENT, ignore_consistency: bool = NOT_SENT,
        **envelope: Unpack[Envelope]) -> dict[str, Any]:
    """Repair one storage unit (Ganeti: fix the consistency of an LVM volume group)."""
    return _op(OP_REPAIR_NODE_STORAGE, locals())


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
