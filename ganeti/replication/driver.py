"""The master's replicator: keeps master candidates and nodes up to date.

:class:`Replicator` is wired by the master daemon as the ConfigWriter's
``on_change`` and the JobStorage's ``replicate_*`` callbacks.  Config and
job files go to the online master candidates other than the master;
ssconf goes to every online node (and is written locally).  The network
work runs in the replicator's own threads, coalesced; jobs wait for
:meth:`Replicator.wait_replicated` before reporting success.  When more
than half of the targets fail, an error is logged, otherwise a warning
(:func:`report_failures`).  Design: doc/design/replication.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ganeti import ssconf
from ganeti.objects import Node
from ganeti.pathutils import Paths
from ganeti.rpc.defs import to_canonical

__all__ = ["Replicator", "report_failures", "read_queue_files", "copy_queue",
           "REPLICATION_TIMEOUT", "JOB_LINGER", "QUEUE_RESYNC_INTERVAL",
           "QUEUE_RESYNC_MAX_INTERVAL", "QUEUE_COPY_CHUNK"]

logger = logging.getLogger(__name__)

FeedbackFn = Callable[[str], None]

#: Seconds a replication fan-out may take: jobs wait for config replication
#: before reporting success, so a hung candidate must not stall them for a
#: full RPC timeout.
REPLICATION_TIMEOUT = 15.0
# How long the job replication thread leaves freshly queued job files for a
# config push (already pending or in flight) to carry in the same RPC.
JOB_LINGER = 0.05
#: seconds before resynchronising a candidate that missed job-file updates; it
#: doubles while the node keeps failing, up to QUEUE_RESYNC_MAX_INTERVAL
QUEUE_RESYNC_INTERVAL = 5.0
QUEUE_RESYNC_MAX_INTERVAL = 60.0



def report_failures(what: str, results: dict[str, Any],
                    feedback_fn: FeedbackFn | None = None) -> list[str]:
    """Log per-node failures of one fan-out; returns the failing node names.

    More than half of the (non-offline) targets failing is an error in the
    log, fewer a warning (doc/design/replication.md).
    """
    failed = [name for name, res in results.items() if res.fail_msg and not res.offline]
    tried = [name for name, res in results.items() if not res.offline]
    if failed:
        level = logging.ERROR if len(failed) * 2 > len(tried) else logging.WARNING
        for name in failed:
            logger.log(level, "%s failed on node %s: %s", what, name, results[name].fail_msg)
            if feedback_fn is not None:
                feedback_fn(f"Warning: {what} failed on node {name}: {results[name].fail_msg}")
    return failed



def _online_names(nodes: Iterable[Node], exclude: Iterable[str] = ()) -> list[str]:
    skip = set(exclude)
    return sorted(n.name for n in nodes if not n.offline and n.uuid not in skip)



def read_queue_files(paths: Paths) -> tuple[int, list[tuple[str, bytes]]]:
    """``(serial, files)``: the queue serial, then ``(path, content)`` of the
    unarchived job files, ``serial``, ``version`` and ``drain``.

    The serial is read first, so every job file created after the listing
    has a higher id.  Files that vanish meanwhile (archived) are skipped;
    any other error is raised (``OSError``): a partial list must never be
    taken for the whole queue.
    """
    try:
        with open(os.path.join(paths.queue_dir, "serial"), "rb") as fh:
            serial = int(fh.read().strip() or b"0")
    except FileNotFoundError:
        serial = 0
    except ValueError as exc:
        raise OSError(f"Unreadable queue serial: {exc}") from exc
    out = []
    for name in sorted(os.listdir(paths.queue_dir)):
        if not (name.startswith("job-") or name in ("serial", "version", "drain")):
            continue
        path = os.path.join(paths.queue_dir, name)
        try:
            with open(path, "rb") as fh:
                out.append((path, fh.read()))
        except FileNotFoundError:
            continue
    return serial, out


#: bytes of job files per request when a whole queue is copied to a candidate
QUEUE_COPY_CHUNK = 4 << 20


def copy_queue(rpc: Any, paths: Paths, node_names: list[str], *,
               timeout: float | None = None,
               still_wanted: Callable[[list[str]], list[str]] | None = None) -> list[str]:
    """Give ``node_names`` the master's whole unarchived queue; returns the nodes that failed.

    The files (read now) go in ``jobqueue_update_many`` requests of about
    :data:`QUEUE_COPY_CHUNK` bytes, the last part in ``jobqueue_sync``
    together with every top-level name and the queue serial, so the node
    then archives the job files (up to that serial) the master no longer
    has and drops a drain flag the master has not got.  ``still_wanted``
    filters the targets before each request (nodes that stopped being
    candidates meanwhile get nothing more).  If the master's queue cannot
    be read, nothing is sent and every target counts as failed.
    """
    targets = list(dict.fromkeys(node_names))
    try:
        serial, files = read_queue_files(paths)
    except OSError as exc:
        logger.error("Cannot read the job queue to copy it to %s: %s", ", ".join(targets), exc)
        return targets
    names = [os.path.basename(path) for path, _ in files]
    chunks: list[list[list[str]]] = [[]]
    size = 0
    for path, data in files:
        if chunks[-1] and size + len(data) > QUEUE_COPY_CHUNK:
            chunks.append([])
            size = 0
        chunks[-1].append([to_canonical(paths.root, path), data.decode("utf-8")])
        size += len(data)
    failed: list[str] = []
    for idx, chunk in enumerate(chunks):
        if still_wanted is not None:
            targets = still_wanted(targets)
        if not targets:
            break
        if idx < len(chunks) - 1:
            res = rpc.call("jobqueue_update_many", targets, [chunk], timeout=timeout)
        else:
            res = rpc.call("jobqueue_sync", targets, [chunk, names, serial], timeout=timeout)
        bad = report_failures("Job queue copy", res)
        failed.extend(bad)
        targets = [name for name in targets if name not in bad]
    return failed


class _ConfigPush:
    """One config state to replicate (the newest wins)."""

    __slots__ = ("serial", "data", "candidates", "nodes", "ssconf")

    def __init__(self, serial: int, data: bytes, candidates: list[str], nodes: list[str],
                 ssconf_values: dict[str, str]) -> None:
        self.serial = serial
        self.data = data
        self.candidates = candidates
        self.nodes = nodes
        self.ssconf = ssconf_values


class Replicator:
    """Keeps master candidates (config, queue) and nodes (ssconf) up to date.

    Design (doc/design/replication.md): nothing slow runs under the config
    lock or in the job queue's writer thread.  Two background threads
    (started on first use) do the network work and *coalesce*:

    * **config** (``on_config_change(cfg, data, serial)``, the
      ConfigWriter's ``on_change``, called in serial order once ``data``
      (holding ``serial``) is durable on the master, with the config lock
      held): records the newest ``(serial, bytes, targets, ssconf values)``
      and returns.  The config
      thread sends only the newest pending state: ``upload_file`` of
      ``config.data`` to the online candidates and, when the ssconf values
      changed, the local ssconf files plus ``write_ssconf_files`` to every
      online node, the two fan-outs in parallel.  Then it marks that serial
      replicated.  :meth:`wait_replicated` blocks until a serial (or a newer
      one) has been pushed: the processor calls it after ``Exec`` so a job
      never reports success before its config change reached the candidates.
    * **jobs** (``replicate_job_files(batch)`` after each group commit,
      ``replicate_rename(old, new)`` on archiving, ``replicate_drain_flag``,
      ``replicate_queue_to`` for new candidates): an ordered list of
      operations; consecutive updates merge into one ``{file: content}``
      (latest content per file wins), renames keep their place relative to
      updates.  Each update segment is one ``jobqueue_update_many`` RPC per
      candidate (all candidates in parallel), each rename segment one
      ``jobqueue_rename``.

    A config push to the candidates is one ``replicate_state`` RPC each,
    carrying the config bytes, the ssconf values when they changed, and
    the first pending job-file update segment (so a job's files and its
    config change usually travel together).  While a config push is
    pending or in flight the job thread lingers up to :data:`JOB_LINGER`
    before sending job files on its own.  Job-file sends never overlap
    (``_job_busy``), so a candidate gets each file's versions in order.

    Failures are logged by :func:`report_failures` (more than half of the
    targets failing is an error); a later push sends the full
    newest data again, so a candidate that missed one catches up.  A
    candidate that missed a job-file operation is *stale*: after
    :data:`QUEUE_RESYNC_INTERVAL` seconds (doubling while it keeps failing,
    up to :data:`QUEUE_RESYNC_MAX_INTERVAL`) the job thread sends it the
    whole queue (:func:`copy_queue`; what it holds beyond that, up to the
    master's serial, gets archived), after the pending operations or on
    its own when the queue is idle; :meth:`flush` waits for such a copy.  Without
    RPC only the local ssconf files are written.  :meth:`flush` waits for
    everything queued so far; :meth:`stop` flushes and ends the threads.
    """

    def __init__(self, paths: Paths, rpc: Any, *, timeout: float = REPLICATION_TIMEOUT,
                 job_linger: float = JOB_LINGER) -> None:
        self.paths = paths
        self.rpc = rpc
        self.timeout = timeout
        self.job_linger = job_linger
        self._lock = threading.Lock()
        self._candidates: list[str] = []
        self._nodes: list[str] = []
        self._last_ssconf: dict[str, str] | None = None
        self._cond = threading.Condition()
        self._stopped = False
        # config state (under _cond)
        self._cfg_pending: _ConfigPush | None = None
        self._cfg_queued_serial = 0
        self._cfg_done_serial = 0
        self._cfg_busy = False
        self._cfg_thread: threading.Thread | None = None
        # job files (under _cond): [kind, payload, upto] with kind "update"
        # ({path: bytes}), "rename" ([(old, new)]), "sync" ([node names]) or
        # "drain" ([flags], the last wins); upto = _job_queued after
        # the last operation merged into the segment
        self._job_ops: list[list[Any]] = []
        self._job_queued = 0
        self._job_done = 0
        self._job_busy = False
        self._job_thread: threading.Thread | None = None
        # candidates that missed a job-file operation (under _lock)
        self._queue_stale: set[str] = set()
        self._resync_at = 0.0
        self._resync_backoff = QUEUE_RESYNC_INTERVAL

    # targets ---------------------------------------------------------------------
    def refresh_targets(self, cfg: Any) -> None:
        """Recompute the candidate and node lists from ``cfg``."""
        data = cfg.get_config_data()
        master = data.cluster.master_node
        others = [n for n in data.nodes.values() if n.uuid != master]
        with self._lock:
            self._candidates = _online_names(n for n in others if n.master_candidate)
            self._nodes = _online_names(others)

    def targets(self) -> tuple[list[str], list[str]]:
        """``(candidates, all other online nodes)`` as node names."""
        with self._lock:
            return list(self._candidates), list(self._nodes)

    # threads -----------------------------------------------------------------------
    def _ensure_thread(self, attr: str, target: Callable[[], None], name: str) -> None:
        # called with _cond held; after stop() the caller's thread does the work
        if self._stopped:
            return
        thread = getattr(self, attr)
        if thread is None or not thread.is_alive():
            thread = threading.Thread(target=target, name=name, daemon=True)
            setattr(self, attr, thread)
            thread.start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far was sent; False on timeout."""
        with self._cond:
            cfg_target, job_target = self._cfg_queued_serial, self._job_queued
            return self._cond.wait_for(
                lambda: self._cfg_done_serial >= cfg_target and self._job_done >= job_target,
                timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Flush (up to ``timeout``), then end the threads; True if all was sent."""
        done = self.flush(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for thread in (self._cfg_thread, self._job_thread):
            if thread is not None:
                thread.join(timeout=5)
        return done

    # config ------------------------------------------------------------------------
    def on_config_change(self, cfg: Any, data: bytes, serial: int) -> None:
        """ConfigWriter ``on_change``: queue ``data``, the bytes of config ``serial``.

        ``serial`` is the one written in ``data`` (with group commit the
        in-memory config may already be newer, never older).  Called with
        the config lock held, so the targets and ssconf values read here are
        consistent; they may belong to a newer serial than ``data``, which
        is harmless: the push of that newer serial follows.  A serial older
        than one already queued is ignored.  Returns at once.
        """
        self.refresh_targets(cfg)
        values = ssconf.compute_ssconf_values(cfg.get_config_data())
        candidates, nodes = self.targets()
        push = _ConfigPush(serial, data, candidates, nodes, values)
        with self._cond:
            if serial <= self._cfg_queued_serial:
                return      # stale (out of order): never replace newer bytes
            self._cfg_pending = push
            self._cfg_queued_serial = max(self._cfg_queued_serial, serial)
            self._ensure_thread("_cfg_thread", self._config_loop, "replicator-config")
            self._cond.notify_all()
            inline = self._stopped
        if inline:
            self._config_loop(once=True)

    def replicated_serial(self) -> int:
        """The newest config serial whose replication has been attempted."""
        with self._cond:
            return self._cfg_done_serial

    def wait_replicated(self, serial: int, timeout: float | None = None) -> bool:
        """Wait until config ``serial`` (or newer) was pushed to the candidates.

        Returns False when ``timeout`` (default: twice the RPC timeout plus
        five seconds, as one push may be in flight before ours) runs out or
        the serial was never queued (a failed local write).  Per-node
        failures of the push do not make it False: they are logged.
        """
        if timeout is None:
            timeout = 2 * self.timeout + 5.0
        with self._cond:
            if serial > self._cfg_queued_serial:
                return False    # never handed to us (failed local write, not wired)
            return self._cond.wait_for(lambda: self._cfg_done_serial >= serial, timeout)

    def _config_loop(self, once: bool = False) -> None:
        while True:
            with self._cond:
                if once:
                    self._cond.wait_for(lambda: not self._cfg_busy)
                else:
                    self._cond.wait_for(lambda: self._cfg_pending is not None or self._stopped)
                push = self._cfg_pending
                if push is None:
                    return
                self._cfg_pending = None
                self._cfg_busy = True
                files: dict[str, bytes] | None = None
                upto = 0
                if not once and not self._job_busy and self._job_ops \
                        and self._job_ops[0][0] == "update":
                    _, files, upto = self._job_ops.pop(0)
                    self._job_busy = True
            try:
                self._push_config(push, files or {})
            except Exception:  # the thread must survive anything
                logger.exception("Configuration replication of serial %s failed", push.serial)
            with self._cond:
                self._cfg_busy = False
                self._cfg_done_serial = max(self._cfg_done_serial, push.serial)
                if files is not None:
                    self._job_busy = False
                    self._job_done = max(self._job_done, upto)
                self._cond.notify_all()
            if once:
                return

    def _push_config(self, push: _ConfigPush, files: dict[str, bytes]) -> None:
        """Send ``push`` (and the job ``files`` it carries) to its targets."""
        values = push.ssconf
        ssconf_changed = values != self._last_ssconf
        if ssconf_changed:
            ssconf.write_ssconf_files(self.paths, values)
        if self.rpc is None:
            self._last_ssconf = values
            return
        ssconf_failed: list[str] = []
        worker: threading.Thread | None = None
        others = [n for n in push.nodes if n not in push.candidates]
        if others and ssconf_changed:
            def _ssconf() -> None:
                res = self.rpc.call("write_ssconf_files", others, [values],
                                    timeout=self.timeout)
                ssconf_failed.extend(report_failures("ssconf update", res))
            worker = threading.Thread(target=_ssconf, name="replicator-ssconf", daemon=True)
            worker.start()
        if push.candidates:
            canonical = to_canonical(self.paths.root, self.paths.config_file)
            items = [[to_canonical(self.paths.root, path), data.decode("utf-8")]
                     for path, data in files.items()]
            res = self.rpc.call("replicate_state", push.candidates,
                                [[canonical, push.data.decode("utf-8")],
                                 values if ssconf_changed else None, items],
                                timeout=self.timeout)
            failed = report_failures("Configuration replication", res)
            if items:
                self._mark_stale(failed)   # they missed the job files it carried
            if ssconf_changed:
                ssconf_failed.extend(failed)
        if worker is not None:
            worker.join(self.timeout + 5.0)
            if worker.is_alive():
                ssconf_failed.append("(timeout)")
        # a failed node gets the values again with the next change
        self._last_ssconf = None if ssconf_failed else values

    # job files -----------------------------------------------------------------------
    def replicate_job_files(self, batch: dict[str, bytes]) -> None:
        """Queue the files of one committed batch ``{path: content}``; returns at once."""
        if batch:
            self._queue_job_op("update", dict(batch))

    def replicate_job_file(self, path: str, data: bytes) -> None:
        """Queue one job queue file (see :meth:`replicate_job_files`)."""
        self.replicate_job_files({path: data})

    def replicate_rename(self, old: str, new: str) -> None:
        """Queue the rename of a job queue file (archiving), ordered after earlier updates."""
        self._queue_job_op("rename", [(old, new)])

    def replicate_drain_flag(self, flag: bool) -> None:
        """Queue setting (True) or clearing (False) the candidates' queue drain flag."""
        self._queue_job_op("drain", [bool(flag)])

    def replicate_queue_to(self, node_names: Iterable[str]) -> None:
        """Queue a copy of the whole (unarchived) job queue to new candidates.

        Ordered like every other job-file operation: the files are read from
        the master's disk when the copy is sent, and any update queued after
        this call is sent after it, so a new candidate never ends with a
        version older than the master's (as a copy sent outside this stream,
        racing with a newer update, could leave it).
        """
        names = list(dict.fromkeys(node_names))
        if names:
            self._queue_job_op("sync", names)

    def _queue_job_op(self, kind: str, payload: dict[str, bytes] | list[Any]) -> None:
        # merges into the last segment when it is of the same kind (order is kept)
        with self._cond:
            self._job_queued += 1
            if self._job_ops and self._job_ops[-1][0] == kind:
                last = self._job_ops[-1]
                if kind == "update":
                    last[1].update(payload)
                else:
                    last[1].extend(payload)
                last[2] = self._job_queued
            else:
                self._job_ops.append([kind, payload, self._job_queued])
            self._ensure_thread("_job_thread", self._job_loop, "replicator-jobs")
            self._cond.notify_all()
            inline = self._stopped
        if inline:
            self._job_loop(once=True)

    def _job_loop(self, once: bool = False) -> None:
        while True:
            with self._cond:
                if once:
                    self._cond.wait_for(lambda: not self._job_busy)
                else:
                    # idle with a stale candidate: wake up for its next resync
                    self._cond.wait_for(
                        lambda: bool(self._job_ops) or self._stopped or self._resync_due(),
                        self._resync_wait())
                    if self._cfg_pending is not None or self._cfg_busy:
                        # a config push may carry them: give it a moment
                        self._cond.wait_for(
                            lambda: self._stopped or not self._job_ops
                            or (self._cfg_pending is None and not self._cfg_busy),
                            self.job_linger)
                    self._cond.wait_for(lambda: not self._job_busy or self._stopped)
                resync_only = not self._job_ops and not self._job_busy \
                    and not once and not self._stopped and self._resync_due()
                if (not self._job_ops and not resync_only) or self._job_busy:
                    if once or self._stopped:
                        return
                    continue
                self._job_busy = True
                ops, self._job_ops = self._job_ops, []
                if ops:
                    upto = ops[-1][2]
                else:   # a resync on its own: flush() waits for it like for an operation
                    self._job_queued += 1
                    upto = self._job_queued
            for kind, payload, _ in ops:
                try:
                    if kind == "update":
                        self._send_updates(payload)
                    elif kind == "sync":
                        self._send_queue(payload)
                    elif kind == "drain":
                        self._send_drain(payload[-1])   # the last setting wins
                    else:
                        self._send_renames(payload)
                except Exception:
                    logger.exception("Job queue replication failed")
            try:
                self._resync_stale()
            except Exception:
                logger.exception("Job queue resynchronisation failed")
            with self._cond:
                self._job_busy = False
                self._job_done = max(self._job_done, upto)
                self._cond.notify_all()
            if once:
                return

    def _send_updates(self, files: dict[str, bytes]) -> None:
        candidates, _ = self.targets()
        if self.rpc is None or not candidates:
            return
        items = [[to_canonical(self.paths.root, path), data.decode("utf-8")]
                 for path, data in files.items()]
        res = self.rpc.call("jobqueue_update_many", candidates, [items], timeout=self.timeout)
        names = ", ".join(sorted(os.path.basename(p) for p in files))
        self._mark_stale(report_failures(f"Job queue replication of {names}", res))

    def _mark_stale(self, node_names: Iterable[str]) -> None:
        """Remember candidates that missed a job-file operation.

        The first resync comes one backoff interval later (an immediate one
        would most likely fail the same way, and could cross a request of
        the failed operation still running on the node).
        """
        names = set(node_names)
        if not names:
            return
        with self._lock:
            if not self._queue_stale:
                self._resync_at = time.monotonic() + self._resync_backoff
            self._queue_stale.update(names)

    def _resync_due(self) -> bool:
        with self._lock:
            return bool(self._queue_stale) and time.monotonic() >= self._resync_at

    def _resync_wait(self) -> float | None:
        """Seconds until a stale candidate's next resync (None: nobody is stale)."""
        with self._lock:
            if not self._queue_stale:
                return None
            return max(0.05, self._resync_at - time.monotonic())

    def _resync_stale(self) -> None:
        """Send the whole queue to candidates that missed an operation.

        Runs after the operations taken from the list, so it reads files at
        least as new as any of them (or on its own when the queue is idle);
        at most every :data:`QUEUE_RESYNC_INTERVAL` seconds while a node keeps
        failing.  Nodes that are no longer candidates are forgotten.
        """
        candidates, _ = self.targets()
        with self._lock:
            if not self._queue_stale or time.monotonic() < self._resync_at:
                return
            stale = sorted(self._queue_stale & set(candidates))
            self._queue_stale.clear()
        if not stale:
            return
        logger.info("Resynchronising the job queue of %s", ", ".join(stale))
        self._send_queue(stale)
        with self._lock:
            if self._queue_stale:     # still failing: back off (doubling, bounded)
                self._resync_backoff = min(self._resync_backoff * 2, QUEUE_RESYNC_MAX_INTERVAL)
                self._resync_at = time.monotonic() + self._resync_backoff
            else:
                self._resync_backoff = QUEUE_RESYNC_INTERVAL

    def _send_queue(self, node_names: list[str]) -> None:
        # only to current candidates (re-checked before each part): the targets
        # are refreshed by the config change that promoted a node before its
        # LU asks for the copy
        if self.rpc is None:
            return

        def still_wanted(names: list[str]) -> list[str]:
            candidates = set(self.targets()[0])
            return [name for name in names if name in candidates]

        self._mark_stale(copy_queue(self.rpc, self.paths, list(node_names),
                                    timeout=self.timeout, still_wanted=still_wanted))

    def _send_drain(self, flag: bool) -> None:
        candidates, _ = self.targets()
        if self.rpc is None or not candidates:
            return
        res = self.rpc.call("jobqueue_set_drain_flag", candidates, [flag], timeout=self.timeout)
        self._mark_stale(report_failures("Job queue drain flag replication", res))

    def _send_renames(self, pairs: list[tuple[str, str]]) -> None:
        candidates, _ = self.targets()
        if self.rpc is None or not candidates:
            return
        rename = [[to_canonical(self.paths.root, old), to_canonical(self.paths.root, new)]
                  for old, new in pairs]
        res = self.rpc.call("jobqueue_rename", candidates, [rename], timeout=self.timeout)
        self._mark_stale(report_failures("Job queue rename replication", res))
