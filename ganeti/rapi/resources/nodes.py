"""RAPI rows of nodes: list, one, role, changes, power cycle, storage units,
evacuation, migration and node tags (pure)."""

from __future__ import annotations

from typing import Any

from ganeti import constants
from ganeti.opcodes import wire
from ganeti.rapi.openapi import BOOL, BULK, FORCE, LINKS, OBJ, PLAN, STR, Doc, Param, opbody
from ganeti.rapi.opinput import ANY_JSON
from ganeti.rapi.resources.base import (N_ALIASES, N_FIELDS, Ctx, Route, bad, listing, one,
                                        op_row, relocation, tags_routes)

__all__ = ["ROUTES"]

_ROLE_NAMES = {"M": "master", "C": "master-candidate", "R": "regular", "D": "drained",
               "O": "offline"}


def _node_get(ctx: Ctx) -> dict[str, Any]:
    row = one(ctx, constants.QR_NODE, ctx.args["node"], N_FIELDS)
    for name, alias in N_ALIASES.items():
        row[alias] = row[name]
    return row


def _node_role(ctx: Ctx) -> str:
    role = one(ctx, constants.QR_NODE, ctx.args["node"], ["name", "role"])["role"]
    return _ROLE_NAMES.get(role, role)


_ROLE_FLAGS: dict[str, dict[str, Any]] = {
    "master-candidate": dict(master_candidate=True, offline=False, drained=False),
    "regular": dict(master_candidate=False, offline=False, drained=False),
    "drained": dict(master_candidate=False, offline=False, drained=True),
    "offline": dict(master_candidate=False, offline=True, drained=False),
}


def _set_node_role(ctx: Ctx) -> list[dict[str, Any]]:
    role = ctx.body
    if not isinstance(role, str):
        raise bad("The body must be a JSON string naming the role")
    if role == "master":
        raise bad("Cannot set the role to master (use a master failover)")
    flags = _ROLE_FLAGS.get(role)
    if flags is None:
        raise bad(f"Unknown node role '{role}'")
    # only the flags that change: a drain or undrain is then ``drained`` alone, an
    # operator's (ganeti.rapi.roles); a drain demotes a candidate by itself, an undrain
    # lets the node back into the candidate pool when it has room (gnt-node modify -D)
    node = one(ctx, constants.QR_NODE, ctx.args["node"],
               ["name", "master_candidate", "offline", "drained"])
    changes = {k: v for k, v in flags.items() if node.get(k) is not v}
    if flags["drained"]:
        changes.pop("master_candidate", None)
    if not changes:
        changes = {"drained": flags["drained"]}
    return [wire.node_set_params(node_name=node["name"], force=ctx.qbool("force"),
                                 auto_promote=ctx.qbool("auto-promote"), **changes)]


def _storage_type(ctx: Ctx) -> str | None:
    """The ``storage_type`` parameter; empty (Ganeti's client sends None so) is none."""
    return ctx.qstr("storage_type") or None


def _node_storage(ctx: Ctx) -> list[dict[str, Any]]:
    fields = ctx.qstr("output_fields")
    if not fields:
        raise bad("Missing the required 'output_fields' parameter")
    return [wire.node_query_storage(nodes=[ctx.args["node"]], storage_type=_storage_type(ctx),
                                    output_fields=fields.split(","))]


def _storage_unit(ctx: Ctx) -> tuple[str, str]:
    """The storage unit's ``(storage_type, name)``, both required."""
    name = ctx.qstr("name")
    if not name:
        raise bad("Missing the required 'name' parameter")
    stype = _storage_type(ctx)
    if not stype:
        raise bad("Missing the required 'storage_type' parameter")
    return stype, name


def _node_storage_modify(ctx: Ctx) -> list[dict[str, Any]]:
    stype, name = _storage_unit(ctx)
    changes = {}
    if ctx.qstr(constants.SF_ALLOCATABLE) is not None:
        changes[constants.SF_ALLOCATABLE] = ctx.qbool(constants.SF_ALLOCATABLE)
    return [wire.node_modify_storage(node_name=ctx.args["node"], storage_type=stype, name=name,
                                     changes=changes)]


def _node_storage_repair(ctx: Ctx) -> list[dict[str, Any]]:
    stype, name = _storage_unit(ctx)
    return [wire.repair_node_storage(node_name=ctx.args["node"], storage_type=stype, name=name,
                                     ignore_consistency=ctx.qbool("ignore_consistency"))]


_NODE = "/2/nodes/{node}"
_NODE_ARG = {"node_name": "node"}
_STORAGE_TYPE = Param("storage_type", "str", "file or sharedfile (Ganeti's other storage"
                                             " types are refused)")
_STORAGE_NAME = Param("name", "str", "the storage unit (for file storage: its directory)")

ROUTES: list[Route] = [
    Route("/2/nodes", "GET", read=lambda c: listing(c, constants.QR_NODE, "/2/nodes",
                                                    N_FIELDS),
          doc=Doc("Nodes", (BULK,), result=LINKS)),
    Route(_NODE, "GET", read=_node_get, doc=Doc("One node", result=OBJ)),
    Route(_NODE + "/role", "GET", read=_node_role, doc=Doc("A node's role", result={
        "type": "string", "enum": ["master", "master-candidate", "regular", "drained",
                                   "offline"]})),
    Route(_NODE + "/role", "PUT", build=_set_node_role, opcode=wire.OP_NODE_SET_PARAMS,
          body=ANY_JSON,     # a bare JSON string, checked by the row
          doc=Doc("Set a node's role", (FORCE,), body={
              "type": "string", "enum": ["master-candidate", "regular", "drained",
                                         "offline"]})),
    op_row(_NODE + "/modify", "POST", wire.OP_NODE_SET_PARAMS,
           Doc("Change node parameters", body=opbody(wire.OP_NODE_SET_PARAMS)),
           args=_NODE_ARG),
    Route(_NODE + "/powercycle", "POST",
          build=lambda c: [wire.node_powercycle(node_name=c.args["node"], force=c.qbool("force"))], opcode=wire.OP_NODE_POWERCYCLE,
          doc=Doc("Power-cycle a node", (FORCE,))),
    Route(_NODE + "/storage", "GET", build=_node_storage, opcode=wire.OP_NODE_QUERY_STORAGE,
          access="write",      # the LU locks nodes: write-only, as in Ganeti
          doc=Doc("Storage units of a node (a job; its result: one row of values per unit)",
                  (_STORAGE_TYPE, Param("output_fields", "str", "comma-separated: node, type,"
                                        " name, size, used, free, allocatable")))),
    Route(_NODE + "/storage/modify", "PUT", build=_node_storage_modify,
          opcode=wire.OP_NODE_MODIFY_STORAGE,
          doc=Doc("Change a storage unit", (_STORAGE_TYPE, _STORAGE_NAME, Param(
              "allocatable", description="new disks may go there")))),
    Route(_NODE + "/storage/repair", "PUT", build=_node_storage_repair,
          opcode=wire.OP_REPAIR_NODE_STORAGE,
          doc=Doc("Repair a storage unit", (_STORAGE_TYPE, _STORAGE_NAME, Param(
              "ignore_consistency", description="ignore the consistency of the disks")))),
    relocation(_NODE + "/evacuate", "POST", wire.OP_NODE_EVACUATE, "node_name", "node", Doc(
        "Move a node's instances elsewhere (one job each; the result lists them)", (PLAN,),
        body=opbody(wire.OP_NODE_EVACUATE, mode={**STR, "enum": list(constants.NODE_EVAC_MODES)},
                    remote_node=STR, iallocator=STR, early_release=BOOL, with_disks=BOOL))),
    op_row(_NODE + "/migrate", "POST", wire.OP_NODE_MIGRATE, Doc(
        "Migrate every primary instance off a node", body=opbody(
            wire.OP_NODE_MIGRATE, mode=STR, live=BOOL, target_node=STR, iallocator=STR,
            with_disks=BOOL)), args=_NODE_ARG),
    *tags_routes(_NODE + "/tags", constants.TAG_NODE, "node", "node"),
]
