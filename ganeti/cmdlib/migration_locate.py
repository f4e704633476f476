"""Where an interrupted migration was going: ``migrate --cleanup`` without a
target node asks every other node whether it has the instance
(doc/kvm.md, "Migration").

:func:`states_elsewhere` does the asking (one ``instance_info`` call to all
online, vm_capable nodes but the primary); the decision is
:func:`ganeti.cmdlib.migration_plan.cleanup_target`.  A ``drbd`` instance
never comes here: its target is its secondary node.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.cmdlib import instance_mirror
from ganeti.cmdlib.migration_plan import cleanup_target
from ganeti.objects import Instance, Node

__all__ = ["hv_state", "states_elsewhere", "locate_target"]


def hv_state(info: Any) -> str | None:
    """An ``instance_info`` answer as a hypervisor state (None: not there; an
    answer without ``hv_state`` is a running guest)."""
    if info is None:
        return None
    return str(info.get("hv_state") or "running") if isinstance(info, dict) else "running"


def states_elsewhere(lu: Any, inst: Instance) -> tuple[dict[str, str | None], list[str]]:
    """The instance's ``hv_state`` on every node that could run it but its primary.

    Returns ``(states, unanswered)``: ``{node name: hv_state or None}`` of the
    nodes that answered, and the names of those that did not.  Offline and
    non-vm_capable nodes are not asked (they run no instances).
    """
    nodes = [n for n in sorted(lu.cfg.get_all_nodes_info().values(), key=lambda n: n.name)
             if n.uuid != inst.primary_node and not n.offline and n.vm_capable]
    if not nodes:
        return {}, []
    results = lu.require_rpc().call_instance_info(
        [n.name for n in nodes], instance_name=inst.name, hypervisor=inst.hypervisor,
        hvparams={})
    unanswered: list[str] = []

    def warn(node: str, why: str) -> None:
        unanswered.append(node)
        lu.LogWarning(f"Node {node} did not say whether it has instance {inst.name}: {why}")
    states = {node: hv_state(info)
              for node, info in results.answered([n.name for n in nodes], warn)}
    return states, unanswered


def locate_target(lu: Any, inst: Instance) -> Node | None:
    """The node an interrupted migration of ``inst`` was going to, or None when no
    other node has the instance (then only the primary is cleaned up).

    Raises :class:`ganeti.errors.OpPrereqError` when that cannot be told
    safely (:func:`~ganeti.cmdlib.migration_plan.cleanup_target`).
    """
    states, unanswered = states_elsewhere(lu, inst)
    name = cleanup_target(inst.name, states, unanswered,
                          inst.disk_template in instance_mirror.LOCAL_TEMPLATES)
    if name is None:
        return None
    node = lu.cfg.get_node_info_by_name(name)
    if node is None:
        raise errors.OpPrereqError(f"Node {name} disappeared", errors.ECODE_NOENT)
    lu.LogInfo(f"Instance {inst.name} is {states[name]} on {node.name}: the migration was"
               " going there")
    return node
