"""Online changes on real qemu: block_resize, NIC and disk hotplug, the balloon (doc/kvm.md).

Most tests use the 512-byte boot sector (test/fakes/bootsector.py) under
TCG: it has no operating system, so it never releases an unplugged device;
plugging in, resizing, the refused removal (the device stays, the record
too) and the command line kept in runtime.json (a second qemu started from
it has the hotplugged devices in the same PCI slots) are checked with it.
The last test boots the tinylinux guest (tools/harness/tinylinux.py), which
releases unplugged devices: a removed boot NIC leaves a hole in the PCI
slots that the next NIC fills, and the recorded command line still gives
the same layout.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time

import guest_helpers
import pytest

from ganeti import constants, errors, parameters, pathutils
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import qmp
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from fakes import bootsector
from test.integration import host_helpers

pytestmark = pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                reason=host_helpers.qemu_reason() or "qemu runs")

NAME = "hot1.example.com"
NIC_UUID = "5ab1c0de-0000-4000-8000-000000000001"
DISK_UUID = "d15c0000-0000-4000-8000-000000000002"
MIB = 1024 * 1024


def _spec(memory: int = 64, **hvp) -> base.InstanceSpec:
    params = parameters.defaults("hv", constants.HT_KVM)
    params.update(hvp)
    return base.InstanceSpec(name=NAME, uuid="0b0e4f5c-2f0e-4d36-9a30-5d7b0c1d2e3f",
                             memory=memory, vcpus=1, hvparams=params,
                             nics=(base.NicSpec(mac="aa:00:00:00:00:01", link="no-such-br",
                                                uuid="boot-nic-uuid"),))


@pytest.fixture
def hv(tmp_path):
    root = tmp_path / ("node-root-" + "x" * 80)
    made = KvmHypervisor(pathutils.Paths(root=str(root)), kvm_device=str(tmp_path / "no-kvm"),
                         unplug_timeout=0.5)
    yield made
    guest_helpers.stop_all([made])


def _sizes(hv: KvmHypervisor) -> dict[str, int]:
    """drive id or node name -> the size qemu gives the guest."""
    out = {}
    for entry in hv.qmp_command(NAME, "query-block"):
        inserted = entry.get("inserted") or {}
        key = entry.get("device") or inserted.get("node-name")
        out[key] = inserted.get("image", {}).get("virtual-size")
    return out


def _peripherals(hv: KvmHypervisor) -> set[str]:
    return {e["name"] for e in hv.qmp_command(NAME, "qom-list", path="/machine/peripheral")}


def _pci_ids(hv: KvmHypervisor) -> set[str]:
    return {d["qdev_id"] for bus in hv.qmp_command(NAME, "query-pci") for d in bus["devices"]}


def test_grow_a_boot_disk_then_hotplug_and_resize(hv, tmp_path):
    disk = bootsector.disk_image(str(tmp_path / "disk0"))
    hv.start_instance(_spec(), [disk])
    before = _sizes(hv)["disk0"]
    # the storage layer grows the file; qemu learns it through block_resize
    os.truncate(disk, 4 * MIB)
    assert before < 4 * MIB
    assert hv.resize_disk(NAME, disk, 2 * MIB) is True      # never below the file
    assert _sizes(hv)["disk0"] == 4 * MIB

    extra = tmp_path / "disk1"
    extra.write_bytes(b"\0" * MIB)
    hv.hot_add_disk(NAME, str(extra), DISK_UUID, 1)
    assert _sizes(hv)["hotdisk-d15c0000"] == MIB
    assert "hotvd-d15c0000" in _peripherals(hv)
    assert "hotvd-d15c0000" in _pci_ids(hv)
    os.truncate(extra, 3 * MIB)
    hv.resize_disk(NAME, str(extra), 3 * MIB)
    assert _sizes(hv)["hotdisk-d15c0000"] == 3 * MIB
    runtime = hv.read_runtime(NAME)
    assert runtime["disks"] == [disk, str(extra)]
    assert [d["node"] for d in runtime["devices"]["disks"]] == ["", "hotdisk-d15c0000"]

    with pytest.raises(errors.HypervisorError, match="already has disk"):
        hv.hot_add_disk(NAME, str(extra), DISK_UUID, 2)
    with pytest.raises(errors.HypervisorError, match="has no disk"):
        hv.resize_disk(NAME, str(tmp_path / "other"), MIB)


def test_hotplug_a_nic(hv, tmp_path):
    disk = bootsector.disk_image(str(tmp_path / "disk0"))
    hv.start_instance(_spec(), [disk])
    nic = base.NicSpec(mac="aa:00:00:00:00:02", link="no-such-br", uuid=NIC_UUID)
    hv.hot_add_nic(NAME, nic, 1)
    assert {"nic0", "hotnic-5ab1c0de"} <= _peripherals(hv)
    assert "hotnic-5ab1c0de" in _pci_ids(hv)
    network = hv.qmp_command(NAME, "human-monitor-command", **{"command-line": "info network"})
    assert "aa:00:00:00:00:02" in network and "hotnet-5ab1c0de" in network
    runtime = hv.read_runtime(NAME)
    assert [n["mac"] for n in runtime["spec"]["nics"]] == ["aa:00:00:00:00:01",
                                                           "aa:00:00:00:00:02"]
    assert [n["device"] for n in runtime["devices"]["nics"]] == ["nic0", "hotnic-5ab1c0de"]
    with pytest.raises(errors.HypervisorError, match="already has NIC"):
        hv.hot_add_nic(NAME, nic, 2)


def test_a_removal_the_guest_does_not_complete_keeps_the_device(hv, tmp_path):
    disk = bootsector.disk_image(str(tmp_path / "disk0"))
    hv.start_instance(_spec(), [disk])
    nic = base.NicSpec(mac="aa:00:00:00:00:02", link="no-such-br", uuid=NIC_UUID)
    hv.hot_add_nic(NAME, nic, 1)
    with pytest.raises(errors.HypervisorError, match="did not release device hotnic-5ab1c0de"):
        hv.hot_del_nic(NAME, nic)
    assert "hotnic-5ab1c0de" in _peripherals(hv)
    assert len(hv.read_runtime(NAME)["spec"]["nics"]) == 2
    # the boot disk is an anonymous device found through query-block
    with pytest.raises(errors.HypervisorError, match="did not release device /machine/"):
        hv.hot_del_disk(NAME, disk)
    assert hv.read_runtime(NAME)["disks"] == [disk]


def test_hotplug_needs_a_running_instance(hv, tmp_path):
    with pytest.raises(errors.HypervisorError, match="not running"):
        hv.hotplug_supported(NAME)
    disk = bootsector.disk_image(str(tmp_path / "disk0"), poweroff=True)
    # paused first (a guest that powers off at once may be off before the check)
    hv.start_instance(_spec(), [disk], startup_paused=True)
    hv.hotplug_supported(NAME)       # paused is fine
    hv.qmp_command(NAME, "cont")     # (running is fine: the other tests hotplug into one)
    for _ in range(600):
        if hv.get_instance_info(NAME)["state"] == base.HV_STATE_SHUTDOWN:
            break
        time.sleep(0.1)
    with pytest.raises(errors.HypervisorError, match="it is shutdown"):
        hv.hotplug_supported(NAME)


def test_the_recorded_command_line_has_the_hotplugged_devices(hv, tmp_path):
    disk = bootsector.disk_image(str(tmp_path / "disk0"))
    hv.start_instance(_spec(), [disk])
    extra = tmp_path / "disk1"
    extra.write_bytes(b"\0" * MIB)
    hv.hot_add_disk(NAME, str(extra), DISK_UUID, 1)
    hv.hot_add_nic(NAME, base.NicSpec(mac="aa:00:00:00:00:02", link="no-such-br",
                                      uuid=NIC_UUID), 1)
    argv = hv.read_runtime(NAME)["argv"]
    layout = _layout(hv.qmp_command(NAME, "query-pci"))
    hv.stop_instance(NAME, force=True)
    # a second qemu from that command line (paused) has the same devices in the same slots
    again = tmp_path / "again"
    again.mkdir()
    subprocess.run(argv + ["-S"], cwd=again, check=True, timeout=60)
    client = qmp.QmpClient(str(again / "qmp.sock"))
    with client:
        names = {e["name"] for e in client.execute("qom-list", path="/machine/peripheral")}
        nodes = {e.get("inserted", {}).get("node-name") for e in client.execute("query-block")}
        again_layout = _layout(client.execute("query-pci"))
        client.execute("quit")
    assert {"nic0", "hotnic-5ab1c0de", "hotvd-d15c0000", "balloon0"} <= names
    assert "hotdisk-d15c0000" in nodes
    assert again_layout == layout
    assert len(layout) >= 6


def _layout(query_pci) -> list[tuple[int, int, int, str]]:
    """(slot, function, class, qdev id) of every PCI device, sorted."""
    return sorted((d["slot"], d["function"], d["class_info"]["class"], d["qdev_id"])
                  for bus in query_pci for d in bus["devices"])


def test_the_balloon_takes_a_target(hv, tmp_path):
    disk = bootsector.disk_image(str(tmp_path / "disk0"))
    hv.start_instance(_spec(), [disk])
    assert "balloon0" in _peripherals(hv)
    assert hv.get_instance_info(NAME)["memory"] == 64
    hv.balloon_instance_memory(NAME, 48)
    # the boot sector has no balloon driver: qemu holds the target, the guest keeps 64 MiB
    assert hv.read_runtime(NAME)["balloon"] == 48
    assert hv.qmp_command(NAME, "query-balloon")["actual"] == 64 * MIB
    with pytest.raises(errors.HypervisorError, match="cannot grow"):
        hv.balloon_instance_memory(NAME, 128)


# --- with a Linux guest, which releases unplugged devices ---------------------------------

@pytest.fixture(scope="module")
def tinylinux_guest():
    from tools.harness import tinylinux
    return tinylinux.build()


def test_a_linux_guest_releases_devices_and_the_recorded_layout_holds(hv, tmp_path,
                                                                     tinylinux_guest):
    from guest_helpers import SerialConsole, wait_for, wait_for_line

    disk = str(tmp_path / "disk0")
    with open(disk, "wb") as fh:
        fh.truncate(8 * MIB)
    spec = _spec(memory=128, kernel_path=os.path.join(tinylinux_guest.directory, "vmlinuz"),
                 initrd_path=os.path.join(tinylinux_guest.directory, "initrd.img"))
    hv.unplug_timeout = 120.0
    hv.start_instance(spec, [disk])
    wait_for_line(hv.serial_log(NAME))
    extra = tmp_path / "disk1"
    extra.write_bytes(b"\0" * MIB)
    with SerialConsole(hv.serial_socket(NAME)) as con:
        con.run("dmesg -n 1")

        def sees(command, predicate, what):
            wait_for(lambda: predicate(con.run(command)), what, timeout=120.0, poll=0.5)

        hv.hot_add_disk(NAME, str(extra), DISK_UUID, 1)
        sees("ls /sys/block", lambda out: "vdb" in out.split(), "vdb")
        # the boot NIC leaves a hole in the PCI slots; the next NIC fills it
        hv.hot_del_nic(NAME, base.NicSpec(mac="aa:00:00:00:00:01", uuid="boot-nic-uuid"))
        assert "nic0" not in _peripherals(hv)
        hv.hot_add_nic(NAME, base.NicSpec(mac="aa:00:00:00:00:02", link="no-such-br",
                                          uuid=NIC_UUID), 0)
        sees("cat /sys/class/net/*/address",
             lambda out: "aa:00:00:00:00:02" in out.split()
             and "aa:00:00:00:00:01" not in out.split(), "the new NIC in place of the old")
        hv.hot_del_disk(NAME, str(extra))
        sees("ls /sys/block", lambda out: "vdb" not in out.split(), "vdb gone")
    assert _sizes(hv).keys() == {"disk0"}
    runtime = hv.read_runtime(NAME)
    assert runtime["disks"] == [disk]
    assert [n["device"] for n in runtime["devices"]["nics"]] == ["hotnic-5ab1c0de"]
    layout = _layout(hv.qmp_command(NAME, "query-pci"))
    argv = runtime["argv"]
    hv.stop_instance(NAME, force=True)
    again = tmp_path / "again"
    again.mkdir()
    subprocess.run(argv + ["-S"], cwd=again, check=True, timeout=60)
    with qmp.QmpClient(str(again / "qmp.sock")) as client:
        again_layout = _layout(client.execute("query-pci"))
        client.execute("quit")
    assert again_layout == layout


def test_a_hotplugged_instance_migrates_with_its_devices(tmp_path):
    from ganeti.hypervisor.kvm import migration

    hvs = [KvmHypervisor(pathutils.Paths(root=str(tmp_path / f"{node}-root")),
                         kvm_device=str(tmp_path / "no-kvm")) for node in ("src", "dst")]
    src, dst = hvs
    try:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        spec = _spec(migration_port=port)
        disk = bootsector.disk_image(str(tmp_path / "shared-disk0"))
        extra = tmp_path / "shared-disk1"
        extra.write_bytes(b"\0" * MIB)
        src.start_instance(spec, [disk])
        src.hot_add_disk(NAME, str(extra), DISK_UUID, 1)
        src.hot_add_nic(NAME, base.NicSpec(mac="aa:00:00:00:00:02", link="no-such-br",
                                           uuid=NIC_UUID), 1)
        layout = _layout(src.qmp_command(NAME, "query-pci"))
        info = src.migration_info(NAME)
        assert info["devices"]["disks"] == [disk, str(extra)]
        accepted = dst.accept_instance(spec, info, "127.0.0.1", [disk, str(extra)])
        src.migrate_instance(NAME, "dst", "127.0.0.1", True, accepted)
        for _ in range(1200):
            status = src.get_migration_status(NAME)
            if status["status"] not in migration.IN_PROGRESS:
                break
            time.sleep(0.1)
        assert status["status"] == base.MIGRATION_STATUS_COMPLETED, status
        dst.finalize_migration_dst(spec, info, True)
        src.finalize_migration_src(NAME, True, True)
        assert dst.get_instance_info(NAME)["state"] == base.HV_STATE_RUNNING
        assert {"nic0", "hotnic-5ab1c0de", "hotvd-d15c0000"} <= _peripherals(dst)
        assert _layout(dst.qmp_command(NAME, "query-pci")) == layout
        # the device table came along: the hotplugged disk still resizes on the target
        os.truncate(extra, 2 * MIB)
        dst.resize_disk(NAME, str(extra), 2 * MIB)
        assert _sizes(dst)["hotdisk-d15c0000"] == 2 * MIB
    finally:
        guest_helpers.stop_all(hvs)
