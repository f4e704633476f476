"""Debian's ganeti-instance-debootstrap, unchanged, on a ``plain`` disk of the guest cluster (doc/os.md).

The guest nodes run on this machine's root file system, so they have the
package's definition (``/usr/share/ganeti/os/debootstrap``, installed by
``make debian-deps``) and its cache tarball; every node gets the project's
variant in its own ``/etc`` (:func:`tools.harness.debootstrap_guest.install_on_guest`,
as an operator writes it on a real node).  ``gnt-instance add -t plain``
then runs the package's ``create`` on a real logical volume: a Debian
file system whose ``/etc/hostname`` is the instance's name (read from the
volume inside the node with ``debugfs``); ``gnt-instance rename`` runs
the package's ``rename``, which rewrites it; ``gnt-instance remove`` takes
the volume away.  The instance is never started (a Debian guest booting
under TCG inside an emulated node would take many minutes; the ``file``
test, test_os_debootstrap.py, boots one).

Marked ``soak`` (not in ``make test``; ``make test-guests`` and ``make
soak`` run it): 67 to 111 s on a 2-node cluster that is up (the
``create`` unpacking the 386 MB tarball onto the volume takes 42 to 85 s
of it under TCG), above make test's budget of about 60 s for one more
guest test.  The guests have no route to a Debian archive: when the cache
tarball is missing (or about to expire), the test makes it on this
machine first with the package's own ``create`` (2.5 minutes more).
"""

from __future__ import annotations


import pytest

from test.integration import host_helpers
from test.integration.guest_cluster_harness import GuestClusterFixture
from tools.harness import debootstrap, debootstrap_guest

pytestmark = [pytest.mark.soak, pytest.mark.timeout(1800)]

NODE = "node2"
INST = "debplain1.vcluster"
RENAMED = "debplain2.vcluster"
OS_NAME = f"debootstrap+{debootstrap.VARIANT}"


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)


@pytest.fixture
def deb(guest_cluster: GuestClusterFixture) -> GuestClusterFixture:
    """The guest cluster, every node with the package's variant in its /etc."""
    why = debootstrap.problem()
    host_helpers.skip_unless(why, required_by=host_helpers.REQUIRE_DEBOOTSTRAP,
                             why_required="make test as root installs ganeti-instance-debootstrap")
    debootstrap_guest.ensure_cache()
    for node in guest_cluster.cluster.nodes:
        short = node.name.split(".")[0]
        debootstrap_guest.install_on_guest(
            lambda command, short=short: guest_cluster.ssh(short, command))
    return guest_cluster


def _volume(gc: GuestClusterFixture, instance: str) -> str | None:
    """The device of ``instance``'s one logical volume on :data:`NODE` (None: none)."""
    vg = gc.cluster.vg_name
    res = gc.ssh(NODE, ["lvs", "--noheadings", "-o", "lv_name,lv_tags", vg])
    assert not res.failed, res.stderr
    found = [line.split()[0] for line in res.stdout.splitlines()
             if f"originstname+{instance}" in line]
    assert len(found) <= 1, res.stdout
    return f"/dev/{vg}/{found[0]}" if found else None


def _guest_file(gc: GuestClusterFixture, device: str, path: str) -> str:
    """A file of the guest's root file system (the whole volume: PARTITION_STYLE=none)."""
    res = gc.ssh(NODE, f"debugfs -R 'cat {path}' {device} 2>/dev/null")
    assert not res.failed, res.stderr
    return res.stdout


def _os_logs(gc: GuestClusterFixture) -> list[str]:
    res = gc.ssh(NODE, "ls /var/log/ganeti/os")
    assert not res.failed, res.stderr
    return res.stdout.split()


def test_the_packages_create_and_rename_run_on_a_logical_volume(deb: GuestClusterFixture
                                                                 ) -> None:
    assert OS_NAME in _ok(deb.gnt("gnt-os", "list", "--no-headers")).split()
    left = [INST, RENAMED]          # what the clean-up may have to remove
    try:
        _ok(deb.gnt("gnt-instance", "add", "-t", "plain", "-o", OS_NAME, "-s", "600m",
                    "-n", f"{NODE}.vcluster", "--no-start", "--no-name-check",
                    "--no-ip-check", INST, timeout=900))
        device = _volume(deb, INST)
        assert device is not None
        # a Debian root file system, made by the package on the volume itself
        assert _guest_file(deb, device, "/etc/hostname").strip() == INST
        assert "ID=debian" in _guest_file(deb, device, "/usr/lib/os-release").split()
        assert _guest_file(deb, device, "/etc/debian_version").strip()
        # the variant's hook ran (the disk would boot under kvm)
        assert "root=UUID=" in _guest_file(deb, device, "/boot/extlinux/extlinux.conf")
        assert any(name.startswith(f"add-debootstrap-{INST}-") for name in _os_logs(deb))

        _ok(deb.gnt("gnt-instance", "rename", "--no-name-check", "--no-ip-check", INST,
                    RENAMED, timeout=300))
        assert _volume(deb, RENAMED) == device          # the same volume, its tag renamed
        assert _guest_file(deb, device, "/etc/hostname").strip() == RENAMED
        assert _guest_file(deb, device, "/etc/mailname").strip() == RENAMED
        assert any(name.startswith(f"rename-debootstrap-{RENAMED}-")
                   for name in _os_logs(deb))

        _ok(deb.gnt("gnt-instance", "remove", "-f", RENAMED, timeout=300))
        left = []
        assert _volume(deb, RENAMED) is None
        assert deb.ssh(NODE, ["test", "-e", device]).failed
    finally:
        for name in left:
            deb.gnt("gnt-instance", "remove", "-f", name)
