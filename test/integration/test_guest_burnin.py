"""Upstream Ganeti's burnin (Debian package ``ganeti-3.0``) with ``-t plain`` and ``-t
drbd`` against our master on the session's guest cluster (doc/compat.md, doc/storage.md).

Burnin runs on the master node, unchanged, with Debian's python3: the
guest's root is the host's, so the package ``make test`` installs on the
host (``compat-deps``) is there too.  Our master answers on the standard
socket path; upstream's query socket (``ganeti-query``) is the same socket,
given that name in a private mount namespace for the run only.  Every step
burnin runs for a non-mirrored LVM template is asserted: add, stop/start,
grow disks, move to the other node, reinstall, reboot, rename, NICs,
activate/deactivate disks, remove.
"""

from __future__ import annotations

import os
import shlex

import pytest

from test.integration import host_helpers, upstream_cli
from test.integration.guest_cluster_harness import GuestClusterFixture

pytestmark = pytest.mark.timeout(1200)

BURNIN = os.path.join(upstream_cli.UPSTREAM_DIR, "burnin")

#: in a private mount namespace: the master socket also as ganeti-query, then the command
_NS_SCRIPT = r"""
set -e
mount --make-rprivate /
d=$(mktemp -d)
mkdir "$d/orig" "$d/sock"
mount --bind /var/run/ganeti/socket "$d/orig"
ln -s "$d/orig/ganeti-master" "$d/sock/ganeti-master"
ln -s "$d/orig/ganeti-master" "$d/sock/ganeti-query"
mount --bind "$d/sock" /var/run/ganeti/socket
exec "$@"
"""

#: what this cluster does not have: confd (add/detach disks); and export/import, which
#: test_guest_plain.py covers: burnin re-imports a grown disk at its first size, and
#: tinyos's images are raw copies of the whole disk, which the import refuses as larger
#: than the disk (an OS whose export is a file-system dump fits: doc/exports.md)
_SKIPS = ("--no-confd", "--no-add-disks", "--no-importexport")

_STEPS = ("Creating instances", "Stopping and starting instances", "Growing disks",
          "Moving instances", "Reinstalling instances", "Rebooting instances",
          "Renaming the instances to their own name", "Adding and removing NICs",
          "Activating/deactivating disks", "Removing instances")


@pytest.fixture
def upstream_burnin() -> str:
    host_helpers.skip_unless(
        None if os.path.exists(BURNIN) else
        f"{BURNIN} is missing (make compat-deps installs ganeti-3.0)",
        required_by=upstream_cli.REQUIRE_ENV)
    return BURNIN


def _burnin(gc: GuestClusterFixture, burnin: str, template: str, nodes: str,
            names: list[str], *extra: str) -> str:
    """Run upstream's burnin on the master node (small sizes, our skips); its output."""
    argv = [upstream_cli.SYSTEM_PYTHON, "-E", "-s", burnin, "-o", "tinyos+default",
            "-t", template, "--disk-size", "32M", "--disk-growth", "8M", "--mem-size", "128",
            "-n", nodes, "--no-ip-check", "--no-name-check", *extra, *_SKIPS, *names]
    master = gc.gnt("gnt-cluster", "getmaster").stdout.strip().split(".")[0]
    res = gc.ssh(master, ["unshare", "-m", "sh", "-c", _NS_SCRIPT, "sh", *argv], timeout=1100)
    out = res.stdout + res.stderr
    assert not res.failed, f"{shlex.join(argv)}:\n{out}"
    return out


def test_upstream_burnin_with_plain_disks(guest_cluster: GuestClusterFixture,
                                          upstream_burnin: str) -> None:
    names = ["burn1.vcluster"]     # one instance: every step runs, at half the time
    out = _burnin(guest_cluster, upstream_burnin, "plain", "node2.vcluster,node3.vcluster",
                  names)
    for step in _STEPS:
        assert f"- {step}" in out, f"{step} missing:\n{out}"
    listed = guest_cluster.gnt("gnt-instance", "list", "--no-headers", "-o", "name").stdout
    assert not set(names) & set(listed.split())
    vg = guest_cluster.cluster.vg_name
    for node in ("node2", "node3"):
        lvs = guest_cluster.ssh(node, ["lvs", "--noheadings", "-o", "lv_name,lv_tags", vg])
        assert not lvs.failed, lvs.stderr
        assert not [line for line in lvs.stdout.splitlines() if "burn" in line], lvs.stdout
    jobs = guest_cluster.gnt("gnt-job", "list", "--no-headers", "-o", "status,summary").stdout
    assert "success INSTANCE_CREATE(burn1.vcluster)" in " ".join(jobs.split())
    assert "success INSTANCE_MOVE(burn1.vcluster)" in " ".join(jobs.split())
    assert "success INSTANCE_GROW_DISK(burn1.vcluster)" in " ".join(jobs.split())


#: the steps burnin runs for drbd on three nodes (reinstall and reboot are the same
#: for every template and run in the plain test above)
_DRBD_STEPS = ("Creating instances", "Stopping and starting instances",
               "Replacing disks on the same nodes", "Changing the secondary node",
               "Growing disks", "Failing over instances", "Migrating instances",
               "Renaming the instances to their own name", "Adding and removing NICs",
               "Activating/deactivating disks", "Removing instances")


def test_upstream_burnin_with_drbd_disks(guest_cluster: GuestClusterFixture,
                                         upstream_burnin: str) -> None:
    """Every drbd step of upstream's burnin: replace-disks on each side and onto a new
    secondary, failover, live migration and its cleanup, grow, on real DRBD."""
    out = _burnin(guest_cluster, upstream_burnin, "drbd",
                  "node2.vcluster,node3.vcluster,node1.vcluster", ["burnd1.vcluster"],
                  "--no-reinstall", "--no-reboot")
    for step in _DRBD_STEPS:
        assert f"- {step}" in out, f"{step} missing:\n{out}"
    jobs = " ".join(guest_cluster.gnt("gnt-job", "list", "--no-headers", "-o",
                                      "status,summary").stdout.split())
    for summary in ("INSTANCE_REPLACE_DISKS(burnd1.vcluster)",
                    "INSTANCE_MIGRATE(burnd1.vcluster)", "INSTANCE_FAILOVER(burnd1.vcluster)"):
        assert f"success {summary}" in jobs, summary
    for node in ("node1", "node2", "node3"):
        state = guest_cluster.ssh(node, "cat /proc/drbd").stdout
        assert " cs:" not in state.replace(" cs:Unconfigured", ""), f"{node}: {state}"
