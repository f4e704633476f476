"""Integration: instance, disk and OS procedures against real node daemons."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import stat
import sys

import pytest

from ganeti import serializer
from ganeti.objects import NIC, Disk, Instance
from ganeti.storage.filestorage import file_logical_id

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from noded_harness import REPO_ROOT, NodedCluster  # noqa: E402

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024
FILE_DIR = "/srv/ganeti/file-storage"


def install_tinyos(root: str) -> None:
    """Copy tools/os/tinyos into <root>/srv/ganeti/os/tinyos, scripts executable."""
    dest = pathlib.Path(root, "srv", "ganeti", "os", "tinyos")
    shutil.copytree(REPO_ROOT / "tools" / "os" / "tinyos", dest)
    for script in ("create", "export", "import", "rename", "verify"):
        path = dest / script
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("nodedinst")
    shared = str(base / "shared-storage")
    with NodedCluster(base, 2) as c:
        for n in c.nodes:
            install_tinyos(n.paths.root)
        res = c.runner().call_write_ssconf_files(c.names, values={"shared_file_storage_dir": shared})
        for r in res.values():
            r.raise_on_failure("ssconf")
        c.shared_dir = shared
        yield c


def _ok(results, node):
    res = results[node]
    assert res.fail_msg is None, res.fail_msg
    return res.payload


def _err(results, node) -> str:
    res = results[node]
    assert res.fail_msg is not None, f"expected a failure, got {res.payload!r}"
    return res.fail_msg


def _inst(name: str, disks: list[dict], template: str = "file", os_name: str = "tinyos") -> dict:
    data = serializer.to_data(Instance(
        name=name, uuid="uuid-" + name, os=os_name, hypervisor="fake", disk_template=template,
        beparams={"maxmem": 256, "minmem": 256, "vcpus": 1},
        hvparams={"migration_mode": "live"},
        nics=[NIC(uuid="nic-" + name, mac="aa:00:00:12:34:56",
                  nicparams={"mode": "bridged", "link": "br0"})]))
    data["disks_info"] = disks
    return data


def _disk(inst_name: str, uuid: str, size: int, template: str = "file",
          base: str = FILE_DIR) -> dict:
    return serializer.to_data(Disk(uuid=uuid, dev_type=template, size=size, logical_id=list(
        file_logical_id(base, inst_name, uuid, 0))))


def test_file_instance_lifecycle(cluster) -> None:
    rpc = cluster.runner()
    n1, n2 = cluster.names
    name = "web1.example.com"
    disk = _disk(name, "disk-web1", 4)
    created = _ok(rpc.call_blockdev_create(
        [n1], disk=disk, size=4, owner_instance_name=name, on_primary=True, info="", excl_stor=False,
    ), n1)
    assert created["path"] == f"{FILE_DIR}/{name}/disk-web1.file.disk0"
    inst = _inst(name, [disk])
    log = _ok(rpc.call_instance_os_add([n1], instance=inst, reinstall=False, debug=0), n1)
    assert log.startswith("/var/log/ganeti/os/add-tinyos-")
    local = os.path.join(cluster.nodes[0].paths.root, created["path"].lstrip("/"))
    with open(local, "rb") as fh:
        assert fh.read(11) == b"TINYOS-BOOT"

    free_before = _ok(rpc.call_node_info(
        [n1], storage_units=[], hv_specs=[["fake", {}]]), n1)["hv"][0]["memory_free"]
    _ok(rpc.call_instance_start([n1], instance=inst, disks=[disk], startup_paused=False), n1)
    infos = rpc.call_all_instances_info([n1, n2], hypervisor_list=["fake"], all_hvparams={"fake": {}})
    assert _ok(infos, n1)[name]["state"] == 0 and _ok(infos, n1)[name]["memory"] == 256
    assert name not in _ok(infos, n2)
    assert _ok(rpc.call_instance_list(
        [n1], hypervisor_list=["fake"], all_hvparams={"fake": {}}), n1) == [name]
    hv = _ok(rpc.call_node_info([n1], storage_units=[], hv_specs=[["fake", {}]]), n1)["hv"][0]
    assert hv["memory_free"] == free_before - 256 and hv["instance_count"] >= 1

    # errors come back as [false, msg]
    assert "already running" in _err(rpc.call_instance_start(
        [n1], instance=inst, disks=[disk], startup_paused=False), n1)
    _ok(rpc.call_instance_reboot([n1], instance=inst, reboot_type="full", shutdown_timeout=5.0), n1)
    assert _ok(rpc.call_instance_info(
        [n1], instance_name=name, hypervisor="fake", hvparams={}), n1)["hv_state"] == "running"

    _ok(rpc.call_instance_shutdown([n1], instance=inst, timeout=5.0), n1)
    assert _ok(rpc.call_instance_info(
        [n1], instance_name=name, hypervisor="fake", hvparams={}), n1) is None
    _ok(rpc.call_blockdev_shutdown([n1], disk=disk), n1)
    _ok(rpc.call_blockdev_remove([n1], disk=disk), n1)
    assert _ok(rpc.call_blockdev_find([n1], disk=disk), n1) is None
    assert not os.path.exists(local)


def test_errors_are_clear(cluster) -> None:
    rpc = cluster.runner()
    n1 = cluster.names[0]
    name = "bad1.example.com"
    disk = _disk(name, "disk-bad1", 1)
    assert "does not exist" in _err(rpc.call_instance_start(
        [n1], instance=_inst(name, [disk]), disks=[disk], startup_paused=False), n1)
    _ok(rpc.call_blockdev_create(
        [n1], disk=disk, size=1, owner_instance_name=name, on_primary=True, info="", excl_stor=False,
    ), n1)
    try:
        msg = _err(rpc.call_instance_os_add(
            [n1], instance=_inst(name, [disk], os_name="nosuchos"), reinstall=False, debug=0), n1)
        assert "nosuchos" in msg and "not found" in msg
        msg = _err(rpc.call_os_validate(
            [n1], required=True, osname="tinyos", checks=["parameters"], osparams={"fill": "lots"},
            osparams_private={}), n1)
        assert "fill" in msg
        assert _ok(rpc.call_os_validate(
            [n1], required=False, osname="nosuchos", checks=[], osparams={}, osparams_private={},
        ), n1) is False
        assert "already exists" in _err(
            rpc.call_blockdev_create(
                [n1], disk=disk, size=1, owner_instance_name=name, on_primary=True, info="",
                excl_stor=False), n1)
    finally:
        _ok(rpc.call_blockdev_remove([n1], disk=disk), n1)
    rows = _ok(rpc.call_os_diagnose([n1]), n1)
    assert [r[:3] for r in rows] == [["tinyos", "/srv/ganeti/os/tinyos", True]]


def test_live_migration_of_sharedfile_instance(cluster) -> None:
    rpc = cluster.runner()
    n1, n2 = cluster.names
    a2 = cluster.nodes[1].address
    name = "mig1.example.com"
    disk = _disk(name, "disk-mig1", 2, "sharedfile", cluster.shared_dir)
    created = _ok(rpc.call_blockdev_create(
        [n1], disk=disk, size=2, owner_instance_name=name, on_primary=True, info="", excl_stor=False,
    ), n1)
    assert created["path"].startswith(cluster.shared_dir)
    inst = _inst(name, [disk], "sharedfile")
    _ok(rpc.call_instance_os_add([n1], instance=inst, reinstall=False, debug=0), n1)
    _ok(rpc.call_instance_start([n1], instance=inst, disks=[disk], startup_paused=False), n1)
    _ok(rpc.call_instance_migratable([n1], instance=inst), n1)

    info = _ok(rpc.call_migration_info([n1], instance=inst), n1)
    assert _ok(rpc.call_blockdev_assemble(
        [n2], disk=disk, instance_name=name, as_primary=True, idx=0), n2)["path"] == created["path"]
    _ok(rpc.call_accept_instance([n2], instance=inst, info=info, target=a2), n2)
    _ok(rpc.call_instance_migrate(
        [n1], instance=inst, target_node=n2, target_address=a2, live=True, target_info={}), n1)
    assert _ok(rpc.call_instance_get_migration_status([n1], instance=inst), n1)["status"] == "completed"
    _ok(rpc.call_instance_finalize_migration_dst([n2], instance=inst, info=info, success=True), n2)
    _ok(rpc.call_instance_finalize_migration_src([n1], instance=inst, success=True, live=True), n1)

    infos = rpc.call_all_instances_info([n1, n2], hypervisor_list=["fake"], all_hvparams={"fake": {}})
    assert name not in _ok(infos, n1)
    assert _ok(infos, n2)[name]["state"] == 0
    _ok(rpc.call_instance_shutdown([n2], instance=inst, timeout=5.0), n2)
    _ok(rpc.call_blockdev_remove([n2], disk=disk), n2)
    assert not os.path.exists(created["path"])


def test_copy_file_disk_between_nodes(cluster) -> None:
    rpc = cluster.runner()
    n1, n2 = cluster.names
    name = "move1.example.com"
    size = 6
    disk = _disk(name, "disk-move1", size)
    _ok(rpc.call_blockdev_create(
        [n1], disk=disk, size=size, owner_instance_name=name, on_primary=True, info="", excl_stor=False,
    ), n1)
    _ok(rpc.call_blockdev_create(
        [n2], disk=disk, size=size, owner_instance_name=name, on_primary=True, info="", excl_stor=False,
    ), n2)
    data = os.urandom(3 * MIB + 12345)
    src_local = os.path.join(cluster.nodes[0].paths.root, disk["logical_id"][1].lstrip("/"))
    dst_local = os.path.join(cluster.nodes[1].paths.root, disk["logical_id"][1].lstrip("/"))
    with open(src_local, "r+b") as fh:
        fh.seek(2 * MIB)        # leave the first 2 MiB sparse (zero chunks)
        fh.write(data)
    chunk, offset, zero_chunks = 2 * MIB, 0, 0
    for _ in range(100):
        part = _ok(rpc.call_blockdev_read_chunk([n1], disk=disk, offset=offset, length=chunk), n1)
        if part["zero"]:
            zero_chunks += 1
        else:
            assert _ok(rpc.call_blockdev_write_chunk([n2], disk=disk, offset=offset, data=part["data"]),
                       n2) == part["length"]
        offset += part["length"]
        if part["eof"]:
            break
    assert offset == size * MIB and zero_chunks >= 1
    sums = rpc.call_blockdev_checksum([n1, n2], disk=disk)
    assert _ok(sums, n1) == _ok(sums, n2)
    with open(src_local, "rb") as a, open(dst_local, "rb") as b:
        assert hashlib.sha1(a.read()).digest() == hashlib.sha1(b.read()).digest()
    for node in (n1, n2):
        _ok(rpc.call_blockdev_remove([node], disk=disk), node)
