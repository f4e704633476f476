"""The ``plain`` template on real LVM: the session's guest cluster (doc/storage.md).

Every node of the ``guest_cluster`` fixture (test/integration/conftest.py)
is a qemu guest with a real kernel and the volume group the cluster was
initialised with (``gnt-cluster init --vg-name``).  Instances use the fake
hypervisor; their disks are real logical volumes, checked with ``lvs`` and
read with ``dd`` inside the guests.  Every guest has the tinyos OS
definition in ``/srv/ganeti/os`` (seeded on its state disk).
"""

from __future__ import annotations

import os
import pathlib

import pytest

from ganeti import constants, daemonctl
from test.integration import host_helpers
from test.integration.guest_cluster_harness import GuestClusterFixture
from tools.harness import guestcluster, guestvm

# the session's guest cluster may be made by the first test that asks (minutes under load)
pytestmark = pytest.mark.timeout(900)

#: what tinyos writes at the start of disk 0
_BOOT_MARK = "TINYOS-BOOT"


@pytest.fixture
def plain(guest_cluster: GuestClusterFixture) -> GuestClusterFixture:
    """The guest cluster (its nodes have tinyos in /srv/ganeti/os from their first boot)."""
    return guest_cluster


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)


def _volumes(gc: GuestClusterFixture, node: str, instance: str | None = None
             ) -> dict[str, tuple[float, str, str]]:
    """LV name -> (size MiB, attributes, tags) in the cluster's VG on ``node``
    (only those tagged for ``instance`` when given)."""
    vg = gc.cluster.vg_name
    res = gc.ssh(node, ["lvs", "--noheadings", "--units", "m", "--nosuffix", "--separator", "|",
                        "-o", "lv_name,lv_size,lv_attr,lv_tags", vg])
    assert not res.failed, res.stderr
    out: dict[str, tuple[float, str, str]] = {}
    for line in res.stdout.splitlines():
        if not line.strip():
            continue
        name, size, attr, tags = (part.strip() for part in line.split("|"))
        if instance is None or f"originstname+{instance}" in tags.split(","):
            out[name] = (float(size), attr, tags)
    return out


def _head(gc: GuestClusterFixture, node: str, lv: str, length: int = len(_BOOT_MARK)) -> str:
    """The first ``length`` bytes of ``lv`` on ``node`` (activated by Ganeti or not)."""
    vg = gc.cluster.vg_name
    res = gc.ssh(node, f"dd if=/dev/{vg}/{lv} bs={length} count=1 2>/dev/null")
    assert not res.failed, res.stderr
    return res.stdout[:length]


def _add(gc: GuestClusterFixture, name: str, node: str, *extra: str, size: str = "64m"):  # type: ignore[no-untyped-def]
    return gc.gnt("gnt-instance", "add", "-t", "plain", "-o", "tinyos",
                  "--disk", f"0:size={size}", "-n", f"{node}.vcluster", "--no-name-check",
                  "--no-ip-check", *extra, name)


def test_a_plain_instance_lives_on_logical_volumes(plain: GuestClusterFixture) -> None:
    """add, grow-disk, rename, gnt-node volumes and remove, checked with lvs in the guest."""
    _ok(_add(plain, "plain1.vcluster", "node2"))
    vols = _volumes(plain, "node2", "plain1.vcluster")
    assert len(vols) == 1, vols
    (lv, (size, attr, _tags)), = vols.items()
    assert lv.endswith(".disk0") and size == 64.0
    assert attr[4] == "a", attr          # active: the instance runs
    assert _head(plain, "node2", lv) == _BOOT_MARK
    assert not _volumes(plain, "node3", "plain1.vcluster")

    _ok(plain.gnt("gnt-instance", "grow-disk", "plain1.vcluster", "0", "32m"))
    assert _volumes(plain, "node2")[lv][0] == 96.0

    out = _ok(plain.gnt("gnt-node", "volumes", "--no-headers", "-o", "node,vg,name,instance",
                        "node2.vcluster"))
    assert any(lv in line and "plain1.vcluster" in line for line in out.splitlines()), out

    _ok(plain.gnt("gnt-instance", "shutdown", "plain1.vcluster"))
    _ok(plain.gnt("gnt-instance", "rename", "--no-name-check", "--no-ip-check",
                  "plain1.vcluster", "plain1b.vcluster"))
    assert lv in _volumes(plain, "node2")          # the volume keeps its name
    assert lv in _volumes(plain, "node2", "plain1b.vcluster")   # and is tagged with the new one
    assert not _volumes(plain, "node2", "plain1.vcluster")

    _ok(plain.gnt("gnt-instance", "remove", "-f", "plain1b.vcluster"))
    assert lv not in _volumes(plain, "node2")


def _qemu_sizes(gc: GuestClusterFixture, node: str, instance: str) -> dict[str, int]:
    """Image file -> size in bytes, as the instance's qemu sees its disks (QMP)."""
    return {e["inserted"]["file"]: e["inserted"]["image"]["virtual-size"]
            for e in gc.qmp(node, instance, "query-block") if e.get("inserted")}


def test_grow_disk_of_a_running_kvm_instance_reaches_its_qemu(plain: GuestClusterFixture
                                                               ) -> None:
    """grow-disk of a running kvm instance on plain: lvextend, then qemu is told (QMP
    block_resize) without a restart; its qemu runs under TCG inside the node."""
    name = "plainkvm.vcluster"
    with plain.kvm_enabled():
        try:
            _ok(_add(plain, name, "node3", "-H", constants.HT_KVM, "-B", "memory=128"))
            (lv,) = _volumes(plain, "node3", name)
            path = f"/dev/{plain.cluster.vg_name}/{lv}"
            before = plain.kvm_info("node3", name)
            assert before and before["state"] == "running", before
            assert list(_qemu_sizes(plain, "node3", name).values()) == [64 << 20]
            _ok(plain.gnt("gnt-instance", "grow-disk", name, "0", "32m"))
            assert _volumes(plain, "node3")[lv][0] == 96.0
            sizes = _qemu_sizes(plain, "node3", name)
            assert list(sizes.values()) == [96 << 20], (path, sizes)
            # the same qemu: grown while it ran
            after = plain.kvm_info("node3", name)
            assert after and after["pid"] == before["pid"], (before, after)
        finally:
            # (no ACPI wait: the guest's kernel has not booted this far under nested TCG)
            plain.gnt("gnt-instance", "remove", "-f", "--shutdown-timeout=0", name)
    assert not _volumes(plain, "node3", name)


def test_a_disk_larger_than_the_free_space_is_refused_before_any_volume(
        plain: GuestClusterFixture) -> None:
    before = _volumes(plain, "node3")
    res = _add(plain, "toobig.vcluster", "node3", size="100g")
    assert res.returncode != 0
    assert "Not enough disk space" in res.stdout + res.stderr, res.stdout + res.stderr
    assert _volumes(plain, "node3") == before
    listed = _ok(plain.gnt("gnt-instance", "list", "--no-headers", "-o", "name"))
    assert "toobig.vcluster" not in listed


def test_verify_reports_orphan_and_missing_volumes(plain: GuestClusterFixture) -> None:
    vg = plain.cluster.vg_name
    _ok(_add(plain, "plain2.vcluster", "node3", "--no-start"))
    (lv, _), = _volumes(plain, "node3", "plain2.vcluster").items()
    res = plain.ssh("node3", f"lvcreate -q -L 8m -n stray {vg} >/dev/null && lvremove -q -f"
                             f" {vg}/{lv} >/dev/null")
    assert not res.failed, res.stderr
    try:
        res = plain.gnt("gnt-cluster", "verify", "--error-codes")
        out = res.stdout + res.stderr
        assert res.returncode != 0, out
        assert "ENODEORPHANLV" in out and "stray" in out, out
        assert "EINSTANCEMISSINGDISK" in out and "plain2.vcluster" in out, out
    finally:
        plain.ssh("node3", f"lvremove -q -f {vg}/stray")
        plain.gnt("gnt-instance", "remove", "-f", "plain2.vcluster")
    _ok(plain.gnt("gnt-cluster", "verify"))


def _sh(gc: GuestClusterFixture, node: str, command: str | list[str]) -> str:
    """Run ``command`` in ``node``; its output (fails the test when it fails)."""
    res = gc.ssh(node, command)
    assert not res.failed, f"{command}: {res.stdout}{res.stderr}"
    return res.stdout


def _pe_ranges(gc: GuestClusterFixture, node: str, lv: str) -> str:
    """Where ``lv`` lies on its physical volumes (``lvs -o seg_pe_ranges``)."""
    return " ".join(_sh(gc, node, ["lvs", "--noheadings", "-o", "seg_pe_ranges",
                                   f"{gc.cluster.vg_name}/{lv}"]).split())


def test_move_keeps_the_data(plain: GuestClusterFixture) -> None:
    """gnt-instance move: the volumes are made on the target, copied, removed on the
    source; the target's new volume lies on extents that held other data before,
    and reads zeros wherever the source does."""
    vg = plain.cluster.vg_name
    _ok(_add(plain, "plain3.vcluster", "node2", "--no-start", size="16m"))
    try:
        # past tinyos' first MiB the source reads zeros, whatever its extents held
        (src, _), = _volumes(plain, "node2", "plain3.vcluster").items()
        _sh(plain, "node2", ["dd", "if=/dev/zero", f"of=/dev/{vg}/{src}", "bs=1M", "seek=1",
                             "count=15", "oflag=direct"])
        # leave 16 MiB of 'x' on the first free extents of node3's volume group
        _sh(plain, "node3", ["lvcreate", "-y", "-L", "16m", "-n", "dirty", vg])
        _sh(plain, "node3", f"tr '\\000' x < /dev/zero | dd of=/dev/{vg}/dirty bs=1M"
                            " count=16 iflag=fullblock oflag=direct 2>&1")
        dirty = _pe_ranges(plain, "node3", "dirty")
        _sh(plain, "node3", ["lvremove", "-f", f"{vg}/dirty"])

        _ok(plain.gnt("gnt-instance", "move", "-f", "-n", "node3.vcluster", "plain3.vcluster"))
        assert not _volumes(plain, "node2", "plain3.vcluster")
        (lv, _), = _volumes(plain, "node3", "plain3.vcluster").items()
        assert _pe_ranges(plain, "node3", lv) == dirty    # the premise: the same extents
        assert _head(plain, "node3", lv) == _BOOT_MARK
        # past tinyos' first MiB the volume reads zeros, as the source did
        left = _sh(plain, "node3", f"dd if=/dev/{vg}/{lv} bs=1M skip=1 2>/dev/null"
                                   " | tr -d '\\000' | wc -c")
        assert left.strip() == "0"
    finally:
        plain.gnt("gnt-instance", "remove", "-f", "plain3.vcluster")
        plain.ssh("node3", ["lvremove", "-f", f"{vg}/dirty"])


def test_a_live_export_reads_a_snapshot_and_imports_back(plain: GuestClusterFixture) -> None:
    """gnt-backup export --noshutdown of a running plain instance reads LVM snapshots,
    removed afterwards; the import makes new volumes with the same data."""
    _ok(_add(plain, "plain5.vcluster", "node3", size="16m"))
    try:
        (lv, _), = _volumes(plain, "node3", "plain5.vcluster").items()
        _ok(plain.gnt("gnt-backup", "export", "--noshutdown", "-n", "node1.vcluster",
                      "plain5.vcluster"))
        assert lv in _volumes(plain, "node3")
        assert not [name for name in _volumes(plain, "node3") if name.endswith(".snap")]
        state = _ok(plain.gnt("gnt-instance", "list", "--no-headers", "-o", "status",
                              "plain5.vcluster"))
        assert state.strip() == "running"
        # the import takes the export's MAC: the source goes first (and the data can
        # only come from the export)
        _ok(plain.gnt("gnt-instance", "remove", "-f", "plain5.vcluster"))
        _ok(plain.gnt("gnt-backup", "import", "-t", "plain", "--disk", "0:size=16m",
                      "-n", "node2.vcluster", "--src-node", "node1.vcluster",
                      "--no-name-check", "--no-ip-check", "--no-start", "--src-dir",
                      "plain5.vcluster", "plain5i.vcluster"))
        (lv2, _), = _volumes(plain, "node2", "plain5i.vcluster").items()
        assert _head(plain, "node2", lv2) == _BOOT_MARK
    finally:
        for name in ("plain5.vcluster", "plain5i.vcluster"):
            plain.gnt("gnt-instance", "remove", "-f", name)


#: upstream's hail (Debian: ganeti-htools-3.0, which make test installs), as a guest sees it
_HAIL = "/usr/lib/ganeti/3.0/usr/lib/ganeti/iallocators/hail"


def test_allocators_place_a_plain_disk_where_the_volume_group_has_room(
        plain: GuestClusterFixture) -> None:
    """node1's and node2's volume groups nearly full (3.5 of 4 GiB): our allocator puts a
    1 GiB plain disk on node3, the one node it fits; upstream's hail, given the same
    cluster, rules out node1 and node2 for their disk space."""
    host_helpers.skip_unless(
        None if os.path.exists(_HAIL) else
        f"{_HAIL} is missing (make test installs ganeti-htools-3.0)",
        required_by=host_helpers.REQUIRE_HAIL)
    fillers = {"fill1.vcluster": "node1", "fill2.vcluster": "node2"}
    placed = ["placed-ours.vcluster", "placed-hail.vcluster"]
    master = plain.gnt("gnt-cluster", "getmaster").stdout.strip().split(".")[0]
    link = "/etc/ganeti/iallocators/hail"
    try:
        for name, node in fillers.items():
            _ok(_add(plain, name, node, "--no-start", "--no-install", size="3500m"))
        res = plain.ssh(master, f"mkdir -p {os.path.dirname(link)} && ln -sf {_HAIL} {link}")
        assert not res.failed, res.stderr
        for name, allocator in zip(placed, ("ganeti-iallocator", "hail")):
            res = plain.gnt("gnt-instance", "add", "-t", "plain", "-o", "tinyos",
                            "--disk", "0:size=1g", "-I", allocator, "--no-start",
                            "--no-install", "--no-name-check", "--no-ip-check", name)
            out = res.stdout + res.stderr
            if allocator == "hail" and res.returncode != 0:
                # hail excludes the two full nodes for their disk space, as it must;
                # it also rejects node3 (FailN1), which issue 27's note leaves open
                assert "FailDisk: 2" in out, out
                continue
            assert res.returncode == 0, out
            pnode = _ok(plain.gnt("gnt-instance", "list", "--no-headers", "-o", "pnode",
                                  name)).strip()
            assert pnode == "node3.vcluster", f"{allocator}: {pnode}\n{out}"
            assert len(_volumes(plain, "node3", name)) == 1    # its volume is there
    finally:
        for name in [*placed, *fillers]:
            plain.gnt("gnt-instance", "remove", "-f", name)
        plain.ssh(master, ["rm", "-f", link])


def test_a_rebooted_node_gets_its_disks_back_from_the_watcher(plain: GuestClusterFixture,
                                                               tmp_path: pathlib.Path) -> None:
    """node3 powers off (as a crashed machine) and boots again: it keeps its state (a
    file in /var/lib/ganeti, its certificate) and its node daemon answers with mutual
    TLS; its instance is down and its disk is not assembled for Ganeti (the link below
    /var/run is gone with the boot) until the watcher restarts the instance, which
    assembles the volume again."""
    gc = plain.cluster
    _ok(_add(plain, "plain4.vcluster", "node3"))
    (lv, (_, attr, _)), = _volumes(plain, "node3", "plain4.vcluster").items()
    assert attr[4] == "a"
    links = "/var/run/ganeti/instance-disks"
    linked = f"ls {links} | grep -c '^plain4.vcluster:0$' || true"
    assert plain.ssh("node3", linked).stdout.strip() == "1"
    old_boot = plain.boot_id("node3")
    marker = "/var/lib/ganeti/guest-test-marker"
    assert not plain.ssh("node3", f"echo kept > {marker}; sync").failed
    _ok(plain.vcluster("stop", plain.directory, "node3"))
    assert not guestvm.guest_running(gc.spec(gc.node("node3")))
    assert "stopped" in _ok(plain.vcluster("list", plain.directory))
    _ok(plain.vcluster("start", plain.directory, "node3"))
    assert plain.boot_id("node3") != old_boot
    res = plain.ssh("node3", f"cat {marker}; rm -f {marker}; ls /etc/ganeti /var/lib/ganeti")
    assert not res.failed and res.stdout.startswith("kept\n") and "server.pem" in res.stdout
    # its node daemon answers with the cluster certificate (mutual TLS, as node RPC does)
    cert = tmp_path / "server.pem"
    pem = plain.ssh("node1", "cat /var/lib/ganeti/server.pem")
    assert not pem.failed, pem.stderr
    cert.write_text(pem.stdout)
    daemonctl.wait_for_noded(gc.node("node3").ip, constants.DEFAULT_NODED_PORT, str(cert),
                             timeout=120)
    try:
        assert plain.ssh("node3", linked).stdout.strip() == "0"
        status = _ok(plain.gnt("gnt-instance", "list", "--no-headers", "-o", "status",
                               "plain4.vcluster"))
        assert status.strip() == "ERROR_down"
        # the master's watcher restarts the instance (the others' have nothing to do)
        master = guestcluster.current_master(gc).name.split(".")[0]
        _ok(plain.vcluster("watcher", plain.directory, master))
        status = _ok(plain.gnt("gnt-instance", "list", "--no-headers", "-o", "status",
                               "plain4.vcluster"))
        assert status.strip() == "running"
        assert plain.ssh("node3", linked).stdout.strip() == "1"
        assert _volumes(plain, "node3")[lv][1][4] == "a"
        assert _head(plain, "node3", lv) == _BOOT_MARK
    finally:
        plain.gnt("gnt-instance", "remove", "-f", "plain4.vcluster")
    assert guestcluster.is_guest_cluster(plain.directory)
