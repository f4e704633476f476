"""The thread driver of the master's replication: threads, RPC calls, queue files.

:class:`Replicator` is wired by the master daemon as the ConfigWriter's
``on_change`` and the JobStorage's ``replicate_*`` callbacks.  Every
decision (targets, coalescing, order, stale candidates and their resync
backoff, what a flush waits for) is made by its
:class:`~ganeti.replication.core.ReplicationPlan`; this module only runs
it: two background threads execute what the plan hands out, as RPC calls
and queue-file reads, and report the outcome back (doc/design/replication.md,
"Core and driver").  When more than half of the targets of a fan-out fail,
an error is logged, otherwise a warning (:func:`report_failures`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from ganeti import errors, ssconf
from ganeti.config import file as configfile
from ganeti.aliases import FeedbackFn
from ganeti.config import ConfigReader, ConfigWriter
from ganeti.pathutils import Paths
from ganeti.replication.core import (QUEUE_COPY_CHUNK, QUEUE_RESYNC_INTERVAL,
                                     QUEUE_RESYNC_MAX_INTERVAL, REPLICATION_TIMEOUT,
                                     ConfigSend, DrainFlag, FileUpdate, JobOp, LaneBatch,
                                     PushOutcome, QueueCopy, Renames, ReplicationPlan,
                                     Segment, plan_queue_copy, replication_targets)
from ganeti.rpc.client import RpcResult, RpcResults, RpcRunner
from ganeti.rpc.defs import to_canonical
from ganeti.utils import io as uio
from ganeti.utils import payload

__all__ = ["Replicator", "report_failures", "read_queue_files", "copy_queue"]

logger = logging.getLogger(__name__)

#: canonical queue file names the replicator remembers (about the files of
#: a few thousand recent jobs; the cache starts over beyond that)
_CANONICAL_KEPT = 8192


def report_failures(what: str, results: dict[str, RpcResult],
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


# --- queue files ----------------------------------------------------------------------

def read_queue_files(paths: Paths) -> tuple[int, list[tuple[str, bytes]]]:
    """``(serial, files)``: the queue serial, then ``(path, content)`` of the
    unarchived job files, ``serial``, ``version`` and ``drain``.

    The serial is read first, so every job file created after the listing
    has a higher id.  Files that vanish meanwhile (archived) are skipped;
    any other error is raised (``OSError``): a partial list must never be
    taken for the whole queue.

    The queue directory is not trusted
    (:func:`ganeti.utils.io.read_regular_file`): a symbolic link is never
    followed and an entry that is not a regular file is left out, with one
    log line (the master quarantines such job entries when it starts, see
    doc/protocols/jobs.md, "Quarantine"); an untrusted serial raises.
    """
    try:
        raw = uio.read_regular_file(os.path.join(paths.queue_dir, "serial"))
        serial = int((raw or b"").strip() or b"0")
    except errors.UntrustedFileError as exc:
        raise OSError(f"Untrusted queue serial: {exc}") from None
    except ValueError as exc:
        raise OSError(f"Unreadable queue serial: {exc}") from exc
    out = []
    for name in sorted(os.listdir(paths.queue_dir)):
        if not (name.startswith("job-") or name in ("serial", "version", "drain")):
            continue
        path = os.path.join(paths.queue_dir, name)
        try:
            data = uio.read_regular_file(path)
        except errors.UntrustedFileError as exc:
            logger.error("Not replicating untrusted queue entry: %s", exc)
            continue
        if data is not None:
            out.append((path, data))
    return serial, out


def _wire_files(root: str, files: Iterable[tuple[str, bytes]]) -> list[list[str]]:
    """``[[canonical name, text], ...]``: job files as the queue RPCs take them."""
    return [[to_canonical(root, path), data.decode("utf-8")] for path, data in files]


def copy_queue(rpc: RpcRunner, paths: Paths, node_names: list[str], *,
               timeout: float | None = None,
               still_wanted: Callable[[list[str]], list[str]] | None = None,
               chunk: int = QUEUE_COPY_CHUNK) -> list[str]:
    """Give ``node_names`` the master's whole unarchived queue; returns the nodes that failed.

    The files (read now) go in ``jobqueue_update_many`` requests of about
    ``chunk`` bytes (:func:`~ganeti.replication.core.plan_queue_copy`), the
    last part in ``jobqueue_sync`` together with every top-level name and
    the queue serial, so the node then archives the job files (up to that
    serial) the master no longer has and drops a drain flag the master has
    not got.  ``still_wanted`` filters the targets before each request
    (nodes that stopped being candidates meanwhile get nothing more).  If
    the master's queue cannot be read, nothing is sent and every target
    counts as failed.
    """
    targets = list(dict.fromkeys(node_names))
    try:
        serial, files = read_queue_files(paths)
    except OSError as exc:
        logger.error("Cannot read the job queue to copy it to %s: %s", ", ".join(targets), exc)
        return targets
    names = [os.path.basename(path) for path, _ in files]
    parts = plan_queue_copy(files, chunk)
    failed: list[str] = []
    for idx, part in enumerate(parts):
        if still_wanted is not None:
            targets = still_wanted(targets)
        if not targets:
            break
        items = _wire_files(paths.root, part)
        if idx < len(parts) - 1:
            res = rpc.call_jobqueue_update_many(targets, files=items, rpc_timeout=timeout)
        else:
            res = rpc.call_jobqueue_sync(
                targets, files=items, names=names, serial=serial, rpc_timeout=timeout)
        bad = report_failures("Job queue copy", res)
        failed.extend(bad)
        targets = [name for name in targets if name not in bad]
    return failed


# --- the replicator -------------------------------------------------------------------

class Replicator:
    """Keeps master candidates (config, queue) and nodes (ssconf) up to date.

    Design (doc/design/replication.md): nothing slow runs under the config
    lock or in the job queue's writer thread.  Callers only queue work in
    the :class:`~ganeti.replication.core.ReplicationPlan` and return; two
    background threads (started on first use) do the network work:

    * **config** (:meth:`on_config_change`, the ConfigWriter's
      ``on_change``): sends the newest pending push, one
      ``replicate_state`` RPC per online candidate (config bytes compressed
      once per push, zlib + base64, :mod:`ganeti.utils.payload`, and the
      ssconf values when they changed), and, when the ssconf values
      changed, writes the local ssconf files and sends
      ``write_ssconf_files`` to the other online nodes in parallel.
      :meth:`wait_replicated` blocks until a serial (or a newer one) has
      been pushed: the processor calls it after ``Exec`` so a job never
      reports success before its config change reached the candidates.
    * **one lane per candidate** (:meth:`replicate_job_files` after each
      group commit, :meth:`replicate_renames` on archiving,
      :meth:`replicate_drain_flag`, :meth:`replicate_queue_to` for new
      candidates): each candidate's thread sends what the plan hands its
      lane, in order, consecutive file updates in one
      ``jobqueue_update_many``, then ``jobqueue_rename``,
      ``jobqueue_set_drain_flag`` or a queue copy; when the candidate is
      stale and its resync due, the whole queue (:func:`copy_queue`), also
      on its own when the queue is idle.  The lanes do not wait for each
      other: a new job's quorum (:meth:`wait_job_quorum`) is there as
      soon as a majority of the lanes confirmed its files.  These calls go
      on the node's kept connection (doc/protocols/rpc.md, "Kept
      connections").

    Failures are logged by :func:`report_failures`; a later push sends
    the full newest data again.  Without RPC only the local ssconf files
    are written.  :meth:`flush` waits for everything queued so far
    (including a resync in flight); :meth:`stop` flushes and ends the
    threads, after which work is done in the caller's thread.

    ``clock`` sets the plan's resync times; the threads' waits are real
    condition timeouts computed from it.  With a fake clock, advancing it
    wakes nothing: a test makes the lanes look again by queuing an
    operation (a lane's batch runs a resync that is due).
    """

    def __init__(self, paths: Paths, rpc: RpcRunner | None, *,
                 timeout: float = REPLICATION_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic,
                 resync_interval: float = QUEUE_RESYNC_INTERVAL) -> None:
        self.paths = paths
        self.rpc = rpc
        self.timeout = timeout
        # the plan and the flags below are guarded by one lock, with four
        # conditions, so that each event wakes only the threads it concerns:
        # _cond for flushes and the end of sends (a lane or push done,
        # targets changed), _lanes_wake for the idle lanes (job-file work
        # queued, targets changed, stop), _cfg_wake for the config thread
        # (a push queued, stop) and _decided for the submitters waiting for
        # a quorum (woken only when a lane's report or a target change
        # decided a file update); queuing job-file work, which every
        # submission and commit does, wakes neither the config thread nor
        # a submitter
        lock = threading.RLock()
        self._cond = threading.Condition(lock)
        self._lanes_wake = threading.Condition(lock)
        self._cfg_wake = threading.Condition(lock)
        self._decided = threading.Condition(lock)
        # canonical names of the queue files, computed once per path
        self._canonical: dict[str, str] = {}
        self._plan = ReplicationPlan(clock, resync_interval=resync_interval,
                                     resync_max_interval=QUEUE_RESYNC_MAX_INTERVAL)
        self._stopped = False
        self._ssconf_values = ssconf.SsconfValues()
        self._cfg_thread: threading.Thread | None = None
        self._lanes: dict[str, threading.Thread] = {}

    # targets ---------------------------------------------------------------------
    def refresh_targets(self, cfg: ConfigReader) -> None:
        """Recompute the candidate and node lists from ``cfg`` (the committed config)."""
        candidates, nodes = replication_targets(cfg.get_config_data())
        with self._cond:
            self._plan.set_targets(candidates, nodes)
            self._targets_changed()

    def _targets_changed(self) -> None:
        """(lock held) Wake whoever a change of the targets concerns: lanes of
        former candidates end, flushes need not wait for them, and file
        updates waiting for them may be decided."""
        self._cond.notify_all()
        self._lanes_wake.notify_all()
        self._decided.notify_all()

    def targets(self) -> tuple[list[str], list[str]]:
        """``(candidates, all other online nodes)`` as node names."""
        with self._cond:
            return self._plan.targets()

    def stale_candidates(self) -> set[str]:
        """Candidates that missed a job-file operation and wait for a resync."""
        with self._cond:
            return self._plan.stale()

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
            mark = self._plan.flush_mark()
            return self._cond.wait_for(lambda: self._plan.flushed(mark), timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Flush (up to ``timeout``), then end the threads; True if all was sent."""
        done = self.flush(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            self._lanes_wake.notify_all()
            self._cfg_wake.notify_all()
            self._decided.notify_all()
        for thread in (self._cfg_thread, *self._lanes.values()):
            if thread is not None:
                thread.join(timeout=5)
        return done

    # config ------------------------------------------------------------------------
    def on_config_change(self, cfg: ConfigWriter, data: bytes, serial: int) -> None:
        """ConfigWriter ``on_change``: queue ``data``, the bytes of config ``serial``.

        ``serial`` is the one written in ``data``.  With group commit the
        writer's working config may already be newer, so the targets and the
        ssconf values come from ``cfg.committed()``, which during
        ``on_change`` is exactly the tree of ``serial`` (see
        :mod:`ganeti.config`): a node never gets ssconf values of a config
        other than the one pushed with them.  Should the committed tree
        hold another serial (a caller other than the writer's hook), ``data``
        itself is decoded (and dropped if it is no config).  A serial older
        than one already queued is ignored.  Returns at once.
        """
        config_data = cfg.committed().get_config_data()
        if config_data.serial_no != serial:
            logger.warning("Replicating configuration serial %s while the committed one"
                           " is %s; computing its ssconf values from its own bytes",
                           serial, config_data.serial_no)
            try:
                config_data = configfile.decode_config(data)
            except errors.SerializationError as exc:
                logger.error("Configuration serial %s is not replicated: %s", serial, exc)
                return
        candidates, nodes = replication_targets(config_data)
        values = self._ssconf_values(config_data)
        with self._cond:
            self._plan.set_targets(candidates, nodes)
            self._targets_changed()
            if not self._plan.queue_config(serial, data, values):
                return      # stale (out of order): never replace newer bytes
            self._ensure_thread("_cfg_thread", self._config_loop, "replicator-config")
            self._cfg_wake.notify_all()
            inline = self._stopped
        if inline:
            self._config_loop(once=True)

    @contextmanager
    def config_lane(self, timeout: float | None = None) -> Iterator[None]:
        """Run the block with no config push under way and none starting.

        For writes of the config or ssconf on nodes made outside the
        replicator (:func:`ganeti.cmdlib.common.redistribute`): pushes are
        sent one at a time, newest bytes last, and a block run here takes
        its turn between them, so it never lands older bytes after a newer
        push (doc/design/replication.md, "Redistribution").  Once asked
        for, the lane goes to the block after the push under way (no new
        push starts meanwhile).  Waits up to ``timeout`` (default: twice
        the RPC timeout plus five seconds) for that push or another
        block; :class:`errors.OpExecError` when the lane is not free by then.
        Pushes queued meanwhile go when the block ends (in the releasing
        thread once :meth:`stop` has ended the config thread).
        """
        if timeout is None:
            timeout = 2 * self.timeout + 5.0
        plan = self._plan
        with self._cond:
            plan.want_config()
            try:
                taken = self._cond.wait_for(plan.hold_config, timeout)
            finally:
                plan.unwant_config()
                self._cfg_wake.notify_all()
            if not taken:
                raise errors.OpExecError(
                    f"The configuration replication was busy for {timeout:.0f}s (a push"
                    " or another redistribution); nothing was sent")
        try:
            yield
        finally:
            with self._cond:
                plan.release_config()
                self._cond.notify_all()
                self._cfg_wake.notify_all()
                inline = self._stopped and plan.config_pending
            if inline:       # no config thread any more: send what waited, here
                self._config_loop(once=True)

    def replicated_serial(self) -> int:
        """The newest config serial whose replication has been attempted."""
        with self._cond:
            return self._plan.replicated_serial()

    def candidate_lag(self) -> dict[str, int]:
        """Config serials each candidate is behind (see :meth:`ReplicationPlan.candidate_lag`)."""
        with self._cond:
            return self._plan.candidate_lag()

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
            if serial > self._plan.queued_serial():
                return False    # never handed to us (failed local write, not wired)
            return self._cond.wait_for(lambda: self._plan.replicated_serial() >= serial,
                                       timeout)

    def _config_loop(self, once: bool = False) -> None:
        plan = self._plan
        while True:
            with self._cond:
                if not once:
                    # (a push is "busy" here only while config_lane holds the lane)
                    self._cfg_wake.wait_for(lambda: (plan.config_pending and not plan.config_busy
                                                     and not plan.config_wanted)
                                            or self._stopped)
                # once (after stop): a push under way or the lane held or wanted
                # leaves ours pending; whoever ends theirs sends it (config_lane)
                send = plan.take_config()
                if send is None:
                    return
            outcome: PushOutcome | None = None
            try:
                outcome = self._push_config(send)
            except Exception:  # the thread must survive anything
                logger.exception("Configuration replication of serial %s failed",
                                 send.push.serial)
            with self._cond:
                plan.config_done(send, outcome)
                self._cond.notify_all()
            if once:
                return

    def _push_config(self, send: ConfigSend) -> PushOutcome:
        """Send ``send`` to its targets (the two fan-outs in parallel)."""
        push = send.push
        values = push.ssconf
        if send.ssconf_changed:
            ssconf.write_ssconf_files(self.paths, values)
        rpc = self.rpc
        if rpc is None:
            return PushOutcome([])
        others_failed: list[str] = []
        worker: threading.Thread | None = None
        if send.ssconf_nodes:
            def _ssconf() -> None:
                try:
                    res = rpc.call_write_ssconf_files(
                        send.ssconf_nodes, values=values, rpc_timeout=self.timeout)
                    others_failed.extend(report_failures("ssconf update", res))
                except Exception:  # not delivered: the next push sends the values again
                    logger.exception("ssconf update of %s failed", ", ".join(send.ssconf_nodes))
                    others_failed.extend(send.ssconf_nodes)
            worker = threading.Thread(target=_ssconf, name="replicator-ssconf", daemon=True)
            worker.start()
        failed: list[str] = []
        if push.candidates:
            canonical = to_canonical(self.paths.root, self.paths.config_file)
            res = rpc.call_replicate_state(
                push.candidates, config=[canonical, payload.encode_payload(push.data)],
                ssconf_values=values if send.ssconf_changed else None, queue_files=[],
                rpc_timeout=self.timeout)
            failed = report_failures("Configuration replication", res)
        timed_out = False
        if worker is not None:
            worker.join(self.timeout + 5.0)
            timed_out = worker.is_alive()
        return PushOutcome(failed, bool(others_failed) or timed_out)

    # job files -----------------------------------------------------------------------
    def replicate_job_files(self, batch: dict[str, bytes], urgent: bool = True) -> int:
        """Queue the files of one committed batch ``{path: content}``; returns at once.

        The answer is the batch's sequence number, for
        :meth:`wait_job_quorum` (0 for an empty batch: nothing to wait for).
        Without ``urgent`` (nobody waits for the batch's quorum: status
        changes) the lanes may hold it up to ``LAZY_DELAY`` seconds, so that
        the next urgent batch takes it along in the same request.
        """
        if batch:
            return self._queue_job_op(FileUpdate(dict(batch)), hold=not urgent)
        return 0

    def wait_job_quorum(self, seq: object, timeout: float | None = None) -> None:
        """Wait until the job-file batch ``seq`` (from :meth:`replicate_job_files`)
        is on a strict majority of the master candidates (the master counting
        as one).

        Raises :class:`errors.JobQueueQuorumError` when its send reached
        fewer candidates, or when ``timeout`` (default: twice the RPC
        timeout plus five seconds: one batch may be on the wire before ours)
        runs out first.  Returns at once for 0 (nothing was queued).
        """
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise errors.JobQueueQuorumError(
                f"Job files were not handed to replication ({seq!r}): not acknowledged")
        if seq <= 0:
            return
        if timeout is None:
            timeout = 2 * self.timeout + 5.0
        with self._cond:
            known = self._decided.wait_for(lambda: self._plan.quorum_outcome(seq)[0],
                                           timeout)
            failure = self._plan.quorum_outcome(seq)[1]
        if not known:
            raise errors.JobQueueQuorumError(
                f"The new job files did not reach the master candidates within {timeout:g}s;"
                " not acknowledged, submit again")
        if failure is not None:
            raise errors.JobQueueQuorumError(
                f"The new job files are {failure}; not acknowledged, submit again")

    def replicate_job_file(self, path: str, data: bytes) -> None:
        """Queue one job queue file (see :meth:`replicate_job_files`)."""
        self.replicate_job_files({path: data})

    def replicate_renames(self, pairs: list[tuple[str, str]]) -> None:
        """Queue the renames ``[(old, new)]`` of job queue files (archiving),
        ordered after earlier updates."""
        if pairs:
            self._queue_job_op(Renames(list(pairs)))

    def replicate_drain_flag(self, flag: bool) -> None:
        """Queue setting (True) or clearing (False) the candidates' queue drain flag."""
        self._queue_job_op(DrainFlag(bool(flag)))

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
            self._queue_job_op(QueueCopy(names))

    def _queue_job_op(self, op: JobOp, hold: bool = False) -> int:
        with self._cond:
            seq = self._plan.queue_job_op(op, hold=hold)
            inline = self._stopped
            if not inline:
                self._ensure_lanes()
            # only the lanes: queued work makes no flush done and decides no quorum
            self._lanes_wake.notify_all()
        if inline:
            self._run_lanes_once()
        return seq

    def _ensure_lanes(self) -> None:
        """A thread for every candidate's lane (called with ``_cond`` held)."""
        for node in self._plan.lane_nodes():
            thread = self._lanes.get(node)
            if thread is None or not thread.is_alive():
                thread = threading.Thread(target=self._lane_loop, args=(node,),
                                          name=f"replicator-{node}", daemon=True)
                self._lanes[node] = thread
                thread.start()
        for node in [n for n, t in self._lanes.items() if not t.is_alive()]:
            del self._lanes[node]

    def _run_lanes_once(self) -> None:
        """After :meth:`stop`: send every lane's pending work in the caller's thread."""
        plan = self._plan
        with self._cond:
            nodes = plan.lane_nodes()
        for node in nodes:
            with self._cond:
                self._cond.wait_for(lambda: not plan.lane_busy(node), self.timeout + 5.0)
                batch = plan.take_lane(node, resync_alone=False, hold=False)
            if batch is not None:
                self._run_lane_batch(batch)

    def _lane_loop(self, node: str) -> None:
        """One candidate's lane: send what the plan hands it, one batch at a time."""
        plan = self._plan
        while True:
            with self._cond:
                while True:
                    if not plan.has_lane(node):
                        return          # no longer a candidate
                    batch = plan.take_lane(node, resync_alone=not self._stopped,
                                           hold=not self._stopped)
                    if batch is not None:
                        break
                    if self._stopped:
                        return
                    # idle, holding updates or a stale node: wake up for new
                    # work, the held updates or the resync; the timeout is
                    # recomputed after every wake-up
                    self._lanes_wake.wait(plan.lane_wait(node))
            self._run_lane_batch(batch)

    def _run_lane_batch(self, batch: LaneBatch) -> None:
        """Send ``batch`` and report it to the plan (never raises)."""
        sent, resync_failed = 0, False
        try:
            sent = self._send_lane(batch)
        except Exception:  # the thread must survive anything
            logger.exception("Job queue replication to %s failed", batch.node)
        if batch.resync:
            resync_failed = not self._resync(batch.node)
        with self._cond:
            decided = self._plan.decisions
            for why in self._plan.lane_done(batch, sent, resync_failed):
                # (before a flush can return)
                logger.error("New job files not acknowledged: %s", why)
            self._cond.notify_all()
            if self._plan.decisions != decided:
                # (a report that decided nothing, e.g. the second of two
                # lanes confirming what the first one did, wakes no submitter)
                self._decided.notify_all()

    def _send_lane(self, batch: LaneBatch) -> int:
        """Send the segments of ``batch`` to its node in order, consecutive file
        updates in one request; how many were confirmed before the first failure."""
        node = batch.node
        sent = 0
        for group in _group_updates(batch.segments):
            op = group[0].op
            if isinstance(op, FileUpdate):
                files: dict[str, bytes] = {}
                for segment in group:
                    assert isinstance(segment.op, FileUpdate)
                    files.update(segment.op.files)
                ok = self._send_updates(node, files)
            elif isinstance(op, QueueCopy):
                ok = self._send_queue(node)
            elif isinstance(op, DrainFlag):
                flag = op.flag
                ok = self._send_one(node, lambda rpc, tmo: rpc.call_jobqueue_set_drain_flag(
                    node, drain_flag=flag, rpc_timeout=tmo), "Job queue drain flag replication")
            else:
                rename = [[to_canonical(self.paths.root, old), to_canonical(self.paths.root, new)]
                          for old, new in op.pairs]
                ok = self._send_one(node, lambda rpc, tmo: rpc.call_jobqueue_rename(
                    node, rename=rename, rpc_timeout=tmo), "Job queue rename replication")
            if not ok:
                break
            sent += len(group)
        return sent

    def _send_one(self, node: str, send: Callable[[RpcRunner, float], RpcResults],
                  what: str | Callable[[], str]) -> bool:
        """``send(rpc, timeout)`` (one typed call to ``node``); whether it succeeded.

        ``what`` names the call in the warning (or makes that name, only then).

        A failure is logged as a warning: the node becomes stale and gets
        the whole queue later; a file update that misses its quorum
        because of it is logged as an error (:meth:`_run_lane_batch`).
        """
        if self.rpc is None:
            return True
        res = send(self.rpc, self.timeout)[node]
        if res.fail_msg:
            logger.warning("%s failed on node %s: %s", what if isinstance(what, str) else what(),
                           node, res.fail_msg)
        return not res.fail_msg and not res.offline

    def _send_updates(self, node: str, files: dict[str, bytes]) -> bool:
        """One ``jobqueue_update_many`` with ``files`` to ``node``; whether it confirmed."""
        items = [[self._canonical_name(path), data.decode("utf-8")]
                 for path, data in files.items()]
        # an offline node answers nothing: it holds no copy either; the files are
        # named only in a warning (a request per batch and lane, sent all the time)
        return self._send_one(node, lambda rpc, tmo: rpc.call_jobqueue_update_many(
            node, files=items, rpc_timeout=tmo), lambda: "Job queue replication of "
            + ", ".join(sorted(os.path.basename(p) for p in files)))

    def _canonical_name(self, path: str) -> str:
        """The canonical name of the queue file ``path``, computed once per path
        (a job file goes to every lane three times or more)."""
        name = self._canonical.get(path)
        if name is None:
            if len(self._canonical) >= _CANONICAL_KEPT:
                self._canonical.clear()
            name = self._canonical[path] = to_canonical(self.paths.root, path)
        return name

    def _resync(self, node: str) -> bool:
        """Send the whole queue to the stale ``node`` (its resync is due); whether it worked.

        Runs after the segments of the lane's batch, so it reads files at
        least as new as any of them (or on its own when the queue is
        idle).  A copy that raises is logged and counts as failed.
        """
        logger.info("Resynchronising the job queue of %s", node)
        try:
            return self._send_queue(node)
        except Exception:  # the thread must survive anything
            logger.exception("Job queue resynchronisation of %s failed", node)
            return False

    def _send_queue(self, node: str) -> bool:
        """The whole queue to ``node`` while it is a candidate (re-checked before
        each part); whether it got it."""
        if self.rpc is None:
            return True

        def still_wanted(names: list[str]) -> list[str]:
            with self._cond:
                return self._plan.still_candidates(names)

        return not copy_queue(self.rpc, self.paths, [node], timeout=self.timeout,
                              still_wanted=still_wanted)


def _group_updates(segments: list[Segment]) -> list[list[Segment]]:
    """``segments`` in runs: consecutive file updates together, every other alone."""
    groups: list[list[Segment]] = []
    for segment in segments:
        if groups and isinstance(segment.op, FileUpdate) \
                and isinstance(groups[-1][0].op, FileUpdate):
            groups[-1].append(segment)
        else:
            groups.append([segment])
    return groups
