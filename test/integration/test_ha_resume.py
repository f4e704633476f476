"""A node loss recovery cut short by a master failover, finished by the new master
(doc/ha.md, "Node loss recovery", "A recovery cut short").

One 4-node virtual cluster (fake hypervisor, ``sharedfile`` instances, the
virtual cluster's out-of-band program): node4's daemons are killed; the
fence job the old master's recovery thread submits first
(``OP_NODE_HA_FENCE``, reason ``gnt:ha``) runs on node1 and is confirmed,
and node1 stops being the master before any failover job (recovery off on
node1 meanwhile, so its own thread submits nothing: the state a master
lost right after its fence job leaves behind).  node2 takes over with
``gnt-cluster master-failover``, recovery on: from the fence record in the
configuration it submits the failovers, and each tagged instance runs on a
survivor exactly once; the record is then removed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from failover_helpers import MASTERD_ARGS, failover, wait_until
from instance_helpers import NOCHECK
from vcluster_harness import VirtualCluster

import ha_helpers

from ganeti import constants, luxi
from ganeti.ha import recovery
from ganeti.opcodes import wire
from tools.harness import crash, oob

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

N1, N2, N3, N4 = (f"node{k}.vcluster" for k in range(1, 5))
FAILOVER = "ganeti:watcher:autorepair:failover"
TAGGED = ["ha1.example.com", "ha2.example.com"]


@pytest.fixture(scope="module")
def vc(tmp_path_factory) -> Iterator[VirtualCluster]:
    with VirtualCluster(tmp_path_factory.mktemp("vcharesume"), nodes=4, use_ssh=False,
                        masterd_args=MASTERD_ARGS) as cluster:
        path = oob.install(cluster.cluster)
        cluster.ok("gnt-cluster", "modify", "--node-parameters", f"oob_program={path}")
        yield cluster


def _client(vc: VirtualCluster, master: str) -> luxi.Client:
    return luxi.Client(vc.paths(master).master_socket, connect_timeout=5.0, rw_timeout=30.0)


_running_on = ha_helpers.running_on


_ha_jobs = ha_helpers.ha_jobs


_failovers = ha_helpers.failovers


def _pnode(vc: VirtualCluster, name: str) -> str:
    return vc.ok("gnt-instance", "list", "--no-headers", "-o", "pnode", name, node=N2).strip()


def _node_tags(vc: VirtualCluster, node: str, master: str) -> list[str]:
    return vc.ok("gnt-node", "list-tags", node, node=master).split()


def test_a_new_master_finishes_a_recovery_the_old_one_fenced_for(vc):
    for name in (*TAGGED, "plain1.example.com"):
        vc.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=1M", "-o", "tinyos",
              "-B", "maxmem=128", "-n", N4, *NOCHECK, name)
    for name in TAGGED:
        vc.ok("gnt-instance", "add-tags", name, FAILOVER)
    crash.kill_node_daemons(vc.paths(N4))
    # the old master's fence job, as its recovery thread submits it
    fence = wire.node_ha_fence(
        N4, fence=recovery.FENCE_OOB, lease_wait=0.0,
        messages=[f"Node {N4} declared dead (the test's stand-in for the verdict)"],
        reason=[[recovery.REASON_SOURCE, f"fencing node {N4}", time.time_ns()]])
    job = int(_client(vc, N1).SubmitJob([fence]))

    def ended() -> bool:
        ((status,),) = _client(vc, N1).QueryJobs([job], ["status"])
        return status in constants.JOBS_FINALIZED

    assert wait_until(ended, 60)
    assert _client(vc, N1).QueryJobs([job], ["status"]) == [[constants.JOB_STATUS_SUCCESS]]
    record = [t for t in _node_tags(vc, N4, N1) if t.startswith(recovery.FENCED_PREFIX)]
    assert len(record) == 1 and record[0].startswith(f"{recovery.FENCED_PREFIX}oob:")
    # fenced, nothing recovered yet: its instances are gone with its power
    for name in TAGGED:
        assert _running_on(vc, name) == []
    code, text = failover(vc, N2)
    assert code == 0, text
    vc.ok("gnt-cluster", "modify", "--ha-recovery", "yes", "--ha-node-timeout", "3", node=N2)
    twice: list[dict[str, list[str]]] = []

    def recovered() -> bool:
        where = {n: _running_on(vc, n) for n in TAGGED}
        if any(len(nodes) > 1 for nodes in where.values()):
            twice.append(where)
        return all(len(nodes) == 1 for nodes in where.values())

    assert wait_until(recovered, 90, step=0.2), {n: _running_on(vc, n) for n in TAGGED}
    assert twice == []
    for name in TAGGED:
        (where,) = _running_on(vc, name)
        assert where in (N1, N2, N3)
        assert _pnode(vc, name) == where
    # the record goes once nothing is left; a few more rounds submit nothing again
    assert wait_until(lambda: not any(t.startswith(recovery.FENCED_PREFIX)
                                      for t in _node_tags(vc, N4, N2)), 30)
    time.sleep(6)
    jobs = _ha_jobs(vc, N2)
    assert sorted(_failovers(jobs)) == TAGGED        # exactly once each
    assert all(j["status"] == constants.JOB_STATUS_SUCCESS for j in jobs), jobs
    assert _pnode(vc, "plain1.example.com") == N4 and _running_on(vc, "plain1.example.com") == []
