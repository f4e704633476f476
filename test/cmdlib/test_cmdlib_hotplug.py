"""Hotplug in LUInstanceSetParams and the guest-visible grow of LUInstanceGrowDisk.

Uses the fake config/RPC environment of test_cmdlib_instance.py; the node
side records which device of which instance dict it was asked to plug.
"""

from __future__ import annotations

from typing import Any

import pytest
from test.cmdlib.test_cmdlib_instance import _create, _query, env  # noqa: F401  (a fixture)

from ganeti import errors


class Plugs:
    """Fake hotplug procedures: a log of (action, dev_type, idx, device) and refusals."""

    def __init__(self, fake: Any) -> None:
        self.log: list[tuple[str, str, int, Any]] = []
        self.supported: str | None = None        # None: supported, else the refusal
        self.failing: set[tuple[str, str]] = set()
        self.resized: list[tuple[str, int, int]] = []
        fake.do_hotplug_supported = self.hotplug_supported
        fake.do_hotplug_device = self.hotplug_device
        fake.do_instance_resize_disk = self.instance_resize_disk

    def hotplug_supported(self, node: str, inst: dict) -> None:
        if self.supported is not None:
            raise errors.HypervisorError(self.supported)

    def hotplug_device(self, node: str, inst: dict, action: str, dev_type: str,
                       idx: int) -> None:
        if (action, dev_type) in self.failing:
            raise errors.HypervisorError(f"guest refused {dev_type} {idx}")
        device = (inst["nics"][idx]["mac"] if dev_type == "nic"
                  else inst["disks_info"][idx]["size"])
        self.log.append((action, dev_type, idx, device))

    def instance_resize_disk(self, node: str, inst: dict, idx: int) -> bool:
        self.resized.append((inst["name"], idx, inst["disks_info"][idx]["size"]))
        return True


@pytest.fixture
def plugs(env: Any) -> Plugs:  # noqa: F811
    return Plugs(env.rpc)


def _macs(env: Any) -> list[str]:  # noqa: F811
    return [n.mac for n in env.cfg.get_instance_info_by_name("inst1").nics]


def test_hotplug_nic_add_and_remove_on_a_running_instance(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env)
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
            nics=[["add", -1, {"mac": "aa:00:00:00:00:42"}]])
    assert plugs.log == [("add", "nic", 1, "aa:00:00:00:00:42")]
    assert _macs(env)[1] == "aa:00:00:00:00:42"
    # an added NIC has a UUID (the hypervisor names its device after it)
    assert env.cfg.get_instance_info_by_name("inst1").nics[1].uuid
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
            nics=[["remove", 0, {}]])
    # the instance dict sent still had the NIC, at the index given
    assert plugs.log[1][:3] == ("remove", "nic", 0)
    assert _macs(env) == ["aa:00:00:00:00:42"]


def test_hotplug_disk_add_and_remove(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env)
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
            disks=[["add", -1, {"size": 64}]])
    assert plugs.log == [("add", "disk", 1, 64)]
    # removing a disk of a running instance needs --hotplug
    with pytest.raises(errors.OpPrereqError, match="Stop the instance"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", disks=[["remove", 1, {}]])
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
            disks=[["remove", 1, {}]])
    assert plugs.log[1] == ("remove", "disk", 1, 64)
    assert _query(env, ["disk.sizes"]) == [[[128]]]


def test_failed_disk_unplug_keeps_the_disk(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env, disks=[{"size": 128}, {"size": 32}])
    plugs.failing.add(("remove", "disk"))
    with pytest.raises(errors.OpExecError, match="Cannot unplug disk 1: guest refused"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
                disks=[["remove", 1, {}]])
    assert _query(env, ["disk.sizes"]) == [[[128, 32]]]


def test_failed_nic_plug_is_a_warning_and_the_config_changes(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env)
    plugs.failing.add(("add", "nic"))
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
            nics=[["add", -1, {"mac": "aa:00:00:00:00:43"}]])
    assert _macs(env)[1] == "aa:00:00:00:00:43"


def test_nic_modify_replugs(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env)
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
            nics=[["modify", 0, {"mac": "aa:00:00:00:00:44"}]])
    assert [(a, t, i) for a, t, i, _ in plugs.log] == [("remove", "nic", 0), ("add", "nic", 0)]
    assert plugs.log[1][3] == "aa:00:00:00:00:44"
    plugs.log.clear()
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
            nics=[["modify", 0, {"name": "eth0"}]])
    assert plugs.log == []             # a name is not seen by the guest


def test_without_hotplug_nothing_is_plugged(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env)
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            nics=[["add", -1, {}]], disks=[["add", -1, {"size": 64}]])
    assert plugs.log == []
    assert ("hotplug_supported", "node1") not in env.rpc.calls


def test_hotplug_refused_by_the_node(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env)
    plugs.supported = "Hotplug is not supported by hypervisor fake"
    before = env.raw()
    with pytest.raises(errors.OpPrereqError,
                       match="Hotplug is not possible: Hotplug is not supported by"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug=True,
                nics=[["add", -1, {}]])
    assert env.raw() == before
    # if possible: a warning, and the change applies at the next start
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", hotplug_if_possible=True,
            nics=[["add", -1, {}]])
    assert plugs.log == []
    assert len(_macs(env)) == 2


def test_grow_disk_tells_a_running_instance(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env)
    env.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    assert plugs.resized == [("inst1", 0, 192)]      # the instance dict has the new size
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    env.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    assert len(plugs.resized) == 1                   # a stopped instance: nothing to tell


def test_grow_disk_resize_failure_is_a_warning(env: Any, plugs: Plugs) -> None:  # noqa: F811
    _create(env)
    env.rpc.fail["instance_resize_disk"] = "QMP unavailable"
    env.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    assert _query(env, ["disk.size/0"]) == [[192]]
