"""Node loss recovery in the master daemon (doc/ha.md, "Node loss recovery").

:func:`start` runs one thread, ``ha-recovery``, beside the heartbeat.
While the cluster parameter ``ha_recovery`` is on, every
:data:`PROBE_EVERY` seconds it gives every online node but the master its
self-fence lease (``ha_lease``, one call per node in one parallel fan-out:
a length and the primary instances it covers, those the master would
recover (:func:`ganeti.ha.recovery.lease_covers`), for a node without an
``oob_program`` that has any; none for the others), the answer being the
probe; the pure :mod:`ganeti.ha.recovery` decides the rest:

1. a node silent for ``ha_node_timeout`` seconds is a suspect: the online
   master candidates are asked whether they reach its node daemon
   (``ha_node_reachable``); without a strict majority of them (the master
   counted) confirming they cannot, nothing happens (logged once per
   change of the answers);
2. dead: one job (reason ``gnt:ha``), ``OP_NODE_HA_FENCE``
   (:mod:`ganeti.cmdlib.node_fence`): it logs the verdict, marks the node
   offline and, when it has an ``oob_program``, powers it off, else waits
   until the node's self-fence lease ran out (plus a margin), and logs
   which fence it was and when it was confirmed; the fence is confirmed
   when that job succeeds (the thread renews the other nodes' leases
   while it waits for it); a node that never confirmed a lease to this
   master is not recovered;
   after a lease fence only the instances the node's last confirmed lease
   covered are recovered (the others are reported);
3. the recovery plan: a report job listing every instance of the node and
   what is done with it, then one job per instance recovered
   (``OP_INSTANCE_FAILOVER`` with ``ignore_consistency``, to the plan's
   target), each opening with the verdict, the fence and when it was
   confirmed in its log; a failed job is submitted again up to
   ``ha_max_restart`` times.

4. a recovery cut short (by a master failover, say): the fence job tags the
   node ``ganeti:ha:fenced:<fence>:<time>``; every round, once no job with
   reason ``gnt:ha`` is unfinished (the old master's included), the plan
   of every offline node with that tag is made again and its failovers
   submitted (after an out-of-band fence only); the last failover job of
   a plan removes the tag, or a job of its own with nothing to start.

Jobs go through this master's own LUXI socket, as any client's, so they
are visible in ``gnt-job list`` and pass the job filters.  Off
(the default), the thread only reads the parameter every few seconds.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from ganeti import constants, errors, luxi, parameters
from ganeti.cmdlib.node_fence import stamp
from ganeti.cmdlib.oob import oob_program
from ganeti.context import MasterContext
from ganeti.ha import policy, recovery
from ganeti.opcodes import wire
from ganeti.rpc import defs as rpc_defs

__all__ = ["start", "Monitor", "PROBE_EVERY", "PROBE_TIMEOUT"]

logger = logging.getLogger(__name__)

#: seconds between two probes of the nodes while recovery is on
PROBE_EVERY = 2.0
#: the probe's and the candidates' check's RPC timeout
PROBE_TIMEOUT = 2.0
#: how long the thread waits for one of its jobs
JOB_WAIT = 300.0

_FINISHED = frozenset([constants.JOB_STATUS_SUCCESS, constants.JOB_STATUS_ERROR,
                       constants.JOB_STATUS_CANCELED])


class Monitor:
    """The recovery thread's state: the silence watch, the attempts, what was logged.

    ``submit(ops) -> job id`` and ``status(job id) -> status`` reach the job
    queue; ``clock`` is monotonic, ``wall`` the time of day for the job log,
    ``wait(seconds)`` sleeps unless stopped (default ``stop.wait``).
    """

    def __init__(self, context: MasterContext, submit: Callable[[list[dict[str, Any]]], int],
                 status: Callable[[int], str | None], stop: threading.Event, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 wait: Callable[[float], bool] | None = None,
                 unfinished: Callable[[], list[int]] | None = None) -> None:
        self.context = context
        self.submit = submit
        self.status = status
        self.stop = stop
        self.clock = clock
        self.wall = wall
        #: sleeps (seconds) unless stopped; whether stopped
        self.wait: Callable[[float], bool] = wait if wait is not None else stop.wait
        #: the ids of the unfinished jobs of any master's recovery (reason ``gnt:ha``)
        self.unfinished: Callable[[], list[int]] = (
            unfinished if unfinished is not None else lambda: [])
        self.watch: recovery.SilenceWatch | None = None
        self._said: dict[str, str] = {}
        #: per node whose lease went through a candidate: the last thing logged
        self._relay_said: dict[str, str] = {}
        #: leases may be out there (turned on since this master started)
        self._leased = False
        #: the node being fenced and recovered: never probed (no lease renewed)
        self._recovering: str | None = None
        self._last_probe = float("-inf")

    # --- one round -------------------------------------------------------------
    def round(self) -> None:
        """Renew the nodes' leases (the probe); resume a recovery a fence record
        names; handle the first node found dead."""
        if not self._probe() or self.watch is None:
            return
        if self._resume():
            return
        for name in self.watch.suspects(self.clock()):
            if self.stop.is_set():
                return
            if self._check(name):
                return

    def _probe(self) -> bool:
        """Renew the leases of every online node but the master and the node being
        recovered; whether recovery is on."""
        cfg = self.context.require_cfg()
        cluster = cfg.get_cluster_info()
        if not cluster.ha_recovery:
            self.watch = None
            if self._leased:
                self._release()
            return False
        if self.watch is None or self.watch.timeout != cluster.ha_node_timeout:
            self.watch = recovery.SilenceWatch(float(cluster.ha_node_timeout))
        master = cfg.get_master_node_name()
        nodes = [n for n in cfg.get_all_nodes_info().values()
                 if not n.offline and n.name not in (master, self._recovering)]
        now = self.clock()
        self._last_probe = now
        self.watch.watch([n.name for n in nodes], now)
        if not nodes:
            return True
        rpc = self.context.require_rpc()
        lease = recovery.self_fence_lease(float(cluster.ha_node_timeout))
        # only the instances of nodes without OOB can be named in a lease: at every
        # round (2 s), the views of the others are not built
        unfenced = {n.uuid for n in nodes if not oob_program(cfg, n)}
        views = self._views(self.wall(), unfenced) if unfenced else {}
        given: dict[str, tuple[float, list[recovery.InstanceView]]] = {}
        for node in nodes:
            covers = [v for v in views.get(node.uuid, [])
                      if recovery.lease_covers(v, cluster.ha_max_relocate, cluster.ha_max_restart)]
            given[node.name] = (lease if covers else 0.0, covers)
        for name, (value, covers) in given.items():
            self.watch.sent(name, now, value, [v.name for v in covers])
        self._leased = True
        answers = rpc.per_node(list(given), lambda r, n: r.call_ha_lease(
            n, lease=given[n][0],
            instances=[{"name": v.name, "hypervisor": v.hypervisor} for v in given[n][1]],
            rpc_timeout=PROBE_TIMEOUT))
        heard = self.clock()
        unreached = []
        for name, (value, covers) in given.items():
            res = answers.get(name)
            if res is not None and not res.fail_msg:
                self.watch.heard(name, heard, value, [v.name for v in covers])
                self._said.pop(name, None)
                self._relay_said.pop(name, None)
            elif (value > 0 or self.watch.lease_bound(name) is not None) and not (
                    res is not None and (res.fail_msg or "").startswith(rpc_defs.FENCED_PREFIX)):
                unreached.append(name)
        for name in unreached:
            self._relay(name, *given[name])
        return True

    def _relay(self, name: str, value: float, covers: list[recovery.InstanceView]) -> None:
        """Forward the lease of ``name``, which this master could not reach, through a
        master candidate (doc/ha.md, "The lease relay"): the one that did it last
        time, else every other one at once.  The node's silence goes on (the
        verdict is the candidates' vote, as before); only its lease is kept, so a
        node cut off from the master alone does not stop its instances."""
        assert self.watch is not None
        cfg = self.context.require_cfg()
        node = cfg.get_node_info_by_name(name)
        if node is None:
            return
        master = cfg.get_master_node_name()
        candidates = [n.name for n in cfg.get_master_candidates() if not n.offline]
        names = [v.name for v in covers]
        wire_instances = [{"name": v.name, "hypervisor": v.hypervisor} for v in covers]
        first, then = recovery.relay_order(name, master, candidates, self.watch.relayed_by(name))
        rpc = self.context.require_rpc()
        errors_seen: list[str] = []
        for group in (first, then):
            if not group:
                continue
            self.watch.sent(name, self.clock(), value, names, delay=recovery.RELAY_DELAY)
            results = rpc.call_ha_lease_relay(
                group, node=name, address=node.primary_ip, master=master, lease=value,
                instances=wire_instances, timeout=PROBE_TIMEOUT,
                rpc_timeout=recovery.RELAY_TIMEOUT)
            for via in group:
                res = results.get(via)
                if res is not None and not res.fail_msg:
                    self.watch.confirmed(name, value, names)
                    self.watch.relay_ok(name, via)
                    if self._relay_said.get(name) != via:
                        logger.warning("Node loss recovery: %s not reached by this master;"
                                       " its lease renewed through %s", name, via)
                        self._relay_said[name] = via
                    return
                errors_seen.append(f"{via}: {res.fail_msg if res is not None else 'no answer'}")
        self.watch.relay_ok(name, None)
        text = "; ".join(errors_seen) or "no other master candidate"
        if self._relay_said.get(name) != text:
            logger.warning("Node loss recovery: the lease of %s not renewed, neither by this"
                           " master nor through a candidate (%s)", name, text)
            self._relay_said[name] = text

    def _keep_leases(self) -> None:
        """While a recovery waits: renew the other nodes' leases when a round is due
        (a node whose lease ran out meanwhile would stop its instances)."""
        if self.clock() - self._last_probe < PROBE_EVERY:
            return
        try:
            self._probe()
        except errors.GanetiError as exc:
            logger.error("Node loss recovery: lease renewal during a recovery failed: %s", exc)

    def _release(self) -> None:
        """Recovery turned off: release every online node's self-fence lease."""
        cfg = self.context.require_cfg()
        master = cfg.get_master_node_name()
        names = [n.name for n in cfg.get_all_nodes_info().values()
                 if not n.offline and n.name != master]
        results = self.context.require_rpc().call_ha_lease(
            names, lease=0.0, instances=[], rpc_timeout=PROBE_TIMEOUT) if names else {}
        failed = sorted(n for n in names if results.get(n) is None or results[n].fail_msg)
        if failed:
            # a node cut off from this master alone gets its release through a candidate
            candidates = [n.name for n in cfg.get_master_candidates() if not n.offline]
            for name in list(failed):
                node = cfg.get_node_info_by_name(name)
                _, via = recovery.relay_order(name, master, candidates, None)
                if node is None or not via:
                    continue
                relayed = self.context.require_rpc().call_ha_lease_relay(
                    via, node=name, address=node.primary_ip, master=master, lease=0.0,
                    instances=[], timeout=PROBE_TIMEOUT, rpc_timeout=recovery.RELAY_TIMEOUT)
                if any(r is not None and not r.fail_msg for r in relayed.values()):
                    failed.remove(name)
        if failed:
            logger.warning("Node loss recovery off: the self-fence lease of %s not released"
                           " yet (tried again)", ", ".join(failed))
            return
        self._leased = False

    def _check(self, name: str) -> bool:
        """Ask the candidates about silent ``name``; recover it if it is dead."""
        cfg = self.context.require_cfg()
        node = cfg.get_node_info_by_name(name)
        if node is None or node.offline:
            return False
        master = cfg.get_master_node_name()
        candidates = [n.name for n in cfg.get_master_candidates() if not n.offline]
        if master not in candidates:
            candidates.append(master)
        askers = [c for c in candidates if c not in (master, name)]
        results = (self.context.require_rpc().call_ha_node_reachable(
            askers, node=name, address=node.primary_ip, timeout=PROBE_TIMEOUT,
            rpc_timeout=PROBE_TIMEOUT * 2 + 1) if askers else {})
        answers: dict[str, bool | None] = {}
        for asker in askers:
            res = results.get(asker)
            ok = res is not None and not res.fail_msg and isinstance(res.payload, dict)
            answers[asker] = bool(res.payload.get("reachable")) if ok and res else None
        verdict = recovery.verdict(name, master, candidates, answers)
        text = verdict.describe()
        assert self.watch is not None
        if not verdict.dead:
            if self._said.get(name) != text:
                logger.warning("Node %s silent for %.0f s, %s", name,
                               self.watch.silence(name, self.clock()), text)
                self._said[name] = text
            return False
        logger.warning("Node loss recovery: node %s %s", name, text)
        self._recovering = name
        try:
            return self.recover(name, verdict)
        finally:
            self._recovering = None

    # --- a recovery cut short ----------------------------------------------------
    def _resume(self) -> bool:
        """Finish the recovery of every offline node tagged fenced (by this master or
        one before it: the record is in the configuration) whose HA instances are
        still there, once no recovery job of any master is unfinished (the old
        master's are in the replicated queue); drop the record when nothing is left
        to recover.  Whether anything was submitted."""
        cfg = self.context.require_cfg()
        fenced = []
        for node in cfg.get_all_nodes_info().values():
            record = recovery.fenced_record(node.tags)
            if node.offline and record is not None and node.name != self._recovering:
                fenced.append((node.name, record))
        if not fenced:
            return False
        waiting = self.unfinished()
        if waiting:
            text = f"waiting for recovery job(s) {', '.join(map(str, waiting))}"
            if self._said.get("resume") != text:
                logger.warning("Node loss recovery: %s before resuming the recovery of %s",
                               text, ", ".join(sorted(n for n, _ in fenced)))
                self._said["resume"] = text
            return False
        self._said.pop("resume", None)
        did = False
        for name, (kind, when) in sorted(fenced):
            if self.stop.is_set():
                break
            plan = self._plan(name, recovery.resume_covered(kind))
            if not plan.steps:
                unfence = self._unfence_ops(name)
                if unfence:
                    self._run(unfence)
                logger.warning("Node loss recovery: nothing left to recover on %s; its fence"
                               " record removed%s", name,
                               "".join(f"; {line}" for line in plan.describe()))
                continue
            how = "out-of-band power-off" if kind == recovery.FENCE_OOB else "its self-fence lease"
            fenced_line = (f"{name} fenced by {how}, confirmed at {stamp(float(when))}"
                           " (recorded on the node; recovery resumed by this master)")
            logger.warning("Node loss recovery: resuming the recovery of %s: %s", name,
                           "; ".join(plan.describe()))
            self._run([self._log_op(name, [fenced_line, f"Recovery plan of {name}:"]
                                    + plan.describe())])
            for k, step in enumerate(plan.steps):
                self._recover_one(name, step, [fenced_line], last=k == len(plan.steps) - 1)
            did = True
        return did

    # --- fence and recovery ------------------------------------------------------
    def recover(self, name: str, verdict: recovery.Verdict) -> bool:
        """Fence dead ``name``, then recover its instances (in this thread); whether
        anything was done (False: it cannot be fenced)."""
        cfg = self.context.require_cfg()
        node = cfg.get_node_info_by_name(name)
        assert node is not None and self.watch is not None
        fence = recovery.choose_fence(name, oob_program(cfg, node), self.watch.last_sent(name),
                                      self.watch.lease_bound(name), PROBE_TIMEOUT)
        # read now: the probes while the recovery waits no longer watch this node
        covered = None if fence.kind == recovery.FENCE_OOB else self.watch.covered(name)
        if fence.kind == recovery.FENCE_NONE:
            if self._said.get(name) != fence.detail:
                logger.error("Node loss recovery: node %s is dead (%s) but %s; nothing of it"
                             " is started elsewhere", name, verdict.describe(), fence.detail)
                self._said[name] = fence.detail
            return False
        declared = self.wall()
        head = (f"Node {name} declared dead at {stamp(declared)}"
                f" after {self.watch.silence(name, self.clock()):.0f} s of silence; {verdict.describe()}")
        wait = 0.0
        if fence.kind == recovery.FENCE_LEASE:
            wait = max(0.0, fence.not_before - self.clock())
            logger.warning("Node loss recovery: the fence job of %s waits %.1f s for its"
                           " self-fence lease to run out", name, wait)
        # the LU marks it offline, powers it off (OOB) or waits the lease out (counted
        # from its own start: never shorter), and logs the fence and its confirmation
        job = self._run([wire.node_ha_fence(
            name, fence=fence.kind, lease_wait=math.ceil(wait * 1000) / 1000, messages=[head],
            reason=self._reason(f"fencing node {name}: {fence.detail}"))], JOB_WAIT + wait)
        if job is None:
            logger.error("Node loss recovery: the fence job of %s failed; nothing of it is"
                         " started elsewhere", name)
            return True
        confirmed = self.wall()
        fenced = (f"{name} fenced by {'out-of-band power-off' if fence.kind == recovery.FENCE_OOB else 'its self-fence lease'}"
                  f" (job {job}), confirmed at {stamp(confirmed)}")
        logger.warning("Node loss recovery: %s", fenced)
        plan = self._plan(name, covered)
        self._run([self._log_op(name, [head, fenced, f"Recovery plan of {name}:"]
                                + (plan.describe() or ["no instances"]))])
        for k, step in enumerate(plan.steps):
            self._recover_one(name, step, [head, fenced], last=k == len(plan.steps) - 1)
        return True

    def _recover_one(self, dead: str, step: recovery.Step, lines: list[str],
                     last: bool = False) -> None:
        """Fail ``step``'s instance over; its counts, in its tags, updated by the same
        job (a relocation more, the failures cleared) or, when it failed, by a job of
        their own (a failure more); submitted again up to ``ha_max_restart`` times.
        ``last``: the plan's last step, whose job also removes the dead node's fence
        record (nothing is left to recover once it succeeds)."""
        while not self.stop.is_set():
            cfg = self.context.require_cfg()
            inst = cfg.get_instance_info_by_name(step.instance)
            if inst is None:
                return
            tags = list(inst.tags)
            target = None if step.disk_template == constants.DT_DRBD8 else step.target
            why = f"recovering {step.instance}"
            failover = wire.instance_failover(
                step.instance, ignore_consistency=step.ignore_consistency,
                target_node=target, reason=self._reason(why))
            moved = recovery.count(tags, recovery.RELOCATIONS_PREFIX) + 1
            job = self._run([self._log_op(dead, lines + [f"Recovering {step.instance} on"
                                                   f" {step.target}"]), failover,
                             *self._count_ops(step.instance, tags, recovery.RELOCATIONS_PREFIX,
                                              moved, why),
                             *self._count_ops(step.instance, tags, recovery.FAILURES_PREFIX,
                                              0, why),
                             *(self._unfence_ops(dead) if last else [])])
            if job is not None:
                logger.warning("Node loss recovery: %s runs on %s (job %s; relocated %d"
                               " time(s))", step.instance, step.target, job, moved)
                return
            failed = recovery.count(tags, recovery.FAILURES_PREFIX) + 1
            self._run(self._count_ops(step.instance, tags, recovery.FAILURES_PREFIX, failed,
                                      f"recovery of {step.instance} failed"))
            limit = cfg.get_cluster_info().ha_max_restart
            if not recovery.may_retry(failed, limit):
                logger.error("Node loss recovery: %s not recovered (restart limit %d; remove"
                             " its tag %s%d to allow it again)", step.instance, limit,
                             recovery.FAILURES_PREFIX, failed)
                return

    def _unfence_ops(self, name: str) -> list[dict[str, Any]]:
        """The opcode removing node ``name``'s fence record (none without one)."""
        node = self.context.require_cfg().get_node_info_by_name(name)
        tags = recovery.count_tags(node.tags if node else [], recovery.FENCED_PREFIX)
        return [wire.tags_del(constants.TAG_NODE, tags, name=name,
                              reason=self._reason(f"recovery of {name} done"))] if tags else []

    def _count_ops(self, instance: str, tags: list[str], prefix: str, value: int,
                   why: str) -> list[dict[str, Any]]:
        """The opcodes setting ``instance``'s count ``prefix`` to ``value`` (0: no tag),
        the new tag added before the old ones go (:func:`recovery.count` takes the
        highest)."""
        old = recovery.count_tags(tags, prefix)
        new = f"{prefix}{value}"
        ops = []
        if value > 0 and new not in old:
            ops.append(wire.tags_set(constants.TAG_INSTANCE, [new], name=instance,
                                     reason=self._reason(why)))
        gone = [t for t in old if t != new or value == 0]
        if gone:
            ops.append(wire.tags_del(constants.TAG_INSTANCE, gone, name=instance,
                                     reason=self._reason(why)))
        return ops

    def _views(self, now: float, primaries: set[str]) -> dict[str, list[recovery.InstanceView]]:
        """The instances whose primary node is one of the UUIDs ``primaries``, as the
        pure recovery sees them, by primary node UUID (their policy as of ``now``,
        the time of day)."""
        cfg = self.context.require_cfg()
        cluster = cfg.get_cluster_info()
        groups = cfg.get_all_nodegroups_info()
        nodes = cfg.get_all_nodes_info()
        views: dict[str, list[recovery.InstanceView]] = {}
        for inst in cfg.get_all_instances_info().values():
            if inst.primary_node not in primaries:
                continue
            primary = nodes.get(inst.primary_node)
            group = groups.get(primary.group) if primary is not None else None
            pol = policy.effective_policy(inst.tags, group.tags if group else [],
                                          cluster.tags, now)
            secondaries = cfg.get_instance_secondary_nodes(inst.uuid)
            second = nodes.get(secondaries[0]) if secondaries else None
            be = parameters.fill_instance_beparams(cluster, inst)
            views.setdefault(inst.primary_node, []).append(recovery.InstanceView(
                inst.name, inst.disk_template, second.name if second else None,
                int(be.get("maxmem") or 0),
                inst.admin_state == constants.ADMINST_UP,
                pol.repair if pol.state == "enabled" else None, pol.describe(),
                recovery.priority(inst.tags), inst.hypervisor,
                recovery.count(inst.tags, recovery.RELOCATIONS_PREFIX),
                recovery.count(inst.tags, recovery.FAILURES_PREFIX)))
        return views

    def _plan(self, name: str, covered: frozenset[str] | None) -> recovery.Plan:
        """The recovery plan of dead ``name``; ``covered``: the instances its
        self-fence lease covered (None: every one, fenced out of band)."""
        cfg = self.context.require_cfg()
        cluster = cfg.get_cluster_info()
        dead = cfg.get_node_info_by_name(name)
        assert dead is not None
        nodes = cfg.get_all_nodes_info()
        views = self._views(self.wall(), {dead.uuid}).get(dead.uuid, [])
        hosts = [n for n in nodes.values()
                 if not n.offline and n.vm_capable and n.uuid != dead.uuid]
        hv = cluster.primary_hypervisor
        infos = self.context.require_rpc().call_node_info(
            [n.name for n in hosts], storage_units=[],
            hv_specs=[[hv, dict(cluster.hvparams.get(hv, {}))]])
        free = []
        for host in hosts:
            res = infos.get(host.name)
            data = None if res is None or res.fail_msg else res.payload
            value = data.get("memory_free") if isinstance(data, dict) else None
            if isinstance(value, int) and not isinstance(value, bool):
                free.append(recovery.NodeView(host.name, value, host.group))
        return recovery.plan(name, views, free, {}, cluster.ha_max_relocate, covered,
                             cluster.ha_max_restart)

    # --- jobs --------------------------------------------------------------------
    def _reason(self, text: str) -> list[list[Any]]:
        return [[recovery.REASON_SOURCE, text, int(self.wall() * 1e9)]]

    def _log_op(self, node: str, lines: list[str]) -> dict[str, Any]:
        return wire.node_ha_report(node, messages=lines, reason=self._reason(lines[0]))

    def _run(self, ops: list[dict[str, Any]], timeout: float = JOB_WAIT) -> int | None:
        """Submit one job and wait for it (at most ``timeout`` seconds); its id if it
        succeeded."""
        try:
            job = self.submit(ops)
        except errors.GanetiError as exc:
            logger.error("Node loss recovery: a job was refused: %s", exc)
            return None
        deadline = self.clock() + timeout
        while self.clock() < deadline:
            state = self.status(job)
            if state in _FINISHED:
                if state != constants.JOB_STATUS_SUCCESS:
                    logger.error("Node loss recovery: job %s ended %s", job, state)
                    return None
                return job
            if self.wait(0.2):
                return None
            self._keep_leases()
        logger.error("Node loss recovery: job %s did not finish in %.0f s", job, timeout)
        return None


def start(context: MasterContext, stop: threading.Event) -> threading.Thread:
    """Start the ``ha-recovery`` thread (doc/ha.md, "Node loss recovery"); it ends
    with ``stop``."""
    socket_path = context.paths.master_socket

    def client() -> luxi.Client:
        return luxi.Client(socket_path, connect_timeout=5.0, rw_timeout=60.0)

    def submit(ops: list[dict[str, Any]]) -> int:
        return int(client().SubmitJob(ops))

    def status(job: int) -> str | None:
        try:
            rows = client().QueryJobs([job], ["status"])
        except errors.GanetiError:
            return None
        return rows[0][0] if rows and rows[0] else None

    def unfinished() -> list[int]:
        # the statuses come from the queue's summaries; only live jobs are read whole
        live = [int(r[0]) for r in client().QueryJobs(None, ["id", "status"])
                if r and r[1] not in constants.JOBS_FINALIZED]
        rows = client().QueryJobs(live, ["id", "status", "ops"]) if live else []
        return recovery.unfinished_ha_jobs(
            (int(r[0]), r[1], r[2] if isinstance(r[2], list) else [])
            for r in rows if r)

    monitor = Monitor(context, submit, status, stop, unfinished=unfinished)

    def _loop() -> None:
        while not stop.wait(PROBE_EVERY):
            try:
                monitor.round()
            except Exception:  # the monitor must outlive one failed round
                logger.exception("Node loss recovery round failed")

    thread = threading.Thread(target=_loop, name="ha-recovery", daemon=True)
    thread.start()
    return thread
