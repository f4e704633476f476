"""The cloud image builder's pure parts and its cache entries (the build itself needs root and a mirror)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import pytest

from tools.harness import cloudimage


def test_cache_key_names_suite_packages_and_format():
    key = cloudimage.cache_key("bookworm", ["b", "a"])
    assert key.startswith("bookworm-")
    assert key == cloudimage.cache_key("bookworm", ["a", "b"])       # order does not matter
    assert key != cloudimage.cache_key("trixie", ["a", "b"])
    assert key != cloudimage.cache_key("bookworm", ["a", "b", "c"])
    assert key != cloudimage.cache_key("bookworm", ["a", "b"], fmt=cloudimage.FORMAT + 1)


def test_guest_files_boot_from_the_labelled_root_with_a_serial_console():
    files = cloudimage.guest_files("vmlinuz-6.1.0-1-cloud-amd64", "initrd.img-6.1.0-1-cloud-amd64")
    conf = files["boot/extlinux/extlinux.conf"]
    assert "  LINUX /boot/vmlinuz-6.1.0-1-cloud-amd64\n" in conf
    assert "  INITRD /boot/initrd.img-6.1.0-1-cloud-amd64\n" in conf
    assert f"root=LABEL={cloudimage.LABEL} ro" in conf and "console=ttyS0" in conf
    assert files["etc/fstab"].split()[:3] == [f"LABEL={cloudimage.LABEL}", "/", "ext4"]
    assert "datasource_list: [ NoCloud, None ]" in files["etc/cloud/cloud.cfg.d/90_ganeti.cfg"]
    assert files["etc/machine-id"] == ""
    assert "--autologin root" in files[
        "etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf"]


def test_find_built_reads_a_complete_entry_only(tmp_path):
    assert cloudimage.find_built(str(tmp_path), "bookworm") is None
    entry = tmp_path / cloudimage.cache_key("bookworm", cloudimage.PACKAGES)
    entry.mkdir()
    meta = {"suite": "bookworm", "packages": list(cloudimage.PACKAGES),
            "kernel_version": "6.1.0-1-cloud-amd64", "size": 4, "sha256": "ab" * 32,
            "format": cloudimage.FORMAT}
    (entry / cloudimage.META_NAME).write_text(json.dumps(meta))
    assert cloudimage.find_built(str(tmp_path), "bookworm") is None     # no image yet
    (entry / cloudimage.IMAGE_NAME).write_bytes(b"disk")
    found = cloudimage.find_built(str(tmp_path), "bookworm")
    assert found is not None
    assert found.path == str(entry / cloudimage.IMAGE_NAME)
    assert found.kernel_version == "6.1.0-1-cloud-amd64" and found.size == 4
    # a built image is returned without building again
    assert cloudimage.build(str(tmp_path), suite="bookworm", mirror="http://a.invalid/d") == found


def test_default_cache_dir():
    assert cloudimage.default_cache_dir({cloudimage.CACHE_ENV: "/x"}) == "/x"
    assert cloudimage.default_cache_dir({}).endswith(os.path.join(".cache", "cloudimage"))


def test_a_build_directory_is_removed(tmp_path):
    work = tmp_path / ".build-x"
    (work / "tree" / "etc").mkdir(parents=True)
    (work / "tree" / "etc" / "f").write_text("x")
    cloudimage._remove_tree(str(work))
    assert not work.exists()


@pytest.mark.skipif(shutil.which("qemu-img") is None, reason="needs qemu-img (make debian-deps)")
def test_qcow2_copy_is_made_once_beside_the_raw_image(tmp_path):
    raw = tmp_path / cloudimage.IMAGE_NAME
    raw.write_bytes(b"\x01" * 65536 + bytes(1 << 20))
    image = cloudimage.CloudImage(path=str(raw), suite="bookworm", packages=(),
                                  kernel_version="k", size=raw.stat().st_size, sha256="x")
    path, digest = cloudimage.qcow2(image)
    assert path == str(tmp_path / cloudimage.QCOW2_NAME)
    assert digest == hashlib.sha256(open(path, "rb").read()).hexdigest()
    info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", path],
                                     capture_output=True, text=True, check=True).stdout)
    assert info["format"] == "qcow2" and info["virtual-size"] == raw.stat().st_size
    made = os.stat(path).st_mtime_ns
    assert cloudimage.qcow2(image) == (path, digest)
    assert os.stat(path).st_mtime_ns == made
