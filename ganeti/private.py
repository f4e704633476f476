"""Secret values: :class:`Private` wraps a value that must never be shown.

A parameter marked private at the input (``osparams_private`` of the
instance opcodes, ``cluster_domain_secret`` of ``OP_CLUSTER_RENEW_CRYPTO``;
doc/protocols/opcodes.md, "Private parameters") is wrapped when its opcode
is validated.  Everything that turns it into text sees only
:data:`REDACTED`: :mod:`ganeti.serializer` (job files and their
replication, LUXI answers, RPC bodies), ``repr``/``str`` (log lines,
error texts).  Only a logical unit takes the value out, with
:meth:`Private.get` or :func:`reveal`, to keep it in the config or to hand
it to a node for the OS scripts.

A job keeps its private values in memory only: written to disk they are
:data:`REDACTED`, so a job read back from its file (after a master
restart, by a new master, through ``PickupJob``) no longer has them and
its opcode is refused (:func:`check_not_redacted`); it must be submitted
again.
"""

from __future__ import annotations

from ganeti import errors

# No typing imports at run time: ganeti.serializer imports this module and
# must stay light (CLI start-up, see its docstring).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["Private", "REDACTED", "reveal", "check_not_redacted"]

#: What a private value looks like outside the config and the OS scripts.
REDACTED = "<redacted>"


class Private:
    """A value shown as :data:`REDACTED` everywhere; :meth:`get` gives it."""

    __slots__ = ("_value",)
    #: what a wrong value's error says is expected (:mod:`ganeti.wiretypes`)
    wire_doc = "a private string or number"

    @staticmethod
    def wire_check(value: Any, where: str) -> Private:
        """The validator's check of a ``Private`` annotation (:mod:`ganeti.wiretypes`)."""
        return check_not_redacted(value, where)

    def __init__(self, value: Any) -> None:
        self._value = value.get() if isinstance(value, Private) else value

    def get(self) -> Any:
        """The real value (for the config and the OS scripts only)."""
        return self._value

    def __repr__(self) -> str:
        return f"Private({REDACTED!r})"

    def __str__(self) -> str:
        return REDACTED

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Private) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:  # copy.deepcopy (job copies) keeps the wrapper
        return (Private, (self._value,))


def reveal(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """A dict with every :class:`Private` value unwrapped (None -> ``{}``)."""
    return {k: v.get() if isinstance(v, Private) else v for k, v in (values or {}).items()}


def check_not_redacted(value: Any, where: str) -> Private:
    """Wrap ``value`` as private; refuse the redaction marker itself.

    A job file holds :data:`REDACTED` in place of each private value, so
    an opcode rebuilt from it must not run with the marker as the value:
    :class:`errors.ParameterError`, saying to submit the job again.
    """
    raw = value.get() if isinstance(value, Private) else value
    if raw == REDACTED:
        raise errors.ParameterError(
            f"Parameter '{where}': the private value is not kept outside the master's memory"
            " (the job was read back from its file, e.g. after a master restart); submit"
            " the job again", errors.ECODE_INVAL)
    if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
        raise errors.ParameterError(
            f"Parameter '{where}' must be a string or a number, got {type(raw).__name__}",
            errors.ECODE_INVAL)
    return value if isinstance(value, Private) else Private(value)
