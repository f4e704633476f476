"""Relocation LUs and OP_TEST_ALLOCATOR on a real ConfigWriter with a fake node RPC.

The allocator's answers become jobs with relative dependencies, submitted
through the processor's many-jobs callback (recorded by ``run_opcode``).
"""

from __future__ import annotations

import os
import stat
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pytest  # noqa: E402
from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, errors, locking, serializer  # noqa: E402
from ganeti.objects import NIC, Disk, Instance, NodeGroup  # noqa: E402
from ganeti.opcodes import group as opg  # noqa: E402
from ganeti.opcodes import instance as opi  # noqa: E402
from ganeti.opcodes import node as opn  # noqa: E402
from ganeti.opcodes import test as opt  # noqa: E402

N1, N2, N3, N4 = (node_name(i) for i in (1, 2, 3, 4))
_MACS = iter(range(1, 255))


def _add(cfg, name: str, node: int, *, template: str = "sharedfile", up: bool = True,
         mem: int = 256, hypervisor: str = constants.HT_FAKE) -> None:
    disks = []
    if template != "diskless":
        disks = [Disk(uuid=f"disk-{name}", dev_type=template, size=1024,
                      logical_id=["loop", f"/x/{name}"], nodes=[f"uuid-node{node}"])]
    inst = Instance(name=name, uuid=f"uuid-{name}", primary_node=f"uuid-node{node}",
                    os="tinyos", disk_template=template, beparams={"maxmem": mem, "minmem": mem},
                    hypervisor=hypervisor,
                    admin_state=constants.ADMINST_UP if up else constants.ADMINST_DOWN,
                    disks=[d.uuid for d in disks],
                    nics=[NIC(uuid=f"nic-{name}", mac=f"aa:00:00:00:01:{next(_MACS):02x}")])
    cfg.add_instance(inst, disks)


@pytest.fixture
def env(tmp_path):
    """Four nodes: node1-node2 in 'default', node3-node4 in 'other'."""
    cfg = make_config(tmp_path, nodes=4)
    cfg.add_nodegroup(NodeGroup(name="other", uuid="group-other"))
    for i in (3, 4):
        node = cfg.get_node_info(f"uuid-node{i}")
        node.group = "group-other"
        cfg.update(node)
    rpc = FakeRpc(cfg)
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    return cfg, rpc, ctx


def test_node_evacuate_submits_dependent_jobs(env):
    cfg, _, ctx = env
    for name in ("a", "b"):
        _add(cfg, name, 1)
    _add(cfg, "c", 1, up=False, template="diskless")
    _add(cfg, "f", 1, template="file")
    result, messages, jobs = run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1))
    # every movable instance goes to node2 (the only other node of the group), in a chain
    targets = {job[0]["instance_name"]: job[0].get("target_node") for job in jobs}
    assert targets == {"a": N2, "b": N2, "c": N2}
    assert [job[0].get("depends") for job in jobs] == [None, [[-1, []]], [[-1, []]]]
    ops = {job[0]["instance_name"]: job[0]["OP_ID"] for job in jobs}
    assert ops["c"] == "OP_INSTANCE_FAILOVER" and ops["a"] == "OP_INSTANCE_MIGRATE"
    assert result["jobs"] == [[True, 100], [True, 101], [True, 102]]
    assert result["failed"][0][0] == "f" and "gnt-instance move" in result["failed"][0][1]
    assert any("Cannot move instance f" in m for m in messages)


def test_node_evacuate_to_a_given_node_needs_no_allocator(env):
    cfg, _, ctx = env
    _add(cfg, "a", 1)
    _, _, jobs = run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1, remote_node=N3))
    assert jobs == [[{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "a", "target_node": N3}]]


def test_node_evacuate_with_disks_moves_file_instances(env):
    cfg, _, ctx = env
    _add(cfg, "live", 1, template="file", hypervisor=constants.HT_KVM)
    _add(cfg, "down", 1, template="file", up=False)
    _add(cfg, "fakeup", 1, template="file")             # fake cannot copy a running disk
    _add(cfg, "a", 1)
    result, _, jobs = run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1, with_disks=True))
    ops = {j[0]["instance_name"]: {k: v for k, v in j[0].items() if k != "depends"}
           for j in jobs}
    assert ops["live"] == {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "live",
                           "target_node": N2, "with_disks": True}
    assert ops["down"] == {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "down",
                           "target_node": N2, "with_disks": True}
    assert "with_disks" not in ops["a"]
    assert [f[0] for f in result["failed"]] == ["fakeup"]
    assert "hypervisor fake" in result["failed"][0][1]
    # to a given node, without the allocator
    _, _, jobs = run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1, with_disks=True,
                                                     remote_node=N3))
    assert {j[0]["instance_name"]: j[0].get("with_disks") for j in jobs} == {
        "a": None, "down": True, "live": True}


def test_node_migrate_with_disks_keeps_the_flag(env):
    cfg, _, ctx = env
    _add(cfg, "live", 1, template="file", hypervisor=constants.HT_KVM)
    result, _, jobs = run_opcode(ctx, opn.OpNodeMigrate(node_name=N1))
    assert jobs == [] and "--with-disks" in result["failed"][0][1]
    _, _, jobs = run_opcode(ctx, opn.OpNodeMigrate(node_name=N1, with_disks=True))
    assert jobs[0][0]["with_disks"] is True and jobs[0][0]["target_node"] == N2


def test_plan_submits_nothing_and_apply_submits_exactly_it(env):
    cfg, _, ctx = env
    for name in ("a", "b"):
        _add(cfg, name, 1)
    result, _, jobs = run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1, plan_only=True))
    assert jobs == []
    plan = result["plan"]
    assert plan["serial"] == cfg.get_serial_no() and len(plan["steps"]) == 2
    assert plan["steps"][1]["depends_on"] == [0]
    result, _, jobs = run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1, apply_plan=plan))
    assert jobs == plan["jobs"]
    _add(cfg, "late", 2)                          # the config changes: the plan is stale
    with pytest.raises(errors.OpPrereqError, match="make a new plan"):
        run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1, apply_plan=plan))
    with pytest.raises(errors.OpPrereqError, match="not made by"):
        run_opcode(ctx, opg.OpGroupEvacuate(group_name="default", apply_plan=plan))


def test_change_group_and_group_evacuate(env):
    cfg, _, ctx = env
    _add(cfg, "a", 1)
    _add(cfg, "b", 2, template="diskless")
    _, _, jobs = run_opcode(ctx, opi.OpInstanceChangeGroup(instance_name="a"))
    assert jobs[0][0]["target_node"] in (N3, N4)
    _, _, jobs = run_opcode(ctx, opg.OpGroupEvacuate(group_name="default"))
    assert sorted(j[0]["instance_name"] for j in jobs) == ["a", "b"]
    assert all(j[0]["target_node"] in (N3, N4) for j in jobs)


def test_change_group_to_own_group_is_refused(env):
    cfg, _, ctx = env
    _add(cfg, "a", 1)
    with pytest.raises(errors.OpPrereqError, match="already in group"):
        run_opcode(ctx, opi.OpInstanceChangeGroup(instance_name="a", target_groups=["default"]))


def test_node_migrate_uses_migrate_opcodes(env):
    cfg, _, ctx = env
    _add(cfg, "a", 1)
    _add(cfg, "s", 1, up=False)
    _, _, jobs = run_opcode(ctx, opn.OpNodeMigrate(node_name=N1, mode="non-live"))
    assert {j[0]["OP_ID"] for j in jobs} == {"OP_INSTANCE_MIGRATE"}
    assert all(j[0]["mode"] == "non-live" and j[0]["target_node"] == N2 for j in jobs)


def test_multi_alloc_places_and_submits_creates(env):
    cfg, _, ctx = env
    specs = [{"instance_name": f"new{k}", "disk_template": "diskless", "os_type": "tinyos",
              "name_check": False, "ip_check": False, "beparams": {"maxmem": 512},
              "nics": [{}]}
             for k in range(3)]
    result, _, jobs = run_opcode(ctx, opi.OpInstanceMultiAlloc(instances=specs))
    assert result["allocatable"] == ["new0", "new1", "new2"] and result["failed"] == []
    assert all(j[0]["OP_ID"] == "OP_INSTANCE_CREATE" and j[0]["pnode"] for j in jobs)


def test_multi_alloc_all_or_none_nodes(env):
    _, _, ctx = env
    specs = [{"instance_name": "x", "disk_template": "diskless", "pnode": N1},
             {"instance_name": "y", "disk_template": "diskless"}]
    with pytest.raises(errors.OpPrereqError, match="all instances"):
        run_opcode(ctx, opi.OpInstanceMultiAlloc(instances=specs))


def test_test_allocator_in_and_out(env):
    cfg, _, ctx = env
    _add(cfg, "a", 1)
    text, _, _ = run_opcode(ctx, opt.OpTestAllocator(mode="allocate", name="z", memory=512))
    doc = serializer.loads(text)
    assert doc["version"] == 2 and doc["request"]["type"] == "allocate"
    assert set(doc["nodegroups"]) == {"group-default", "group-other"}
    assert doc["nodes"][N1]["free_memory"] == 3072 and "a" in doc["instances"]
    text, _, _ = run_opcode(ctx, opt.OpTestAllocator(mode="node-evacuate", instances=["a"],
                                                     direction="out"))
    answer = serializer.loads(text)
    assert answer["success"] is True and answer["result"][0][0][0] == "a"


def test_test_allocator_asks_for_a_secondary_of_a_plain_instance(env):
    cfg, _, ctx = env
    _add(cfg, "p", 1, template="plain")
    text, _, _ = run_opcode(ctx, opt.OpTestAllocator(mode="allocate-secondary", name="p"))
    assert serializer.loads(text)["request"] == {"type": "allocate-secondary", "name": "p"}
    text, _, _ = run_opcode(ctx, opt.OpTestAllocator(mode="allocate-secondary", name="p",
                                                     direction="out"))
    answer = serializer.loads(text)
    assert answer["success"] is True, answer
    assert answer["result"] == N2          # the one other node of node1's group
    _add(cfg, "s", 1)
    with pytest.raises(errors.OpPrereqError, match="for a plain instance"):
        run_opcode(ctx, opt.OpTestAllocator(mode="allocate-secondary", name="s"))
    with pytest.raises(errors.OpPrereqError, match="not known"):
        run_opcode(ctx, opt.OpTestAllocator(mode="allocate-secondary", name="nosuch"))


def _script(ctx, name: str, body: str) -> None:
    directory = ctx.paths.iallocator_search_path[-1]
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


def test_external_allocator_answer_is_used(env):
    cfg, _, ctx = env
    _add(cfg, "a", 1)
    _script(ctx, "mine", f"""cat > /dev/null <"$1"
echo '{{"success": true, "info": "", "result": [[["a", "group-other", ["{N4}"]]], [],
 [[{{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "a", "target_node": "{N4}"}}]]]}}'
""")
    _, _, jobs = run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1, iallocator="mine"))
    assert jobs == [[{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "a", "target_node": N4}]]


def test_broken_allocator_changes_nothing(env):
    cfg, _, ctx = env
    _add(cfg, "a", 1)
    _script(ctx, "broken", 'echo "out of ideas" >&2; exit 1\n')
    before = cfg.get_serial_no()
    with pytest.raises(errors.OpPrereqError, match="out of ideas"):
        run_opcode(ctx, opn.OpNodeEvacuate(node_name=N1, iallocator="broken"))
    assert cfg.get_serial_no() == before


def test_create_without_node_asks_the_allocator(env):
    cfg, rpc, ctx = env
    # group 'other' (node3, node4) is the best balanced after the placement
    free = {N1: 2000, N2: 1000, N3: 8000, N4: 8000}
    rpc.set_handler("node_info", lambda node, args: {
        "memory_total": 8192, "memory_free": free[node], "memory_dom0": 192,
        "cpu_total": 4, "storage": []})
    op = opi.OpInstanceCreate(instance_name="fresh", disk_template="diskless", nics=[{}],
                              os_type="tinyos", name_check=False, ip_check=False,
                              no_install=True, start=False)
    result, messages, _ = run_opcode(ctx, op)
    assert result == [N3]
    assert any("via iallocator" in m for m in messages)


def test_failover_with_an_iallocator_picks_the_target(env):
    cfg, rpc, ctx = env
    _add(cfg, "a", 1, up=False)
    ctx.glm.add(locking.LEVEL_INSTANCE, "a")
    free = {N1: 1000, N2: 3000, N3: 6000, N4: 5000}
    rpc.set_handler("node_info", lambda node, args: {
        "memory_total": 8192, "memory_free": free[node], "memory_dom0": 192,
        "cpu_total": 4, "storage": []})
    _, messages, _ = run_opcode(ctx, opi.OpInstanceFailover(instance_name="a",
                                                            iallocator="ganeti-iallocator"))
    # a relocation stays in the instance's group: node2, not the emptier node3
    assert cfg.get_instance_info("uuid-a").primary_node == "uuid-node2"
    assert any("Selected target node" in m for m in messages)


def test_target_node_and_iallocator_exclude_each_other(env):
    cfg, _, ctx = env
    _add(cfg, "a", 1)
    ctx.glm.add(locking.LEVEL_INSTANCE, "a")
    with pytest.raises(errors.OpPrereqError, match="not both"):
        run_opcode(ctx, opi.OpInstanceMigrate(instance_name="a", target_node=N2,
                                              iallocator="hail"))


def test_drained_nodes_are_described_but_not_used(env):
    cfg, _, ctx = env
    node = cfg.get_node_info("uuid-node2")
    node.drained = True
    cfg.update(node)
    _add(cfg, "a", 1)
    text, _, _ = run_opcode(ctx, opt.OpTestAllocator(mode="node-evacuate", instances=["a"]))
    assert "free_memory" in serializer.loads(text)["nodes"][N2]
    text, _, _ = run_opcode(ctx, opt.OpTestAllocator(mode="node-evacuate", instances=["a"],
                                                     direction="out"))
    _, failed, jobs = serializer.loads(text)["result"]
    assert jobs == [] and failed[0][0] == "a"


def test_default_iallocator_must_exist(env):
    cfg, _, ctx = env
    from ganeti.opcodes.cluster import OpClusterSetParams
    with pytest.raises(errors.OpPrereqError, match="not found"):
        run_opcode(ctx, OpClusterSetParams(default_iallocator="nosuch"))
    run_opcode(ctx, OpClusterSetParams(default_iallocator="hail"))   # the built-in answers
    assert cfg.get_cluster_info().default_iallocator == "hail"
    run_opcode(ctx, OpClusterSetParams(default_iallocator=""))
    assert cfg.get_cluster_info().default_iallocator == ""
