"""Syntax checks of hypervisor parameter values (pure; master and node).

Each ``check_*`` function takes an already type-converted value and returns
an error text or ``None``; :mod:`ganeti.parameters` attaches them to the
hypervisor parameter table, so ``gnt-instance add/modify`` and
``gnt-cluster modify`` refuse bad values on the master before any node is
asked.  :func:`parse_cpu_mask` is shared with the kvm hypervisor, which
applies the mask to its vCPU threads (doc/kvm.md).
"""

from __future__ import annotations

import ipaddress
import shlex
from typing import Any

__all__ = ["CPU_MASK_ALL", "parse_cpu_list", "parse_cpu_mask", "check_cpu_mask",
           "check_abs_path", "check_optional_abs_path", "check_shell_words",
           "check_bind_address", "check_no_space"]

#: The cpu_mask value meaning "no pinning".
CPU_MASK_ALL = "all"
#: Highest CPU number accepted in a mask.
MAX_CPU = 65535


def parse_cpu_list(text: str) -> list[int] | None:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]``; ``"all"`` -> ``None``.

    Raises ValueError for anything else (empty parts, reversed ranges,
    numbers above :data:`MAX_CPU`).
    """
    text = text.strip()
    if text == CPU_MASK_ALL:
        return None
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo_text, sep, hi_text = part.partition("-")
        if not lo_text.isdigit() or (sep and not hi_text.isdigit()):
            raise ValueError(f"invalid CPU list element {part!r}")
        lo = int(lo_text)
        hi = int(hi_text) if sep else lo
        if hi < lo or hi > MAX_CPU:
            raise ValueError(f"invalid CPU range {part!r}")
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def parse_cpu_mask(text: str) -> list[list[int] | None]:
    """A cpu_mask as upstream writes it: one list for all vCPUs, or one per vCPU.

    ``"all"`` -> ``[None]``; ``"0-1"`` -> ``[[0, 1]]``;
    ``"0:1-2:all"`` -> ``[[0], [1, 2], None]`` (vCPU 0 on CPU 0, ...).
    Raises ValueError on bad syntax.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty CPU mask")
    return [parse_cpu_list(part) for part in text.split(":")]


def check_cpu_mask(value: Any) -> str | None:
    """ParamDef check for ``cpu_mask``."""
    try:
        parse_cpu_mask(value)
    except ValueError as exc:
        return f"{exc} (expected e.g. 'all', '0-3', '0,2' or '0:1:2-3' per vCPU)"
    return None


def check_abs_path(value: Any) -> str | None:
    """A non-empty absolute path."""
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        return "must be an absolute path"
    return None


def check_optional_abs_path(value: Any) -> str | None:
    """Empty (not used) or an absolute path."""
    return None if value == "" else check_abs_path(value)


def check_shell_words(value: Any) -> str | None:
    """Text splittable into words as by a POSIX shell (quotes balanced)."""
    try:
        shlex.split(value)
    except ValueError as exc:
        return f"cannot be split into words: {exc}"
    return None


def check_bind_address(value: Any) -> str | None:
    """Empty, an IPv4/IPv6 address, or a network interface name."""
    if value == "":
        return None
    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        pass
    if (len(value) <= 15 and value[0].isalpha()
            and all(c.isalnum() or c in "-_." for c in value)):
        return None
    return "must be an IP address or an interface name"


def check_no_space(value: Any) -> str | None:
    """A single word (no whitespace)."""
    if any(c.isspace() for c in value):
        return "must not contain whitespace"
    return None
