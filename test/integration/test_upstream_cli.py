"""Ganeti 3.0's own CLI and htools, unchanged, against our master (doc/compat.md).

Each case runs an upstream command through test/integration/upstream_cli.py
(private mount namespace, Debian's python3) and then checks the cluster's
state through our own CLI.  The cases follow the order of the issue's list
(doc/compat.md, "Upstream commands"); they share one cluster and run in
file order (add before info, ..., remove last).
"""

from __future__ import annotations

import os

import pytest
import upstream_cli
from instance_helpers import rows
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(900)

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "up1.example.com"
NEW_NAME = "up2.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    reason = upstream_cli.unusable()
    if reason:
        if os.environ.get(upstream_cli.REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
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


def test_instance_tags(vc, scratch):
    up(vc, scratch, "gnt-instance", "add-tags", INST, "upstream-tag")
    assert "upstream-tag" in vc.ok("gnt-instance", "list-tags", INST).split()
    out = up(vc, scratch, "gnt-instance", "list-tags", INST)
    assert "upstream-tag" in out.split()


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
          "hinfo": "Cluster score"}


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
