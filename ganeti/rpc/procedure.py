"""The ``@procedure`` decorator: a backend function declares its node procedure.

A node procedure is written once, as the backend function that runs it
(doc/design/contracts.md, "Adding a node procedure")::

    @procedure(NORMAL, fenced=True)
    def node_powercycle(ctx: NodeContext, hypervisor: str, hvparams: dict) -> str:
        \"\"\"Hard-reset the node through its hypervisor ... (the one-line doc).

        More text for the reader of the backend.
        \"\"\"

From the function come the procedure's name, its arguments in wire order
(the parameters after ``ctx``) and their wire types (the annotations, see
:data:`WIRE_TYPES`), and its one-line doc (the docstring's first paragraph,
its lines joined); from the decorator its timeout class and flags.
``python -m ganeti.rpc.gen`` reads the decorated functions with
:func:`declared_call` and writes the generated table ``rpc/table.py`` that
:mod:`ganeti.rpc.defs` serves to the master, the node daemon and the fakes
(none of which import the backend).  Pure: nothing here imports the backend.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ganeti import wiretypes
from ganeti.rpc.defs import FAST, NORMAL, SLOW, TIMEOUTS, TMO_1DAY, TMO_4HRS, URGENT, RpcCall

__all__ = ["procedure", "Procedure", "spec_of", "declared_call", "wire_type", "WIRE_TYPES",
           "URGENT", "FAST", "NORMAL", "SLOW", "TMO_4HRS", "TMO_1DAY"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: the attribute the decorator sets on a backend function
_ATTR = "__rpc_procedure__"

_BASE: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool,
                         "list": list, "dict": dict}
#: annotation text -> wire type (of :mod:`ganeti.wiretypes`): the only
#: annotations a procedure's arguments may carry, so that both ends validate
#: exactly what the annotation says (``list``, not ``list[str]``)
WIRE_TYPES: dict[str, Any] = {**_BASE, **{f"{k} | None": v | None for k, v in _BASE.items()}}


@dataclass(frozen=True)
class Procedure:
    """What the decorator adds to the function: timeout class and flags.

    ``fenced``: the procedure changes the node's state; the node refuses it
    from a master older than the newest it accepted (``rpc.defs.FENCED_CALLS``).
    ``offline``: sent to nodes marked offline too (``OFFLINE_CALLS``).
    ``keepalive``: may share a kept connection (a read-only procedure, or,
    when also fenced, a repeatable job-queue write: ``KEEPALIVE_CALLS``,
    ``KEEPALIVE_WRITE_CALLS``; doc/protocols/rpc.md, "Kept connections").
    """

    timeout: str
    fenced: bool = False
    offline: bool = False
    keepalive: bool = False


def procedure(timeout: str, *, fenced: bool = False, offline: bool = False,
              keepalive: bool = False) -> Callable[[_F], _F]:
    """Mark a backend function as the node procedure of its name (returned unchanged)."""
    if timeout not in TIMEOUTS:
        raise ValueError(f"Unknown timeout class {timeout!r}")
    spec = Procedure(timeout, fenced=fenced, offline=offline, keepalive=keepalive)

    def mark(fn: _F) -> _F:
        setattr(fn, _ATTR, spec)
        return fn
    return mark


def spec_of(obj: object) -> Procedure | None:
    """The :class:`Procedure` of a decorated function, or None."""
    spec = getattr(obj, _ATTR, None)
    return spec if isinstance(spec, Procedure) else None


def wire_type(annotation: Any, where: str) -> Any:
    """The wire type of a parameter annotation (text or object); ValueError naming ``where``."""
    text = annotation if isinstance(annotation, str) else _text(annotation)
    try:
        return WIRE_TYPES[text]
    except KeyError:
        raise ValueError(f"{where}: annotation {text!r} is not a wire type"
                         f" (one of: {', '.join(WIRE_TYPES)})") from None


def _text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return "<none>"
    try:
        return wiretypes.annotation_text(annotation)
    except ValueError:
        return repr(annotation)


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, its lines joined by single spaces."""
    text = inspect.cleandoc(doc or "")
    return " ".join(text.split("\n\n", 1)[0].split())


def declared_call(fn: Callable[..., Any]) -> RpcCall:
    """The table row a decorated backend function declares; ValueError when it cannot.

    The first parameter must be ``ctx``; the others, positional and
    without defaults, are the arguments in wire order.
    """
    name = fn.__name__
    spec = spec_of(fn)
    if spec is None:
        raise ValueError(f"{name}: not decorated with @procedure")
    params = list(inspect.signature(fn, eval_str=False).parameters.values())
    if not params or params[0].name != "ctx":
        raise ValueError(f"{name}: the first parameter must be ctx")
    args = []
    for param in params[1:]:
        if param.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise ValueError(f"{name}: parameter {param.name} must be a plain positional one")
        if param.default is not inspect.Parameter.empty:
            raise ValueError(f"{name}: parameter {param.name} must not have a default")
        args.append((param.name, wire_type(param.annotation, f"{name}({param.name})")))
    doc = first_paragraph(fn.__doc__)
    if not doc:
        raise ValueError(f"{name}: the docstring (its first paragraph: the one-line doc) is missing")
    return RpcCall(name, tuple(args), spec.timeout, doc)
