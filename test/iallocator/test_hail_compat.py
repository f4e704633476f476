"""Upstream's ``hail`` as an oracle: it reads the documents we build, its answers pass
our checks, and on the named scenarios of fakes.allocdocs it decides as ours does.

``make test`` installs hail (Debian's ganeti-htools-3.0, in DEBIAN_PACKAGES of the
Makefile; it puts hail in ``/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators``); the
tests are skipped where it is missing.  Only hail's answer is used: no upstream
daemon runs.
"""

from __future__ import annotations

import os
import shutil

import pytest
from fakes.allocdocs import scenario

from ganeti import constants, errors, opcodes
from ganeti.iallocator import document, runner
from ganeti.objects import NIC, Cluster, ConfigData, Disk, Instance, Node, NodeGroup

_CANDIDATES = ["/usr/lib/ganeti/iallocators/hail", "/usr/local/lib/ganeti/iallocators/hail",
               "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators/hail"]
HAIL = shutil.which("hail") or next((p for p in _CANDIDATES if os.path.exists(p)), None)



@pytest.fixture(autouse=True)
def _hail_installed():
    """Skip without hail, except under ``make test`` (GANETI_TEST_REQUIRE_HAIL=1), which
    installs it: there a missing hail is a failure, not a silent skip."""
    if HAIL is None:
        if os.environ.get("GANETI_TEST_REQUIRE_HAIL") == "1":
            pytest.fail("upstream's hail is not installed (the Makefile's debian-deps installs"
                        " ganeti-htools-3.0)")
        pytest.skip("upstream's hail is not installed")


def _config() -> tuple[ConfigData, dict[str, dict]]:
    groups = {"g1": NodeGroup(name="default", uuid="g1"),
              "g2": NodeGroup(name="other", uuid="g2", alloc_policy="last_resort")}
    nodes = {f"u{i}": Node(name=f"node{i}", uuid=f"u{i}", primary_ip=f"10.0.0.{i}",
                           group="g1" if i <= 2 else "g2") for i in (1, 2, 3, 4)}
    disks, insts = {}, {}
    for k, (node, template, state) in enumerate([("u1", "sharedfile", "up"),
                                                 ("u1", "diskless", "up"),
                                                 ("u1", "sharedfile", "down"),
                                                 ("u2", "file", "up")]):
        name = f"inst{k}"
        dlist = []
        if template != "diskless":
            disks[f"d{k}"] = Disk(uuid=f"d{k}", dev_type=template, size=1024, nodes=[node])
            dlist = [f"d{k}"]
        insts[name] = Instance(name=name, uuid=name, primary_node=node, os="tinyos",
                               disk_template=template, admin_state=state, disks=dlist,
                               beparams={"maxmem": 512, "minmem": 512, "vcpus": 1},
                               nics=[NIC(mac=f"aa:00:00:00:00:0{k}")])
    live = {u: {"memory_total": 8192, "memory_free": 6000, "memory_dom0": 512, "cpu_total": 4,
                "storage": [{"storage_size": 100000, "storage_free": 90000}]} for u in nodes}
    cluster = Cluster(cluster_name="c", enabled_hypervisors=[constants.HT_FAKE],
                      enabled_disk_templates=["sharedfile", "diskless", "file"])
    return ConfigData(cluster=cluster, nodes=nodes, nodegroups=groups, instances=insts,
                      disks=disks), live


@pytest.mark.parametrize("request_", [
    document.allocate_request(name="new", disk_template="sharedfile", memory=512, vcpus=1,
                              disks=[{"size": 1024}], nics=[{"mac": "auto"}], os="tinyos",
                              hypervisor="fake"),
    document.relocate_request("inst0", "sharedfile", [{"size": 1024}], ["node1"]),
    document.node_evacuate_request(["inst0", "inst1", "inst2"], "primary-only"),
    document.change_group_request(["inst0"], ["g2"]),
    document.multi_allocate_request([document.allocate_request(
        name=f"m{k}", disk_template="diskless", memory=256, vcpus=1, disks=[], nics=[],
        hypervisor="fake") for k in range(2)]),
], ids=lambda r: r["type"])
def test_hail_answers_our_documents(request_):
    data, live = _config()
    doc = document.build_input(data, live, request_)
    directory = os.path.dirname(HAIL)
    try:
        answer = runner.run_allocator("hail", doc, search_path=[directory])
    except errors.OpPrereqError as exc:      # a failing or malformed answer
        pytest.fail(f"hail refused our document: {exc}")
    assert answer.success, answer.info
    builtin = runner.run_allocator("ganeti-iallocator", doc, search_path=[])
    assert builtin.success, builtin.info
    for job in answer.jobs:                  # hail's opcodes pass our opcode checks
        for op in job:
            opcodes.from_dict(op)
    if request_["type"] in ("allocate", "relocate"):
        assert answer.nodes[0] in ("node1", "node2")     # the preferred group, as ours
        assert builtin.nodes[0] in ("node1", "node2")


# --- the scenarios: where the choice is unambiguous, hail and ours agree -------------------

def _hail(doc, **params):
    return runner.run_allocator("hail", doc, search_path=[os.path.dirname(HAIL)],
                                params=params)


def _ours(doc, **params):
    return runner.run_allocator("ganeti-iallocator", doc, search_path=[], params=params)


def _both(name, **params):
    doc = scenario(name)
    return doc, _hail(doc, **params), _ours(doc, **params)


@pytest.mark.parametrize("name", ["alloc-mirrored", "alloc-shared", "alloc-two-disks",
                                  "reloc-secondary", "alloc-secondary", "restricted-network"])
def test_hail_chooses_the_same_nodes(name):
    _, hail, ours = _both(name)
    assert hail.success and ours.success, (hail.info, ours.info)
    assert hail.nodes == ours.nodes


def test_hail_restricted_network_selects_the_same_group():
    _, hail, ours = _both("restricted-network")
    assert "Selected group: Group 1" in hail.info and "Selected group: Group 1" in ours.info


def test_hail_multi_allocates_the_same_way():
    _, hail, ours = _both("multi-allocate")
    assert hail.success and ours.success
    assert hail.allocated == ours.allocated and hail.unallocated == ours.unallocated == []


def _group_name(doc, group):
    # hail names the target group by its name in ``moved``, ours by its uuid
    return doc["nodegroups"].get(group, {}).get("name", group)


def test_hail_evacuates_to_the_same_node_with_the_same_job():
    doc, hail, ours = _both("node-evacuate")
    assert [(m.instance, _group_name(doc, m.group), m.nodes) for m in hail.moved] == \
        [(m.instance, _group_name(doc, m.group), m.nodes) for m in ours.moved]
    assert hail.failed == ours.failed == []

    def essence(jobs):    # hail adds its opcodes' defaults (cleanup, allow_failover...)
        return [[(op["OP_ID"], op["instance_name"], op.get("target_node")) for op in job]
                for job in jobs]
    assert essence(hail.jobs) == essence(ours.jobs)


def test_hail_changes_group_onto_the_same_nodes():
    doc, hail, ours = _both("change-group")
    ((h_move,), (o_move,)) = hail.moved, ours.moved
    assert _group_name(doc, h_move.group) == _group_name(doc, o_move.group) == "group B"
    assert h_move.nodes == o_move.nodes
    (h_job,), (o_job,) = hail.jobs, ours.jobs
    # both: a new secondary in the target group, the switch to it, the second new
    # secondary.  The switch differs: hail always sends OP_INSTANCE_MIGRATE with
    # allow_failover, ours OP_INSTANCE_FAILOVER for a stopped instance.
    assert len(h_job) == len(o_job) == 3
    for k in (0, 2):
        assert h_job[k]["OP_ID"] == o_job[k]["OP_ID"] == "OP_INSTANCE_REPLACE_DISKS"
        assert h_job[k]["remote_node"] == o_job[k]["remote_node"]
    assert h_job[1]["OP_ID"] in ("OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER")


@pytest.mark.parametrize("name, counter", [
    ("small-disk", "FailDisk: 1"),
    ("tags-everywhere", "FailTags: 3"),
    # hail says "group ... is not connected to a network required by instance" where
    # ours counts FailNet: only the refusal must agree
    ("unknown-network", None),
])
def test_hail_refuses_the_same_requests(name, counter):
    _, hail, ours = _both(name)
    assert not hail.success and not ours.success
    if counter is not None:
        assert counter in hail.info and counter in ours.info


def test_hail_ignores_soft_errors_too():
    # every node is alike: which one is chosen is a tie, not compared
    _, hail, ours = _both("tags-everywhere", **{"ignore-soft-errors": True})
    assert hail.success and ours.success


def test_hail_refuses_an_invalid_request_too():
    doc = scenario("invalid-relocate")
    for run in (_hail, _ours):
        with pytest.raises(errors.OpPrereqError, match="'?name'? (not found|missing)"):
            run(doc)
