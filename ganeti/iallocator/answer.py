"""Parsing and checking an allocator's answer (doc/protocols/iallocator.md, "Response").

An answer is ``{"success": bool, "info": str, "result": ...}`` (older
scripts send ``nodes`` instead of ``result``).  :func:`parse_answer`
decodes the text, checks the envelope and the shape of ``result`` for the
request type, and returns an :class:`Answer`; anything malformed raises
:class:`errors.OpPrereqError` (ECODE_NORES is kept for a well-formed
answer saying ``success: false``, see :meth:`Answer.require_success`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ganeti import errors, serializer
from ganeti.iallocator import document as doc
from ganeti.opcodes import wire

__all__ = ["Answer", "Move", "Failure", "parse_answer", "parse_data", "check_result",
           "RELOCATION_OPCODES", "MAX_SHOWN_OUTPUT"]

#: Opcodes an evacuation or group change answer may contain.
RELOCATION_OPCODES = frozenset([wire.OP_INSTANCE_MIGRATE, wire.OP_INSTANCE_FAILOVER,
                                wire.OP_INSTANCE_REPLACE_DISKS])
#: Characters of a malformed answer quoted in the error.
MAX_SHOWN_OUTPUT = 2000


@dataclass(frozen=True)
class Move:
    """One instance an evacuation moves: to ``group`` (UUID) onto ``nodes``."""

    instance: str
    group: str
    nodes: list[str]


@dataclass(frozen=True)
class Failure:
    """One instance the allocator could not move, and why (``None``: no reason given)."""

    instance: str
    reason: str | None


@dataclass(frozen=True)
class Answer:
    """A checked answer; ``result`` as sent, plus decoded views per request type.

    * allocate/relocate: ``nodes``;
    * multi-allocate: ``allocated`` (``[(name, nodes)]``) and ``unallocated``;
    * node-evacuate/change-group: ``moved``, ``failed``, ``jobs``.
    """

    rtype: str
    success: bool
    info: str
    result: Any
    nodes: list[str] = field(default_factory=list)
    allocated: list[tuple[str, list[str]]] = field(default_factory=list)
    unallocated: list[str] = field(default_factory=list)
    moved: list[Move] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    jobs: list[list[dict[str, Any]]] = field(default_factory=list)

    def require_success(self, name: str) -> None:
        """Raise OpPrereqError (ECODE_NORES) with the allocator's info unless successful."""
        if not self.success:
            raise errors.OpPrereqError(f"Can't compute nodes using iallocator '{name}':"
                                       f" {self.info}", errors.ECODE_NORES)


def _bad(what: str, text: str | None = None) -> errors.OpPrereqError:
    msg = f"Malformed iallocator answer: {what}"
    if text is not None:
        shown = text if len(text) <= MAX_SHOWN_OUTPUT else text[:MAX_SHOWN_OUTPUT] + "..."
        msg += f"; the allocator printed:\n{shown}"
    return errors.OpPrereqError(msg, errors.ECODE_INVAL)


def _str_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"{what} must be a list of strings, got {value!r}")
    return list(value)


def _check_opcode(op: Any, where: str) -> dict[str, Any]:
    if not isinstance(op, dict) or not isinstance(op.get("OP_ID"), str):
        raise _bad(f"{where} must be an opcode dict with OP_ID, got {op!r}")
    if op["OP_ID"] not in RELOCATION_OPCODES:
        raise _bad(f"{where}: opcode {op['OP_ID']} is not allowed (allowed:"
                   f" {', '.join(sorted(RELOCATION_OPCODES))})")
    if not isinstance(op.get("instance_name"), str):
        raise _bad(f"{where}: opcode {op['OP_ID']} names no instance")
    return dict(op)


def check_result(rtype: str, result: Any, request: dict[str, Any] | None = None) -> Answer:
    """Decode a successful answer's ``result`` for ``rtype``; raises OpPrereqError."""
    if rtype in (doc.REQ_ALLOCATE, doc.REQ_RELOCATE):
        nodes = _str_list(result, "result")
        wanted = (request or {}).get("required_nodes")
        if isinstance(wanted, int) and len(nodes) != wanted:
            raise _bad(f"{len(nodes)} node(s) returned, {wanted} required")
        return Answer(rtype, True, "", result, nodes=nodes)
    if rtype == doc.REQ_ALLOCATE_SECONDARY:
        if not isinstance(result, str) or not result:
            raise _bad(f"allocate-secondary result must be a node name, got {result!r}")
        return Answer(rtype, True, "", result, nodes=[result])
    if rtype == doc.REQ_MULTI_ALLOCATE:
        if not isinstance(result, list) or len(result) != 2:
            raise _bad("multi-allocate result must be [allocated, failed]")
        allocated = []
        for entry in result[0] if isinstance(result[0], list) else [None]:
            if (not isinstance(entry, list) or len(entry) != 2
                    or not isinstance(entry[0], str)):
                raise _bad(f"multi-allocate entry must be [name, [nodes]], got {entry!r}")
            allocated.append((entry[0], _str_list(entry[1], f"nodes of {entry[0]}")))
        return Answer(rtype, True, "", result, allocated=allocated,
                      unallocated=_str_list(result[1], "failed instances"))
    if rtype in (doc.REQ_NODE_EVACUATE, doc.REQ_CHANGE_GROUP):
        if not isinstance(result, list) or len(result) != 3:
            raise _bad(f"{rtype} result must be [moved, failed, jobs]")
        moved = []
        for entry in result[0] if isinstance(result[0], list) else [None]:
            if (not isinstance(entry, list) or len(entry) != 3 or not isinstance(entry[0], str)
                    or not isinstance(entry[1], str)):
                raise _bad(f"moved entry must be [instance, group, [nodes]], got {entry!r}")
            moved.append(Move(entry[0], entry[1], _str_list(entry[2], f"nodes of {entry[0]}")))
        failed = []
        for entry in result[1] if isinstance(result[1], list) else [None]:
            if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str)
                    or not (entry[1] is None or isinstance(entry[1], str))):
                raise _bad(f"failed entry must be [instance, reason], got {entry!r}")
            failed.append(Failure(entry[0], entry[1]))
        jobs = []
        if not isinstance(result[2], list):
            raise _bad("jobs must be a list of jobs")
        for jidx, job in enumerate(result[2]):
            if not isinstance(job, list) or not job:
                raise _bad(f"job {jidx} must be a non-empty list of opcodes")
            jobs.append([_check_opcode(op, f"job {jidx} opcode {oidx}")
                         for oidx, op in enumerate(job)])
        return Answer(rtype, True, "", result, moved=moved, failed=failed, jobs=jobs)
    raise errors.ProgrammerError(f"Unknown request type {rtype!r}")


def parse_answer(text: str, request: dict[str, Any]) -> Answer:
    """Decode and check the allocator's output for ``request``.

    Raises :class:`errors.OpPrereqError` (quoting the output) when it is
    not JSON, lacks a key or has a result of the wrong shape.
    """
    doc.check_request(request)
    try:
        data = serializer.loads(text)
    except errors.GanetiError as exc:
        raise _bad(f"not valid JSON ({exc})", text) from None
    return parse_data(data, request, text)


def parse_data(data: Any, request: dict[str, Any], text: str | None = None) -> Answer:
    """Check a decoded answer for ``request`` (``text``: the raw output, quoted on errors)."""
    rtype = doc.check_request(request)
    if not isinstance(data, dict):
        raise _bad("the answer must be a JSON object", text)
    if "result" not in data and "nodes" in data:
        data = {**data, "result": data["nodes"]}
    for key in ("success", "info", "result"):
        if key not in data:
            raise _bad(f"key '{key}' missing", text)
    if not isinstance(data["success"], bool):
        raise _bad("'success' must be a boolean", text)
    info = data["info"] if isinstance(data["info"], str) else str(data["info"])
    if not data["success"]:
        return Answer(rtype, False, info, data["result"])
    try:
        checked = check_result(rtype, data["result"], request)
    except errors.OpPrereqError as exc:
        raise _bad(str(exc).removeprefix("Malformed iallocator answer: "), text) from None
    return dataclasses.replace(checked, info=info)
