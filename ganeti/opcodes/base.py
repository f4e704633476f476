"""The opcode base class: a typed dataclass plus Ganeti's JSON envelope.

Every operation is a ``@dataclass(kw_only=True)`` subclass of
:class:`OpCode`.  Its ``OP_ID`` is derived from the class name
(``OpTestDelay`` -> ``OP_TEST_DELAY``); ``OP_DSC_FIELD`` names the field
shown in job summaries (``TEST_DELAY(0.0)``).

Fields are validated from their annotations by the one validator of every
wire (:func:`ganeti.wiretypes.check_value`); extra constraints go into the
field metadata with :func:`param`.  Every value also gets type-level
bounds, whatever its annotation (``Any`` included, at any depth): integers fit a signed 64-bit
word (:data:`INT_MIN`..:data:`INT_MAX`), floats are finite, and a list or
dict holds at most :data:`MAX_ITEMS` entries (a field's ``max_len`` may
lower that), so a request too large or a number out of range is refused
at submission with :class:`errors.ParameterError` instead of failing at
run time::

    @dataclass(kw_only=True)
    class OpNodePowercycle(OpCode):
        \"\"\"Power-cycle a node.\"\"\"
        OP_DSC_FIELD = "node_name"
        node_name: str
        force: bool = False
        timeout: int = param(30, min=1, doc="seconds to wait")
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any, ClassVar

from ganeti import constants, errors
from ganeti.opcodes import upstream
from ganeti.wiretypes import (INT_MAX, INT_MIN, MAX_ITEMS, check_data, check_value,
                              check_len as _check_len, check_number as _check_number)

__all__ = ["OpCode", "param", "check_value", "check_data", "op_id_from_class_name",
           "validate_depends", "validate_reason", "INT_MIN", "INT_MAX", "MAX_ITEMS"]

_FINAL = sorted(constants.JOBS_FINALIZED)



def op_id_from_class_name(name: str) -> str:
    """``OpTestDelay`` -> ``OP_TEST_DELAY``."""
    if not name.startswith("Op"):
        raise errors.ProgrammerError(f"Opcode class name {name!r} must start with 'Op'")
    return "OP_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name[2:]).upper()


def param(default: Any = dataclasses.MISSING, *, doc: str = "",
          min: float | None = None, max: float | None = None,
          choices: typing.Iterable[Any] | None = None,
          max_len: int | None = None,
          check: Callable[[Any, str], None] | None = None) -> Any:
    """A dataclass field with validation metadata.

    ``min``/``max`` bound numbers; ``max_len`` bounds the length of a list
    or dict (below :data:`MAX_ITEMS`); ``choices`` restricts the value to a
    set; ``check(value, name)`` is called last on a non-null value and
    raises :class:`errors.ParameterError` for what the others cannot say.
    A list/dict default is copied per instance.
    """
    meta = {"doc": doc, "min": min, "max": max,
            "choices": frozenset(choices) if choices is not None else None,
            "max_len": max_len, "check": check}
    if isinstance(default, (list, dict)):
        proto = default
        return field(default_factory=lambda: type(proto)(proto), metadata=meta)
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def validate_depends(value: Any) -> list[list[Any]] | None:
    """Check the ``depends`` envelope field: ``[[job_id, [status...]], ...]``.

    Job ids are ints (negative = relative, only valid at submission);
    statuses must be finalized statuses.  Raises :class:`errors.ParameterError`.
    """
    if value is None:
        return None
    if not isinstance(value, list):
        raise errors.ParameterError("Parameter 'depends' must be a list or null", errors.ECODE_INVAL)
    _check_len(value, MAX_ITEMS, "depends")
    result = []
    for i, dep in enumerate(value):
        if (not isinstance(dep, (list, tuple)) or len(dep) != 2
                or not isinstance(dep[0], int) or isinstance(dep[0], bool) or dep[0] == 0
                or not isinstance(dep[1], (list, tuple))):
            raise errors.ParameterError(
                f"Parameter 'depends[{i}]' must be [job_id (non-zero int), [status, ...]], got {dep!r}",
                errors.ECODE_INVAL)
        _check_number(dep[0], f"depends[{i}]")
        _check_len(dep[1], len(constants.JOBS_FINALIZED), f"depends[{i}] statuses")
        bad = [s for s in dep[1] if s not in constants.JOBS_FINALIZED]
        if bad:
            raise errors.ParameterError(
                f"Parameter 'depends[{i}]': invalid statuses {bad!r}, allowed are {_FINAL}",
                errors.ECODE_INVAL)
        result.append([dep[0], list(dep[1])])
    return result


def validate_reason(value: Any) -> list[list[Any]]:
    """Check the ``reason`` trail: ``[[source, reason, timestamp_ns], ...]``."""
    if not isinstance(value, list):
        raise errors.ParameterError("Parameter 'reason' must be a list", errors.ECODE_INVAL)
    _check_len(value, MAX_ITEMS, "reason")
    for i, entry in enumerate(value):
        if (not isinstance(entry, (list, tuple)) or len(entry) != 3
                or not isinstance(entry[0], str) or not isinstance(entry[1], str)
                or not isinstance(entry[2], int) or isinstance(entry[2], bool)):
            raise errors.ParameterError(
                f"Parameter 'reason[{i}]' must be [source, reason, timestamp_ns], got {entry!r}",
                errors.ECODE_INVAL)
        _check_number(entry[2], f"reason[{i}]")
    return [list(e) for e in value]


@dataclass(kw_only=True)
class OpCode:
    """Base of all opcodes; holds the envelope common to every operation.

    Subclasses declare their parameters as annotated dataclass fields and
    set ``OP_DSC_FIELD`` to the field describing the target.
    """

    OP_ID: ClassVar[str] = "OP_CODE"
    OP_DSC_FIELD: ClassVar[str | None] = None

    dry_run: bool | None = None
    debug_level: int | None = param(None, min=0)
    priority: int = param(constants.OP_PRIO_DEFAULT, min=constants.OP_PRIO_HIGHEST,
                          max=constants.OP_PRIO_LOWEST)
    depends: list[Any] | None = None
    comment: str | None = None
    reason: list[Any] = param([])

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.OP_ID = op_id_from_class_name(cls.__name__)

    def __post_init__(self) -> None:
        self.validate()

    def summary(self) -> str:
        """Short text for job listings: ``TEST_DELAY(0.0)``."""
        text = self.OP_ID[3:] if self.OP_ID.startswith("OP_") else self.OP_ID
        if self.OP_DSC_FIELD:
            value = getattr(self, self.OP_DSC_FIELD, None)
            if isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            if value is not None:
                text = f"{text}({value})"
        return text

    def validate(self) -> None:
        """Check (and normalise) every field: types, ranges, envelope shapes.

        Called on construction, so an opcode object is always valid.

        Raises :class:`errors.ParameterError` naming the offending field.
        """
        cls = type(self)
        plan = _PLANS.get(cls)
        if plan is None:
            plan = _PLANS[cls] = _validation_plan(cls)
        for f, tp, default in plan:
            value = getattr(self, f.name)
            if value is default and default is not _NO_DEFAULT:
                continue        # a field left at its (checked) immutable default
            setattr(self, f.name, _check_field(f, tp, value))


_HINTS: dict[type, dict[str, Any]] = {}
#: per opcode class: (field, type hint, default or _NO_DEFAULT) for validate()
_PLANS: dict[type, list[tuple[dataclasses.Field, Any, Any]]] = {}
_NO_DEFAULT = object()
#: default values that are immutable, so a field still holding the very same
#: object holds what was checked once per class
_IMMUTABLE = (type(None), bool, int, float, str)


def _validation_plan(cls: type) -> list[tuple[dataclasses.Field, Any, Any]]:
    """Each field of ``cls`` with its type hint and, when its default is
    immutable and passes the field's own checks unchanged, that default:
    :meth:`OpCode.validate` skips a field holding it (most of an opcode's
    fields are left at their defaults, and every submitted opcode is
    validated)."""
    hints = _hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        default = f.default
        if default is dataclasses.MISSING or type(default) not in _IMMUTABLE:
            default = _NO_DEFAULT
        else:
            try:
                if _check_field(f, hints[f.name], default) is not default:
                    default = _NO_DEFAULT       # normalised: check it every time
            except errors.GanetiError:
                default = _NO_DEFAULT           # a default that must be replaced
        plan.append((f, hints[f.name], default))
    return plan


def _hints(cls: type) -> dict[str, Any]:
    # A plain dict, not functools.lru_cache: mypy takes a class argument of
    # an lru_cache function for an unhashable instance (dataclass __hash__).
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _check_field(f: dataclasses.Field, tp: Any, value: Any) -> Any:
    if f.name == "depends":
        return validate_depends(value)
    if f.name == "reason":
        return validate_reason(value)
    meta = f.metadata
    max_len = meta.get("max_len")
    if max_len is not None and isinstance(value, (list, tuple, dict)):
        _check_len(value, max_len, f.name)   # before the (longer) element-wise checks
    value = check_value(tp, value, f.name)
    if value is None:
        return value
    lo, hi, choices = meta.get("min"), meta.get("max"), meta.get("choices")
    if lo is not None and isinstance(value, (int, float)) and value < lo:
        raise errors.ParameterError(f"Parameter '{f.name}' must be >= {lo}, got {value!r}",
                                    errors.ECODE_INVAL)
    if hi is not None and isinstance(value, (int, float)) and value > hi:
        raise errors.ParameterError(f"Parameter '{f.name}' must be <= {hi}, got {value!r}",
                                    errors.ECODE_INVAL)
    if choices is not None:
        items = value if isinstance(value, list) else [value]
        bad = [v for v in items if v not in choices]
        if bad:
            raise errors.ParameterError(
                f"Parameter '{f.name}' has invalid value(s) {bad!r}, allowed: {sorted(choices)}",
                errors.ECODE_INVAL)
    check = meta.get("check")
    if check is not None:
        check(value, f.name)
    return value


def build(cls: type[OpCode], data: dict[str, Any]) -> OpCode:
    """Build and validate ``cls`` from a dict without ``OP_ID``.

    Unknown keys and missing required fields raise
    :class:`errors.ParameterError` naming the field.  Ganeti 3.0's
    parameters listed in :mod:`ganeti.opcodes.upstream` are dropped when
    they carry upstream's default and refused otherwise.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    # Ganeti 3.0's parameters we do not implement: dropped at their default only
    data = upstream.drop_defaults(cls.OP_ID, data)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise errors.ParameterError(
            f"{cls.OP_ID}: unknown parameter(s) {', '.join(repr(u) for u in unknown)}",
            errors.ECODE_INVAL)
    for name, f in fields.items():
        if name in data:
            continue
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise errors.ParameterError(f"{cls.OP_ID}: required parameter '{name}' is missing",
                                        errors.ECODE_INVAL)
    return cls(**data)  # __post_init__ validates every field
