"""The relocation verbs and what they share: ``-I``, ``--plan``, ``--apply``, generated jobs.

The verbs (``gnt-node evacuate``/``migrate``, ``gnt-instance
change-group``/``batch-create``, ``gnt-group evacuate``) are rows of
:data:`NODE_ROWS`, :data:`INSTANCE_ROWS` and :data:`GROUP_ROWS`, merged into
those tools' command tables.

``gnt-node evacuate``/``migrate``, ``gnt-instance change-group`` and
``gnt-group evacuate`` submit one opcode whose result is ``{"jobs":
[[true, id] | [false, error], ...], "failed": [[instance, reason], ...]}``
(doc/protocols/iallocator.md, "Jobs"): :func:`run_relocation` follows every
generated job and reports each failure, and the instances that could not
be placed.  ``--plan`` (text) or ``--plan=json`` prints the job graph
without submitting any move; ``--apply PLAN.json`` submits exactly that
plan (the master refuses it when the config changed since).
"""

from __future__ import annotations

from ganeti import cli, errors, serializer
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["IALLOCATOR_OPT", "PLAN_OPT", "APPLY_OPT", "EARLY_RELEASE_OPT", "RELOCATION_OPTS",
           "WITH_DISKS_OPT", "run_relocation", "follow_generated_jobs", "format_plan", "NODE_ROWS",
           "INSTANCE_ROWS", "GROUP_ROWS", "node_evacuate", "node_migrate", "change_group",
           "group_evacuate", "batch_create", "test_allocator", "DEBUG_ROWS"]

IALLOCATOR_OPT = cli.Option("-I", "--iallocator", dest="iallocator", default=None,
                            metavar="NAME", help="the iallocator to ask (default: the"
                            " cluster's default iallocator, else the built-in one)")
PLAN_OPT = cli.Option("--plan", dest="plan", nargs="?", const="text", default=None,
                      choices=["text", "json"], metavar="text|json",
                      help="print the jobs that would run (moves, dependencies, N+1 state"
                      " after each) without submitting them; --plan=json for --apply")
APPLY_OPT = cli.Option("--apply", dest="apply_plan", default=None, metavar="PLAN.json",
                       help="submit exactly the jobs of a plan saved from --plan=json"
                       " (refused if the cluster changed since)")
EARLY_RELEASE_OPT = cli.Option("--early-release", dest="early_release", action="store_true",
                               default=False, help="Remove the old volumes before the"
                               " copy and release the node locks while it runs (faster,"
                               " but no old copy is left if the copy fails)")
RELOCATION_OPTS = [IALLOCATOR_OPT, PLAN_OPT, APPLY_OPT, cli.SUBMIT_OPT]
WITH_DISKS_OPT = cli.Option("--with-disks", dest="with_disks", action="store_true",
                            default=False,
                            help="also move instances on local (file) disks, copying the"
                            " disks: live while they run (kvm), offline when stopped")


def _load_plan(path: str) -> dict[str, Any]:
    data = cli.read_json_file(path, "plan ")
    if isinstance(data, dict) and isinstance(data.get("plan"), dict):
        data = data["plan"]
    if not isinstance(data, dict) or not isinstance(data.get("opcode"), dict):
        raise errors.OpPrereqError(f"{path} is not a plan made with --plan=json",
                                   errors.ECODE_INVAL)
    return data


def format_plan(plan: dict[str, Any]) -> list[str]:
    """The plan as text: one block per job (opcodes, dependencies, moves, N+1)."""
    lines = [f"Plan made at config serial {plan.get('serial')}:"
             f" {len(plan.get('steps') or [])} job(s)"]
    for step in plan.get("steps") or []:
        deps = ", ".join(f"job {d}" for d in step.get("depends_on") or []) or "none"
        lines.append(f"Job {step['job']} (after: {deps})")
        for move in step.get("moves") or []:
            lines.append(f"  {move['opcode']} {move['instance']}:"
                         f" {','.join(move['from'])} -> {','.join(move['to'])}")
        n1 = step.get("n1_after") or {}
        state = "ok" if step.get("n1_ok_after", True) else "FAILING"
        nodes = ", ".join(f"{n} {'ok' if s['n1_ok'] else 'FAIL'} ({s['free_memory']} MiB free)"
                          for n, s in sorted(n1.items()))
        lines.append(f"  N+1 after: {state}" + (f"; {nodes}" if nodes else ""))
    for name, reason in plan.get("failed") or []:
        lines.append(f"Cannot move {name}: {reason}")
    return lines


def follow_generated_jobs(result: Any, opts: Any, cl: Any) -> int:
    """Follow the jobs of a ``{"jobs": ...}`` result; report failures; exit code."""
    failures = 0
    for name, reason in (result or {}).get("failed") or []:
        cli.to_stderr(f"Instance {name} cannot be moved: {reason or 'no reason given'}")
        failures += 1
    ids = []
    for ok, value in (result or {}).get("jobs") or []:
        if ok:
            ids.append(int(value))
        else:
            cli.to_stderr(f"Submitting a job failed: {value}")
            failures += 1
    if getattr(opts, "submit_only", False):
        for job_id in ids:
            cli.to_stderr(f"JobID: {job_id}")
        return 1 if failures else 0
    if ids:
        cli.to_stdout(f"Submitted job(s): {', '.join(str(i) for i in ids)}")
    for job_id in ids:
        try:
            cli.poll_job(job_id, cl)
        except errors.GanetiError as exc:
            cli.to_stderr(f"Job {job_id} failed: {cli.format_job_error(exc)}")
            failures += 1
    if ids:
        cli.to_stdout(f"{len(ids)} job(s) followed, {failures} failure(s)")
    return 1 if failures else 0


def run_relocation(opts: Any, op: dict[str, Any], *, check_target: str | None = None) -> int:
    """Plan, apply or run relocation opcode ``op``; returns the exit code.

    With ``--apply`` the plan's own opcode is submitted (with the plan); it
    must be the same kind of opcode and, when ``check_target`` names a
    field (``node_name``...), for the same target.
    """
    cl = cli.get_client(opts)
    if getattr(opts, "plan", None) and getattr(opts, "apply_plan", None):
        return cli.usage_error(opts.command, "Give either --plan or --apply, not both")
    if getattr(opts, "plan", None):
        op = {**op, "plan_only": True}
        result = cli.submit_opcode_and_wait(op, opts, cl, feedback_fn=None)
        plan = result["plan"]
        if opts.plan == "json":
            cli.to_stdout(serializer.dumps(plan, pretty=True))
        else:
            for line in format_plan(plan):
                cli.to_stdout(line)
        return 0
    if getattr(opts, "apply_plan", None):
        plan = _load_plan(opts.apply_plan)
        source = plan["opcode"]
        if source.get("OP_ID") != op["OP_ID"] or (
                check_target and source.get(check_target) != op.get(check_target)):
            raise errors.OpPrereqError(f"{opts.apply_plan} is a plan for {source.get('OP_ID')}"
                                       f" {source.get(check_target or 'OP_ID')}, not for this"
                                       " command", errors.ECODE_INVAL)
        op = {**source, "apply_plan": plan}
        op.pop("reason", None)
    result = cli.submit_or_send(op, opts, cl)
    if result is None:
        return 0
    return follow_generated_jobs(result, opts, cl)


# --- the verbs (rows merged into the gnt-node, gnt-instance and gnt-group tables) -------------

_EVAC_PRI_OPT = cli.Option("-p", "--primary-only", dest="primary_only", action="store_true",
                           default=False, help="evacuate only the primary instances")
_EVAC_SEC_OPT = cli.Option("-s", "--secondary-only", dest="secondary_only",
                           action="store_true", default=False,
                           help="evacuate only the secondary instances")
_EVAC_ALL_OPT = cli.Option("--all", dest="evac_all", action="store_true", default=False,
                           help="evacuate primary and secondary instances (the default)")
_REMOTE_OPT = cli.Option("-n", "--new-secondary", dest="remote_node", default=None,
                         metavar="NODE", help="move the instances to this node (no allocator)")
_TO_OPT = cli.Option("--to", dest="to", action="append", default=None, metavar="GROUP",
                     help="a target group (repeat for more; default: any other group)")
_MIG_TARGET_OPT = cli.Option("-n", "--target-node", dest="target_node", default=None,
                             metavar="NODE", help="migrate every instance to this node")
_NONLIVE_OPT = cli.Option("--non-live", dest="live", action="store_false", default=True,
                          help="non-live migration")
_MIG_MODE_OPT = cli.Option("--migration-mode", dest="migration_mode", default=None,
                           choices=["live", "non-live"], help="migration mode")
_FORCE_OPT = cli.FORCE_OPT


def node_evacuate(opts: Any, args: list[str]) -> int:
    """Move the instances off a node (``-p``, ``-s`` or ``--all``)."""
    chosen = [m for m, on in (("primary-only", opts.primary_only),
                              ("secondary-only", opts.secondary_only),
                              ("all", opts.evac_all)) if on]
    if len(chosen) > 1:
        return cli.usage_error(opts.command, "Give only one of -p, -s and --all")
    if opts.remote_node and opts.iallocator:
        return cli.usage_error(opts.command, "Give either -n or -I, not both")
    op = wire.node_evacuate(node_name=args[0], mode=chosen[0] if chosen else "all",
                            remote_node=opts.remote_node, iallocator=opts.iallocator,
                            early_release=opts.early_release)
    if opts.with_disks:
        op["with_disks"] = True
    if not (opts.plan or opts.apply_plan or opts.submit_only) and not cli.confirm(
            f"Relocate the instances of node {args[0]}?", forced=opts.force):
        return 1
    return run_relocation(opts, op, check_target="node_name")


def node_migrate(opts: Any, args: list[str]) -> int:
    """Migrate every primary instance off a node."""
    mode = opts.migration_mode or (None if opts.live else "non-live")
    op = wire.node_migrate(node_name=args[0], mode=mode, target_node=opts.target_node,
                           iallocator=opts.iallocator)
    if opts.with_disks:
        op["with_disks"] = True
    if not opts.submit_only and not cli.confirm(
            f"Migrate the primary instances of node {args[0]}?", forced=opts.force):
        return 1
    result = cli.submit_or_send(op, opts)
    if result is None:
        return 0
    return follow_generated_jobs(result, opts, cli.get_client(opts))


def change_group(opts: Any, args: list[str]) -> int:
    """Move an instance into another node group."""
    op = wire.instance_change_group(instance_name=args[0], target_groups=list(opts.to or []),
                                    iallocator=opts.iallocator, early_release=opts.early_release)
    return run_relocation(opts, op, check_target="instance_name")


def group_evacuate(opts: Any, args: list[str]) -> int:
    """Move every instance of a group into other groups."""
    op = wire.group_evacuate(group_name=args[0], target_groups=list(opts.to or []),
                             iallocator=opts.iallocator, early_release=opts.early_release)
    return run_relocation(opts, op, check_target="group_name")


def _batch_specs(path: str) -> list[dict[str, Any]]:
    data = cli.read_json_file(path)
    if isinstance(data, dict) and "instances" in data:
        data = data["instances"]
    if not isinstance(data, list) or not data or not all(isinstance(d, dict) for d in data):
        raise errors.OpPrereqError(f"{path} must hold a list of instance specifications (or"
                                   " {\"instances\": [...]})", errors.ECODE_INVAL)
    specs = []
    for spec in data:
        spec = {k: v for k, v in spec.items() if k != "OP_ID"}
        spec.setdefault("mode", "create")
        specs.append(spec)
    return specs


def batch_create(opts: Any, args: list[str]) -> int:
    """Create the instances of a JSON spec file, placed together by the allocator."""
    op = wire.instance_multi_alloc(instances=_batch_specs(args[0]), iallocator=opts.iallocator)
    result = cli.submit_or_send(op, opts)
    if result is None:
        return 0
    for name in result.get("failed") or []:
        cli.to_stderr(f"Instance {name} could not be placed")
    code = follow_generated_jobs({"jobs": result.get("jobs") or []}, opts, cli.get_client(opts))
    return 1 if result.get("failed") else code


_NODE_ARG: list[cli.Arg] = [cli.ArgNode(min=1, max=1)]
_ONE: list[cli.Arg] = [cli.ArgUnknown(min=1, max=1, name="NAME")]

NODE_ROWS: dict[str, cli.Command] = {
    "evacuate": (node_evacuate, _NODE_ARG,
                 [_EVAC_PRI_OPT, _EVAC_SEC_OPT, _EVAC_ALL_OPT, _REMOTE_OPT, EARLY_RELEASE_OPT,
                  WITH_DISKS_OPT, _FORCE_OPT, *RELOCATION_OPTS],
                 "[-p|-s|--all] [-I NAME | -n NODE] [--early-release] [--with-disks]"
                 " [--plan[=json] | --apply PLAN.json] NODE",
                 "Move the instances off a node (one job each, dependencies between them)"),
    "migrate": (node_migrate, _NODE_ARG,
                [_NONLIVE_OPT, _MIG_MODE_OPT, _MIG_TARGET_OPT, IALLOCATOR_OPT, WITH_DISKS_OPT,
                 _FORCE_OPT, cli.SUBMIT_OPT],
                "[--non-live] [-n NODE | -I NAME] [--with-disks] NODE",
                "Migrate every primary instance off a node"),
}
INSTANCE_ROWS: dict[str, cli.Command] = {
    "change-group": (change_group, _ONE, [_TO_OPT, EARLY_RELEASE_OPT, *RELOCATION_OPTS],
                     "[--to GROUP...] [-I NAME] [--plan[=json] | --apply PLAN.json] INSTANCE",
                     "Move an instance into another node group"),
    "batch-create": (batch_create, [cli.ArgFile(min=1, max=1)],
                     [IALLOCATOR_OPT, cli.SUBMIT_OPT], "[-I NAME] SPEC.json",
                     "Create the instances of a JSON file (a list of OP_INSTANCE_CREATE"
                     " parameters) placed together by the allocator"),
}
GROUP_ROWS: dict[str, cli.Command] = {
    "evacuate": (group_evacuate, _ONE, [_TO_OPT, EARLY_RELEASE_OPT, *RELOCATION_OPTS],
                 "[--to GROUP...] [-I NAME] [--plan[=json] | --apply PLAN.json] GROUP",
                 "Move every instance of a node group into other groups"),
}


_DIR_OPT = cli.Option("--dir", dest="direction", default="in", choices=["in", "out"],
                      help="in: print the input document; out: run the allocator on it")
_MODE_OPT = cli.Option("--mode", dest="mode", default="allocate",
                       choices=["allocate", "multi-allocate", "relocate", "node-evacuate",
                                "change-group", "allocate-secondary"],
                       help="the request type (allocate-secondary: a secondary node for a"
                            " plain instance, as modify -t drbd -I asks)")
_MEM_OPT = cli.Option("--mem", dest="memory", type=int, default=128, metavar="MiB",
                      help="memory of the instance to allocate")
_VCPUS_OPT = cli.Option("--vcpus", dest="vcpus", type=int, default=1, help="its vCPUs")
_DISKS_OPT = cli.Option("--disks", dest="disks", default=None, metavar="SIZE,...",
                        help="its disk sizes in MiB")
_NICS_OPT = cli.Option("--nics", dest="nics", type=int, default=1, metavar="N",
                       help="its number of NICs")
_TEMPLATE_OPT = cli.Option("-t", "--disk-template", dest="disk_template", default="diskless",
                           help="its disk template")
_OSTYPE_OPT = cli.Option("-o", "--os-type", dest="os", default="", help="its OS")
_TAGS_OPT = cli.Option("--tags", dest="tags", default=None, metavar="TAG,...", help="its tags")
_EVAC_MODE_OPT = cli.Option("--evac-mode", dest="evac_mode", default="all",
                            choices=["primary-only", "secondary-only", "all"],
                            help="node-evacuate: which instances")
_GROUPS_OPT = cli.Option("--target-groups", dest="target_groups", default=None,
                         metavar="GROUP,...", help="change-group: the target groups")
_FROM_OPT = cli.Option("--relocate-from", dest="relocate_from", default=None,
                       metavar="NODE,...", help="relocate: the nodes to move away from")


def _csv(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v]


def test_allocator(opts: Any, args: list[str]) -> int:
    """OP_TEST_ALLOCATOR: print an input document (--dir=in) or the answer (--dir=out)."""
    try:
        disks = [{"size": int(s), "mode": "rw"} for s in _csv(opts.disks)]
    except ValueError:
        return cli.usage_error(opts.command, f"invalid --disks {opts.disks!r} (MiB,...)")
    op: dict[str, Any] = wire.test_allocator(
        direction=opts.direction, mode=opts.mode,
        name=args[0] if opts.mode in ("allocate", "relocate", "allocate-secondary") else "",
        memory=opts.memory,
        vcpus=opts.vcpus, disks=disks, nics=[{"mac": "auto", "ip": None} for _ in range(opts.nics)],
        os=opts.os, disk_template=opts.disk_template, tags=_csv(opts.tags),
        instances=list(args) if opts.mode in ("node-evacuate", "change-group") else [],
        evac_mode=opts.evac_mode, target_groups=_csv(opts.target_groups),
        relocate_from=_csv(opts.relocate_from), iallocator=opts.iallocator)
    if opts.mode == "multi-allocate":
        op["instances"] = [{"name": name, "disk_template": opts.disk_template,
                            "memory": opts.memory, "vcpus": opts.vcpus, "disks": disks,
                            "nics": op["nics"], "os": opts.os, "tags": op["tags"],
                            "spindle_use": 1, "hypervisor": "",
                            "disk_space_total": sum(d["size"] for d in disks),
                            "required_nodes": 2 if opts.disk_template == "drbd" else 1}
                           for name in args]
    result = cli.submit_opcode_and_wait(op, opts)
    cli.to_stdout(result)
    return 0


_MANY: list[cli.Arg] = [cli.ArgUnknown(min=1, name="NAME")]
DEBUG_ROWS: dict[str, cli.Command] = {
    "iallocator": (test_allocator, _MANY,
                   [_DIR_OPT, _MODE_OPT, _MEM_OPT, _VCPUS_OPT, _DISKS_OPT, _NICS_OPT,
                    _TEMPLATE_OPT, _OSTYPE_OPT, _TAGS_OPT, _EVAC_MODE_OPT, _GROUPS_OPT,
                    _FROM_OPT, IALLOCATOR_OPT],
                   "[--dir=in|out] [--mode=MODE] [options] NAME...",
                   "Print the iallocator input document for a request (--dir=in) or the"
                   " allocator's answer to it (--dir=out)"),
}
