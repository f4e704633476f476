"""Every ``gnt-* info`` prints YAML with Ganeti's keys (doc/commands.md, "info output").

A real 2-node virtual cluster: each info command's stdout is parsed with a
YAML parser (PyYAML's safe loader, as Ganeti's QA reads it) and the keys
Ganeti's QA reads (qa_utils.GetObjectInfo callers: instance name, nodes,
disks, hypervisor parameters, node name and vm_capable, the cluster's and
groups' instance policy, a job's opcodes and execution log) are checked.
Where upstream's own gnt-* are installed (test/integration/upstream_cli.py)
the same commands of upstream, run against our master, are the oracle for
the key sets.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import upstream_cli
import yaml
from instance_helpers import NOCHECK
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(600)

N1, N2 = "node1.vcluster", "node2.vcluster"
FILE1 = "yfile1.example.com"
DLESS1 = "ydless1.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcy"), nodes=2) as cluster:
        cluster.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=16M", "-o", "tinyos",
                   "-n", N1, "-B", "maxmem=128,minmem=128", "-H", "fake:migration_mode=live",
                   "--net", "0:mac=aa:00:00:00:01:01,ip=192.0.2.10,link=br7", *NOCHECK, FILE1)
        cluster.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N2,
                   "--no-start", *NOCHECK, DLESS1)
        yield cluster


def info(vc: Any, *argv: str) -> Any:
    """Parse the stdout of a successful info command as YAML."""
    return yaml.safe_load(vc.ok(*argv))


def test_instance_info_keys_qa_reads(vc):
    (inst,) = info(vc, "gnt-instance", "info", FILE1)
    assert inst["Instance name"] == FILE1
    assert inst["State"] == "configured to be up, actual state is up"
    primary, secondaries = inst["Nodes"]
    assert primary["primary"] == N1 and primary["group"].startswith("default (UUID ")
    assert secondaries == {"secondaries": ""}
    (disk,) = inst["Disks"]
    dtype, size = disk["disk/0"].split(",", 1)
    assert (dtype, size) == ("file", " size 16M")
    assert disk["access mode"] == "rw" and isinstance(disk["logical_id"], list)
    (nic,) = inst["NICs"]
    assert nic["MAC"] == "aa:00:00:00:01:01" and nic["IP"] == "192.0.2.10"
    assert nic["link"] == "br7" and nic["nic/0"] == ""
    hvp = inst["Hypervisor parameters"]
    assert hvp["migration_mode"] == "live"       # the instance's own value
    assert all(str(v).startswith("default (") for k, v in hvp.items() if k != "migration_mode")
    bep = inst["Back-end parameters"]
    assert bep["maxmem"] == 128 and bep["memory"] == "default (128)"
    assert inst["Hypervisor"] == "fake" and inst["Disk template"] == "file"


def test_instance_info_all_and_static(vc):
    both = info(vc, "gnt-instance", "info", "--all")
    assert [i["Instance name"] for i in both] == sorted([FILE1, DLESS1])
    (static,) = info(vc, "gnt-instance", "info", "-s", DLESS1)
    assert static["State"] == "configured to be down" and static["Disks"] == []
    assert static["Nodes"][0]["primary"] == N2


def test_node_info_keys_qa_reads(vc):
    nodes = info(vc, "gnt-node", "info")
    assert [n["Node name"] for n in nodes] == [N1, N2]
    node1 = nodes[0]
    assert node1["vm_capable"] is True and node1["master candidate"] is True
    assert node1["offline"] is False and node1["drained"] is False
    assert node1["primary for instances"] == [FILE1]
    assert node1["secondary for instances"] == []
    assert isinstance(node1["node parameters"], dict) and node1["node parameters"]
    (node2,) = info(vc, "gnt-node", "info", N2)
    assert node2["primary for instances"] == [DLESS1]


def _check_policy(policy: dict[str, Any], cluster: bool) -> None:
    """What QA's ParseIPolicy needs: bounds specs of min/N, max/N, std (cluster)."""
    assert policy["bounds specs"], policy
    for minmax in policy["bounds specs"]:
        assert sorted(k.split("/", 1)[0] for k in minmax) == ["max", "min"]
    assert ("std" in policy) is cluster
    for key in ("vcpu-ratio", "spindle-ratio", "allowed disk templates"):
        assert key in policy
    float(policy["vcpu-ratio"] if cluster else policy["vcpu-ratio"][len("default ("):-1])


def test_cluster_info_keys_qa_reads(vc):
    cluster = info(vc, "gnt-cluster", "info")
    assert cluster["Cluster name"] == "cluster.vcluster" and cluster["Master node"] == N1
    assert isinstance(cluster["Hypervisor parameters"]["fake"], dict)
    assert cluster["Default node parameters"]["oob_program"] is not None
    assert cluster["Cluster parameters"]["file storage path"] == "/srv/ganeti/file-storage"
    assert cluster["Cluster parameters"]["candidate pool size"] == 10
    _check_policy(cluster["Instance policy - limits for instances"], cluster=True)


def test_group_info_keys_qa_reads(vc):
    (group,) = info(vc, "gnt-group", "info", "default")
    assert group["Node group"] == "default" and group["Number of nodes"] == 2
    _check_policy(group["Instance policy"], cluster=False)
    assert isinstance(group["Node parameters"], dict)
    assert isinstance(group["Disk parameters"], dict)


def _job_of(vc: Any, summary: str) -> int:
    out = vc.ok("gnt-job", "list", "--no-headers", "--separator=|", "-o", "id,summary")
    return max(int(i) for i, s in (line.split("|") for line in out.splitlines()) if s == summary)


def test_job_info_opcodes_and_log(vc):
    vc.ok("gnt-debug", "delay", "0.01")
    delay_id = _job_of(vc, "TEST_DELAY(0.01)")
    create_id = _job_of(vc, f"INSTANCE_CREATE({FILE1})")
    delay, create = info(vc, "gnt-job", "info", str(delay_id), str(create_id))
    assert delay["Job ID"] == delay_id and delay["Status"] == "success"
    (op,) = delay["Opcodes"]
    assert op["Opcode"] == "OP_TEST_DELAY" and op["Input fields"]["duration"] == 0.01
    assert op["Input fields"]["OP_ID"] == "OP_TEST_DELAY" and op["Status"] == "success"
    (op,) = create["Opcodes"]
    assert op["Input fields"]["instance_name"] == FILE1
    assert op["Input fields"]["disks"] == [{"size": 16}]
    log = op["Execution log"]
    assert log and all(isinstance(e["Content"][0], int) and isinstance(e["Content"][1], str)
                       and isinstance(e["Time"], str) for e in log)


def test_os_info(vc):
    (name, items), = info(vc, "gnt-os", "info", "tinyos").items()
    assert name == "tinyos"
    props = {k: v for item in items for k, v in item.items()}
    assert props["valid"] is True and props["hidden"] is False
    assert props["API versions"] and isinstance(props["variants"], list)


def test_os_info_of_an_unknown_os_fails(vc):
    res = vc.run("gnt-os", "info", "nosuchos")
    assert res.returncode == 1 and "nosuchos" in res.stderr and "unknown_entity" in res.stderr
    assert res.stdout == ""


# --- upstream's own gnt-* as the oracle for the key sets ----------------------------

@pytest.fixture(scope="module")
def scratch(vc, tmp_path_factory):
    reason = upstream_cli.unusable()
    if reason:
        if os.environ.get(upstream_cli.REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    upstream_cli.prepare_host()
    return str(tmp_path_factory.mktemp("yscratch"))


def _keys(data: Any) -> set[str]:
    if isinstance(data, list):
        return set().union(*(_keys(item) for item in data)) if data else set()
    return set(data) if isinstance(data, dict) else set()


@pytest.mark.parametrize("argv", [
    ("gnt-instance", "info", FILE1), ("gnt-node", "info", N1), ("gnt-group", "info", "default"),
    ("gnt-cluster", "info")], ids=lambda a: " ".join(a[:2]))
def test_our_keys_cover_upstreams(vc, scratch, argv):
    res = upstream_cli.run(vc, scratch, *argv)
    assert res.returncode == 0, res.stdout + res.stderr
    theirs = yaml.safe_load(res.stdout)
    ours = info(vc, *argv)
    assert _keys(theirs) <= _keys(ours), _keys(theirs) - _keys(ours)
    if argv[0] == "gnt-instance":
        for key in ("Nodes", "Disks", "NICs"):
            assert _keys(theirs[0][key]) <= _keys(ours[0][key]), key
