"""The pure builders and QMP steps of ganeti/hypervisor/kvm/hotplug.py (no qemu)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.fakeqmp import FakeQmp
from ganeti import errors, pathutils, serializer
from ganeti.hypervisor import base, fake
from ganeti.hypervisor.kvm import cmdline, hotplug, qmp

UUID = "5ab1c0de-0000-4000-8000-000000000001"


def _runtime(**extra: Any) -> dict[str, Any]:
    spec = base.InstanceSpec(name="inst1", nics=(
        base.NicSpec(mac="aa:00:00:00:00:01", uuid="u0"),
        base.NicSpec(mac="aa:00:00:00:00:02", uuid="u1")))
    argv = ["qemu", "-name", "inst1",
            "-drive", "file=/d/0,format=raw,if=virtio,id=disk0",
            "-netdev", "tap,id=net0,ifname=gntabc.0,script=no,downscript=no",
            "-device", "virtio-net-pci,netdev=net0,mac=aa:00:00:00:00:01,id=nic0",
            "-netdev", "user,id=net1",
            "-device", "virtio-net-pci,netdev=net1,mac=aa:00:00:00:00:02,id=nic1"]
    return {"name": "inst1", "spec": serializer.to_data(spec), "disks": ["/d/0"],
            "argv": argv, **extra}


def test_devices_derived_from_the_boot_command_line() -> None:
    devices = hotplug.devices_of(_runtime())
    assert devices.nics == (
        hotplug.NicDevice(mac="aa:00:00:00:00:01", device="nic0", netdev="net0", uuid="u0",
                          kind=cmdline.NETDEV_TAP, ifname="gntabc.0"),
        hotplug.NicDevice(mac="aa:00:00:00:00:02", device="nic1", netdev="net1", uuid="u1",
                          kind=cmdline.NETDEV_USER))
    assert devices.disks == (hotplug.DiskDevice(path="/d/0", drive="disk0"),)
    assert devices.nic_index("u1", "") == 1
    assert devices.nic_index("", "aa:00:00:00:00:01") == 0
    assert devices.nic_index("nope", "aa:00:00:00:00:01") == -1
    assert devices.disk_index("/d/0") == 0


def test_a_stored_table_wins() -> None:
    table = hotplug.Devices(disks=(hotplug.DiskDevice(path="/d/9", node="n", device="v"),))
    runtime = _runtime(devices=serializer.to_data(table))
    assert hotplug.devices_of(runtime) == table


def test_new_ids_come_from_the_uuid_and_stay_unique() -> None:
    devices = hotplug.devices_of(_runtime())
    nic = hotplug.new_nic(devices, "inst1", "aa:00:00:00:00:03", UUID, cmdline.NETDEV_TAP)
    assert (nic.device, nic.netdev) == ("hotnic-5ab1c0de", "hotnet-5ab1c0de")
    assert nic.ifname == hotplug.tap_name("inst1", "h0") and len(nic.ifname) <= 15
    taken = hotplug.Devices(nics=devices.nics + (nic,))
    again = hotplug.new_nic(taken, "inst1", "aa:00:00:00:00:04", UUID, cmdline.NETDEV_TAP)
    assert again.device == "hotnic-5ab1c0de0" and again.ifname == hotplug.tap_name("inst1", "h1")
    assert hotplug.new_nic(devices, "inst1", "m", "", cmdline.NETDEV_USER).device == "hotnic-0"
    disk = hotplug.new_disk(devices, "/d/1", "d15c0000-1111")
    assert (disk.node, disk.device) == ("hotdisk-d15c0000", "hotvd-d15c0000")


def test_tap_name_matches_the_boot_naming() -> None:
    name = hotplug.tap_name("inst1", "0")
    assert name.startswith("gnt") and name.endswith(".0") and len(name) == 11


def test_nic_arguments() -> None:
    tap = hotplug.NicDevice(mac="aa:00:00:00:00:03", device="hotnic-x", netdev="hotnet-x",
                            kind=cmdline.NETDEV_TAP, ifname="gntabc.h0")
    assert hotplug.netdev_add_args(tap, vhost=True) == {
        "type": "tap", "id": "hotnet-x", "ifname": "gntabc.h0", "script": "no",
        "downscript": "no", "vhost": True}
    user = hotplug.NicDevice(mac="m", device="d", netdev="n")
    assert hotplug.netdev_add_args(user) == {"type": "user", "id": "n"}
    assert hotplug.nic_device_args(tap, "e1000") == {
        "driver": "e1000", "id": "hotnic-x", "netdev": "hotnet-x", "mac": "aa:00:00:00:00:03"}
    with pytest.raises(errors.HypervisorError, match="ne2k_isa cannot be hotplugged"):
        hotplug.nic_device_args(tap, "ne2k_isa")
    assert hotplug.nic_argv(tap, "paravirtual", vhost=True) == [
        "-netdev", "tap,id=hotnet-x,ifname=gntabc.h0,script=no,downscript=no,vhost=on",
        "-device", "virtio-net-pci,id=hotnic-x,netdev=hotnet-x,mac=aa:00:00:00:00:03"]


@pytest.mark.parametrize("cache,blockdev_extra,device_extra", [
    ("default", {}, {}),
    ("none", {"cache": {"direct": True}}, {}),
    ("writethrough", {}, {"write-cache": "off"}),
], ids=["default", "none", "writethrough"])
def test_disk_arguments(cache: str, blockdev_extra: dict, device_extra: dict) -> None:
    disk = hotplug.DiskDevice(path="/d/a,b", node="hotdisk-x", device="hotvd-x")
    assert hotplug.blockdev_add_args(disk, cache) == {
        "driver": "raw", "node-name": "hotdisk-x",
        "file": {"driver": "file", "filename": "/d/a,b"}, **blockdev_extra}
    assert hotplug.disk_device_args(disk, "paravirtual", cache) == {
        "driver": "virtio-blk-pci", "id": "hotvd-x", "drive": "hotdisk-x", **device_extra}
    flag, blockdev, dflag, device = hotplug.disk_argv(disk, "paravirtual", cache)
    assert (flag, dflag) == ("-blockdev", "-device")
    assert json.loads(blockdev) == hotplug.blockdev_add_args(disk, cache)
    assert device.startswith("virtio-blk-pci,id=hotvd-x,drive=hotdisk-x")


def test_a_hotplugged_drbd_disk_skips_the_page_cache_by_default() -> None:
    drbd = hotplug.DiskDevice(path="/dev/drbd7", node="hotdisk-y", device="hotvd-y")
    assert hotplug.blockdev_add_args(drbd, "default")["cache"] == {"direct": True}
    assert "cache" not in hotplug.blockdev_add_args(drbd, "writeback")


def test_only_virtio_disks_hotplug() -> None:
    with pytest.raises(errors.HypervisorError, match="disk_type ide cannot be hotplugged"):
        hotplug.disk_device_args(hotplug.DiskDevice(path="/d"), "ide")


def test_block_resize_names_the_drive_or_the_node() -> None:
    assert hotplug.block_resize_args(hotplug.DiskDevice(path="/d", drive="disk0"), 5) == \
        {"device": "disk0", "size": 5}
    assert hotplug.block_resize_args(hotplug.DiskDevice(path="/d", node="hotdisk-x"), 5) == \
        {"node-name": "hotdisk-x", "size": 5}
    with pytest.raises(errors.ProgrammerError):
        hotplug.block_resize_args(hotplug.DiskDevice(path="/d", drive="disk0"), 0)


def test_drop_argv_removes_whole_option_pairs() -> None:
    argv = _runtime()["argv"] + hotplug.disk_argv(
        hotplug.DiskDevice(path="/d/1", node="hotdisk-x", device="hotvd-x"))
    kept = hotplug.drop_argv(argv, ["nic0", "net0", "hotdisk-x", "hotvd-x"])
    assert kept == ["qemu", "-name", "inst1",
                    "-drive", "file=/d/0,format=raw,if=virtio,id=disk0",
                    "-netdev", "user,id=net1",
                    "-device", "virtio-net-pci,netdev=net1,mac=aa:00:00:00:00:02,id=nic1"]
    assert hotplug.drop_argv(argv, ["disk0"])[3:5] == argv[5:7]


def test_boot_disk_qdev_and_deleted_events() -> None:
    answer = [{"device": "disk0", "qdev": "/machine/peripheral-anon/device[0]/virtio-backend"},
              {"device": "", "qdev": "hotvd-x"}]
    assert hotplug.boot_disk_qdev(answer, "disk0") == "/machine/peripheral-anon/device[0]"
    assert hotplug.boot_disk_qdev(answer, "disk7") is None
    ev = qmp.QmpEvent("DEVICE_DELETED", {"device": "nic1", "path": "/machine/peripheral/nic1"})
    assert hotplug.is_deleted_event(ev, "nic1")
    assert hotplug.is_deleted_event(ev, "/machine/peripheral/nic1")
    assert not hotplug.is_deleted_event(qmp.QmpEvent("DEVICE_DELETED", {
        "path": "/machine/peripheral/nic1/virtio-backend"}), "nic1")
    assert not hotplug.is_deleted_event(qmp.QmpEvent("SHUTDOWN", {"device": "nic1"}), "nic1")


def test_balloon_values() -> None:
    assert hotplug.balloon_args(64) == {"value": 64 * 1024 * 1024}
    assert hotplug.balloon_mib({"actual": 32 * 1024 * 1024}) == 32
    assert hotplug.balloon_mib({}) is None


class StepClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _connect(qmp_peer: Any, answers: dict[str, Any] | None = None,
             after: dict[str, list[tuple[str, dict[str, Any]]]] | None = None,
             clock: StepClock | None = None) -> tuple[FakeQmp, qmp.QmpClient]:
    """A scripted QMP peer and a real client of it.

    ``clock`` is the client's: when the peer has nothing more to say, a wait
    for an event runs it to the wait's deadline, then times out.
    """
    peer = qmp_peer(answers, after=after)
    if clock is None:
        return peer, peer.client()
    step = clock

    def reach(deadline: float) -> None:
        step.now = max(step.now, deadline)
    return peer, peer.client(clock=step, on_silence=reach)


def test_unplug_waits_for_the_devices_own_event(qmp_peer: Any) -> None:
    peer, client = _connect(qmp_peer, after={"device_del": [
        ("DEVICE_DELETED", {"path": "/machine/peripheral/nic1/virtio-backend"}),
        ("DEVICE_DELETED", {"device": "nic1", "path": "/machine/peripheral/nic1"})]})
    hotplug.unplug(client, "nic1", 30.0, StepClock())
    assert peer.calls == [("device_del", {"id": "nic1"})]
    assert client.events == []


def test_unplug_of_a_missing_device_is_fine_and_a_silent_guest_an_error(qmp_peer: Any) -> None:
    _, gone = _connect(qmp_peer, {"device_del": qmp.QmpCommandError(
        "device_del", "DeviceNotFound", "no nic1")})
    hotplug.unplug(gone, "nic1", 30.0, StepClock())
    clock = StepClock()
    _, silent = _connect(qmp_peer, clock=clock)
    with pytest.raises(errors.HypervisorError, match="did not release device nic1 within 5s"):
        hotplug.unplug(silent, "nic1", 5.0, clock)
    assert clock.now == 5.0
    _, refused = _connect(qmp_peer, {"device_del": qmp.QmpCommandError(
        "device_del", "GenericError", "bus does not hotplug")})
    with pytest.raises(qmp.QmpCommandError, match="bus does not hotplug"):
        hotplug.unplug(refused, "nic1", 5.0, StepClock())


def test_a_failed_device_add_takes_the_backend_away_again(qmp_peer: Any) -> None:
    failing = {"device_add": qmp.QmpCommandError("device_add", "GenericError", "no slot")}
    nic_peer, nic_client = _connect(qmp_peer, dict(failing))
    nic = hotplug.NicDevice(mac="m", device="hotnic-x", netdev="hotnet-x")
    with pytest.raises(qmp.QmpCommandError, match="no slot"):
        hotplug.plug_nic(nic_client, nic, "paravirtual", False)
    assert nic_peer.names() == ["netdev_add", "device_add", "netdev_del"]
    disk_peer, disk_client = _connect(qmp_peer, dict(failing))
    disk = hotplug.DiskDevice(path="/d", node="hotdisk-x", device="hotvd-x")
    with pytest.raises(qmp.QmpCommandError):
        hotplug.plug_disk(disk_client, disk, "paravirtual", "default")
    assert disk_peer.calls[-1] == ("blockdev-del", {"node-name": "hotdisk-x"})


def test_whole_operations_keep_the_record_in_step(qmp_peer: Any) -> None:
    runtime = _runtime()
    peer, client = _connect(qmp_peer, after={"device_del": [("DEVICE_DELETED",
                                                             {"device": "nic0"})]})
    nic = base.NicSpec(mac="aa:00:00:00:00:03", uuid=UUID)
    dev = hotplug.add_nic(client, runtime, "inst1", nic, 1, cmdline.NETDEV_USER)
    assert [n["mac"] for n in runtime["spec"]["nics"]] == [
        "aa:00:00:00:00:01", "aa:00:00:00:00:03", "aa:00:00:00:00:02"]
    assert [n.device for n in hotplug.devices_of(runtime).nics] == ["nic0", dev.device, "nic1"]
    assert runtime["argv"][-4:] == hotplug.nic_argv(dev, "paravirtual")
    hotplug.remove_nic(client, runtime, base.NicSpec(mac="x", uuid="u0"), 5.0, StepClock())
    assert [n.device for n in hotplug.devices_of(runtime).nics] == [dev.device, "nic1"]
    assert "net0" not in " ".join(runtime["argv"])
    assert ("netdev_del", {"id": "net0"}) in peer.calls
    with pytest.raises(errors.HypervisorError, match="has no NIC"):
        hotplug.remove_nic(client, runtime, base.NicSpec(mac="x", uuid="u0"), 5.0, StepClock())


def test_a_failed_step_leaves_the_record_alone(qmp_peer: Any) -> None:
    runtime = _runtime()
    before = json.dumps(runtime, sort_keys=True)
    _, client = _connect(qmp_peer, {"device_add": qmp.QmpCommandError("device_add", "E", "no")})
    with pytest.raises(qmp.QmpCommandError):
        hotplug.add_disk(client, runtime, "/d/1", UUID, 1)
    clock = StepClock()
    _, silent = _connect(qmp_peer, {"query-block": [
        {"device": "disk0", "qdev": "/machine/peripheral-anon/device[0]/virtio-backend"}]},
        clock=clock)
    with pytest.raises(errors.HypervisorError, match="device\\[0\\] within 2s"):
        hotplug.remove_disk(silent, runtime, "/d/0", 2.0, clock)
    assert json.dumps(runtime, sort_keys=True) == before


def test_other_hypervisors_refuse_hotplug_and_do_not_resize(tmp_path: Any) -> None:
    hv = fake.FakeHypervisor(pathutils.Paths(root=str(tmp_path)))
    assert hv.resize_disk("inst1", "/d/0", 1) is False
    with pytest.raises(errors.HypervisorError, match="Hotplug is not supported by hypervisor"):
        hv.hotplug_supported("inst1")
    with pytest.raises(errors.HypervisorError, match="not supported"):
        hv.hot_add_nic("inst1", base.NicSpec(mac="m"), 0)


def test_balloon_sets_the_target_within_the_started_memory(qmp_peer: Any) -> None:
    runtime = _runtime()
    runtime["spec"]["memory"] = 128
    peer, client = _connect(qmp_peer, {"query-balloon": {"actual": 96 * 1024 * 1024}})
    hotplug.balloon(client, runtime, 64)
    assert peer.calls == [("balloon", {"value": 64 * 1024 * 1024})]
    assert runtime["balloon"] == 64
    assert hotplug.query_balloon(client) == 96
    with pytest.raises(errors.HypervisorError, match="cannot grow to 256 MiB"):
        hotplug.balloon(client, runtime, 256)
    _, old = _connect(qmp_peer, {
        "balloon": qmp.QmpCommandError("balloon", "DeviceNotActive", "none"),
        "query-balloon": qmp.QmpCommandError("query-balloon", "DeviceNotActive", "none")})
    with pytest.raises(errors.HypervisorError, match="has no balloon device"):
        hotplug.balloon(old, runtime, 64)
    assert hotplug.query_balloon(old) is None


def test_pin_argv_puts_every_pci_device_where_it_is() -> None:
    argv = _runtime()["argv"] + ["-device", "virtio-balloon-pci,id=balloon0",
                                 "-device", "usb-tablet", "-S"]
    pinned = hotplug.pin_argv(argv, {"disk0": "0x5", "nic0": "0x2", "nic1": "0x3",
                                     "balloon0": "0x4"})
    assert pinned == ["qemu", "-name", "inst1",
                      "-drive", "file=/d/0,format=raw,if=none,id=disk0",
                      "-device", "virtio-blk-pci,drive=disk0,addr=0x5",
                      "-netdev", "tap,id=net0,ifname=gntabc.0,script=no,downscript=no",
                      "-device", "virtio-net-pci,netdev=net0,mac=aa:00:00:00:00:01,id=nic0,"
                                 "addr=0x2",
                      "-netdev", "user,id=net1",
                      "-device", "virtio-net-pci,netdev=net1,mac=aa:00:00:00:00:02,id=nic1,"
                                 "addr=0x3",
                      "-device", "virtio-balloon-pci,id=balloon0,addr=0x4",
                      "-device", "usb-tablet", "-S"]
    # pinning twice changes nothing; dropping the boot disk drops its -device too
    assert hotplug.pin_argv(pinned, {"disk0": "0x5", "nic0": "0x2"}) == pinned
    assert "drive=disk0" not in " ".join(hotplug.drop_argv(pinned, ["disk0"]))


def test_pci_slots_reads_qom_addresses(qmp_peer: Any) -> None:
    def qom_get(path: str, property: str) -> Any:
        devfn = {"/machine/peripheral-anon/device[0]": 5 << 3,
                 "/machine/peripheral/nic0": 2 << 3,
                 "/machine/peripheral/nic1": (3 << 3) | 1}.get(path)
        if devfn is None:
            raise qmp.QmpCommandError("qom-get", "DeviceNotFound", "no")
        return devfn
    _, client = _connect(qmp_peer, {
        "query-block": [{"device": "disk0",
                         "qdev": "/machine/peripheral-anon/device[0]/virtio-backend"}],
        "qom-get": qom_get})
    argv = _runtime()["argv"] + ["-device", "usb-tablet,id=tab0"]
    assert hotplug.pci_slots(client, argv) == {"disk0": "0x5", "nic0": "0x2", "nic1": "0x3.1"}


def test_a_migration_target_gets_the_recorded_machine_on_its_paths(qmp_peer: Any) -> None:
    runtime = _runtime()
    assert hotplug.migration_template(runtime) is None    # the spec describes it
    hotplug.add_disk(_connect(qmp_peer)[1], runtime, "/src/d,1", UUID, 1)
    template = hotplug.migration_template(runtime)
    assert template is not None and template["disks"] == ["/d/0", "/src/d,1"]
    argv, devices = hotplug.retarget(template, ["/dst/0", "/dst/1"], "/usr/bin/qemu-x")
    assert argv[0] == "/usr/bin/qemu-x" and argv[1:3] == ["-name", "inst1"]
    assert argv[argv.index("-drive") + 1] == "file=/dst/0,format=raw,if=virtio,id=disk0"
    blockdev = json.loads(argv[argv.index("-blockdev") + 1])
    assert blockdev["file"]["filename"] == "/dst/1"
    assert len(argv) == len(runtime["argv"])
    assert [d["path"] for d in devices["disks"]] == ["/dst/0", "/dst/1"]
    with pytest.raises(errors.HypervisorError, match="2 disks, the target has 1"):
        hotplug.retarget(template, ["/dst/0"], "qemu")
