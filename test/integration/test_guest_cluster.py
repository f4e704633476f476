"""The guest cluster: every node a qemu guest with its own kernel (doc/vcluster.md).

One 3-node guest cluster for the session (the ``guest_cluster`` fixture,
test/integration/guest_cluster_harness.py), driven as an operator would:
the host's ``gnt-*`` through the ``tools/vcluster env`` wrappers (the other
modules run the wrappers' function from the test process),
``tools/vcluster ssh/destroy``, RAPI from the host (a node powered off and
booted again: test_guest_plain.py, with an instance on it).
Skipped with the reason where guests cannot run (not root, no bridges).
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import urllib.request

import pytest

from test.integration.guest_cluster_harness import GuestClusterFixture
from tools.harness import guestcluster, guestvm

# creating the cluster (first test) takes a minute, several under load
pytestmark = pytest.mark.timeout(900)


def test_cluster_verifies_clean(guest_cluster: GuestClusterFixture) -> None:
    res = guest_cluster.wrapper("gnt-cluster", "verify")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ERROR" not in res.stdout


def test_every_node_is_known_by_its_own_name(guest_cluster: GuestClusterFixture) -> None:
    """The master node is node1.vcluster, not the cluster name that shares its address
    in /etc/hosts (the node's name is resolved forwards)."""
    res = guest_cluster.gnt("gnt-node", "list", "--no-headers", "-o", "name")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.split() == ["node1.vcluster", "node2.vcluster", "node3.vcluster"]
    res = guest_cluster.gnt("gnt-cluster", "getmaster")
    assert res.stdout.strip() == "node1.vcluster", res.stdout + res.stderr


def test_command_reaches_every_node(guest_cluster: GuestClusterFixture) -> None:
    res = guest_cluster.gnt("gnt-cluster", "command", "hostname")
    assert res.returncode == 0, res.stdout + res.stderr
    names = {line.strip() for line in res.stdout.splitlines()}
    assert {"node1.vcluster", "node2.vcluster", "node3.vcluster"} <= names
    assert res.stdout.count("return code = 0") == 3


def test_processes_in_a_guest_map_their_libraries_at_fixed_addresses(
        guest_cluster: GuestClusterFixture) -> None:
    """The guests boot with ``norandmaps``: two processes map libc at the same address,
    so TCG's translated code serves both (doc/vcluster.md, "Where a guest cluster's CPU
    goes")."""
    res = guest_cluster.ssh("node2", "for i in 1 2; do grep -m1 'libc.so' /proc/self/maps; done")
    assert not res.failed, res.stderr
    first, second = res.stdout.splitlines()
    assert first.split("-")[0] == second.split("-")[0], res.stdout


def test_lvm_works_inside_a_guest(guest_cluster: GuestClusterFixture) -> None:
    vg = guest_cluster.cluster.vg_name
    res = guest_cluster.ssh("node2", ["vgs", "--noheadings", "-o", "vg_name,pv_count"])
    assert not res.failed, res.stderr
    assert res.stdout.split()[:2] == [vg, "1"]
    res = guest_cluster.ssh("node2", f"lvcreate -q -y -Wy -L 8m -n guesttest {vg} >/dev/null &&"
                                     f" lvs --noheadings -o lv_name,lv_size {vg} &&"
                                     f" test -b /dev/{vg}/guesttest &&"
                                     f" lvremove -q -f {vg}/guesttest >/dev/null")
    assert not res.failed, res.stdout + res.stderr
    assert "guesttest" in res.stdout
    res = guest_cluster.ssh("node2", ["lvs", "--noheadings", vg])
    assert not res.failed and "guesttest" not in res.stdout


def test_rapi_is_reachable_from_the_host(guest_cluster: GuestClusterFixture) -> None:
    master = guestcluster.current_master(guest_cluster.cluster)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://{master.ip}:5080/2/info", context=context,
                                timeout=60) as resp:
        info = json.loads(resp.read())
    assert info["name"] == guest_cluster.cluster.cluster_name


@pytest.mark.guest_cluster_last
def test_destroy_leaves_nothing(guest_cluster: GuestClusterFixture) -> None:
    """Last: the session's cluster is made again if a later module asks for it."""
    gc = guest_cluster.cluster
    pids = [p for p in (guestvm.read_pid(gc.spec(n).qemu_pidfile) for n in gc.nodes) if p]
    assert pids
    res = guest_cluster.vcluster("destroy", gc.directory)
    assert res.returncode == 0, res.stderr
    assert not os.path.exists(gc.directory)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           check=True).stdout
    assert gc.bridge not in links
    assert not any(os.path.exists(f"/proc/{pid}") and guestvm.process_alive(pid) for pid in pids)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    assert gc.directory.encode() not in fh.read()
            except OSError:
                continue
