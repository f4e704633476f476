"""Node loss recovery, the decisions (doc/ha.md, "Node loss recovery").

Pure: no sockets, no threads, time passed in.  The master daemon's shell
(:mod:`ganeti.server.harecovery`) feeds it what it saw and carries out
what it says:

* :class:`SilenceWatch` keeps, per node, when the master last heard its
  node daemon, when it last sent it a lease and which instances the
  leases it may hold cover; a node silent for the cluster's
  ``ha_node_timeout`` is a *suspect*;
* :func:`relay_order` says through which master candidates the master
  forwards the lease of a node it cannot reach itself (a node cut off from
  the master alone keeps its lease: its instances keep running);
* :func:`lease_covers` says which instances a node's self-fence lease
  names (the ones the master would recover; a node with none holds no
  lease);
* :func:`verdict` turns the master candidates' answers about a suspect
  into *dead* or not: a strict majority of the online master candidates
  (the master counted, as one that cannot reach it) must say they cannot
  reach its node daemon, the vote of doc/design/failover.md;
* :func:`choose_fence` says how the dead node is fenced before anything
  of it runs elsewhere: out-of-band power-off when it has an
  ``oob_program``, else waiting out its self-fence lease (only when it
  confirmed one: else it cannot be fenced and nothing is recovered);
* :func:`plan` orders the recovery of its instances: the HA ones (tagged
  ``failover`` or more, :mod:`ganeti.ha.policy`) by priority, each onto a
  node with room for it (N+1), within the relocation limit, and after a
  lease fence only those its lease covered; the others reported with the
  reason they are left alone;
* :func:`count` reads the recovery counts an instance carries in its tags
  (``ganeti:ha:relocations:<n>``, ``ganeti:ha:failures:<n>``: in the
  configuration, so a new master knows them), checked against
  ``ha_max_relocate`` and ``ha_max_restart`` (:func:`over_limits`,
  :func:`may_retry`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ganeti import constants
from ganeti.ha import policy

__all__ = ["REASON_SOURCE", "PRIORITY_PREFIX", "SELF_FENCE_AHEAD", "LEASE_MARGIN",
           "SilenceWatch", "relay_order", "RELAY_TIMEOUT", "RELAY_DELAY", "lease_covers", "Verdict", "verdict", "Fence", "choose_fence", "self_fence_at",
           "self_fence_lease", "MIN_SELF_FENCE_LEASE",
           "InstanceView",
           "NodeView", "Step", "Skipped", "Plan", "plan", "priority", "count", "count_tags",
           "over_limits", "may_retry", "describe_counts", "RELOCATIONS_PREFIX", "FAILURES_PREFIX",
           "FENCE_OOB", "FENCE_LEASE", "FENCE_NONE", "FENCED_PREFIX", "fenced_tag",
           "fenced_record", "resume_covered", "unfinished_ha_jobs"]

#: ``ganeti:ha:relocations:<n>`` on an instance: the master's recovery moved it n
#: times (against ``ha_max_relocate``); in the configuration, so every master sees it
RELOCATIONS_PREFIX = "ganeti:ha:relocations:"
#: ``ganeti:ha:failures:<n>``: n recovery jobs of it failed in a row since its last
#: relocation (against ``ha_max_restart``)
FAILURES_PREFIX = "ganeti:ha:failures:"
#: ``ganeti:ha:fenced:<fence>:<unix time>`` on a node: node loss recovery fenced
#: it (``oob`` or ``lease``) and the fence was confirmed then; written by
#: ``OP_NODE_HA_FENCE``, so a new master resumes the recovery (doc/ha.md)
FENCED_PREFIX = "ganeti:ha:fenced:"
#: the reason source of every job the recovery submits
REASON_SOURCE = "gnt:ha"
#: ``ganeti:ha:priority:<n>`` on an instance: recovered before lower numbers
#: (default 0; ties by name)
PRIORITY_PREFIX = "ganeti:ha:priority:"
#: a node holding a self-fence lease stops its instances this long before
#: the lease runs out (at least; never before half the lease)
SELF_FENCE_AHEAD = 2.0
#: what the master waits beyond a self-fence lease (clock rates, scheduling)
LEASE_MARGIN = 2.0
#: the timeout of the master's call forwarding a lease through a master candidate
#: (the candidate's own call to the node takes at most the probe's 2 s of it)
RELAY_TIMEOUT = 5.0
#: how much later than a direct one a relayed lease request may reach its node:
#: the candidate may start forwarding up to the relay's timeout after the master sent
#: it (it shortens the lease by its own time spent, not by the transit before)
RELAY_DELAY = RELAY_TIMEOUT
#: the shortest self-fence lease: longer than a master autopromotion takes
#: (about 18 s with the default master lease, doc/ha.md), so that the loss of
#: the master alone does not make every node without OOB stop its instances
MIN_SELF_FENCE_LEASE = 30.0

FENCE_OOB = "oob"
FENCE_LEASE = "lease"
FENCE_NONE = "none"

_INT = re.compile(r"-?[0-9]+\Z")
_COUNT = re.compile(r"[0-9]{1,9}\Z")
#: the disk templates whose disks every node of the group reaches
_SHARED = frozenset([constants.DT_SHARED_FILE, constants.DT_EXT, constants.DT_RBD,
                     constants.DT_GLUSTER])


class SilenceWatch:
    """When the master last heard each node, and when it last sent it a lease.

    A node is watched from the first :meth:`watch` call naming it: the time
    before that never counts as silence (a master that just started has
    heard nobody yet).
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._heard: dict[str, float] = {}
        self._sent: dict[str, float] = {}
        self._held: dict[str, float] = {}
        self._pending: dict[str, float] = {}
        self._covered: dict[str, frozenset[str]] = {}
        self._pending_cover: dict[str, frozenset[str]] = {}
        self._relay: dict[str, str] = {}

    def watch(self, nodes: Iterable[str], now: float) -> None:
        """Watch ``nodes`` (from now, for those new); forget every other node."""
        names = set(nodes)
        for name in list(self._heard):
            if name not in names:
                del self._heard[name]
                self._sent.pop(name, None)
                self._held.pop(name, None)
                self._pending.pop(name, None)
                self._covered.pop(name, None)
                self._pending_cover.pop(name, None)
                self._relay.pop(name, None)
        for name in names:
            self._heard.setdefault(name, now)

    def sent(self, node: str, now: float, lease: float = 0.0,
             covers: Iterable[str] = (), delay: float = 0.0) -> None:
        """A lease request of ``lease`` seconds (0: none, a release) covering the
        instances ``covers`` left for ``node`` at ``now``; ``delay``: how much later
        than a direct request it may reach the node (a relayed one,
        :data:`RELAY_DELAY`), counted as sent that much later."""
        now += delay
        self._sent[node] = max(now, self._sent.get(node, now))
        self._pending[node] = max(lease, self._pending.get(node, 0.0))
        names = frozenset(covers) if lease > 0 else frozenset()
        self._pending_cover[node] = self._pending_cover.get(node, names) & names

    def heard(self, node: str, now: float, lease: float | None = None,
              covers: Iterable[str] = ()) -> None:
        """``node``'s daemon answered at ``now``; ``lease`` and ``covers``: the lease it
        confirmed with that answer and the instances it covers (the newest request:
        the ones before are superseded)."""
        if node in self._heard:
            self._heard[node] = max(now, self._heard[node])
        if lease is not None:
            self.confirmed(node, lease, covers)

    def confirmed(self, node: str, lease: float, covers: Iterable[str] = ()) -> None:
        """``node`` confirmed a lease of ``lease`` seconds covering ``covers`` (through
        a relay: not a contact of the master's own, its silence goes on)."""
        self._held[node] = lease
        self._covered[node] = frozenset(covers) if lease > 0 else frozenset()
        self._pending.pop(node, None)
        self._pending_cover.pop(node, None)

    def relayed_by(self, node: str) -> str | None:
        """The candidate that last forwarded ``node``'s lease (None: none yet)."""
        return self._relay.get(node)

    def relay_ok(self, node: str, via: str | None) -> None:
        """``via`` forwarded ``node``'s lease (None: none could)."""
        if via is None:
            self._relay.pop(node, None)
        elif node in self._heard:
            self._relay[node] = via

    def covered(self, node: str) -> frozenset[str]:
        """The instances ``node`` surely stops when its lease runs out: the ones the
        lease it last confirmed covers, less any a request sent since left out (it
        may have arrived); empty when it confirmed none."""
        held = self._covered.get(node, frozenset())
        pending = self._pending_cover.get(node)
        return held if pending is None else held & pending

    def lease_bound(self, node: str) -> float | None:
        """The longest self-fence lease ``node`` may hold: the one it last confirmed,
        or a longer one sent since; None when it confirmed none (it may run its
        instances for ever: no lease fence is possible)."""
        held = self._held.get(node)
        if held is None or held <= 0:
            return None
        return max(held, self._pending.get(node, 0.0))

    def last_heard(self, node: str) -> float | None:
        """When ``node`` last answered (or was first watched); None: not watched."""
        return self._heard.get(node)

    def last_sent(self, node: str) -> float | None:
        """When the last lease request left for ``node``; None: none yet."""
        return self._sent.get(node)

    def silence(self, node: str, now: float) -> float:
        """Seconds since ``node`` was last heard (0 for a node not watched)."""
        last = self._heard.get(node)
        return 0.0 if last is None else max(0.0, now - last)

    def suspects(self, now: float) -> list[str]:
        """The watched nodes silent for at least the timeout, by name."""
        return sorted(n for n in self._heard if self.silence(n, now) >= self.timeout)


def relay_order(node: str, master: str, candidates: Sequence[str],
                last: str | None) -> tuple[list[str], list[str]]:
    """Through which master candidates the master forwards ``node``'s lease when it
    cannot reach ``node`` itself: ``(first, then)``, ``first`` the one that
    forwarded it last time (if it still is a candidate), ``then`` every other
    candidate, asked together when ``first`` is empty or fails.  Neither the
    master nor ``node`` relays."""
    others = sorted(c for c in dict.fromkeys(candidates) if c not in (master, node))
    if last in others:
        return [last], [c for c in others if c != last]
    return [], others


@dataclass(frozen=True)
class Verdict:
    """What the candidates said about a suspect node.

    ``confirmed``: the candidates that cannot reach it (the master first);
    ``reached``: those that can; ``silent``: those that did not answer.
    """

    node: str
    dead: bool
    confirmed: tuple[str, ...]
    reached: tuple[str, ...]
    silent: tuple[str, ...]
    needed: int

    def describe(self) -> str:
        """One line for the log and the job log."""
        parts = [f"{len(self.confirmed)} confirmation(s), {self.needed} needed:"
                 f" cannot reach {self.node}: {', '.join(self.confirmed) or 'none'}"]
        if self.reached:
            parts.append(f"reach it: {', '.join(self.reached)}")
        if self.silent:
            parts.append(f"no answer: {', '.join(self.silent)}")
        return ("dead: " if self.dead else "not dead: ") + "; ".join(parts)


def verdict(node: str, master: str, candidates: Sequence[str],
            answers: Mapping[str, bool | None]) -> Verdict:
    """Is ``node`` dead?

    ``candidates``: the online master candidates of the configuration, the
    master and ``node`` itself included when they are candidates;
    ``answers``: per candidate asked, whether it reaches ``node``'s daemon
    (None or missing: no answer).  The master counts as one that cannot
    reach it (it suspects it); ``node`` never confirms its own death.  Dead
    needs a strict majority of ``candidates`` confirming.
    """
    names = list(dict.fromkeys(candidates))
    needed = len(names) // 2 + 1
    confirmed: list[str] = []
    reached: list[str] = []
    silent: list[str] = []
    for name in sorted(names, key=lambda n: (n != master, n)):
        if name == master:
            confirmed.append(name)
        elif name == node:
            silent.append(name)
        else:
            answer = answers.get(name)
            if answer is None:
                silent.append(name)
            elif answer:
                reached.append(name)
            else:
                confirmed.append(name)
    dead = bool(names) and master in names and len(confirmed) >= needed
    return Verdict(node, dead, tuple(confirmed), tuple(reached), tuple(silent), needed)


@dataclass(frozen=True)
class Fence:
    """How a dead node is fenced: ``kind`` :data:`FENCE_OOB` (power it off) or
    :data:`FENCE_LEASE` (its instances are stopped by the node itself when its
    lease runs out); ``not_before``: when, at the earliest, its instances may start
    elsewhere (the lease's end plus the margin; for OOB, when the power-off is
    confirmed, so 0 here)."""

    kind: str
    not_before: float
    detail: str


def choose_fence(node: str, oob_program: str, last_sent: float | None,
                 lease: float | None, rpc_timeout: float) -> Fence:
    """The fence for dead ``node``.

    With an ``oob_program``: power it off.  Without: the node stops its
    instances before its self-fence lease, counted from the last lease
    request it can have received, runs out; that request left at
    ``last_sent`` and arrived at the latest ``rpc_timeout`` after, so the
    master waits until then plus ``lease`` (the longest the node may hold,
    :meth:`SilenceWatch.lease_bound`) plus :data:`LEASE_MARGIN`.  A node
    that confirmed no lease (``lease`` None) cannot be fenced:
    :data:`FENCE_NONE`, nothing of it may start elsewhere.
    """
    if oob_program:
        return Fence(FENCE_OOB, 0.0, f"out-of-band power-off of {node} ({oob_program})")
    if lease is None or last_sent is None:
        return Fence(FENCE_NONE, float("inf"), f"{node} has no oob_program and holds no"
                     " self-fence lease confirmed to this master (none of its instances is"
                     " tagged for failover, or it never answered): it cannot be fenced")
    end = last_sent + rpc_timeout + lease + LEASE_MARGIN
    return Fence(FENCE_LEASE, end, f"self-fence of {node}: its lease of {lease:g} s"
                 f" ran out, plus {LEASE_MARGIN:g} s")


def self_fence_lease(timeout: float) -> float:
    """The self-fence lease the master gives with ``ha_node_timeout`` = ``timeout``:
    twice the timeout, at least :data:`MIN_SELF_FENCE_LEASE`."""
    return max(2.0 * timeout, MIN_SELF_FENCE_LEASE)


def self_fence_at(contact: float, lease: float) -> float:
    """When a node whose last lease renewal arrived at ``contact`` stops its instances:
    :data:`SELF_FENCE_AHEAD` before the lease runs out, never sooner than half of it."""
    return contact + max(lease / 2.0, lease - SELF_FENCE_AHEAD)


@dataclass(frozen=True)
class InstanceView:
    """What the plan needs to know of one instance of the dead node.

    ``repair``: the most destructive repair its policy allows (None: not
    enabled, see ``policy_text``); ``memory``: MiB it needs on a node;
    ``running``: whether it should run (admin state up); ``hypervisor``:
    the one it runs under (named in the self-fence lease); ``relocations``
    and ``failures``: its recovery counts (:func:`count`, from its tags).
    """

    name: str
    disk_template: str
    secondary: str | None
    memory: int
    running: bool
    repair: str | None
    policy_text: str
    priority: int = 0
    hypervisor: str = ""
    relocations: int = 0
    failures: int = 0


@dataclass(frozen=True)
class NodeView:
    """A node that might take instances: its free memory (MiB) as the node reports it."""

    name: str
    free_memory: int
    group: str = ""


@dataclass(frozen=True)
class Step:
    """Fail ``instance`` over to ``target`` (``ignore_consistency`` for DRBD)."""

    instance: str
    target: str
    disk_template: str
    priority: int

    @property
    def ignore_consistency(self) -> bool:
        """Whether the failover ignores the dead primary's disks (always, after a fence)."""
        return True


@dataclass(frozen=True)
class Skipped:
    """An instance of the dead node left alone, and why."""

    instance: str
    reason: str


@dataclass(frozen=True)
class Plan:
    """The recovery of one dead node: ``steps`` in order, ``skipped`` by name."""

    node: str
    steps: tuple[Step, ...] = ()
    skipped: tuple[Skipped, ...] = ()

    def describe(self) -> list[str]:
        """Lines for the log and the job log."""
        lines = [f"recover {s.instance} on {s.target} (priority {s.priority})"
                 for s in self.steps]
        lines += [f"leave {s.instance}: {s.reason}" for s in self.skipped]
        return lines


def priority(tags: Iterable[str]) -> int:
    """An instance's recovery priority from its ``ganeti:ha:priority:<n>`` tags
    (the highest; 0 without one)."""
    found = [int(t[len(PRIORITY_PREFIX):]) for t in tags
             if t.startswith(PRIORITY_PREFIX) and _INT.match(t[len(PRIORITY_PREFIX):])]
    return max(found) if found else 0


def count(tags: Iterable[str], prefix: str) -> int:
    """A recovery count from an instance's tags: the highest ``<prefix><n>`` (0 without
    one; several can be left by a job cut short between adding the new one and
    removing the old)."""
    found = [int(t[len(prefix):]) for t in tags
             if t.startswith(prefix) and _COUNT.match(t[len(prefix):])]
    return max(found) if found else 0


def count_tags(tags: Iterable[str], prefix: str) -> list[str]:
    """The tags of an instance that hold the count ``prefix`` (to be replaced)."""
    return sorted(t for t in tags if t.startswith(prefix))


def describe_counts(tags: Iterable[str]) -> str | None:
    """The recovery counts of an instance's tags for ``ha_state``
    (``relocated 1 time(s) by recovery, 0 failed job(s)``), None when both are 0."""
    tags = list(tags)
    moved, failed = count(tags, RELOCATIONS_PREFIX), count(tags, FAILURES_PREFIX)
    if not moved and not failed:
        return None
    return f"relocated {moved} time(s) by recovery, {failed} failed job(s)"


def over_limits(inst: InstanceView, max_relocate: int, max_restart: int) -> str | None:
    """Why the master no longer recovers ``inst`` (its relocation or its restart limit
    reached; the tag to remove to allow it again), or None."""
    if inst.relocations >= max_relocate:
        return (f"relocation limit reached ({max_relocate}; remove"
                f" {RELOCATIONS_PREFIX}{inst.relocations} to allow more)")
    if inst.failures > max_restart:
        return (f"restart limit reached ({max_restart}; remove"
                f" {FAILURES_PREFIX}{inst.failures} to try again)")
    return None


def may_retry(failures: int, max_restart: int) -> bool:
    """Whether a recovery job is submitted again after its ``failures``-th failure in a
    row: at most ``max_restart`` times."""
    return failures <= max_restart


def _allowed(repair: str | None) -> bool:
    return (repair is not None
            and policy.REPAIR_TYPES.index(repair) >= policy.REPAIR_TYPES.index("failover"))


def lease_covers(inst: InstanceView, max_relocate: int | None = None,
                 max_restart: int | None = None) -> bool:
    """Whether ``inst``'s self-fence lease names it (its node stops it when the lease
    runs out unrenewed): when the master would start it elsewhere after its node's
    loss, its policy allowing ``failover`` (enabled, not suspended), it should run,
    its template keeps its disks reachable from another node and (limits given) it
    is within its relocation and restart limits.  Stopping any other instance would
    buy no safety."""
    if max_relocate is not None and max_restart is not None \
            and over_limits(inst, max_relocate, max_restart) is not None:
        return False
    return (_allowed(inst.repair) and inst.running
            and (inst.disk_template == constants.DT_DRBD8 or inst.disk_template in _SHARED))


def plan(node: str, instances: Iterable[InstanceView], nodes: Iterable[NodeView],
         relocations: Mapping[str, int], max_relocate: int,
         covered: Collection[str] | None = None, max_restart: int | None = None) -> Plan:
    """The recovery plan of dead ``node``'s primary instances.

    ``nodes``: the nodes that may take instances (online, VM-capable, not
    ``node``), with their free memory; ``relocations``: how often each
    instance was already moved by recovery (besides its view's own count);
    ``max_restart`` given, an instance whose recovery jobs failed more often
    in a row is left alone.  An instance is recovered when
    its policy allows ``failover`` (or ``reinstall``), it should run, its
    relocations are below ``max_relocate`` and its template keeps its disks
    reachable elsewhere: ``drbd`` onto its secondary, a shared template onto
    the node with the most free memory.  Each target must have room for it
    after the ones placed before it (N+1: the survivors' free memory, as
    they report it); higher priority first, then by name.  ``covered``: after
    a lease fence, the instances the node's lease covered
    (:meth:`SilenceWatch.covered`): any other one was not stopped by the node
    (tagged or started after that lease) and may still run there, so it is
    reported, not started; None (an OOB power-off) covers every instance.
    """
    free = {n.name: n.free_memory for n in nodes if n.name != node}
    steps: list[Step] = []
    skipped: list[Skipped] = []
    for inst in sorted(instances, key=lambda i: (-i.priority, i.name)):
        if not _allowed(inst.repair):
            skipped.append(Skipped(inst.name, f"not tagged for failover ({inst.policy_text})"))
            continue
        if not inst.running:
            skipped.append(Skipped(inst.name, "administratively down"))
            continue
        moved = max(relocations.get(inst.name, 0), inst.relocations)
        if moved >= max_relocate:
            skipped.append(Skipped(inst.name, f"relocation limit reached ({max_relocate})"))
            continue
        if max_restart is not None and not may_retry(inst.failures, max_restart):
            skipped.append(Skipped(inst.name, f"restart limit reached ({max_restart}):"
                                   f" {inst.failures} failed recovery job(s); remove"
                                   f" {FAILURES_PREFIX}{inst.failures} to try again"))
            continue
        if covered is not None and inst.name not in covered:
            skipped.append(Skipped(inst.name, f"not covered by the self-fence lease {node}"
                                   " last confirmed (tagged or started since): it may still"
                                   " run there"))
            continue
        if inst.disk_template == constants.DT_DRBD8:
            if inst.secondary is None or inst.secondary not in free:
                skipped.append(Skipped(inst.name, f"its secondary {inst.secondary} cannot"
                                       " take it (offline or gone)"))
                continue
            target = inst.secondary
        elif inst.disk_template in _SHARED:
            fitting = [n for n, mem in free.items() if mem >= inst.memory]
            if not fitting:
                skipped.append(Skipped(inst.name, f"no node has {inst.memory} MiB free (N+1)"))
                continue
            target = max(fitting, key=lambda n: (free[n], [-ord(c) for c in n]))
        else:
            skipped.append(Skipped(inst.name, f"disk template {inst.disk_template}: its"
                                   " disks were on the dead node"))
            continue
        if free[target] < inst.memory:
            skipped.append(Skipped(inst.name, f"{target} has {free[target]} MiB free,"
                                   f" {inst.memory} needed (N+1)"))
            continue
        free[target] -= inst.memory
        steps.append(Step(inst.name, target, inst.disk_template, inst.priority))
    return Plan(node, tuple(steps), tuple(sorted(skipped, key=lambda s: s.instance)))


def fenced_tag(fence: str, confirmed: float) -> str:
    """The node tag recording a confirmed fence: ``ganeti:ha:fenced:oob:1796338450``."""
    return f"{FENCED_PREFIX}{fence}:{int(confirmed)}"


def fenced_record(tags: Iterable[str]) -> tuple[str, int] | None:
    """The fence recorded in a node's tags (:func:`fenced_tag`): ``(fence, time)``,
    the latest when several; None without a valid one."""
    found = []
    for tag in tags:
        if not tag.startswith(FENCED_PREFIX):
            continue
        kind, _, when = tag[len(FENCED_PREFIX):].partition(":")
        if kind in (FENCE_OOB, FENCE_LEASE) and _INT.match(when):
            found.append((int(when), kind))
    if not found:
        return None
    latest, fence = max(found)
    return fence, latest


def resume_covered(fence: str) -> frozenset[str] | None:
    """The instances a resumed recovery may start elsewhere (``covered`` of
    :func:`plan`) after the recorded ``fence``: every one after an out-of-band
    power-off (None); none after a self-fence lease, as which instances the
    node's last confirmed lease named was known only to the master that
    fenced it (the others may still run there: reported, not started)."""
    return None if fence == FENCE_OOB else frozenset()


def unfinished_ha_jobs(jobs: Iterable[tuple[int, str | None, Sequence[Mapping[str, object]]]]
                       ) -> list[int]:
    """The ids of the jobs, ``(id, status, opcodes)``, not finished yet whose
    opcodes carry the recovery's reason (:data:`REASON_SOURCE`): a new master
    resumes a recovery only when none is left, so no instance's failover is
    submitted while one from the old master is still queued or running."""
    found = []
    for job_id, status, ops in jobs:
        if status is None or status in constants.JOBS_FINALIZED:
            continue
        for op in ops:
            trail = op.get("reason") if isinstance(op, Mapping) else None
            if isinstance(trail, list) and any(
                    isinstance(entry, (list, tuple)) and entry and entry[0] == REASON_SOURCE
                    for entry in trail):
                found.append(job_id)
                break
    return sorted(found)
