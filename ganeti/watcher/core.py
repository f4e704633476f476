"""The watcher's decisions, without I/O: what one pass does to one node group.

:func:`plan_group` takes the group's instances and nodes as the master
reported them (:class:`InstanceView`, :class:`NodeView`), the group's state
from the previous pass (:class:`GroupState`) and the time, and returns a
:class:`Plan` (which instances to restart, to clean up, to give up on,
whose disks to re-activate) and the state to store for the next pass.  The
driver (:mod:`ganeti.watcher.master`) turns the plan into jobs.  The rules
are written down in doc/watcher.md:

* an instance whose admin state is up and whose status is ``ERROR_down`` is
  restarted; a ``USER_down`` one (the guest powered itself off) is cleaned
  up with a shutdown job.  Each instance gets at most :data:`MAX_ATTEMPTS`
  attempts; then it is given up on, reported once, and left alone;
* the attempts of an instance are forgotten when it is seen in any other
  status (running, stopped by the operator...), and
  :data:`ATTEMPT_EXPIRY` seconds after the last attempt;
* instances whose primary node is offline or did not answer, and instances
  a job holds or waits for a lock of, are skipped (not counted);
* a node whose boot id differs from the one stored last time was rebooted:
  the instances that should run and have disks on it get their disks
  re-activated (unless they are restarted anyway, which activates them);
* verify-disks (``OP_GROUP_VERIFY_DISKS``, run by the driver between
  planning and submitting) reports instances with inactive disks;
  :func:`plan_inactive_disks` adds those to activate, leaving out the
  ones with a missing disk, the ones restarted or cleaned up anyway, and
  the ones skipped for the reasons above.

The state is plain data; :func:`state_from_data` and :func:`state_to_data`
convert it to and from the JSON document of ``watcher.<group-uuid>.data``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ganeti import constants, errors

__all__ = ["MAX_ATTEMPTS", "ATTEMPT_EXPIRY", "REASON_SOURCE", "STATE_VERSION",
           "InstanceView", "NodeView", "Attempts", "GroupState", "Plan", "plan_group",
           "plan_inactive_disks", "state_from_data", "state_to_data"]

#: restart (or cleanup) attempts per instance before the watcher gives up
MAX_ATTEMPTS = 5
#: seconds after its last attempt that an instance's attempts are forgotten
ATTEMPT_EXPIRY = 8 * 3600
#: the reason source of every job the watcher submits
REASON_SOURCE = "gnt:watcher"
#: version of the state file format
STATE_VERSION = 1

#: statuses the watcher acts on (any other status resets the attempts)
_ACTIONABLE = frozenset([constants.INSTST_ERRORDOWN, constants.INSTST_USERDOWN])


@dataclass(frozen=True)
class InstanceView:
    """One instance as the master reports it."""

    name: str
    status: str
    admin_up: bool
    pnode: str
    snodes: tuple[str, ...] = ()
    has_disks: bool = True
    #: a job owns, or waits for, the instance's lock
    locked: bool = False
    #: who last set the admin state (``admin`` or ``user``); the restart and
    #: clean-up jobs expect it unchanged (doc/watcher.md)
    admin_source: str = constants.ADMIN_SOURCE


@dataclass(frozen=True)
class NodeView:
    """One node as the master reports it."""

    name: str
    offline: bool = False
    #: the node's boot id; None when the node did not answer
    bootid: str | None = None


@dataclass(frozen=True)
class Attempts:
    """The watcher's attempts on one instance."""

    count: int
    last: float
    gave_up: bool = False


@dataclass
class GroupState:
    """What the watcher remembers of one node group between passes."""

    attempts: dict[str, Attempts] = field(default_factory=dict)
    bootids: dict[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    """What one pass does to one group (lists of instance names, sorted)."""

    restart: list[str] = field(default_factory=list)
    cleanup: list[str] = field(default_factory=list)
    #: instances given up on in this pass (reported once)
    give_up: list[str] = field(default_factory=list)
    activate_disks: list[str] = field(default_factory=list)
    rebooted_nodes: list[str] = field(default_factory=list)
    #: instances whose disks verify-disks found inactive, to activate
    inactive_disks: list[str] = field(default_factory=list)
    #: ``(instance, why)`` for instances that need action but were skipped
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: instances whose attempts were forgotten (seen fine again, or expired)
    reset: list[str] = field(default_factory=list)

    @property
    def idle(self) -> bool:
        """True when the plan submits no job."""
        return not (self.restart or self.cleanup or self.activate_disks or self.inactive_disks)


def _skip_reason(inst: InstanceView, nodes: Mapping[str, NodeView]) -> str | None:
    pnode = nodes.get(inst.pnode)
    if pnode is not None and pnode.offline:
        return f"primary node {inst.pnode} is offline"
    if pnode is None or pnode.bootid is None:
        return f"primary node {inst.pnode} is down"
    if inst.locked:
        return "locked by a job"
    return None


def plan_group(state: GroupState, instances: Iterable[InstanceView],
               nodes: Iterable[NodeView], now: float) -> tuple[Plan, GroupState]:
    """Decide one pass over a group; returns the plan and the new state.

    ``state`` is not changed.  See the module docstring for the rules.
    """
    node_map = {n.name: n for n in nodes}
    plan = Plan()
    attempts: dict[str, Attempts] = {}
    insts = sorted(instances, key=lambda i: i.name)
    seen = {inst.name for inst in insts}
    plan.reset.extend(sorted(name for name in state.attempts if name not in seen))

    for inst in insts:
        old = state.attempts.get(inst.name)
        if old is not None and (inst.status not in _ACTIONABLE or not inst.admin_up
                                or old.last + ATTEMPT_EXPIRY <= now):
            plan.reset.append(inst.name)
            old = None
        if inst.status not in _ACTIONABLE or not inst.admin_up:
            continue
        why = _skip_reason(inst, node_map)
        if why is not None:
            plan.skipped.append((inst.name, why))
            if old is not None:
                attempts[inst.name] = old
            continue
        if old is not None and old.count >= MAX_ATTEMPTS:
            if not old.gave_up:
                plan.give_up.append(inst.name)
                old = replace(old, gave_up=True)
            attempts[inst.name] = old
            continue
        count = old.count if old is not None else 0
        attempts[inst.name] = Attempts(count=count + 1, last=now)
        if inst.status == constants.INSTST_ERRORDOWN:
            plan.restart.append(inst.name)
        else:
            plan.cleanup.append(inst.name)

    bootids = dict(state.bootids)
    for node in sorted(node_map.values(), key=lambda n: n.name):
        if node.offline or node.bootid is None:
            continue
        previous = bootids.get(node.name)
        if previous is not None and previous != node.bootid:
            plan.rebooted_nodes.append(node.name)
        bootids[node.name] = node.bootid
    for name in list(bootids):
        if name not in node_map:
            del bootids[name]
    if plan.rebooted_nodes:
        rebooted = set(plan.rebooted_nodes)
        busy = set(plan.restart) | set(plan.cleanup)
        for inst in insts:
            if (inst.admin_up and inst.has_disks and inst.name not in busy
                    and ({inst.pnode, *inst.snodes} & rebooted)):
                if inst.locked:
                    plan.skipped.append((inst.name, "locked by a job"))
                else:
                    plan.activate_disks.append(inst.name)
    plan.reset.sort()
    return plan, GroupState(attempts=attempts, bootids=bootids)


def plan_inactive_disks(plan: Plan, instances: Iterable[InstanceView],
                        nodes: Iterable[NodeView], inactive: Iterable[str],
                        missing: Iterable[str]) -> None:
    """Add to ``plan`` the instances whose disks verify-disks found inactive.

    ``inactive`` and ``missing`` are the instance names of elements 2 and 3
    of the group's verify-disks result.  ``plan`` is updated in place:
    ``inactive_disks`` gets the instances to activate, ``skipped`` the
    others that need it, with the reason.
    """
    views = {i.name: i for i in instances}
    node_map = {n.name: n for n in nodes}
    no_disk = set(missing)
    busy = set(plan.restart) | set(plan.cleanup) | set(plan.activate_disks)
    for name in sorted(set(inactive)):
        inst = views.get(name)
        if inst is None or name in busy:
            continue
        if name in no_disk:
            plan.skipped.append((name, "a disk is missing; not activating its disks"))
            continue
        if inst.status in _ACTIONABLE:
            continue            # restarting it activates its disks (or it was given up)
        why = _skip_reason(inst, node_map)
        if why is not None:
            plan.skipped.append((name, why))
            continue
        plan.inactive_disks.append(name)


# --- the state file document --------------------------------------------------------------

def state_to_data(state: GroupState) -> dict[str, Any]:
    """The JSON document of a group's state file."""
    return {
        "version": STATE_VERSION,
        "instances": {name: {"count": a.count, "last": a.last, "gave_up": a.gave_up}
                      for name, a in sorted(state.attempts.items())},
        "bootids": dict(sorted(state.bootids.items())),
    }


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise errors.ConfigurationError(f"{what}: expected a number, got {value!r}")
    return float(value)


def state_from_data(data: Any) -> GroupState:
    """Parse a state document; :class:`errors.ConfigurationError` if it is not one."""
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise errors.ConfigurationError("not a watcher state document (version"
                                        f" {STATE_VERSION})")
    instances, bootids = data.get("instances", {}), data.get("bootids", {})
    if not isinstance(instances, dict) or not isinstance(bootids, dict):
        raise errors.ConfigurationError("'instances' and 'bootids' must be objects")
    attempts = {}
    for name, entry in instances.items():
        if not isinstance(entry, dict):
            raise errors.ConfigurationError(f"instance {name!r}: expected an object")
        count = _number(entry.get("count"), f"instance {name!r} count")
        if count != int(count) or count < 0:
            raise errors.ConfigurationError(f"instance {name!r}: bad count {count!r}")
        attempts[str(name)] = Attempts(count=int(count),
                                       last=_number(entry.get("last"), f"instance {name!r} last"),
                                       gave_up=bool(entry.get("gave_up", False)))
    if not all(isinstance(v, str) for v in bootids.values()):
        raise errors.ConfigurationError("boot ids must be strings")
    return GroupState(attempts=attempts, bootids={str(k): v for k, v in bootids.items()})
