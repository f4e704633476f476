"""Base classes of the logical units (LUs): how to write one.

An LU implements one opcode (``OpFooBar`` -> ``LUFooBar``).  The processor
(:mod:`ganeti.mcpu`) creates it with ``(processor, op, context)`` and calls
its phases in this order:

``CheckArguments()``
    Called from the constructor.  Check the opcode's parameters against
    each other, without looking at the cluster (no config, no RPC, no
    locks yet).  Raise :class:`errors.OpPrereqError` with ``ECODE_INVAL``.

``ExpandNames()``
    Turn user-given names into full names/UUIDs (through ``self.cfg``) and
    declare the locks needed, in ``self.needed_locks``: a dict from lock
    level to a list of names, or :data:`locking.ALL_SET` for the whole
    level.  Levels absent from the dict are not locked.  Examples::

        # nothing but the BGL (shared unless REQ_BGL):
        self.needed_locks = {}
        # one instance exclusively, its nodes computed later:
        self.needed_locks = {locking.LEVEL_INSTANCE: [name],
                             locking.LEVEL_NODE: []}
        # every node, shared:
        self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}
        self.share_locks = {locking.LEVEL_NODE: 1}

    ``self.share_locks`` maps a level to 1 (shared) or 0 (exclusive,
    the default).  The cluster level (the BGL) is handled by the processor:
    exclusive when ``REQ_BGL`` is true, else shared.  ExpandNames may run
    several times (each lock attempt gets a fresh LU), so it must not
    change anything.

``DeclareLocks(level)``
    Called just before each level is acquired, with the earlier levels
    held: fill in locks that depend on them (e.g. the nodes of the locked
    instance).  Default: nothing.

``CheckPrereq()``
    With all locks held, check that the operation can run (objects exist,
    states are right, resources suffice).  Change nothing; raise
    :class:`errors.OpPrereqError` with a fitting ``ECODE_*``.

``BuildHooksEnv()`` / ``BuildHooksNodes()`` (only with ``HPATH``)
    The hook environment (keys without the ``GANETI_`` prefix) and the
    ``(pre_nodes, post_nodes)`` lists of node names the hooks run on.

``Exec(feedback_fn)``
    Do the work, through ``self.cfg`` and ``self.rpc``; report progress
    with ``feedback_fn(msg)`` or ``self.LogInfo`` (long copies: typed
    entries through ``self.progress_reporter``); return a JSON-able
    result.  Raise :class:`errors.OpExecError` on failure.

Use :class:`NoHooksLU` for operations without hooks; it needs no
``BuildHooks*`` methods.

An LU names its opcode class as the type argument of its base, so that
``self.op`` has the opcode's fields for the type checker::

    class LUNodePowercycle(LogicalUnit[OpNodePowercycle]):
        ...
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from ganeti import constants, errors, opcodes, progress
from ganeti.aliases import FeedbackFn
from ganeti.config import ConfigWriter
from ganeti.context import MasterContext
from ganeti.cmdlib.hooksmaster import HooksMaster
from ganeti.locking import GanetiLockManager
from ganeti.rpc.client import RpcRunner

if TYPE_CHECKING:
    from ganeti.mcpu import Processor  # mcpu imports cmdlib

__all__ = ["LogicalUnit", "NoHooksLU", "OpT"]

#: The opcode class an LU implements (``LogicalUnit[OpNodeAdd]``).
OpT = TypeVar("OpT", bound=opcodes.OpCode)


class LogicalUnit(Generic[OpT]):
    """Base of every LU; see the module docstring for the phases.

    Attributes for subclasses: ``op`` (the opcode), ``cfg``, ``rpc``,
    ``glm``, ``context``, ``needed_locks``, ``share_locks``,
    ``dry_run_result`` (returned instead of executing when ``op.dry_run``).
    """

    HPATH: str | None = None
    HTYPE: str | None = None
    REQ_BGL: bool = True

    def __init__(self, processor: Processor, op: OpT, context: MasterContext) -> None:
        self.proc = processor
        self.op = op
        self.context = context
        # The context has no configuration only in tests of LUs that never
        # read it (job and lock queries); every other LU may rely on it.
        self.cfg = cast(ConfigWriter, context.cfg)
        self.rpc: RpcRunner | None = context.rpc
        self.glm: GanetiLockManager | None = context.glm
        self.needed_locks: dict[int, Any] = {}
        self.share_locks: dict[int, int] = {}
        self.dry_run_result: Any = None
        #: set by the hooks runner once it built the LU's hooks (pre phase)
        self.hooks_master: HooksMaster | None = None
        self.CheckArguments()

    # phases ----------------------------------------------------------------
    def CheckArguments(self) -> None:
        """Check the opcode's own arguments (no cluster access)."""

    def ExpandNames(self) -> None:
        """Expand names and fill ``needed_locks``; see the module docstring."""
        raise NotImplementedError

    def DeclareLocks(self, level: int) -> None:
        """Add locks of ``level`` that depend on those already held."""

    def CheckPrereq(self) -> None:
        """Check the cluster state with the locks held; change nothing."""

    def BuildHooksEnv(self) -> dict[str, Any]:
        """The hooks environment (without the ``GANETI_`` prefix)."""
        raise NotImplementedError

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        """``(pre_nodes, post_nodes)``: node names the hooks run on."""
        raise NotImplementedError

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        """Do the work; return a JSON-able result."""
        raise NotImplementedError

    def release_reservations(self) -> None:
        """Drop what the LU reserved in the config for itself (generated MACs).

        The processor calls this once the LU ended, whatever the outcome
        (success, dry run, failure in any phase).  Override it in LUs that
        reserve something; the default does nothing.
        """

    # helpers -----------------------------------------------------------------
    def owned_locks(self, level: int) -> set[str]:
        """Names the running job holds at ``level`` (empty without a lock manager)."""
        if self.glm is None:
            return set()
        return self.glm.list_owned(level)

    def require_rpc(self) -> RpcRunner:
        """``self.rpc`` for an LU that cannot work without node RPC.

        Raises :class:`errors.OpExecError` on a master without one (tests
        that give the context no RPC runner).
        """
        return self.context.require_rpc()

    def LogInfo(self, message: str) -> None:
        """Send an informational message to the job log."""
        self.proc.log(constants.ELOG_MESSAGE, message)

    def LogWarning(self, message: str) -> None:
        """Send a warning to the job log."""
        self.proc.log(constants.ELOG_MESSAGE, f"WARNING: {message}")

    def LogStep(self, current: int, total: int, message: str) -> None:
        """Send a ``STEP n/m`` progress message."""
        self.proc.log(constants.ELOG_MESSAGE, f"STEP {current}/{total} {message}")

    def LogProgress(self, op: str, cur: int, end: int, rate: float | None = None,
                    eta: float | None = None, done: bool = False,
                    error: str | None = None) -> None:
        """Send a typed progress entry (``ELOG_PROGRESS``) to the job log.

        ``op`` names the operation (:data:`ganeti.progress.OPS`), ``cur``
        and ``end`` are bytes; the entry's format is in doc/progress.md.
        Most LUs want :meth:`progress_reporter` instead, which throttles
        the entries and always writes the final one.
        """
        self.proc.log(constants.ELOG_PROGRESS,
                      progress.entry(op, cur, end, rate=rate, eta=eta, done=done, error=error))

    def progress_reporter(self, op: str, *, end: int = 0,
                          clock: Callable[[], float] = time.monotonic,
                          instance: str | None = None, device: str = "",
                          op_type: str = "copy") -> progress.Reporter:
        """A :class:`ganeti.progress.Reporter` writing into this job's log.

        Use it as a context manager around the operation: updates are
        throttled (about one entry a second and per percent), and the final
        entry -- ``done``, with the error when the block raised -- is always
        written::

            with self.progress_reporter("disk-copy", end=size) as rep:
                ...
                rep.update(copied)

        With ``instance``, the operation also shows as a block job
        (``op_type``, ``device``) in that instance's ``jobs`` runtime field
        until it ends (``context.runtime_jobs``; for copies no hypervisor
        sees, doc/progress.md, "Runtime jobs").
        """
        def log(msg: dict[str, Any]) -> None:
            self.proc.log(constants.ELOG_PROGRESS, msg)
        emit: Callable[[dict[str, Any]], None] = log
        if instance is not None:
            key = f"{op}:{device}:{id(log)}"
            emit = progress.table_emitter(log, self.context.runtime_jobs, instance, key,
                                          op_type=op_type, device=device)
        return progress.Reporter(emit, op, clock=clock, end=end)

    def check_node_names(self, names: list[str]) -> list[str]:
        """Check that every node name exists; returns them in order.

        Raises :class:`errors.OpPrereqError` with ``ECODE_NOENT``.
        """
        if self.cfg is None:
            raise errors.OpPrereqError("No configuration available", errors.ECODE_ENVIRON)
        result = []
        for name in names:
            node = self.cfg.get_node_info_by_name(name)
            if node is None:
                raise errors.OpPrereqError(f"Node '{name}' is unknown", errors.ECODE_NOENT)
            result.append(node.name)
        return result


class NoHooksLU(LogicalUnit[OpT]):
    """An LU without hooks (``HPATH`` is None)."""

    HPATH = None
    HTYPE = None

    def BuildHooksEnv(self) -> dict[str, Any]:
        raise errors.ProgrammerError("BuildHooksEnv called for a NoHooksLU")

    def BuildHooksNodes(self) -> tuple[list[str], list[str]]:
        raise errors.ProgrammerError("BuildHooksNodes called for a NoHooksLU")
