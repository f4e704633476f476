"""tools/burnin (one instance, serial) with the tinylinux guest on a 2-node kvm virtual cluster.

``-t sharedfile`` covers the kvm paths burnin has: create, grow, failover,
live migration, export/import, reinstall, every reboot type, renames, disk
activation, disk and NIC changes, stop/start, remove, and the runtime
memory step (ballooned from 192 to 128 MiB through the guest's balloon
driver).  Nothing may be left behind: no instance, no qemu.  Skips only
when qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_burnin import BURNIN, timing_rows
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from tools.harness import vcluster
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

INSTANCES = ["kb1.example.com"]
EXPECTED_SKIPS = {"replace1", "replace2", "move", "confd"}


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vkb"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


def test_burnin_passes_on_kvm(vc) -> None:
    env = {**os.environ, **vcluster.node_env(vc.cluster, vc.cluster.master_node)}
    res = subprocess.run([sys.executable, BURNIN, "-o", "tinylinux", "--no-name-check",
                          "--no-ip-check", "-t", "sharedfile", "--maxmem-size", "192",
                          "--minmem-size", "128",
                          "--disk-size", "64M", "--disk-growth", "16M",
                          "--rename", "kbspare.example.com", *INSTANCES],
                         env=env, capture_output=True, text=True, timeout=540,
                         stdin=subprocess.DEVNULL, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = timing_rows(res.stdout)
    assert {step for step, status in rows.items() if status == "skipped"} == EXPECTED_SKIPS
    assert set(rows.values()) == {"done", "skipped"}
    assert vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").strip() == ""
    for node in vc.names:
        assert KvmHypervisor(vc.paths(node)).list_instances() == []
