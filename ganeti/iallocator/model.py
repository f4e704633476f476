"""The built-in allocator's cluster model: capacity checks and the htools-style score.

:class:`ClusterModel` is read from an input document (doc/protocols/iallocator.md)
and changed in place as the allocator places or moves instances, so that
each decision sees the previous ones.  What it checks for a placement
(each failure is counted under an htools-style name, ``FailMem`` ...):

* the node is usable (online, not drained, vm_capable, with live figures);
* the group's ipolicy accepts the instance (specs, disk template) and the
  group is connected to every network of its NICs (``FailDisk``/
  ``FailMem``/``FailCPU``/``FailSpindles``/``FailPolicy``/``FailNet``);
* memory, disk, vCPUs (``vcpu-ratio``) and, with exclusive storage,
  spindles (``spindle-ratio``);
* exclusion tags (``htools:iextags:PREFIX`` cluster tags): two instances
  sharing a ``PREFIX:...`` tag never share a primary node (``FailTags``,
  soft: ignored with ``ignore_soft_errors``);
* N+1 (``FailN1``): DRBD secondaries can take over their peers' running
  memory; for shared storage the rest of the group can absorb any one
  node's running instances.  Not checked with ``capacity_checks`` false.

The score of a group is the sum of the standard deviations, over its
usable nodes, of used memory, used disk, vCPU load and spindle use
ratios: lower is better balanced.  Each group keeps running sums so that a
candidate placement is scored in constant time (the benchmark,
the allocation benchmark needs 200 nodes and 10,000 instances).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants

__all__ = ["NodeModel", "InstanceModel", "GroupModel", "ClusterModel", "EXCLUSION_PREFIX",
           "policy_failure", "is_mirrored", "not_mirrored_reason", "is_int_mirror", "METRICS"]

EXCLUSION_PREFIX = "htools:iextags:"
#: Names of the balance metrics, in the order of :meth:`NodeModel.metrics`.
METRICS = ("memory", "disk", "cpu", "spindles")
_INT_MIRROR = constants.DTS_INT_MIRROR
_EXT_MIRROR = constants.DTS_EXT_MIRROR


def is_int_mirror(template: str) -> bool:
    """DRBD: a primary and a secondary node."""
    return template in _INT_MIRROR


def is_mirrored(template: str) -> bool:
    """Whether instances of ``template`` can change node without copying their disks."""
    return template in _INT_MIRROR or template in _EXT_MIRROR


@dataclass
class InstanceModel:
    """What the allocator needs of one instance (existing or requested)."""

    name: str
    memory: int
    vcpus: int
    spindle_use: int
    disk_template: str
    disk_sizes: list[int]
    disk_space: int
    nic_count: int
    networks: list[str]
    tags: list[str]
    up: bool
    nodes: list[str] = field(default_factory=list)

    @classmethod
    def from_doc(cls, name: str, data: dict[str, Any], *, up: bool | None = None,
                 nodes: list[str] | None = None) -> InstanceModel:
        """From an ``instances`` entry or an allocate request."""
        disks = data.get("disks") or []
        nics = data.get("nics") or []
        template = str(data.get("disk_template", constants.DT_DISKLESS))
        state_up = data.get("admin_state", constants.ADMINST_UP) == constants.ADMINST_UP
        return cls(name=name, memory=int(data.get("memory", 0)),
                   vcpus=int(data.get("vcpus", 1)),
                   spindle_use=int(data.get("spindle_use", 1)),
                   disk_template=template,
                   disk_sizes=[int(d.get("size", 0)) for d in disks],
                   disk_space=int(data.get("disk_space_total", sum(int(d.get("size", 0))
                                                                   for d in disks))),
                   nic_count=len(nics),
                   networks=[n["network"] for n in nics if isinstance(n, dict) and n.get("network")],
                   tags=list(data.get("tags") or []),
                   up=state_up if up is None else up,
                   nodes=list(nodes if nodes is not None else data.get("nodes") or []))

    @property
    def primary(self) -> str | None:
        return self.nodes[0] if self.nodes else None

    @property
    def secondary(self) -> str | None:
        return self.nodes[1] if len(self.nodes) > 1 else None

    @property
    def running_memory(self) -> int:
        """Memory the instance uses on its primary node (0 while stopped)."""
        return self.memory if self.up else 0


@dataclass
class NodeModel:
    """One node: static flags, capacity and what its instances use."""

    name: str
    group: str
    usable: bool
    total_mem: float = 0.0
    free_mem: float = 0.0
    total_disk: float = 0.0
    free_disk: float = 0.0
    total_cpus: float = 1.0
    vcpus: int = 0
    total_spindles: float = 1.0
    spindles: int = 0
    exclusive_storage: bool = False
    ext_up: int = 0
    peers: dict[str, int] = field(default_factory=dict)
    excl_tags: Counter[str] = field(default_factory=Counter)
    primaries: set[str] = field(default_factory=set)
    secondaries: set[str] = field(default_factory=set)

    def metrics(self, d_mem: float = 0.0, d_disk: float = 0.0, d_cpu: int = 0,
                d_spindles: int = 0) -> tuple[float, float, float, float]:
        """Used-memory, used-disk, vCPU and spindle ratios after the given deltas."""
        mem = 1.0 - (self.free_mem - d_mem) / self.total_mem if self.total_mem > 0 else 0.0
        disk = 1.0 - (self.free_disk - d_disk) / self.total_disk if self.total_disk > 0 else 0.0
        cpu = (self.vcpus + d_cpu) / self.total_cpus if self.total_cpus > 0 else 0.0
        spin = (self.spindles + d_spindles) / self.total_spindles \
            if self.total_spindles > 0 else 0.0
        return (mem, disk, cpu, spin)

    def peer_need(self) -> int:
        """Memory this node needs free to take over its DRBD peers' largest failing node."""
        return max(self.peers.values(), default=0)


@dataclass
class GroupModel:
    """A node group: policy, ipolicy, networks and the score sums of its usable nodes."""

    uuid: str
    name: str
    alloc_policy: str
    ipolicy: dict[str, Any]
    networks: set[str]
    nodes: list[str] = field(default_factory=list)
    sums: list[float] = field(default_factory=lambda: [0.0] * len(METRICS))
    squares: list[float] = field(default_factory=lambda: [0.0] * len(METRICS))
    count: int = 0

    def score(self, sums: list[float] | None = None, squares: list[float] | None = None) -> float:
        """Sum of the metrics' standard deviations (given sums, or the current ones)."""
        if self.count == 0:
            return 0.0
        sums = self.sums if sums is None else sums
        squares = self.squares if squares is None else squares
        total = 0.0
        n = self.count
        for s, q in zip(sums, squares):
            var = q / n - (s / n) ** 2
            if var > 0:
                total += math.sqrt(var)
        return total


def not_mirrored_reason(name: str, template: str) -> str:
    """Why an instance of a non-mirrored template cannot be relocated by migration."""
    return (f"instance {name} has the non-mirrored disk template {template}: its disks exist"
            " on one node only; move it with 'gnt-instance move' (or evacuate with"
            " --with-disks)")


def policy_failure(ipolicy: dict[str, Any], inst: InstanceModel) -> str | None:
    """The failure name if ``ipolicy`` refuses ``inst``'s specs or template, else None."""
    templates = ipolicy.get("disk-templates")
    if templates is not None and inst.disk_template not in templates:
        return "FailDisk"
    minmax = ipolicy.get("minmax")
    if not minmax:
        return None
    specs = [("memory-size", [inst.memory], "FailMem"), ("cpu-count", [inst.vcpus], "FailCPU"),
             ("spindle-use", [inst.spindle_use], "FailSpindles")]
    if inst.disk_template != constants.DT_DISKLESS:     # diskless: no disk specs to check
        specs += [("disk-count", [len(inst.disk_sizes)], "FailDisk"),
                  ("disk-size", inst.disk_sizes, "FailDisk")]
    first: str | None = None
    for pair in minmax:
        lo, hi = pair.get("min") or {}, pair.get("max") or {}
        failed = None
        for key, values, name in specs:
            for value in values:
                if (key in lo and value < lo[key]) or (key in hi and value > hi[key]):
                    failed = name
                    break
            if failed:
                break
        if failed is None:
            return None
        first = first or failed
    return first


class ClusterModel:
    """Nodes, groups and instances of one input document, changed as moves are decided."""

    def __init__(self, doc: dict[str, Any], *, capacity_checks: bool = True,
                 ignore_soft_errors: bool = False) -> None:
        self.capacity_checks = capacity_checks
        self.ignore_soft_errors = ignore_soft_errors
        self.excl_prefixes = [t[len(EXCLUSION_PREFIX):] + ":"
                              for t in doc.get("cluster_tags") or []
                              if t.startswith(EXCLUSION_PREFIX)]
        self.groups: dict[str, GroupModel] = {}
        default_ipolicy = doc.get("ipolicy") or {}
        for uuid, g in (doc.get("nodegroups") or {}).items():
            self.groups[uuid] = GroupModel(
                uuid=uuid, name=str(g.get("name", uuid)),
                alloc_policy=str(g.get("alloc_policy", constants.ALLOC_POLICY_PREFERRED)),
                ipolicy=g.get("ipolicy") or default_ipolicy,
                networks=set(g.get("networks") or []))
        self.nodes: dict[str, NodeModel] = {}
        for name, n in sorted((doc.get("nodes") or {}).items()):
            self.nodes[name] = self._node_from_doc(name, n)
            group = self.groups.get(self.nodes[name].group)
            if group is not None:
                group.nodes.append(name)
        self.instances: dict[str, InstanceModel] = {}
        for name, data in (doc.get("instances") or {}).items():
            inst = InstanceModel.from_doc(name, data)
            self.instances[name] = inst
            self._attach(inst, inst.nodes, adjust_free=False)
        for group in self.groups.values():
            self._recount(group)

    # --- building ---------------------------------------------------------------------
    def _node_from_doc(self, name: str, n: dict[str, Any]) -> NodeModel:
        live = "total_memory" in n and "free_memory" in n
        usable = (live and not n.get("offline", False) and not n.get("drained", False)
                  and n.get("vm_capable", True) is not False)
        nd = n.get("ndparams") or {}
        node = NodeModel(name=name, group=str(n.get("group", "")), usable=usable,
                         exclusive_storage=bool(nd.get("exclusive_storage", False)))
        if live:
            node.total_mem = float(n.get("total_memory", 0))
            node.free_mem = float(n.get("free_memory", 0))
            node.total_disk = float(n.get("total_disk", 0))
            node.free_disk = float(n.get("free_disk", 0))
            node.total_cpus = float(max(1, int(n.get("total_cpus", 1))
                                        - int(n.get("reserved_cpus", 0) or 0)))
            node.total_spindles = float(n.get("total_spindles", nd.get("spindle_count", 1)) or 1)
        return node

    def exclusion_tags(self, tags: list[str]) -> list[str]:
        """The tags of ``tags`` that are exclusion tags of this cluster."""
        if not self.excl_prefixes:
            return []
        return [t for t in tags if any(t.startswith(p) for p in self.excl_prefixes)]

    def _attach(self, inst: InstanceModel, nodes: list[str], *, adjust_free: bool) -> None:
        """Account ``inst`` on ``nodes`` (primary first)."""
        inst.nodes = list(nodes)
        if not nodes:
            return
        pnode = self.nodes.get(nodes[0])
        if pnode is not None:
            pnode.primaries.add(inst.name)
            pnode.vcpus += inst.vcpus
            pnode.spindles += inst.spindle_use
            if adjust_free:
                pnode.free_mem -= inst.running_memory
                pnode.free_disk -= inst.disk_space
            if inst.up and inst.disk_template in _EXT_MIRROR:
                pnode.ext_up += inst.memory
            pnode.excl_tags.update(self.exclusion_tags(inst.tags))
        for sname in nodes[1:]:
            snode = self.nodes.get(sname)
            if snode is None:
                continue
            snode.secondaries.add(inst.name)
            if adjust_free:
                snode.free_disk -= inst.disk_space
            if inst.up:
                snode.peers[nodes[0]] = snode.peers.get(nodes[0], 0) + inst.memory

    def _detach(self, inst: InstanceModel) -> None:
        """Undo :meth:`_attach` for the instance's current nodes (freeing resources)."""
        nodes = inst.nodes
        if not nodes:
            return
        pnode = self.nodes.get(nodes[0])
        if pnode is not None:
            pnode.primaries.discard(inst.name)
            pnode.vcpus -= inst.vcpus
            pnode.spindles -= inst.spindle_use
            pnode.free_mem += inst.running_memory
            pnode.free_disk += inst.disk_space
            if inst.up and inst.disk_template in _EXT_MIRROR:
                pnode.ext_up -= inst.memory
            pnode.excl_tags.subtract(self.exclusion_tags(inst.tags))
        for sname in nodes[1:]:
            snode = self.nodes.get(sname)
            if snode is None:
                continue
            snode.secondaries.discard(inst.name)
            snode.free_disk += inst.disk_space
            if inst.up:
                left = snode.peers.get(nodes[0], 0) - inst.memory
                if left > 0:
                    snode.peers[nodes[0]] = left
                else:
                    snode.peers.pop(nodes[0], None)
        inst.nodes = []

    def _recount(self, group: GroupModel) -> None:
        group.sums = [0.0] * len(METRICS)
        group.squares = [0.0] * len(METRICS)
        group.count = 0
        for name in group.nodes:
            node = self.nodes[name]
            if not node.usable:
                continue
            group.count += 1
            for k, value in enumerate(node.metrics()):
                group.sums[k] += value
                group.squares[k] += value * value

    # --- changing -----------------------------------------------------------------------
    def place(self, inst: InstanceModel, nodes: list[str]) -> None:
        """Put ``inst`` (new or moving) on ``nodes``; updates every sum."""
        touched = {self.nodes[n].group for n in inst.nodes + nodes if n in self.nodes}
        if inst.nodes:
            self._detach(inst)
        self._attach(inst, nodes, adjust_free=True)
        self.instances[inst.name] = inst
        for uuid in touched:
            if uuid in self.groups:
                self._recount(self.groups[uuid])

    # --- checking -------------------------------------------------------------------------
    def group_failure(self, group: GroupModel, inst: InstanceModel) -> str | None:
        """Why ``group`` cannot hold ``inst`` at all (ipolicy, networks), or None."""
        missing = [n for n in inst.networks if n not in group.networks]
        if missing:
            return "FailNet"
        return policy_failure(group.ipolicy, inst)

    def ext_n1(self, group: GroupModel, mem: int, excluded: set[str]) -> bool:
        """Shared-storage N+1 of ``group`` after ``mem`` more running memory lands in it."""
        usable = [self.nodes[n] for n in group.nodes
                  if self.nodes[n].usable and n not in excluded]
        if len(usable) < 2:
            return True
        total = sum(n.free_mem for n in usable) - mem
        return max(n.free_mem + n.ext_up for n in usable) <= total

    def node_failure(self, node: NodeModel, inst: InstanceModel, *, primary: bool,
                     peer: str | None = None) -> str | None:
        """Why ``node`` cannot take ``inst`` (as primary, or secondary of ``peer``), or None."""
        if not node.usable:
            return "FailOffline"
        if primary and node.free_mem < inst.memory:
            return "FailMem"
        if inst.disk_space > 0 and node.free_disk < inst.disk_space:
            return "FailDisk"
        if primary:
            ratio = float(self.groups[node.group].ipolicy.get("vcpu-ratio", 4.0)) \
                if node.group in self.groups else 4.0
            if node.vcpus + inst.vcpus > node.total_cpus * ratio:
                return "FailCPU"
            if node.exclusive_storage:
                sratio = float(self.groups[node.group].ipolicy.get("spindle-ratio", 32.0)) \
                    if node.group in self.groups else 32.0
                if node.spindles + inst.spindle_use > node.total_spindles * sratio:
                    return "FailSpindles"
            if not self.ignore_soft_errors:
                for tag in self.exclusion_tags(inst.tags):
                    if node.excl_tags.get(tag, 0) > 0:
                        return "FailTags"
            if self.capacity_checks and node.free_mem - inst.running_memory < node.peer_need():
                return "FailN1"
        elif self.capacity_checks and peer is not None and inst.up:
            need = node.peers.get(peer, 0) + inst.memory
            if node.free_mem < max(need, node.peer_need()):
                return "FailN1"
        return None

    def candidate_score(self, group: GroupModel, inst: InstanceModel, pnode: NodeModel,
                        snode: NodeModel | None = None) -> float:
        """The group's score if ``inst`` landed on ``pnode`` (and ``snode``)."""
        sums = list(group.sums)
        squares = list(group.squares)
        for node, new in self._deltas(inst, pnode, snode):
            if node.group != group.uuid or not node.usable:
                continue
            for k, (old, value) in enumerate(zip(node.metrics(), new)):
                sums[k] += value - old
                squares[k] += value * value - old * old
        return group.score(sums, squares)

    def _deltas(self, inst: InstanceModel, pnode: NodeModel,
                snode: NodeModel | None) -> list[tuple[NodeModel, tuple[float, float, float, float]]]:
        moving_off = set(inst.nodes)
        same_primary = pnode.name == inst.primary
        p_mem = 0.0 if same_primary else float(inst.running_memory)
        p_cpu = 0 if same_primary else inst.vcpus
        p_spin = 0 if same_primary else inst.spindle_use
        p_disk = 0.0 if pnode.name in moving_off else float(inst.disk_space)
        out = [(pnode, pnode.metrics(p_mem, p_disk, p_cpu, p_spin))]
        if snode is not None:
            s_disk = 0.0 if snode.name in moving_off else float(inst.disk_space)
            out.append((snode, snode.metrics(0.0, s_disk, 0, 0)))
        return out

    def n1_state(self) -> dict[str, dict[str, Any]]:
        """Per usable node: free memory and whether N+1 holds (for plans)."""
        state = {}
        ext_ok = {uuid: self.ext_n1(g, 0, set()) for uuid, g in self.groups.items()}
        for name, node in self.nodes.items():
            if not node.usable:
                continue
            ok = node.free_mem >= node.peer_need() and ext_ok.get(node.group, True)
            state[name] = {"free_memory": int(node.free_mem), "n1_ok": ok,
                           "primaries": len(node.primaries)}
        return state
