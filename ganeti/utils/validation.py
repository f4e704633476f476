"""Strict validators for names that end up in paths, commands and configs."""

from __future__ import annotations

import re

from ganeti import constants, errors

__all__ = ["is_valid_hostname", "check_hostname", "is_valid_script_name",
           "check_script_name", "check_tag", "check_vg_name", "check_lvm_templates"]

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_SCRIPT_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
_TAG_RE = re.compile(r"^[\w.+*/:@-]+$")
_VG_NAME_RE = re.compile(r"^[A-Za-z0-9+_.][A-Za-z0-9+_.-]{0,126}$")
MAX_HOSTNAME_LEN = 253


def is_valid_hostname(name: object) -> bool:
    """True for an RFC 1123 host name (also used for instance names).

    Refuses empty names, names over 253 characters, path separators,
    ``..``, control characters and labels over 63 characters.
    """
    return (isinstance(name, str) and 0 < len(name) <= MAX_HOSTNAME_LEN
            and _HOSTNAME_RE.fullmatch(name) is not None)


def check_hostname(name: object, what: str = "name") -> str:
    """Return ``name`` lower-cased, or raise :class:`errors.OpPrereqError`."""
    if not is_valid_hostname(name):
        raise errors.OpPrereqError(f"Invalid {what} {name!r}: must be a valid"
                                   " host name (letters, digits, '-' and '.')",
                                   errors.ECODE_INVAL)
    assert isinstance(name, str)
    return name.lower()


def is_valid_script_name(name: object) -> bool:
    """True when ``name`` matches ``^[a-zA-Z0-9_-]+$`` (hooks, OS scripts)."""
    return isinstance(name, str) and _SCRIPT_RE.fullmatch(name) is not None


def check_script_name(name: object) -> str:
    """Return ``name`` or raise :class:`errors.OpPrereqError`."""
    if not is_valid_script_name(name):
        raise errors.OpPrereqError(f"Invalid script name {name!r}", errors.ECODE_INVAL)
    assert isinstance(name, str)
    return name


def check_tag(tag: object) -> str:
    """Return ``tag`` or raise :class:`errors.TagError` explaining why not."""
    if not isinstance(tag, str):
        raise errors.TagError(f"Invalid tag type {type(tag).__name__} (not a string)")
    if not tag:
        raise errors.TagError("Tags cannot be empty")
    if len(tag) > constants.MAX_TAG_LEN:
        raise errors.TagError(f"Tag too long (>{constants.MAX_TAG_LEN} characters)")
    if not _TAG_RE.fullmatch(tag):
        raise errors.TagError(f"Tag contains invalid characters: {tag!r}")
    return tag


def check_vg_name(name: object) -> str:
    """``name`` if it is a valid LVM volume group name (``lvm(8)``: letters,
    digits, ``+_.-``, not starting with ``-``, not ``.``/``..``, at most 127
    characters), else :class:`errors.OpPrereqError`."""
    if not isinstance(name, str) or name in (".", "..") or not _VG_NAME_RE.match(name):
        raise errors.OpPrereqError(f"Invalid volume group name {name!r}", errors.ECODE_INVAL)
    return name


def check_lvm_templates(enabled_templates: list[str], vg_name: str | None) -> None:
    """Ganeti's rule: an LVM based template (``plain``, ``drbd``) may only be
    enabled when the cluster has a volume group name (``--vg-name``)."""
    lvm = [t for t in enabled_templates if t in constants.DTS_LVM]
    if lvm and not vg_name:
        raise errors.OpPrereqError(
            f"Disk template(s) {', '.join(lvm)} need a volume group: give one with --vg-name"
            " (or do not enable them)", errors.ECODE_INVAL)
