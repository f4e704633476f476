"""The fence of node loss recovery: ``OP_NODE_HA_FENCE`` (doc/ha.md, "Node loss recovery").

The master's recovery thread (:mod:`ganeti.server.harecovery`) submits it,
with reason ``gnt:ha``, for a node the master candidates confirmed dead;
nothing of the node is started elsewhere unless this opcode succeeds.
The LU writes the verdict it was given to the job log, marks the node
offline (the candidate pool filled again, as ``gnt-node modify -O yes
--auto-promote`` does), then fences it:

* ``oob``: the node's ``oob_program`` powers it off (the node recorded
  powered off first, as ``OP_OOB_COMMAND`` does); the fence is confirmed
  when the program answers success;
* ``lease``: the node stops the instances its self-fence lease names
  before the lease runs out; the master computed how long that can take
  (``lease_wait``), counted here from the opcode's start, so never
  shorter.  Killing the job ends the wait with an error.

Once confirmed, the node is tagged ``ganeti:ha:fenced:<fence>:<time>``
(:func:`ganeti.ha.recovery.fenced_tag`), so a master that takes over
resumes the recovery; ``gnt-node modify -O no`` or the end of the
recovery removes the tag.
The job log says which fence was used and when it was confirmed; the
result is ``{"node", "fence", "confirmed"}`` (the time of day, seconds).

``OP_NODE_HA_REPORT`` writes the recovery's other lines about the node
(the plan; the verdict and the fence at the head of each instance's
recovery job) to the job log; it takes no lock and changes nothing.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from ganeti import constants, errors, locking
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.cmdlib.oob import RPC_MARGIN, check_output, oob_program
from ganeti.cmdlib.common import adjust_candidate_pool, expand_node
from ganeti.cmdlib.node import sync_queue_to
from ganeti.ha import recovery
from ganeti.opcodes.node import OpNodeHaFence, OpNodeHaReport

__all__ = ["LUNodeHaFence", "LUNodeHaReport", "stamp"]


def stamp(when: float) -> str:
    """A time of day for the job log: ``2026-12-04 21:59:10 UTC``."""
    return datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


class LUNodeHaFence(NoHooksLU[OpNodeHaFence]):
    """Mark a dead node offline and fence it (see the module docstring).

    Locks every node while the candidate pool may change, then the fenced
    node's alone for the power-off or the lease wait.  Refused for the
    master, and for ``oob`` when the node has no ``oob_program``.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.node = expand_node(self.cfg, self.op.node_name, self.op.node_uuid)
        self.needed_locks = {locking.LEVEL_NODE: locking.ALL_SET}

    def CheckPrereq(self) -> None:
        node = self.cfg.get_node_info(self.node.uuid) or self.node
        if node.uuid == self.cfg.get_master_node():
            raise errors.OpPrereqError("The master cannot be fenced by node loss recovery",
                                       errors.ECODE_INVAL)
        self.program = oob_program(self.cfg, node)
        if self.op.fence == "oob" and not self.program:
            raise errors.OpPrereqError(f"Node {node.name} has no oob_program: it cannot be"
                                       " fenced out of band", errors.ECODE_STATE)
        self.node = node

    def _offline(self, feedback_fn: FeedbackFn) -> None:
        node = self.node
        was_mc = node.master_candidate
        if node.offline and not was_mc:
            return
        node.offline = True
        node.master_candidate = False
        self.cfg.update(node)
        self.LogInfo(f"Node {node.name} marked offline"
                     + (" (no longer a master candidate)" if was_mc else ""))
        if was_mc:
            for name in adjust_candidate_pool(self.cfg, [node.uuid], feedback_fn):
                sync_queue_to(self.context, name)

    def _power_off(self) -> None:
        """Run the node's out-of-band power-off; raises :class:`errors.OpExecError`."""
        node, op = self.node, self.op
        master = self.cfg.get_master_node_name()
        was = node.powered
        # recorded first, while the node still is a voter (as OP_OOB_COMMAND, doc/oob.md)
        if node.powered:
            node.powered = False
            self.cfg.update(node)
        res = self.require_rpc().call_run_oob(
            master, oob_program=self.program, command=constants.OOB_POWER_OFF,
            remote_node=node.name, timeout=op.timeout, rpc_timeout=op.timeout + RPC_MARGIN)[master]
        try:
            if res.fail_msg:
                raise errors.OpExecError(f"Out-of-band power-off of {node.name} failed:"
                                         f" {res.fail_msg}")
            check_output(constants.OOB_POWER_OFF, str(res.payload or ""))
        except errors.OpExecError:
            if was:
                node.powered = True
                self.cfg.update(node)
            raise

    def _record(self, confirmed: float) -> None:
        """Tag the node ``ganeti:ha:fenced:<fence>:<time>`` (older such tags replaced):
        in the replicated configuration, so a new master resumes the recovery."""
        node = self.cfg.get_node_info(self.node.uuid) or self.node
        node.tags = [t for t in node.tags if not t.startswith(recovery.FENCED_PREFIX)]
        node.tags.append(recovery.fenced_tag(self.op.fence, confirmed))
        self.cfg.update(node)
        self.node = node

    def Exec(self, feedback_fn: FeedbackFn) -> dict[str, Any]:
        start = time.monotonic()
        op, node = self.op, self.node
        for line in op.messages:
            self.LogInfo(line)
        self._offline(feedback_fn)
        # the candidate pool is settled: keep the fenced node's lock alone, so the
        # power-off or the lease wait (tens of seconds) holds up no other node's jobs
        others = self.owned_locks(locking.LEVEL_NODE) - {node.uuid}
        if others and self.glm is not None:
            self.glm.release(locking.LEVEL_NODE, others)
        if op.fence == "oob":
            self.LogInfo(f"Fence: out-of-band power-off of {node.name} ({self.program})")
            self._power_off()
            how = "out-of-band power-off"
        else:
            left = op.lease_wait - (time.monotonic() - start)
            self.LogInfo(f"Fence: self-fence of {node.name}: waiting {max(0.0, left):.1f} s"
                         " for its lease to run out (it stops the instances its lease names"
                         " before that)")
            if left > 0 and self.proc.wait_interrupt(left):
                raise errors.OpExecError(f"The lease wait of {node.name} was interrupted:"
                                         " not fenced")
            how = "its self-fence lease"
        confirmed = time.time()
        self._record(confirmed)
        self.LogInfo(f"{node.name} fenced by {how}, confirmed at {stamp(confirmed)}")
        return {"node": node.name, "fence": op.fence, "confirmed": confirmed}


class LUNodeHaReport(NoHooksLU[OpNodeHaReport]):
    """Write node loss recovery's lines about a node to the job log; no lock, no change."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.node = expand_node(self.cfg, self.op.node_name)
        self.needed_locks = {}

    def CheckPrereq(self) -> None:
        pass

    def Exec(self, feedback_fn: FeedbackFn) -> bool:
        for line in self.op.messages:
            self.LogInfo(line)
        return True
