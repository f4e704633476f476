"""RAPI rows of node groups: list, creation, one, removal, rename, changes,
node assignment, evacuation and group tags (pure)."""

from __future__ import annotations

from ganeti import constants
from ganeti.opcodes import wire
from ganeti.rapi.openapi import BULK, LINKS, OBJ, PLAN, STR, STRS, Doc, opbody
from ganeti.rapi.resources.base import (G_FIELDS, Route, listing, one, op_row, relocation,
                                        tags_routes)

__all__ = ["ROUTES"]

_GROUP = "/2/groups/{group}"
_GROUP_ARG = {"group_name": "group"}

ROUTES: list[Route] = [
    Route("/2/groups", "GET", read=lambda c: listing(c, constants.QR_GROUP, "/2/groups",
                                                     G_FIELDS, key="name"),
          doc=Doc("Node groups", (BULK,), result=LINKS)),
    op_row("/2/groups", "POST", wire.OP_GROUP_ADD, Doc("Add a node group", body=opbody(
        wire.OP_GROUP_ADD, name={**STR, "description": "alias of group_name"})),
           aliases={"name": "group_name"}),
    Route(_GROUP, "GET", read=lambda c: one(c, constants.QR_GROUP, c.args["group"], G_FIELDS),
          doc=Doc("One node group", result=OBJ)),
    Route(_GROUP, "DELETE", build=lambda c: [wire.group_remove(group_name=c.args["group"])],
          opcode=wire.OP_GROUP_REMOVE, doc=Doc("Remove a node group")),
    op_row(_GROUP + "/rename", "PUT", wire.OP_GROUP_RENAME, Doc(
        "Rename a node group", body=opbody(wire.OP_GROUP_RENAME, ["new_name"], new_name=STR)),
           args=_GROUP_ARG),
    # the group's own (unfilled) dicts as GET returns them are accepted back, as in Ganeti
    op_row(_GROUP + "/modify", "PUT", wire.OP_GROUP_SET_PARAMS, Doc(
        "Change a node group's allocation policy, parameters and instance policy"
        " (doc/ipolicy.md); ``custom_ndparams``, ``custom_ipolicy`` and"
        " ``custom_diskparams`` stand for ``ndparams``, ``ipolicy`` and ``diskparams``",
        body=opbody(wire.OP_GROUP_SET_PARAMS)), args=_GROUP_ARG,
           aliases={"custom_ndparams": "ndparams", "custom_ipolicy": "ipolicy",
                    "custom_diskparams": "diskparams"}),
    op_row(_GROUP + "/assign-nodes", "PUT", wire.OP_GROUP_ASSIGN_NODES, Doc(
        "Move nodes into a group", body=opbody(wire.OP_GROUP_ASSIGN_NODES, ["nodes"],
                                               nodes=STRS)), args=_GROUP_ARG),
    relocation(_GROUP + "/evacuate", "PUT", wire.OP_GROUP_EVACUATE, "group_name", "group", Doc(
        "Move every instance of a group into other groups", (PLAN,),
        body=opbody(wire.OP_GROUP_EVACUATE, target_groups=STRS, iallocator=STR))),
    *tags_routes(_GROUP + "/tags", constants.TAG_NODEGROUP, "group", "node group"),
]
