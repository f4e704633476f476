"""Tests for ganeti.backend.hotplug: what the hypervisor is asked (fake hypervisor)."""

from __future__ import annotations

from typing import Any

import pytest
from test.backend.test_backend_instance import NAME, _file_disk, _inst

from ganeti import errors
from ganeti.backend import hotplug, instance
from ganeti.hypervisor import base
from ganeti.hypervisor.fake import FakeHypervisor


class Recorder(FakeHypervisor):
    """The fake hypervisor, plus hotplug calls recorded instead of refused."""

    calls: list[tuple[Any, ...]] = []

    def hotplug_supported(self, name: str) -> None:
        self.calls.append(("supported", name))

    def hot_add_nic(self, name: str, nic: base.NicSpec, idx: int) -> None:
        self.calls.append(("add_nic", name, nic, idx))

    def hot_del_nic(self, name: str, nic: base.NicSpec) -> None:
        self.calls.append(("del_nic", name, nic.mac))

    def hot_add_disk(self, name: str, path: str, uuid: str, idx: int) -> None:
        self.calls.append(("add_disk", name, path, uuid, idx))

    def hot_del_disk(self, name: str, path: str) -> None:
        self.calls.append(("del_disk", name, path))

    def resize_disk(self, name: str, path: str, size: int) -> bool:
        self.calls.append(("resize", name, path, size))
        return True


@pytest.fixture
def rec(ctx, monkeypatch) -> list[tuple[Any, ...]]:
    Recorder.calls = []
    monkeypatch.setattr(hotplug, "hypervisor_for", lambda c, name: Recorder(c.paths))
    return Recorder.calls


def test_nic_add_and_remove_name_the_filled_nic(ctx, rec) -> None:
    hotplug.hotplug_supported(ctx, _inst())
    hotplug.hotplug_device(ctx, _inst(), "add", "nic", 0)
    hotplug.hotplug_device(ctx, _inst(), "remove", "nic", 0)
    assert rec[0] == ("supported", NAME)
    _, name, nic, idx = rec[1]
    assert (name, nic.mac, nic.link, nic.uuid, idx) == (NAME, "aa:00:00:00:00:01", "br0", "n1", 0)
    assert rec[2] == ("del_nic", NAME, "aa:00:00:00:00:01")


def test_disk_add_assembles_and_gives_the_local_path(ctx, rec) -> None:
    disk = _file_disk(ctx)
    inst = {**_inst(), "disks_info": [disk]}
    hotplug.hotplug_device(ctx, inst, "add", "disk", 0)
    path = ctx.local_path(disk["logical_id"][1])
    assert rec == [("add_disk", NAME, path, "d1", 0)]
    hotplug.hotplug_device(ctx, inst, "remove", "disk", 0)
    assert rec[1] == ("del_disk", NAME, path)


def test_resize_only_for_an_instance_on_the_node(ctx, rec) -> None:
    disk = _file_disk(ctx)
    inst = {**_inst(), "disks_info": [disk]}
    assert hotplug.instance_resize_disk(ctx, inst, 0) is False
    assert rec == []
    instance.instance_start(ctx, _inst(), [disk], False)
    assert hotplug.instance_resize_disk(ctx, inst, 0) is True
    assert rec == [("resize", NAME, ctx.local_path(disk["logical_id"][1]), 2 * 1024 * 1024)]


@pytest.mark.parametrize("action,dev_type,idx,match", [
    ("plug", "nic", 0, "Invalid hotplug action"),
    ("add", "cpu", 0, "Invalid hotplug device type"),
    ("add", "nic", 3, "has no NIC 3"),
    ("add", "disk", 0, "has no disk 0"),
], ids=["action", "type", "nic-index", "disk-index"])
def test_bad_requests(ctx, rec, action: str, dev_type: str, idx: int, match: str) -> None:
    with pytest.raises(errors.OpExecError, match=match):
        hotplug.hotplug_device(ctx, _inst(), action, dev_type, idx)


def test_the_fake_hypervisor_refuses_hotplug(ctx) -> None:
    instance.instance_start(ctx, _inst(), [], False)
    with pytest.raises(errors.HypervisorError, match="Hotplug is not supported by hypervisor"):
        hotplug.hotplug_supported(ctx, _inst())
    with pytest.raises(errors.HypervisorError, match="not supported"):
        hotplug.hotplug_device(ctx, _inst(), "add", "nic", 0)
