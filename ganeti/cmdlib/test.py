"""Logical units for testing: delays (and the job-queue test opcode)."""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, locking
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.opcodes.test import OpTestDelay, OpTestJqueue

__all__ = ["LUTestDelay", "LUTestJqueue"]


class LUTestDelay(NoHooksLU[OpTestDelay]):
    """Sleep on the master and/or on nodes (through ``test_delay`` RPC).

    Without ``no_locks`` the node locks of ``on_nodes`` are held
    (exclusively, as upstream), so delays on the same node serialise.
    (Ganeti also locks the master node for a sleep ``on_master``; ours does
    not yet: doc/compat.md.)

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
        if not self.op.no_locks and self.node_uuids:
            self.needed_locks[locking.LEVEL_NODE] = list(self.node_uuids)

    def _delay(self) -> None:
        if self.op.on_master and self.op.duration > 0:
            if self.proc.wait_interrupt(self.op.duration):
                raise errors.OpExecError("Delay interrupted: the job was killed")
        if self.node_names:
            if self.rpc is None:
                raise errors.OpExecError("Node RPC is not available on this master")
            results = self.rpc.call_test_delay(self.node_names, self.op.duration)
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
    """Log the given messages, then fail if asked to (tests the queue)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        for msg in self.op.log_messages:
            self.proc.log(constants.ELOG_JQUEUE_TEST, msg)
        if self.op.fail:
            raise errors.OpExecError("Opcode failure was requested")
        return True
