"""An evacuation answer as jobs to submit, and as a plan to show (doc/protocols/iallocator.md, "Plans").

:func:`answer_jobs` turns the ``jobs`` of a node-evacuate or change-group
answer into the job list given to the queue's many-jobs submission: each
job a list of opcode dicts, later ones depending on earlier ones through
relative ids (``[[-1, ["success"]]]``), checked to point inside the list.
:func:`make_plan` simulates those jobs on the input document and records,
for every job, its opcodes, its dependencies (as absolute job indexes), the
moves and the N+1 state after it; the plan also carries the config serial
it was made at, so that ``--apply`` can refuse it once the cluster changed.
"""

from __future__ import annotations

import copy
from typing import Any

from ganeti import errors
from ganeti.iallocator import answer as answer_mod
from ganeti.iallocator.model import ClusterModel, is_int_mirror
from ganeti.opcodes import wire

__all__ = ["answer_jobs", "make_plan", "check_plan", "PLAN_VERSION", "apply_opcode"]

PLAN_VERSION = 1


def _check_depends(depends: Any, index: int) -> list[list[Any]]:
    if depends is None:
        return []
    if not isinstance(depends, list):
        raise errors.OpPrereqError(f"job {index}: 'depends' must be a list", errors.ECODE_INVAL)
    result = []
    for dep in depends:
        if (not isinstance(dep, list) or len(dep) != 2 or not isinstance(dep[0], int)
                or isinstance(dep[0], bool) or not isinstance(dep[1], list)):
            raise errors.OpPrereqError(f"job {index}: invalid dependency {dep!r}",
                                       errors.ECODE_INVAL)
        if dep[0] < 0 and -dep[0] > index:
            raise errors.OpPrereqError(f"job {index}: relative dependency {dep[0]} points"
                                       " before the first job", errors.ECODE_INVAL)
        result.append([dep[0], list(dep[1])])
    return result


def answer_jobs(jobs: list[list[dict[str, Any]]], *, early_release: bool = False,
                extra: dict[str, Any] | None = None) -> list[list[dict[str, Any]]]:
    """Copies of ``jobs`` ready to submit: opcodes checked, dependencies checked.

    ``early_release`` is set on disk replacements; ``extra`` keys (e.g. a
    ``reason`` trail) are added to every opcode that lacks them.
    """
    result = []
    for index, job in enumerate(jobs):
        ops = []
        for op in job:
            if op.get("OP_ID") not in answer_mod.RELOCATION_OPCODES:
                raise errors.OpPrereqError(f"job {index}: opcode {op.get('OP_ID')!r} is not"
                                           " allowed in a relocation", errors.ECODE_INVAL)
            new = copy.deepcopy(op)
            if "depends" in new:
                new["depends"] = _check_depends(new["depends"], index)
            if new["OP_ID"] == wire.OP_INSTANCE_REPLACE_DISKS and early_release:
                new["early_release"] = True
            for key, value in (extra or {}).items():
                new.setdefault(key, copy.deepcopy(value))
            ops.append(new)
        result.append(ops)
    return result


def apply_opcode(model: ClusterModel, op: dict[str, Any]) -> tuple[str, list[str], list[str]]:
    """Change ``model`` as ``op`` would; returns ``(instance, old nodes, new nodes)``."""
    name = str(op.get("instance_name"))
    inst = model.instances.get(name)
    if inst is None:
        return name, [], []
    old = list(inst.nodes)
    new = list(old)
    if op["OP_ID"] in (wire.OP_INSTANCE_MIGRATE, wire.OP_INSTANCE_FAILOVER):
        if is_int_mirror(inst.disk_template) and len(old) > 1:
            new = [old[1], old[0]] + old[2:]
        elif op.get("target_node"):
            new = [str(op["target_node"])]
    elif op["OP_ID"] == wire.OP_INSTANCE_REPLACE_DISKS and op.get("remote_node") and len(old) > 1:
        new = [old[0], str(op["remote_node"])]
    if new != old and all(n in model.nodes for n in new):
        model.place(inst, new)
    return name, old, new


def make_plan(document: dict[str, Any], jobs: list[list[dict[str, Any]]],
              failed: list[answer_mod.Failure], *, serial: int,
              opcode: dict[str, Any]) -> dict[str, Any]:
    """The plan of ``jobs`` (as :func:`answer_jobs` gave them) on ``document``.

    ``opcode`` is the evacuation opcode that made the plan (submitted
    again, with the plan, by ``--apply``); ``serial`` the config serial.
    """
    model = ClusterModel(document)
    steps = []
    for index, job in enumerate(jobs):
        moves = []
        touched: set[str] = set()
        for op in job:
            name, old, new = apply_opcode(model, op)
            moves.append({"instance": name, "opcode": op["OP_ID"], "from": old, "to": new})
            touched.update(old + new)
        deps = [index + d[0] if d[0] < 0 else d[0]
                for op in job for d in op.get("depends") or []]
        state = model.n1_state()
        steps.append({"job": index, "opcodes": job, "depends_on": deps, "moves": moves,
                      "n1_after": {n: state[n] for n in sorted(touched) if n in state},
                      "n1_ok_after": all(s["n1_ok"] for s in state.values())})
    return {"version": PLAN_VERSION, "serial": serial, "opcode": opcode, "jobs": jobs,
            "steps": steps, "failed": [[f.instance, f.reason] for f in failed]}


def check_plan(plan: Any, serial: int) -> list[list[dict[str, Any]]]:
    """The jobs of ``plan`` if it is a plan made at config serial ``serial``.

    Raises :class:`errors.OpPrereqError`: ECODE_INVAL for something that is
    not a plan, ECODE_STATE for a plan made before the config changed.
    """
    if (not isinstance(plan, dict) or plan.get("version") != PLAN_VERSION
            or not isinstance(plan.get("jobs"), list) or not isinstance(plan.get("serial"), int)):
        raise errors.OpPrereqError("Not a relocation plan (made by --plan=json)",
                                   errors.ECODE_INVAL)
    if plan["serial"] != serial:
        raise errors.OpPrereqError(f"The plan was made at config serial {plan['serial']}, the"
                                   f" cluster is now at {serial}: make a new plan",
                                   errors.ECODE_STATE)
    for index, job in enumerate(plan["jobs"]):
        if not isinstance(job, list) or not job or not all(isinstance(op, dict) for op in job):
            raise errors.OpPrereqError(f"plan job {index} is not a list of opcodes",
                                       errors.ECODE_INVAL)
    return answer_jobs(plan["jobs"])
