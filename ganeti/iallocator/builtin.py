"""The built-in allocator: a pure function from an input document to an answer.

:func:`allocate` answers every request type of doc/protocols/iallocator.md
(``allocate``, ``multi-allocate``, ``relocate``, ``node-evacuate``,
``change-group``, ``allocate-secondary``) by greedy placement on a :class:`~ganeti.iallocator.model.ClusterModel`:
each instance goes to the node (or DRBD node pair) that passes every check
and leaves its group best balanced (lowest score), and the model is
updated before the next decision.  Groups are tried by ``alloc_policy``:
``preferred`` ones first, ``last_resort`` only when no preferred group can
take the instance, ``unallocable`` never.

Evacuations and group changes give one job per instance: shared-storage
instances migrate (running) or fail over (stopped) to their new node; DRBD
instances get ``replace_new_secondary`` and failover/migrate steps; instances
with a non-mirrored template (``file``, ``plain``) cannot move that way and
are reported as failed, naming ``gnt-instance move`` -- unless a
node-evacuate request carries ``with-disks``: then ``file`` instances are
placed like shared-storage ones (the target needs their disk space) and
move by ``OP_INSTANCE_MIGRATE`` with ``with_disks``.  Jobs landing on the
same node run one after the other: a job depends (``[-k, []]``, relative
ids, doc/protocols/iallocator.md "Jobs") on the previous job moving onto one of its
target nodes, so two moves never race for one node's memory; jobs on
different nodes run in parallel.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from ganeti import constants, errors
from ganeti.iallocator import document as doc
from ganeti.iallocator.model import (ClusterModel, GroupModel, InstanceModel, is_int_mirror,
                                     is_mirrored, not_mirrored_reason)
from ganeti.opcodes import wire

__all__ = ["allocate", "NAME", "migrate_opcode", "replace_secondary_opcode",
           "with_disks_opcode"]

#: The name the built-in allocator answers to (``-I ganeti-iallocator``).
NAME = "ganeti-iallocator"
#: How many of the best primaries are paired with every possible secondary (DRBD).
_PAIR_PRIMARIES = 8
_TIERS = (constants.ALLOC_POLICY_PREFERRED, constants.ALLOC_POLICY_LAST_RESORT)


class _NoPlace(Exception):
    """No node can take the instance; ``reason`` says why (failure counters)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _counters_text(counters: Counter[str]) -> str:
    if not counters:
        return "no usable node"
    return ", ".join(f"{k}: {v}" for k, v in sorted(counters.items()))


def _tiers(groups: list[GroupModel]) -> list[list[GroupModel]]:
    return [[g for g in groups if g.alloc_policy == tier] for tier in _TIERS]


def _best_single(model: ClusterModel, inst: InstanceModel, groups: list[GroupModel],
                 excluded: set[str], restrict: set[str] | None,
                 counters: Counter[str]) -> tuple[GroupModel, str, float] | None:
    """The best new primary for ``inst`` in ``groups``: by tier, then score, then name."""
    for tier in _tiers(groups):
        best: tuple[float, str, GroupModel] | None = None
        for group in tier:
            usable = [model.nodes[n] for n in group.nodes
                      if model.nodes[n].usable and n not in excluded
                      and (restrict is None or n in restrict) and n != inst.primary]
            failure = model.group_failure(group, inst)
            if failure is not None:
                counters[failure] += max(1, len(usable))
                continue
            n1_fails = False
            if model.capacity_checks and inst.disk_template in constants.DTS_EXT_MIRROR:
                stays = inst.primary in group.nodes and inst.primary not in excluded
                landing = 0 if stays else inst.running_memory
                n1_fails = (model.ext_n1(group, 0, excluded)
                            and not model.ext_n1(group, landing, excluded))
            for node in usable:
                failure = model.node_failure(node, inst, primary=True) \
                    or ("FailN1" if n1_fails else None)
                if failure is not None:
                    counters[failure] += 1
                    continue
                score = model.candidate_score(group, inst, node)
                if best is None or (score, node.name) < best[:2]:
                    best = (score, node.name, group)
        if best is not None:
            return best[2], best[1], best[0]
    return None


def _best_pair(model: ClusterModel, inst: InstanceModel, groups: list[GroupModel],
               excluded: set[str], restrict: set[str] | None,
               counters: Counter[str]) -> tuple[GroupModel, list[str], float] | None:
    """The best (primary, secondary) for a DRBD instance in ``groups``."""
    for tier in _tiers(groups):
        best: tuple[float, list[str], GroupModel] | None = None
        for group in tier:
            usable = [model.nodes[n] for n in group.nodes
                      if model.nodes[n].usable and n not in excluded
                      and (restrict is None or n in restrict)]
            failure = model.group_failure(group, inst)
            if failure is not None:
                counters[failure] += max(1, len(usable))
                continue
            primaries = []
            for node in usable:
                failure = model.node_failure(node, inst, primary=True)
                if failure is not None:
                    counters[failure] += 1
                    continue
                primaries.append((model.candidate_score(group, inst, node), node.name, node))
            primaries.sort(key=lambda t: t[:2])
            for _, _, pnode in primaries[:_PAIR_PRIMARIES]:
                for snode in usable:
                    if snode.name == pnode.name:
                        continue
                    failure = model.node_failure(snode, inst, primary=False, peer=pnode.name)
                    if failure is not None:
                        counters[failure] += 1
                        continue
                    score = model.candidate_score(group, inst, pnode, snode)
                    pair = [pnode.name, snode.name]
                    if best is None or (score, pair) < best[:2]:
                        best = (score, pair, group)
        if best is not None:
            return best[2], best[1], best[0]
    return None


def _best_secondary(model: ClusterModel, inst: InstanceModel, group: GroupModel,
                    excluded: set[str], counters: Counter[str]) -> str | None:
    """The best new secondary for DRBD ``inst`` inside ``group``."""
    pname = inst.primary or ""
    pnode = model.nodes.get(pname)
    if pnode is None:
        return None
    best: tuple[float, str] | None = None
    for name in group.nodes:
        node = model.nodes[name]
        if name in excluded or name in inst.nodes or not node.usable:
            continue
        failure = model.node_failure(node, inst, primary=False, peer=pname)
        if failure is not None:
            counters[failure] += 1
            continue
        score = model.candidate_score(group, inst, pnode, node)
        if best is None or (score, name) < best:
            best = (score, name)
    return best[1] if best else None


def migrate_opcode(inst: InstanceModel, target: str | None) -> dict[str, Any]:
    """Migrate (running) or fail over (stopped) ``inst``, to ``target`` unless DRBD."""
    build = wire.instance_migrate if inst.up else wire.instance_failover
    op = build(instance_name=inst.name)
    if target is not None and not is_int_mirror(inst.disk_template):
        op["target_node"] = target
    return op


def with_disks_opcode(inst: InstanceModel, target: str) -> dict[str, Any]:
    """Move ``inst`` and its local disks to ``target`` (live when it runs)."""
    return wire.instance_migrate(instance_name=inst.name, target_node=target, with_disks=True)


def replace_secondary_opcode(inst: InstanceModel, node: str) -> dict[str, Any]:
    """Give DRBD ``inst`` a new secondary ``node``."""
    return wire.instance_replace_disks(instance_name=inst.name, mode="replace_new_secondary",
                                       remote_node=node)


# --- request handlers -------------------------------------------------------------------

def _new_instance(req: dict[str, Any]) -> InstanceModel:
    return InstanceModel.from_doc(str(req["name"]), req, up=True, nodes=[])


def _allocate_one(model: ClusterModel, req: dict[str, Any]) -> tuple[list[str], str]:
    inst = _new_instance(req)
    groups = list(model.groups.values())
    if req.get("group_name"):
        groups = [g for g in groups if req["group_name"] in (g.name, g.uuid)]
        if not groups:
            raise _NoPlace(f"unknown group {req['group_name']}")
    restrict = set(req["restrict-to-nodes"]) if req.get("restrict-to-nodes") else None
    counters: Counter[str] = Counter()
    if int(req.get("required_nodes", 1)) == 2:
        pair = _best_pair(model, inst, groups, set(), restrict, counters)
        if pair is None:
            raise _NoPlace(_counters_text(counters))
        group, nodes, score = pair
    else:
        single = _best_single(model, inst, groups, set(), restrict, counters)
        if single is None:
            raise _NoPlace(_counters_text(counters))
        group, node, score = single
        nodes = [node]
    model.place(inst, nodes)
    info = f"Selected group: {group.name}, score {score:.6f}"
    if counters:
        info += f", {_counters_text(counters)}"
    return nodes, info


def _do_allocate(model: ClusterModel, req: dict[str, Any]) -> tuple[str, Any]:
    nodes, info = _allocate_one(model, req)
    return f"Request successful: {info}", nodes


def _do_multi_allocate(model: ClusterModel, req: dict[str, Any]) -> tuple[str, Any]:
    allocated: list[list[Any]] = []
    failed: list[str] = []
    for sub in req["instances"]:
        try:
            nodes, _ = _allocate_one(model, sub)
        except _NoPlace:
            failed.append(str(sub.get("name")))
            continue
        allocated.append([str(sub["name"]), nodes])
    info = (f"Request successful: {len(allocated)} instances allocated,"
            f" {len(failed)} failed")
    return info, [allocated, failed]


def _do_relocate(model: ClusterModel, req: dict[str, Any]) -> tuple[str, Any]:
    name = str(req["name"])
    inst = model.instances.get(name)
    if inst is None:
        raise _NoPlace(f"unknown instance {name}")
    source = set(req.get("relocate_from") or [])
    pgroup = model.groups.get(model.nodes[inst.primary].group) if inst.primary in model.nodes \
        else None
    if pgroup is None:
        raise _NoPlace(f"instance {name} has no known group")
    counters: Counter[str] = Counter()
    if is_int_mirror(inst.disk_template):
        node = _best_secondary(model, inst, pgroup, source, counters)
        if node is None:
            raise _NoPlace(_counters_text(counters))
        model.place(inst, [inst.nodes[0], node])
        return f"Request successful: new secondary {node}", [node]
    if not is_mirrored(inst.disk_template) and \
            not (req.get("with-disks") and inst.disk_template == constants.DT_FILE):
        raise _NoPlace(_not_mirrored(inst))
    single = _best_single(model, inst, [pgroup], source, None, counters)
    if single is None:
        raise _NoPlace(_counters_text(counters))
    model.place(inst, [single[1]])
    return f"Request successful: new primary {single[1]}", [single[1]]


def _do_allocate_secondary(model: ClusterModel, req: dict[str, Any]) -> tuple[str, Any]:
    """The best secondary in its primary's group for a ``plain`` instance becoming ``drbd``
    (its disks as DRBD needs them: data and metadata on both nodes)."""
    name = str(req["name"])
    inst = model.instances.get(name)
    if inst is None:
        raise _NoPlace(f"unknown instance {name}")
    if inst.disk_template != constants.DT_PLAIN:
        raise _NoPlace(f"instance {name} has disk template {inst.disk_template}; a secondary"
                       f" is found for {constants.DT_PLAIN} instances only")
    pgroup = model.groups.get(model.nodes[inst.primary].group) if inst.primary in model.nodes \
        else None
    if pgroup is None:
        raise _NoPlace(f"instance {name} has no known group")
    mirrored = dataclasses.replace(
        inst, disk_template=constants.DT_DRBD8,
        disk_space=doc.disk_space_total(constants.DT_DRBD8,
                                        [{"size": s} for s in inst.disk_sizes]))
    counters: Counter[str] = Counter()
    node = _best_secondary(model, mirrored, pgroup, set(), counters)
    if node is None:
        raise _NoPlace(_counters_text(counters))
    return f"Request successful: secondary {node}", node


def _not_mirrored(inst: InstanceModel) -> str:
    return not_mirrored_reason(inst.name, inst.disk_template)


class _Evacuation:
    """Collects the moves, failures and jobs of an evacuation or group change."""

    def __init__(self, model: ClusterModel) -> None:
        self.model = model
        self.moved: list[list[Any]] = []
        self.failed: list[list[Any]] = []
        self.jobs: list[list[dict[str, Any]]] = []
        self._last_on: dict[str, int] = {}

    def fail(self, name: str, reason: str) -> None:
        self.failed.append([name, reason])

    def add(self, inst: InstanceModel, group: GroupModel, nodes: list[str],
            ops: list[dict[str, Any]]) -> None:
        """Record the move of ``inst`` to ``nodes`` (done by ``ops``), update the model."""
        index = len(self.jobs)
        earlier = sorted({self._last_on[n] for n in nodes if n in self._last_on}, reverse=True)
        if earlier:
            ops[0]["depends"] = [[j - index, []] for j in earlier]
        for node in nodes:
            self._last_on[node] = index
        self.jobs.append(ops)
        self.moved.append([inst.name, group.uuid, list(nodes)])
        self.model.place(inst, nodes)

    def answer(self) -> tuple[str, Any]:
        info = (f"Request successful: {len(self.failed)} instances failed to move and"
                f" {len(self.moved)} were moved successfully")
        return info, [self.moved, self.failed, self.jobs]


def _instances_of(model: ClusterModel, names: list[Any], ev: _Evacuation) -> list[InstanceModel]:
    found = []
    for name in names:
        inst = model.instances.get(str(name))
        if inst is None or not inst.nodes or inst.primary not in model.nodes:
            ev.fail(str(name), f"unknown instance {name}")
        else:
            found.append(inst)
    # the largest first: they are the hardest to place
    found.sort(key=lambda i: (-i.memory, -i.disk_space, i.name))
    return found


def _evacuated_nodes(insts: list[InstanceModel], mode: str) -> set[str]:
    """The node(s) being emptied: those every instance shares, else per mode."""
    common: set[str] | None = None
    for inst in insts:
        common = set(inst.nodes) if common is None else common & set(inst.nodes)
    if common:
        return common
    if mode == "secondary-only":
        return {n for i in insts for n in i.nodes[1:]}
    return {i.nodes[0] for i in insts}


def _do_node_evacuate(model: ClusterModel, req: dict[str, Any]) -> tuple[str, Any]:
    mode = str(req["evac_mode"])
    if mode not in doc.EVAC_MODES:
        raise errors.OpPrereqError(f"Invalid evacuation mode {mode!r}", errors.ECODE_INVAL)
    ev = _Evacuation(model)
    insts = _instances_of(model, req["instances"], ev)
    evacuated = _evacuated_nodes(insts, mode)
    with_disks = bool(req.get("with-disks", False))
    for inst in insts:
        group = model.groups.get(model.nodes[inst.nodes[0]].group)
        if group is None:
            ev.fail(inst.name, "the instance's node group is unknown")
            continue
        counters: Counter[str] = Counter()
        if is_int_mirror(inst.disk_template):
            _evacuate_drbd(model, ev, inst, group, mode, evacuated, counters)
        elif not is_mirrored(inst.disk_template) and \
                not (with_disks and inst.disk_template == constants.DT_FILE):
            ev.fail(inst.name, _not_mirrored(inst))
        elif mode == "secondary-only":
            ev.fail(inst.name, f"instance {inst.name} has no secondary node")
        else:
            single = _best_single(model, inst, [group], evacuated, None, counters)
            if single is None:
                ev.fail(inst.name, f"no node can take instance {inst.name}"
                                   f" ({_counters_text(counters)})")
                continue
            op = with_disks_opcode(inst, single[1]) if not is_mirrored(inst.disk_template) \
                else migrate_opcode(inst, single[1])
            ev.add(inst, group, [single[1]], [op])
    return ev.answer()


def _evacuate_drbd(model: ClusterModel, ev: _Evacuation, inst: InstanceModel,
                   group: GroupModel, mode: str, evacuated: set[str],
                   counters: Counter[str]) -> None:
    primary, secondary = inst.nodes[0], inst.secondary or ""
    if mode == "secondary-only" or (mode == "all" and primary not in evacuated):
        node = _best_secondary(model, inst, group, evacuated, counters)
        if node is None:
            ev.fail(inst.name, f"no new secondary for {inst.name} ({_counters_text(counters)})")
            return
        ev.add(inst, group, [primary, node], [replace_secondary_opcode(inst, node)])
        return
    # the primary leaves: fail over to the secondary, then a new secondary
    probe = dataclasses.replace(inst, nodes=[secondary, primary])
    failure = model.node_failure(model.nodes[secondary], inst, primary=True) \
        if secondary in model.nodes else "FailOffline"
    if failure is not None:
        ev.fail(inst.name, f"secondary {secondary} cannot take {inst.name} ({failure})")
        return
    node = _best_secondary(model, probe, group, evacuated | {primary}, counters)
    if node is None:
        ev.fail(inst.name, f"no new secondary for {inst.name} ({_counters_text(counters)})")
        return
    ev.add(inst, group, [secondary, node],
           [migrate_opcode(inst, None), replace_secondary_opcode(inst, node)])


def _do_change_group(model: ClusterModel, req: dict[str, Any]) -> tuple[str, Any]:
    ev = _Evacuation(model)
    insts = _instances_of(model, req["instances"], ev)
    wanted = [str(g) for g in req.get("target_groups") or []]
    unknown = [g for g in wanted if g not in model.groups]
    if unknown:
        raise _NoPlace(f"unknown target group(s) {', '.join(unknown)}")
    for inst in insts:
        current = model.nodes[inst.nodes[0]].group
        targets = [model.groups[g] for g in (wanted or sorted(model.groups)) if g != current]
        counters: Counter[str] = Counter()
        if not targets:
            ev.fail(inst.name, "no target group other than the instance's own")
        elif is_int_mirror(inst.disk_template):
            pair = _best_pair(model, inst, targets, set(inst.nodes), None, counters)
            if pair is None:
                ev.fail(inst.name, f"no group can take {inst.name} ({_counters_text(counters)})")
                continue
            group, (new_p, new_s), _ = pair
            ev.add(inst, group, [new_p, new_s],
                   [replace_secondary_opcode(inst, new_p), migrate_opcode(inst, None),
                    replace_secondary_opcode(inst, new_s)])
        elif not is_mirrored(inst.disk_template):
            ev.fail(inst.name, _not_mirrored(inst))
        else:
            single = _best_single(model, inst, targets, set(inst.nodes), None, counters)
            if single is None:
                ev.fail(inst.name, f"no group can take {inst.name} ({_counters_text(counters)})")
                continue
            ev.add(inst, single[0], [single[1]], [migrate_opcode(inst, single[1])])
    return ev.answer()


_HANDLERS = {
    doc.REQ_ALLOCATE: _do_allocate,
    doc.REQ_MULTI_ALLOCATE: _do_multi_allocate,
    doc.REQ_RELOCATE: _do_relocate,
    doc.REQ_NODE_EVACUATE: _do_node_evacuate,
    doc.REQ_CHANGE_GROUP: _do_change_group,
    doc.REQ_ALLOCATE_SECONDARY: _do_allocate_secondary,
}


def allocate(document: Any, *, capacity_checks: bool = True,
             ignore_soft_errors: bool = False) -> dict[str, Any]:
    """The answer ``{"success", "info", "result"}`` to an input document.

    A request that cannot be satisfied gives ``success: false`` with the
    reason in ``info`` (failure counters such as ``FailMem: 2``).  A
    document that is not one (no ``request``, an unknown type, missing
    keys) raises :class:`errors.OpPrereqError`.
    """
    if not isinstance(document, dict):
        raise errors.OpPrereqError("The iallocator input must be a JSON object",
                                   errors.ECODE_INVAL)
    if "request" not in document:
        raise errors.OpPrereqError("The iallocator input has no key 'request'",
                                   errors.ECODE_INVAL)
    request = document["request"]
    rtype = doc.check_request(request)
    if rtype in (doc.REQ_ALLOCATE, doc.REQ_RELOCATE, doc.REQ_ALLOCATE_SECONDARY) and \
            not isinstance(request["name"], str):
        raise errors.OpPrereqError("iallocator request: key 'name' must be a string",
                                   errors.ECODE_INVAL)
    model = ClusterModel(document, capacity_checks=capacity_checks,
                         ignore_soft_errors=ignore_soft_errors)
    try:
        info, result = _HANDLERS[rtype](model, request)
    except _NoPlace as exc:
        return {"success": False, "info": f"Request failed: {exc.reason}", "result": []}
    return {"success": True, "info": info, "result": result}
