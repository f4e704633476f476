"""Online changes through the daemons on a 1-node kvm virtual cluster (real qemu).

``gnt-instance grow-disk`` of a running instance and ``gnt-instance modify
--hotplug`` (NIC and disk added), checked from qemu's side over QMP
(query-block sizes, qom-list of /machine/peripheral) and in runtime.json;
``--hotplug`` on a stopped instance refused before anything changes, and
``--hotplug-if-possible`` then applying the change at the next start;
``--runtime-memory`` setting the balloon's target (doc/kvm.md, "Online
changes").  The guest is the blank disk of a
``tinyos`` instance: qemu runs, but nothing in it releases a device, so
removals are covered where a real guest runs.  Skips only when
qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import pytest
from instance_helpers import NOCHECK, config_bytes, rows
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

NODE = "node1.vcluster"
INST = "kvmdev1.example.com"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vkvmdev"), nodes=1, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        cluster.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-o", "tinyos",
                   "-n", NODE, *NOCHECK, INST)
        yield cluster


def _hv(vc) -> KvmHypervisor:
    return KvmHypervisor(vc.paths(NODE))


def _sizes(vc) -> dict[str, int]:
    out = {}
    for entry in _hv(vc).qmp_command(INST, "query-block"):
        inserted = entry.get("inserted") or {}
        out[entry.get("device") or inserted.get("node-name")] = \
            inserted.get("image", {}).get("virtual-size")
    return out


def _peripherals(vc) -> set[str]:
    return {e["name"] for e in _hv(vc).qmp_command(INST, "qom-list", path="/machine/peripheral")}


def _uuids(vc, what: str) -> list[str]:
    (row,) = rows(vc, f"{what}.uuids", INST)
    return row[0].split(",")


def test_grow_disk_of_a_running_instance_reaches_qemu(vc):
    assert _sizes(vc)["disk0"] == 8 * MIB
    out = vc.ok("gnt-instance", "grow-disk", INST, "0", "8M")
    assert _sizes(vc)["disk0"] == 16 * MIB
    assert "sees the new size" in out
    assert rows(vc, "disk.size/0", INST) == [["16"]]


def test_hotplug_a_nic(vc):
    vc.ok("gnt-instance", "modify", "--hotplug", "--net", "add", INST)
    uuid = _uuids(vc, "nic")[1]
    assert f"hotnic-{uuid.replace('-', '')[:8]}" in _peripherals(vc)
    runtime = _hv(vc).read_runtime(INST)
    assert len(runtime["spec"]["nics"]) == 2
    assert runtime["devices"]["nics"][1]["uuid"] == uuid


def test_hotplug_a_disk_then_grow_it(vc):
    vc.ok("gnt-instance", "modify", "--hotplug", "--disk", "add:size=4M", INST)
    node = f"hotdisk-{_uuids(vc, 'disk')[1].replace('-', '')[:8]}"
    assert _sizes(vc)[node] == 4 * MIB
    vc.ok("gnt-instance", "grow-disk", INST, "1", "4M")
    assert _sizes(vc)[node] == 8 * MIB


def test_runtime_memory_sets_the_balloon_target(vc):
    out = vc.ok("gnt-instance", "modify", "-m", "64M", "-f", INST)
    assert "runtime_memory -> 64" in out
    assert _hv(vc).read_runtime(INST)["balloon"] == 64
    # a blank guest has no balloon driver: it keeps its memory, which info reports
    assert rows(vc, "oper_ram", INST) == [["128"]]
    res = vc.run("gnt-instance", "modify", "-m", "256M", "-f", INST)
    assert res.returncode != 0 and "cannot grow" in res.stdout + res.stderr


def test_hotplug_of_a_stopped_instance(vc):
    vc.ok("gnt-instance", "shutdown", "--timeout", "0", INST)
    before = config_bytes(vc)
    res = vc.run("gnt-instance", "modify", "--hotplug", "--net", "add", INST)
    assert res.returncode != 0
    assert "Hotplug is not possible" in res.stdout + res.stderr
    assert config_bytes(vc) == before
    out = vc.run("gnt-instance", "modify", "--hotplug-if-possible", "--net", "add", INST)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "next start" in out.stdout + out.stderr
    vc.ok("gnt-instance", "startup", INST)
    # started from the configuration: three NICs and both disks, boot-time ids
    assert {"nic0", "nic1", "nic2"} <= _peripherals(vc)
    assert set(_sizes(vc)) >= {"disk0", "disk1"}
