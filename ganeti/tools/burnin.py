"""Burnin: drive every instance operation over LUXI, as operators do (doc/burnin.md).

``tools/burnin -o OS [options] instance...`` creates the instances spread
over the nodes (primaries rotating), then runs the steps of :data:`STEPS`
in upstream's order, each one either run or skipped with a one-line
reason, and finally removes the instances (unless ``-K``).  Every
operation is a job submitted through :class:`ganeti.luxi.Client`, exactly
as ``gnt-instance`` submits it; burnin never reaches into the master.

Output, as upstream: ``- <step>`` per step, ``  * instance <name>`` per
instance, indented detail lines, and at the end a table of every step with
its wall time.  With ``-p`` the per-instance jobs of a step are submitted
together (``SubmitManyJobs``) and waited for together.  On the first failed
job burnin prints the job's error and the log buffer of the failed step,
removes what it created (unless ``-K``) and exits with 1.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, errors
from ganeti.cli.failure import format_job_error
from ganeti.opcodes import wire
from ganeti.tools.burnin_jobs import BurninFailure, Job, JobRunner, Out, StepResult, log_line
from ganeti.tools.burnin_opts import BurninOptions, parse_args
from ganeti.tools.burnin_steps import STEPS, Step

__all__ = ["Burner", "BurninFailure", "Job", "JobRunner", "StepResult", "main", "log_line",
           "format_timings"]

#: Hypervisors that cannot migrate a running instance.
_NO_MIGRATION = frozenset([constants.HT_CHROOT, constants.HT_LXC])


@dataclass
class ClusterState:
    """What burnin reads from the master before it starts."""

    nodes: list[str]
    hypervisor: str
    default_nic_mode: str
    enabled_templates: list[str] = field(default_factory=list)

    @property
    def hv_can_migrate(self) -> bool:
        """Whether the hypervisor can move a running instance."""
        return self.hypervisor not in _NO_MIGRATION


class Burner:
    """One burnin run: the cluster state, the runner, the instances made so far."""

    def __init__(self, opts: BurninOptions, client: Any, *, out: Out | None = None,
                 err: Out | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.opts = opts
        self.client = client
        self.out = out or _print
        self.err = err or _print_err
        self.clock = clock
        self.sleep = sleep
        self.runner = JobRunner(client, opts, self.out)
        self.instances = list(opts.instances)
        #: instances created by this run (and not removed since), for the cleanup
        self.to_remove: list[str] = []
        self.results: list[StepResult] = []
        self.state: ClusterState | None = None

    # --- output --------------------------------------------------------------
    def log(self, msg: str, indent: int = 0) -> None:
        """Print one line at ``indent`` (0 step, 1 instance, 2 detail)."""
        self.out(log_line(msg, indent))

    # --- set-up --------------------------------------------------------------
    def read_state(self) -> ClusterState:
        """Nodes (online, not drained), the OS check and the cluster parameters."""
        opts = self.opts
        try:
            rows = self.client.QueryNodes(opts.nodes, ["name", "offline", "drained"], False)
        except errors.GanetiError as exc:
            raise errors.OpPrereqError(format_job_error(exc), errors.ECODE_NOENT) from exc
        nodes = [row[0] for row in rows if not (row[1] or row[2])]
        if not nodes:
            raise errors.OpPrereqError("No usable nodes (all offline or drained)",
                                       errors.ECODE_STATE)
        diagnose = wire.os_diagnose(output_fields=["name", "variants", "hidden"], names=[])
        (results,) = self.runner.run("setup", [Job("(cluster)", [diagnose])], parallel=False)
        oses = results[0] or []
        if not any(opts.os in _os_names(name, variants) for name, variants, _ in oses):
            raise errors.OpPrereqError(f"OS '{opts.os}' not found", errors.ECODE_NOENT)
        info = self.client.QueryClusterInfo()
        nicparams = (info.get("nicparams") or {}).get("default", {})
        state = ClusterState(nodes=nodes,
                             hypervisor=opts.hypervisor or info.get("default_hypervisor", ""),
                             default_nic_mode=nicparams.get("mode", constants.NIC_MODE_BRIDGED),
                             enabled_templates=list(info.get("enabled_disk_templates") or []))
        if opts.disk_template not in state.enabled_templates:
            raise errors.OpPrereqError(
                f"Disk template {opts.disk_template} is not enabled on this cluster (enabled:"
                f" {', '.join(state.enabled_templates) or 'none'})", errors.ECODE_STATE)
        self.state = state
        return state

    # --- the run -------------------------------------------------------------
    def run(self) -> int:
        """Run every step; returns the exit code (0, or 1 after the first failure)."""
        state = self.state or self.read_state()
        self.log("Testing global parameters")
        if len(state.nodes) == 1 and self.opts.disk_template in constants.DTS_INT_MIRROR:
            self.err(f"When one node is available/selected the disk template must not be"
                     f" {self.opts.disk_template}")
            return 1
        start = self.clock()
        failure: BurninFailure | None = None
        for step in STEPS:
            if step.name == "remove":
                continue
            try:
                self._run_step(step)
            except BurninFailure as exc:
                failure = exc
                break
        remove = next(s for s in STEPS if s.name == "remove")
        try:
            self._run_step(remove)
        except BurninFailure as exc:
            if failure is None:
                failure = exc
            else:
                self.log(f"Note: error detected during instance remove: {exc.message}")
        self.out("")
        self.out(format_timings(self.results, self.clock() - start))
        if failure is not None:
            self.err(f"burnin: {failure}")
            return 1
        return 0

    def _run_step(self, step: Step) -> None:
        reason = step.skip_reason(self)
        if reason:
            self.log(f"Skipping {step.title} ({reason})")
            self.results.append(StepResult(step.name, "skipped", reason=reason))
            return
        begin = self.clock()
        before = self.runner.submitted
        try:
            try:
                step.run(self)
            except BurninFailure:
                raise
            except errors.GanetiError as exc:      # a query of the step, not a job
                raise BurninFailure(step.name, "(cluster)", None,
                                    format_job_error(exc)) from exc
            except KeyboardInterrupt as exc:
                raise BurninFailure(step.name, "(all)", None, "interrupted") from exc
        except BurninFailure:
            self.results.append(StepResult(step.name, "failed", self.clock() - begin,
                                           jobs=self.runner.submitted - before))
            self.log("Error detected: opcode buffer follows:")
            for line in self.runner.buffer:
                self.out(line)
            raise
        self.results.append(StepResult(step.name, "done", self.clock() - begin,
                                       jobs=self.runner.submitted - before))

    def primaries(self) -> dict[str, str]:
        """``{instance: primary node}`` of the cluster's instances (one query)."""
        result = self.client.Query("instance", ["name", "pnode"], None)
        return {row[0][1]: row[1][1] for row in result.get("data", [])}

    def existing_instances(self) -> set[str]:
        """The names of the cluster's instances (one query)."""
        try:
            result = self.client.Query("instance", ["name"], None)
        except errors.GanetiError:
            return set(self.to_remove)      # try them all
        return {row[0][1] for row in result.get("data", [])}

    def check_alive(self, instance: str) -> None:
        """With ``-C``: the instance serves ``/hostname.txt`` with its own name."""
        if not self.opts.http_check:
            return
        import urllib.request  # only with -C: costs start-up time otherwise
        deadline = self.clock() + self.opts.net_timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://{instance}/hostname.txt",
                                            timeout=self.opts.net_timeout) as reply:
                    hostname = reply.read().decode("utf-8", "replace").strip()
                break
            except OSError as exc:
                if self.clock() >= deadline:
                    raise BurninFailure("http-check", instance, None,
                                        f"Cannot contact instance: {exc}") from exc
                self.sleep(1.0)
        if hostname != instance:
            raise BurninFailure("http-check", instance, None,
                                f"Hostname mismatch, expected {instance}, got {hostname}")


def _os_names(name: str, variants: list[str] | None) -> list[str]:
    """``tinyos`` plus ``tinyos+<variant>`` for each variant."""
    return [name] + [f"{name}+{v}" for v in variants or []]


def format_timings(results: Sequence[StepResult], total: float) -> str:
    """The closing table: every step, its status and wall time, and the total."""
    lines = [log_line("Step timings"), f"  {'step':<20} {'status':<8} {'jobs':>4} {'time':>9}"]
    for res in results:
        shown = f"{res.seconds:8.3f}s" if res.status != "skipped" else f"{'-':>9}"
        lines.append(f"  {res.name:<20} {res.status:<8} {res.jobs:>4} {shown}")
    lines.append(f"  {'total':<20} {'':<8} {sum(r.jobs for r in results):>4}"
                 f" {total:8.3f}s")
    return "\n".join(lines)


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _print_err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None, client: Any = None) -> int:
    """``tools/burnin``: exit 0 when every step passed, 1 on a failure, 2 on bad usage."""
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except errors.OpPrereqError as exc:
        _print_err(str(exc.args[0]) if exc.args else str(exc))
        return 2
    try:
        if client is None:
            from ganeti import luxi
            client = luxi.Client()
        burner = Burner(opts, client)
        burner.read_state()
        return burner.run()
    except BurninFailure as exc:
        _print_err(f"burnin: {exc}")
        return 1
    except errors.GanetiError as exc:
        _print_err(f"burnin: {format_job_error(exc)}")
        return 1
