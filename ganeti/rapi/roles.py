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
(:func:`opcode_role`) and its parameters (:data:`CONDITIONAL_OPCODES`): a
node change is an operator's when it sets ``drained`` and nothing else; a
start, stop, reboot, migration or failover when it overrides no check
(no true ``ignore_*`` flag, no ``admin_state_source``); a tag change when it
adds or removes no ``owner:`` tag.  Any other is an admin's.  An opcode not
named in :data:`OPERATOR_OPCODES` or :data:`CONDITIONAL_OPCODES` (a new
row's included) needs ``admin``: a new row needs no entry here to be safe.

The users file keeps Ganeti's options: ``read`` (or no option) is
``readonly``, ``write`` is ``admin`` (doc/rapi.md, "Roles").
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ganeti.opcodes import wire

__all__ = ["Role", "parse_role", "role_from_options", "OPERATOR_OPCODES",
           "CONDITIONAL_OPCODES", "OWNER_TAG_PREFIX", "describe", "opcode_role", "row_role", "RowLike", "refusal"]


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
    wire.OP_INSTANCE_CONSOLE, wire.OP_NODE_QUERY_STORAGE, wire.OP_INSTANCE_QUERY_DATA,
})

#: the tag prefix naming an instance's owner (doc/rapi.md, "Roles")
OWNER_TAG_PREFIX = "owner:"
#: parameters that change nothing by themselves
_NEUTRAL = frozenset({"OP_ID", "node_name", "node_uuid", "force", "auto_promote", "dry_run",
                      "reason", "priority", "comment", "depends", "debug_level"})


def _drain_only(op: Mapping[str, Any]) -> bool:
    """A node change that sets ``drained`` (either way) and nothing else."""
    changed = {k for k, v in op.items() if k not in _NEUTRAL and v is not None}
    return changed == {"drained"}


def _no_override(op: Mapping[str, Any]) -> bool:
    """A lifecycle action that overrides no check: no true ``ignore_*`` flag (consistency,
    ipolicy, hypervisor versions, offline nodes, secondaries) and no ``admin_state_source``."""
    return (not any(v for k, v in op.items() if k.startswith("ignore_"))
            and op.get("admin_state_source") is None)


def _no_owner_tag(op: Mapping[str, Any]) -> bool:
    """A tag change that adds or removes no ``owner:`` tag (they give instances away)."""
    return not any(str(t).startswith(OWNER_TAG_PREFIX) for t in op.get("tags") or [])


#: opcodes an operator may submit with some parameters only (the test on the opcode)
CONDITIONAL_OPCODES: Mapping[str, Callable[[Mapping[str, Any]], bool]] = {
    wire.OP_NODE_SET_PARAMS: _drain_only,
    wire.OP_INSTANCE_STARTUP: _no_override, wire.OP_INSTANCE_SHUTDOWN: _no_override,
    wire.OP_INSTANCE_REBOOT: _no_override, wire.OP_INSTANCE_MIGRATE: _no_override,
    wire.OP_INSTANCE_FAILOVER: _no_override, wire.OP_NODE_MIGRATE: _no_override,
    wire.OP_TAGS_SET: _no_owner_tag, wire.OP_TAGS_DEL: _no_owner_tag,
}


#: why a conditional opcode needs admin (for the 403's explanation)
_CONDITIONS: Mapping[Callable[[Mapping[str, Any]], bool], str] = {
    _drain_only: "an operator's only when it sets drained and nothing else",
    _no_override: "an operator's only without ignore_* overrides or admin_state_source",
    _no_owner_tag: f"an operator's only without '{OWNER_TAG_PREFIX}' tags",
}


def describe(op: Mapping[str, Any]) -> str:
    """``op``'s id, and for a conditional opcode the condition an operator's must meet."""
    op_id = str(op.get("OP_ID"))
    check = CONDITIONAL_OPCODES.get(op_id)
    return op_id if check is None else f"{op_id} ({_CONDITIONS[check]})"


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
