"""Out-of-band node management: ``OP_OOB_COMMAND`` (``gnt-node power``, ``health``).

A node whose ``oob_program`` node parameter is set can be powered on, off
and cycled, and asked for its power state and health, by a program that
talks to the machine's management board (IPMI, a PDU, ...), not to the
operating system on it.  As in Ganeti, the program always runs on the
master (node procedure ``run_oob``) as ``PROGRAM COMMAND NODE_NAME``; its
exit status says whether the command succeeded and its standard output is
JSON whose shape depends on the command (:func:`check_output`, the pure
half of this module).  The node's ``powered`` flag in the configuration is
the record of the last power-on or power-off (doc/oob.md).

Locks: the named nodes (all without names), exclusive for the power
changes, shared for ``power-status`` and ``health``.
"""

from __future__ import annotations

import logging
from typing import Any

from ganeti import constants, errors, locking, parameters, query, serializer
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.cmdlib.common import expand_node
from ganeti.config import ConfigReader
from ganeti.objects import Node
from ganeti.opcodes.node import OpOobCommand

__all__ = ["LUOobCommand", "check_output", "output_problems", "oob_program",
           "SKIP_MASTER", "RPC_MARGIN"]

logger = logging.getLogger(__name__)

#: commands that would take the master down with them (refused without force_master;
#: left out of "all nodes")
SKIP_MASTER = (constants.OOB_POWER_OFF, constants.OOB_POWER_CYCLE)
#: seconds the master waits for the node procedure beyond the program's own timeout
RPC_MARGIN = 30.0


def output_problems(command: str, payload: Any) -> list[str]:
    """What is wrong with the decoded answer ``payload`` of ``command`` (empty: nothing).

    ``power-on``, ``power-off`` and ``power-cycle`` answer nothing,
    ``power-status`` ``{"powered": true|false}`` and ``health`` a list of
    ``[item, status]`` pairs, each status one of ``OK``, ``WARNING``,
    ``CRITICAL``, ``UNKNOWN``.
    """
    problems: list[str] = []
    if command == constants.OOB_HEALTH:
        if not isinstance(payload, list):
            return [f"command 'health' is expected to return a list but got"
                    f" {type(payload).__name__}"]
        for entry in payload:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                problems.append(f"health item {serializer.dumps(entry)} is not an [item, status]"
                                " pair")
            elif entry[1] not in constants.OOB_STATUSES:
                problems.append(f"health item '{entry[0]}' has invalid status"
                                f" {serializer.dumps(entry[1])}")
    elif command == constants.OOB_POWER_STATUS:
        if not isinstance(payload, dict):
            return [f"power-status is expected to return a dict but got"
                    f" {type(payload).__name__}"]
        if not isinstance(payload.get(constants.OOB_POWER_STATUS_POWERED), bool):
            problems.append(f"power-status is expected to return a boolean"
                            f" '{constants.OOB_POWER_STATUS_POWERED}'")
    elif command in (constants.OOB_POWER_ON, constants.OOB_POWER_OFF,
                     constants.OOB_POWER_CYCLE):
        if payload is not None:
            problems.append(f"{command} is expected to not return payload but got"
                            f" '{serializer.dumps(payload)}'")
    else:
        problems.append(f"unknown out-of-band command '{command}'")
    return problems


def check_output(command: str, text: str) -> Any:
    """The answer of the out-of-band program to ``command``, from its standard output.

    Empty output is ``None``; anything else must be one JSON document of the
    command's shape (:func:`output_problems`).  Raises
    :class:`errors.OpExecError` naming every problem.
    """
    stripped = text.strip()
    payload: Any = None
    if stripped:
        try:
            payload = serializer.loads(stripped)
        except errors.SerializationError as exc:
            raise errors.OpExecError("Check of out-of-band payload failed due to output that"
                                     f" is not JSON: {exc}") from exc
    problems = output_problems(command, payload)
    if problems:
        raise errors.OpExecError("Check of out-of-band payload failed due to "
                                 + ", ".join(problems))
    return payload


def oob_program(cfg: ConfigReader, node: Node) -> str:
    """The node's effective ``oob_program`` ('' when it has none)."""
    group = cfg.get_nodegroup(node.group) if node.group else None
    nd = parameters.fill_ndparams(cfg.get_cluster_info(), group, node)
    return str(nd.get("oob_program") or "")


class LUOobCommand(NoHooksLU[OpOobCommand]):
    """Run an out-of-band command for nodes and record power changes.

    Without node names the command is for every node (for ``power-off`` and
    ``power-cycle``: every node but the master, unless ``force_master``).
    Refused (prerequisites): the master for ``power-off``/``power-cycle``
    without ``force_master``; ``power-off`` of a node not marked offline
    without ``ignore_status`` (the master, which cannot be marked offline,
    needs only ``force_master``).  A node without an out-of-band program answers
    ``RS_UNAVAIL``; a failed program or an answer of the wrong shape is
    ``RS_NODATA`` with a warning in the job log; the power changes update the
    node's ``powered`` flag, ``power_delay`` seconds separate two power-ons.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        op = self.op
        self.wanted: list[Node] | None = None
        if op.node_uuids:
            self.wanted = [expand_node(self.cfg, None, uuid) for uuid in op.node_uuids]
        elif op.node_names:
            self.wanted = [expand_node(self.cfg, name) for name in op.node_names]
        lock: Any = ([n.uuid for n in self.wanted] if self.wanted is not None
                     else locking.ALL_SET)
        self.needed_locks = {locking.LEVEL_NODE: lock}
        if op.command in (constants.OOB_POWER_STATUS, constants.OOB_HEALTH):
            self.share_locks = {locking.LEVEL_NODE: 1}

    def CheckPrereq(self) -> None:
        op, cfg = self.op, self.cfg
        master_uuid = cfg.get_master_node()
        if self.wanted is None:
            nodes = list(cfg.get_all_nodes_info().values())
            if op.command in SKIP_MASTER and not op.force_master:
                nodes = [n for n in nodes if n.uuid != master_uuid]
        else:
            nodes = [cfg.get_node_info(n.uuid) or n for n in self.wanted]
            master = cfg.get_node_info(master_uuid)
            if (op.command in SKIP_MASTER and not op.force_master and master is not None
                    and any(n.uuid == master_uuid for n in nodes)):
                program = oob_program(cfg, master)
                how = (f"run '{program} {op.command} {master.name}' if you want to operate on"
                       " the master regardless, or pass force_master (gnt-node power"
                       " --force-master)" if program
                       else "it does not support out-of-band operations")
                raise errors.OpPrereqError(f"Operating on the master node {master.name} is"
                                           f" not allowed for {op.command}; {how}",
                                           errors.ECODE_INVAL)
        for node in nodes:
            # the master cannot be marked offline: force_master is its confirmation
            if (op.command == constants.OOB_POWER_OFF and not op.ignore_status
                    and not node.offline and not (node.uuid == master_uuid and op.force_master)):
                raise errors.OpPrereqError(f"Cannot power off node {node.name} because it is"
                                           " not marked offline", errors.ECODE_STATE)
        # by name; a master that goes down goes last (the job's answer comes from it)
        self.nodes = sorted({n.uuid: n for n in nodes}.values(),
                            key=lambda n: (n.uuid == master_uuid and op.command in SKIP_MASTER,
                                           query.nice_sort_key(n.name)))

    def _run(self, node: Node, program: str) -> tuple[int, Any]:
        """One node's ``(status, data)``: run the program on the master, check its answer."""
        op = self.op
        master = self.cfg.get_master_node_name()
        logger.info("Executing out-of-band command '%s' using '%s' on %s", op.command,
                    program, node.name)
        res = self.require_rpc().call_run_oob(
            master, oob_program=program, command=op.command, remote_node=node.name,
            timeout=op.timeout, rpc_timeout=op.timeout + RPC_MARGIN)[master]
        if res.fail_msg:
            self.LogWarning(f"Out-of-band RPC failed on node '{node.name}': {res.fail_msg}")
            return constants.RS_NODATA, None
        try:
            payload = check_output(op.command, str(res.payload or ""))
        except errors.OpExecError as exc:
            self.LogWarning(f"Payload returned by node '{node.name}' is not valid: {exc}")
            return constants.RS_NODATA, None
        return constants.RS_NORMAL, payload

    def _record(self, node: Node, payload: Any) -> None:
        """What a successful command means for the node's record (and the job log)."""
        command = self.op.command
        if command == constants.OOB_HEALTH:
            for item, status in payload:
                if status in (constants.OOB_STATUS_WARNING, constants.OOB_STATUS_CRITICAL):
                    self.LogWarning(f"Item '{item}' on node '{node.name}' has status"
                                    f" '{status}'")
        elif command == constants.OOB_POWER_STATUS:
            powered = payload[constants.OOB_POWER_STATUS_POWERED]
            if powered != node.powered:
                logger.warning("Recorded power state (%s) of node '%s' does not match actual"
                               " power state (%s)", node.powered, node.name, powered)
        elif command == constants.OOB_POWER_ON:
            self._set_powered(node, True)

    def _set_powered(self, node: Node, powered: bool) -> None:
        """Record the node's power state (a configuration write when it changes)."""
        if node.powered == powered:
            return
        node.powered = powered
        self.cfg.update(node)
        logger.info("Node %s recorded as powered %s", node.name, "on" if powered else "off")

    def Exec(self, feedback_fn: FeedbackFn) -> list[list[list[Any]]]:
        result: list[list[list[Any]]] = []
        powered_on = 0
        for node in self.nodes:
            entry: list[list[Any]] = [[constants.RS_NORMAL, node.name]]
            result.append(entry)
            program = oob_program(self.cfg, node)
            if not program:
                entry.append([constants.RS_UNAVAIL, None])
                continue
            if (self.op.command == constants.OOB_POWER_ON and powered_on
                    and self.op.power_delay > 0
                    and self.proc.wait_interrupt(self.op.power_delay)):
                raise errors.OpExecError("Power-on interrupted: the job was killed")
            if self.op.command == constants.OOB_POWER_OFF:
                # recorded first, while the node still answers: an offline node
                # recorded powered off leaves the master lease's voters, which
                # a majority of the voters must confirm (doc/oob.md)
                was = node.powered
                self._set_powered(node, False)
            status, payload = self._run(node, program)
            if self.op.command == constants.OOB_POWER_OFF and status != constants.RS_NORMAL:
                self._set_powered(node, was)
            elif status == constants.RS_NORMAL:
                self._record(node, payload)
                powered_on += self.op.command == constants.OOB_POWER_ON
            entry.append([status, payload])
        return result
