"""The master's OS image store (``gnt-os image add|list|remove``; doc/images.md).

Images live under ``<data dir>/os-image-store``: ``images/<name>`` and the
index ``index.json`` (:mod:`ganeti.impexp.imagestore`).  An image is copied
(from a master's file) or downloaded (an http(s) URL) into a temporary file
``images/.<name>.tmp*``, checked (format, checksum), and only then renamed
to its name and entered in the index, so a full disk or a bad image leaves
neither a file under its name nor an entry.  An install from a store image
holds it in use (:func:`using`): a removal is refused meanwhile.  The LUs of
``gnt-os image`` are in :mod:`ganeti.cmdlib.os_image_lu`, the copies on the
master candidates in :mod:`ganeti.cmdlib.os_image_replica`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Iterator

from ganeti import errors
from ganeti.impexp import imagestore, osimage
from ganeti.pathutils import Paths
from ganeti.utils.io import write_file_atomic

__all__ = ["index_path", "image_path", "stored_file", "read_index", "lookup", "using",
           "add_image", "remove_image"]

FETCH_TIMEOUT = 30.0
_BLOCK = 1024 * 1024
#: serialises changes of the index (the master is one process)
_LOCK = threading.Lock()
#: store images being installed from, with their number of users
_IN_USE: dict[str, int] = {}


def index_path(paths: Paths) -> str:
    return paths.os_image_store_index


def image_path(paths: Paths, name: str) -> str:
    return os.path.join(paths.os_image_store_dir, "images", imagestore.check_name(name))


def read_index(paths: Paths) -> dict[str, dict[str, Any]]:
    """The store's entries by name (empty when there is no store yet)."""
    try:
        with open(index_path(paths), encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return {}
    return imagestore.parse_index(text)


def _write_index(paths: Paths, entries: dict[str, dict[str, Any]]) -> None:
    os.makedirs(paths.os_image_store_dir, mode=0o700, exist_ok=True)
    write_file_atomic(index_path(paths), imagestore.dump_index(entries), mode=0o600)


def lookup(paths: Paths, name: str) -> dict[str, Any]:
    """The entry of store image ``name``; :class:`errors.OpPrereqError` when unknown."""
    imagestore.check_name(name)
    entry = read_index(paths).get(name)
    if entry is None:
        raise errors.OpPrereqError(f"OS image {name} is not in the image store"
                                   " (gnt-os image list)", errors.ECODE_NOENT)
    return entry


def stored_file(paths: Paths, name: str, entry: dict[str, Any]) -> str:
    """The file holding store image ``name``'s bytes on this master.

    ``images/<name>``; on a master that took the role over from another, the
    node cache's copy the old master replicated to it (named by the recorded
    sha256; doc/images.md, "Replication").  :class:`errors.OpPrereqError` when
    neither is here."""
    own = image_path(paths, name)
    if os.path.isfile(own):
        return own
    cached = os.path.join(paths.os_image_cache_dir, str(entry["sha256"]))
    if os.path.isfile(cached):
        return cached
    raise errors.OpPrereqError(f"OS image {name} is in the store's index but this master has"
                               " no copy of it (it was added while this node could not be"
                               " reached as a master candidate): gnt-os image remove it and"
                               " add it again", errors.ECODE_ENVIRON)


@contextlib.contextmanager
def using(name: str) -> Iterator[None]:
    """Hold store image ``name`` in use (an install reads it): no removal meanwhile."""
    with _LOCK:
        _IN_USE[name] = _IN_USE.get(name, 0) + 1
    try:
        yield
    finally:
        with _LOCK:
            _IN_USE[name] -= 1
            if not _IN_USE[name]:
                del _IN_USE[name]


def _open_source(source: str) -> Any:
    if osimage.is_url(source):
        if not source.startswith(("http://", "https://")):
            raise errors.OpPrereqError(f"Image source {source}: only http(s) URLs or absolute"
                                       " paths of the master", errors.ECODE_INVAL)
        return urllib.request.urlopen(source, timeout=FETCH_TIMEOUT)
    if not os.path.isabs(source):
        raise errors.OpPrereqError(f"Image source must be an absolute path on the master or"
                                   f" an http(s) URL: {source}", errors.ECODE_INVAL)
    return open(source, "rb")


def add_image(paths: Paths, name: str, source: str, checksum: str | None,
              now: float | None = None) -> dict[str, Any]:
    """Copy ``source`` into the store as ``name``, check it, and enter it; its entry.

    Nothing is left under the name, nor in the index, when this raises.
    """
    imagestore.check_name(name)
    want = osimage.parse_checksum(checksum) if checksum is not None else None
    if name in read_index(paths):
        raise errors.OpPrereqError(f"OS image {name} is already in the store",
                                   errors.ECODE_EXISTS)
    final = image_path(paths, name)
    os.makedirs(os.path.dirname(final), mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.tmp", dir=os.path.dirname(final))
    try:
        digest, header, size = hashlib.sha256(), b"", 0
        with os.fdopen(fd, "wb") as out:
            try:
                with _open_source(source) as src:
                    for block in iter(lambda: src.read(_BLOCK), b""):
                        if len(header) < osimage.HEADER_SIZE:
                            header += block[:osimage.HEADER_SIZE - len(header)]
                        digest.update(block)
                        size += len(block)
                        out.write(block)
            except (urllib.error.URLError, ValueError) as exc:
                raise errors.OpPrereqError(f"Cannot fetch OS image {source}: {exc}",
                                           errors.ECODE_ENVIRON) from None
            except OSError as exc:
                raise errors.OpPrereqError(f"Cannot copy OS image {source} into the store:"
                                           f" {exc}", errors.ECODE_ENVIRON) from None
            out.flush()
            os.fsync(out.fileno())
        facts = osimage.facts(header, size, digest.hexdigest())
        if facts["format"] is None:
            raise errors.OpPrereqError(f"OS image {source} is neither a qcow2 image nor a raw"
                                       " disk image (no partition table or file system"
                                       " found)", errors.ECODE_INVAL)
        if want is not None and facts["sha256"] != want:
            raise errors.OpPrereqError(f"OS image {source}: checksum mismatch (expected"
                                       f" sha256:{want}, got sha256:{facts['sha256']})",
                                       errors.ECODE_INVAL)
        entry = imagestore.make_entry(name, facts, source, time.time() if now is None else now)
        with _LOCK:
            entries = read_index(paths)
            if name in entries:
                raise errors.OpPrereqError(f"OS image {name} is already in the store",
                                           errors.ECODE_EXISTS)
            os.replace(tmp, final)
            entries[name] = entry
            try:
                _write_index(paths, entries)
            except BaseException:
                os.unlink(final)
                raise
        return entry
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def remove_image(paths: Paths, name: str) -> dict[str, Any]:
    """Remove store image ``name`` (refused while an install uses it); its entry."""
    imagestore.check_name(name)
    with _LOCK:
        entries = read_index(paths)
        entry = entries.pop(name, None)
        if entry is None:
            raise errors.OpPrereqError(f"OS image {name} is not in the image store",
                                       errors.ECODE_NOENT)
        if _IN_USE.get(name):
            raise errors.OpPrereqError(f"OS image {name} is being installed from; try again"
                                       " when that job is done", errors.ECODE_STATE)
        _write_index(paths, entries)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(image_path(paths, name))
    return entry
