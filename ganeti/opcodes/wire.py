"""Opcodes on the wire: one typed keyword function per opcode, returning its dict.

GENERATED from the opcode classes by ``tools/gen_opwire.py``; do not edit (test/opcodes/
test_wire.py fails when a generated module is stale).  doc/design/contracts.md, "Adding an
opcode".  This module is the face: callers import it (``from ganeti.opcodes import wire``) and
only it; the functions live in the generated parts (``wire_instance.py``, ``wire_node.py``, ``wire_cluster.py``), the shared names in
``wire_base.py``, each part under the module size limit.

``instance_startup("web1", force=True)`` returns ``{"OP_ID": "OP_INSTANCE_STARTUP",
"instance_name": "web1", "force": True}``: a keyword left out is not sent (the master applies
the opcode class's default), a keyword given is sent as given, ``None`` included, unless it is
:data:`NOT_SENT` (``force=opts.force or NOT_SENT``: sent only when true).  :func:`drop_none`
leaves out the ``None`` values instead (a front end's "option not given").  Code that names an
opcode without building one (a table keyed by ``OP_ID``, a check of an answer) uses the
``OP_*`` constants here, never a string: ``test/opcodes/test_no_op_literals.py`` refuses
``"OP_..."`` literals outside ``ganeti/opcodes/``.

Imports nothing but its parts at run time: the ``gnt-*`` commands keep their start-up budget
(doc/cli-startup.md).
"""

from __future__ import annotations

from ganeti.opcodes.wire_base import (NOT_SENT, OP_IDS, drop_none, OP_BACKUP_EXPORT,
    OP_BACKUP_PREPARE, OP_BACKUP_REMOVE, OP_CLUSTER_ACTIVATE_MASTER_IP,
    OP_CLUSTER_DEACTIVATE_MASTER_IP, OP_CLUSTER_DESTROY, OP_CLUSTER_POST_INIT, OP_CLUSTER_QUERY,
    OP_CLUSTER_REDIST_CONF, OP_CLUSTER_RENAME, OP_CLUSTER_RENEW_CRYPTO,
    OP_CLUSTER_REPAIR_DISK_SIZES, OP_CLUSTER_SET_PARAMS, OP_CLUSTER_VERIFY,
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
    OP_TEST_ALLOCATOR, OP_TEST_DELAY, OP_TEST_JQUEUE, OP_TEST_OS_PARAMS)
from ganeti.opcodes.wire_instance import (instance_activate_disks, instance_change_group,
    instance_console, instance_create, instance_deactivate_disks, instance_failover,
    instance_grow_disk, instance_migrate, instance_move, instance_multi_alloc, instance_query_data,
    instance_reboot, instance_recreate_disks, instance_reinstall, instance_remove, instance_rename,
    instance_replace_disks, instance_set_params, instance_shutdown, instance_startup)
from ganeti.opcodes.wire_node import (group_add, group_assign_nodes, group_evacuate, group_remove,
    group_rename, group_set_params, group_verify_disks, network_add, network_connect,
    network_disconnect, network_remove, network_set_params, node_add, node_evacuate, node_ha_fence,
    node_ha_report, node_migrate, node_modify_storage, node_powercycle, node_queryvols,
    node_query_storage, node_remove, node_set_params, oob_command, repair_node_storage)
from ganeti.opcodes.wire_cluster import (backup_export, backup_prepare, backup_remove,
    cluster_activate_master_ip, cluster_deactivate_master_ip, cluster_destroy, cluster_post_init,
    cluster_query, cluster_redist_conf, cluster_rename, cluster_renew_crypto,
    cluster_repair_disk_sizes, cluster_set_params, cluster_verify, cluster_verify_config,
    cluster_verify_disks, cluster_verify_group, ext_storage_diagnose, os_diagnose, os_image_add,
    os_image_list, os_image_remove, query, query_fields, tags_del, tags_get, tags_search, tags_set,
    test_allocator, test_delay, test_jqueue, test_os_params)


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
    "OP_TEST_ALLOCATOR", "OP_TEST_DELAY", "OP_TEST_JQUEUE", "OP_TEST_OS_PARAMS",
    "instance_activate_disks", "instance_change_group", "instance_console", "instance_create",
    "instance_deactivate_disks", "instance_failover", "instance_grow_disk", "instance_migrate",
    "instance_move", "instance_multi_alloc", "instance_query_data", "instance_reboot",
    "instance_recreate_disks", "instance_reinstall", "instance_remove", "instance_rename",
    "instance_replace_disks", "instance_set_params", "instance_shutdown", "instance_startup",
    "group_add", "group_assign_nodes", "group_evacuate", "group_remove", "group_rename",
    "group_set_params", "group_verify_disks", "network_add", "network_connect",
    "network_disconnect", "network_remove", "network_set_params", "node_add", "node_evacuate",
    "node_ha_fence", "node_ha_report", "node_migrate", "node_modify_storage", "node_powercycle",
    "node_queryvols", "node_query_storage", "node_remove", "node_set_params", "oob_command",
    "repair_node_storage", "backup_export", "backup_prepare", "backup_remove",
    "cluster_activate_master_ip", "cluster_deactivate_master_ip", "cluster_destroy",
    "cluster_post_init", "cluster_query", "cluster_redist_conf", "cluster_rename",
    "cluster_renew_crypto", "cluster_repair_disk_sizes", "cluster_set_params", "cluster_verify",
    "cluster_verify_config", "cluster_verify_disks", "cluster_verify_group", "ext_storage_diagnose",
    "os_diagnose", "os_image_add", "os_image_list", "os_image_remove", "query", "query_fields",
    "tags_del", "tags_get", "tags_search", "tags_set", "test_allocator", "test_delay",
    "test_jqueue", "test_os_params"]
