"""Debian's ganeti-instance-debootstrap, unchanged, on a kvm virtual cluster (doc/os.md).

The package's scripts (``/usr/share/ganeti/os/debootstrap``, installed by
``make debian-deps``) build a Debian guest on a ``file`` disk with the
variant :mod:`tools.harness.debootstrap` writes (the mirror of this
machine's apt sources, a guest kernel, the project's extlinux hook); the
guest boots from that disk under the kvm hypervisor (TCG here) and its
systemd prints a login prompt with the instance's hostname on the serial
console.  ``gnt-instance rename`` runs the package's ``rename`` script,
which rewrites the guest's ``/etc/hostname`` (read back from the disk
image with ``debugfs``).

The first run downloads the packages (the package's own cache keeps the
result in ``/var/cache/ganeti-instance-debootstrap``); later runs unpack
that tarball.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from guest_helpers import read_log, wait_for, wait_for_line
from instance_helpers import NOCHECK, disk_files, status_of
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers
from tools.harness import debootstrap

pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

N1 = "node1.vcluster"
INST = "deb1.example.com"
RENAMED = "deb2.example.com"
IMPORTED = "deb3.example.com"
OS_NAME = f"debootstrap+{debootstrap.VARIANT}"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    why = debootstrap.problem()
    host_helpers.skip_unless(why, required_by=host_helpers.REQUIRE_DEBOOTSTRAP,
                             why_required="make test as root installs ganeti-instance-debootstrap")
    with VirtualCluster(tmp_path_factory.mktemp("vdeb"), nodes=1, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        debootstrap.install_on_node(cluster.paths(N1))
        yield cluster


def _serial_log(vc, name: str) -> str:
    return KvmHypervisor(vc.paths(N1)).serial_log(name)


def _guest_file(image: str, path: str) -> str:
    """A file of the guest's root file system (the whole disk: PARTITION_STYLE=none)."""
    res = subprocess.run(["debugfs", "-R", f"cat {path}", image], capture_output=True,
                         text=True, check=True)
    return res.stdout


def test_the_package_and_its_variants_are_listed(vc):
    listed = vc.ok("gnt-os", "list", "--no-headers").split()
    assert "debootstrap+default" in listed and OS_NAME in listed
    # the definition found in the last directory of the search path
    # (/usr/share/ganeti/os), its parameters from its parameters.list
    info = vc.ok("gnt-os", "info", "debootstrap")
    assert "filesystem" in info


def test_the_scripts_read_the_nodes_variant_not_the_machines(vc):
    """The package's own common.sh, sourced as its scripts do (from the node's OS
    directory, the OS API variables only), takes the variant below the node's
    root: nothing of the test is under the machine's /etc/ganeti."""
    paths = vc.paths(N1)
    conf_dir = debootstrap.node_conf_dir(paths)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "OS_API_VERSION": "20",
           "INSTANCE_NAME": INST, "HYPERVISOR": constants.HT_KVM, "DISK_COUNT": "1",
           "DISK_0_PATH": "/dev/null", "OS_VARIANT": debootstrap.VARIANT}
    res = subprocess.run(["bash", "-c", '. common.sh; echo "$VARIANT_CONFIG|$CUSTOMIZE_DIR"'],
                         cwd=os.path.join(paths.os_search_path[-1], "debootstrap"), env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (f"{conf_dir}/variants/{debootstrap.VARIANT}.conf|"
                                  f"{conf_dir}/{debootstrap.VARIANT}-hooks")


def test_create_builds_a_guest_that_boots_to_a_login_prompt(vc):
    vc.ok("gnt-instance", "add", "-t", "file", "-s", "1G", "-o", OS_NAME, "-n", N1,
          "-B", "memory=256M", *NOCHECK, INST, timeout=900)
    (image,) = disk_files(vc, N1, INST)
    assert _guest_file(image, "/etc/hostname").strip() == INST
    log = _serial_log(vc, INST)
    # systemd's getty on the kernel's console (ttyS0): /etc/issue names the
    # host, then agetty's prompt with the host name up to its first dot
    line = wait_for_line(log, "login:", timeout=600)
    assert line.startswith("login:")
    text = read_log(log)
    assert f"{INST.split('.')[0]} login:" in text
    assert f" {INST} ttyS0" in text
    assert status_of(vc, INST) == "running"
    # booted from its disk (extlinux), no kernel given to qemu
    pid = KvmHypervisor(vc.paths(N1))._pid(INST)
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        assert b"-kernel" not in fh.read().split(b"\0")
    # the package's create log is kept on the node
    logs = os.listdir(vc.paths(N1).os_log_dir)
    assert any(name.startswith(f"add-debootstrap-{INST}-") for name in logs), logs


def test_rename_runs_the_packages_rename_script(vc):
    vc.ok("gnt-instance", "shutdown", "--timeout=0", INST)
    wait_for(lambda: status_of(vc, INST) == "ADMIN_down", "the instance down")
    vc.ok("gnt-instance", "rename", *NOCHECK, INST, RENAMED, timeout=300)
    (image,) = disk_files(vc, N1, RENAMED)
    assert _guest_file(image, "/etc/hostname").strip() == RENAMED
    assert _guest_file(image, "/etc/mailname").strip() == RENAMED
    logs = os.listdir(vc.paths(N1).os_log_dir)
    assert any(name.startswith(f"rename-debootstrap-{RENAMED}-") for name in logs), logs


def test_export_and_import_run_the_packages_scripts(vc):
    # export: the package's dump of the guest's file system; import: its
    # restore onto a new file system, with the fstab fixed to the new UUID;
    # under another name, then its rename script (which refuses a guest
    # whose hostname is not the exported instance's)
    vc.ok("gnt-backup", "export", "-n", N1, RENAMED, timeout=600)
    vc.ok("gnt-backup", "import", "-n", N1, "--src-node", N1, "--src-dir",
          f"/srv/ganeti/export/{RENAMED}", "-t", "file", "--no-start", "--net", "0:mac=generate",
          *NOCHECK, IMPORTED, timeout=600)
    (image,) = disk_files(vc, N1, IMPORTED)
    assert _guest_file(image, "/etc/hostname").strip() == IMPORTED
    fstab = _guest_file(image, "/etc/fstab")
    uuid = subprocess.run(["blkid", "-o", "value", "-s", "UUID", image], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert f"UUID={uuid}" in fstab.split(), fstab
    logs = os.listdir(vc.paths(N1).os_log_dir)
    assert any(name.startswith(f"export-debootstrap-{RENAMED}-") for name in logs), logs
    assert any(name.startswith(f"import-debootstrap-{IMPORTED}-") for name in logs), logs
    assert any(name.startswith(f"rename-debootstrap-{IMPORTED}-") for name in logs), logs


def test_remove(vc):
    for name in (RENAMED, IMPORTED):
        vc.ok("gnt-instance", "remove", "-f", name, timeout=300)
        assert disk_files(vc, N1, name) == []
