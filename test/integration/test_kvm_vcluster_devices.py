"""Online changes through the daemons on a 2-node kvm virtual cluster, seen by a Linux guest.

A ``tinylinux`` instance (tools/harness/tinylinux.py: a Debian kernel and a
busybox shell on the serial console) runs on real qemu.  ``gnt-instance
grow-disk`` of the running instance and ``gnt-instance modify --hotplug``
(NIC and disk added, then removed) are checked from qemu's side over QMP
(query-block sizes, qom-list of /machine/peripheral), in runtime.json and
inside the guest (``/sys/block/vda/size``, ``/sys/class/net``,
``/sys/block``); ``--runtime-memory`` through the guest's balloon driver;
``--hotplug`` on a stopped instance refused before anything changes, and
``--hotplug-if-possible`` then applying the change at the next start; a
``sharedfile`` instance with a hotplugged NIC and disk migrating live to
the second node with them (doc/kvm.md, "Online changes").  Skips only
when qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import os

import pytest
from guest_helpers import SerialConsole, wait_for, wait_for_line
from instance_helpers import NOCHECK, config_bytes, rows
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

NODE = "node1.vcluster"
NODE2 = "node2.vcluster"
SHARED = "kvmdev2.example.com"
INST = "kvmdev1.example.com"
MIB = 1024 * 1024
SECTORS_PER_MIB = 2048


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vkvmdev"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        cluster.ok("gnt-instance", "add", "-t", "file", "-s", "64M", "-o", "tinylinux",
                   "-n", NODE, *NOCHECK, INST)
        wait_for_line(KvmHypervisor(cluster.paths(NODE)).serial_log(INST))
        yield cluster


@pytest.fixture(scope="module")
def con(vc):
    with SerialConsole(_hv(vc).serial_socket(INST)) as console:
        console.run("dmesg -n 1")        # kernel messages off the console
        yield console


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


def _guest_sees(con, command: str, predicate, what: str) -> str:
    """Poll a guest command until its output satisfies ``predicate`` (bounded)."""
    def seen() -> str | None:
        out = con.run(command)
        return out if predicate(out) else None
    return str(wait_for(seen, what, timeout=90.0, poll=0.5))


def _key(uuid: str) -> str:
    return uuid.replace("-", "")[:8]


def test_grow_disk_of_a_running_instance_reaches_the_guest(vc, con):
    assert con.run("cat /sys/block/vda/size") == str(64 * SECTORS_PER_MIB)
    out = vc.ok("gnt-instance", "grow-disk", INST, "0", "64M")
    assert "sees the new size" in out
    assert _sizes(vc)["disk0"] == 128 * MIB
    _guest_sees(con, "cat /sys/block/vda/size", lambda o: o == str(128 * SECTORS_PER_MIB),
                "the guest seeing 128 MiB")
    assert rows(vc, "disk.size/0", INST) == [["128"]]


def test_hotplug_a_nic(vc, con):
    assert con.run("ls /sys/class/net").split() == ["eth0", "lo"]
    vc.ok("gnt-instance", "modify", "--hotplug", "--net", "add", INST)
    uuid = _uuids(vc, "nic")[1]
    assert f"hotnic-{_key(uuid)}" in _peripherals(vc)
    runtime = _hv(vc).read_runtime(INST)
    assert len(runtime["spec"]["nics"]) == 2
    assert runtime["devices"]["nics"][1]["uuid"] == uuid
    _guest_sees(con, "ls /sys/class/net", lambda o: o.split() == ["eth0", "eth1", "lo"],
                "eth1 in the guest")
    (mac,) = rows(vc, "nic.mac/1", INST)[0]
    assert con.run("cat /sys/class/net/eth1/address") == mac


def test_hotplug_a_disk_then_grow_it(vc, con):
    vc.ok("gnt-instance", "modify", "--hotplug", "--disk", "add:size=16M", INST)
    node = f"hotdisk-{_key(_uuids(vc, 'disk')[1])}"
    assert _sizes(vc)[node] == 16 * MIB
    _guest_sees(con, "cat /sys/block/vdb/size", lambda o: o == str(16 * SECTORS_PER_MIB),
                "vdb in the guest")
    vc.ok("gnt-instance", "grow-disk", INST, "1", "16M")
    assert _sizes(vc)[node] == 32 * MIB
    _guest_sees(con, "cat /sys/block/vdb/size", lambda o: o == str(32 * SECTORS_PER_MIB),
                "vdb grown in the guest")


def test_unplug_the_disk_and_the_boot_nic(vc, con):
    disk_path = _hv(vc).read_runtime(INST)["disks"][1]
    out = vc.ok("gnt-instance", "modify", "--hotplug", "--disk", "1:remove", INST)
    assert "unplugged" in out
    _guest_sees(con, "ls /sys/block", lambda o: "vdb" not in o.split(), "vdb gone")
    assert not os.path.exists(disk_path)
    assert len(_hv(vc).read_runtime(INST)["disks"]) == 1
    # the boot NIC (nic0 on the command line): the guest releases it too
    boot_mac = rows(vc, "nic.mac/0", INST)[0][0]
    vc.ok("gnt-instance", "modify", "--hotplug", "--net", "0:remove", INST)
    assert "nic0" not in _peripherals(vc)
    _guest_sees(con, "cat /sys/class/net/*/address",
                lambda o: boot_mac not in o and o.strip(), "the boot NIC gone")
    assert rows(vc, "nic.count", INST) == [["1"]]
    runtime = _hv(vc).read_runtime(INST)
    assert [n["mac"] for n in runtime["spec"]["nics"]] == [rows(vc, "nic.mac/0", INST)[0][0]]
    assert "nic0" not in " ".join(runtime["argv"])


def test_runtime_memory_through_the_balloon(vc, con):
    # 96 MiB: a target the guest can reach; at 64 MiB this guest runs out of
    # pages to give ("Out of puff") and, under load, can stall deflating again
    out = vc.ok("gnt-instance", "modify", "-m", "96M", "-f", INST)
    assert "runtime_memory -> 96" in out
    assert _hv(vc).read_runtime(INST)["balloon"] == 96
    # the guest's virtio_balloon driver gives the memory back: qemu and info say so
    wait_for(lambda: int(rows(vc, "oper_ram", INST)[0][0]) <= 100, "oper_ram near 96 MiB",
             timeout=240.0, poll=1.0)
    res = vc.run("gnt-instance", "modify", "-m", "256M", "-f", INST)
    assert res.returncode != 0 and "cannot grow" in res.stdout + res.stderr
    vc.ok("gnt-instance", "modify", "-m", "128M", INST)
    assert _hv(vc).read_runtime(INST)["balloon"] == 128
    # (a TCG guest on a loaded machine can take a while to deflate)
    wait_for(lambda: int(rows(vc, "oper_ram", INST)[0][0]) >= 120, "oper_ram back to 128 MiB",
             timeout=240.0, poll=1.0)


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
    # started from the configuration: two NICs with boot-time ids
    assert {"nic0", "nic1"} <= _peripherals(vc)


def test_a_hotplugged_instance_migrates_with_its_devices(vc):
    vc.ok("gnt-instance", "add", "-t", "sharedfile", "-s", "64M", "-o", "tinylinux",
          "-n", NODE, *NOCHECK, SHARED)
    src, dst = KvmHypervisor(vc.paths(NODE)), KvmHypervisor(vc.paths(NODE2))
    wait_for_line(src.serial_log(SHARED))
    vc.ok("gnt-instance", "modify", "--hotplug", "--net", "add", "--disk", "add:size=8M",
          SHARED)
    with SerialConsole(src.serial_socket(SHARED)) as console:
        console.run("dmesg -n 1")
        _guest_sees(console, "ls /sys/class/net /sys/block",
                    lambda o: "eth1" in o.split() and "vdb" in o.split(), "eth1 and vdb")
        assert console.run("echo before-migration > /mark && cat /mark") == "before-migration"
    vc.ok("gnt-instance", "migrate", "-f", SHARED)
    assert rows(vc, "pnode", SHARED) == [[NODE2]]
    nic_key, disk_key = _key(_uuids_of(vc, SHARED, "nic")[1]), _key(_uuids_of(vc, SHARED,
                                                                            "disk")[1])
    names = {e["name"] for e in dst.qmp_command(SHARED, "qom-list", path="/machine/peripheral")}
    assert {f"hotnic-{nic_key}", f"hotvd-{disk_key}"} <= names
    # the same guest (a file in its RAM root file system is still there), with both devices
    with SerialConsole(dst.serial_socket(SHARED)) as console:
        assert console.run("cat /mark") == "before-migration"
        assert {"eth1", "vdb"} <= set(console.run("ls /sys/class/net /sys/block").split())
    vc.ok("gnt-instance", "remove", "-f", SHARED)


def _uuids_of(vc, name: str, what: str) -> list[str]:
    (row,) = rows(vc, f"{what}.uuids", name)
    return row[0].split(",")
