"""The processor: runs one opcode through its logical unit.

:meth:`Processor.execute_opcode` finds the LU class (``OpFooBar`` ->
``LUFooBar`` in :data:`ganeti.cmdlib.LU_REGISTRY`) and drives its phases:

1. ``CheckArguments()`` (in the LU constructor) and ``ExpandNames()``;
2. for each lock level in order (cluster/BGL, instance, nodegroup, node,
   node-res): ``DeclareLocks(level)`` and acquisition through the lock
   manager with a timeout;
   (a first pass takes them only if free at once; when that fails,
   ``callbacks.notify_waiting()`` marks the opcode *waiting*);
3. ``callbacks.notify_start()`` (the opcode is now *running*);
4. ``CheckPrereq()``, pre hooks, ``Exec(feedback_fn)``, waiting for the
   config replication, post hooks;
5. release of every lock.

**Lock timeouts and priority.**  An attempt that times out at any level
releases everything and starts over with a longer timeout
(:func:`lock_timeouts`).  When the timeouts are exhausted, the opcode's
priority is raised by one (``callbacks.set_priority``) and the sequence
restarts; at the highest priority the acquire blocks.  Lock waiters are
served by priority, so a starving job eventually wins.  Between attempts
``callbacks.check_cancel()`` lets a canceled job stop.

**Callbacks** (from the job queue; :class:`NullCallbacks` for tests):
``notify_waiting()`` (optional), ``notify_start()``, ``feedback(msg)`` / ``feedback(type, msg)``,
``check_cancel() -> bool``, ``current_priority() -> int``,
``set_priority(prio)``, ``submit_many_jobs(jobs)``.

**Hooks.**  When ``context.hooks_runner`` is set and the LU has an
``HPATH``, ``hooks_runner.run_hooks(lu, phase, feedback_fn)`` is called
with ``constants.HOOKS_PHASE_PRE`` before ``Exec`` (raising
:class:`errors.HooksAbort` stops the opcode) and ``HOOKS_PHASE_POST`` after
(failures are only logged).

**Config replication.**  When ``context.replicator`` is set (the master
daemon's :class:`ganeti.replication.Replicator`), an opcode whose
``Exec`` changed the configuration (``cfg.last_saved_serial()``, the serial
of the calling thread's newest save, grew) waits, after
``Exec`` and before the post hooks and before reporting success, for
``replicator.wait_replicated(serial)``: the master candidates have then
been sent that serial or a newer one.  The wait is bounded by the
replicator's timeout; when it runs out an error is logged and a warning
goes to the job log, but the opcode still succeeds (its change is saved
on the master, and candidates that missed it get the next push), as for
per-node replication failures (doc/design/replication.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ganeti import constants, errors, locking, opcodes
from ganeti.cmdlib import LU_REGISTRY
from ganeti.cmdlib.base import LogicalUnit
from ganeti.context import MasterContext

__all__ = ["Processor", "NullCallbacks", "lock_timeouts"]

logger = logging.getLogger(__name__)


def lock_timeouts(first: float = 0.1, factor: float = 1.6, maximum: float = 10.0,
                  total: float = 60.0) -> list[float]:
    """The growing per-attempt lock timeouts of one priority round."""
    result, t, acc = [], first, 0.0
    while acc < total:
        result.append(t)
        acc += t
        t = min(maximum, t * factor)
    return result


class NullCallbacks:
    """Callbacks that do nothing (opcodes run outside the job queue)."""

    def __init__(self, priority: int = constants.OP_PRIO_DEFAULT,
                 feedback_fn: Callable[..., None] | None = None) -> None:
        self.priority = priority
        self.messages: list[tuple[str, Any]] = []
        self._feedback_fn = feedback_fn
        self.interrupted = threading.Event()

    def notify_waiting(self) -> None:
        pass

    def notify_start(self) -> None:
        pass

    def feedback(self, *args: Any) -> None:
        entry = (constants.ELOG_MESSAGE, args[0]) if len(args) == 1 else (args[0], args[1])
        self.messages.append(entry)
        if self._feedback_fn is not None:
            self._feedback_fn(*args)

    def check_cancel(self) -> bool:
        return False

    def wait_interrupt(self, timeout: float) -> bool:
        """Sleep up to ``timeout``; True early if :attr:`interrupted` is set."""
        return self.interrupted.wait(max(0.0, timeout))

    def current_priority(self) -> int:
        return self.priority

    def set_priority(self, priority: int) -> None:
        self.priority = priority

    def submit_many_jobs(self, jobs: list[Any]) -> list[Any]:
        raise errors.ProgrammerError("Cannot submit jobs outside the job queue")


class _LockTimeout(Exception):
    """Internal: one lock acquisition attempt timed out (never escapes)."""


class Processor:
    """Runs opcodes; one instance per job execution (cheap to create)."""

    def __init__(self, context: MasterContext, *, timeouts: list[float] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.context = context
        self._timeouts = timeouts if timeouts is not None else lock_timeouts()
        self._clock = clock
        self._cbs: Any = NullCallbacks()

    # feedback ----------------------------------------------------------------
    def log(self, *args: Any) -> None:
        """Send a message to the job's log (``log(msg)`` or ``log(type, msg)``)."""
        logger.info("Job feedback: %s", args[-1])
        self._cbs.feedback(*args)

    def wait_interrupt(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, for interruptible opcodes.

        Returns True as soon as the running opcode is interrupted (the job
        is killed: ``CancelJob`` with ``kill``), False after the full sleep.
        """
        wait = getattr(self._cbs, "wait_interrupt", None)
        if wait is None:        # callbacks without interruption support
            time.sleep(max(0.0, timeout))
            return False
        return bool(wait(timeout))

    def submit_many_jobs(self, jobs: list[Any]) -> list[Any]:
        """Submit jobs from within an LU (e.g. multi-relocation results)."""
        return self._cbs.submit_many_jobs(jobs)

    def job_submitted_at(self) -> float | None:
        """Wall-clock time the running job was received, or None (no job)."""
        submitted = getattr(self._cbs, "submitted_at", None)
        return submitted() if submitted is not None else None

    # main entry ----------------------------------------------------------------
    def execute_opcode(self, op: opcodes.OpCode, cbs: Any = None) -> Any:
        """Run ``op``; returns the LU's result, raises its errors.

        Errors: :class:`errors.OpPrereqError` (nothing changed),
        :class:`errors.OpExecError`, :class:`errors.HooksAbort`, or a
        :class:`errors.OpExecError` "canceled" when the job was canceled
        while waiting for locks.
        """
        self._cbs = cbs if cbs is not None else NullCallbacks(op.priority)
        lu_class = LU_REGISTRY.get(op.OP_ID)
        if lu_class is None:
            raise errors.OpCodeError(f"Opcode {op.OP_ID} has no logical unit", errors.ECODE_INVAL)
        glm = self.context.glm
        if glm is None:
            lu = lu_class(self, op, self.context)
            lu.ExpandNames()
            self._cbs.notify_start()
            try:
                return self._exec_lu(lu)
            finally:
                lu.release_reservations()
        priority = self._cbs.current_priority()
        # A first pass that takes the locks only if they are free at once
        # (fair: it never overtakes a queued waiter); only when that fails
        # is the job shown "waiting", so a job whose locks are free goes
        # from "queued" to "running" with one durable write.
        first_pass = True
        while True:
            for timeout in ([0.0] if first_pass else []) + self._timeouts + [None]:
                if timeout is None and priority > constants.OP_PRIO_HIGHEST:
                    break
                if self._cbs.check_cancel():
                    raise errors.OpExecError("Job canceled while waiting for locks")
                lu = lu_class(self, op, self.context)
                lu.ExpandNames()
                try:
                    self._acquire_locks(glm, lu, timeout, priority)
                except _LockTimeout:
                    self._release_all(glm)
                    if first_pass:
                        first_pass = False
                        self._notify_waiting()
                        continue
                    logger.debug("%s: lock timeout %.2fs at priority %s", op.OP_ID, timeout, priority)
                    continue
                except BaseException:
                    self._release_all(glm)
                    raise
                try:
                    self._cbs.notify_start()
                    return self._exec_lu(lu)
                finally:
                    lu.release_reservations()
                    self._forget_live_data(lu)
                    self._release_all(glm)
            first_pass = False
            priority = max(constants.OP_PRIO_HIGHEST, priority - 1)
            self._cbs.set_priority(priority)

    def notify_waiting(self) -> None:
        """Mark the running opcode *waiting* (for locks) now, as Ganeti shows it
        during ``ExpandNames`` (``OP_TEST_JQUEUE``'s notifications check it)."""
        self._notify_waiting()

    def _notify_waiting(self) -> None:
        notify = getattr(self._cbs, "notify_waiting", None)
        if notify is not None:      # callbacks from before the waiting state
            notify()

    def _acquire_locks(self, glm: locking.GanetiLockManager, lu: LogicalUnit[Any],
                       timeout: float | None, priority: int) -> None:
        for level in locking.LEVELS:
            if level == locking.LEVEL_CLUSTER:
                names: Any = [locking.BGL]
                shared = not lu.REQ_BGL
            else:
                lu.DeclareLocks(level)
                if level not in lu.needed_locks:
                    continue
                names = lu.needed_locks[level]
                if names is not locking.ALL_SET and not names:
                    continue
                shared = bool(lu.share_locks.get(level, 0))
            waited = self._clock()
            got = glm.acquire(level, names, shared=shared, timeout=timeout, priority=priority)
            if self.context.metrics is not None:
                self.context.metrics.lock_waited(locking.LEVEL_NAMES[level],
                                                 self._clock() - waited)
            if got is None:
                raise _LockTimeout()

    def _forget_live_data(self, lu: LogicalUnit[Any]) -> None:
        """Drop cached live data of the nodes the LU locked (it may have changed them)."""
        cache = getattr(self.context, "node_info_cache", None)
        if cache is None:
            return
        if lu.REQ_BGL:          # cluster-wide change (e.g. storage or hypervisor settings)
            cache.invalidate(None)
            return
        nodes = lu.owned_locks(locking.LEVEL_NODE) | lu.owned_locks(locking.LEVEL_NODE_RES)
        if nodes:
            cache.invalidate(nodes)

    @staticmethod
    def _release_all(glm: locking.GanetiLockManager) -> None:
        glm.release_all()

    def _config_serial(self) -> int | None:
        cfg = self.context.cfg
        if cfg is None or getattr(self.context, "replicator", None) is None:
            return None
        own = getattr(cfg, "last_saved_serial", None)
        return own() if own is not None else cfg.get_serial_no()

    def _wait_replicated(self, lu: LogicalUnit[Any], serial_before: int | None) -> None:
        """Block until the config serial ``Exec`` produced reached the candidates."""
        if serial_before is None:
            return
        serial = self._config_serial()
        replicator = self.context.replicator
        if serial is None or serial <= serial_before or replicator is None:
            return
        if not replicator.wait_replicated(serial):
            logger.error("%s: configuration serial %s was not replicated to the master"
                         " candidates in time", lu.op.OP_ID, serial)
            self.log(f"Warning: configuration serial {serial} could not be confirmed on"
                     " the master candidates in time")

    def _exec_lu(self, lu: LogicalUnit[Any]) -> Any:
        serial_before = self._config_serial()
        lu.CheckPrereq()
        if lu.op.dry_run:
            return lu.dry_run_result
        hooks = self.context.hooks_runner if lu.HPATH else None
        if hooks is not None:
            hooks.run_hooks(lu, constants.HOOKS_PHASE_PRE, self.log)
        result = lu.Exec(self.log)
        self._wait_replicated(lu, serial_before)
        if hooks is not None:
            try:
                hooks.run_hooks(lu, constants.HOOKS_PHASE_POST, self.log)
            except errors.GanetiError as exc:
                logger.warning("Post hooks of %s failed: %s", lu.op.OP_ID, exc)
                self.log(f"Post hooks failed: {exc}")
        return result
