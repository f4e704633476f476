"""Node side of the taker's catch-up: this node's job log, and job files on request.

doc/design/failover.md, "Catching up before the vote": a node about to
take the master role asks every master candidate which job ids it holds
(:func:`jobqueue_log`) and fetches the ones it lacks (:func:`jobqueue_fetch`).
Both only read; the queue directory is not trusted (a symbolic link or a
non-regular entry is skipped, see :func:`ganeti.utils.io.read_regular_file`).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from ganeti import errors
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, URGENT, procedure
from ganeti.pathutils import archived_job_file_name, job_file_name
from ganeti.utils import io as uio
from ganeti.utils.idranges import to_ranges

__all__ = ["jobqueue_log", "jobqueue_fetch"]

logger = logging.getLogger(__name__)

_JOB_RE = re.compile(r"job-([1-9][0-9]*)")
#: bytes of job files one ``jobqueue_fetch`` answer carries at most (the
#: caller asks again for the rest); a single larger file still goes alone
FETCH_MAX_BYTES = 8 << 20
QUEUE = "queue"
ARCHIVE = "archive"


def _ids_in(directory: str) -> set[int]:
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {int(m.group(1)) for m in map(_JOB_RE.fullmatch, names) if m}


def held_job_ids(queue_dir: str, archive_dir: str) -> set[int]:
    """Every job id with a file in the queue or in its archive."""
    ids = _ids_in(queue_dir)
    try:
        buckets = [d for d in os.listdir(archive_dir) if d.isdigit()]
    except OSError:
        buckets = []
    for bucket in buckets:
        ids |= _ids_in(os.path.join(archive_dir, bucket))
    return ids


@procedure(URGENT)
def jobqueue_log(ctx: NodeContext) -> dict[str, Any]:
    """This node's job log: {ids: [[first, last], ...] of every job file in the queue and its
    archive, serial: the queue serial}.

    ``{"ids": [[first, last], ...], "serial": queue serial}`` of this node's queue.
    """
    paths = ctx.paths
    try:
        raw = uio.read_regular_file(paths.queue_serial_file)
        serial = int((raw or b"0").strip() or b"0")
    except (errors.UntrustedFileError, ValueError) as exc:
        raise errors.OpExecError(f"Unreadable queue serial: {exc}") from exc
    return {"ids": to_ranges(held_job_ids(paths.queue_dir, paths.queue_archive_dir)),
            "serial": serial}


@procedure(FAST)
def jobqueue_fetch(ctx: NodeContext, job_ids: list) -> list[list[Any]]:
    """[[id, 'queue'|'archive', content], ...] of those job ids held here (at most about 8 MiB
    per answer; ask again for the rest).

    ``[[id, "queue"|"archive", content], ...]`` for the ids of ``job_ids`` held here.

    Ids not held are left out; the answer stops before
    :data:`FETCH_MAX_BYTES` (at least one file), so the caller asks again
    for what is still missing.
    """
    if not isinstance(job_ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in job_ids):
        raise errors.OpExecError("job_ids must be a list of positive job ids")
    paths = ctx.paths
    out: list[list[Any]] = []
    size = 0
    for job_id in job_ids:
        for where, path in ((QUEUE, job_file_name(paths.queue_dir, job_id)),
                            (ARCHIVE, archived_job_file_name(paths.queue_archive_dir, job_id))):
            try:
                data = uio.read_regular_file(path)
            except errors.UntrustedFileError as exc:
                logger.error("Not sending untrusted queue entry: %s", exc)
                continue
            if data is None:
                continue
            if out and size + len(data) > FETCH_MAX_BYTES:
                return out
            out.append([job_id, where, data.decode("utf-8", "replace")])
            size += len(data)
            break
    return out
