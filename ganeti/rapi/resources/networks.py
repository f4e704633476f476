"""RAPI rows of networks, ``/2/networks`` (pure; doc/networks.md): list, creation,
one, removal, changes, group connections and network tags, with Ganeti's paths,
bodies and fields."""

from __future__ import annotations

from ganeti import constants
from ganeti.opcodes import wire
from ganeti.rapi.openapi import BULK, LINKS, OBJ, STR, Doc, opbody
from ganeti.rapi.resources.base import Route, listing, one, op_row, tags_routes

__all__ = ["ROUTES", "NET_FIELDS"]

#: the fields of one network in an answer (Ganeti's, in its order)
NET_FIELDS = ["name", "network", "gateway", "network6", "gateway6", "mac_prefix",
              "free_count", "reserved_count", "map", "group_list", "inst_list",
              "external_reservations", "ctime", "mtime", "uuid", "serial_no", "tags"]

_NET = "/2/networks/{network}"
_NET_ARG = {"network_name": "network"}

ROUTES: list[Route] = [
    Route("/2/networks", "GET", read=lambda c: listing(c, constants.QR_NETWORK, "/2/networks",
                                                       NET_FIELDS, key="name"),
          doc=Doc("Networks", (BULK,), result=LINKS)),
    op_row("/2/networks", "POST", wire.OP_NETWORK_ADD, Doc("Add a network", body=opbody(
        wire.OP_NETWORK_ADD, ["network_name", "network"],
        name={**STR, "description": "alias of network_name"})),
           aliases={"name": "network_name"}),
    Route(_NET, "GET", read=lambda c: one(c, constants.QR_NETWORK, c.args["network"],
                                          NET_FIELDS),
          doc=Doc("One network", result=OBJ)),
    Route(_NET, "DELETE", build=lambda c: [wire.network_remove(network_name=c.args["network"])],
          opcode=wire.OP_NETWORK_REMOVE,
          doc=Doc("Remove a network (no node group may be connected to it)")),
    op_row(_NET + "/modify", "PUT", wire.OP_NETWORK_SET_PARAMS, Doc(
        "Change a network's gateways, IPv6 subnet, MAC prefix and external reservations",
        body=opbody(wire.OP_NETWORK_SET_PARAMS)), args=_NET_ARG),
    op_row(_NET + "/connect", "PUT", wire.OP_NETWORK_CONNECT, Doc(
        "Connect a network to a node group with a NIC mode, link and VLAN",
        body=opbody(wire.OP_NETWORK_CONNECT, ["group_name", "network_mode", "network_link"])),
           args=_NET_ARG),
    op_row(_NET + "/disconnect", "PUT", wire.OP_NETWORK_DISCONNECT, Doc(
        "Disconnect a network from a node group", body=opbody(wire.OP_NETWORK_DISCONNECT,
                                                              ["group_name"])),
           args=_NET_ARG),
    *tags_routes(_NET + "/tags", constants.TAG_NETWORK, "network", "network"),
]
