"""Config and context helpers for LU tests: a real ConfigWriter on tmp files.

::

    cfg = make_config(tmp_path, nodes=3, candidates=2)
    rpc = FakeRpc(cfg)
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    result, messages, jobs = run_opcode(ctx, opcodes.OpNodeRemove(node_name="node3.example.com"))
"""

from __future__ import annotations

import os
import random
from typing import Any

from ganeti import constants, locking
from ganeti.config import ConfigWriter
from ganeti.context import MasterContext
from ganeti.mcpu import NullCallbacks, Processor
from ganeti.objects import Cluster, ConfigData, Node, NodeGroup
from ganeti.pathutils import Paths

__all__ = ["make_config", "make_cluster_context", "run_opcode", "node_name", "RecordingCallbacks",
           "one_node_data"]

CLUSTER_NAME = "cluster.example.com"


def node_name(index: int) -> str:
    """``node<index>.example.com`` (1-based)."""
    return f"node{index}.example.com"


def one_node_data() -> ConfigData:
    """The smallest configuration: cluster.example.com with node1 (uuid ``n1``, a master
    candidate) in group ``g1``; for the config writer's own tests."""
    cluster = Cluster(cluster_name=CLUSTER_NAME, uuid="cluster-uuid",
                      master_node="n1", master_ip="127.0.0.254", master_netdev="lo",
                      enabled_hypervisors=[constants.HT_FAKE])
    group = NodeGroup(name="default", uuid="g1")
    n1 = Node(name="node1.example.com", uuid="n1", primary_ip="127.0.1.1", group="g1",
              master_candidate=True)
    return ConfigData(cluster=cluster, nodes={"n1": n1}, nodegroups={"g1": group})


def make_config(tmp_path: Any, *, nodes: int = 3, candidates: int | None = None,
                pool_size: int = 10, offline: tuple[int, ...] = (),
                root: str | None = None) -> ConfigWriter:
    """A ConfigWriter with ``nodes`` nodes; node1 is the master.

    The first ``candidates`` nodes (default: ``min(nodes, pool_size)``) are
    master candidates; node indexes in ``offline`` are offline.  The file is
    ``<root>/var/lib/ganeti/config.data`` (``root`` defaults to ``tmp_path/root``).
    """
    paths = Paths(root=root or os.path.join(str(tmp_path), "root"))
    os.makedirs(paths.data_dir, exist_ok=True)
    if candidates is None:
        candidates = min(nodes, pool_size)
    group = NodeGroup(name="default", uuid="group-default")
    node_objs = {}
    for i in range(1, nodes + 1):
        uuid = f"uuid-node{i}"
        node_objs[uuid] = Node(name=node_name(i), uuid=uuid, primary_ip=f"127.0.1.{i}",
                               secondary_ip=f"127.0.1.{i}", group=group.uuid,
                               master_candidate=i <= candidates, offline=i in offline)
    cluster = Cluster(cluster_name=CLUSTER_NAME, uuid="uuid-cluster", master_node="uuid-node1",
                      master_ip="127.0.0.254", master_netdev="lo",
                      enabled_hypervisors=[constants.HT_FAKE],
                      candidate_pool_size=pool_size,
                      file_storage_dir=os.path.join(paths.root, "srv/ganeti/file-storage"))
    data = ConfigData(cluster=cluster, nodes=node_objs, nodegroups={group.uuid: group})
    return ConfigWriter.initialize(paths.config_file, data, rng=random.Random(7))


def make_cluster_context(tmp_path: Any, cfg: ConfigWriter, rpc: Any = None, *,
                         hooks_runner: Any = None, root: str | None = None) -> MasterContext:
    """A MasterContext with a real lock manager over ``cfg``'s nodes and groups."""
    paths = Paths(root=root or os.path.join(str(tmp_path), "root"))
    for d in (paths.data_dir, paths.queue_dir, paths.run_dir):
        os.makedirs(d, exist_ok=True)
    data = cfg.get_config_data()
    glm = locking.GanetiLockManager(list(data.nodes), list(data.nodegroups),
                                    [i.name for i in data.instances.values()])
    return MasterContext(paths=paths, cfg=cfg, glm=glm, rpc=rpc, hooks_runner=hooks_runner)


class RecordingCallbacks(NullCallbacks):
    """Callbacks recording feedback and submitted jobs (ids from 100 up)."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[list[Any]] = []

    def submit_many_jobs(self, jobs: list[Any]) -> list[Any]:
        start = 100 + len(self.jobs)
        self.jobs.extend(jobs)
        return [[True, start + i] for i in range(len(jobs))]


def run_opcode(context: MasterContext, op: Any) -> tuple[Any, list[str], list[list[Any]]]:
    """Run ``op`` through a real Processor: ``(result, feedback messages, submitted jobs)``."""
    cbs = RecordingCallbacks()
    result = Processor(context, timeouts=[1.0]).execute_opcode(op, cbs)
    return result, [str(m[1]) for m in cbs.messages], cbs.jobs
