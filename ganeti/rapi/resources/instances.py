"""RAPI rows of instances: list, creation (one or many), one, removal, the
power and disk operations, reinstall, rename, changes, moves, export,
console and instance tags (pure)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from ganeti import constants, errors
from ganeti.opcodes import wire
from ganeti.rapi import consoletokens, uri
from ganeti.rapi.openapi import BOOL, BULK, FORCE, LINKS, OBJ, PLAN, STR, STRS, Doc, Param, opbody
from ganeti.rapi.opinput import Body
from ganeti.rapi.resources.base import (I_FIELDS, Ctx, Route, bad, from_body, listing, one,
                                        op_row, relocation, run_job, tags_routes)

__all__ = ["ROUTES"]

_INST = "/2/instances/{instance}"


#: the body of one instance creation (``POST /2/instances`` and each
#: ``instances`` entry of a multi-allocation): the opcode's parameters, with
#: Ganeti's RAPI names ``name`` and ``os``
_CREATE_ALIASES = {"name": "instance_name", "os": "os_type"}
_CREATE_ENTRY = Body(op_id=wire.OP_INSTANCE_CREATE, aliases=_CREATE_ALIASES)
_CREATE_BODY = Body(op_id=wire.OP_INSTANCE_CREATE, aliases=_CREATE_ALIASES,
                    extra=frozenset({"__version__"}))


def _instance_create(ctx: Ctx) -> list[dict[str, Any]]:
    body = ctx.body_dict()
    version = body.pop("__version__", None)
    if version != 1:
        raise bad("Unsupported instance creation request: expected '__version__': 1")
    return [ctx.spec.opcode(body, {})]


def _multi_alloc(ctx: Ctx) -> list[dict[str, Any]]:
    """Every ``instances`` entry is checked like a creation body (a 400 names the
    entry and its bad keys; an ``OP_ID`` there too)."""
    body = ctx.body_dict()
    entries = body.get("instances")
    if isinstance(entries, list):
        body["instances"] = [_CREATE_ENTRY.rename(e, where=f"'instances[{i}]'")
                             if isinstance(e, dict) else e for i, e in enumerate(entries)]
    return [ctx.spec.opcode(body, {})]


def _inst(ctx: Ctx) -> str:
    return ctx.args["instance"]


#: reinstall body keys beyond upstream's (os, start, osparams): the private
#: and secret OS parameters of OP_INSTANCE_REINSTALL (doc/rapi.md)
_REINSTALL_PRIVATE = ("osparams_private", "osparams_secret")


def _instance_reinstall(ctx: Ctx) -> list[dict[str, Any]]:
    body = ctx.body_dict()
    if body:
        os_name, start, osparams = body.get("os"), body.get("start", True), body.get("osparams")
    else:
        os_name, start, osparams = ctx.qstr("os"), not ctx.qbool("nostartup"), None
    if not isinstance(start, bool):
        raise bad("'start' must be a boolean")
    private = {key: body[key] for key in _REINSTALL_PRIVATE if body.get(key) is not None}
    ops = [wire.instance_shutdown(instance_name=_inst(ctx)),
           wire.instance_reinstall(instance_name=_inst(ctx), os_type=os_name, osparams=osparams,
                                   **private)]
    if start:
        ops.append(wire.instance_startup(instance_name=_inst(ctx), force=False))
    return ops


def _instance_reboot(ctx: Ctx) -> list[dict[str, Any]]:
    return [from_body(ctx, {"instance_name": _inst(ctx),
                             "reboot_type": ctx.qstr("type", constants.REBOOT_HARD),
                             "ignore_secondaries": ctx.qbool("ignore_secondaries")})]


def _instance_startup(ctx: Ctx) -> list[dict[str, Any]]:
    return [wire.instance_startup(instance_name=_inst(ctx), force=ctx.qbool("force"),
                                  no_remember=ctx.qbool("no_remember"))]


def _instance_shutdown(ctx: Ctx) -> list[dict[str, Any]]:
    return [from_body(ctx, {"instance_name": _inst(ctx),
                             "no_remember": ctx.qbool("no_remember")})]


def _with_memory(row: dict[str, Any]) -> dict[str, Any]:
    """Ganeti's clients still read ``beparams["memory"]``: the same as ``maxmem``."""
    beparams = row.get("beparams")
    if isinstance(beparams, dict) and "maxmem" in beparams:
        row["beparams"] = {**beparams, "memory": beparams["maxmem"]}
    return row


def _instance_get(ctx: Ctx) -> dict[str, Any]:
    return _with_memory(one(ctx, constants.QR_INSTANCE, _inst(ctx), I_FIELDS))


def _inst_row(suffix: str, method: str, op_id: str, doc: Doc,
              aliases: dict[str, str] | None = None, **query_flags: str) -> Route:
    """An instance row: the opcode from the body (after ``aliases``), the instance
    from the path, boolean query parameters."""
    return op_row(_INST + suffix, method, op_id, doc, args={"instance_name": "instance"},
                  aliases=aliases, **query_flags)


def _instance_grow_disk(ctx: Ctx) -> list[dict[str, Any]]:
    index = uri.parse_id(ctx.args["disk_index"], "disk index")
    return [from_body(ctx, {"instance_name": _inst(ctx), "disk": index})]


def _replace_disks(ctx: Ctx) -> list[dict[str, Any]]:
    """Ganeti's client sends ``mode``, ``disks`` ("0,1"), ``remote_node`` and
    ``iallocator`` as query parameters; a body may carry them instead."""
    fixed: dict[str, Any] = {"instance_name": _inst(ctx)}
    for name in ("mode", "remote_node", "iallocator"):
        value = ctx.qstr(name)
        if value is not None:
            fixed[name] = value
    text = ctx.qstr("disks")
    if text is not None:
        try:
            fixed["disks"] = [int(i) for i in text.split(",") if i.strip()]
        except ValueError:
            raise errors.HttpError(f"Invalid disks {text!r}: expected indices like 0,1",
                                   400) from None
    if ctx.qstr("early_release") is not None:
        fixed["early_release"] = ctx.qbool("early_release")
    body = dict(ctx.body_dict())
    if isinstance(body.get("disks"), str):
        try:
            body["disks"] = [int(i) for i in body["disks"].split(",") if i.strip()]
        except ValueError:
            raise errors.HttpError(f"Invalid disks {body['disks']!r}: expected indices like"
                                   " 0,1", 400) from None
    fixed.setdefault("mode", body.pop("mode", constants.REPLACE_DISK_AUTO))
    return [ctx.spec.opcode(body, fixed)]


def _instance_console(ctx: Ctx) -> Any:
    """The console dict of a running instance (503 when it is not running).

    Like Ganeti's, a write-only GET; the console description comes from
    the instance's primary node, through an OP_INSTANCE_CONSOLE job whose
    result is the answer.
    """
    row = one(ctx, constants.QR_INSTANCE, _inst(ctx), ["name", "oper_state"])
    if not row["oper_state"]:
        raise errors.HttpError(f"Instance console unavailable: {row['name']} is not running",
                               503)
    return run_job(ctx, [wire.instance_console(instance_name=row["name"])])[0]


def _console_kind(ctx: Ctx) -> str:
    kind = ctx.qstr("kind") or consoletokens.KIND_SERIAL
    if kind not in consoletokens.KINDS:
        raise bad(f"Unknown console kind {kind[:20]!r}: use one of"
                  f" {', '.join(consoletokens.KINDS)}")
    return kind


def _console_token(ctx: Ctx) -> dict[str, Any]:
    """A single-use token opening one console (``kind``: serial, the default, or
    vnc) of a running instance in a browser (doc/rapi.md, "Consoles"); 503
    when it is not running or too many of its consoles are open, 400 when it
    has no console of that kind.  A VNC token's answer carries the VNC
    password when the instance has a ``vnc_password_file`` (read on the
    master; this answer goes only to users who may open the console)."""
    kind = _console_kind(ctx)
    row = one(ctx, constants.QR_INSTANCE, _inst(ctx), ["name", "oper_state", "hvparams"])
    if not row["oper_state"]:
        raise errors.HttpError(f"Instance console unavailable: {row['name']} is not running",
                               503)
    if ctx.console_token is None:
        raise errors.HttpError("This server does not broker consoles", 501)
    hvparams = row["hvparams"] or {}
    password = None
    if kind == consoletokens.KIND_VNC:
        if not hvparams.get("vnc_bind_address"):
            raise bad(f"Instance {row['name']} has no VNC console (no vnc_bind_address)")
        if hvparams.get("vnc_password_file"):
            password = (ctx.console_password(str(hvparams["vnc_password_file"]))
                        if ctx.console_password else None)
            if password is None:
                raise errors.HttpError(
                    f"The VNC password file of {row['name']} cannot be read on the master"
                    " (the master hands out a VNC password only from a file under the"
                    " cluster's configuration directory, e.g."
                    " /etc/ganeti/vnc-cluster-password)", 503)
    token, ttl = ctx.console_token(row["name"], kind)
    path = f"/2/instances/{urllib.parse.quote(row['name'], safe='')}/console/websocket"
    answer: dict[str, Any] = {
        "instance": row["name"], "kind": kind, "token": token, "expires_in": ttl,
        "websocket": path if kind == consoletokens.KIND_SERIAL else f"{path}?kind={kind}"}
    if password is not None:
        answer["password"] = password
    return answer


def _console_websocket(ctx: Ctx) -> consoletokens.ConsoleOpen:
    """The WebSocket to a console (``kind``, serial by default): where the instance
    runs; the server checks the upgrade, spends the token and brokers the console."""
    kind = _console_kind(ctx)
    row = one(ctx, constants.QR_INSTANCE, _inst(ctx), ["name", "pnode", "hypervisor",
                                                        "oper_state"])
    node = one(ctx, constants.QR_NODE, row["pnode"], ["name", "pip"])
    return consoletokens.ConsoleOpen(row["name"], ctx.qstr("token"), node=node["name"],
                                     address=node["pip"], hypervisor=row["hypervisor"],
                                     running=bool(row["oper_state"]), kind=kind)


_REINSTALL_BODY = Body(extra=frozenset({"os", "start", "osparams", *_REINSTALL_PRIVATE}))
_KIND = Param("kind", "str", "the console: serial (the default) or vnc")
_NO_REMEMBER = Param("no_remember", description="do not record the new state")

ROUTES: list[Route] = [
    Route("/2/instances", "GET", read=lambda c: listing(c, constants.QR_INSTANCE,
                                                        "/2/instances", I_FIELDS,
                                                        fix=_with_memory),
          doc=Doc("Instances", (BULK,), result=LINKS)),
    Route("/2/instances", "POST", build=_instance_create, opcode=wire.OP_INSTANCE_CREATE,
          body=_CREATE_BODY, doc=Doc(
              "Create an instance (request version 1)",
              body=opbody(wire.OP_INSTANCE_CREATE, ["__version__"],
                          __version__={"type": "integer", "enum": [1]},
                          name={**STR, "description": "alias of instance_name"},
                          os={**STR, "description": "alias of os_type"},
                          mode=STR, disk_template=STR, disks={"type": "array"},
                          nics={"type": "array"}, pnode=STR, snode=STR))),
    Route("/2/instances-multi-alloc", "POST", build=_multi_alloc,
          opcode=wire.OP_INSTANCE_MULTI_ALLOC, body=Body(op_id=wire.OP_INSTANCE_MULTI_ALLOC),
          doc=Doc("Create many instances placed by one allocator request", body=opbody(
              wire.OP_INSTANCE_MULTI_ALLOC, ["instances"],
              instances={"type": "array", "items": OBJ}, iallocator=STR))),
    Route(_INST, "GET", read=_instance_get, doc=Doc("One instance", result=OBJ)),
    Route(_INST, "DELETE", build=lambda c: [from_body(c, {"instance_name": _inst(c),
                                                          "ignore_failures": False})],
          opcode=wire.OP_INSTANCE_REMOVE,
          body=Body(op_id=wire.OP_INSTANCE_REMOVE,
                    fixed=frozenset({"instance_name", "ignore_failures"})),
          doc=Doc("Remove an instance")),
    Route(_INST + "/info", "GET",
          build=lambda c: [wire.instance_query_data(instances=[_inst(c)], static=c.qbool("static"))], opcode=wire.OP_INSTANCE_QUERY_DATA,
          doc=Doc("Detailed instance information (a job)", (
              Param("static", description="1: configuration only, no live data"),))),
    Route(_INST + "/reboot", "POST", build=_instance_reboot, opcode=wire.OP_INSTANCE_REBOOT,
          body=Body(op_id=wire.OP_INSTANCE_REBOOT,
                    fixed=frozenset({"instance_name", "reboot_type", "ignore_secondaries"})),
          doc=Doc("Reboot an instance", (
              Param("type", "str", "hard, soft or full"),
              Param("ignore_secondaries", description="ignore errors on secondary nodes")),
              body=opbody(wire.OP_INSTANCE_REBOOT))),
    Route(_INST + "/shutdown", "PUT", build=_instance_shutdown, opcode=wire.OP_INSTANCE_SHUTDOWN,
          body=Body(op_id=wire.OP_INSTANCE_SHUTDOWN,
                    fixed=frozenset({"instance_name", "no_remember"})),
          doc=Doc("Shut an instance down", (_NO_REMEMBER,),
                  body=opbody(wire.OP_INSTANCE_SHUTDOWN))),
    Route(_INST + "/startup", "PUT", build=_instance_startup, opcode=wire.OP_INSTANCE_STARTUP,
          doc=Doc("Start an instance", (FORCE, _NO_REMEMBER))),
    Route(_INST + "/reinstall", "POST", build=_instance_reinstall,
          opcode=wire.OP_INSTANCE_REINSTALL, body=_REINSTALL_BODY,
          also=(wire.OP_INSTANCE_SHUTDOWN, wire.OP_INSTANCE_STARTUP),
          doc=Doc("Reinstall an instance (request version 1 in the body, or query parameters)",
                  (Param("os", "str", "the OS (without a body)"),
                   Param("nostartup", description="1: do not start it afterwards (without a"
                                                  " body)")),
                  body={"type": "object", "additionalProperties": False, "properties": {
                      "os": STR, "start": BOOL, "osparams": OBJ}})),
    _inst_row("/activate-disks", "PUT", wire.OP_INSTANCE_ACTIVATE_DISKS, Doc(
        "Activate an instance's disks",
        (Param("ignore_size", description="ignore the recorded disk sizes"),),
        body=opbody(wire.OP_INSTANCE_ACTIVATE_DISKS)), ignore_size="ignore_size"),
    _inst_row("/deactivate-disks", "PUT", wire.OP_INSTANCE_DEACTIVATE_DISKS, Doc(
        "Deactivate an instance's disks", (FORCE,),
        body=opbody(wire.OP_INSTANCE_DEACTIVATE_DISKS)), force="force"),
    _inst_row("/recreate-disks", "POST", wire.OP_INSTANCE_RECREATE_DISKS, Doc(
        "Recreate the missing disk volumes of a stopped instance",
        body=opbody(wire.OP_INSTANCE_RECREATE_DISKS))),
    _inst_row("/rename", "PUT", wire.OP_INSTANCE_RENAME, Doc("Rename an instance", body=opbody(
        wire.OP_INSTANCE_RENAME, ["new_name"], new_name=STR))),
    _inst_row("/modify", "PUT", wire.OP_INSTANCE_SET_PARAMS,
              Doc("Change instance parameters", body=opbody(wire.OP_INSTANCE_SET_PARAMS)),
              {"custom_beparams": "beparams", "custom_hvparams": "hvparams"}),
    _inst_row("/migrate", "PUT", wire.OP_INSTANCE_MIGRATE, Doc(
        "Live-migrate an instance (with_disks: also its local disks)",
        body=opbody(wire.OP_INSTANCE_MIGRATE, with_disks=BOOL))),
    Route(_INST + "/replace-disks", "POST", build=_replace_disks,
          opcode=wire.OP_INSTANCE_REPLACE_DISKS,
          body=Body(op_id=wire.OP_INSTANCE_REPLACE_DISKS, fixed=frozenset({"instance_name"})),
          doc=Doc("Replace the volumes of a drbd instance's disks", (
              Param("mode", "str", "replace_on_primary, replace_on_secondary,"
                                   " replace_new_secondary or replace_auto (default)"),
              Param("disks", "str", "disk indices, comma separated"),
              Param("remote_node", "str", "the new secondary node"),
              Param("iallocator", "str", "the allocator choosing the new secondary"),
              Param("early_release", "bool", "remove the old volumes before the copy and"
                                             " release the node locks while it runs")),
              body=opbody(wire.OP_INSTANCE_REPLACE_DISKS))),
    _inst_row("/failover", "PUT", wire.OP_INSTANCE_FAILOVER, Doc(
        "Fail an instance over", body=opbody(wire.OP_INSTANCE_FAILOVER))),
    Route(_INST + "/prepare-export", "PUT",
          build=lambda c: [wire.backup_prepare(instance_name=_inst(c),
                                               mode=c.qstr("mode") or constants.EXPORT_MODE_LOCAL)],
          opcode=wire.OP_BACKUP_PREPARE,
          doc=Doc("Prepare an export of an instance",
                  (Param("mode", description="export mode (only local)"),),
                  body=opbody(wire.OP_BACKUP_PREPARE))),
    _inst_row("/export", "PUT", wire.OP_BACKUP_EXPORT, Doc(
        "Export an instance to a node", body=opbody(
            wire.OP_BACKUP_EXPORT, destination={
                "description": "alias of target_node: a node name (mode local) or one signed"
                               " [host, port, magic, hmac, salt] per disk (mode remote:"
                               " checked and tried, then refused; doc/compat.md)"})),
              {"destination": "target_node"}),
    Route(_INST + "/disk/{disk_index}/grow", "POST", build=_instance_grow_disk,
          opcode=wire.OP_INSTANCE_GROW_DISK,
          body=Body(op_id=wire.OP_INSTANCE_GROW_DISK, fixed=frozenset({"instance_name", "disk"})),
          doc=Doc("Grow one disk of an instance", body=opbody(
              wire.OP_INSTANCE_GROW_DISK, ["amount"],
              amount={"type": "integer", "description": "MiB to add (the new size with"
                                                        " absolute)"},
              absolute=BOOL, wait_for_sync=BOOL))),
    Route(_INST + "/console", "GET", read=_instance_console, opcode=wire.OP_INSTANCE_CONSOLE,
          access="write",
          doc=Doc("How to reach the console of a running instance (503 when it is not"
                  " running): the first console as upstream's answer, and every console"
                  " in 'consoles'", result={"type": "object", "properties": {
                      **{k: STR for k in ("instance", "kind", "message", "host", "user",
                                          "command")},
                      "consoles": {"type": "array", "items": OBJ}}})),
    Route(_INST + "/console/token", "POST", read=_console_token,
          opcode=wire.OP_INSTANCE_CONSOLE, access="write",
          doc=Doc("A single-use token (30 s) opening one console (serial or vnc) of a"
                  " running instance over a WebSocket (503 when it is not running or too"
                  " many of its consoles are open); a vnc token's answer carries the VNC"
                  " password when the instance has one",
                  (_KIND,),
                  result={"type": "object", "properties": {
                      "instance": STR, "kind": STR, "token": STR, "websocket": STR,
                      "password": STR, "expires_in": {"type": "number"}}})),
    Route(_INST + "/console/websocket", "GET", read=_console_websocket, access="read",
          doc=Doc("The instance's serial console or VNC (RFB) as a WebSocket (RFC 6455,"
                  " binary frames both ways; subprotocol 'binary' when offered), brokered"
                  " by the master; the credential is the token",
                  (Param("token", "str", "a token of POST .../console/token"), _KIND),
                  result=STR)),
    relocation(_INST + "/change-group", "PUT", wire.OP_INSTANCE_CHANGE_GROUP, "instance_name",
               "instance", Doc(
                   "Move an instance into another node group (jobs from the allocator)",
                   (PLAN,), body=opbody(wire.OP_INSTANCE_CHANGE_GROUP, target_groups=STRS,
                                        iallocator=STR))),
    *tags_routes(_INST + "/tags", constants.TAG_INSTANCE, "instance", "instance"),
]
