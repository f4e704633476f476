"""The taker's catch-up (ganeti.failover.catchup) between three node roots.

Each node is a directory of its own; the RPC calls reach the real backend
functions (ganeti.backend.joblog) of the node they are addressed to.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc  # noqa: E402

from ganeti import errors  # noqa: E402
from ganeti.backend import joblog as backend_joblog  # noqa: E402
from ganeti.backend.context import NodeContext  # noqa: E402
from ganeti.failover import catchup  # noqa: E402
from ganeti.objects import Cluster, ConfigData, Node  # noqa: E402
from ganeti.pathutils import Paths, archived_job_file_name, job_file_name  # noqa: E402

NAMES = ["node1", "node2", "node3"]


def _data() -> ConfigData:
    nodes = {f"u{i}": Node(name=f"node{i}", uuid=f"u{i}", primary_ip=f"10.0.0.{i}",
                           master_candidate=True) for i in (1, 2, 3)}
    return ConfigData(cluster=Cluster(cluster_name="c", master_node="u1"), nodes=nodes)


@pytest.fixture
def nodes(tmp_path) -> dict[str, NodeContext]:
    out = {}
    for name in NAMES:
        paths = Paths(root=str(tmp_path / name))
        os.makedirs(paths.queue_archive_dir)
        out[name] = NodeContext(paths=paths, hostname=name, noded_port=1811)
    return out


def _rpc(nodes: dict[str, NodeContext], down: tuple[str, ...] = ()) -> FakeRpc:
    rpc = FakeRpc()
    for name in down:
        rpc.set_failure("jobqueue_log", name, "connection refused")
    rpc.set_handler("jobqueue_log", lambda node, args: backend_joblog.jobqueue_log(nodes[node]))
    rpc.set_handler("jobqueue_fetch",
                    lambda node, args: backend_joblog.jobqueue_fetch(nodes[node], *args))
    return rpc


def _job(ctx: NodeContext, job_id: int, archived: bool = False) -> None:
    p = ctx.paths
    path = (archived_job_file_name(p.queue_archive_dir, job_id) if archived
            else job_file_name(p.queue_dir, job_id))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(f'{{"id": {job_id}}}')


def _serial(ctx: NodeContext, serial: int) -> None:
    with open(ctx.paths.queue_serial_file, "w") as fh:
        fh.write(f"{serial}\n")


def test_the_taker_fetches_the_jobs_it_lacks_with_their_place_and_content(nodes) -> None:
    n1, n2, n3 = (nodes[n] for n in NAMES)
    for job_id in (1, 2, 3, 4):
        _job(n1, job_id, archived=job_id == 1)
    _job(n3, 5)
    _serial(n1, 1004)                      # ids up to here were handed out by node1
    for job_id in (1, 2, 4):               # node2 missed job 3 (a gap) and 5
        _job(n2, job_id, archived=job_id == 1)
    _serial(n2, 4)
    lines: list[str] = []
    catchup.catch_up_jobs(_rpc(nodes), n2.paths, _data(), "node2", lines.append)
    assert backend_joblog.held_job_ids(n2.paths.queue_dir, n2.paths.queue_archive_dir) \
        == {1, 2, 3, 4, 5}
    with open(job_file_name(n2.paths.queue_dir, 3)) as fh:
        assert fh.read() == '{"id": 3}'
    assert open(n2.paths.queue_serial_file).read().strip() == "1004"
    assert any("fetched 1 job(s) from node1" in line for line in lines)
    assert any("fetched 1 job(s) from node3" in line for line in lines)


def test_with_a_minority_answering_nothing_is_written_and_the_taker_refuses(nodes) -> None:
    _job(nodes["node1"], 1)
    with pytest.raises(errors.NotMasterError, match="1 of 3 master candidates"):
        catchup.catch_up_jobs(_rpc(nodes, down=("node1", "node3")), nodes["node2"].paths,
                              _data(), "node2", lambda line: None)
    assert os.listdir(nodes["node2"].paths.queue_dir) == ["archive"]


def test_clear_drain_flag(nodes) -> None:
    paths = nodes["node2"].paths
    open(paths.queue_drain_file, "w").close()
    lines: list[str] = []
    catchup.clear_drain_flag(paths, lines.append)
    catchup.clear_drain_flag(paths, lines.append)
    assert not os.path.exists(paths.queue_drain_file) and lines == ["queue drain flag cleared"]


@pytest.mark.parametrize("scale,expected", [(1.0, catchup.CATCH_UP_TIMEOUT),
                                            (0.05, catchup.MIN_CATCH_UP_TIMEOUT)])
def test_catch_up_waits_for_a_node_as_long_as_the_timeout_scale_says(tmp_path, scale,
                                                                     expected):
    from ganeti.rpc.client import RpcRunner, StaticResolver
    from ganeti.rpc.transport import FunctionTransport
    seen: list[float] = []

    def post(address, port, procedure, body, timeout):   # every candidate hangs
        seen.append(timeout)
        raise errors.RpcTransportError("timed out")

    rpc = RpcRunner(StaticResolver({n: f"10.0.0.{i}" for i, n in enumerate(NAMES, 1)},
                                   default_port=1811),
                    FunctionTransport(post), timeout_scale=scale)
    with pytest.raises(errors.NotMasterError, match="catch-up refused"):
        catchup.catch_up_jobs(rpc, Paths(root=str(tmp_path)), _data(), "node2",
                              lambda line: None)
    assert seen == [pytest.approx(expected)] * len(NAMES)
