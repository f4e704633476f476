"""The built-in allocator on documents: the named scenarios of fakes.allocdocs and small ones."""

from __future__ import annotations

import pytest
from fakes.allocdocs import SCENARIOS, alloc_request, cluster, instance, node, scenario

from ganeti import errors
from ganeti.iallocator import builtin, document


def _run(doc, **kwargs):
    return builtin.allocate(doc, **kwargs)


# --- the named scenarios (fakes.allocdocs.SCENARIOS; hail agrees: test_hail_compat.py) ---

@pytest.mark.parametrize("name, result", [
    ("alloc-mirrored", ["node2", "node1"]),     # DRBD: the roomier node is the primary
    ("alloc-shared", ["node3"]),
    ("alloc-two-disks", ["node1"]),             # node2 has room for one disk, not both
    ("reloc-secondary", ["node3"]),
    ("alloc-secondary", "node3"),               # a node name, not a list
])
def test_scenario_node_choice(name, result):
    answer = _run(scenario(name))
    assert answer["success"] is True and answer["result"] == result


@pytest.mark.parametrize("name", ["node-evacuate", "change-group"])
def test_scenario_relocations_move_the_instance(name):
    answer = _run(scenario(name))
    assert answer["success"] is True
    assert answer["info"] == ("Request successful: 0 instances failed to move and 1 were"
                              " moved successfully")
    moved, failed, jobs = answer["result"]
    assert failed == [] and len(moved) == len(jobs) == 1


def test_scenario_node_evacuate_migrates_to_the_roomiest_node():
    (moved,), _, (job,) = _run(scenario("node-evacuate"))["result"]
    assert moved == ["inst1", "g1", ["node3"]]
    assert job == [{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "inst1",
                    "target_node": "node3"}]


def test_scenario_change_group_lands_in_the_other_group():
    (moved,), _, (job,) = _run(scenario("change-group"))["result"]
    assert moved[1] == "gb" and set(moved[2]) == {"node10", "node11"}
    # DRBD across groups: new secondary, failover to it (stopped), new secondary again
    assert [op["OP_ID"] for op in job] == ["OP_INSTANCE_REPLACE_DISKS", "OP_INSTANCE_FAILOVER",
                                           "OP_INSTANCE_REPLACE_DISKS"]
    assert [job[0]["remote_node"], job[2]["remote_node"]] == moved[2]


@pytest.mark.parametrize("name, counter", [
    ("small-disk", "FailDisk: 1"),          # a disk below the ipolicy minimum
    ("tags-everywhere", "FailTags: 3"),     # exclusion tags on every node
    ("unknown-network", "FailNet: 2"),      # no group has the network
])
def test_scenario_refusals_name_the_reason(name, counter):
    answer = _run(scenario(name))
    assert answer["success"] is False and counter in answer["info"]
    assert answer["result"] == []


def test_scenario_soft_errors_can_be_ignored():
    answer = _run(scenario("tags-everywhere"), ignore_soft_errors=True)
    assert answer["success"] is True and answer["result"][0] in ("node1", "node2", "node3")


def test_scenario_network_restriction_picks_the_connected_last_resort_group():
    answer = _run(scenario("restricted-network"))
    assert answer["success"] is True and answer["result"] == ["node1"]
    assert "Selected group: Group 1" in answer["info"]


def test_scenario_multi_allocate_places_both():
    allocated, failed = _run(scenario("multi-allocate"))["result"]
    assert failed == [] and allocated == [["new1", ["node2"]], ["new2", ["node1"]]]


def test_scenario_invalid_request_is_refused():
    with pytest.raises(errors.OpPrereqError, match="'name'"):
        _run(scenario("invalid-relocate"))


def test_every_scenario_is_a_valid_v2_document():
    for name in SCENARIOS:
        doc = scenario(name)
        assert doc["version"] == 2 and set(doc) >= {"cluster_name", "nodegroups", "nodes",
                                                     "instances", "request", "ipolicy"}
        for entry in doc["nodes"].values():
            assert entry["total_memory"] == (entry["free_memory"] + entry["reserved_memory"]
                                             + entry["i_pri_up_memory"])


# --- made-up documents ---------------------------------------------------------------------

def _nodes(**free):
    return {name: node(free=value) for name, value in free.items()}


def test_allocate_picks_the_node_that_balances_memory():
    doc = cluster(_nodes(n1=10000, n2=30000, n3=20000), request=alloc_request())
    assert _run(doc)["result"] == ["n2"]


@pytest.mark.parametrize("flag", ["offline", "drained", "vm_capable"])
def test_unusable_nodes_are_never_chosen(flag):
    nodes = _nodes(n1=10000, n2=30000)
    nodes["n2"][flag] = flag != "vm_capable"
    if flag == "vm_capable":
        nodes["n2"]["vm_capable"] = False
    assert _run(cluster(nodes, request=alloc_request()))["result"] == ["n1"]


def test_node_without_live_data_is_not_used():
    nodes = {"n1": node(free=10000), "n2": node(live=False)}
    assert _run(cluster(nodes, request=alloc_request()))["result"] == ["n1"]


def test_memory_shortage_fails_with_counters():
    doc = cluster(_nodes(n1=500, n2=600), request=alloc_request(memory=1024))
    answer = _run(doc)
    assert answer["success"] is False and "FailMem: 2" in answer["info"]


def test_unallocable_group_is_never_used_and_last_resort_only_when_needed():
    nodes = {"a": node("g1", free=5000), "b": node("g2", free=30000), "c": node("g3", free=30000)}
    groups = {"g1": "preferred", "g2": "last_resort", "g3": "unallocable"}
    doc = cluster(nodes, groups=groups, request=alloc_request(memory=1024))
    assert _run(doc)["result"] == ["a"]
    doc = cluster(nodes, groups=groups, request=alloc_request(memory=8000))
    assert _run(doc)["result"] == ["b"]
    groups["g2"] = "unallocable"
    doc = cluster(nodes, groups=groups, request=alloc_request(memory=8000))
    assert _run(doc)["success"] is False


def test_restrict_to_nodes():
    doc = cluster(_nodes(n1=10000, n2=30000, n3=20000),
                  request=alloc_request(**{"restrict-to-nodes": ["n1", "n3"]}))
    assert _run(doc)["result"] == ["n3"]


def test_exclusion_tags_keep_instances_apart():
    nodes = _nodes(n1=30000, n2=10000)
    insts = {"web1": instance(["n1"], tags=["svc:web"])}
    req = alloc_request(tags=["svc:web"])
    doc = cluster(nodes, insts, tags=["htools:iextags:svc"], request=req)
    assert _run(doc)["result"] == ["n2"]


def test_ipolicy_refuses_too_much_memory():
    doc = cluster(_nodes(n1=30000), request=alloc_request(memory=40000))
    doc["nodes"]["n1"]["total_memory"] = doc["nodes"]["n1"]["free_memory"] = 65536
    answer = _run(doc)
    assert answer["success"] is False and "FailMem" in answer["info"]


def test_ipolicy_disk_template_list():
    doc = cluster(_nodes(n1=30000), request=alloc_request())
    doc["nodegroups"]["g1"]["ipolicy"]["disk-templates"] = ["file"]
    assert _run(doc)["success"] is False


def test_shared_storage_n1_keeps_failover_room():
    # n1 runs 4000 MiB and has 5000 free, n2 has 9000 free: 6000 more on n2 fit,
    # but if n2 then failed, n1 could not take them over
    nodes = {"n1": node(free=5000, total=10000), "n2": node(free=9000, total=10000)}
    insts = {"a": instance(["n1"], memory=4000)}
    doc = cluster(nodes, insts, request=alloc_request(memory=6000))
    answer = _run(doc)
    assert answer["success"] is False and "FailN1" in answer["info"]
    assert _run(doc, capacity_checks=False)["success"] is True


def test_multi_allocate_sees_earlier_placements():
    nodes = _nodes(n1=3000, n2=3000)
    reqs = [alloc_request(f"i{k}", memory=2000) for k in range(3)]
    doc = cluster(nodes, request=document.multi_allocate_request(reqs))
    allocated, failed = _run(doc, capacity_checks=False)["result"]
    assert sorted(a[1][0] for a in allocated) == ["n1", "n2"] and failed == ["i2"]


def _evac_doc(**extra_insts):
    nodes = {"n1": node(free=20000), "n2": node(free=30000), "n3": node(free=25000)}
    insts = {"a": instance(["n1"], memory=2000), "b": instance(["n1"], memory=1000, up=False),
             "d": instance(["n1"], template="diskless", memory=512),
             "f": instance(["n1"], template="file"), **extra_insts}
    return nodes, insts


def test_node_evacuate_moves_shared_storage_and_reports_file():
    nodes, insts = _evac_doc()
    doc = cluster(nodes, insts, request=document.node_evacuate_request(
        ["a", "b", "d", "f"], "primary-only"))
    answer = _run(doc)
    moved, failed, jobs = answer["result"]
    assert sorted(m[0] for m in moved) == ["a", "b", "d"]
    assert all(m[2][0] in ("n2", "n3") for m in moved)
    assert failed[0][0] == "f" and "gnt-instance move" in failed[0][1]
    ops = {job[0]["instance_name"]: job[0]["OP_ID"] for job in jobs}
    assert ops == {"a": "OP_INSTANCE_MIGRATE", "b": "OP_INSTANCE_FAILOVER",
                   "d": "OP_INSTANCE_MIGRATE"}


def test_node_evacuate_with_disks_places_file_instances():
    nodes, insts = _evac_doc()
    doc = cluster(nodes, insts, request=document.node_evacuate_request(
        ["a", "f"], "primary-only", with_disks=True))
    assert doc["request"]["with-disks"] is True
    moved, failed, jobs = _run(doc)["result"]
    assert failed == []
    target = {m[0]: m[2][0] for m in moved}["f"]
    assert target in ("n2", "n3")
    (fjob,) = [j for j in jobs if j[0]["instance_name"] == "f"]
    assert {k: v for k, v in fjob[0].items() if k != "depends"} == {
        "OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "f", "target_node": target,
        "with_disks": True}


def test_node_evacuate_with_disks_needs_room_for_the_disks():
    nodes = {"n1": node(free=20000), "n2": node(free=30000, free_disk=10)}
    insts = {"f": instance(["n1"], template="file")}
    doc = cluster(nodes, insts, request=document.node_evacuate_request(
        ["f"], "all", with_disks=True))
    _, failed, _ = _run(doc)["result"]
    assert failed[0][0] == "f" and "FailDisk" in failed[0][1]


def test_relocate_of_a_file_instance_needs_with_disks():
    nodes, insts = _evac_doc()
    plain = document.relocate_request("f", "file", [{"size": 1024}], ["n1"])
    answer = _run(cluster(nodes, insts, request=plain))
    assert answer["success"] is False and "gnt-instance move" in answer["info"]
    request = document.relocate_request("f", "file", [{"size": 1024}], ["n1"], with_disks=True)
    answer = _run(cluster(nodes, insts, request=request))
    assert answer["success"] is True and answer["result"][0] in ("n2", "n3")


def test_jobs_onto_the_same_node_depend_on_each_other():
    nodes = {"n1": node(free=20000), "n2": node(free=30000)}
    insts = {f"i{k}": instance(["n1"], memory=1000) for k in range(3)}
    doc = cluster(nodes, insts, request=document.node_evacuate_request(sorted(insts), "all"))
    _, _, jobs = _run(doc)["result"]
    assert "depends" not in jobs[0][0]
    assert jobs[1][0]["depends"] == [[-1, []]] and jobs[2][0]["depends"] == [[-1, []]]


def test_jobs_onto_different_nodes_run_in_parallel():
    nodes = {"n1": node(free=20000), "n2": node(free=30000), "n3": node(free=30000)}
    insts = {"i0": instance(["n1"], memory=4000), "i1": instance(["n1"], memory=4000)}
    doc = cluster(nodes, insts, request=document.node_evacuate_request(sorted(insts), "all"))
    moved, _, jobs = _run(doc)["result"]
    assert {m[2][0] for m in moved} == {"n2", "n3"}
    assert all("depends" not in job[0] for job in jobs)


def test_unplaceable_instance_is_reported_others_move():
    nodes = {"n1": node(free=30000), "n2": node(free=5000)}
    insts = {"big": instance(["n1"], memory=20000), "small": instance(["n1"], memory=1000)}
    doc = cluster(nodes, insts, request=document.node_evacuate_request(sorted(insts), "all"))
    moved, failed, _ = _run(doc)["result"]
    assert [m[0] for m in moved] == ["small"]
    assert failed[0][0] == "big" and "FailMem" in failed[0][1]


def test_change_group_goes_to_the_other_group():
    nodes = {"a1": node("g1"), "a2": node("g1"), "b1": node("g2", free=20000),
             "b2": node("g2", free=25000)}
    insts = {"x": instance(["a1"])}
    doc = cluster(nodes, insts, groups={"g1": "preferred", "g2": "preferred"},
                  request=document.change_group_request(["x"], []))
    (move,), failed, (job,) = _run(doc)["result"]
    assert move == ["x", "g2", ["b2"]] and failed == []
    assert job == [{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "x", "target_node": "b2"}]


def test_change_group_respects_unallocable_targets():
    nodes = {"a1": node("g1"), "b1": node("g2")}
    doc = cluster(nodes, {"x": instance(["a1"])}, groups={"g1": "preferred", "g2": "unallocable"},
                  request=document.change_group_request(["x"], ["g2"]))
    _, failed, jobs = _run(doc)["result"]
    assert jobs == [] and failed[0][0] == "x"


def test_relocate_shared_storage_gives_a_new_primary():
    nodes = _nodes(n1=20000, n2=30000, n3=10000)
    doc = cluster(nodes, {"x": instance(["n1"])},
                  request=document.relocate_request("x", "sharedfile", [{"size": 1024}], ["n1"]))
    assert _run(doc)["result"] == ["n2"]


def test_allocate_secondary_picks_the_roomiest_usable_node_of_the_group():
    nodes = _nodes(n1=20000, n2=30000, n3=10000)
    nodes["n4"] = node("g2", free=32000)
    doc = cluster(nodes, {"x": instance(["n1"], template="plain")},
                  groups={"g1": "preferred", "g2": "preferred"},
                  request=document.allocate_secondary_request("x"))
    doc["nodes"]["n4"]["group"] = "g2"
    answer = _run(doc)
    assert answer["success"] and answer["result"] == "n2", answer
    # the disk as DRBD needs it (1024 MiB data + 128 MiB metadata) must fit
    doc["nodes"]["n2"]["free_disk"] = 1100
    assert _run(doc)["result"] == "n3"
    doc["nodes"]["n3"]["offline"] = True
    answer = _run(doc)
    assert not answer["success"] and "FailDisk: 1" in answer["info"], answer
    # only plain instances are converted
    doc = cluster(nodes, {"y": instance(["n1"])},
                  request=document.allocate_secondary_request("y"))
    answer = _run(doc)
    assert not answer["success"] and "disk template sharedfile" in answer["info"]


def test_not_a_document():
    with pytest.raises(errors.OpPrereqError, match="request"):
        _run({})
    with pytest.raises(errors.OpPrereqError, match="type"):
        _run({"request": {"type": "bogus"}})


def test_plain_is_placed_by_the_free_space_of_the_volume_group():
    """free_disk of a node is its VG's vg_free when plain is enabled first
    (doc/storage.md): a node whose VG cannot hold the disks is never chosen, even
    with the most free memory; the reported free space already excludes the volumes
    of the instances there (not subtracted twice)."""
    nodes = {"n1": node(free=10000, free_disk=4096), "n2": node(free=30000, free_disk=1000)}
    doc = cluster(nodes, request=alloc_request(template="plain", disks=[2048]))
    assert _run(doc)["result"] == ["n1"]
    nodes["n1"]["free_disk"] = 1500
    answer = _run(cluster(nodes, request=alloc_request(template="plain", disks=[2048])))
    assert answer["success"] is False and "FailDisk: 2" in answer["info"]
    # n1's 3000 MiB free already excludes the volume of the instance there
    insts = {"old": instance(["n1"], template="plain")}
    nodes["n1"]["free_disk"] = 3000
    doc = cluster(nodes, insts, request=alloc_request(template="plain", disks=[2048]))
    assert _run(doc)["result"] == ["n1"]
