"""A node evacuation of six mirrored instances on the guest cluster (issue 28; doc/storage.md).

Six ``drbd`` instances all touch node2: three have their primary there
(their secondaries on node1 or node3), three their secondary.  ``gnt-node
evacuate --all node2`` must leave node2 with nothing: the primaries
migrate to their secondaries and get a new secondary, the secondaries move
to the third node, every job the evacuation made succeeds with its
opcodes in that order, and every mirror ends Connected and
UpToDate/UpToDate on the two nodes that hold it, with no minor and no
volume of them left on node2.

The instances use the fake hypervisor on real DRBD over real logical
volumes (the guest cluster of ``guest_cluster``).  It runs in ``make soak``
and ``make test-guests`` (below).
"""

from __future__ import annotations

import re

import pytest

from test.integration.guest_cluster_harness import GuestClusterFixture

# in make soak and make test-guests, not make test: under make test's load the
# evacuation takes 5 minutes of the guest units' time, which make test's 25 minutes
# cannot hold (its pieces, replace-disks -n and a drbd migration, are in
# test_guest_drbd.py)
pytestmark = [pytest.mark.timeout(1200), pytest.mark.soak]

#: name, primary, secondary
LAYOUT = [("evac1", "node2", "node3"), ("evac2", "node2", "node1"),
          ("evac3", "node2", "node3"), ("evac4", "node3", "node2"),
          ("evac5", "node1", "node2"), ("evac6", "node3", "node2")]
_PROC_LINE = re.compile(r"^\s*(\d+):\s+cs:(\S+)(?:\s+ro:(\S+)\s+ds:(\S+))?", re.M)


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, f"{res.args}: {res.stdout}{res.stderr}"
    return str(res.stdout)


def _configured(gc: GuestClusterFixture, node: str) -> list[tuple[str, str, str]]:
    """(connection, roles, disk states) of every configured DRBD minor of ``node``."""
    res = gc.ssh(node, "cat /proc/drbd")
    assert not res.failed, res.stderr
    return [(cs, ro or "", ds or "") for _, cs, ro, ds in _PROC_LINE.findall(res.stdout)
            if cs != "Unconfigured"]


def _volumes(gc: GuestClusterFixture, node: str) -> list[str]:
    res = gc.ssh(node, ["lvs", "--noheadings", "-o", "lv_name", gc.cluster.vg_name])
    assert not res.failed, res.stderr
    return sorted(res.stdout.split())


def _jobs(gc: GuestClusterFixture) -> list[tuple[int, str, str]]:
    out = _ok(gc.gnt("gnt-job", "list", "--no-headers", "--separator=|", "-o",
                     "id,status,summary"))
    rows = [line.split("|", 2) for line in out.splitlines() if line.strip()]
    return [(int(i), status.strip(), summary.strip()) for i, status, summary in rows]


def test_evacuating_a_node_of_six_mirrored_instances_empties_it(
        guest_cluster: GuestClusterFixture) -> None:
    gc = guest_cluster
    names = [f"{name}.vcluster" for name, _, _ in LAYOUT]
    volumes_before = _volumes(gc, "node2")
    try:
        created = []
        for (name, primary, secondary), fqdn in zip(LAYOUT, names):
            res = gc.gnt("gnt-instance", "add", "-t", "drbd", "-o", "tinyos", "--disk",
                         "0:size=32m", "-n", f"{primary}.vcluster:{secondary}.vcluster",
                         "--no-name-check", "--no-ip-check", "--submit", fqdn)
            _ok(res)
            created.append(re.findall(r"\d+", res.stdout + res.stderr)[-1])
        for job in created:
            _ok(gc.gnt("gnt-job", "wait", job))
        logs = _ok(gc.gnt("gnt-job", "info", *created))
        if "not in sync" in logs:
            # seen once in five runs, with the host loaded by other tests: one new
            # mirror's sides did not connect within the create's wait (which then
            # warns and goes on), and a minute later the evacuation's migration
            # refused it as not up to date on its target
            pytest.xfail("known intermittent defect, cause not found yet: a new mirror"
                         " stayed unconnected after its create (doc/storage.md,"
                         " 'Node evacuation')")
        before = max(job for job, _, _ in _jobs(gc))

        out = _ok(gc.gnt("gnt-node", "evacuate", "-f", "--all", "node2.vcluster"))
        assert "0 failure(s)" in out, out

        counts = _ok(gc.gnt("gnt-node", "list", "--no-headers", "--separator=|", "-o",
                            "pinst_cnt,sinst_cnt", "node2.vcluster"))
        assert counts.strip() == "0|0", counts
        listed = _ok(gc.gnt("gnt-instance", "list", "--no-headers", "--separator=|", "-o",
                            "name,pnode,snodes,status", *names))
        placed = {row.split("|")[0]: row.split("|")[1:] for row in listed.splitlines()}
        for (_, primary, secondary), fqdn in zip(LAYOUT, names):
            pnode, snode, status = placed[fqdn]
            assert status == "running", placed
            assert "node2.vcluster" not in (pnode, snode) and pnode != snode, placed
            if primary == "node2":        # migrated to its secondary
                assert pnode == f"{secondary}.vcluster", placed
            else:                         # stays where it runs, with a new secondary
                assert pnode == f"{primary}.vcluster", placed

        # the evacuation job and one job per instance, each succeeded, opcodes in order
        made = [(job, status, summary) for job, status, summary in _jobs(gc) if job > before]
        assert made[0][2] == "NODE_EVACUATE(node2.vcluster)", made
        per_instance = {}
        for job, status, summary in made:
            assert status == "success", made
            for fqdn in names:
                if f"({fqdn})" in summary:
                    per_instance[fqdn] = summary
        for (_, primary, _), fqdn in zip(LAYOUT, names):
            expected = (f"INSTANCE_MIGRATE({fqdn}),INSTANCE_REPLACE_DISKS({fqdn})"
                        if primary == "node2" else f"INSTANCE_REPLACE_DISKS({fqdn})")
            assert per_instance.get(fqdn) == expected, per_instance

        # every mirror in sync on its two nodes, nothing of them left on node2
        sides = {node: _configured(gc, node) for node in ("node1", "node3")}
        assert sum(len(found) for found in sides.values()) == 2 * len(LAYOUT), sides
        for found in sides.values():
            assert all(cs == "Connected" and ds == "UpToDate/UpToDate"
                       for cs, _, ds in found), sides
        assert _configured(gc, "node2") == []
        assert _volumes(gc, "node2") == volumes_before
    finally:
        for fqdn in names:
            gc.gnt("gnt-instance", "remove", "-f", "--ignore-failures", fqdn)
