"""Cluster files pushed by the master: upload_file and write_ssconf_files.

Only an allow-list of files can be written (:func:`allowed_upload_files`);
everything else is refused, so a compromised or buggy master cannot make a
node daemon write arbitrary paths.
"""

from __future__ import annotations

import logging
import os
import re

from ganeti import errors, ssconf
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, procedure
from ganeti.pathutils import Paths
from ganeti.utils import io as uio

__all__ = ["upload_file", "write_ssconf_files"]

logger = logging.getLogger(__name__)

SSCONF_KEY_RE = re.compile(r"^[a-z0-9_-]+$")
MAX_UPLOAD_SIZE = 64 * 1024 * 1024
#: the permission bits a cluster file may have: read/write for owner and
#: group, read for others (no execute, no world write, no setuid, setgid or
#: sticky bit)
ALLOWED_MODE_BITS = 0o664


def allowed_upload_files() -> frozenset[str]:
    """Canonical paths ``upload_file`` may write (ssconf files are also allowed)."""
    canon = Paths(root="/")
    return frozenset([
        canon.config_file, canon.server_pem, canon.client_pem, canon.rapi_pem,
        canon.known_hosts_file, canon.rapi_users_file, canon.rapi_tokens_file,
        canon.confd_hmac_key,
        canon.cluster_domain_secret, canon.file_storage_paths_file,
        canon.os_image_store_index,
    ])


def _is_ssconf_name(canonical: str) -> bool:
    canon = Paths(root="/")
    dirname, base = os.path.split(canonical)
    return (dirname == canon.data_dir and base.startswith("ssconf_")
            and SSCONF_KEY_RE.match(base[len("ssconf_"):]) is not None)


def _check_mode_and_owner(file_name: str, mode: int, uid: int | None, gid: int | None) -> None:
    """Refuse a mode outside :data:`ALLOWED_MODE_BITS`, or an owner other than root or us.

    ``uid``/``gid`` may be None (keep the daemon's), 0 (root) or the
    daemon's own effective id: the cluster's files belong to one of those.
    """
    if not 0 <= mode <= 0o7777:
        raise errors.OpExecError(f"Invalid file mode {mode!r} for {file_name}")
    if mode & ~ALLOWED_MODE_BITS:
        raise errors.OpExecError(
            f"Refusing mode {mode:04o} for {file_name}: cluster files may only have the bits"
            f" {ALLOWED_MODE_BITS:04o} (no setuid, setgid, sticky, execute or world write)")
    for kind, value, own in (("uid", uid, os.geteuid()), ("gid", gid, os.getegid())):
        if value is not None and value not in (0, own):
            raise errors.OpExecError(
                f"Refusing {kind} {value} for {file_name}: only root (0) or the node daemon's"
                f" own ({own})")


@procedure(FAST, fenced=True)
def upload_file(ctx: NodeContext, file_name: str, content: str, mode: int,
                uid: int | None, gid: int | None, mtime: float | None) -> None:
    """Write one allow-listed cluster file (canonical path) atomically.

    Write the allow-listed cluster file ``file_name`` (canonical path).

    The file is replaced atomically with ``content`` (UTF-8 text) and gets
    ``mode``, owner ``uid``/``gid`` when given (None keeps the daemon's)
    and modification time ``mtime`` when given.  ``mode`` may only have the
    bits in :data:`ALLOWED_MODE_BITS`; ``uid``/``gid`` may only be root's
    or the daemon's own.  Raises :class:`errors.OpExecError` for a file
    outside the allow-list, a refused mode or owner, or an I/O error.
    """
    upload_bytes(ctx, file_name, content.encode("utf-8"), mode, uid, gid, mtime)


def upload_bytes(ctx: NodeContext, file_name: str, data: bytes, mode: int,
                 uid: int | None, gid: int | None, mtime: float | None) -> None:
    """Like :func:`upload_file` with the content as bytes, written exactly.

    Not an RPC procedure itself (not in ``__all__``): ``replicate_state``
    calls it with the decoded config document.
    """
    canonical = os.path.normpath("/" + file_name.lstrip("/"))
    if file_name != canonical or (canonical not in allowed_upload_files()
                                  and not _is_ssconf_name(canonical)):
        raise errors.OpExecError(f"Refusing to upload {file_name!r}: not an allowed cluster file")
    _check_mode_and_owner(file_name, mode, uid, gid)
    if len(data) > MAX_UPLOAD_SIZE:
        raise errors.OpExecError(f"Refusing to upload {file_name}: larger than {MAX_UPLOAD_SIZE} bytes")
    path = ctx.local_path(canonical)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        uio.write_file_atomic(path, data, mode=mode, uid=uid, gid=gid)
        if mtime is not None:
            os.utime(path, (mtime, mtime))
    except OSError as exc:
        raise errors.OpExecError(f"Cannot write {file_name}: {exc}") from exc
    logger.info("Uploaded %s (%d bytes, mode %o)", file_name, len(data), mode)


@procedure(FAST, fenced=True)
def write_ssconf_files(ctx: NodeContext, values: dict) -> None:
    """Write ssconf_<key> files ({key: text}) and remove stale ones.

    Write ``ssconf_<key>`` for every ``{key: text}`` and remove stale ones.

    Keys must match ``^[a-z0-9_-]+$`` and values be strings; nothing is
    written if any is invalid.  The files are written by
    :func:`ganeti.ssconf.write_ssconf_files` (unchanged files are left
    alone).  Raises :class:`errors.OpExecError`.
    """
    for key, value in values.items():
        if not isinstance(key, str) or not SSCONF_KEY_RE.match(key):
            raise errors.OpExecError(f"Invalid ssconf key {key!r}")
        if not isinstance(value, str):
            raise errors.OpExecError(f"ssconf value for {key!r} must be a string")
    try:
        ssconf.write_ssconf_files(ctx.paths, values)
    except (OSError, errors.GanetiError) as exc:
        raise errors.OpExecError(f"Cannot write ssconf files: {exc}") from exc
