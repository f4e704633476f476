"""Answer jobs as submittable jobs, plans and their N+1 state."""

from __future__ import annotations

import pytest
from fakes.allocdocs import cluster, instance, node

from ganeti import errors
from ganeti.iallocator import builtin, document, plan
from ganeti.iallocator.answer import Failure


def _evacuation():
    nodes = {"n1": node(free=20000), "n2": node(free=30000)}
    insts = {f"i{k}": instance(["n1"], memory=1000) for k in range(3)}
    doc = cluster(nodes, insts, request=document.node_evacuate_request(sorted(insts), "all"))
    return doc, builtin.allocate(doc)["result"]


def test_answer_jobs_keep_relative_dependencies():
    _, (_, _, jobs) = _evacuation()
    out = plan.answer_jobs(jobs, extra={"priority": 0})
    assert out[2][0]["depends"] == [[-1, []]] and out[0][0]["priority"] == 0
    assert out is not jobs and out[2][0] is not jobs[2][0]


def test_dependencies_before_the_first_job_are_refused():
    job = [{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "x", "depends": [[-1, []]]}]
    with pytest.raises(errors.OpPrereqError, match="before the first"):
        plan.answer_jobs([job])


def test_early_release_goes_on_disk_replacements():
    job = [{"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "x",
            "mode": "replace_new_secondary", "remote_node": "n2"}]
    assert plan.answer_jobs([job], early_release=True)[0][0]["early_release"] is True


def test_plan_lists_moves_dependencies_and_n1():
    doc, (_, _, jobs) = _evacuation()
    made = plan.make_plan(doc, plan.answer_jobs(jobs), [Failure("f", "file")], serial=7,
                          opcode={"OP_ID": "OP_NODE_EVACUATE", "node_name": "n1"})
    assert made["serial"] == 7 and made["failed"] == [["f", "file"]]
    steps = made["steps"]
    assert [s["depends_on"] for s in steps] == [[], [0], [1]]
    assert steps[0]["moves"][0]["from"] == ["n1"] and steps[0]["moves"][0]["to"] == ["n2"]
    assert steps[-1]["n1_after"]["n2"]["primaries"] == 3
    assert plan.check_plan(made, 7) == made["jobs"]


def test_stale_or_foreign_plans_are_refused():
    doc, (_, _, jobs) = _evacuation()
    made = plan.make_plan(doc, jobs, [], serial=7, opcode={"OP_ID": "OP_NODE_EVACUATE"})
    with pytest.raises(errors.OpPrereqError, match="serial 7") as exc:
        plan.check_plan(made, 8)
    assert exc.value.args[1] == errors.ECODE_STATE
    with pytest.raises(errors.OpPrereqError, match="Not a relocation plan"):
        plan.check_plan({"jobs": []}, 7)
