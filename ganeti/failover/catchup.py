"""The taker's catch-up before the vote: fetch the acknowledged jobs it lacks.

doc/design/failover.md, "Catching up before the vote".  :func:`catch_up_jobs`
asks the online master candidates for their job logs (``jobqueue_log``),
lets :func:`ganeti.failover.joblog.plan_catch_up` decide, fetches the
missing job files (``jobqueue_fetch``) and writes them here (into the queue
or the archive, where the holder had them), then raises this node's queue
serial.  :func:`clear_drain_flag` is the new master's other queue step of a
takeover.  Both are called with one line each from the takeover paths
(``gnt-cluster master-failover`` and the master daemon's start-up vote).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from ganeti import errors
from ganeti.failover import joblog
from ganeti.objects import ConfigData
from ganeti.pathutils import Paths, archived_job_file_name, job_file_name
from ganeti.rpc import defs
from ganeti.rpc.client import RpcRunner
from ganeti.utils import io as uio

__all__ = ["catch_up_jobs", "catch_up_before_startup", "clear_drain_flag", "candidate_names",
           "raise_queue_serial", "catch_up_timeout", "CATCH_UP_TIMEOUT", "MIN_CATCH_UP_TIMEOUT"]

logger = logging.getLogger(__name__)

Out = Callable[[str], None]

#: seconds each catch-up request may take per node; scaled by
#: ``--rpc-timeout-scale``, never below :data:`MIN_CATCH_UP_TIMEOUT`
CATCH_UP_TIMEOUT = 20.0
#: the shortest catch-up timeout ``--rpc-timeout-scale`` gives (a loaded node
#: still sends a few MiB of job files within it)
MIN_CATCH_UP_TIMEOUT = 5.0
#: fetch rounds per node at most (each answer carries about 8 MiB)
MAX_FETCH_ROUNDS = 1000


def candidate_names(data: ConfigData, me: str) -> list[str]:
    """The online master candidates of ``data`` (``me`` included), sorted."""
    names = {n.name for n in data.nodes.values() if n.master_candidate and not n.offline}
    return sorted(names | {me})


def catch_up_timeout(rpc: RpcRunner) -> float:
    """Seconds a catch-up request may take per node: :data:`CATCH_UP_TIMEOUT` scaled
    by the runner's ``--rpc-timeout-scale``, at least :data:`MIN_CATCH_UP_TIMEOUT`."""
    return defs.scaled_timeout(CATCH_UP_TIMEOUT, rpc.timeout_scale, MIN_CATCH_UP_TIMEOUT)


def raise_queue_serial(paths: Paths, serial: int) -> int:
    """Raise this node's queue serial to at least ``serial``; the serial now.

    The serial file is read without following a link (an untrusted or
    unreadable one counts as 0)."""
    try:
        current = int((uio.read_regular_file(paths.queue_serial_file) or b"0").strip() or b"0")
    except (errors.UntrustedFileError, ValueError):
        current = 0
    if serial > current:
        os.makedirs(paths.queue_dir, exist_ok=True)
        uio.write_file_atomic(paths.queue_serial_file, f"{serial}\n", mode=0o640)
        return serial
    return current


def _fetch(rpc: RpcRunner, paths: Paths, node: str, ids: list[int]) -> int:
    """Fetch ``ids`` from ``node`` and write them here; how many were written."""
    todo = list(ids)
    written = 0
    for _ in range(MAX_FETCH_ROUNDS):
        if not todo:
            break
        res = rpc.call_jobqueue_fetch([node], job_ids=todo, rpc_timeout=catch_up_timeout(rpc))[node]
        if res.fail_msg:
            raise errors.NotMasterError(f"Cannot fetch jobs from {node}: {res.fail_msg}")
        answer = res.payload if isinstance(res.payload, list) else []
        files: dict[str, bytes] = {}
        for item in answer:
            if not (isinstance(item, list) and len(item) == 3 and item[0] in todo
                    and item[1] in ("queue", "archive") and isinstance(item[2], str)):
                raise errors.NotMasterError(f"Invalid job file from {node}: {str(item)[:80]!r}")
            job_id, where, text = item
            path = (job_file_name(paths.queue_dir, job_id) if where == "queue"
                    else archived_job_file_name(paths.queue_archive_dir, job_id))
            os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
            files[path] = text.encode("utf-8")
        if not files:
            raise errors.NotMasterError(
                f"{node} no longer holds job(s) {', '.join(map(str, todo[:10]))}")
        uio.write_files_atomic(files, mode=0o640)
        got = {item[0] for item in answer}
        todo = [i for i in todo if i not in got]
        written += len(got)
    return written


def catch_up_jobs(rpc: RpcRunner, paths: Paths, data: ConfigData, me: str, out: Out) -> None:
    """Fetch every job some candidate holds and this node lacks; raise the queue serial.

    Raises :class:`errors.NotMasterError` when fewer than a strict majority
    of the online candidates gave their job log, or a fetch failed: going
    on could lose acknowledged jobs.  Writes nothing before the decision.
    """
    names = candidate_names(data, me)
    logs: dict[str, joblog.NodeLog | str] = {}
    for name, res in rpc.call_jobqueue_log(names, rpc_timeout=catch_up_timeout(rpc)).items():
        logs[name] = res.fail_msg if res.fail_msg else joblog.log_from_data(name, res.payload)
    plan = joblog.plan_catch_up(me, names, logs)
    if not plan.ok:
        raise errors.NotMasterError(f"Job queue catch-up refused: {plan.reason}")
    for node, ids in sorted(plan.fetch.items()):
        count = _fetch(rpc, paths, node, ids)
        out(f"{me}: fetched {count} job(s) from {node}"
            f" ({joblog.to_ranges(ids)[:5]}{'...' if len(ids) > 5 else ''})")
    serial = raise_queue_serial(paths, plan.serial)
    out(f"{me}: job queue caught up: {plan.reason}; queue serial {serial}")


def catch_up_before_startup(rpc: RpcRunner, paths: Paths, data: ConfigData, me: str,
                            log: Out | None) -> None:
    """:func:`catch_up_jobs` for the master daemon's start-up vote; never raises.

    While a cluster boots, too few candidates may answer yet: the vote that
    follows then waits for them (and refuses this node as stale if another
    candidate holds a higher job id), so a refused catch-up is only logged.
    """
    def _out(line: str) -> None:
        (log or logger.info)(line)

    try:
        catch_up_jobs(rpc, paths, data, me, _out)
    except (errors.NotMasterError, OSError) as exc:
        logger.warning("Master start-up: %s; going on with the vote", exc)


def clear_drain_flag(paths: Paths, out: Out) -> None:
    """Clear this node's queue drain flag (a new master accepts jobs, as upstream's does)."""
    try:
        os.unlink(paths.queue_drain_file)
    except FileNotFoundError:
        return
    except OSError as exc:
        out(f"Warning: cannot clear the queue drain flag: {exc}")
        return
    uio.fsync_dir(paths.queue_dir)
    out("queue drain flag cleared")
