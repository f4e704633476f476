"""Tests for ganeti.backend.os with the shipped tinyos definition."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat

import pytest

from ganeti import errors, serializer
from ganeti.backend import blockdev
from ganeti.backend import os as bos
from ganeti.objects import NIC, Disk, Instance
from ganeti.storage.filestorage import file_logical_id

TINYOS = pathlib.Path(__file__).resolve().parents[2] / "tools" / "os" / "tinyos"
NAME = "inst1.example.com"


def install_tinyos(root: str) -> str:
    """Copy tools/os/tinyos to <root>/srv/ganeti/os/tinyos with executable scripts."""
    dest = os.path.join(root, "srv", "ganeti", "os", "tinyos")
    shutil.copytree(TINYOS, dest)
    for script in ("create", "export", "import", "rename", "verify"):
        path = os.path.join(dest, script)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return dest


@pytest.fixture
def tctx(ctx):
    install_tinyos(ctx.paths.root)
    return ctx


def _disk(ctx, uuid="d1", size=2) -> dict:
    disk = serializer.to_data(Disk(uuid=uuid, dev_type="file", size=size, logical_id=list(
        file_logical_id("/srv/ganeti/file-storage", NAME, uuid, 0))))
    blockdev.blockdev_create(ctx, disk, size, NAME, True, "", False)
    return disk


def _inst(disks, os_name="tinyos+default", name=NAME, osparams=None) -> dict:
    data = serializer.to_data(Instance(
        name=name, uuid="u1", os=os_name, hypervisor="fake",
        beparams={"maxmem": 128, "vcpus": 1}, osparams=osparams or {},
        nics=[NIC(uuid="n1", mac="aa:00:00:00:00:01", nicparams={"mode": "bridged",
                                                                   "link": "br0"})]))
    data["disks_info"] = disks
    return data


def _marker(ctx, disk) -> str:
    with open(ctx.local_path(disk["logical_id"][1]), "rb") as fh:
        fh.seek(4096)
        return fh.read(512).rstrip(b"\0").decode()


def test_os_diagnose_lists_tinyos_and_broken_ones(tctx) -> None:
    broken = os.path.join(tctx.paths.root, "srv", "ganeti", "os", "broken")
    os.makedirs(broken)
    rows = {r[0]: r for r in bos.os_diagnose(tctx)}
    name, path, status, diag, variants, params, apis, trusted = rows["tinyos"]
    assert path == "/srv/ganeti/os/tinyos" and status is True and diag == ""
    assert variants == ["default", "minimal", "compact"] and 20 in apis and trusted is True
    assert ["fill", params[1][1]] in params
    assert rows["broken"][2] is False and "API version" in rows["broken"][3]


def test_os_validate(tctx) -> None:
    assert bos.os_validate(tctx, True, "tinyos+minimal", ["parameters"], {"fill": "zero"}, {})
    assert bos.os_validate(tctx, False, "nosuchos", [], {}, {}) is False
    with pytest.raises(errors.InvalidOS, match="not found"):
        bos.os_validate(tctx, True, "nosuchos", [], {}, {})
    with pytest.raises(errors.InvalidOS, match="variant"):
        bos.os_validate(tctx, True, "tinyos+huge", [], {}, {})
    with pytest.raises(errors.ParameterError, match="refused"):
        bos.os_validate(tctx, True, "tinyos", ["parameters"], {"fill": "random"}, {})
    with pytest.raises(errors.ParameterError, match="Unknown parameters"):
        bos.os_validate(tctx, True, "tinyos", ["parameters"], {"colour": "red"}, {})
    with pytest.raises(errors.OpExecError, match="Unknown OS validation"):
        bos.os_validate(tctx, True, "tinyos", ["everything"], {}, {})


def test_os_validate_scrubs_a_refused_private_value(tctx) -> None:
    # tinyos's verify prints the value it refuses: neither the error nor its log keeps it
    secret = "not_a-valid_prefix"
    with pytest.raises(errors.ParameterError, match="refused") as info:
        bos.os_validate(tctx, True, "tinyos", ["parameters"], {},
                        {"hostname_prefix": secret})
    assert secret not in str(info.value) and "invalid value '<redacted>'" in str(info.value)
    logs = os.listdir(tctx.paths.os_log_dir)
    texts = [open(os.path.join(tctx.paths.os_log_dir, name)).read() for name in logs]
    assert texts and all(secret not in text for text in texts)


def test_instance_os_add_writes_image(tctx) -> None:
    disk = _disk(tctx)
    log = bos.instance_os_add(tctx, _inst([disk], osparams={"hostname_prefix": "vm-"}), False, 0)
    assert log.startswith("/var/log/ganeti/os/add-tinyos-inst1.example.com")
    with open(tctx.local_path(log)) as fh:
        text = fh.read()
    assert "DISK_0_BACKEND_TYPE=file:loop" in text and "NIC_0_BRIDGE=br0" in text
    with open(tctx.local_path(disk["logical_id"][1]), "rb") as fh:
        assert fh.read(11) == b"TINYOS-BOOT"
    marker = _marker(tctx, disk)
    assert f"name={NAME}" in marker and f"hostname=vm-{NAME}" in marker
    # assembled: the instance-disks link exists
    assert os.path.islink(os.path.join(tctx.paths.instance_disks_dir, f"{NAME}:0"))


def test_instance_os_add_failure_carries_log_tail(tctx) -> None:
    disk = _disk(tctx)
    with pytest.raises(errors.OpExecError, match="invalid value 'bogus' for parameter fill"):
        bos.instance_os_add(tctx, _inst([disk], osparams={"fill": "bogus"}), False, 0)


def test_instance_os_add_unknown_os_and_missing_disk(tctx) -> None:
    disk = _disk(tctx)
    with pytest.raises(errors.InvalidOS, match="not found"):
        bos.instance_os_add(tctx, _inst([disk], os_name="nosuchos"), False, 0)
    gone = dict(disk, uuid="zz", logical_id=list(
        file_logical_id("/srv/ganeti/file-storage", NAME, "zz", 0)))
    with pytest.raises(errors.StorageError, match="does not exist"):
        bos.instance_os_add(tctx, _inst([gone]), False, 0)


def test_instance_run_rename_rewrites_marker(tctx) -> None:
    disk = _disk(tctx)
    bos.instance_os_add(tctx, _inst([disk]), False, 0)
    log = bos.instance_run_rename(tctx, _inst([disk], name="new.example.com"), NAME, 0)
    assert "rename-tinyos-new.example.com" in log
    assert "name=new.example.com" in _marker(tctx, disk)
