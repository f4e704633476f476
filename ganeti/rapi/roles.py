"""RAPI roles: who may do what, derived from the opcodes (pure).

Three roles, each allowing what the one below allows:

* ``readonly``: the reads;
* ``operator``: the lifecycle actions (start, stop, reboot, migrate,
  failover, drain and undrain of a node, tags, the console, cancelling and
  waiting for jobs), not creating, removing or changing instances, nodes,
  groups, networks or the cluster;
* ``admin``: everything.

The role a request needs is decided twice.  Before its body is read, from
its row (:func:`row_role`): a read needs ``readonly``; a write needs the
smallest role that could run the row's opcodes (a row without an opcode
states its ``role``).  After the row built its opcodes, from each opcode
(:func:`opcode_role`): a node change that only drains or undrains is an
operator's, any other an admin's.  An opcode not named in
:data:`OPERATOR_OPCODES` (a new row's included) needs ``admin``: a new row
needs no entry here to be safe.

The users file keeps Ganeti's options: ``read`` (or no option) is
``readonly``, ``write`` is ``admin`` (doc/rapi.md, "Roles").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ganeti.opcodes import wire

__all__ = ["Role", "parse_role", "role_from_options", "OPERATOR_OPCODES",
           "CONDITIONAL_OPCODES", "opcode_role", "row_role", "RowLike", "refusal"]


class Role(enum.IntEnum):
    """A user's role; a larger value allows more."""

    READONLY = 1
    OPERATOR = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


_BY_NAME = {r.label: r for r in Role}
#: users-file options naming a role (Ganeti's ``read``/``write`` included)
OPTION_ROLES: Mapping[str, Role] = {**_BY_NAME, "read": Role.READONLY, "write": Role.ADMIN}


def parse_role(text: str) -> Role | None:
    """The role named ``text`` (``readonly``/``operator``/``admin``), or None."""
    return _BY_NAME.get(text.strip().lower())


def role_from_options(options: Iterable[str]) -> Role:
    """A users-file entry's role: the largest its options name, ``readonly`` without any."""
    return max((OPTION_ROLES[o] for o in options if o in OPTION_ROLES), default=Role.READONLY)


#: opcodes an operator may submit whatever their parameters
OPERATOR_OPCODES = frozenset({
    wire.OP_INSTANCE_STARTUP, wire.OP_INSTANCE_SHUTDOWN, wire.OP_INSTANCE_REBOOT,
    wire.OP_INSTANCE_MIGRATE, wire.OP_INSTANCE_FAILOVER, wire.OP_NODE_MIGRATE,
    wire.OP_TAGS_SET, wire.OP_TAGS_DEL, wire.OP_INSTANCE_CONSOLE,
    wire.OP_NODE_QUERY_STORAGE, wire.OP_INSTANCE_QUERY_DATA,
})

#: node flags a drain or undrain sets (drained either way, the others only to False)
_DRAIN_FLAGS = frozenset({"drained", "master_candidate", "offline"})
#: parameters that change nothing by themselves
_NEUTRAL = frozenset({"OP_ID", "node_name", "node_uuid", "force", "auto_promote", "dry_run",
                      "reason", "priority", "comment", "depends", "debug_level"})


def _drain_only(op: Mapping[str, Any]) -> bool:
    for key, value in op.items():
        if key in _NEUTRAL or value is None:
            continue
        if key not in _DRAIN_FLAGS or (key != "drained" and value is not False):
            return False
    return True


#: opcodes an operator may submit with some parameters only (the test on the opcode)
CONDITIONAL_OPCODES: Mapping[str, Any] = {wire.OP_NODE_SET_PARAMS: _drain_only}


def opcode_role(op: Mapping[str, Any]) -> Role:
    """The role submitting ``op`` (an opcode dict) needs."""
    op_id = op.get("OP_ID")
    if op_id in OPERATOR_OPCODES:
        return Role.OPERATOR
    check = CONDITIONAL_OPCODES.get(str(op_id))
    if check is not None and check(op):
        return Role.OPERATOR
    return Role.ADMIN


class RowLike(Protocol):
    """What :func:`row_role` needs of a :class:`ganeti.rapi.resources.Route`."""

    @property
    def role(self) -> str: ...
    @property
    def needs_write(self) -> bool: ...
    @property
    def opcodes(self) -> frozenset[str]: ...


def row_role(route: RowLike) -> Role:
    """The smallest role that may use ``route`` (before its opcodes are built).

    The row's own ``role`` when it states one; ``readonly`` for a read;
    for a write the largest of what its opcodes may need (an opcode of
    :data:`CONDITIONAL_OPCODES` counts as an operator's here, its
    parameters are judged by :func:`opcode_role` once built); ``admin`` for
    a write without opcodes.
    """
    if route.role:
        role = parse_role(route.role)
        if role is None:
            raise ValueError(f"unknown role {route.role!r}")
        return role
    if not route.needs_write:
        return Role.READONLY
    if not route.opcodes:
        return Role.ADMIN
    return max(Role.OPERATOR if op in OPERATOR_OPCODES or op in CONDITIONAL_OPCODES
               else Role.ADMIN for op in route.opcodes)


def refusal(user: str | None, have: Role, need: Role, what: str) -> str:
    """The explanation of a 403 (no secrets: the user, the roles and the action)."""
    return (f"Permission denied: user '{user}' has role {have.label}, {what} needs"
            f" {need.label}")
