"""Ganeti 3.0's own CLI and htools, unchanged, against our master (doc/compat.md).

Each case runs an upstream command through test/integration/upstream_cli.py
(private mount namespace, Debian's python3) and then checks the cluster's
state through our own CLI.  The cases follow the order of the issue's list
(doc/compat.md, "Upstream commands"); they share one cluster and run in
file order (add before info, ..., remove last).
"""

from __future__ import annotations

import json
import os

import host_helpers
import pytest
import upstream_cli
from extstorage_helpers import make_provider
from instance_helpers import rows
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(900)

N1, N2 = "node1.vcluster", "node2.vcluster"
LUXI_DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_luxi_driver.py")
INST = "up1.example.com"
NEW_NAME = "up2.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    reason = upstream_cli.unusable()
    host_helpers.skip_unless(reason, required_by=upstream_cli.REQUIRE_ENV)
    upstream_cli.prepare_host()
    with VirtualCluster(tmp_path_factory.mktemp("vcup"), nodes=2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("upscratch"))


def up(vc, scratch, tool: str, *args: str) -> str:
    """Run an upstream command that must succeed; its stdout."""
    res = upstream_cli.run(vc, scratch, tool, *args)
    assert res.returncode == 0, f"{tool} {args} failed ({res.returncode}):\n{res.stdout}{res.stderr}"
    return res.stdout


def test_upstream_library_is_debians(vc, scratch):
    # the gnt-* scripts import upstream's package, not ours
    res = upstream_cli.run(vc, scratch, "gnt-debug", "--version")
    assert res.returncode == 0 and "3.0" in res.stdout, res.stdout + res.stderr


def test_node_list(vc, scratch):
    out = up(vc, scratch, "gnt-node", "list", "--no-headers", "-o", "name,role")
    assert dict(line.split() for line in out.splitlines()) == vc.roles()


def test_job_list_and_debug_delay(vc, scratch):
    up(vc, scratch, "gnt-debug", "delay", "0.01")
    out = up(vc, scratch, "gnt-job", "list", "--no-headers", "-o", "id,status,summary")
    assert "TEST_DELAY(0.01)" in out
    ours = vc.ok("gnt-job", "list", "--no-headers", "-o", "summary")
    assert "TEST_DELAY(0.01)" in ours


def test_cluster_version_getmaster_verify(vc, scratch):
    assert "Software version: " in up(vc, scratch, "gnt-cluster", "version")
    assert up(vc, scratch, "gnt-cluster", "getmaster").strip() == N1
    up(vc, scratch, "gnt-cluster", "verify")
    assert vc.run("gnt-cluster", "verify").returncode == 0


def test_node_info(vc, scratch):
    out = up(vc, scratch, "gnt-node", "info", N2)
    assert f"Node name: {N2}" in out and "master candidate: True" in out


def test_cluster_info(vc, scratch):
    out = up(vc, scratch, "gnt-cluster", "info")
    assert "Cluster name: cluster.vcluster" in out
    assert f"Master node: {N1}" in out
    assert "mac prefix: aa:00:00" in out
    ours = vc.ok("gnt-cluster", "info")
    assert "cluster.vcluster" in ours and N1 in ours


def test_group_info(vc, scratch):
    out = up(vc, scratch, "gnt-group", "info", "default")
    assert "Node group: default" in out
    assert "default" in vc.ok("gnt-group", "list", "--no-headers", "-o", "name")


def test_os_diagnose(vc, scratch):
    out = up(vc, scratch, "gnt-os", "diagnose")
    assert "OS: tinyos [global status: valid]" in out
    assert f"Node: {N2}, status: valid" in out
    assert "valid" in vc.ok("gnt-os", "diagnose")


def test_os_list(vc, scratch):
    out = up(vc, scratch, "gnt-os", "list", "--no-headers")
    assert "tinyos+default" in out.split()


def test_instance_add(vc, scratch):
    up(vc, scratch, "gnt-instance", "add", "-t", "file", "--disk", "0:size=16M", "-o", "tinyos",
       "-n", N1, "-B", "maxmem=128,minmem=128", "--no-name-check", "--no-ip-check", INST)
    assert rows(vc, "name,status,pnode,disk_template", INST) == \
        [[INST, "running", N1, "file"]]


def test_instance_info(vc, scratch):
    out = up(vc, scratch, "gnt-instance", "info", INST)
    assert f"Instance name: {INST}" in out
    assert f"primary: {N1}" in out and "group: default (UUID " in out
    assert "MAC: aa:00:00:" in out


def test_instance_console(vc, scratch):
    # upstream's client reads the "console" query field and checks it is an
    # InstanceConsole: here the fake hypervisor's message, printed as is
    out = up(vc, scratch, "gnt-instance", "console", INST)
    assert f"Console not available for fake hypervisor (instance {INST} on node {N1}" in out
    up(vc, scratch, "gnt-instance", "shutdown", INST)
    res = upstream_cli.run(vc, scratch, "gnt-instance", "console", INST)
    assert res.returncode != 0 and f"Instance {INST} is not running" in res.stderr, \
        res.stdout + res.stderr
    up(vc, scratch, "gnt-instance", "startup", INST)


def test_instance_shutdown_startup_reboot(vc, scratch):
    up(vc, scratch, "gnt-instance", "shutdown", INST)
    assert rows(vc, "status", INST) == [["ADMIN_down"]]
    up(vc, scratch, "gnt-instance", "startup", INST)
    assert rows(vc, "status", INST) == [["running"]]
    up(vc, scratch, "gnt-instance", "reboot", INST)
    assert rows(vc, "status", INST) == [["running"]]


def test_instance_modify(vc, scratch):
    up(vc, scratch, "gnt-instance", "modify", "-B", "maxmem=192,minmem=192", INST)
    assert rows(vc, "be/maxmem", INST) == [["192"]]


def test_instance_private_and_secret_os_parameters(vc, scratch):
    # upstream's --os-parameters-private/--os-parameters-secret (PrivateDict over
    # LUXI) are accepted; the private value is kept, the secret one is not
    private, secret = "upstream-private-1", "zero"
    up(vc, scratch, "gnt-instance", "shutdown", INST)
    up(vc, scratch, "gnt-instance", "reinstall", "-f", "--os-parameters-private",
       f"hostname_prefix={private}", "--os-parameters-secret", f"fill={secret}", INST)
    up(vc, scratch, "gnt-instance", "modify", "--os-parameters-private",
       f"hostname_prefix={private}-2", INST)
    with open(vc.paths(N1).config_file) as fh:
        config = json.load(fh)
    inst = [i for i in config["instances"].values() if i["name"] == INST][0]
    assert inst["osparams_private"] == {"hostname_prefix": f"{private}-2"}
    up(vc, scratch, "gnt-instance", "startup", INST)


def test_instance_tags(vc, scratch):
    up(vc, scratch, "gnt-instance", "add-tags", INST, "upstream-tag")
    assert "upstream-tag" in vc.ok("gnt-instance", "list-tags", INST).split()
    out = up(vc, scratch, "gnt-instance", "list-tags", INST)
    assert "upstream-tag" in out.split()


def test_job_info_watch_archive(vc, scratch):
    res = upstream_cli.run(vc, scratch, "gnt-debug", "delay", "--submit", "0.01")
    assert res.returncode == 0, res.stderr
    job = (res.stdout + res.stderr).split("JobID:")[1].split()[0]   # printed to stderr
    vc.ok("gnt-job", "wait", job)
    assert f"Job ID: {job}" in up(vc, scratch, "gnt-job", "info", job)
    assert f"Output from job {job} follows" in up(vc, scratch, "gnt-job", "watch", job)
    up(vc, scratch, "gnt-job", "archive", job)
    listed = vc.ok("gnt-job", "list", "--no-headers", "-o", "id").split()
    assert job not in listed


def test_progress_entries_in_upstream_clients(vc, scratch):
    # a throttled fake migration writes typed "progress" log entries
    # (doc/progress.md): upstream's clients print a type they do not know with str()
    name = "upprog.example.com"
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N1,
          "-B", "maxmem=128,minmem=128", "-H", "migration_bandwidth=64", "--no-name-check",
          "--no-ip-check", name)
    out = up(vc, scratch, "gnt-instance", "migrate", "-f", "-n", N2, name)
    assert "'op': 'migration'" in out and "'done': True" in out, out
    res = upstream_cli.run(vc, scratch, "gnt-instance", "migrate", "--submit", "-f", "-n", N1,
                           name)
    assert res.returncode == 0, res.stderr
    job = (res.stdout + res.stderr).split("JobID:")[1].split()[0]
    watched = up(vc, scratch, "gnt-job", "watch", job)
    assert watched.count("'done': True") == 1, watched
    assert "progress" in up(vc, scratch, "gnt-job", "info", job)
    assert rows(vc, "pnode", name) == [[N1]]
    vc.ok("gnt-instance", "remove", "-f", name)


def test_job_filter_rules(vc, scratch):
    # doc/jobfilters.md: upstream's gnt-filter makes, shows and removes rules on our master
    uuid = up(vc, scratch, "gnt-filter", "add", "--reason", "qa pink bunny", "--action",
              "REJECT", "--predicates",
              '[["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]').strip()
    try:
        listed = up(vc, scratch, "gnt-filter", "list", "--no-headers", "--output=uuid")
        assert listed.split() == [uuid]
        # a rule named on the command line by its UUID (upstream's QA does it with ours)
        for run in (vc.ok, lambda *a: up(vc, scratch, *a)):
            assert run("gnt-filter", "list", "--no-headers", "-o", "uuid", uuid).split() == [uuid]
        lines = up(vc, scratch, "gnt-filter", "info", uuid).splitlines()
        assert lines[0] == f"UUID: {uuid}" and lines[4] == "  Action: REJECT"
        assert int(lines[1].split("Watermark: ")[1]) >= 1
        fields = up(vc, scratch, "gnt-filter", "list-fields", "--no-headers")
        assert sorted(f.split()[0] for f in fields.splitlines()) == [
            "action", "predicates", "priority", "reason_trail", "uuid", "watermark"]
        # the rule works on upstream's own submissions and on ours
        res = upstream_cli.run(vc, scratch, "gnt-debug", "delay", "0.01")
        assert res.returncode != 0
        ours = vc.run("gnt-debug", "delay", "0.01")
        assert ours.returncode != 0 and uuid in ours.stdout + ours.stderr
        up(vc, scratch, "gnt-filter", "replace", "--action", "RATE_LIMIT 3", uuid)
        assert "RATE_LIMIT,3" in vc.ok("gnt-filter", "list", "--no-headers", "-o", "action")
    finally:
        up(vc, scratch, "gnt-filter", "delete", uuid)
    assert vc.ok("gnt-filter", "list", "--no-headers").strip() == ""
    up(vc, scratch, "gnt-debug", "delay", "0.01")


def test_extstorage_providers(vc, scratch):
    # doc/commands.md, "gnt-storage": upstream's gnt-storage prints what ours prints
    path = make_provider(vc, N1, "upext", params="size Size in MiB\n")
    make_provider(vc, N2, "upext", params="size Size in MiB\n", skip=("attach",))
    outputs = {}
    for verb in (("diagnose",), ("info",), ("info", "upext", "nosuch")):
        outputs[verb] = up(vc, scratch, "gnt-storage", *verb)
        assert outputs[verb] == vc.ok("gnt-storage", *verb), verb
    diag = outputs[("diagnose",)].splitlines()
    assert diag[:3] == ["Provider: upext", "---",
                        f"  Node: {N1}, status: valid (path: {path}) [parameters: size]"]
    assert diag[3] == (f"  Node: {N2}, status: invalid - File 'attach' under path '{path}'"
                       f" is missing (path: {path}) [no parameters]")
    assert diag[4:] == ["  --", "  For nodegroup: default --> invalid", ""]
    assert outputs[("info",)] == "upext:\n  - Invalid for all nodegroups\n\n"
    assert outputs[("info", "upext", "nosuch")].endswith("\nnosuch: Not Found\n\n")


def test_networks(vc, scratch):
    # doc/networks.md: upstream's gnt-network adds, shows, connects and removes networks
    up(vc, scratch, "gnt-network", "add", "--network=198.51.100.0/29",
       "--gateway=198.51.100.1", "--add-reserved-ips=198.51.100.3", "upnet")
    try:
        out = up(vc, scratch, "gnt-network", "list", "--no-headers", "-o",
                 "name,network,gateway,free_count,map")
        assert out.split() == ["upnet", "198.51.100.0/29", "198.51.100.1", "4", "XX.X...X"]
        up(vc, scratch, "gnt-network", "connect", "-N", "mode=bridged,link=br9", "upnet")
        info = up(vc, scratch, "gnt-network", "info", "upnet")
        assert "Network name: upnet" in info and "  Free: 4 (50.00%)" in info
        assert "default (mode:bridged link:br9 vlan:" in info
        fields = up(vc, scratch, "gnt-network", "list-fields", "--no-headers")
        assert {f.split()[0] for f in fields.splitlines()} == {
            f.split()[0] for f in vc.ok("gnt-network", "list-fields", "--no-headers").splitlines()}
        up(vc, scratch, "gnt-network", "modify", "--add-reserved-ips=198.51.100.4", "upnet")
        assert vc.ok("gnt-network", "list", "--no-headers", "-o", "map", "upnet").strip() \
            == "XX.XX..X"
        # upstream's gnt-instance puts NICs on the network: an address from the pool
        # (the lowest free one), one given, and --no-conflicts-check
        name = "netinst.example.com"
        up(vc, scratch, "gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", N2,
           "--no-start", "--no-name-check", "--no-ip-check", "--net", "0:network=upnet,ip=pool",
           "--net", "1:network=upnet,ip=198.51.100.6", name)
        assert rows(vc, "nic.ips,nic.networks.names,nic.links", name) == \
            [["198.51.100.2,198.51.100.6", "upnet,upnet", "br9,br9"]]
        info = up(vc, scratch, "gnt-network", "info", "upnet")
        assert name in info
        up(vc, scratch, "gnt-instance", "modify", "--no-conflicts-check", "--net",
           "1:ip=198.51.100.4", name)
        assert rows(vc, "nic.ips", name) == [["198.51.100.2,198.51.100.4"]]
        up(vc, scratch, "gnt-instance", "remove", "-f", name)
        assert vc.ok("gnt-network", "list", "--no-headers", "-o", "map", "upnet").strip() \
            == "XX.XX..X"
        up(vc, scratch, "gnt-network", "disconnect", "upnet")
    finally:
        vc.run("gnt-instance", "remove", "-f", "netinst.example.com")
        up(vc, scratch, "gnt-network", "remove", "upnet")
    assert vc.ok("gnt-network", "list", "--no-headers").strip() == ""


def test_debug_locks(vc, scratch):
    out = up(vc, scratch, "gnt-debug", "locks")
    assert "cluster/BGL" in out


def test_upstream_luxi_client_script(vc, scratch):
    r = json.loads(up(vc, scratch, LUXI_DRIVER))
    assert r["module"] == "/usr/share/ganeti/3.0/ganeti/luxi.py"   # upstream's client
    assert r["info_name"] == "cluster.vcluster"
    assert sorted(r["nodes"]) == sorted([name, role] for name, role in vc.roles().items())
    assert r["instances"] == [[INST, "running", 192]]
    assert r["groups"] == [["default", 2]] and r["networks"] == []
    assert r["exports"] == {N1: [], N2: []}
    assert r["config"] == ["cluster.vcluster", N1]
    assert [row[0] for row in r["query"]] == [[0, N1], [0, N2]]
    assert r["fields"] == ["name", "vcpus"]
    assert r["jobs"] == [[r["job"], "success"]] and "luxi-script" in r["tags"]
    assert "luxi-script" in vc.ok("gnt-cluster", "list-tags").split()
    # the client's job-queue methods, argument order and result shapes as upstream's
    assert r["drain_set"] is True and r["drain_unset"] is True    # as Ganeti's luxid
    assert r["drained_submit_error"] == "JobQueueDrainError"
    assert r["many_ok"] == [True, True]
    assert r["wait_once"] == [["success"], []]
    assert r["priority"][0] is True, r["priority"]
    assert r["cancel"][0] is True, r["cancel"]
    assert r["slow_status"][0] in (["canceled"], ["canceling"])
    vc.run("gnt-job", "wait", str(r["slow_id"]), timeout=20)   # interrupted: not 30 s
    assert "Status: canceled" in vc.ok("gnt-job", "info", str(r["slow_id"]))  # (archived)
    assert r["archive"] is True
    assert r["archived_query"] == [[r["archived_id"]]]   # still found by id, as 3.0 (archive)
    archived, left = r["autoarchive"]
    assert archived >= 3 and left == 0
    assert r["filters"] == []        # job filter rules (doc/jobfilters.md): none left


def test_instance_list_params(vc, scratch):
    out = up(vc, scratch, "gnt-instance", "list", "--no-headers", "-o", "name,be/maxmem", INST)
    assert out.split() == [INST, "192M"]


def test_instance_list_upstream_field_names(vc, scratch):
    out = up(vc, scratch, "gnt-instance", "list", "--no-headers", "-o",
             "name,be/memory,vcpus,hv/vnc_tls", INST)
    # an upstream field we cannot fill is "unavailable" (shown as "-"), never unknown
    assert out.split() == [INST, "192M", "1", "-"]


#: what each htool prints about the cluster it read over LUXI
HTOOLS = {"hbal": "Loaded 2 nodes, 1 instances", "hspace": "The cluster has 2 nodes",
          "hinfo": "Cluster score", "hcheck": "Cluster is not healthy: False"}


@pytest.mark.parametrize("tool", sorted(HTOOLS))
def test_htools(vc, scratch, tool):
    before = rows(vc, "name,pnode,status", INST)
    out = up(vc, scratch, tool, "-L")
    assert HTOOLS[tool] in out
    assert rows(vc, "name,pnode,status", INST) == before    # -L only reads


def test_instance_rename(vc, scratch):
    up(vc, scratch, "gnt-instance", "shutdown", INST)
    up(vc, scratch, "gnt-instance", "rename", "--force", "--no-name-check", "--no-ip-check",
       INST, NEW_NAME)
    assert rows(vc, "name,status", NEW_NAME) == [[NEW_NAME, "ADMIN_down"]]


def test_instance_remove(vc, scratch):
    up(vc, scratch, "gnt-instance", "remove", "-f", NEW_NAME)
    assert NEW_NAME not in vc.ok("gnt-instance", "list", "--no-headers", "-o", "name")
    assert not os.path.exists(os.path.join(vc.paths(N1).file_storage_dir, NEW_NAME))


#: burnin's steps that need what this cluster lacks: confd (add/detach disks),
#: a mirrored disk template (replace, failover, migrate); export/import is
#: covered by our own tests
BURNIN_SKIPS = ("--no-confd", "--no-add-disks", "--no-replace1", "--no-replace2",
                "--no-failover", "--no-migrate", "--no-importexport")


def test_upstream_burnin(vc, scratch):
    names = ["burn1.example.com", "burn2.example.com"]
    out = up(vc, scratch, "burnin", "-o", "tinyos+default", "-t", "file", "--disk-size", "16M",
             "--disk-growth", "8M", "--mem-size", "128", "-n", f"{N1},{N2}", "--no-ip-check",
             "--no-name-check", *BURNIN_SKIPS, *names)
    for step in ("Creating instances", "Stopping and starting instances", "Growing disks",
                 "Moving instances", "Reinstalling instances", "Rebooting instances",
                 "Renaming the instances to their own name", "Adding and removing NICs",
                 "Activating/deactivating disks", "Removing instances"):
        assert f"- {step}" in out, step
    listed = vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").split()
    assert not set(names) & set(listed)
    jobs = vc.ok("gnt-job", "list", "--no-headers", "-o", "status,summary")
    assert "success INSTANCE_CREATE(burn1.example.com)" in " ".join(jobs.split())
    assert "success INSTANCE_MOVE(burn2.example.com)" in " ".join(jobs.split())
