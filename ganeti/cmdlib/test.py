"""Logical units for testing: delays, the job-queue test opcode, secret OS parameters."""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, locking
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.opcodes.test import OpTestDelay, OpTestJqueue, OpTestOsParams

__all__ = ["LUTestDelay", "LUTestJqueue", "LUTestOsParams"]


class LUTestDelay(NoHooksLU[OpTestDelay]):
    """Sleep on the master and/or on nodes (through ``test_delay`` RPC).

    Without ``no_locks`` the node locks of ``on_nodes``, and the master
    node's for a sleep ``on_master``, are held (exclusively, as Ganeti's), so
    delays on the same node serialise: a second ``gnt-debug delay`` waits
    for the first and can be cancelled meanwhile.

    The master-side sleep ends at once when the job is killed (``CancelJob``
    with ``kill``, ``gnt-job cancel --kill --yes-do-it``; in Ganeti a kill
    ends the job's process) and the opcode fails with "Delay interrupted"
    (the job ends ``canceled``); the check is also made between ``repeat``
    iterations.  ``interruptible`` is accepted for Ganeti's clients (its
    QA-socket mechanism is not implemented).  Node-side delays run in the
    node daemons and are not interrupted.
    """

    REQ_BGL = False

    def CheckArguments(self) -> None:
        if self.op.on_node_uuids and self.op.on_nodes:
            raise errors.OpPrereqError("Give either on_nodes or on_node_uuids, not both",
                                       errors.ECODE_INVAL)

    def ExpandNames(self) -> None:
        self.node_uuids: list[str] = list(self.op.on_node_uuids or [])
        self.node_names: list[str] = []
        if self.op.on_nodes:
            for name in self.op.on_nodes:
                node = self.cfg.get_node_info_by_name(name) if self.cfg is not None else None
                if node is None:
                    raise errors.OpPrereqError(f"Node '{name}' is unknown", errors.ECODE_NOENT)
                self.node_uuids.append(node.uuid)
                self.node_names.append(node.name)
        elif self.node_uuids:
            for uuid in self.node_uuids:
                node = self.cfg.get_node_info(uuid) if self.cfg is not None else None
                if node is None:
                    raise errors.OpPrereqError(f"Node UUID '{uuid}' is unknown", errors.ECODE_NOENT)
                self.node_names.append(node.name)
        self.needed_locks = {}
        if self.op.no_locks:
            return
        locks = list(self.node_uuids)
        master = self.cfg.get_master_node() if self.op.on_master and self.cfg else None
        if master and master not in locks:
            locks.append(master)
        if locks:
            self.needed_locks[locking.LEVEL_NODE] = locks

    def _delay(self) -> None:
        if self.op.on_master and self.op.duration > 0:
            if self.proc.wait_interrupt(self.op.duration):
                raise errors.OpExecError("Delay interrupted: the job was killed")
        if self.node_names:
            if self.rpc is None:
                raise errors.OpExecError("Node RPC is not available on this master")
            results = self.rpc.call_test_delay(self.node_names, duration=self.op.duration)
            for node in self.node_names:
                res = results.get(node)
                if res is None:
                    raise errors.OpExecError(f"No answer from node {node}")
                res.raise_on_failure(f"Failure waiting on node {node}")

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        if self.op.repeat == 0:
            self._delay()
        else:
            for i in range(self.op.repeat):
                if self.proc.wait_interrupt(0):
                    raise errors.OpExecError("Delay interrupted: the job was killed")
                self.LogInfo(f"Test delay iteration {i + 1}/{self.op.repeat}")
                self._delay()
        return None


class LUTestJqueue(NoHooksLU[OpTestJqueue]):
    """Log the given messages, then fail if asked to (tests the queue).

    Without notifications each message goes to the job log as a
    ``jqueue-test`` entry and no lock is taken.  With ``notify_waitlock`` or
    ``notify_exec`` (Ganeti's ``gnt-debug test-jobqueue`` sets both) the LU
    follows Ganeti's protocol: it takes the master node's lock; at each
    step it logs ``[socket path, test, argument]`` (``jqueue-test``) and
    waits for the client to connect to that Unix socket and confirm
    (:func:`ganeti.utils.rendezvous.wait_for_peer`): ``expandnames`` while
    the job is *waiting* (``notify_waitlock``), ``exec`` when it runs
    (``notify_exec``), then ``startmsg`` (the message count), each message as
    a plain log line ``TESTMSG=<message>`` followed by ``logmsg`` (how many
    were sent).  A client that does not connect within 20 s or confirm
    within 60 s fails the opcode (OpPrereqError at ``expandnames``,
    OpExecError later).
    """

    REQ_BGL = False
    CONNECT_TIMEOUT = 20.0
    CONFIRM_TIMEOUT = 60.0

    @property
    def _protocol(self) -> bool:
        return self.op.notify_waitlock or self.op.notify_exec

    def _notify(self, test: str, arg: Any, errcls: type[errors.GanetiError]) -> None:
        from ganeti.utils.rendezvous import wait_for_peer
        try:
            wait_for_peer(lambda path: self.proc.log(constants.ELOG_JQUEUE_TEST,
                                                     [path, test, arg]),
                          connect_timeout=self.CONNECT_TIMEOUT,
                          confirm_timeout=self.CONFIRM_TIMEOUT)
        except OSError as exc:
            raise errcls(f"Job queue test notification '{test}' failed: {exc}") from exc

    def ExpandNames(self) -> None:
        self.needed_locks = {}
        if not self._protocol:
            return
        if self.op.notify_waitlock:
            self.proc.notify_waiting()
            self._notify(constants.JQT_EXPANDNAMES, None, errors.OpPrereqError)
        self.LogInfo("Expanding names")
        self.needed_locks = {locking.LEVEL_NODE: [self.cfg.get_master_node()]}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        if not self._protocol:
            for msg in self.op.log_messages:
                self.proc.log(constants.ELOG_JQUEUE_TEST, msg)
        else:
            if self.op.notify_exec:
                self._notify(constants.JQT_EXEC, None, errors.OpExecError)
            self.LogInfo("Executing")
            if self.op.log_messages:
                self._notify(constants.JQT_STARTMSG, len(self.op.log_messages),
                             errors.OpExecError)
                for idx, msg in enumerate(self.op.log_messages):
                    self.LogInfo(f"Sending log message {idx + 1}")
                    feedback_fn(constants.JQT_MSGPREFIX + msg)
                    self._notify(constants.JQT_LOGMSG, idx + 1, errors.OpExecError)
        if self.op.fail:
            raise errors.OpExecError("Opcode failure was requested")
        return True


class LUTestOsParams(NoHooksLU[OpTestOsParams]):
    """Confirm which secret OS parameters arrived, without their values.

    Ganeti's LU prints the values back; ours names the keys only, since a
    secret value is never written into a job, log or answer
    (doc/protocols/opcodes.md, "Private parameters"; doc/compat.md).  No
    locks; fails with Ganeti's "Opcode needs secret parameters" when none
    were given.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> None:
        if not self.op.osparams_secret:
            raise errors.OpExecError("Opcode needs secret parameters")
        feedback_fn(f"Secret OS parameters: {', '.join(sorted(self.op.osparams_secret))}"
                    " (received; values are never written to a job)")
