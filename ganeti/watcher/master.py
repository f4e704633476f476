"""What the watcher does on the master: keep masterd and ganeti-rapi up, then one pass
per node group.

The master daemon must answer LUXI ``QueryClusterInfo`` and the RAPI daemon
``GET /version`` over HTTPS; one that is dead is started, one that is hung
is killed and started again, once per pass (:func:`ensure_daemon`).

Everything goes through LUXI: the checks are queries, the actions are jobs
(reason source ``gnt:watcher``), so they queue behind locks like any
client's and show in ``gnt-job list``.

One process handles all groups, one after the other: four queries (groups,
nodes, instances, locks) describe the whole cluster, the pure
:func:`ganeti.watcher.core.plan_group` decides each group from its slice,
and the jobs of every group are submitted at once (they then run
concurrently in the master daemon).  A child process per group, as
Ganeti's watcher forks, would only add start-up time: the one wait of a
pass, for the verify-disks jobs, covers every group at once (and
``--wait-children`` waits for the submitted jobs).  See doc/watcher.md.

Verify-disks (unless turned off) runs between deciding and submitting: one
``OP_GROUP_VERIFY_DISKS`` job per group, all submitted at once and waited
for (at most :data:`VERIFY_DISKS_TIMEOUT` seconds in all), then archived;
instances with inactive disks get an ``OP_INSTANCE_ACTIVATE_DISKS`` job
with the other jobs of the pass.

A node that rebooted (a new boot id) may have missed configuration pushes
while it was down: the pass submits one ``OP_CLUSTER_REDIST_CONF`` job
(:data:`REDIST_JOB`) with its other jobs.
"""

from __future__ import annotations

import logging
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, errors, luxi, opcodes
from ganeti.opcodes import cluster as op_cluster
from ganeti.opcodes import group as op_group
from ganeti.opcodes import instance as op_instance
from ganeti.pathutils import Paths
from ganeti.watcher import core, state

__all__ = ["LuxiClient", "MasterOptions", "GroupReport", "MasterReport", "ensure_daemon",
           "ensure_masterd", "rapi_answers", "ensure_rapi", "collect", "verify_disks",
           "master_pass", "MASTERD_TIMEOUT", "RAPI_TIMEOUT", "VERIFY_DISKS_TIMEOUT"]

logger = logging.getLogger(__name__)

#: seconds the master daemon has to answer QueryClusterInfo
MASTERD_TIMEOUT = 15.0
#: seconds the RAPI daemon has for each step of ``GET /version`` (connect, TLS, answer)
RAPI_TIMEOUT = 10.0
#: seconds the pass waits for its verify-disks jobs (all groups together)
VERIFY_DISKS_TIMEOUT = 300.0
_INSTANCE_FIELDS = ["name", "status", "admin_state", "pnode", "pnode.group", "snodes",
                    "disk_template", "admin_state_source"]
_NODE_FIELDS = ["name", "group.uuid", "offline", "bootid"]


#: the watcher's LUXI client: the typed methods of :class:`ganeti.luxi.Client`
#: (tests pass ``test/fakes/fakeluxi.py``'s FakeLuxi, which is one)
LuxiClient = luxi.Client


@dataclass(frozen=True)
class MasterOptions:
    """The options of the master's pass."""

    job_age: float = 6 * 3600.0
    wait_jobs: bool = False
    wait_timeout: float = 600.0
    verify_disks: bool = True
    verify_timeout: float = VERIFY_DISKS_TIMEOUT


@dataclass
class GroupReport:
    """What the pass did to one group."""

    uuid: str
    name: str
    plan: core.Plan
    jobs: dict[str, int] = field(default_factory=dict)
    #: the group's verify-disks result (None: not run, or it failed)
    verify_result: list[Any] | None = None


@dataclass
class MasterReport:
    """What the master's pass did."""

    groups: list[GroupReport] = field(default_factory=list)
    archived: int = 0
    failed_jobs: list[int] = field(default_factory=list)


# --- the master's daemons -----------------------------------------------------------------

def ensure_daemon(what: str, probe: Callable[[], str | None], *,
                  pid_of: Callable[[], int | None], stop: Callable[[], object],
                  start: Callable[[], None]) -> str | None:
    """Make sure a daemon answers ``probe``; what was done, or None when it answered.

    ``probe`` returns None when the daemon answers, else what is wrong.  A
    daemon that does not answer is restarted once: a running (hung) process,
    ``pid_of`` tells which, is stopped first, then a new one is started and
    probed again.  Raises :class:`errors.OpExecError` when it still does
    not answer (no second restart in the same pass).
    """
    problem = probe()
    if problem is None:
        return None
    pid = pid_of()
    if pid is not None:
        logger.warning("The %s (pid %s) does not answer (%s); killing it", what, pid, problem)
        stop()
        done = f"restarted the hung {what} (old pid {pid})"
    else:
        logger.warning("The %s is not running (%s); starting it", what, problem)
        done = f"started the {what}"
    start()
    problem = probe()
    if problem is not None:
        raise errors.OpExecError(f"The {what} does not answer after a restart: {problem}")
    logger.info("The %s is back (pid %s)", what, pid_of())
    return done


def ensure_masterd(paths: Paths, client_factory: Callable[[float], LuxiClient], *,
                   restart: Callable[[], None] | None = None,
                   timeout: float = MASTERD_TIMEOUT) -> str | None:
    """Make sure masterd runs and answers ``QueryClusterInfo``; what was done, or None.

    A dead master daemon is started; a hung one (running, not answering
    within ``timeout``, default :data:`MASTERD_TIMEOUT`) is stopped first
    (SIGTERM, then SIGKILL).  Raises :class:`errors.OpExecError` when it
    cannot be brought back.
    """
    from ganeti import daemonctl

    def probe() -> str | None:
        try:
            client_factory(timeout).QueryClusterInfo()
        except errors.GanetiError as exc:
            return str(exc)
        return None

    def start() -> None:
        extra = shlex.split(os.environ.get("GANETI_MASTERD_ARGS", ""))
        daemonctl.start_masterd(paths, env=os.environ, extra_args=extra)

    return ensure_daemon(
        "master daemon", probe, pid_of=lambda: daemonctl.daemon_pid(paths, constants.MASTERD),
        stop=lambda: daemonctl.stop_daemon(paths, constants.MASTERD, timeout=10.0),
        start=restart or start)


#: the largest answer to ``GET /version`` the watcher reads (the daemon sends a few bytes)
_MAX_VERSION_BODY = 64 * 1024


def rapi_answers(address: str, port: int, cert_file: str, *,
                 timeout: float = RAPI_TIMEOUT) -> str | None:
    """None when the RAPI daemon at ``address:port`` answers ``GET /version``; else why not.

    HTTPS, with the server certificate checked against ``cert_file`` (the
    cluster's ``rapi.pem``; the host name is not checked, the daemon is
    asked by address); ``timeout`` bounds each step (connect, handshake,
    answer).
    """
    from ganeti.http import client, tls

    from ganeti import serializer
    try:
        ctx = tls.rapi_client_context(cert_file)
    except errors.CertificateError as exc:
        return f"cannot load the RAPI certificate {cert_file}: {exc.__cause__ or exc}"
    try:
        resp = client.request(address, port, ctx, "GET", "/version", timeout=timeout,
                              max_body_size=_MAX_VERSION_BODY)
    except (OSError, errors.HttpError) as exc:   # ssl.SSLError is an OSError
        return f"GET https://{address}:{port}/version failed: {exc}"
    if resp.status != 200:
        return f"GET /version answered {resp.status} {resp.reason}"
    try:
        version = serializer.loads(resp.body)
    except errors.GanetiError as exc:
        return f"GET /version answered no JSON: {exc}"
    if not isinstance(version, int) or isinstance(version, bool):
        return f"GET /version answered {version!r}, not a version number"
    return None


def ensure_rapi(paths: Paths, address: str, port: int, *,
                probe: Callable[[], str | None] | None = None,
                restart: Callable[[], None] | None = None) -> str | None:
    """Make sure ganeti-rapi runs and answers ``GET /version`` at ``address:port``.

    As :func:`ensure_masterd`: a dead daemon is started, a hung one (not
    answering within :data:`RAPI_TIMEOUT`) is stopped first, at most once;
    :class:`errors.OpExecError` when it cannot be brought back.  The new
    daemon is started as ``gnt-cluster init`` starts it
    (:func:`ganeti.daemonctl.start_rapi`).
    """
    from ganeti import daemonctl
    return ensure_daemon(
        "RAPI daemon", probe or (lambda: rapi_answers(address, port, paths.rapi_pem)),
        pid_of=lambda: daemonctl.daemon_pid(paths, constants.RAPI),
        stop=lambda: daemonctl.stop_daemon(paths, constants.RAPI, timeout=10.0),
        start=restart or (lambda: daemonctl.start_rapi(paths, env=os.environ)))


# --- reading the cluster ------------------------------------------------------------------

def _rows(result: Any) -> list[list[Any]]:
    """The values of a ``Query`` result (None where the cell has no data)."""
    return [[cell[1] if cell[0] == constants.RS_NORMAL else None for cell in row]
            for row in result["data"]]


def collect(cl: LuxiClient) -> tuple[dict[str, str], dict[str, list[core.NodeView]],
                                     dict[str, list[core.InstanceView]]]:
    """``(group uuid -> name, nodes by group uuid, instances by group uuid)``."""
    groups = {uuid: name for uuid, name in
              _rows(cl.Query(constants.QR_GROUP, ["uuid", "name"], None))}
    locked = set()
    for name, owner, pending in _rows(cl.Query(constants.QR_LOCK,
                                                       ["name", "owner", "pending"], None)):
        if isinstance(name, str) and name.startswith("instance/") and (owner or pending):
            locked.add(name.partition("/")[2])
    nodes: dict[str, list[core.NodeView]] = {uuid: [] for uuid in groups}
    for name, group, offline, bootid in _rows(cl.Query(constants.QR_NODE,
                                                               _NODE_FIELDS, None)):
        nodes.setdefault(group, []).append(core.NodeView(
            name=name, offline=bool(offline), bootid=bootid if isinstance(bootid, str) and bootid
            else None))
    instances: dict[str, list[core.InstanceView]] = {uuid: [] for uuid in groups}
    for name, status, admin, pnode, group, snodes, template, source in _rows(
            cl.Query(constants.QR_INSTANCE, _INSTANCE_FIELDS, None)):
        instances.setdefault(group, []).append(core.InstanceView(
            name=name, status=status or "", admin_up=admin == constants.ADMINST_UP,
            pnode=pnode or "", snodes=tuple(snodes or ()),
            has_disks=template != constants.DT_DISKLESS, locked=name in locked,
            admin_source=source or constants.ADMIN_SOURCE))
    return groups, nodes, instances


# --- jobs -------------------------------------------------------------------------------------

#: the name the configuration push of a pass has among its jobs (``GroupReport.jobs``)
REDIST_JOB = "(configuration)"


def _reason(text: str, clock: Callable[[], float]) -> list[list[Any]]:
    return [[core.REASON_SOURCE, text, int(clock() * 1e9)]]


def _jobs_for(plan: core.Plan, clock: Callable[[], float],
              sources: dict[str, str]) -> list[tuple[str, opcodes.OpCode]]:
    """The jobs of ``plan``; ``sources``: the admin state source each instance had."""
    ops: list[tuple[str, opcodes.OpCode]] = []
    # the restart and clean-up jobs re-check under the instance's lock what
    # the plan saw (admin state up, set by the same source): a start or stop
    # by an operator since collect() makes them refuse instead of undoing it
    for name in plan.restart:
        ops.append((name, op_instance.OpInstanceStartup(
            instance_name=name, expected_admin_state=constants.ADMINST_UP,
            expected_admin_state_source=sources.get(name, constants.ADMIN_SOURCE),
            reason=_reason("Restarting ERROR_down instance", clock))))
    for name in plan.cleanup:
        ops.append((name, op_instance.OpInstanceShutdown(
            instance_name=name, admin_state_source=constants.USER_SOURCE,
            expected_admin_state=constants.ADMINST_UP,
            expected_admin_state_source=sources.get(name, constants.ADMIN_SOURCE),
            reason=_reason("Cleaning up USER_down instance", clock))))
    # wait_for_sync: a mirror's resync after a node came back is followed by the job
    # that started it (its progress and runtime block job; doc/storage.md)
    for name in plan.activate_disks:
        ops.append((name, op_instance.OpInstanceActivateDisks(
            instance_name=name, wait_for_sync=True,
            reason=_reason("Re-activating disks after a node reboot", clock))))
    for name in plan.inactive_disks:
        ops.append((name, op_instance.OpInstanceActivateDisks(
            instance_name=name, wait_for_sync=True,
            reason=_reason("Activating disks verify-disks found inactive", clock))))
    return ops


def _log_plan(report: GroupReport, new_state: core.GroupState) -> None:
    plan = report.plan
    for name in plan.restart + plan.cleanup:
        what = "Restarting" if name in plan.restart else "Cleaning up (shutdown) USER_down"
        logger.info("%s instance %s (attempt %d of %d)", what, name,
                    new_state.attempts[name].count, core.MAX_ATTEMPTS)
    for node in plan.rebooted_nodes:
        logger.info("Node %s rebooted (new boot id)", node)
    for name, why in plan.skipped:
        logger.info("Skipping instance %s: %s", name, why)
    for name in plan.give_up:
        logger.warning("Instance %s could not be restarted after %d attempts; giving up",
                       name, core.MAX_ATTEMPTS)


def _admin_state_refusal(opresult: Any) -> str | None:
    """The message when a job's result is its start/stop refused because the
    instance's admin state changed (``expected_admin_state``), else None."""
    for result in opresult if isinstance(opresult, list) else []:
        if (isinstance(result, list) and len(result) == 2
                and result[0] == "OpPrereqError" and isinstance(result[1], list)
                and result[1] and isinstance(result[1][0], str)
                and constants.ADMIN_STATE_CHANGED in result[1][0]):
            return result[1][0]
    return None


def _wait_for_jobs(cl: LuxiClient, ids: list[int], timeout: float,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep,
                   names: dict[int, str] | None = None) -> list[int]:
    """Wait until the jobs ``ids`` finish (at most ``timeout``); the failed ones.

    A job refused because its instance's admin state changed since the
    pass decided (an operator started or stopped it) is logged as a skip,
    not as a failure; ``names`` maps job ids to instance names for that.
    """
    deadline = clock() + timeout
    pending = list(ids)
    failed: list[int] = []
    while pending:
        rows = cl.QueryJobs(pending, ["id", "status", "opresult"])
        still = []
        for job_id, row in zip(pending, rows):
            status = row[1] if row else None
            if status in constants.JOBS_FINALIZED:
                refusal = _admin_state_refusal(row[2]) if len(row) > 2 else None
                if status != constants.JOB_STATUS_SUCCESS and refusal is not None:
                    logger.info("Skipping instance %s (job %s): %s",
                                (names or {}).get(job_id, "?"), job_id, refusal)
                elif status != constants.JOB_STATUS_SUCCESS:
                    failed.append(job_id)
                    logger.warning("Watcher job %s ended with status %s", job_id, status)
                else:
                    logger.info("Watcher job %s succeeded", job_id)
            elif row is None:
                failed.append(job_id)
            else:
                still.append(job_id)
        pending = still
        if pending:
            if clock() >= deadline:
                logger.warning("Stopped waiting for watcher jobs %s after %ss",
                               ", ".join(map(str, pending)), timeout)
                break
            sleep(0.1)
    return failed


def _wait_job(cl: LuxiClient, job_id: int, deadline: float,
              monotonic: Callable[[], float]) -> str | None:
    """Follow job ``job_id`` (``WaitForJobChange``) until it ends; its status.

    The job's log lines go to the watcher log.  None when ``deadline``
    (of ``monotonic``) passed first or the job is unknown.
    """
    prev_info: Any = None
    serial = -1
    while True:
        left = deadline - monotonic()
        if left <= 0:
            return None
        wait = min(left, 10.0)
        answer = cl.WaitForJobChangeOnce(job_id, ["status"], prev_info, serial, wait,
                                         read_timeout=wait + 10.0)
        if answer is None:
            return None
        if answer == "nochange":
            continue
        info, entries = answer
        for entry in entries or []:
            serial = max(serial, int(entry[0]))
            logger.info("Job %s: %s", job_id, entry[3])
        status = info[0] if info else None
        if status in constants.JOBS_FINALIZED:
            return str(status)
        prev_info = info


def verify_disks(cl: LuxiClient, groups: list[GroupReport], opts: MasterOptions, *,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
    """Run one ``OP_GROUP_VERIFY_DISKS`` job per group; store each result in its report.

    The jobs are submitted at once and waited for (``opts.verify_timeout``
    in all); a successful one is archived, a failed or late one is logged
    and left in the queue.
    """
    ops = [op_group.OpGroupVerifyDisks(group_name=g.uuid, priority=constants.OP_PRIO_LOW,
                                       reason=_reason("Verifying disks", clock))
           for g in groups]
    results = cl.SubmitManyJobs([[op] for op in ops])
    deadline = monotonic() + opts.verify_timeout
    for group, (ok, job) in zip(groups, results):
        if not ok:
            logger.error("Cannot submit verify-disks for group %s: %s", group.name, job)
            continue
        status = _wait_job(cl, int(job), deadline, monotonic)
        if status is None:
            logger.warning("Verify-disks job %s of group %s did not finish in time; not"
                           " waiting for it", job, group.name)
            continue
        ((status, opresult),) = cl.QueryJobs([int(job)], ["status", "opresult"])
        if status != constants.JOB_STATUS_SUCCESS or not opresult:
            logger.warning("Verify-disks job %s of group %s ended with status %s: %s", job,
                           group.name, status, opresult)
            continue
        group.verify_result = opresult[0]
        cl.ArchiveJob(int(job))
        bad_nodes, inactive, missing = group.verify_result
        for node, msg in sorted(bad_nodes.items()):
            logger.warning("Verify-disks could not check node %s: %s", node, msg)
        for name, disks in sorted(missing.items()):
            logger.warning("Instance %s has missing disks: %s", name,
                           ", ".join(f"{node} disk/{idx}" for node, idx in disks))
        if not inactive:
            logger.debug("Verify-disks of group %s found no inactive disks", group.name)


def master_pass(cl: LuxiClient, paths: Paths, opts: MasterOptions, *,
                clock: Callable[[], float] = time.time) -> MasterReport:
    """One pass over every node group (see the module docstring)."""
    report = MasterReport()
    groups, nodes, instances = collect(cl)
    now = clock()
    statuses = []
    for uuid in sorted(groups, key=lambda u: groups[u]):
        path = paths.watcher_state_file(uuid)
        plan, new_state = core.plan_group(state.load_state(path), instances.get(uuid, []),
                                          nodes.get(uuid, []), now)
        group = GroupReport(uuid=uuid, name=groups[uuid], plan=plan)
        report.groups.append(group)
        _log_plan(group, new_state)
        # attempts count when decided, so a crash between here and the submission
        # cannot make the watcher retry without limit
        try:
            state.save_state(path, new_state)
        except (OSError, errors.GanetiError) as exc:
            logger.error("Cannot save the watcher state of group %s to %s: %s", groups[uuid],
                         path, exc)
        statuses += [(i.name, i.status) for i in instances.get(uuid, [])]
    if opts.verify_disks and report.groups:
        verify_disks(cl, report.groups, opts, clock=clock)
        for group in report.groups:
            if group.verify_result is not None:
                _bad, inactive, missing = group.verify_result
                known = len(group.plan.skipped)
                core.plan_inactive_disks(group.plan, instances.get(group.uuid, []),
                                         nodes.get(group.uuid, []), inactive, missing)
                for name in group.plan.inactive_disks:
                    logger.info("Activating the disks of instance %s (verify-disks found"
                                " them inactive)", name)
                for name, why in group.plan.skipped[known:]:
                    logger.info("Skipping instance %s: %s", name, why)
    sources = {inst.name: inst.admin_source for insts in instances.values() for inst in insts}
    submissions = [(group, name, op) for group in report.groups
                   for name, op in _jobs_for(group.plan, clock, sources)]
    rebooted = [group for group in report.groups if group.plan.rebooted_nodes]
    if rebooted:
        # a node that was down missed the configuration written meanwhile (if the
        # state file cannot be saved, every pass sees the reboot again and pushes
        # again: harmless, and the error above is logged each time)
        submissions.insert(0, (rebooted[0], REDIST_JOB, op_cluster.OpClusterRedistConf(
            reason=_reason("Pushing the configuration to rebooted nodes", clock))))
    if submissions:
        results = cl.SubmitManyJobs([[op] for _g, _n, op in submissions])
        for (group, name, op), (ok, job) in zip(submissions, results):
            if ok:
                group.jobs[name] = int(job)
                logger.info("Submitted job %s: %s %s", job, op.OP_ID, name)
            else:
                logger.error("Cannot submit %s for %s: %s", op.OP_ID, name, job)
    state.write_instance_status(paths.watcher_instance_status_file, statuses)
    archived, _left = cl.AutoArchiveJobs(opts.job_age, 30.0, read_timeout=60.0)
    report.archived = int(archived)
    if archived:
        logger.info("Archived %s finished job(s) older than %ss", archived, opts.job_age)
    if opts.wait_jobs:
        names = {job: name for group in report.groups for name, job in group.jobs.items()}
        if names:
            report.failed_jobs = _wait_for_jobs(cl, list(names), opts.wait_timeout,
                                                names=names)
    return report
