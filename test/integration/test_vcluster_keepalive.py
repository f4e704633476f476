"""Kept node RPC connections end to end: the master daemon's live queries reuse one
node daemon child per node (doc/protocols/rpc.md, "Kept connections")."""

from __future__ import annotations

import os
import time

import pytest
from host_helpers import request_children
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcka"), nodes=2, use_ssh=False) as cluster:
        yield cluster


def _request_children(vc, node: str) -> set[int]:
    """The node daemon's children that serve (or served) a connection."""
    pid = daemonctl.daemon_pid(vc.paths(node), constants.NODED)
    assert pid is not None
    return request_children(pid)


def _settled(vc, node: str, want: set[int] | None = None) -> set[int]:
    """The request children once the job's own ones have gone (at most 20 s):
    ``want`` exactly, or a single one."""
    deadline = time.monotonic() + 20
    while True:
        found = _request_children(vc, node)
        if (found == want if want is not None else len(found) == 1) \
                or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _job_files(paths) -> dict[str, bytes]:
    found = {}
    for name in os.listdir(paths.queue_dir):
        if name.startswith("job-"):
            with open(os.path.join(paths.queue_dir, name), "rb") as fh:
                found[name] = fh.read()
    return found


def _replicated(vc, node: str) -> None:
    """Wait (at most 20 s) until ``node`` holds the master's job files as they
    are: a status change may be held up to LAZY_DELAY before its lane sends
    it on a kept connection (doc/design/replication.md, "Held updates"), and
    a listing at that moment would need a second kept connection."""
    master = vc.paths(vc.names[0])
    deadline = time.monotonic() + 20
    while _job_files(vc.paths(node)) != _job_files(master) and time.monotonic() < deadline:
        time.sleep(0.02)


def test_live_listings_reuse_the_node_daemon_child(vc) -> None:
    node = vc.names[1]
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "-n", node, "--no-name-check",
          "--no-ip-check", "ka1.example.com")
    _replicated(vc, node)
    vc.ok("gnt-instance", "list")   # all_instances_info to both nodes, kept
    kept = _settled(vc, node)
    assert len(kept) == 1, kept
    for _ in range(3):
        out = vc.ok("gnt-instance", "list", "-o", "name,status")
        assert "ka1.example.com" in out and "running" in out
        assert _request_children(vc, node) == kept
    # an operation that changes the node runs in a child of its own meanwhile;
    # the kept child is still there and the next listing uses it again (a
    # child the master no longer reused would stay beside a new kept one).
    # Other children (the job's replication to this candidate) may outlive
    # the job for a moment: they are not kept, so only new pids count.
    vc.ok("gnt-instance", "shutdown", "--timeout", "0", "ka1.example.com")
    _replicated(vc, node)
    before = _settled(vc, node, kept)
    assert kept <= before
    assert "ADMIN_down" in vc.ok("gnt-instance", "list", "-o", "name,status")
    after = _request_children(vc, node)
    assert kept <= after and not after - before, (kept, before, after)
