"""What a RAPI request body may say: one :class:`Body` per resource row (pure).

A row that submits a job names its opcode itself; the body only fills
that opcode's parameters.  The keys a body may carry are derived from the
opcode class (its dataclass fields in :mod:`ganeti.opcodes`, plus the
Ganeti 3.0 parameters :mod:`ganeti.opcodes.upstream` accepts at their
default), minus the parameters the row sets from its path, plus the
row's documented aliases (``name`` for ``instance_name``) and extra keys
that are no opcode parameter (``__version__``).  Anything else, ``OP_ID``
included, is a 400 naming the keys, and nothing is submitted
(doc/rapi.md, "Request bodies").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
import typing
from typing import Any

from ganeti import errors, opcodes
from ganeti.opcodes import upstream

__all__ = ["Body", "NO_BODY", "STRINGS", "ANY_JSON", "opcode_params", "check_keys"]


def opcode_params(op_id: str) -> frozenset[str]:
    """Every parameter ``op_id`` takes: its class's fields and Ganeti 3.0's
    accepted-at-default ones (:data:`ganeti.opcodes.upstream.ACCEPTED_AT_DEFAULT`).

    Raises :class:`errors.ProgrammerError` for an unknown opcode (a bad row).
    """
    cls = opcodes.OP_REGISTRY.get(op_id)
    if cls is None:
        raise errors.ProgrammerError(f"RAPI row names unknown opcode {op_id!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    return frozenset(names | set(upstream.ACCEPTED_AT_DEFAULT.get(op_id, {})))


def _not_nullable(op_id: str) -> frozenset[str]:
    """The parameters of ``op_id`` whose type does not take None, and the Ganeti 3.0
    ones accepted at a default that is not None."""
    found = _NOT_NULLABLE.get(op_id)
    if found is None:
        cls = opcodes.OP_REGISTRY[op_id]
        hints = typing.get_type_hints(cls)
        found = _NOT_NULLABLE[op_id] = frozenset(
            {f.name for f in dataclasses.fields(cls)
             if type(None) not in typing.get_args(hints[f.name]) and hints[f.name] is not Any}
            | {name for name, default in upstream.ACCEPTED_AT_DEFAULT.get(op_id, {}).items()
               if default is not None})
    return found


_NOT_NULLABLE: dict[str, frozenset[str]] = {}


def _quoted(keys: list[str]) -> str:
    shown = [k if len(k) <= 60 else k[:60] + "..." for k in keys[:20]]
    more = f" and {len(keys) - 20} more" if len(keys) > 20 else ""
    return ", ".join(repr(k) for k in shown) + more


def check_keys(data: Mapping[str, Any], allowed: frozenset[str], *, fixed: frozenset[str],
               where: str = "the request body") -> None:
    """Refuse keys of ``data`` outside ``allowed`` (a 400 naming them).

    ``OP_ID`` and the ``fixed`` parameters (set by the resource path) get
    their own sentence, so the client learns why.
    """
    unknown = sorted(k for k in data if k not in allowed)
    if not unknown:
        return
    op_id = [k for k in unknown if k == "OP_ID"]
    pinned = [k for k in unknown if k in fixed]
    other = [k for k in unknown if k not in fixed and k != "OP_ID"]
    parts = []
    if op_id:
        parts.append("'OP_ID' (the resource chooses the opcode)")
    if pinned:
        parts.append(f"{_quoted(pinned)} (set by the resource from its path or query)")
    if other:
        parts.append(f"unknown parameter(s) {_quoted(other)}")
    raise errors.HttpError(f"Invalid keys in {where}: {'; '.join(parts)}", 400)


@dataclass(frozen=True)
class Body:
    """The JSON body one row accepts.

    ``kind`` is ``"none"`` (no body, or ``null``/``{}``), ``"strings"``
    (that, or a JSON list of strings: Ganeti's client repeats the tags of
    its tag requests in the body), ``"object"`` (a JSON object with
    :meth:`allowed` keys) or ``"any"`` (any JSON value, checked by the row
    itself, e.g. the role string of ``PUT .../role``).
    ``op_id`` names the opcode whose parameters may be given; ``fixed``
    the parameters the row sets itself (from the path: never from the
    body); ``aliases`` maps RAPI names to opcode parameters; ``extra``
    lists keys that are no opcode parameter.
    """

    kind: str = "object"
    op_id: str | None = None
    fixed: frozenset[str] = frozenset()
    aliases: Mapping[str, str] = field(default_factory=dict)
    extra: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.kind not in ("none", "strings", "object", "any"):
            raise errors.ProgrammerError(f"Unknown body kind {self.kind!r}")
        if self.op_id is not None:
            missing = (set(self.aliases.values()) | self.fixed) - opcode_params(self.op_id)
            if missing:
                raise errors.ProgrammerError(f"{self.op_id} has no parameter(s)"
                                             f" {sorted(missing)}")

    def allowed(self) -> frozenset[str]:
        """The keys a body may carry (empty for ``none``)."""
        if self.kind in ("none", "strings"):
            return frozenset()
        params = opcode_params(self.op_id) - self.fixed if self.op_id else frozenset()
        return frozenset(params | set(self.aliases) | self.extra)

    def accept(self, body: Any) -> Any:
        """``body`` checked against this row, aliases renamed (a new dict).

        Raises :class:`errors.HttpError` 400 for a body of the wrong shape,
        a key outside :meth:`allowed` (naming it) or an alias given with
        its target.
        """
        if self.kind == "any":
            return body
        if self.kind in ("none", "strings"):
            if body is None or body == {}:
                return None
            if (self.kind == "strings" and isinstance(body, list)
                    and all(isinstance(item, str) for item in body)):
                return body
            if isinstance(body, dict):
                check_keys(body, frozenset(), fixed=self.fixed)
            what = "no request body" if self.kind == "none" else "no body but a list of strings"
            raise errors.HttpError(f"This resource takes {what}", 400)
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise errors.HttpError("The request body must be a JSON object", 400)
        return self.rename(body)

    def rename(self, data: Mapping[str, Any], where: str = "the request body"
               ) -> dict[str, Any]:
        """``data`` (one object) checked and with its aliases renamed."""
        check_keys(data, self.allowed(), fixed=self.fixed, where=where)
        out = dict(data)
        for old, new in self.aliases.items():
            if old in out:
                if new in out:
                    raise errors.HttpError(f"Parameters '{old}' and '{new}' are aliases;"
                                           " give only one", 400)
                out[new] = out.pop(old)
        return out

    def opcode(self, body: Mapping[str, Any], fixed: Mapping[str, Any]) -> dict[str, Any]:
        """The opcode dict of an accepted ``body`` plus the row's ``fixed`` values.

        ``OP_ID`` comes last, from the row: nothing in ``body`` overrides it.
        """
        if self.op_id is None:
            raise errors.ProgrammerError("Body.opcode on a row without an opcode")
        if set(fixed) - self.fixed:
            raise errors.ProgrammerError(f"{self.op_id}: fixed values"
                                         f" {sorted(set(fixed) - self.fixed)} not declared")
        # as in Ganeti, a parameter sent as null is one not sent (its default applies):
        # Ganeti's client sends every optional argument, null when not given
        unset = _not_nullable(self.op_id)
        body = {k: v for k, v in body.items() if v is not None or k not in unset}
        return {**body, **fixed, "OP_ID": self.op_id}


#: a row without a body
NO_BODY = Body(kind="none")
#: a row that takes no body but a list of strings (which it checks itself)
STRINGS = Body(kind="strings")
#: a row that checks its body itself
ANY_JSON = Body(kind="any")
