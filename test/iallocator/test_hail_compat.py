"""Upstream's ``hail`` reads the documents we build and its answers pass our checks.

Skipped unless hail is installed (Debian's ganeti-htools-3.0 puts it in
``/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators``).
"""

from __future__ import annotations

import os
import shutil

import pytest

from ganeti import constants, errors, opcodes
from ganeti.iallocator import document, runner
from ganeti.objects import NIC, Cluster, ConfigData, Disk, Instance, Node, NodeGroup

_CANDIDATES = ["/usr/lib/ganeti/iallocators/hail", "/usr/local/lib/ganeti/iallocators/hail",
               "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators/hail"]
HAIL = shutil.which("hail") or next((p for p in _CANDIDATES if os.path.exists(p)), None)

pytestmark = pytest.mark.skipif(HAIL is None, reason="upstream's hail is not installed")


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
