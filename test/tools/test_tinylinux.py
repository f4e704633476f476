"""The tinylinux builder's pure parts: the cpio writer, module metadata, load order, /init."""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import threading
import time

import pytest

from ganeti import errors
from tools.harness import tinylinux


def _parse_newc(data: bytes) -> list[tuple[str, int, bytes]]:
    """Read a newc archive back (a second, independent reading of the format)."""
    out, pos = [], 0
    while True:
        assert data[pos:pos + 6] == b"070701"
        fields = [int(data[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        pos += 110
        name = data[pos:pos + namesize - 1].decode()
        pos = (pos + namesize + 3) & ~3
        body = data[pos:pos + size]
        pos = (pos + size + 3) & ~3
        if name == "TRAILER!!!":
            assert pos == len(data)
            return out
        out.append((name, mode, body))


def test_newc_archive_round_trips():
    entries = [("bin", stat.S_IFDIR | 0o755, b""),
               ("bin/x", stat.S_IFREG | 0o755, b"abc"),
               ("bin/sh", stat.S_IFLNK | 0o777, b"busybox"),
               ("init", stat.S_IFREG | 0o755, b"#!/bin/sh\n")]
    assert _parse_newc(tinylinux.newc_archive(entries)) == entries


@pytest.mark.skipif(shutil.which("cpio") is None, reason="cpio is not installed")
def test_newc_archive_is_read_by_cpio(tmp_path):
    data = tinylinux.newc_archive([("d", stat.S_IFDIR | 0o755, b""),
                                   ("d/f", stat.S_IFREG | 0o644, b"hello\n"),
                                   ("l", stat.S_IFLNK | 0o777, b"d/f")])
    proc = subprocess.run(["cpio", "-t"], input=data, capture_output=True, check=True)
    assert proc.stdout.decode().split() == ["d", "d/f", "l"]
    subprocess.run(["cpio", "-id", "--quiet"], input=data, cwd=tmp_path, check=True)
    assert (tmp_path / "d" / "f").read_bytes() == b"hello\n"
    assert os.readlink(tmp_path / "l") == "d/f"


def _elf_module(modinfo: bytes) -> bytes:
    """A minimal ELF64 file with a ``.modinfo`` section (what the reader needs)."""
    shstrtab = b"\0.modinfo\0.shstrtab\0"
    body_off = 64
    modinfo_off, shstr_off = body_off, body_off + len(modinfo)
    shoff = (shstr_off + len(shstrtab) + 7) & ~7
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, 3, 2)
    sections = b"".join([
        bytes(64),
        struct.pack("<IIQQQQ", 1, 1, 0, 0, modinfo_off, len(modinfo)) + bytes(24),
        struct.pack("<IIQQQQ", 10, 3, 0, 0, shstr_off, len(shstrtab)) + bytes(24)])
    image = bytes(header) + modinfo + shstrtab
    return image + bytes(shoff - len(image)) + sections


def test_module_info_reads_the_modinfo_section():
    image = _elf_module(b"license=GPL\0depends=virtio,virtio_ring\0name=virtio_blk\0")
    assert tinylinux.module_info(image) == {"license": "GPL", "depends": "virtio,virtio_ring",
                                            "name": "virtio_blk"}


def test_module_info_refuses_other_files():
    with pytest.raises(errors.ProgrammerError):
        tinylinux.module_info(b"#!/bin/sh\n")


def test_module_load_order_puts_dependencies_first():
    available = {"virtio_blk": ["virtio", "virtio_ring"], "virtio": [], "virtio_ring": [],
                 "virtio_pci": ["virtio", "virtio_ring"], "evdev": []}
    order = tinylinux.module_load_order(available, ["virtio_pci", "virtio_blk", "button", "evdev"])
    # "button" is not a module here (built in): left out
    assert order == ["virtio", "virtio_ring", "virtio_pci", "virtio_blk", "evdev"]


def test_init_prints_the_lines_tests_look_for():
    init = tinylinux.init_script()
    assert init.startswith("#!/bin/busybox sh\n")
    assert f'echo "{tinylinux.BOOT_LINE} $host"' in init
    assert tinylinux.UPTIME_LINE in init and "poweroff -f" in init


def test_cache_dir_from_the_environment():
    assert tinylinux.default_cache_dir({tinylinux.CACHE_ENV: "/x/y"}) == "/x/y"
    assert tinylinux.default_cache_dir({}).endswith(os.path.join(".cache", "tinylinux"))


@pytest.fixture
def fake_apt(monkeypatch):
    """Package versions without apt; a build that only writes stand-in files, counted."""
    versions = {"kernel": "6.1.1-1", "busybox": "1:1.35.0-4"}
    builds: list[str] = []
    monkeypatch.setattr(tinylinux, "versioned_kernel_package", lambda meta: "linux-image-6.1.0-9-cloud-amd64")
    monkeypatch.setattr(tinylinux, "candidate_version", lambda package: versions["kernel"])
    monkeypatch.setattr(tinylinux, "_installed_version", lambda package: versions["busybox"])

    def build_into(target, work, kpkg, kver, bbver, bb_installed, log):
        builds.append(kver)
        time.sleep(0.2)  # long enough for a second builder to queue on the lock
        os.makedirs(target)
        for name in ("vmlinuz", "initrd.img"):
            with open(os.path.join(target, name), "w") as fh:
                fh.write(name)
        with open(os.path.join(target, "guest.json"), "w") as fh:
            json.dump({"kernel_package": kpkg, "kernel_version": kver,
                       "kernel_release": "6.1.0-9-cloud-amd64", "busybox_version": bbver,
                       "modules": ["virtio"]}, fh)

    monkeypatch.setattr(tinylinux, "_build_into", build_into)
    return versions, builds


def test_build_is_cached_by_package_versions(tmp_path, fake_apt):
    versions, builds = fake_apt
    first = tinylinux.build(str(tmp_path))
    assert tinylinux.build(str(tmp_path)) == first and builds == ["6.1.1-1"]
    assert os.path.exists(first.kernel) and first.modules == ("virtio",)
    versions["kernel"] = "6.1.2-1"  # a new kernel in the apt lists: a new build
    second = tinylinux.build(str(tmp_path))
    assert second.directory != first.directory and builds == ["6.1.1-1", "6.1.2-1"]
    # nothing half-built is left next to the builds
    assert sorted(os.listdir(tmp_path)) == sorted(
        [".lock", os.path.basename(first.directory), os.path.basename(second.directory)])


def test_concurrent_builds_build_once(tmp_path, fake_apt):
    _, builds = fake_apt
    results: list[tinylinux.Guest] = []
    threads = [threading.Thread(target=lambda: results.append(tinylinux.build(str(tmp_path))))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert builds == ["6.1.1-1"] and len(results) == 3
    assert len({r.directory for r in results}) == 1


def test_install_links_a_build_into_a_directory(tmp_path, fake_apt):
    guest = tinylinux.build(str(tmp_path / "cache"))
    copy = tinylinux.install(guest, str(tmp_path / "os" / "guest"))
    assert copy.directory == str(tmp_path / "os" / "guest")
    assert open(copy.initrd).read() == "initrd.img"
    assert tinylinux.find_installed(copy.directory) == copy
    assert tinylinux.find_installed(str(tmp_path)) is None


def test_apt_cache_is_asked_once_while_apt_and_dpkg_stay_the_same(monkeypatch):
    calls: list[list[str]] = []
    answers = {"depends": "linux-image-cloud-amd64\n  Depends: linux-image-6.1.0-9-cloud-amd64\n",
               "policy": "x:\n  Installed: (none)\n  Candidate: 6.1.1-1\n"}

    def run(argv, *, cwd=None):
        calls.append(list(argv))
        return answers[argv[1]]
    state = [(1, 2, 3, 4)]
    monkeypatch.setattr(tinylinux, "_run", run)
    monkeypatch.setattr(tinylinux, "_apt_state", lambda: state[0])
    monkeypatch.setattr(tinylinux, "_APT_ANSWERS", {})
    for _ in range(3):
        assert tinylinux.versioned_kernel_package("linux-image-cloud-amd64") == \
            "linux-image-6.1.0-9-cloud-amd64"
        assert tinylinux.candidate_version("linux-image-6.1.0-9-cloud-amd64") == "6.1.1-1"
    assert calls == [["apt-cache", "depends", "linux-image-cloud-amd64"],
                     ["apt-cache", "policy", "linux-image-6.1.0-9-cloud-amd64"]]
    # another package is another question
    tinylinux.candidate_version("busybox")
    assert calls[-1] == ["apt-cache", "policy", "busybox"]
    # after an apt-get update (the lists' time changed) apt is asked again
    state[0] = (5, 2, 3, 4)
    answers["policy"] = "x:\n  Candidate: 6.1.2-1\n"
    assert tinylinux.candidate_version("linux-image-6.1.0-9-cloud-amd64") == "6.1.2-1"
    assert len(calls) == 4


def test_apt_state_names_the_lists_and_dpkgs_status(tmp_path, monkeypatch):
    present, missing = tmp_path / "lists", tmp_path / "none"
    present.mkdir()
    monkeypatch.setattr(tinylinux, "_APT_STATE_FILES", (str(present), str(missing)))
    before = tinylinux._apt_state()
    assert before[0] == present.stat().st_mtime_ns and before[1] == 0
    os.utime(present, ns=(before[0] + 10**9, before[0] + 10**9))
    assert tinylinux._apt_state()[0] == before[0] + 10**9
