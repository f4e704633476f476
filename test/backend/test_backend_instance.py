"""Tests for ganeti.backend.instance (fake hypervisor, file disks)."""

from __future__ import annotations

import json
import os

import pytest

from ganeti import errors, serializer
from ganeti.backend import blockdev, instance, node
from ganeti.backend.context import NodeContext
from ganeti.hypervisor.fake import FakeHypervisor
from ganeti.objects import NIC, Disk, Instance
from ganeti.pathutils import Paths
from ganeti.storage.filestorage import file_logical_id

NAME = "inst1.example.com"


def _inst(name=NAME, maxmem=256, **kw) -> dict:
    inst = Instance(name=name, uuid="u-" + name, os="tinyos", hypervisor="fake",
                    disk_template="file", beparams={"maxmem": maxmem, "minmem": maxmem,
                                                    "vcpus": 2},
                    hvparams={"migration_mode": "live"},
                    nics=[NIC(uuid="n1", mac="aa:00:00:00:00:01",
                              nicparams={"mode": "bridged", "link": "br0"})], **kw)
    return serializer.to_data(inst)


def _file_disk(ctx, uuid="d1", template="file", base="/srv/ganeti/file-storage") -> dict:
    disk = serializer.to_data(Disk(uuid=uuid, dev_type=template, size=2, logical_id=list(
        file_logical_id(base, NAME, uuid, 0))))
    blockdev.blockdev_create(ctx, disk, 2, NAME, True, "", False)
    return disk


def _hv(ctx) -> FakeHypervisor:
    hv = instance.hypervisor_for(ctx, "fake")
    assert isinstance(hv, FakeHypervisor)
    return hv


def test_start_reports_running_in_info_and_lists(ctx) -> None:
    disk = _file_disk(ctx)
    instance.instance_start(ctx, _inst(), [disk], False)
    info = instance.instance_info(ctx, NAME, "fake", {})
    assert info["memory"] == 256 and info["vcpus"] == 2
    assert info["state"] == instance.HV_STATE_CODE_RUNNING and info["hv_state"] == "running"
    assert instance.all_instances_info(ctx, ["fake"], {"fake": {}}) == {NAME: info}
    assert instance.instance_list(ctx, ["fake"], {"fake": {}}) == [NAME]
    state = _hv(ctx).get_instance_state(NAME)
    assert state["disks"] == [ctx.local_path(disk["logical_id"][1])]
    assert state["nics"][0]["link"] == "br0"


def test_start_twice_refused(ctx) -> None:
    instance.instance_start(ctx, _inst(), [], False)
    with pytest.raises(errors.HypervisorError, match="already running"):
        instance.instance_start(ctx, _inst(), [], False)


def test_start_missing_disk_refused(ctx) -> None:
    disk = serializer.to_data(Disk(uuid="x", dev_type="file", size=1, logical_id=list(
        file_logical_id("/srv/ganeti/file-storage", NAME, "x", 0))))
    with pytest.raises(errors.StorageError, match="does not exist"):
        instance.instance_start(ctx, _inst(), [disk], False)
    assert instance.instance_list(ctx, ["fake"], {}) == []


def test_start_paused_and_memory_overcommit(ctx) -> None:
    with open(os.path.join(ctx.paths.conf_dir, node.FAKE_NODE_INFO_FILE), "w") as fh:
        json.dump({"memory_total": 2048, "memory_dom0": 1024}, fh)
    instance.instance_start(ctx, _inst(maxmem=512), [], True)
    assert instance.instance_info(ctx, NAME, "fake", {})["hv_state"] == "paused"
    with pytest.raises(errors.HypervisorError, match="Not enough memory"):
        instance.instance_start(ctx, _inst("big.example.com", maxmem=1024), [], False)


def test_shutdown_and_shutdown_of_stopped_instance(ctx) -> None:
    instance.instance_start(ctx, _inst(), [], False)
    instance.instance_shutdown(ctx, _inst(), 10)
    assert instance.instance_info(ctx, NAME, "fake", {}) is None
    instance.instance_shutdown(ctx, _inst(), 10)   # not running: fine


def test_user_shutdown_reported_as_state_1(ctx) -> None:
    instance.instance_start(ctx, _inst(), [], False)
    _hv(ctx).simulate_user_shutdown(NAME)
    info = instance.all_instances_info(ctx, ["fake"], {})[NAME]
    assert info["state"] == instance.HV_STATE_CODE_SHUTDOWN and info["hv_state"] == "shutdown"
    instance.instance_start(ctx, _inst(), [], False)   # a shut down guest can be started
    assert instance.instance_info(ctx, NAME, "fake", {})["state"] == 0


@pytest.mark.parametrize("kind", ["soft", "hard", "full"])
def test_reboot_types(ctx, kind: str) -> None:
    disk = _file_disk(ctx)
    inst = _inst()
    instance.instance_start(ctx, inst, [disk], False)
    inst["disks_info"] = [disk]
    instance.instance_reboot(ctx, inst, kind, 5)
    state = _hv(ctx).get_instance_state(NAME)
    assert state["state"] == "running"
    assert state["disks"] == [ctx.local_path(disk["logical_id"][1])]
    if kind == "soft":
        assert state["reboots"] == 1


def test_hard_reboot_without_disks_info_keeps_disks(ctx) -> None:
    disk = _file_disk(ctx)
    instance.instance_start(ctx, _inst(), [disk], False)
    instance.instance_reboot(ctx, _inst(), "hard", 5)
    assert _hv(ctx).get_instance_state(NAME)["disks"] == [ctx.local_path(disk["logical_id"][1])]


def test_reboot_errors(ctx) -> None:
    with pytest.raises(errors.HypervisorError, match="not running"):
        instance.instance_reboot(ctx, _inst(), "soft", 5)
    with pytest.raises(errors.OpExecError, match="Invalid reboot type"):
        instance.instance_reboot(ctx, _inst(), "gentle", 5)
    instance.instance_reboot(ctx, _inst(), "full", 5)   # full starts a stopped instance
    assert instance.instance_info(ctx, NAME, "fake", {})["state"] == 0


def test_balloon_console_and_validate(ctx) -> None:
    instance.instance_start(ctx, _inst(), [], False)
    instance.instance_balloon_memory(ctx, _inst(), 512)
    assert instance.instance_info(ctx, NAME, "fake", {})["memory"] == 512
    cons = instance.instance_console_info(ctx, _inst())
    assert cons["instance"] == NAME and cons["kind"] == "msg" and cons["host"] == ctx.hostname
    assert cons["consoles"] == [{k: v for k, v in cons.items() if k != "consoles"}]
    instance.hypervisor_validate_params(ctx, "fake", {"migration_mode": "non-live"})
    with pytest.raises(errors.HypervisorError, match="migration_mode"):
        instance.hypervisor_validate_params(ctx, "fake", {"migration_mode": "teleport"})
    with pytest.raises(errors.HypervisorError, match="Unknown"):
        instance.hypervisor_validate_params(ctx, "xen-hvm", {})


def test_bad_instance_dict(ctx) -> None:
    with pytest.raises(errors.OpExecError, match="without a name"):
        instance.instance_start(ctx, {"hypervisor": "fake"}, [], False)
    with pytest.raises(errors.OpExecError, match="maxmem"):
        instance.instance_start(ctx, _inst(maxmem=0), [], False)


def test_migration_moves_state_between_nodes(ctx, tmp_path) -> None:
    shared = str(tmp_path / "shared")
    paths2 = Paths(root=str(tmp_path / "node2"))
    ctx2 = NodeContext(paths=paths2, hostname="node2.example.com", clock=lambda: 2000.0)
    for c in (ctx, ctx2):
        os.makedirs(c.paths.data_dir, exist_ok=True)
        with open(c.paths.ssconf_file("shared_file_storage_dir"), "w") as fh:
            fh.write(shared)
    disk = _file_disk(ctx, template="sharedfile", base=shared)
    inst = {**_inst(), "disks_info": [disk]}
    instance.instance_start(ctx, inst, [disk], False)
    instance.instance_migratable(ctx, inst)
    info = instance.migration_info(ctx, inst)
    blockdev.blockdev_assemble(ctx2, disk, NAME, True, 0)
    instance.accept_instance(ctx2, inst, info, "127.0.1.2")
    assert instance.instance_info(ctx2, NAME, "fake", {})["hv_state"] == "incoming"
    instance.instance_migrate(ctx, inst, "node2.example.com", "127.0.1.2", True, {})
    assert instance.instance_get_migration_status(ctx, inst)["status"] == "completed"
    instance.instance_finalize_migration_dst(ctx2, inst, info, True)
    instance.instance_finalize_migration_src(ctx, inst, True, True)
    assert instance.instance_list(ctx, ["fake"], {}) == []
    moved = instance.instance_info(ctx2, NAME, "fake", {})
    assert moved["hv_state"] == "running" and moved["memory"] == 256


def test_failed_migration_resumes_source(ctx, tmp_path) -> None:
    instance.instance_start(ctx, _inst(), [], False)
    instance.instance_migrate(ctx, _inst(), "node2", "127.0.1.2", False, {})
    instance.instance_finalize_migration_src(ctx, _inst(), False, False)
    assert instance.instance_info(ctx, NAME, "fake", {})["hv_state"] == "running"


def test_node_info_reports_fake_hypervisor_and_storage(ctx) -> None:
    with open(os.path.join(ctx.paths.conf_dir, node.FAKE_NODE_INFO_FILE), "w") as fh:
        json.dump({"memory_total": 8192, "memory_dom0": 512, "cpu_total": 4}, fh)
    before = node.node_info(ctx, [["file", "/srv/ganeti/file-storage", {}]], [["fake", {}]])
    assert before["hv"][0]["memory_free"] == 8192 - 512
    assert before["hv"][0]["instance_count"] == 0
    instance.instance_start(ctx, _inst(maxmem=1024), [], False)
    after = node.node_info(ctx, [["file", "/srv/ganeti/file-storage", {}]], [["fake", {}]])
    assert after["hv"][0]["memory_free"] == 8192 - 512 - 1024
    assert after["memory_free"] == after["hv"][0]["memory_free"]
    assert after["hv"][0]["instance_count"] == 1 and after["instance_count"] == 1
    assert after["memory_total"] == 8192 and after["cpu_total"] == 4
    storage = after["storage"][0]
    assert storage["storage_size"] > 0 and 0 <= storage["storage_free"] <= storage["storage_size"]


def _seed_user_data(ctx) -> str:
    import subprocess
    from ganeti.backend import osimage
    out = subprocess.run(["isoinfo", "-R", "-i", osimage.seed_path(ctx, NAME), "-x",
                          "/user-data"], capture_output=True, check=True)
    return out.stdout.decode()


@pytest.mark.skipif(not __import__("shutil").which("isoinfo"),
                    reason="genisoimage is not installed (make debian-deps)")
@pytest.mark.parametrize("kind", ["soft", "hard"])
def test_a_reboot_rebuilds_the_cloud_init_seed(ctx, kind: str) -> None:
    inst = _inst(osparams={"os-image": "debian.img", "ssh_authorized_keys": "ssh-ed25519 AAAAold"})
    instance.instance_start(ctx, inst, [], False)
    assert "AAAAold" in _seed_user_data(ctx)
    # the OS parameters changed on the master (the node missed the modify's rebuild)
    inst["osparams"]["ssh_authorized_keys"] = "ssh-ed25519 AAAAnew"
    instance.instance_reboot(ctx, inst, kind, 5)
    data = _seed_user_data(ctx)
    assert "AAAAnew" in data and "AAAAold" not in data
    assert instance.instance_info(ctx, NAME, "fake", {})["state"] == 0
