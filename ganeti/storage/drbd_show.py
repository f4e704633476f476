"""What a DRBD 8.4 device is set up with, from ``drbdsetup show <minor>``; pure.

``/proc/drbd`` tells a device's state, not whom it talks to nor which
volumes it uses.  ``drbdsetup show`` prints the configuration in its own
block syntax; the parts read here are::

    resource resource0 {
        ...
        _remote_host {
            address         ipv4 10.0.0.2:11000;
        }
        _this_host {
            address         ipv4 10.0.0.1:11000;
            volume 0 {
                device      minor 0;
                disk        "/dev/xenvg/<uuid>.disk0_data";
                meta-disk   "/dev/xenvg/<uuid>.disk0_meta" [ 0 ];
            }
        }
    }

(the secret in the ``net`` section is never read).  :func:`mismatch` says
how such a setup differs from the one the configuration wants: a wrong
peer (doc/storage.md, "DRBD": ``gnt-cluster verify`` reports it, assembling
the disk connects it again to the right one) or other volumes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DrbdShow", "parse_show", "mismatch"]

_REMOTE_RE = re.compile(r"_remote_host\s*\{[^}]*?address\s+\S+\s+([^;\s]+)\s*;", re.S)
_THIS_RE = re.compile(r"_this_host\s*\{[^{}]*?address\s+\S+\s+([^;\s]+)\s*;", re.S)
_DISK_RE = re.compile(r"^\s*disk\s+\"([^\"]+)\"\s*;", re.M)
_META_RE = re.compile(r"^\s*meta-disk\s+\"([^\"]+)\"", re.M)


@dataclass(frozen=True)
class DrbdShow:
    """A device's setup: ``address:port`` of both ends (None: not connected/configured)
    and its data and metadata volumes (None: diskless)."""

    local: str | None = None
    remote: str | None = None
    disk: str | None = None
    meta: str | None = None


def parse_show(text: str) -> DrbdShow:
    """The parts of ``drbdsetup show`` output this project checks."""
    def first(regex: re.Pattern[str]) -> str | None:
        found = regex.search(text)
        return found.group(1) if found else None
    return DrbdShow(local=first(_THIS_RE), remote=first(_REMOTE_RE), disk=first(_DISK_RE),
                    meta=first(_META_RE))


def mismatch(shown: DrbdShow, *, local: str, remote: str, disk: str,
             meta: str) -> str | None:
    """How ``shown`` differs from the wanted setup (``address:port`` of both ends, the
    volumes' paths); None when it does not (parts not set up are not compared)."""
    if shown.remote is not None and shown.remote != remote:
        return f"is connected to the wrong peer {shown.remote} (configured: {remote})"
    if shown.local is not None and shown.local != local:
        return f"listens on the wrong address {shown.local} (configured: {local})"
    if shown.disk is not None and shown.disk != disk:
        return f"uses the wrong data volume {shown.disk} (configured: {disk})"
    if shown.meta is not None and shown.meta != meta:
        return f"uses the wrong metadata volume {shown.meta} (configured: {meta})"
    return None
