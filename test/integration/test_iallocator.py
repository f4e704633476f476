"""The iallocator and relocations on a real 4-node virtual cluster with two groups.

node1 and node2 are in ``default``; node3 and node4 in ``other``, a
``last_resort`` group (used only when nothing else fits, or as an explicit
target).  One cluster for the module; the tests run in file order and build
on each other (doc/protocols/iallocator.md).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys

import pytest
from instance_helpers import NOCHECK, config_bytes, fail_unchanged, field, rows
from vcluster_harness import VirtualCluster

from ganeti import constants, luxi, serializer
from test.integration import host_helpers
from tools.harness import vcluster

#: upstream's hail, when installed (Debian: ganeti-htools-3.0)
HAIL = next((p for p in ("/usr/lib/ganeti/iallocators/hail",
                         "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators/hail")
             if os.path.exists(p)), None)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BURNIN = os.path.join(REPO, "tools", "burnin")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

N1, N2, N3, N4 = (f"node{i}.vcluster" for i in (1, 2, 3, 4))


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcia"), nodes=4, use_ssh=False) as cluster:
        cluster.ok("gnt-group", "add", "--alloc-policy", "last_resort", "other")
        cluster.ok("gnt-group", "assign-nodes", "other", N3, N4)
        # the virtual nodes have this machine's few CPUs: room for the tests' vCPUs
        cluster.ok("gnt-cluster", "modify", "--ipolicy-vcpu-ratio", "32")
        yield cluster


def _add(vc, name: str, *extra: str, template: str = "diskless", mem: int = 128) -> str:
    return vc.ok("gnt-instance", "add", "-t", template, "-o", "tinyos", *NOCHECK,
                 "-B", f"maxmem={mem},minmem={mem}",
                 *(["-s", "1G"] if template != "diskless" else []), *extra, name)


def _pnode(vc, name: str) -> str:
    return field(vc, name, "pnode")


def _on(vc, node: str) -> list[str]:
    return sorted(r[0] for r in rows(vc, "name", filt=f'pnode == "{node}"'))


def _client(vc) -> luxi.Client:
    return luxi.Client(vc.paths(N1).master_socket)


def _ts(value) -> float:
    return value[0] + value[1] / 1e6 if isinstance(value, (list, tuple)) else float(value)


def _submitted(out: str) -> list[int]:
    found = re.search(r"Submitted job\(s\): ([\d, ]+)", out)
    return [int(x) for x in found.group(1).split(",")] if found else []


def _script(vc, name: str, body: str) -> str:
    directory = vc.paths(N1).iallocator_search_path[-1]      # <root>/etc/ganeti/iallocators
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def test_create_without_node_lands_on_the_best_node(vc):
    _add(vc, "big", "-n", N1, mem=8192)
    out = _add(vc, "small1")
    # node2 has the most free memory of the preferred group; 'other' is last_resort
    assert _pnode(vc, "small1") == N2
    assert "via iallocator" in out


def test_node_evacuation_moves_running_instances_with_dependencies(vc):
    _add(vc, "sf1", "-n", N1, template="sharedfile")
    _add(vc, "dl1", "-n", N1)
    _add(vc, "dl2", "-n", N1, "--no-start")
    res = vc.run("gnt-node", "evacuate", "-f", N1)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert _on(vc, N1) == [] and _on(vc, N2) == ["big", "dl1", "dl2", "sf1", "small1"]
    assert rows(vc, "name,status", "sf1", "dl1", "dl2") == [     # in the order given
        ["sf1", "running"], ["dl1", "running"], ["dl2", "ADMIN_down"]]
    ids = _submitted(out)
    assert len(ids) == 4
    jobs = _client(vc).QueryJobs(ids, ["id", "status", "ops", "opexec", "end_ts"])
    by_id = {j[0]: j for j in jobs}
    assert all(j[1] == constants.JOB_STATUS_SUCCESS for j in jobs)
    ops = {j[2][0]["instance_name"]: j[2][0]["OP_ID"] for j in jobs}
    assert ops == {"big": "OP_INSTANCE_MIGRATE", "sf1": "OP_INSTANCE_MIGRATE",
                   "dl1": "OP_INSTANCE_MIGRATE", "dl2": "OP_INSTANCE_FAILOVER"}
    chained = 0
    for job in jobs:
        for dep_id, _statuses in job[2][0].get("depends") or []:
            assert dep_id in by_id               # resolved to the earlier job's id
            # its opcode waited (job status "waiting") and ran only once the other ended
            assert _ts(job[3][0]) >= _ts(by_id[dep_id][4])
            chained += 1
    assert chained == 3                          # all onto node2: one after the other


def test_unplaceable_instance_is_reported_others_move(vc):
    _add(vc, "huge", "-n", N1, mem=24000)        # node2 has less free memory than that
    _add(vc, "fileinst", "-n", N1, template="file")
    _add(vc, "ok1", "-n", N1)
    res = vc.run("gnt-node", "evacuate", "-f", N1)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert re.search(r"huge cannot be moved: .*FailMem", out), out
    assert re.search(r"fileinst cannot be moved: .*gnt-instance move", out), out
    assert _pnode(vc, "ok1") == N2
    assert _on(vc, N1) == ["fileinst", "huge"]
    vc.ok("gnt-instance", "remove", "-f", "huge")


def test_change_group_moves_into_the_other_group(vc):
    vc.ok("gnt-instance", "change-group", "--to", "other", "ok1")
    assert _pnode(vc, "ok1") in (N3, N4)
    assert field(vc, "ok1", "status") == "running"
    out = vc.ok("gnt-group", "evacuate", "--plan", "other")
    assert "OP_INSTANCE_MIGRATE ok1:" in out and "-> node" in out


def test_plan_submits_nothing_and_apply_submits_exactly_the_plan(vc, tmp_path):
    cl = _client(vc)
    before_jobs = {j[0] for j in cl.QueryJobs(None, ["id"])}
    before_cfg = config_bytes(vc)
    out = vc.ok("gnt-node", "evacuate", "--plan=json", N2)
    plan = json.loads(out)
    new_jobs = {j[0] for j in cl.QueryJobs(None, ["id"])} - before_jobs
    assert len(new_jobs) == 1                    # the planning job only, no move
    assert config_bytes(vc) == before_cfg and _on(vc, N1) == ["fileinst"]
    planned = {job[0]["instance_name"]: job[0].get("target_node") for job in plan["jobs"]}
    assert planned == {n: N1 for n in ("big", "dl1", "dl2", "sf1", "small1")}
    text = vc.ok("gnt-node", "evacuate", "--plan", N2)
    assert "N+1 after" in text and "Job 4 (after: job 3)" in text
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(out)
    res = vc.run("gnt-node", "evacuate", "-f", "--apply", str(plan_file), N2)
    assert res.returncode == 0, res.stdout + res.stderr
    ids = _submitted(res.stdout)
    submitted = [j[0] for j in cl.QueryJobs(ids, ["ops"])]
    assert [_moves(job) for job in submitted] == [_moves(job) for job in plan["jobs"]]
    assert _on(vc, N2) == [] and _on(vc, N1) == ["big", "dl1", "dl2", "fileinst", "sf1",
                                                 "small1"]


def _moves(job: list[dict]) -> list[tuple[str, str, str | None]]:
    """What a job's opcodes do (a submitted opcode has every field filled in)."""
    return [(op["OP_ID"], op["instance_name"], op.get("target_node")) for op in job]


def test_stale_plan_is_refused(vc, tmp_path):
    plan_file = tmp_path / "stale.json"
    plan_file.write_text(vc.ok("gnt-node", "evacuate", "--plan=json", N1))
    vc.ok("gnt-instance", "add-tags", "dl1", "changed")     # the config serial moves on
    out = fail_unchanged(vc, "gnt-node", "evacuate", "-f", "--apply", str(plan_file), N1,
                         expect="make a new plan")
    assert "serial" in out
    assert _on(vc, N1) == ["big", "dl1", "dl2", "fileinst", "sf1", "small1"]


def test_external_allocator_gets_the_document_and_its_answer_is_used(vc, tmp_path):
    seen = tmp_path / "input.json"
    _script(vc, "myalloc", f'cp "$1" {seen}\n'
            f'echo \'{{"success": true, "info": "mine", "result": ["{N4}"]}}\'\n')
    _add(vc, "ext1", "-I", "myalloc")
    assert _pnode(vc, "ext1") == N4              # the built-in one would not pick 'other'
    doc = serializer.loads(seen.read_text())
    assert doc["version"] == 2 and doc["request"]["type"] == "allocate"
    assert doc["request"]["name"] == "ext1" and doc["request"]["memory"] == 128
    assert sorted(doc["nodes"]) == [N1, N2, N3, N4]
    assert sorted(g["name"] for g in doc["nodegroups"].values()) == ["default", "other"]
    assert doc["nodes"][N1]["free_memory"] > 0 and "big" in doc["instances"]


def test_default_iallocator_params_reach_the_allocator(vc, tmp_path):
    seen = tmp_path / "args"
    _script(vc, "argalloc", f'shift\necho "$@" > {seen}\n'
            f'echo \'{{"success": true, "info": "mine", "result": ["{N4}"]}}\'\n')
    vc.ok("gnt-cluster", "modify", "--default-iallocator-params", "max-cpu=2.5,dedicated,no_x")
    try:
        assert "default instance allocator parameters" in vc.ok("gnt-cluster", "info")
        info = _client(vc).QueryClusterInfo()
        assert info["default_iallocator_params"] == {"max-cpu": "2.5", "dedicated": True,
                                                     "x": False}
        _add(vc, "argx", "-I", "argalloc")
        assert seen.read_text().split() == ["--dedicated", "--max-cpu=2.5"]
        fail_unchanged(vc, "gnt-cluster", "modify", "--default-iallocator-params",
                       "Bad Key=1", expect="Invalid iallocator parameter name")
    finally:
        vc.ok("gnt-cluster", "modify", "--default-iallocator-params", "")
    assert _client(vc).QueryClusterInfo()["default_iallocator_params"] == {}


def test_broken_allocator_changes_nothing(vc):
    _script(vc, "broken", 'echo "the allocator is out of ideas" >&2\nexit 4\n')
    fail_unchanged(vc, "gnt-instance", "add", "-t", "diskless", "-o", "tinyos", *NOCHECK,
                   "-I", "broken", "nope1", expect="out of ideas")
    fail_unchanged(vc, "gnt-node", "evacuate", "-f", "-I", "broken", N1, expect="out of ideas")
    _script(vc, "garbage", 'echo "this is not json"\n')
    fail_unchanged(vc, "gnt-node", "evacuate", "-f", "-I", "garbage", N1,
                   expect="this is not json")


def test_debug_iallocator_and_default_iallocator(vc):
    doc = json.loads(vc.ok("gnt-debug", "iallocator", "--mode", "allocate", "--mem", "256",
                           "probe"))
    assert doc["request"]["memory"] == 256 and doc["version"] == 2
    answer = json.loads(vc.ok("gnt-debug", "iallocator", "--dir", "out", "--mode",
                              "node-evacuate", "dl1"))
    assert answer["success"] is True and answer["result"][0][0][0] == "dl1"
    res = vc.run("gnt-debug", "iallocator", "--mode", "allocate-secondary", "dl1")
    assert res.returncode != 0 and "for a plain instance" in res.stdout + res.stderr
    vc.ok("gnt-cluster", "modify", "--default-iallocator", "myalloc")
    try:
        _add(vc, "ext2")                         # no -n, no -I: the cluster's default
        assert _pnode(vc, "ext2") == N4
    finally:
        vc.ok("gnt-cluster", "modify", "--default-iallocator", "")


def test_upstreams_hail_works_unchanged(vc):
    host_helpers.skip_unless(     # make test installs it (ganeti-htools-3.0): there a failure
        "upstream's hail is not installed" if HAIL is None else None,
        required_by=host_helpers.REQUIRE_HAIL,
        why_required="the Makefile's debian-deps installs ganeti-htools-3.0")
    directory = vc.paths(N1).iallocator_search_path[-1]
    os.symlink(HAIL, os.path.join(directory, "hail"))
    try:
        assert _on(vc, N2) == []
        res = vc.run("gnt-node", "evacuate", "-f", "-I", "hail", "-p", N1)
        out = res.stdout + res.stderr
        # the file instance is reported (never sent to hail); everything else moves
        assert "fileinst cannot be moved" in out, out
        assert _on(vc, N1) == ["fileinst"], out
        _add(vc, "byhail", "-I", "hail")
        assert _pnode(vc, "byhail") in (N1, N2)     # the preferred group
    finally:
        os.unlink(os.path.join(directory, "hail"))


def test_batch_create_places_every_instance(vc, tmp_path):
    spec = tmp_path / "batch.json"
    spec.write_text(json.dumps({"instances": [
        {"instance_name": f"batch{k}", "disk_template": "diskless", "os_type": "tinyos",
         "name_check": False, "ip_check": False, "nics": [{}],
         "beparams": {"maxmem": 128, "minmem": 128}} for k in range(3)]}))
    out = vc.ok("gnt-instance", "batch-create", str(spec))
    assert "3 job(s) followed, 0 failure(s)" in out
    assert {_pnode(vc, f"batch{k}") for k in range(3)} <= {N1, N2}   # the preferred group


def test_rapi_relocation_rows(vc):
    from test_rapi import request, wait_job, write_users
    write_users(vc, "writer wpass write\n")
    auth = ("writer", "wpass")
    before = _on(vc, N1)
    status, job_id, _ = request(vc, "POST", f"/2/nodes/{N1}/evacuate?plan=1",
                                {"mode": "primary-only"}, auth=auth)
    assert status == 200, job_id
    job = wait_job(vc, job_id)
    assert job["status"] == "success", job
    plan = job["opresult"][0]["plan"]
    assert plan["jobs"] and _on(vc, N1) == before           # a plan, nothing moved
    status, job_id, _ = request(vc, "PUT", "/2/instances/dl1/change-group",
                                {"target_groups": ["other"]}, auth=auth)
    assert status == 200, job_id
    result = wait_job(vc, job_id)["opresult"][0]
    for ok, generated in result["jobs"]:
        assert ok and wait_job(vc, int(generated))["status"] == "success"
    assert _pnode(vc, "dl1") in (N3, N4)
    specs = [{"instance_name": f"rapi{k}", "disk_template": "diskless", "os_type": "tinyos",
              "name_check": False, "ip_check": False, "nics": [{}]} for k in range(2)]
    status, job_id, _ = request(vc, "POST", "/2/instances-multi-alloc",
                                {"instances": specs}, auth=auth)
    assert status == 200, job_id
    result = wait_job(vc, job_id)["opresult"][0]
    assert result["allocatable"] == ["rapi0", "rapi1"] and result["failed"] == []
    for ok, generated in result["jobs"]:
        assert ok and wait_job(vc, int(generated))["status"] == "success"
    assert {_pnode(vc, "rapi0"), _pnode(vc, "rapi1")} <= {N1, N2}


def test_node_migrate_empties_the_node(vc):
    _add(vc, "mig1", "-n", N2)
    _add(vc, "mig2", "-n", N2, "--no-start")
    # a group policy of one vCPU per node: node1 (already carrying several) takes no more
    cpus = int(vc.ok("gnt-node", "list", "--no-headers", "-o", "ctotal", N1).strip())
    vc.ok("gnt-group", "modify", "--ipolicy-vcpu-ratio", str(1 / cpus), "default")
    res = vc.run("gnt-node", "migrate", "-f", N2)
    assert res.returncode == 1 and "mig1 cannot be moved" in res.stderr, res.stderr
    assert "FailCPU" in res.stderr and _pnode(vc, "mig1") == N2
    vc.ok("gnt-group", "modify", "--ipolicy-vcpu-ratio", "64", "default")
    res = vc.run("gnt-node", "migrate", "-f", N2)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _on(vc, N2) == []
    assert _pnode(vc, "mig1") == N1 and field(vc, "mig1", "status") == "running"
    assert field(vc, "mig2", "status") == "ADMIN_down"


# every burnin step but the creation, failover and migration (the ones -I changes)
_BURNIN_SKIPS = ["--no-replace1", "--no-replace2", "--no-move", "--no-importexport",
                 "--no-startstop", "--no-reinstall", "--no-reboot", "--no-renamesame",
                 "--no-activate-disks", "--no-add-disks", "--no-add-nics", "--no-confd"]


def test_burnin_places_its_instances_with_the_iallocator(vc):
    names = ["burn1.example.com", "burn2.example.com"]
    env = {**os.environ, **vcluster.node_env(vc.cluster, vc.cluster.master_node)}
    res = subprocess.run([sys.executable, BURNIN, "-o", "tinyos", "-t", "diskless",
                          "--no-name-check", "--no-ip-check", *_BURNIN_SKIPS, "-K",
                          "-I", "ganeti-iallocator", *names],      # no -n
                         env=env, capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "with iallocator ganeti-iallocator" in res.stdout
    jobs = _client(vc).QueryJobs(None, ["status", "ops", "oplog"])
    creates = [(job, op) for job in jobs for op in job[1]
               if op["OP_ID"] == "OP_INSTANCE_CREATE" and op["instance_name"] in names]
    assert sorted(op["instance_name"] for _, op in creates) == names
    selected = []
    for job, op in creates:
        assert job[0] == constants.JOB_STATUS_SUCCESS
        assert op["iallocator"] == "ganeti-iallocator" and not op.get("pnode")
        log = " ".join(str(entry[-1]) for entries in job[2] for entry in entries)
        found = re.search(f"{op['instance_name']} via iallocator ganeti-iallocator: (\\S+)",
                          log)
        assert found, log
        selected.append(found.group(1))
    # node2 is empty since the migration test and node1 carries the rest: the
    # allocator's balance puts both on node2 (a fixed node spread would have used
    # node1 and the 'other' group's nodes too); failover and migration keep them in
    # the preferred group
    assert selected == [N2, N2]
    assert {_pnode(vc, name) for name in names} <= {N1, N2}
    for name in names:
        vc.ok("gnt-instance", "remove", "-f", name)
