"""A node evacuation of two mirrored instances, one of each kind (issue 28; doc/storage.md).

The smallest evacuation that runs every kind of move the allocator's
dependent job lists make for ``drbd``, in ``make test`` on the drbd unit's
guest cluster (the session's ``guest_cluster``: no cluster of its own).
node2 is evacuated (``gnt-node evacuate --all``) of

* ``drbdev1``, primary on node2, secondary on node3: its job migrates it to
  node3 (``INSTANCE_MIGRATE``), then gives it node1 as its new secondary
  (``INSTANCE_REPLACE_DISKS`` with a new node);
* ``drbdev2``, primary on node1, secondary on node2: its job gives it node3
  as its new secondary.

Checked: node2 holds no instance, no DRBD minor and no volume of them;
each job succeeded with its opcodes in that order, the second depending on
the first by its id (both move onto node1 and node3) and started after it;
both mirrors are Connected and UpToDate/UpToDate on node1 and node3 (the
minors their config names); the data written on drbdev1's old primary is
read back on its new one.  Disks of 16 MiB.  The six-instance evacuation
(test/integration/test_guest_evacuate.py) runs in ``make soak``.
"""

from __future__ import annotations

import yaml

import pytest

from test.integration import evacuate_helpers as evac
from test.integration.guest_cluster_harness import GuestClusterFixture

# the session's guest cluster may be made by the first test that asks (minutes under load)
pytestmark = pytest.mark.timeout(1200)

#: name, primary, secondary
LAYOUT = [("drbdev1", "node2", "node3"), ("drbdev2", "node1", "node2")]


def _minor(gc: GuestClusterFixture, name: str, node: str) -> int:
    res = gc.gnt("gnt-instance", "info", f"{name}.vcluster")
    assert res.returncode == 0, res.stderr
    disk = yaml.safe_load(res.stdout)[0]["Disks"][0]
    ends = dict(str(disk[key]).split(", minor=") for key in ("nodeA", "nodeB"))
    return int(ends[f"{node}.vcluster"])


def _sha1(gc: GuestClusterFixture, node: str, command: str) -> str:
    res = gc.ssh(node, command + " | sha1sum")
    assert not res.failed, res.stderr
    return res.stdout.split()[0]


def test_a_drbd_evacuation_moves_a_primary_and_a_secondary_off_the_node(
        guest_cluster: GuestClusterFixture) -> None:
    gc = guest_cluster
    volumes_before = evac.volumes(gc, "node2")
    try:
        evac.add_mirrored(gc, LAYOUT, "16m")
        minor = _minor(gc, "drbdev1", "node2")
        written = _sha1(gc, "node2", "head -c 4194304 /dev/urandom | tee /tmp/drbdev1"
                                     f" | dd of=/dev/drbd{minor} bs=1M iflag=fullblock"
                                     " oflag=direct conv=fsync 2>/dev/null; cat /tmp/drbdev1")

        jobs = evac.evacuate(gc, "node2")

        evac.check_placement(gc, LAYOUT, "node2")
        evac.check_jobs(jobs, LAYOUT, "node2")
        evac.check_mirrors(gc, LAYOUT, "node2", volumes_before)
        moved = _minor(gc, "drbdev1", "node3")
        assert _sha1(gc, "node3", f"dd if=/dev/drbd{moved} bs=1M count=4 iflag=direct"
                                  " 2>/dev/null") == written
    finally:
        evac.remove(gc, LAYOUT)
