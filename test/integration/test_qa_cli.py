"""Ganeti's QA scenarios for ``info`` and ``list`` (doc/commands.md, doc/compat.md).

Every ``gnt-* info`` prints YAML with Ganeti's keys ("info output"), and
every ``gnt-* list``/``list-fields`` follows Ganeti's QA checks
(qa_utils.GenericQueryTest, GenericQueryFieldsTest): exit code 14 for an
unknown field, names in the order given, the field lists in NiceSort order.

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
import re
import time
from typing import Any

import host_helpers
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
    with VirtualCluster(tmp_path_factory.mktemp("vcy"), nodes=2, use_ssh=False) as cluster:
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
    host_helpers.skip_unless(reason, required_by=upstream_cli.REQUIRE_ENV)
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


# --- list and list-fields ------------------------------------------------------------

LIST_TOOLS = ("gnt-instance", "gnt-node", "gnt-group", "gnt-job", "gnt-backup")


@pytest.mark.parametrize("tool", LIST_TOOLS)
def test_unknown_field_exits_14(vc, tool):
    res = vc.run(tool, "list", "--output=field/does/not/exist")
    assert res.returncode == 14, res.stdout + res.stderr
    assert "unknown fields field/does/not/exist" in res.stderr
    res = vc.run(tool, "list-fields", "field/does/not/exist")
    assert res.returncode == 14, res.stdout + res.stderr
    listed = vc.ok(tool, "list-fields", "--separator=|", "--no-headers")
    assert listed.splitlines() and "field/does/not/exist" not in listed


def _names(vc, tool: str, *names: str, field: str = "name") -> list[str]:
    return vc.ok(tool, "list", "--separator=|", "--no-headers", "--output", field,
                 *names).split()


def test_names_come_back_in_the_order_given(vc):
    vc.ok("gnt-group", "add", "agroup")
    try:
        for tool, field in (("gnt-instance", "name"), ("gnt-node", "name"),
                            ("gnt-group", "name"), ("gnt-job", "id")):
            names = _names(vc, tool, field=field)
            assert len(names) >= 2, (tool, names)
            if tool != "gnt-job":
                assert names == info_nice_sorted(names), (tool, names)
            else:
                assert names == sorted(names, key=int)
            assert _names(vc, tool, *reversed(names), field=field) == names[::-1], tool
            mixed = names[1:] + names[:1]
            assert _names(vc, tool, *mixed, field=field) == mixed, tool
    finally:
        vc.ok("gnt-group", "remove", "agroup")


def info_nice_sorted(names: list[str]) -> list[str]:
    from ganeti.cli.info import nice_sort
    return nice_sort(names)


def test_unknown_names_fail(vc):
    for tool in ("gnt-instance", "gnt-node", "gnt-group"):
        res = vc.run(tool, "list", "this.name.certainly.does.not.exist")
        assert res.returncode != 0, (tool, res.stdout)


def test_our_extensions_are_unlisted_but_answered(vc):
    listed = [line.split("|", 1)[0] for line in vc.ok(
        "gnt-instance", "list-fields", "--separator=|", "--no-headers").splitlines()]
    assert "hv_jobs" not in listed and "disk.modes" not in listed and "name" in listed
    assert "hv/migration_mode" not in listed and "disk.mode/0" not in listed
    named = vc.ok("gnt-instance", "list-fields", "--separator=|", "--no-headers", "hv_jobs",
                  "hv/migration_mode")
    assert [line.split("|")[0] for line in named.splitlines()] == ["hv_jobs",
                                                                   "hv/migration_mode"]
    assert _names(vc, "gnt-instance", FILE1, field="hv/migration_mode") == ["live"]
    assert "networks" not in vc.ok("gnt-group", "list-fields", "--no-headers")


def test_upstream_list_keeps_the_order_given(vc, scratch):
    out = upstream_cli.run(vc, scratch, "gnt-node", "list", "--no-headers", "-o", "name",
                           N2, N1)
    assert out.returncode == 0 and out.stdout.split() == [N2, N1], out.stdout + out.stderr
    res = upstream_cli.run(vc, scratch, "gnt-instance", "list", "-o", "field/does/not/exist")
    assert res.returncode == 14, res.stdout + res.stderr


# --- options Ganeti's QA uses ------------------------------------------------------

def test_print_jobid_on_stdout(vc):
    res = vc.run("gnt-debug", "delay", "--print-jobid", "0.01")
    assert res.returncode == 0, res.stderr
    job_id = int(res.stdout.strip())
    assert _names(vc, "gnt-job", str(job_id), field="status") == ["success"]
    res = vc.run("gnt-debug", "delay", "--submit", "--print-jobid", "0.01")
    assert res.returncode == 0, res.stderr
    job_id = int(res.stdout.strip())
    assert res.stderr.strip() == f"JobID: {job_id}"
    vc.ok("gnt-job", "wait", str(job_id))


def test_cancel_kill_needs_yes_do_it(vc):
    res = vc.run("gnt-debug", "delay", "--submit", "--print-jobid", "-i", "300")
    job_id = res.stdout.strip()
    try:
        res = vc.run("gnt-job", "cancel", "--kill", job_id)
        assert res.returncode == 1 and "--yes-do-it" in res.stderr
        assert _names(vc, "gnt-job", job_id, field="status")[0] in ("queued", "waiting",
                                                                     "running")
    finally:
        vc.ok("gnt-job", "cancel", "--kill", "--yes-do-it", job_id)
    vc.run("gnt-job", "wait", job_id, timeout=120)
    assert _names(vc, "gnt-job", job_id, field="status") == ["canceled"]


def test_every_tool_has_version(vc):
    tools = sorted(name for name in os.listdir(os.path.join(os.path.dirname(__file__), "..", "..",
                                                            "scripts"))
                   if name.startswith("gnt-"))
    assert len(tools) >= 7
    for tool in tools:
        out = vc.ok(tool, "--version")
        assert out.startswith(f"{tool} (ganeti") and out.strip().split()[-1][0].isdigit(), out


def test_node_list_verbose(vc):
    short = vc.ok("gnt-node", "list", "--no-headers", "--separator=|", "-o", "name,hv_state", N1)
    assert short.strip() == f"{N1}|-"
    verbose = vc.ok("gnt-node", "list", "--verbose", "--no-headers", "--separator=|", "-o",
                    "name,hv_state", N1)
    assert verbose.strip() == f"{N1}|(unavail)"


def test_modify_no_hotplug_and_add_opportunistic_locking(vc):
    vc.ok("gnt-instance", "modify", "--no-hotplug", "-B", "vcpus=2", DLESS1)
    assert _names(vc, "gnt-instance", DLESS1, field="be/vcpus") == ["2"]
    res = vc.run("gnt-instance", "modify", "--no-hotplug", "--hotplug", "-B", "vcpus=1", DLESS1)
    assert res.returncode == 2 and "--no-hotplug" in res.stderr
    assert _names(vc, "gnt-instance", DLESS1, field="be/vcpus") == ["2"]
    name = "yopp1.example.com"
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N2, "--no-start",
          "--opportunistic-locking", *NOCHECK, name)
    vc.ok("gnt-instance", "remove", "-f", name)


def test_an_offline_instance_stops_only_with_force_and_stays_offline(vc):
    # Ganeti's QA, TestInstanceStoppedModify: shutdown needs --force, start never works
    name = "yoffline1.example.com"
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N2, "--no-start",
          *NOCHECK, name)
    try:
        vc.ok("gnt-instance", "modify", "--online", name)
        vc.ok("gnt-instance", "modify", "--offline", name)
        res = vc.run("gnt-instance", "shutdown", name)
        assert res.returncode == 1 and "is marked offline" in res.stderr
        out = vc.ok("gnt-instance", "shutdown", "--force", name)
        assert "offline" in out.lower()                     # the check it skipped, said
        assert _names(vc, "gnt-instance", name, field="admin_state") == ["offline"]
        for start in (("startup",), ("startup", "--force")):
            res = vc.run("gnt-instance", *start, name)
            assert res.returncode == 1 and "is marked offline" in res.stderr
        vc.ok("gnt-instance", "modify", "--offline", name)      # offline to offline
        vc.ok("gnt-instance", "modify", "--online", name)
        assert _names(vc, "gnt-instance", name, field="admin_state") == ["down"]
    finally:
        vc.run("gnt-instance", "remove", "-f", name)


def test_export_long_sleep(vc):
    vc.ok("gnt-backup", "export", "--long-sleep", "-n", N2, FILE1)
    assert FILE1 in vc.ok("gnt-backup", "list", "--no-headers", "-o", "export")
    vc.ok("gnt-backup", "remove", FILE1)


# --- behaviour Ganeti's QA checks ----------------------------------------------------

def _wait_job_status(vc, job_id: str, wanted: set[str], rounds: int = 600) -> str:
    import time
    status = ""
    for _ in range(rounds):
        status = _names(vc, "gnt-job", job_id, field="status")[0]
        if status in wanted:
            return status
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} stayed {status}")


def test_kill_ends_a_running_plain_delay(vc):
    res = vc.run("gnt-debug", "delay", "--submit", "--print-jobid", "300")
    job_id = res.stdout.strip()
    _wait_job_status(vc, job_id, {"running"})
    vc.ok("gnt-job", "cancel", "--kill", "--yes-do-it", job_id)
    # bounded by the wait command's own timeout, far below the 300 s delay
    vc.run("gnt-job", "wait", job_id, timeout=120)
    assert _names(vc, "gnt-job", job_id, field="status") == ["canceled"]


def test_boolean_parameters_take_booleans_only(vc):
    before = info(vc, "gnt-cluster", "info")["Default instance parameters"]
    for value in ("1", "yes", "0", "maybe"):
        res = vc.run("gnt-cluster", "modify", "-B", f"auto_balance={value}")
        assert res.returncode != 0 and "auto_balance" in res.stderr, (value, res.stderr)
        res = vc.run("gnt-instance", "modify", "-B", f"auto_balance={value}", DLESS1)
        assert res.returncode != 0 and "auto_balance" in res.stderr, (value, res.stderr)
    assert info(vc, "gnt-cluster", "info")["Default instance parameters"] == before
    vc.ok("gnt-cluster", "modify", "-B", "auto_balance=False")
    try:
        # Ganeti's QA: gnt-cluster info | grep '^ *auto_balance: False$'
        import re
        assert re.search(r"^ *auto_balance: False$", vc.ok("gnt-cluster", "info"), re.M)
    finally:
        vc.ok("gnt-cluster", "modify", "-B", "auto_balance=True")


def _verify_ok(vc) -> bool:
    return vc.run("gnt-cluster", "verify", timeout=300).returncode == 0


def test_verify_refuses_a_forbidden_file_storage_dir(vc):
    assert _verify_ok(vc)
    before = info(vc, "gnt-cluster", "info")["Cluster parameters"]["file storage path"]
    vc.ok("gnt-cluster", "modify", "--file-storage-dir=/boot/")
    try:
        res = vc.run("gnt-cluster", "verify", timeout=300)
        assert res.returncode != 0 and "file storage path '/boot" in res.stdout + res.stderr
    finally:
        vc.ok("gnt-cluster", "modify", f"--file-storage-dir={before}")
    assert _verify_ok(vc)
    # unset while file storage is enabled: refused, as Ganeti (its QA's
    # TestClusterModifyFileStorageDir), and nothing changes
    for option, template in (("--file-storage-dir=", "file"),
                             ("--shared-file-storage-dir=", "sharedfile")):
        res = vc.run("gnt-cluster", "modify", option)
        assert res.returncode == 1 and f"Unsetting the '{template}' storage" in res.stderr
    assert info(vc, "gnt-cluster", "info")["Cluster parameters"]["file storage path"] == before


def test_verify_checks_the_oob_program(vc):
    prog = "/opt/yoob-helper"
    vc.ok("gnt-cluster", "modify", "--node-parameters", "oob_program=/opt/yoob-missing")
    try:
        res = vc.run("gnt-cluster", "verify", timeout=300)
        assert res.returncode != 0 and "out of band path '/opt/yoob-missing' does not exist" \
            in res.stdout + res.stderr
        for node in (N1, N2):
            local = vc.paths(node).root + prog
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "w") as fh:
                fh.write("#!/bin/sh\nexit 0\n")
            os.chmod(local, 0o400)
        vc.ok("gnt-cluster", "modify", "--node-parameters", f"oob_program={prog}")
        res = vc.run("gnt-cluster", "verify", timeout=300)
        assert res.returncode != 0 and "not executable" in res.stdout + res.stderr
        # with an out-of-band program, the power state is known (Ganeti's QA, TestClusterEpo)
        assert _powered(vc) == ["Y", "Y"]
        for node in (N1, N2):
            os.chmod(vc.paths(node).root + prog, 0o500)
        assert _verify_ok(vc)
    finally:
        vc.ok("gnt-cluster", "modify", "--node-parameters", "oob_program=")
    assert _powered(vc) == ["(unavail)", "(unavail)"]       # and without, unavailable


def _powered(vc) -> list[str]:
    return vc.ok("gnt-node", "list", "--verbose", "--no-headers", "-o", "powered").split()


# --- verbs and options of Ganeti's QA (issue 34, points 3-4) --------------------------

def _ssconf(vc, node: str, key: str) -> str:
    with open(os.path.join(vc.paths(node).data_dir, f"ssconf_{key}")) as fh:
        return fh.read().strip()


def _wait_ssconf(vc, node: str, key: str, wanted: str, rounds: int = 300,
                 part: bool = False) -> None:
    """Wait (bounded) until ssconf ``key`` of ``node`` is ``wanted`` (or contains it)."""
    import time
    value = ""
    for _ in range(rounds):
        value = _ssconf(vc, node, key)
        if value == wanted or (part and wanted in value.splitlines()):
            return
        time.sleep(0.1)
    raise AssertionError(f"ssconf_{key} of {node} stayed {value!r}, not {wanted!r}")


def test_cluster_rename_and_back(vc):
    hosts = os.path.join(vc.directory, "hosts")
    with open(hosts) as fh:
        original = fh.read()
    master_ip = vc.cluster.nodes[0].ip
    with open(hosts, "a") as fh:
        fh.write(f"{master_ip} yrenamed.vcluster\n")
    try:
        res = vc.run("gnt-cluster", "rename", "yrenamed.vcluster")
        assert res.returncode == 1 and "--force" in res.stderr          # asks first
        res = vc.run("gnt-cluster", "rename", "-f", "not-in-any.hosts-file.invalid")
        assert res.returncode != 0 and "Cannot resolve the new cluster name" in res.stderr
        assert info(vc, "gnt-cluster", "info")["Cluster name"] == "cluster.vcluster"
        out = vc.ok("gnt-cluster", "rename", "-f", "yrenamed.vcluster")
        assert "Cluster renamed from 'cluster.vcluster' to 'yrenamed.vcluster'" in out
        cluster = info(vc, "gnt-cluster", "info")
        assert cluster["Cluster name"] == "yrenamed.vcluster"
        _wait_ssconf(vc, N2, "cluster_name", "yrenamed.vcluster")
        assert _ssconf(vc, N2, "master_ip") == master_ip               # same address
    finally:
        vc.run("gnt-cluster", "rename", "-f", "cluster.vcluster")
        with open(hosts, "w") as fh:
            fh.write(original)
    assert info(vc, "gnt-cluster", "info")["Cluster name"] == "cluster.vcluster"
    _wait_ssconf(vc, N2, "cluster_name", "cluster.vcluster")


def _disk_file(vc, instance: str, node: str) -> str:
    (inst,) = info(vc, "gnt-instance", "info", instance)
    _driver, path = inst["Disks"][0]["logical_id"]
    return vc.paths(node).root + path


def test_repair_disk_sizes(vc):
    path = _disk_file(vc, FILE1, N1)
    assert os.path.getsize(path) == 16 << 20
    assert vc.ok("gnt-cluster", "repair-disk-sizes") == ""
    os.truncate(path, 17 << 20)
    try:
        out = vc.ok("gnt-cluster", "repair-disk-sizes", FILE1)
        assert f"Disk 0 of instance {FILE1}: size is now 17" in out
        (inst,) = info(vc, "gnt-instance", "info", "-s", FILE1)
        assert inst["Disks"][0]["disk/0"] == "file, size 17M"
    finally:
        os.truncate(path, 16 << 20)
        vc.ok("gnt-cluster", "repair-disk-sizes")
    (inst,) = info(vc, "gnt-instance", "info", "-s", FILE1)
    assert inst["Disks"][0]["disk/0"] == "file, size 16M"
    res = vc.run("gnt-cluster", "repair-disk-sizes", "no.such.instance")
    assert res.returncode != 0 and "no.such.instance" in res.stderr


def test_show_ispecs_cmd(vc):
    out = vc.ok("gnt-cluster", "show-ispecs-cmd").strip()
    assert out.startswith("gnt-cluster init --ipolicy-std-specs ") and \
        " --ipolicy-bounds-specs min:" in out and out.endswith(" cluster.vcluster")


def test_os_modify(vc):
    vc.ok("gnt-os", "modify", "--hidden", "yes", "--blacklisted", "yes", "-H",
          "fake:migration_mode=live", "tinyos")
    try:
        assert "tinyos+default" not in vc.ok("gnt-os", "list", "--no-headers").split()
        (name, items), = info(vc, "gnt-os", "info", "tinyos").items()
        props = {k: v for item in items for k, v in item.items()}
        assert props["hidden"] is True and props["blacklisted"] is True
        cluster = info(vc, "gnt-cluster", "info")
        assert cluster["Hidden OSes"] == "tinyos" and cluster["Blacklisted OSes"] == "tinyos"
        assert cluster["OS-specific hypervisor parameters"]["tinyos"]["fake"] == {
            "migration_mode": "live"}
        res = vc.run("gnt-os", "modify", "tinyos")
        assert res.returncode == 1 and "At least one of" in res.stderr
        res = vc.run("gnt-os", "modify", "-H", "fake:no_such_param=1", "tinyos")
        assert res.returncode != 0 and "no_such_param" in res.stderr
    finally:
        vc.ok("gnt-os", "modify", "--hidden", "no", "--blacklisted", "no", "-H",
              "fake:-migration_mode", "tinyos")
    assert "tinyos+default" in vc.ok("gnt-os", "list", "--no-headers").split()
    cluster = info(vc, "gnt-cluster", "info")
    assert not cluster["Hidden OSes"] and not cluster["Blacklisted OSes"]
    assert not cluster["OS-specific hypervisor parameters"]


def test_node_list_drbd(vc):
    # Ganeti's QA TestNodeListDrbd: a node without DRBD disks prints nothing with
    # --no-header; the header names Ganeti's columns; an unknown node fails
    assert vc.ok("gnt-node", "list-drbd", "--no-header", N1).strip() == ""
    assert vc.ok("gnt-node", "list-drbd", N2).split() == [
        "Node", "Minor", "Instance", "Disk", "Role", "PeerNode"]
    res = vc.run("gnt-node", "list-drbd", "nosuch.vcluster")
    assert res.returncode != 0 and "nosuch.vcluster" in res.stderr


def test_os_modify_hypervisors_not_running(vc):
    # Ganeti's QA TestOsModifyValid/-Invalid/TestOsStatesNonExisting on an OS that does
    # not exist: xen-pvm and xen-hvm parameters are taken (checked by name and type),
    # an unknown hypervisor is refused
    qa_os = "TEMP-Ganeti-QA-OS"
    try:
        vc.ok("gnt-os", "modify", "-H", "xen-pvm:root_path=/dev/sda5", "-H",
              "xen-hvm:acpi=False,pae=True", qa_os)
        res = vc.run("gnt-os", "modify", "-H", "blahblahblubb:bar=", qa_os)
        assert res.returncode != 0 and "blahblahblubb" in res.stderr
        res = vc.run("gnt-os", "modify", "-H", "xen-hvm:pae=maybe", qa_os)
        assert res.returncode != 0 and "pae" in res.stderr
        res = vc.run("gnt-os", "modify", "-H", "xen-pvm:pae=true", qa_os)
        assert res.returncode != 0 and "pae" in res.stderr
        for flag in ("--hidden", "--blacklisted"):
            for value in ("yes", "no"):
                vc.ok("gnt-os", "modify", flag, value, qa_os)
                vc.ok("gnt-os", "modify", flag, value, qa_os)
        # stored, but not shown: as Ganeti's, the cluster's information leaves out the
        # hypervisors that are not enabled
        assert info(vc, "gnt-cluster", "info")["OS-specific hypervisor parameters"][
            qa_os] in ({}, None)
        vc.ok("gnt-os", "modify", "-H", "fake:migration_mode=live", qa_os)
        assert info(vc, "gnt-cluster", "info")["OS-specific hypervisor parameters"][
            qa_os] == {"fake": {"migration_mode": "live"}}
    finally:
        vc.ok("gnt-os", "modify", "-H", "xen-pvm:root_path=default", "-H",
              "xen-hvm:acpi=default,pae=default", "-H", "fake:migration_mode=default", qa_os)
    assert not info(vc, "gnt-cluster", "info")["OS-specific hypervisor parameters"]


def test_job_cancellation_of_a_delay_waiting_for_the_first(vc):
    # Ganeti's QA TestJobCancellation: the second delay waits for the master node's
    # lock, held by the first; it is cancelled, watching it fails
    first = vc.run("gnt-debug", "delay", "--submit", "10.0")
    first_id = re.findall(r"JobID: ([0-9]+)", first.stdout + first.stderr)
    assert first.returncode == 0 and len(first_id) == 1
    try:
        second = vc.run("gnt-debug", "delay", "--submit", "3.0")
        (job_id,) = re.findall(r"JobID: ([0-9]+)", second.stdout + second.stderr)
        for _ in range(50):                 # waiting for the lock, not running beside it
            status = vc.ok("gnt-job", "list", "--no-headers", "-o", "status", job_id).strip()
            if status != "queued":
                break
            time.sleep(0.1)
        assert status == "waiting", status
        vc.ok("gnt-job", "cancel", job_id)
        assert vc.run("gnt-job", "watch", job_id).returncode != 0
        assert vc.ok("gnt-job", "list", "--no-headers", "-o", "status", job_id).strip() \
            == "canceled"
        assert vc.ok("gnt-job", "list", "--no-headers", "-o", "status",
                     first_id[0]).strip() == "running"
    finally:
        vc.run("gnt-job", "cancel", "--kill", "--yes-do-it", first_id[0])


def _cluster_param(vc, label: str) -> Any:
    params = info(vc, "gnt-cluster", "info")["Cluster parameters"]
    return params[label]


def test_cluster_modify_image_network_tracked_jobs(vc):
    tracked = "maximal number of jobs simultaneously tracked by the scheduler"
    before = _cluster_param(vc, tracked)
    vc.ok("gnt-cluster", "modify", "--install-image", "/srv/images/install.img",
          "--instance-communication-network", "ycomm-net", "--max-tracked-jobs", "31")
    try:
        assert _cluster_param(vc, "install image") == "/srv/images/install.img"
        assert _cluster_param(vc, "instance communication network") == "ycomm-net"
        # the network is made and connected (test_instance_communication.py)
        assert vc.ok("gnt-network", "list", "--no-headers", "-o", "group_cnt",
                     "ycomm-net").strip() == str(len(vc.ok(
                         "gnt-group", "list", "--no-headers", "-o", "name").split()))
        assert _cluster_param(vc, tracked) == 31
        for argv in (("--install-image", "relative.img"),
                     ("--instance-communication-network", "bad name"),
                     ("--max-tracked-jobs", "0")):
            res = vc.run("gnt-cluster", "modify", *argv)
            assert res.returncode != 0, argv
        assert _cluster_param(vc, "install image") == "/srv/images/install.img"
        assert _cluster_param(vc, tracked) == 31
    finally:
        vc.ok("gnt-cluster", "modify", "--install-image", "",
              "--instance-communication-network", "", "--max-tracked-jobs", str(before))
        vc.run("gnt-network", "disconnect", "ycomm-net")
        vc.run("gnt-network", "remove", "ycomm-net")
    assert not _cluster_param(vc, "install image")


def test_node_modify_secondary_ip(vc):
    original = vc.ok("gnt-node", "list", "--no-headers", "-o", "sip", N2).strip()
    vc.ok("gnt-node", "modify", "--secondary-ip", "192.0.2.77", N2)
    try:
        assert vc.ok("gnt-node", "list", "--no-headers", "-o", "sip", N2).strip() == \
            "192.0.2.77"
        (node,) = info(vc, "gnt-node", "info", N2)
        assert node["secondary ip"] == "192.0.2.77"
        _wait_ssconf(vc, N2, "node_secondary_ips", f"{N2} 192.0.2.77", part=True)
        n1_sip = vc.ok("gnt-node", "list", "--no-headers", "-o", "sip", N1).strip()
        res = vc.run("gnt-node", "modify", "-s", n1_sip, N2)
        assert res.returncode != 0 and "already used by node" in res.stderr
    finally:
        vc.ok("gnt-node", "modify", "--secondary-ip", original, N2)
    assert vc.ok("gnt-node", "list", "--no-headers", "-o", "sip", N2).strip() == original


def test_upstream_runs_the_new_verbs(vc, scratch):
    ours = vc.ok("gnt-cluster", "show-ispecs-cmd").strip()
    res = upstream_cli.run(vc, scratch, "gnt-cluster", "show-ispecs-cmd")
    assert res.returncode == 0 and res.stdout.strip() == ours, res.stdout + res.stderr
    res = upstream_cli.run(vc, scratch, "gnt-cluster", "repair-disk-sizes")
    assert res.returncode == 0, res.stdout + res.stderr
    res = upstream_cli.run(vc, scratch, "gnt-os", "modify", "--hidden=yes", "tinyos")
    assert res.returncode == 0, res.stdout + res.stderr
    try:
        assert info(vc, "gnt-cluster", "info")["Hidden OSes"] == "tinyos"
    finally:
        res = upstream_cli.run(vc, scratch, "gnt-os", "modify", "--hidden=no", "tinyos")
        assert res.returncode == 0, res.stdout + res.stderr
    assert not info(vc, "gnt-cluster", "info")["Hidden OSes"]


def test_upstream_cluster_rename(vc, scratch):
    hosts = os.path.join(vc.directory, "hosts")
    with open(hosts) as fh:
        original = fh.read()
    with open(hosts, "a") as fh:
        fh.write(f"{vc.cluster.nodes[0].ip} yupstream.vcluster\n")
    try:
        res = upstream_cli.run(vc, scratch, "gnt-cluster", "rename", "-f", "yupstream.vcluster")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Cluster renamed from 'cluster.vcluster' to 'yupstream.vcluster'" in res.stdout
        assert info(vc, "gnt-cluster", "info")["Cluster name"] == "yupstream.vcluster"
    finally:
        vc.run("gnt-cluster", "rename", "-f", "cluster.vcluster")
        with open(hosts, "w") as fh:
            fh.write(original)
    assert info(vc, "gnt-cluster", "info")["Cluster name"] == "cluster.vcluster"


def test_node_volumes(vc):
    path = _disk_file(vc, FILE1, N1)[len(vc.paths(N1).root):]
    out = vc.ok("gnt-node", "volumes", "--no-headers", "--separator=|", N1)
    rows = [line.split("|") for line in out.splitlines()]
    assert [N1, path, os.path.dirname(os.path.dirname(path)),
            os.path.relpath(path, os.path.dirname(os.path.dirname(path))), "16", FILE1] in rows
    header = vc.ok("gnt-node", "volumes", N1).splitlines()[0].split()
    assert header == ["Node", "PhysDev", "VG", "Name", "Size", "Instance"]
    assert vc.ok("gnt-node", "volumes", "--no-headers", "-o", "instance", N2).split() == []
    res = vc.run("gnt-node", "volumes", "-o", "pv", N1)
    assert res.returncode != 0 and "Unknown output fields" in res.stderr


def test_upstream_node_volumes(vc, scratch):
    ours = vc.ok("gnt-node", "volumes", "--no-headers", "--separator=|", "--units=m")
    res = upstream_cli.run(vc, scratch, "gnt-node", "volumes", "--no-headers",
                           "--separator=|", "--units=m")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == ours


def test_upstream_test_jobqueue(vc, scratch):
    res = upstream_cli.run(vc, scratch, "gnt-debug", "test-jobqueue", timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Job queue test successful" in res.stdout


def test_our_test_jobqueue(vc):
    out = vc.ok("gnt-debug", "test-jobqueue", timeout=600)
    for line in ("Job submission tests were successful", "Job dependency tests were successful",
                 "Ignoring error for 'job fail' test", "Job queue test successful"):
        assert line in out, out


def test_group_show_ispecs_cmd_matches_upstream(vc, scratch):
    for argv in ((), ("--include-defaults", "default")):
        ours = vc.ok("gnt-group", "show-ispecs-cmd", *argv)
        res = upstream_cli.run(vc, scratch, "gnt-group", "show-ispecs-cmd", *argv)
        assert res.returncode == 0 and res.stdout == ours, (argv, ours, res.stdout + res.stderr)
    assert ours.startswith("gnt-group add --ipolicy-bounds-specs min:")
    assert vc.ok("gnt-group", "show-ispecs-cmd") == "gnt-group add default\n"
