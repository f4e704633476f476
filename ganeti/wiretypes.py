"""The argument types of every wire, and the one validator that checks them.

Node RPC rows (:mod:`ganeti.rpc.defs`), LUXI rows (:data:`ganeti.luxi.METHODS`)
and opcode fields (:mod:`ganeti.opcodes`) all declare their argument types
as Python annotations, and :func:`check_value` checks a decoded JSON value
against one, on both ends of each wire (doc/design/contracts.md, "One
validator").  The annotations it understands:

==========================  ===============================================
annotation                  accepts
==========================  ===============================================
``bool``, ``str``           exactly that JSON type
``int``                     an integer (not a boolean) in a signed 64-bit word
``float``                   an integer or a finite float (an integer becomes
                            a float in the returned value)
``None``                    null
``object``                  anything, not looked into (bulk data such as a
                            whole configuration)
``typing.Any``              any JSON data, with the bounds above and the
                            length bound applied at every depth
``X | Y``, ``Optional[X]``  any arm
``Literal[a, b]``           one of the values
``list[X]``, ``tuple[X, ...]``  a list (or tuple) whose items are ``X``
``dict[K, V]``              an object whose keys are ``K`` and values ``V``
bare ``list``, ``dict``     that container, not looked into
a refinement class          what its ``wire_check(value, where)`` says
                            (:class:`JobId`, :class:`ganeti.private.Private`)
any other class             an instance of it
==========================  ===============================================

``max_items`` bounds the length of every list and object checked against a
generic annotation (opcodes: :data:`MAX_ITEMS`; the LUXI and RPC frames
bound their own size, so they pass None).

The module is import-light (no ``typing``): the LUXI client runs it in every
``gnt-*`` command before it sends (doc/cli-startup.md).  ``typing``
constructs are recognised through ``sys.modules`` only when the caller has
imported ``typing`` itself.
"""

from __future__ import annotations

import sys

from ganeti import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["check_value", "check_data", "check_len", "check_number", "describe",
           "annotation_text", "JobId", "INT_MIN", "INT_MAX", "MAX_ITEMS"]

#: Range of every integer on a wire (a signed 64-bit word).
INT_MIN = -(2 ** 63)
INT_MAX = 2 ** 63 - 1
#: Most entries of any list or dict in an opcode (a field's ``max_len`` may be lower).
MAX_ITEMS = 10_000

_UNION = type(int | None)
_GENERIC = type(list[int])
_NONE = type(None)
_INF = float("inf")
#: shown values are cut to this many characters in error messages
_SHOWN = 80


class JobId:
    """Refinement: a job id, a positive integer or its decimal text (``"17"``)."""

    wire_doc = "a job id (a positive integer)"
    wire_annotation = "int | str"

    @staticmethod
    def wire_check(value: Any, where: str) -> Any:
        """``value`` if it is a job id; :class:`errors.ParameterError` otherwise."""
        number = value
        if isinstance(value, str) and value.isdigit() and value.isascii():
            number = int(value) if len(value) <= 19 else 0
        if (not isinstance(number, int) or isinstance(number, bool)
                or not 0 < number <= INT_MAX):
            _refuse(where, JobId, value)
        return value


def _typing_attr(name: str) -> Any:
    """``typing.<name>`` if the process imported ``typing``, else a private sentinel."""
    mod = sys.modules.get("typing")
    return getattr(mod, name) if mod is not None else _ABSENT


_ABSENT = object()


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def _refuse(where: str, tp: Any, value: Any) -> None:
    raise errors.ParameterError(
        f"Parameter '{where}' must be {describe(tp)}, got {_shown(value)}", errors.ECODE_INVAL)


def check_len(value: Any, limit: int, where: str) -> None:
    """Refuse a list or dict of more than ``limit`` entries."""
    if len(value) > limit:
        raise errors.ParameterError(
            f"Parameter '{where}' has {len(value)} entries, at most {limit} are allowed",
            errors.ECODE_INVAL)


def check_number(value: Any, where: str) -> Any:
    """``value`` if it is a finite number inside the integer range; raises otherwise."""
    if isinstance(value, float):
        if value != value or value in (_INF, -_INF):   # NaN or infinite (no math import)
            raise errors.ParameterError(
                f"Parameter '{where}' must be a finite number, got {value!r}", errors.ECODE_INVAL)
    elif not INT_MIN <= value <= INT_MAX:
        raise errors.ParameterError(
            f"Parameter '{where}' is out of range ({INT_MIN}..{INT_MAX}): {value!r}",
            errors.ECODE_INVAL)
    return value


def check_data(value: Any, where: str, max_items: int = MAX_ITEMS) -> None:
    """Apply the bounds to free-form data (``typing.Any``), at every depth.

    Raises :class:`errors.ParameterError` naming the offending element.
    """
    if isinstance(value, (bool, str)) or value is None:
        return
    if isinstance(value, (int, float)):
        check_number(value, where)
    elif isinstance(value, dict):
        check_len(value, max_items, where)
        for key, item in value.items():
            check_data(item, f"{where}.{key}", max_items)
    elif isinstance(value, (list, tuple)):
        check_len(value, max_items, where)
        for i, item in enumerate(value):
            check_data(item, f"{where}[{i}]", max_items)


def _args(tp: Any) -> tuple[Any, ...]:
    return getattr(tp, "__args__", ())


def _origin(tp: Any) -> Any:
    """``list`` for ``list[int]``, ``"union"``/``"literal"`` for those, else None."""
    if isinstance(tp, _UNION):
        return "union"
    if isinstance(tp, _GENERIC):
        return getattr(tp, "__origin__", None)
    if type(tp).__module__ == "typing":
        origin = getattr(tp, "__origin__", None)
        if origin is _typing_attr("Union"):
            return "union"
        if origin is _typing_attr("Literal"):
            return "literal"
        return origin
    return None


def check_value(tp: Any, value: Any, where: str, max_items: int | None = MAX_ITEMS) -> Any:
    """Check ``value`` against the annotation ``tp`` (see the module docstring).

    Returns the value, normalised: integers where a float is expected
    become floats, tuples become lists, refinements may wrap the value.
    Raises :class:`errors.ParameterError` naming ``where`` (the parameter,
    with the path to the offending item).
    """
    if tp is object:
        return value
    if tp is bool or tp is str:
        if type(value) is tp or isinstance(value, tp):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return check_number(value, where)
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            check_number(value, where)
            return float(value)
    elif tp is None or tp is _NONE:
        if value is None:
            return None
    elif tp is list or tp is dict:
        if isinstance(value, (list, tuple) if tp is list else dict):
            return value
    elif isinstance(tp, (_GENERIC, _UNION)):
        return _check_generic(tp, value, where, max_items)
    elif (wire_check := getattr(tp, "wire_check", None)) is not None:
        return wire_check(value, where)
    elif tp is _typing_attr("Any"):
        check_data(value, where, MAX_ITEMS if max_items is None else max_items)
        return value
    else:
        return _check_generic(tp, value, where, max_items)
    _refuse(where, tp, value)


def _check_generic(tp: Any, value: Any, where: str, max_items: int | None) -> Any:
    origin = _origin(tp)
    args = _args(tp)
    if origin == "union":
        if value is None and _NONE in args:
            return None
        own = f"Parameter '{where}' must be "
        for arm in args:
            if arm is _NONE:
                continue
            try:
                return check_value(arm, value, where, max_items)
            except errors.ParameterError as exc:
                # an item deep inside the only arm: that item's message is the precise one
                if len(args) - (_NONE in args) == 1 and not str(exc.args[0]).startswith(own):
                    raise
        _refuse(where, tp, value)
    if origin == "literal":
        if value not in args:
            _refuse(where, tp, value)
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            _refuse(where, tp, value)
        if max_items is not None:
            check_len(value, max_items, where)
        inner = args[0] if args else object
        if inner is object:
            return list(value)
        return [check_value(inner, v, f"{where}[{i}]", max_items) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            _refuse(where, tp, value)
        if max_items is not None:
            check_len(value, max_items, where)
        kt, vt = args if len(args) == 2 else (object, object)
        if kt is str and vt is object:
            for key in value:
                if not isinstance(key, str):
                    _refuse(f"{where} key", str, key)
            return value
        return {check_value(kt, k, f"{where} key", max_items):
                check_value(vt, v, f"{where}.{k}", max_items) for k, v in value.items()}
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    _refuse(where, tp, value)


_SINGULAR: dict[Any, str] = {bool: "a boolean", int: "an integer", float: "a number",
                             str: "a string", None: "null", _NONE: "null", object: "anything",
                             list: "a list", dict: "an object"}
_PLURAL: dict[Any, str] = {bool: "booleans", int: "integers", float: "numbers",
                           str: "strings", list: "lists", dict: "objects", object: "values"}


def describe(tp: Any) -> str:
    """What an error message says ``tp`` accepts: ``"a list of strings or null"``."""
    if tp in _SINGULAR:
        return _SINGULAR[tp]
    doc = getattr(tp, "wire_doc", None)
    if doc is not None:
        return str(doc)
    if tp is _typing_attr("Any"):
        return "any JSON value"
    origin, args = _origin(tp), _args(tp)
    if origin == "union":
        return " or ".join(describe(arm) for arm in args)
    if origin == "literal":
        return f"one of {list(args)}"
    if origin in (list, tuple):
        inner = args[0] if args else object
        if _origin(inner) in (list, tuple):
            return "a list of lists"
        if _origin(inner) is dict:
            return "a list of objects"
        return f"a list of {_PLURAL.get(inner) or describe(inner) + ' items'}"
    if origin is dict:
        return "an object"
    return f"of type {getattr(tp, '__name__', None) or str(tp).replace('typing.', '')}"


def annotation_text(tp: Any, names: dict[Any, str] | None = None) -> str:
    """The Python source text of the annotation ``tp`` (for generated code).

    ``names`` overrides the text of some types (``{dict: "JsonDict"}``).
    """
    if names and tp in names:
        return names[tp]
    text = getattr(tp, "wire_annotation", None)
    if text is not None:
        return str(text)
    if tp is None or tp is _NONE:
        return "None"
    if tp is object or tp is _typing_attr("Any"):
        return "Any"
    origin, args = _origin(tp), _args(tp)
    if origin == "union":
        return " | ".join(annotation_text(arm, names) for arm in args)
    if origin == "literal":
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else annotation_text(a, names) for a in args)
        return f"{origin.__name__}[{inner}]"
    if isinstance(tp, type):
        return tp.__name__
    raise ValueError(f"no annotation text for {tp!r}")
