"""The OS image store: names, its index and what an ``os-image`` names (pure; doc/images.md).

The master keeps images under ``<data dir>/os-image-store``: the files in
``images/<name>`` and an index ``index.json``, one entry per image (name,
format, size, virtual size, sha256, source, time added).  An ``os-image``
value is a URL (fetched by the node), an absolute path (a file of the
master, else of the primary node) or, with no ``/`` at all, the name of a
store image.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ganeti import errors
from ganeti.impexp import osimage

__all__ = ["INDEX_VERSION", "NAME_RE", "ENTRY_KEYS", "check_name", "kind_of", "parse_index",
           "dump_index", "make_entry", "short_checksum"]

INDEX_VERSION = 1
ENTRY_KEYS = ("name", "format", "size", "virtual_size", "sha256", "source", "added")
#: a store image's name (also checked by the instance opcodes)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")
_HEX_RE = re.compile(r"^[0-9a-f]{64}$")


def check_name(name: str) -> str:
    """``name`` when it is a valid store name (a safe file name); else
    :class:`errors.OpPrereqError`.

    Letters, digits, ``.``, ``_``, ``+`` and ``-``, starting with a letter or
    digit, at most 100 characters: no ``/``, no hidden or temporary names; not
    ``default`` (what resets an OS parameter in a change).
    """
    if not isinstance(name, str) or not NAME_RE.match(name) or name == "default":
        raise errors.OpPrereqError(
            f"Invalid image name {name!r}: 1-100 letters, digits, '.', '_', '+' or '-',"
            " starting with a letter or digit", errors.ECODE_INVAL)
    return name


def kind_of(image: str) -> str:
    """What an ``os-image`` value is: ``"url"``, ``"path"`` or ``"store"``.

    A URL has a scheme (``http://`` ...); a value with a ``/`` is a path
    (a relative one is refused where it is used); the rest names a store image.
    """
    if osimage.is_url(image):
        return "url"
    if "/" in image:
        return "path"
    return "store"


def make_entry(name: str, facts: dict[str, Any], source: str, added: float) -> dict[str, Any]:
    """The index entry of an image from its facts (:func:`osimage.facts`)."""
    check_name(name)
    if facts.get("format") not in osimage.FORMATS:
        raise errors.OpPrereqError(f"Image {name}: unknown format {facts.get('format')!r}",
                                   errors.ECODE_INVAL)
    return {"name": name, "format": str(facts["format"]), "size": int(facts["size"]),
            "virtual_size": int(facts["virtual_size"]), "sha256": str(facts["sha256"]),
            "source": str(source), "added": float(added)}


def _check_entry(name: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict) or set(entry) != set(ENTRY_KEYS):
        raise errors.ConfigurationError(f"Image store index: bad entry {name!r}")
    check_name(entry["name"])
    if entry["name"] != name or entry["format"] not in osimage.FORMATS \
            or not isinstance(entry["sha256"], str) or not _HEX_RE.match(entry["sha256"]) \
            or not all(isinstance(entry[k], int) and entry[k] >= 0
                       for k in ("size", "virtual_size")) \
            or not isinstance(entry["added"], (int, float)) \
            or not isinstance(entry["source"], str):
        raise errors.ConfigurationError(f"Image store index: bad entry {name!r}")
    return dict(entry)


def parse_index(text: str) -> dict[str, dict[str, Any]]:
    """The entries of an index file's text, by name; an empty text is an empty
    store.  :class:`errors.ConfigurationError` for anything malformed."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise errors.ConfigurationError(f"Image store index is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != INDEX_VERSION \
            or not isinstance(data.get("images"), dict):
        raise errors.ConfigurationError("Image store index: unknown layout or version")
    return {name: _check_entry(name, entry) for name, entry in data["images"].items()}


def dump_index(entries: dict[str, dict[str, Any]]) -> str:
    """The index file's text for ``entries`` (sorted, stable)."""
    for name, entry in entries.items():
        _check_entry(name, entry)
    return json.dumps({"version": INDEX_VERSION, "images": entries}, sort_keys=True,
                      indent=1) + "\n"


def short_checksum(sha256: str) -> str:
    """The checksum as listed: ``sha256:`` and its first 12 hex digits."""
    return f"sha256:{sha256[:12]}"
