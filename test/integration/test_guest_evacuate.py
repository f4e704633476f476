"""A node evacuation of six mirrored instances on the guest cluster (issue 28; doc/storage.md).

Six ``drbd`` instances all touch node2: three have their primary there
(their secondaries on node1 or node3), three their secondary.  ``gnt-node
evacuate --all node2`` must leave node2 with nothing: the primaries
migrate to their secondaries and get a new secondary, the secondaries move
to the third node, every job the evacuation made succeeds with its
opcodes in that order, and every mirror ends Connected and
UpToDate/UpToDate on the two nodes that hold it, with no minor and no
volume of them left on node2; each job after the first depends on the one
before it (all move onto node1 and node3) and started after it ended.  The
checks are those of the two-instance evacuation in ``make test``
(test/integration/test_guest_drbd_evacuate.py, test/integration/evacuate_helpers.py).

The instances use the fake hypervisor on real DRBD over real logical
volumes (the guest cluster of ``guest_cluster``).  It runs in ``make soak``
and ``make test-guests`` (below).
"""

from __future__ import annotations

import pytest

from test.integration import evacuate_helpers as evac
from test.integration.guest_cluster_harness import GuestClusterFixture

# in make soak and make test-guests, not make test: under make test's load the
# evacuation takes 5 minutes of the guest units' time, which make test's 25 minutes
# cannot hold (make test evacuates two instances, one of each kind:
# test_guest_drbd_evacuate.py)
pytestmark = [pytest.mark.timeout(1200), pytest.mark.soak]

#: name, primary, secondary
LAYOUT = [("evac1", "node2", "node3"), ("evac2", "node2", "node1"),
          ("evac3", "node2", "node3"), ("evac4", "node3", "node2"),
          ("evac5", "node1", "node2"), ("evac6", "node3", "node2")]


def test_evacuating_a_node_of_six_mirrored_instances_empties_it(
        guest_cluster: GuestClusterFixture) -> None:
    gc = guest_cluster
    volumes_before = evac.volumes(gc, "node2")
    try:
        evac.add_mirrored(gc, LAYOUT, "32m")
        jobs = evac.evacuate(gc, "node2")
        evac.check_placement(gc, LAYOUT, "node2")
        evac.check_jobs(jobs, LAYOUT, "node2")
        evac.check_mirrors(gc, LAYOUT, "node2", volumes_before)
    finally:
        evac.remove(gc, LAYOUT)
