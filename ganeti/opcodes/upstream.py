"""Ganeti 3.0's opcode parameters that we accept only at their default value.

Upstream's clients (its ``gnt-*`` commands, ``ganeti.luxi``, burnin) send
parameters we do not implement yet, often filled with their default.
:data:`ACCEPTED_AT_DEFAULT` lists, per ``OP_ID``, each such parameter with
Ganeti 3.0's default (facts read from Ganeti 3.0.2's opcode definitions).
:func:`ganeti.opcodes.base.build` drops such a parameter when it carries
that default and refuses any other value with a ``wrong_input`` error
naming it: nothing is silently ignored.  When a parameter becomes
implemented (a field of the opcode class), its row here is removed; the
table in doc/compat.md ("Opcode parameters") is generated from this one and
checked by test/opcodes/test_upstream_params.py.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors

__all__ = ["ACCEPTED_AT_DEFAULT", "NULL_IS_DEFAULT", "NAMED_ONLY", "is_default",
           "drop_defaults"]

#: Ganeti 3.0's opcodes we do not implement but name: the iallocator answers
#: and relocation plans carry them (doc/protocols/iallocator.md), burnin
#: sends them (doc/burnin.md).  ``OP_ID`` -> {parameter: (annotation,
#: required)}, the parameters we send (facts from Ganeti 3.0.2's opcode
#: definitions); :mod:`ganeti.opcodes.wire` has a constant and a function
#: for each, the envelope parameters added.
NAMED_ONLY: dict[str, dict[str, tuple[str, bool]]] = {}

#: OP_ID -> {upstream parameter not implemented here: Ganeti 3.0's default}
ACCEPTED_AT_DEFAULT: dict[str, dict[str, Any]] = {
    "OP_CLUSTER_SET_PARAMS": {'disk_state': None, 'hv_state': None,
        'osparams_private_cluster': None},
    "OP_GROUP_ASSIGN_NODES": {'node_uuids': None},
    "OP_INSTANCE_ACTIVATE_DISKS": {'instance_uuid': None},
    "OP_INSTANCE_CHANGE_GROUP": {'instance_uuid': None},
    "OP_INSTANCE_CONSOLE": {'instance_uuid': None},
    "OP_INSTANCE_CREATE": {'commit': False, 'forthcoming': False,
        'helper_shutdown_timeout': None, 'helper_startup_timeout': None,
        'pnode_uuid': None, 'snode_uuid': None},
    "OP_INSTANCE_DEACTIVATE_DISKS": {'instance_uuid': None},
    "OP_INSTANCE_REPLACE_DISKS": {'instance_uuid': None, 'remote_node_uuid': None},
    "OP_INSTANCE_RECREATE_DISKS": {'instance_uuid': None, 'node_uuids': None},
    "OP_INSTANCE_FAILOVER": {'instance_uuid': None, 'target_node_uuid': None},
    "OP_INSTANCE_GROW_DISK": {'instance_uuid': None},
    "OP_INSTANCE_MIGRATE": {'instance_uuid': None, 'target_node_uuid': None},
    "OP_INSTANCE_MOVE": {'instance_uuid': None, 'target_node_uuid': None},
    "OP_INSTANCE_REBOOT": {'instance_uuid': None},
    "OP_INSTANCE_REINSTALL": {'instance_uuid': None},
    "OP_INSTANCE_REMOVE": {'instance_uuid': None},
    "OP_INSTANCE_RENAME": {'instance_uuid': None},
    "OP_INSTANCE_SET_PARAMS": {'ext_params': {},
        'file_driver': None, 'file_storage_dir': None,
        'instance_uuid': None, 'pnode_uuid': None},
    "OP_INSTANCE_SHUTDOWN": {'instance_uuid': None},
    "OP_INSTANCE_STARTUP": {'instance_uuid': None, 'shutdown_timeout': 120},
    "OP_NODE_EVACUATE": {'remote_node_uuid': None},
    "OP_NODE_MIGRATE": {'target_node_uuid': None},
    "OP_NODE_SET_PARAMS": {'disk_state': None, 'hv_state': None},
    "OP_TEST_ALLOCATOR": {'count': 1},
}

#: OP_ID -> parameters we implement without null whose Ganeti 3.0 default is
#: null (upstream's "not given"): a null value there means our default
#: (burnin sends ``osparams_private=None``)
NULL_IS_DEFAULT: dict[str, frozenset[str]] = {
    "OP_GROUP_EVACUATE": frozenset({"target_groups"}),
    "OP_INSTANCE_CHANGE_GROUP": frozenset({"target_groups"}),
    "OP_INSTANCE_CREATE": frozenset({"mode", "osparams_private", "disks", "nics", "no_install"}),
    "OP_INSTANCE_REBOOT": frozenset({"reboot_type"}),
    "OP_NODE_EVACUATE": frozenset({"mode", "ignore_soft_errors"}),
    "OP_NODE_MODIFY_STORAGE": frozenset({"changes"}),
    "OP_TEST_ALLOCATOR": frozenset({"direction", "name", "memory", "vcpus", "disks", "nics", "os",
                                    "disk_template", "instances", "evac_mode",
                                    "target_groups"}),
}


def is_default(value: Any, default: Any) -> bool:
    """Whether ``value`` is ``default`` (same type too: ``0`` is not ``False``).

    For a parameter whose default is None an empty dict or list also counts
    (upstream's CLI sends ``osparams_secret={}`` when no secret is given).
    """
    if default is None:
        return value is None or value == {} or value == []
    return type(value) is type(default) and value == default


def drop_defaults(op_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the accepted-at-default parameters of ``op_id``, and
    without the nulls of :data:`NULL_IS_DEFAULT` (so our defaults apply).

    Raises :class:`errors.ParameterError` (``wrong_input``) naming the first
    such parameter whose value is not Ganeti 3.0's default.
    """
    nulls = NULL_IS_DEFAULT.get(op_id, frozenset())
    table = ACCEPTED_AT_DEFAULT.get(op_id)
    if not table and not nulls:
        return data
    table = table or {}
    result = {}
    for name, value in data.items():
        if name in nulls and value is None:
            continue          # upstream's "not given": our default applies
        if name not in table:
            result[name] = value
        elif not is_default(value, table[name]):
            raise errors.ParameterError(
                f"{op_id}: parameter '{name}' is not supported yet; only its default"
                f" {table[name]!r} is accepted, got {value!r}", errors.ECODE_INVAL)
    return result
