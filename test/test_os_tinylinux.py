"""The shipped tinylinux OS definition's scripts on a disk image (no qemu, no root).

``create`` must leave a FAT filesystem with syslinux's boot sector and the
guest's files, ``rename`` must rewrite the hostname on the kernel command
line, ``verify`` must check the parameters.  The guest files are stand-ins
(the real build is exercised by test/integration/test_kvm_guest.py).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

TINYLINUX = pathlib.Path(__file__).resolve().parent.parent / "tools" / "os" / "tinylinux"
TOOLS = ("mkfs.fat", "mcopy", "mtype", "syslinux")
_PATH = os.environ.get("PATH", "") + ":/sbin:/usr/sbin"
_MISSING = [t for t in TOOLS if shutil.which(t, path=_PATH) is None]

pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"{', '.join(_MISSING)} not installed"
                                " (make debian-deps installs dosfstools, mtools, syslinux)")


@pytest.fixture
def osdir(tmp_path) -> pathlib.Path:
    dest = tmp_path / "tinylinux"
    shutil.copytree(TINYLINUX, dest, ignore=shutil.ignore_patterns("guest"))
    (dest / "guest").mkdir()
    (dest / "guest" / "vmlinuz").write_bytes(b"K" * 4096)
    (dest / "guest" / "initrd.img").write_bytes(b"I" * 4096)
    return dest


@pytest.fixture
def disk(tmp_path) -> pathlib.Path:
    path = tmp_path / "disk0"
    with open(path, "wb") as fh:
        fh.truncate(32 * 1024 * 1024)
    return path


def _run(osdir: pathlib.Path, script: str, *args: str, **env: str):
    full = {"PATH": _PATH, "OS_API_VERSION": "20", "DISK_COUNT": "1", **env}
    return subprocess.run([str(osdir / script), *args], env=full, capture_output=True,
                          text=True, check=False, timeout=60)


def _cfg(disk: pathlib.Path) -> str:
    return subprocess.run(["mtype", "-i", str(disk), "::syslinux.cfg"], capture_output=True,
                          text=True, check=True, env={"PATH": _PATH, "MTOOLS_SKIP_CHECK": "1"}
                          ).stdout


def test_create_installs_a_bootable_fat_image(osdir, disk):
    res = _run(osdir, "create", DISK_0_PATH=str(disk), DISK_0_SIZE="32",
               INSTANCE_NAME="inst1.example.com")
    assert res.returncode == 0, res.stderr
    data = disk.read_bytes()
    assert data[510:512] == b"\x55\xaa"
    assert data[0x36:0x3B] in (b"FAT12", b"FAT16") or data[0x52:0x57] == b"FAT32"
    assert b"SYSLINUX" in data[:512]  # syslinux's boot sector
    listing = subprocess.run(["mdir", "-a", "-b", "-i", str(disk), "::"], capture_output=True,
                             text=True, check=True,
                             env={"PATH": _PATH, "MTOOLS_SKIP_CHECK": "1"}).stdout.lower()
    for name in ("vmlinuz", "initrd.img", "syslinux.cfg", "ldlinux.sys"):
        assert f"::/{name}" in listing
    cfg = _cfg(disk)
    assert "KERNEL vmlinuz" in cfg and "INITRD initrd.img" in cfg
    assert "console=ttyS0" in cfg and "tinylinux.hostname=inst1.example.com" in cfg
    assert os.path.getsize(disk) == 32 * 1024 * 1024  # never truncated


def test_create_refuses_a_small_disk_and_a_missing_guest(osdir, disk):
    res = _run(osdir, "create", DISK_0_PATH=str(disk), DISK_0_SIZE="8", INSTANCE_NAME="i1")
    assert res.returncode != 0 and "too small" in res.stderr
    shutil.rmtree(osdir / "guest")
    res = _run(osdir, "create", DISK_0_PATH=str(disk), DISK_0_SIZE="32", INSTANCE_NAME="i1")
    assert res.returncode != 0 and "build --install" in res.stderr


def test_rename_rewrites_the_hostname(osdir, disk):
    assert _run(osdir, "create", DISK_0_PATH=str(disk), DISK_0_SIZE="32",
                INSTANCE_NAME="old.example.com").returncode == 0
    res = _run(osdir, "rename", DISK_0_PATH=str(disk), OLD_INSTANCE_NAME="old.example.com",
               INSTANCE_NAME="new.example.com")
    assert res.returncode == 0, res.stderr
    assert "tinylinux.hostname=new.example.com" in _cfg(disk)
    assert "old.example.com" not in _cfg(disk)


def test_verify_checks_the_hostname_prefix(osdir):
    assert _run(osdir, "verify", "parameters", OSP_HOSTNAME_PREFIX="web-").returncode == 0
    res = _run(osdir, "verify", "parameters", OSP_HOSTNAME_PREFIX="bad prefix")
    assert res.returncode != 0 and "hostname_prefix" in res.stderr
