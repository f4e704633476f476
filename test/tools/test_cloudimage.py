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
    # the serial console is /dev/console (the last console=), few kernel messages on it
    append = conf.split("APPEND ", 1)[1].split()
    assert [w for w in append if w.startswith("console=")][-1].startswith("console=ttyS0")
    assert "quiet" in append
    # fixed mappings: under TCG one Python start's translated code serves the next
    assert "norandmaps" in append


def test_cloud_init_runs_the_modules_the_tests_and_common_user_data_need():
    cfg = cloudimage.guest_files("k", "i")["etc/cloud/cloud.cfg.d/90_ganeti.cfg"]
    stages = {line.split(":", 1)[0]: [n for n in line.split(":", 1)[1].strip(" []").split(", ")
                                      if n]
              for line in cfg.splitlines() if line.startswith("cloud_")}
    assert set(stages) == {"cloud_init_modules", "cloud_config_modules", "cloud_final_modules"}
    for needed in ("set_hostname", "users-groups", "ssh", "growpart", "resizefs"):
        assert needed in stages["cloud_init_modules"]
    # the config stage's service is masked: its modules run in the final stage
    assert stages["cloud_config_modules"] == []
    assert "cloud-config.service" in cloudimage.MASKED_UNITS
    final = stages["cloud_final_modules"]
    # final-message prints cloud-init's "finished at" line on the console (the demo waits
    # for it), scripts-user runs a user-data script (runcmd writes it first),
    # package-update-upgrade-install installs packages
    for needed in ("final-message", "scripts-user", "package-update-upgrade-install",
                   "set-passwords"):
        assert needed in final
    assert final.index("runcmd") < final.index("scripts-user")
    assert "ssh_genkeytypes: [ ed25519 ]" in cfg


def test_build_files_leave_out_documentation_and_most_kernel_modules():
    files = cloudimage.build_files()
    excludes = files["etc/dpkg/dpkg.cfg.d/90ganeti-image"].splitlines()
    assert "path-exclude=/usr/share/doc/*" in excludes
    assert "path-include=/usr/share/doc/*/copyright" in excludes
    assert "path-exclude=/usr/share/man/*" in excludes
    assert "MODULES=list" in files["etc/initramfs-tools/conf.d/90-ganeti.conf"].splitlines()
    hook = files[cloudimage.INITRAMFS_HOOK]
    assert hook.startswith("#!/bin/sh\n")
    added = next(line for line in hook.splitlines() if line.startswith("manual_add_modules"))
    for module in ("virtio_pci", "virtio_blk", "virtio_scsi", "ata_piix", "sd_mod"):
        assert module in added.split()


def test_configure_writes_the_guest_files_masks_units_and_drops_what_is_not_needed(tmp_path):
    tree = tmp_path / "tree"
    cloudimage._write_files(str(tree), cloudimage.build_files())
    assert os.access(tree / cloudimage.INITRAMFS_HOOK, os.X_OK)
    (tree / "boot").mkdir()
    (tree / "boot" / "vmlinuz-6.1.0-9-cloud-amd64").write_text("k")
    (tree / "boot" / "initrd.img-6.1.0-9-cloud-amd64").write_text("i")
    for rel in ("etc/ssh/ssh_host_rsa_key", "var/lib/apt/lists/deb.example_dists_x_Packages",
                "var/cache/apt/archives/a_1_amd64.deb", "usr/share/doc/pkg/changelog.gz",
                "usr/share/doc/pkg/copyright", "usr/share/doc/other/README",
                "usr/share/man/man1/ls.1.gz", "usr/share/locale/de/LC_MESSAGES/sed.mo",
                "usr/share/locale/locale.alias", "usr/share/locale/stray"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("x")
    (tree / "var/lib/apt/lists/lock").write_text("")
    assert cloudimage._configure(str(tree)) == "6.1.0-9-cloud-amd64"
    assert "datasource_list" in (tree / "etc/cloud/cloud.cfg.d/90_ganeti.cfg").read_text()
    for unit in cloudimage.MASKED_UNITS:
        assert os.readlink(tree / "etc/systemd/system" / unit) == "/dev/null"
    assert not (tree / "etc/ssh/ssh_host_rsa_key").exists()
    assert os.listdir(tree / "var/lib/apt/lists") == ["lock"]
    assert not os.listdir(tree / "var/cache/apt/archives")
    assert os.listdir(tree / "usr/share/doc") == ["pkg"]
    assert os.listdir(tree / "usr/share/doc/pkg") == ["copyright"]
    assert not (tree / "usr/share/man").exists()
    assert os.listdir(tree / "usr/share/locale") == ["locale.alias"]


def test_builder_argv_installs_the_packages_with_the_build_files_first(tmp_path):
    files = str(tmp_path / "my files")
    argv = cloudimage.builder_argv("mmdebstrap", "bookworm", "/c/tree", "http://m/debian",
                                   ["a", "b"], files)
    assert argv[0] == "mmdebstrap" and argv[-3:] == ["bookworm", "/c/tree", "http://m/debian"]
    assert "--variant=minbase" in argv and "--include=a,b" in argv
    hook = next(arg for arg in argv if arg.startswith("--setup-hook="))
    # mmdebstrap runs the hook with sh, the tree as $1: the build files copied in
    tree = tmp_path / "tree"
    tree.mkdir()
    cloudimage._write_files(files, cloudimage.build_files())
    subprocess.run(["sh", "-c", hook.split("=", 1)[1], "hook", str(tree)], check=True)
    assert (tree / "etc/dpkg/dpkg.cfg.d/90ganeti-image").read_text().startswith("# a test")
    assert os.access(tree / cloudimage.INITRAMFS_HOOK, os.X_OK)
    old = cloudimage.builder_argv("debootstrap", "bookworm", "/c/tree", "http://m/debian",
                                  ["a"], "/c/tree")
    assert old == ["debootstrap", "--variant=minbase", "--include=a", "bookworm", "/c/tree",
                   "http://m/debian"]
    with pytest.raises(ValueError, match="Unknown image builder"):
        cloudimage.builder_argv("cdebootstrap", "bookworm", "/t", "http://m", ["a"], "/f")


def test_builder_errors_come_from_debootstraps_log_or_the_build_log(tmp_path):
    tree, build_log = tmp_path / "tree", tmp_path / "build.log"
    assert cloudimage._builder_errors(str(tree), str(build_log)) == "(no builder log)"
    build_log.write_text("I: downloading\nE: Unable to locate package nosuch\nI: done\n")
    assert cloudimage._builder_errors(str(tree), str(build_log)) == \
        "E: Unable to locate package nosuch"
    (tree / "debootstrap").mkdir(parents=True)
    (tree / "debootstrap/debootstrap.log").write_text("dpkg: error processing x\n")
    assert cloudimage._builder_errors(str(tree), str(build_log)) == "dpkg: error processing x"


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
    assert info["format-specific"]["data"]["compression-type"] == "zstd"
    made = os.stat(path).st_mtime_ns
    assert cloudimage.qcow2(image) == (path, digest)
    assert os.stat(path).st_mtime_ns == made
