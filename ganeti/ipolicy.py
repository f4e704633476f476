"""The instance policy (ipolicy): defaults, validation, layering and checks.

An instance policy bounds the size of the instances of a node group
(doc/ipolicy.md).  It is a plain dict, stored as such in ``config.data``
on the cluster (complete) and on each node group (only the keys the
group customises):

``minmax``
    a non-empty list of ``{"min": SPEC, "max": SPEC}`` pairs; an instance
    conforms when it fits *one* pair.
``std``
    the standard instance SPEC, used by capacity planning; cluster level
    only, and inside one of the ``minmax`` pairs.
``disk-templates``
    the disk templates instances may use.
``vcpu-ratio``, ``spindle-ratio``
    how many virtual CPUs per physical CPU, and how much spindle use per
    physical spindle, a node may carry (floats; enforced by the allocator).

A SPEC maps each of :data:`ISPECS_PARAMETERS` (``memory-size`` MiB,
``cpu-count``, ``disk-count``, ``disk-size`` MiB per disk, ``nic-count``,
``spindle-use``) to an integer.

Everything here is pure: :func:`default_ipolicy`, :func:`check_ipolicy`
(syntax of a complete policy), :func:`update_ipolicy` (apply a change set
to a stored policy), :func:`fill_ipolicy` (group over cluster) and
:func:`compute_violations` (an instance spec against a policy, returning
messages that name the spec and the value, in Ganeti's wording:
``"memory-size value 64 is not in range [128, 32768]"``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ganeti import constants, errors
from ganeti.utils import units

__all__ = [
    "ISPEC_MEM_SIZE", "ISPEC_CPU_COUNT", "ISPEC_DISK_COUNT", "ISPEC_DISK_SIZE",
    "ISPEC_NIC_COUNT", "ISPEC_SPINDLE_USE", "ISPECS_PARAMETERS", "ISPECS_SIZES",
    "ISPECS_MINMAX", "ISPECS_MIN", "ISPECS_MAX", "ISPECS_STD", "IPOLICY_DTS",
    "IPOLICY_VCPU_RATIO", "IPOLICY_SPINDLE_RATIO", "IPOLICY_PARAMETERS", "IPOLICY_ALL_KEYS",
    "VALUE_DEFAULT", "default_min_spec", "default_max_spec", "default_ipolicy",
    "check_ispec", "check_ipolicy", "update_ipolicy", "fill_ipolicy", "parse_spec_value",
    "make_spec", "compute_violations", "format_violations", "upgrade_ipolicy",
]

ISPEC_MEM_SIZE = "memory-size"
ISPEC_CPU_COUNT = "cpu-count"
ISPEC_DISK_COUNT = "disk-count"
ISPEC_DISK_SIZE = "disk-size"
ISPEC_NIC_COUNT = "nic-count"
ISPEC_SPINDLE_USE = "spindle-use"
#: The keys of every instance spec, in display order.
ISPECS_PARAMETERS = (ISPEC_MEM_SIZE, ISPEC_CPU_COUNT, ISPEC_DISK_COUNT, ISPEC_DISK_SIZE,
                     ISPEC_NIC_COUNT, ISPEC_SPINDLE_USE)
#: Specs given in MiB: the CLI accepts units ("4G") for these.
ISPECS_SIZES = frozenset([ISPEC_MEM_SIZE, ISPEC_DISK_SIZE])

ISPECS_MINMAX = "minmax"
ISPECS_MIN = "min"
ISPECS_MAX = "max"
ISPECS_STD = "std"
IPOLICY_DTS = "disk-templates"
IPOLICY_VCPU_RATIO = "vcpu-ratio"
IPOLICY_SPINDLE_RATIO = "spindle-ratio"
#: The float-valued policy keys.
IPOLICY_PARAMETERS = (IPOLICY_VCPU_RATIO, IPOLICY_SPINDLE_RATIO)
IPOLICY_ALL_KEYS = (ISPECS_MINMAX, ISPECS_STD, IPOLICY_DTS, *IPOLICY_PARAMETERS)

#: In a change set, resets a group's key to the cluster's value.
VALUE_DEFAULT = "default"

_MINMAX_KEYS = frozenset([ISPECS_MIN, ISPECS_MAX])
#: A spec value that is not checked (e.g. vcpus "auto").
_VALUE_AUTO = "auto"


def default_min_spec() -> dict[str, int]:
    """Ganeti's default lower bounds (also its default ``std``)."""
    return {ISPEC_MEM_SIZE: 128, ISPEC_CPU_COUNT: 1, ISPEC_DISK_COUNT: 1,
            ISPEC_DISK_SIZE: 1024, ISPEC_NIC_COUNT: 1, ISPEC_SPINDLE_USE: 1}


def default_max_spec() -> dict[str, int]:
    """Ganeti's default upper bounds."""
    return {ISPEC_MEM_SIZE: 32768, ISPEC_CPU_COUNT: 8, ISPEC_DISK_COUNT: constants.MAX_DISKS,
            ISPEC_DISK_SIZE: 1024 * 1024, ISPEC_NIC_COUNT: constants.MAX_NICS,
            ISPEC_SPINDLE_USE: 12}


def default_ipolicy(disk_templates: Iterable[str] | None = None) -> dict[str, Any]:
    """Ganeti's default instance policy (a new dict each call).

    ``disk_templates`` defaults to every known template; cluster init
    passes the enabled ones, as Ganeti does.
    """
    dts = constants.DISK_TEMPLATES if disk_templates is None else disk_templates
    return {ISPECS_MINMAX: [{ISPECS_MIN: default_min_spec(), ISPECS_MAX: default_max_spec()}],
            ISPECS_STD: default_min_spec(),
            IPOLICY_DTS: sorted(set(dts)),
            IPOLICY_VCPU_RATIO: 4.0,
            IPOLICY_SPINDLE_RATIO: 32.0}


def _invalid(msg: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(f"Invalid instance policy: {msg}", errors.ECODE_INVAL)


def parse_spec_value(name: str, value: Any) -> int:
    """Convert one spec value (an int, or a CLI string) to an integer.

    Sizes (``memory-size``, ``disk-size``) accept units ("512M", "4G");
    the others must be plain integers.  Negative values are refused.
    """
    if name not in ISPECS_PARAMETERS:
        raise _invalid(f"unknown instance spec '{name}' (known:"
                       f" {', '.join(ISPECS_PARAMETERS)})")
    if isinstance(value, bool):
        raise _invalid(f"{name} value {value!r} is not an integer")
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str):
        try:
            result = units.parse_unit(value) if name in ISPECS_SIZES else int(value.strip())
        except (errors.UnitParseError, ValueError) as exc:
            raise _invalid(f"{name} value {value!r} is not an integer") from exc
    else:
        raise _invalid(f"{name} value {value!r} is not an integer")
    if result < 0:
        raise _invalid(f"{name} value {value!r} is negative")
    return result


def check_ispec(spec: Any, where: str, *, complete: bool = True) -> dict[str, int]:
    """Validate one SPEC dict and return it converted to integers.

    With ``complete`` every key of :data:`ISPECS_PARAMETERS` is required
    (``min`` and ``max`` of a ``minmax`` pair); ``std`` changes may be
    partial.
    """
    if not isinstance(spec, Mapping):
        raise _invalid(f"{where} must be a dictionary, got {spec!r}")
    result = {str(k): parse_spec_value(str(k), v) for k, v in spec.items()}
    missing = [k for k in ISPECS_PARAMETERS if k not in result]
    if complete and missing:
        raise _invalid(f"missing instance specs in {where}: {', '.join(missing)}")
    return result


def _check_minmax(minmax: Any) -> list[dict[str, dict[str, int]]]:
    if not isinstance(minmax, list) or not minmax:
        raise _invalid(f"'{ISPECS_MINMAX}' must be a non-empty list of min/max pairs")
    pairs = []
    for idx, pair in enumerate(minmax):
        if not isinstance(pair, Mapping) or set(pair) != _MINMAX_KEYS:
            raise _invalid(f"{ISPECS_MINMAX}[{idx}] must have exactly the keys 'min' and"
                           f" 'max', got {pair!r}")
        low = check_ispec(pair[ISPECS_MIN], f"{ISPECS_MINMAX}[{idx}]/min")
        high = check_ispec(pair[ISPECS_MAX], f"{ISPECS_MINMAX}[{idx}]/max")
        for name in ISPECS_PARAMETERS:
            if low[name] > high[name]:
                raise _invalid(f"{ISPECS_MINMAX}[{idx}]: min {name} {low[name]} is greater"
                               f" than max {high[name]}")
        pairs.append({ISPECS_MIN: low, ISPECS_MAX: high})
    return pairs


def _in_pair(spec: Mapping[str, int], pair: Mapping[str, Mapping[str, int]]) -> bool:
    return all(pair[ISPECS_MIN][k] <= spec[k] <= pair[ISPECS_MAX][k] for k in ISPECS_PARAMETERS)


def _check_ratio(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise _invalid(f"'{key}' must be a positive number, got {value!r}")
    try:
        result = float(value)
    except (TypeError, ValueError) as exc:
        raise _invalid(f"'{key}' must be a positive number, got {value!r}") from exc
    if not math.isfinite(result) or result <= 0:
        raise _invalid(f"'{key}' must be a positive number, got {value!r}")
    return result


def _check_dts(value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise _invalid(f"'{IPOLICY_DTS}' must be a list of disk templates, got {value!r}")
    dts = list(value)
    unknown = sorted(str(d) for d in dts if d not in constants.DISK_TEMPLATES)
    if unknown:
        raise _invalid(f"unknown disk template(s) in '{IPOLICY_DTS}': {', '.join(unknown)}")
    return sorted(set(dts))


def _check_keys(policy: Mapping[str, Any]) -> None:
    unknown = sorted(str(k) for k in policy if k not in IPOLICY_ALL_KEYS)
    if unknown:
        raise _invalid(f"unknown key(s) {', '.join(unknown)} (known:"
                       f" {', '.join(IPOLICY_ALL_KEYS)})")


def check_ipolicy(policy: Any, *, check_std: bool = True) -> dict[str, Any]:
    """Validate a complete policy and return it normalised (a new dict).

    Every key of :data:`IPOLICY_ALL_KEYS` must be present (``std`` only
    when ``check_std``; a group's filled policy is checked without it).
    Each ``minmax`` pair needs every spec in ``min`` and ``max`` with
    ``min <= max``; ``std`` must lie inside one pair; the ratios are
    positive floats; disk templates must be known.  Raises
    :class:`errors.OpPrereqError` (``ECODE_INVAL``) naming the fault.
    """
    if not isinstance(policy, Mapping):
        raise _invalid(f"expected a dictionary, got {policy!r}")
    _check_keys(policy)
    required = [k for k in IPOLICY_ALL_KEYS if k != ISPECS_STD or check_std]
    missing = [k for k in required if k not in policy]
    if missing:
        raise _invalid(f"missing key(s) {', '.join(missing)}")
    result: dict[str, Any] = {ISPECS_MINMAX: _check_minmax(policy[ISPECS_MINMAX]),
                              IPOLICY_DTS: _check_dts(policy[IPOLICY_DTS])}
    for key in IPOLICY_PARAMETERS:
        result[key] = _check_ratio(key, policy[key])
    if ISPECS_STD in policy:
        std = check_ispec(policy[ISPECS_STD], ISPECS_STD)
        if check_std and not any(_in_pair(std, pair) for pair in result[ISPECS_MINMAX]):
            shown = ", ".join(f"{k}={std[k]}" for k in ISPECS_PARAMETERS)
            raise _invalid(f"the std specs ({shown}) are not inside any min/max pair")
        result[ISPECS_STD] = std
    return result


def update_ipolicy(current: Mapping[str, Any] | None, changes: Mapping[str, Any] | None,
                   *, group: bool = False) -> dict[str, Any]:
    """Apply a change set to a stored policy and return the new stored policy.

    ``minmax`` and ``disk-templates`` are replaced whole, ``std`` is
    merged key by key, the ratios become floats.  At group level
    (``group=True``) a value of ``"default"``, ``None`` or an empty
    value removes the key (back to the cluster's) and ``std`` is refused,
    as in Ganeti; at cluster level nothing can be unset.  Only the
    changed keys are validated here; callers check the filled result
    with :func:`check_ipolicy`.
    """
    result = copy.deepcopy(dict(current or {}))
    changes = changes or {}
    if not isinstance(changes, Mapping):
        raise _invalid(f"expected a dictionary of changes, got {changes!r}")
    _check_keys(changes)
    for key, value in changes.items():
        if value is None or value == VALUE_DEFAULT or value == [VALUE_DEFAULT] or value == {}:
            if not group:
                raise _invalid(f"cannot unset '{key}' at the cluster level")
            result.pop(key, None)
            continue
        if key == ISPECS_STD:
            if group:
                raise _invalid(f"'{ISPECS_STD}' cannot be set in a group's policy")
            result[key] = {**result.get(key, {}), **check_ispec(value, ISPECS_STD,
                                                                complete=False)}
        elif key == ISPECS_MINMAX:
            result[key] = _check_minmax(value)
        elif key == IPOLICY_DTS:
            result[key] = _check_dts(value)
        else:
            result[key] = _check_ratio(key, value)
    return result


def fill_ipolicy(cluster: Mapping[str, Any], group: Mapping[str, Any] | None) -> dict[str, Any]:
    """The effective policy of a group: its keys over the cluster's (a new dict).

    A group key replaces the cluster's whole, except ``std`` which is
    merged (Ganeti's rule; groups cannot set ``std`` through the API, but
    a hand-edited config may).
    """
    result = copy.deepcopy(dict(cluster))
    for key, value in (group or {}).items():
        if key == ISPECS_STD:
            result[key] = {**result.get(key, {}), **copy.deepcopy(value)}
        else:
            result[key] = copy.deepcopy(value)
    return result


def upgrade_ipolicy(policy: Mapping[str, Any] | None, *, group: bool) -> dict[str, Any]:
    """A stored policy of an older configuration brought to the current format.

    Older Ganeti versions kept one bound pair as top-level ``min`` and
    ``max`` keys; those become a single ``minmax`` pair.  At cluster level
    missing keys and missing specs are filled from the defaults, so that
    the policy is complete.  A current policy comes back unchanged.
    """
    result = copy.deepcopy(dict(policy or {}))
    if ISPECS_MIN in result or ISPECS_MAX in result:
        low, high = result.pop(ISPECS_MIN, {}), result.pop(ISPECS_MAX, {})
        if ISPECS_MINMAX not in result:
            result[ISPECS_MINMAX] = [{ISPECS_MIN: low, ISPECS_MAX: high}]
    if group:
        return result
    defaults = default_ipolicy()
    filled = fill_ipolicy(defaults, result)
    filled[ISPECS_STD] = {**defaults[ISPECS_STD], **filled[ISPECS_STD]}
    filled[ISPECS_MINMAX] = [
        {ISPECS_MIN: {**default_min_spec(), **pair.get(ISPECS_MIN, {})},
         ISPECS_MAX: {**default_max_spec(), **pair.get(ISPECS_MAX, {})}}
        for pair in filled[ISPECS_MINMAX] if isinstance(pair, Mapping)] or \
        defaults[ISPECS_MINMAX]
    return filled


def make_spec(*, memory_size: int | None, cpu_count: int | None, disk_sizes: Sequence[int],
              nic_count: int, spindle_use: int | None) -> dict[str, Any]:
    """An instance spec for :func:`compute_violations`; ``disk-size`` is a list."""
    return {ISPEC_MEM_SIZE: memory_size, ISPEC_CPU_COUNT: cpu_count,
            ISPEC_DISK_COUNT: len(disk_sizes), ISPEC_DISK_SIZE: list(disk_sizes),
            ISPEC_NIC_COUNT: nic_count, ISPEC_SPINDLE_USE: spindle_use}


def _range_violation(name: str, value: Any, pair: Mapping[str, Mapping[str, int]]) -> str | None:
    if value is None or value == _VALUE_AUTO:
        return None
    base = name.split("/", 1)[0]
    low, high = pair[ISPECS_MIN][base], pair[ISPECS_MAX][base]
    if low <= value <= high:
        return None
    return f"{name} value {value} is not in range [{low}, {high}]"


def compute_violations(policy: Mapping[str, Any], spec: Mapping[str, Any],
                       disk_template: str | None = None) -> list[str]:
    """The ways ``spec`` breaks the filled ``policy``; empty when it conforms.

    ``spec`` maps spec names to values (``disk-size``: a list of sizes, one
    per disk, or a single int); a value of ``None`` or a missing key is not
    checked.  ``disk-count`` is not checked for ``diskless`` instances.
    ``disk_template`` (if given) must be in ``disk-templates``.  Against
    several ``minmax`` pairs the messages of the best-fitting pair (fewest
    violations) are returned, as Ganeti does.  Each message names the spec
    and the value: ``"disk-size/0 value 100 is not in range [1024, 1048576]"``.
    """
    result = []
    if disk_template is not None and disk_template not in policy.get(IPOLICY_DTS, ()):
        allowed = ", ".join(policy.get(IPOLICY_DTS, ())) or "none"
        result.append(f"Disk template {disk_template} is not allowed (allowed templates:"
                      f" {allowed})")
    tests: list[tuple[str, Any]] = [
        (name, spec.get(name))
        for name in (ISPEC_MEM_SIZE, ISPEC_CPU_COUNT, ISPEC_NIC_COUNT, ISPEC_SPINDLE_USE)]
    if disk_template != constants.DT_DISKLESS:
        tests.append((ISPEC_DISK_COUNT, spec.get(ISPEC_DISK_COUNT)))
    sizes = spec.get(ISPEC_DISK_SIZE)
    if isinstance(sizes, int):
        sizes = [sizes]
    tests.extend((f"{ISPEC_DISK_SIZE}/{idx}", size) for idx, size in enumerate(sizes or ()))
    best: list[str] | None = None
    for pair in policy.get(ISPECS_MINMAX, ()):
        found = [msg for name, value in tests
                 if (msg := _range_violation(name, value, pair)) is not None]
        if best is None or len(found) < len(best):
            best = found
    return result + (best or [])


def format_violations(violations: Sequence[str]) -> str:
    """Join violation messages for an error or a warning (comma-separated)."""
    return ", ".join(violations)
