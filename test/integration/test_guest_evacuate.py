"""A node evacuation of six mirrored instances on the guest cluster (issue 28; doc/storage.md).

Six ``drbd`` instances all touch node2: three have their primary there
(their secondaries on node1 or node3), three their secondary.  ``gnt-node
evacuate --all node2`` must leave node2 with nothing: the primaries
migrate to their secondaries and get a new secondary, the secondaries move
to the third node, every job the evacuation made succeeds with its
opcodes in that order, and every mirror ends Connected and
UpToDate/UpToDate on the two nodes that hold it, with no minor and no
volume of them left on node2; each job after the first depends on the one
before it (all move onto node1 and node3) and started after it ended
(test/integration/evacuate_helpers.py).  Data written on ``evac1``'s old
primary, node2, before the evacuation is read back on its new one.

The instances use the fake hypervisor on real DRBD over real logical
volumes, 16 MiB each.  In ``make test``: its name does not say drbd, so it
runs in the *other* guest unit (test/conftest.py), beside the drbd unit,
the longer one (about 3.5 minutes under make test's load).
"""

from __future__ import annotations

import pytest
import yaml

from test.integration import evacuate_helpers as evac
from test.integration.guest_cluster_harness import GuestClusterFixture

# the session's guest cluster may be made by the first test that asks (minutes under load)
pytestmark = pytest.mark.timeout(1200)

#: name, primary, secondary
LAYOUT = [("evac1", "node2", "node3"), ("evac2", "node2", "node1"),
          ("evac3", "node2", "node3"), ("evac4", "node3", "node2"),
          ("evac5", "node1", "node2"), ("evac6", "node3", "node2")]


def _minor(gc: GuestClusterFixture, name: str, node: str) -> int:
    """The DRBD minor of ``name``'s first disk on ``node``, from ``gnt-instance info``."""
    res = gc.gnt("gnt-instance", "info", f"{name}.vcluster")
    assert res.returncode == 0, res.stderr
    disk = yaml.safe_load(res.stdout)[0]["Disks"][0]
    ends = dict(str(disk[key]).split(", minor=") for key in ("nodeA", "nodeB"))
    return int(ends[f"{node}.vcluster"])


def _sha1(gc: GuestClusterFixture, node: str, command: str) -> str:
    res = gc.ssh(node, command + " | sha1sum")
    assert not res.failed, res.stderr
    return res.stdout.split()[0]


def test_evacuating_a_node_of_six_mirrored_instances_empties_it(
        guest_cluster: GuestClusterFixture) -> None:
    gc = guest_cluster
    volumes_before = evac.volumes(gc, "node2")
    try:
        evac.add_mirrored(gc, LAYOUT, "16m")
        minor = _minor(gc, "evac1", "node2")
        written = _sha1(gc, "node2", "head -c 4194304 /dev/urandom | tee /tmp/evac1"
                                     f" | dd of=/dev/drbd{minor} bs=1M iflag=fullblock"
                                     " oflag=direct conv=fsync 2>/dev/null; cat /tmp/evac1")
        jobs = evac.evacuate(gc, "node2")
        evac.check_placement(gc, LAYOUT, "node2")
        evac.check_jobs(jobs, LAYOUT, "node2")
        evac.check_mirrors(gc, LAYOUT, "node2", volumes_before)
        moved = _minor(gc, "evac1", "node3")
        assert _sha1(gc, "node3", f"dd if=/dev/drbd{moved} bs=1M count=4 iflag=direct"
                                  " 2>/dev/null") == written
    finally:
        evac.remove(gc, LAYOUT)
