"""The ``drbd`` template on real DRBD 8.4: the session's guest cluster (doc/storage.md).

Every node of the ``guest_cluster`` fixture is a qemu guest with its own
kernel (DRBD loaded, its usermode helper ``/bin/true``) and the cluster's
volume group.  Instances use the fake hypervisor; their disks are real
DRBD devices over real logical volumes: the tests write data into
``/dev/drbd<minor>`` on the primary with ``dd``, take nodes down as a crash
would (qemu killed), and read the data back on the other node.  node1 is
the master; the mirrors live on node2 and node3, so the master keeps its
majority when one of them dies.
"""

from __future__ import annotations

import re
import time

import pytest
import yaml

from test.integration.guest_cluster_harness import GuestClusterFixture

# the session's guest cluster may be made by the first test that asks (minutes under load)
pytestmark = pytest.mark.timeout(1200)

_PROC_LINE = re.compile(r"^\s*(\d+):\s+cs:(\S+)(?:\s+ro:(\S+)\s+ds:(\S+))?", re.M)


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)


def _add(gc: GuestClusterFixture, name: str, *extra: str, size: str = "64m"):  # type: ignore[no-untyped-def]
    return gc.gnt("gnt-instance", "add", "-t", "drbd", "-o", "tinyos", "--disk",
                  f"0:size={size}", "-n", "node2.vcluster:node3.vcluster", "--no-name-check",
                  "--no-ip-check", *extra, name)


def _minors(gc: GuestClusterFixture, node: str) -> dict[int, tuple[str, str, str]]:
    """minor -> (connection state, roles, disk states) of the configured minors."""
    res = gc.ssh(node, "cat /proc/drbd")
    assert not res.failed, res.stderr
    return {int(m): (cs, ro or "", ds or "") for m, cs, ro, ds in _PROC_LINE.findall(res.stdout)
            if cs != "Unconfigured"}


def _wait_in_sync(gc: GuestClusterFixture, minors: dict[str, int], timeout: float = 300.0
                  ) -> None:
    """Until both sides show Connected and UpToDate/UpToDate."""
    deadline = time.monotonic() + timeout
    seen: dict[str, object] = {}
    while time.monotonic() < deadline:
        seen = {node: _minors(gc, node).get(minor) for node, minor in minors.items()}
        if all(s is not None and s[0] == "Connected" and s[2] == "UpToDate/UpToDate"
               for s in seen.values()):
            return
        time.sleep(2)
    raise AssertionError(f"mirror not in sync after {timeout}s: {seen}")


def _wait_split(gc: GuestClusterFixture, minors: dict[str, int],
                timeout: float = 120.0) -> None:
    """Until DRBD dropped the connection for good: a side StandAlone, none connected."""
    deadline = time.monotonic() + timeout
    seen: dict[str, object] = {}
    while time.monotonic() < deadline:
        seen = {node: _minors(gc, node).get(minor) for node, minor in minors.items()}
        states = [s[0] for s in seen.values() if s is not None]
        if len(states) == 2 and "StandAlone" in states \
                and all(c in ("StandAlone", "WFConnection") for c in states):
            return
        time.sleep(2)
    raise AssertionError(f"the split sides are still talking after {timeout}s: {seen}")


def _info(gc: GuestClusterFixture, name: str) -> dict:  # type: ignore[type-arg]
    out = _ok(gc.gnt("gnt-instance", "info", name))
    return yaml.safe_load(out)[0]


def _disk_minors(gc: GuestClusterFixture, name: str) -> dict[str, int]:
    """node short name -> minor of disk/0, from gnt-instance info."""
    return _minors_of(_info(gc, name)["Disks"][0])


def _minors_of(disk: dict) -> dict[str, int]:  # type: ignore[type-arg]
    """node short name -> minor of a disk of gnt-instance info."""
    found = {}
    for key in ("nodeA", "nodeB"):
        node, minor = str(disk[key]).split(", minor=")
        found[node.split(".")[0]] = int(minor)
    return found


def _write(gc: GuestClusterFixture, node: str, minor: int, offset_mib: int, mib: int,
           tag: str) -> str:
    """Write ``mib`` MiB of random data at ``offset_mib`` of /dev/drbd<minor> on ``node``
    (kept in /tmp/<tag> there too); its sha1."""
    res = gc.ssh(node, f"dd if=/dev/urandom of=/tmp/{tag} bs=1M count={mib} 2>/dev/null &&"
                       f" dd if=/tmp/{tag} of=/dev/drbd{minor} bs=1M seek={offset_mib}"
                       f" oflag=direct conv=fsync 2>/dev/null && sha1sum < /tmp/{tag}")
    assert not res.failed, res.stderr
    return res.stdout.split()[0]


def _read(gc: GuestClusterFixture, node: str, minor: int, offset_mib: int, mib: int) -> str:
    res = gc.ssh(node, f"dd if=/dev/drbd{minor} bs=1M skip={offset_mib} count={mib}"
                       " iflag=direct 2>/dev/null | sha1sum")
    assert not res.failed, res.stderr
    return res.stdout.split()[0]


def _cleanup(gc: GuestClusterFixture, name: str) -> None:
    gc.gnt("gnt-instance", "remove", "-f", "--ignore-failures", name)


def test_the_mirror_survives_the_loss_of_either_node(guest_cluster: GuestClusterFixture) -> None:
    """The secondary dies during writes: the primary runs on degraded, verify says so,
    verify-disks reconnects the node that came back and the resync completes.  Then
    the primary, cut off, writes what its peer never sees and dies: failover
    --ignore-consistency runs the instance on the other node with every acknowledged
    write; when the old primary returns neither side overwrites the other (a split
    brain, which verify reports) and replace-disks -s makes the running side's data
    win."""
    gc = guest_cluster
    name = "drbd2.vcluster"
    stopped: list[str] = []
    try:
        _ok(_add(gc, name, size="96m"))
        minors = _disk_minors(gc, name)
        first = _write(gc, "node2", minors["node2"], 0, 16, "drbd2-a")

        # the secondary dies while the primary writes
        writer = gc.ssh("node2", f"(dd if=/dev/urandom of=/dev/drbd{minors['node2']} bs=1M"
                                 " seek=32 count=32 oflag=direct 2>/dev/null &) ; sleep 1")
        assert not writer.failed
        _ok(gc.vcluster("stop", gc.directory, "node3"))
        stopped.append("node3")
        second = _write(gc, "node2", minors["node2"], 16, 16, "drbd2-b")
        state = _minors(gc, "node2")[minors["node2"]]
        assert state[0] in ("WFConnection", "StandAlone") and state[1] == "Primary/Unknown"
        verify = gc.gnt("gnt-cluster", "verify")
        assert verify.returncode != 0
        assert f"instance {name}: disk/0 on node node2.vcluster is degraded" in verify.stdout

        _ok(gc.vcluster("start", gc.directory, "node3"))
        stopped.remove("node3")
        # the activation job follows the resync it started (progress, then in sync)
        out = _ok(gc.gnt("gnt-cluster", "verify-disks"))
        assert f"Activating disks for instance '{name}'" in out
        assert "disks are in sync" in out, out
        _wait_in_sync(gc, minors)
        verify = gc.gnt("gnt-cluster", "verify")
        assert f"instance {name}: disk/0" not in verify.stdout, verify.stdout

        # a split: the primary, cut off from its peer, takes writes node3 never sees,
        # then dies; only --ignore-consistency moves the instance
        show = gc.ssh("node2", f"/lib/drbd/drbdsetup-84 show {minors['node2']}").stdout
        ends = [re.search(rf"{side}\s*\{{\s*address\s+ipv4\s+([^;]+);", show)
                for side in ("_this_host", "_remote_host")]
        assert all(ends), show
        cut = gc.ssh("node2", ["/lib/drbd/drbdsetup-84", "disconnect",
                               *(f"ipv4:{m.group(1)}" for m in ends if m)])
        assert not cut.failed, cut.stderr
        lost = _write(gc, "node2", minors["node2"], 80, 8, "drbd2-lost")
        _ok(gc.vcluster("stop", gc.directory, "node2"))
        stopped.append("node2")
        refused = gc.gnt("gnt-instance", "failover", "-f", name)
        assert refused.returncode != 0
        _ok(gc.gnt("gnt-instance", "failover", "-f", "--ignore-consistency", name))
        listed = _ok(gc.gnt("gnt-instance", "list", "--no-headers", "-o",
                            "pnode,snodes,status", name)).split()
        assert listed == ["node3.vcluster", "node2.vcluster", "running"]
        assert _read(gc, "node3", minors["node3"], 0, 16) == first
        assert _read(gc, "node3", minors["node3"], 16, 16) == second
        third = _write(gc, "node3", minors["node3"], 64, 8, "drbd2-c")
        winner = _write(gc, "node3", minors["node3"], 80, 8, "drbd2-d")
        assert winner != lost

        # the old primary comes back: both sides wrote, DRBD resyncs in neither
        # direction (a split brain) and verify says so
        _ok(gc.vcluster("start", gc.directory, "node2"))
        stopped.remove("node2")
        _ok(gc.gnt("gnt-cluster", "verify-disks"))
        _wait_split(gc, minors)
        assert _read(gc, "node3", minors["node3"], 80, 8) == winner
        verify = gc.gnt("gnt-cluster", "verify")
        assert f"instance {name}: disk/0 is not connected" in verify.stdout, verify.stdout
        assert "refuses to connect its sides (a split brain" in verify.stdout
        # the operator keeps the running primary's data: node2 gets it all
        _ok(gc.gnt("gnt-instance", "replace-disks", "-s", name))
        _wait_in_sync(gc, minors)
        assert _minors(gc, "node2")[minors["node2"]][1] == "Secondary/Primary"
        _ok(gc.gnt("gnt-instance", "failover", "-f", name))
        assert _read(gc, "node2", minors["node2"], 0, 16) == first
        assert _read(gc, "node2", minors["node2"], 64, 8) == third
        assert _read(gc, "node2", minors["node2"], 80, 8) == winner
    finally:
        for node in stopped:
            gc.vcluster("start", gc.directory, node)
        _cleanup(gc, name)
        gc.gnt("gnt-cluster", "redist-conf")


def test_a_drbd_instance_mirrors_migrates_and_gets_new_volumes(
        guest_cluster: GuestClusterFixture) -> None:
    """add (secondary, primary, initial sync), info, stop/start, migrate to the secondary
    (one primary before and after), replace-disks -s (new volumes filled by DRBD), -n
    (the mirror moves to another node), failovers, grow, modify -t plain and -t drbd
    (another secondary; disk add/remove and recreate-disks of drbd are covered by
    test/cmdlib only, to keep make test within its time) and remove: checked with /proc/drbd, lvs and dd inside the
    guests, the data read on the node that got the new copy."""
    gc = guest_cluster
    name = "drbd3.vcluster"
    # the operator's extra connect options (doc/storage.md, "DRBD parameters")
    _ok(gc.gnt("gnt-cluster", "modify", "-D",
               "drbd:net-custom=--ping-int=7 --ko-count=5"))
    try:
        out = _ok(_add(gc, name))
        assert "creating disk disk/0 (64 MiB) on node3.vcluster" in out
        assert "disks are in sync" in out
        minors = _disk_minors(gc, name)
        assert set(minors) == {"node2", "node3"}
        assert _minors(gc, "node2")[minors["node2"]] == \
            ("Connected", "Primary/Secondary", "UpToDate/UpToDate")
        assert _minors(gc, "node3")[minors["node3"]] == \
            ("Connected", "Secondary/Primary", "UpToDate/UpToDate")
        for node in ("node2", "node3"):
            lvs = gc.ssh(node, ["lvs", "--noheadings", "-o", "lv_name,lv_size", "--units", "m",
                                "--nosuffix", gc.cluster.vg_name]).stdout
            assert re.search(r"\.disk0_data\s+64\.00", lvs) and \
                re.search(r"\.disk0_meta\s+128\.00", lvs), lvs
        disk = _info(gc, name)["Disks"][0]
        assert "in sync, status ok (Connected, Primary/Secondary" in disk["on primary"]
        assert "in sync, status ok (Connected, Secondary/Primary" in disk["on secondary"]
        # the shared secret is in no answer: compare with what the node was given
        show = gc.ssh("node2", f"/lib/drbd/drbdsetup-84 show {minors['node2']}").stdout
        assert re.search(r"\bping-int\s+7\s*;", show), show
        assert re.search(r"\bko-count\s+5\s*;", show), show
        secret = re.search(r'shared-secret\s+"([^"]+)"', show)
        assert secret is not None
        assert secret.group(1) not in _ok(gc.gnt("gnt-instance", "info", name))
        jobs = _ok(gc.gnt("gnt-job", "list", "--no-headers", "-o", "id")).split()
        assert secret.group(1) not in _ok(gc.gnt("gnt-job", "info", *jobs))
        digest = _write(gc, "node2", minors["node2"], 0, 16, "drbd3-a")
        _ok(gc.gnt("gnt-instance", "shutdown", name))
        assert minors["node2"] not in _minors(gc, "node2")
        assert minors["node3"] not in _minors(gc, "node3")
        _ok(gc.gnt("gnt-instance", "startup", name))
        _wait_in_sync(gc, minors)

        out = _ok(gc.gnt("gnt-instance", "migrate", "-f", name))
        assert "dual-primary" in out and "single-primary" in out
        assert _info(gc, name)["Nodes"][0]["primary"] == "node3.vcluster"
        assert _minors(gc, "node3")[minors["node3"]][1] == "Primary/Secondary"
        assert _minors(gc, "node2")[minors["node2"]][1] == "Secondary/Primary"
        assert _read(gc, "node3", minors["node3"], 0, 16) == digest

        # new volumes on the secondary (node2), filled from node3
        disk_uuid = _info(gc, name)["Disks"][0]["UUID"]
        before = gc.ssh("node2", ["lvs", "--noheadings", "-o", "lv_name,lv_uuid",
                                  gc.cluster.vg_name]).stdout
        _ok(gc.gnt("gnt-instance", "replace-disks", "-s", name))
        _wait_in_sync(gc, minors)
        after = gc.ssh("node2", ["lvs", "--noheadings", "-o", "lv_name,lv_uuid",
                                 gc.cluster.vg_name]).stdout
        assert "_replaced-" not in after
        old_ids = {line.split()[1] for line in before.splitlines() if disk_uuid in line}
        new_ids = {line.split()[1] for line in after.splitlines() if disk_uuid in line}
        assert len(new_ids) == 2 and not old_ids & new_ids      # other volumes, same names
        _ok(gc.gnt("gnt-instance", "failover", "-f", name))
        assert _read(gc, "node2", minors["node2"], 0, 16) == digest

        # a new secondary: node3's side moves to node1; with --early-release node3's
        # volumes go before the copy and the node locks are let go for it (the
        # evacuation test runs -n without it)
        out = _ok(gc.gnt("gnt-instance", "replace-disks", "--early-release", "-n",
                         "node1.vcluster", name))
        assert out.index("removing the old volumes on node3") < out.index(
            "waiting for the instance's disks to sync"), out
        assert "node locks released for the copy" in out, out
        listed = _ok(gc.gnt("gnt-instance", "list", "--no-headers", "-o", "pnode,snodes",
                            name)).split()
        assert listed == ["node2.vcluster", "node1.vcluster"]
        moved = _disk_minors(gc, name)
        _wait_in_sync(gc, moved)
        assert minors["node3"] not in _minors(gc, "node3")
        lvs3 = gc.ssh("node3", ["lvs", "--noheadings", "-o", "lv_name", gc.cluster.vg_name])
        assert disk_uuid not in lvs3.stdout
        _ok(gc.gnt("gnt-instance", "failover", "-f", name))
        assert _read(gc, "node1", moved["node1"], 0, 16) == digest

        # grow: the data volume on both nodes, then the device
        _ok(gc.gnt("gnt-instance", "grow-disk", name, "0", "32m"))
        for node in ("node1", "node2"):
            lvs = gc.ssh(node, ["lvs", "--noheadings", "--units", "m", "--nosuffix", "-o",
                                "lv_name,lv_size", gc.cluster.vg_name]).stdout
            assert re.search(rf"{disk_uuid}\.disk0_data\s+96\.00", lvs), lvs
        sectors = gc.ssh("node1", f"cat /sys/block/drbd{moved['node1']}/size").stdout
        assert int(sectors) * 512 == 96 * 1024 * 1024
        _wait_in_sync(gc, moved)
        assert _read(gc, "node1", moved["node1"], 0, 16) == digest
        verify = gc.gnt("gnt-cluster", "verify")
        assert f"instance {name}" not in verify.stdout and "drbd minor" not in verify.stdout

        # stopped, to plain: the primary's data volume is the disk, node2 keeps nothing
        _ok(gc.gnt("gnt-instance", "shutdown", name))
        _ok(gc.gnt("gnt-instance", "modify", "-t", "plain", name))
        lv = f"/dev/{gc.cluster.vg_name}/{disk_uuid}.disk0"
        assert _read_path(gc, "node1", lv, 16) == digest
        lvs2 = gc.ssh("node2", ["lvs", "--noheadings", "-o", "lv_name", gc.cluster.vg_name])
        assert disk_uuid not in lvs2.stdout
        assert moved["node1"] not in _minors(gc, "node1")

        # and back to drbd with node3 as the secondary: DRBD copies the data there
        out = _ok(gc.gnt("gnt-instance", "modify", "-t", "drbd", "-n", "node3.vcluster", name))
        assert "disk_template -> drbd" in out and "disks are in sync" in out
        data3 = f"/dev/{gc.cluster.vg_name}/{disk_uuid}.disk0_data"
        assert _read_path(gc, "node3", data3, 16) == digest

        # the mirror comes up between node1 and node3, in sync, with disk 0's data
        _ok(gc.gnt("gnt-instance", "activate-disks", name))
        disks = _info(gc, name)["Disks"]
        assert str(disks[0]["nodeB"]).split(",")[0] == "node3.vcluster", disks
        moved = _minors_of(disks[0])
        assert _read(gc, "node1", moved["node1"], 0, 16) == digest
        assert "status ok (Connected, Primary/Secondary" in disks[0]["on primary"], disks
    finally:
        _cleanup(gc, name)
        gc.gnt("gnt-cluster", "modify", "-D", "drbd:net-custom=")
    for node in ("node1", "node2", "node3"):
        if node in moved:
            assert moved[node] not in _minors(gc, node)
        lvs = gc.ssh(node, ["lvs", "--noheadings", "-o", "lv_name", gc.cluster.vg_name]).stdout
        assert disk_uuid not in lvs


def _read_path(gc: GuestClusterFixture, node: str, path: str, mib: int) -> str:
    res = gc.ssh(node, f"dd if={path} bs=1M count={mib} iflag=direct 2>/dev/null | sha1sum")
    assert not res.failed, res.stderr
    return res.stdout.split()[0]
