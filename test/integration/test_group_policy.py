"""Node groups and instance policies on a real 4-node virtual cluster with two groups.

``default`` holds node1 and node2 with the cluster's policy (Ganeti's
default, disks from 1 MiB); ``rack2`` holds node3 and node4 and allows at
most 256 MiB of memory.  The tests run in file order and build on each
other: instances created early are moved and checked later.
"""

from __future__ import annotations

import pytest
from instance_helpers import NOCHECK, rows
from vcluster_harness import VirtualCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

N1, N2, N3, N4 = (f"node{i}.vcluster" for i in range(1, 5))


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcp"), nodes=4, use_ssh=False) as cluster:
        cluster.ok("gnt-group", "add", "--alloc-policy", "last_resort",
                   "--ipolicy-vcpu-ratio", "2", "--specs-mem-size", "max=256", "rack2")
        cluster.ok("gnt-group", "assign-nodes", "rack2", N3, N4)
        yield cluster


def _add(vc, name: str, node: str, *extra: str):
    return vc.run("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", node,
                  "--no-start", *NOCHECK, *extra, name)


def _instances(vc) -> list[str]:
    return vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").split()


# --- gnt-group ---------------------------------------------------------------------------

def test_group_info_shows_own_and_inherited_policy(vc):
    out = vc.ok("gnt-group", "info", "rack2")
    assert "Node group: rack2" in out and "Allocation policy: last_resort" in out
    assert "Number of nodes: 2" in out
    assert "    vcpu-ratio: 2.0\n" in out
    assert "    spindle-ratio: default (32.0)\n" in out
    assert "        memory-size: 256\n" in out       # max/0
    listed = vc.ok("gnt-group", "list", "--no-headers", "--separator=|", "-o",
                   "name,node_cnt,alloc_policy")
    assert listed.split() == ["default|2|preferred", "rack2|2|last_resort"]
    fields = vc.ok("gnt-group", "list-fields", "--no-headers")
    assert "custom_ipolicy" in fields and "custom_ndparams" in fields


def test_group_modify_params_policy_and_reset(vc):
    vc.ok("gnt-group", "modify", "--alloc-policy", "unallocable", "-D", "plain:stripes=2",
          "--node-parameters", "spindle_count=4", "--ipolicy-disk-templates",
          "diskless,file", "rack2")
    out = vc.ok("gnt-group", "info", "rack2")
    assert "Allocation policy: unallocable" in out
    assert "    spindle_count: 4\n" in out and "      stripes: 2\n" in out
    assert "    allowed disk templates: diskless, file\n" in out
    vc.ok("gnt-group", "modify", "--alloc-policy", "last_resort", "--ipolicy-disk-templates",
          "default", "--node-parameters=-spindle_count", "rack2")
    out = vc.ok("gnt-group", "info", "rack2")
    assert "Allocation policy: last_resort" in out
    assert "    spindle_count: default (1)\n" in out
    assert "allowed disk templates: default (" in out


def test_group_modify_bad_input_changes_nothing(vc):
    before = vc.ok("gnt-group", "info", "rack2")
    for args, needle in ((["--ipolicy-vcpu-ratio", "zero"], "'vcpu-ratio' must be a positive"),
                         (["--ipolicy-disk-templates", "plain"], "not enabled on the cluster"),
                         (["--ipolicy-bounds-specs", "min:memory-size=1"], "need both min:"),
                         (["--alloc-policy", "sometimes"], "sometimes")):
        res = vc.run("gnt-group", "modify", *args, "rack2")
        assert res.returncode != 0 and needle in res.stderr, (args, res.stderr)
    res = vc.run("gnt-group", "modify", "rack2")
    assert res.returncode == 1 and "at least one" in res.stderr
    assert vc.ok("gnt-group", "info", "rack2") == before


def test_group_rename_and_tags(vc):
    vc.ok("gnt-group", "add", "spare")
    vc.ok("gnt-group", "rename", "spare", "reserve")
    vc.ok("gnt-group", "add-tags", "reserve", "rack:b2")
    assert vc.ok("gnt-group", "list-tags", "reserve").split() == ["rack:b2"]
    vc.ok("gnt-group", "remove", "reserve")
    assert "reserve" not in vc.ok("gnt-group", "list", "--no-headers", "-o", "name")


# --- enforcement -------------------------------------------------------------------------

def test_create_without_nic_is_refused_naming_the_spec(vc):
    res = _add(vc, "nonic1", N1, "--no-nics")
    assert res.returncode == 1
    assert "violates policy: nic-count value 0 is not in range [1, 8]" in res.stderr
    res = _add(vc, "tiny1", N1, "-B", "maxmem=64,minmem=64")
    assert res.returncode == 1 and "memory-size value 64 is not in range [128, 32768]" in \
        res.stderr
    assert _instances(vc) == []


def test_create_with_ignore_ipolicy(vc):
    res = _add(vc, "nonic1", N1, "--no-nics", "--ignore-ipolicy")
    assert res.returncode == 0, res.stderr
    assert rows(vc, "name,nic.count", "nonic1") == [["nonic1", "0"]]


def test_create_follows_the_group_policy(vc):
    res = _add(vc, "big3", N3, "-B", "maxmem=512,minmem=512")
    assert res.returncode == 1
    assert "memory-size value 512 is not in range [128, 256]" in res.stderr
    assert "rack2" in res.stderr
    assert _add(vc, "small3", N3, "-B", "maxmem=256,minmem=256").returncode == 0
    assert _add(vc, "big1", N1, "-B", "maxmem=512,minmem=512").returncode == 0


def test_modify_outside_policy(vc):
    res = vc.run("gnt-instance", "modify", "-B", "maxmem=1024", "small3")
    assert res.returncode == 1
    assert "memory-size value 1024 is not in range [128, 256]" in res.stderr
    assert rows(vc, "be/maxmem", "small3") == [["256"]]
    vc.ok("gnt-instance", "modify", "-B", "maxmem=1024", "--ignore-ipolicy", "small3")
    assert rows(vc, "be/maxmem", "small3") == [["1024"]]


def test_failover_into_the_stricter_group(vc):
    res = vc.run("gnt-instance", "failover", "-f", "-n", N3, "big1")
    assert res.returncode == 1
    assert ("Instance big1 does not meet target node group's (rack2) instance policy:"
            " memory-size value 512 is not in range [128, 256]") in res.stderr
    assert rows(vc, "pnode", "big1") == [[N1]]
    # inside its own group nothing is checked
    vc.ok("gnt-instance", "failover", "-f", "-n", N2, "big1")
    vc.ok("gnt-instance", "failover", "-f", "-n", N4, "--ignore-ipolicy", "big1")
    assert rows(vc, "pnode", "big1") == [[N4]]


# --- verify and cluster policy -----------------------------------------------------------

def test_verify_reports_violating_instances(vc):
    out = vc.run("gnt-cluster", "verify", "--error-codes").stdout
    lines = sorted(line[line.index("WARNING:"):] for line in out.splitlines()
                   if "EINSTANCEPOLICY" in line)
    assert lines == [
        "WARNING:EINSTANCEPOLICY:instance:big1:memory-size value 512 is not in range"
        " [128, 256]",
        "WARNING:EINSTANCEPOLICY:instance:nonic1:nic-count value 0 is not in range [1, 8]",
        "WARNING:EINSTANCEPOLICY:instance:small3:memory-size value 1024 is not in range"
        " [128, 256]",
    ]


def test_cluster_modify_and_info(vc):
    res = vc.run("gnt-cluster", "modify", "--ipolicy-vcpu-ratio", "3",
                 "--ipolicy-std-specs", "memory-size=256", "--specs-nic-count", "max=4")
    assert res.returncode == 0, res.stderr
    out = vc.ok("gnt-cluster", "info")
    policy = out[out.index("Instance policy - limits for instances:"):]
    assert "  vcpu-ratio: 3.0\n" in policy
    assert "  std:\n" in policy and "    memory-size: 256\n" in policy
    assert "      nic-count: 4\n" in policy
    # the group's own ratio stays
    assert "    vcpu-ratio: 2.0\n" in vc.ok("gnt-group", "info", "rack2")
    res = vc.run("gnt-cluster", "modify", "--ipolicy-disk-templates", "plain")
    assert res.returncode == 1 and "not enabled on the cluster: plain" in res.stderr
    res = vc.run("gnt-cluster", "modify", "--ipolicy-std-specs", "memory-size=64G")
    assert res.returncode == 1 and "std specs" in res.stderr
    after = vc.ok("gnt-cluster", "info")
    assert after[after.index("Instance policy - limits for instances:"):] == policy


def test_cluster_modify_disk_parameters_and_a_refused_custom_option(vc):
    # gnt-cluster modify -D TEMPLATE:key=val (Ganeti's option), the drbd
    # net-custom checks (doc/storage.md, "DRBD parameters")
    vc.ok("gnt-cluster", "modify", "-D", "drbd:net-custom=--ping-int=7 --ko-count=5,"
          "resync-rate=1000", "-D", "plain:stripes=2")
    out = vc.ok("gnt-cluster", "info")
    assert "net-custom: --ping-int=7 --ko-count=5" in out, out
    assert "resync-rate: 1000" in out and "stripes: 2" in out
    res = vc.run("gnt-cluster", "modify", "-D", "drbd:net-custom=--shared-secret=x")
    assert res.returncode != 0 and "set by Ganeti itself" in res.stderr, res.stderr
    assert vc.ok("gnt-cluster", "info") == out                # nothing changed
    vc.ok("gnt-cluster", "modify", "-D", "drbd:net-custom=,resync-rate=61440",
          "-D", "plain:stripes=1")
