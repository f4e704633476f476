"""The takeover steps that work on local files (ganeti.failover.takeover)."""

from __future__ import annotations

import os

import pytest

from ganeti import errors, serializer, ssconf
from ganeti.config import file as configfile
from ganeti.failover import takeover, vote
from ganeti.objects import Cluster, ConfigData, Node
from ganeti.pathutils import Paths


def _data() -> ConfigData:
    nodes = {"u1": Node(name="node1", uuid="u1", primary_ip="10.0.0.1", master_candidate=True),
             "u2": Node(name="node2", uuid="u2", primary_ip="10.0.0.2", master_candidate=True),
             "u3": Node(name="node3", uuid="u3", primary_ip="10.0.0.3")}
    return ConfigData(cluster=Cluster(cluster_name="c", master_node="u1"), nodes=nodes,
                      serial_no=7)


@pytest.fixture
def paths(tmp_path) -> Paths:
    p = Paths(root=str(tmp_path))
    os.makedirs(p.data_dir)
    return p


def test_check_taker():
    data = _data()
    assert takeover.check_taker(data, "node2").uuid == "u2"
    with pytest.raises(errors.OpPrereqError, match="already the master"):
        takeover.check_taker(data, "node1")
    assert takeover.check_taker(data, "node1", allow_master=True).uuid == "u1"   # --no-voting
    with pytest.raises(errors.OpPrereqError, match="not an online master candidate"):
        takeover.check_taker(data, "node3")
    with pytest.raises(errors.OpPrereqError, match="not in the cluster"):
        takeover.check_taker(data, "nodeX")


def test_write_takeover_config(paths):
    decision = vote.Decision(True, "ok", "ok", config_serial=12, epoch=4, queue_serial=99)
    new = takeover.write_takeover_config(paths, _data(), "node2", decision, clock=lambda: 5.0)
    on_disk = configfile.load_config_data(paths.config_file)
    assert on_disk.serial_no == new.serial_no == 12
    assert on_disk.cluster.master_node == "u2" and on_disk.cluster.master_epoch == 4
    assert ssconf.SimpleStore(paths).get_master_node() == "node2"
    assert serializer.loads(open(paths.config_file, "rb").read())["cluster"]["master_epoch"] == 4


def test_raise_queue_serial_never_lowers(paths):
    assert takeover.raise_queue_serial(paths, 40) == 40
    assert open(paths.queue_serial_file).read() == "40\n"
    assert takeover.raise_queue_serial(paths, 30) == 40
    assert open(paths.queue_serial_file).read() == "40\n"


def test_master_ip_params():
    params = takeover.master_ip_params(_data())
    assert params["name"] == "node1" and params["uuid"] == "u1"


def test_marker_round_trip_and_clear(paths):
    assert takeover.read_marker(paths) is None
    marker = takeover.Marker("node2", 65538, "node1")
    takeover.write_marker(paths, marker)
    assert takeover.read_marker(paths) == marker
    done = takeover.Marker("node2", 65538, "node1", queue_serial=1014, config_serial=9,
                           stopped=True)
    takeover.write_marker(paths, done)
    assert takeover.read_marker(paths) == done
    takeover.clear_marker(paths)
    assert takeover.read_marker(paths) is None
    takeover.clear_marker(paths)                  # idempotent


def test_corrupt_marker_is_an_error(paths):
    os.makedirs(paths.data_dir, exist_ok=True)
    with open(takeover.marker_file(paths), "w") as fh:
        fh.write('{"epoch": 3}')
    with pytest.raises(errors.ConfigurationError, match="Invalid takeover marker"):
        takeover.read_marker(paths)


def test_split_claims_counts_rival_claims_only():
    failed = {
        "node1": "Fenced: claim of master epoch 65539 by node3 refused: epoch 65537 accepted"
                 " from node1; claimed by another taker",
        "node2": "Fenced: claim of master epoch 65539 by node3 refused: epoch 65538 accepted"
                 " from node2; claimed by another taker",
        "node4": "Error contacting node node4: timed out",
        "node5": "Fenced: claim of master epoch 65539 by node3 refused: epoch 65540 accepted"
                 " from node4; newer than 0 the taker saw",
    }
    assert takeover.split_claims(failed) == {65537: 1, 65538: 1}


def test_float_option():
    args = ["--rpc-timeout-scale", "0.05", "--lease-duration", "x"]
    assert takeover.float_option(args, "--rpc-timeout-scale", 1.0) == 0.05
    assert takeover.float_option(args, "--lease-duration", 6.0) == 6.0
    assert takeover.float_option(args, "--vote-timeout", 60.0) == 60.0


def _claims(rpc, answers):
    """FakeRpc answering master_claim per node: a payload dict or a refusal text."""
    def handler(node, args):
        got = answers[node](args) if callable(answers[node]) else answers[node]
        if isinstance(got, str):
            raise errors.RpcError(got)
        return got
    rpc.set_handler("master_claim", handler)


def _rival(epoch, node):
    return (f"Fenced: claim refused: epoch {epoch} accepted from {node}; claimed by another"
            " taker")


def test_claim_won_by_a_majority():
    from test.fakes.fakerpc import FakeRpc
    rpc = FakeRpc()
    _claims(rpc, {"node1": {}, "node2": {}, "node3": _rival(65537, "node1")})
    lines = []
    assert takeover.claim_majority(rpc, ["node1", "node2", "node3"], "node2", 65538, 0,
                                   lines.append) == 65538
    assert lines == ["master epoch 65538 claimed by 2 of 3 nodes"]


def test_claim_lost_to_a_rival_majority_gives_up():
    from test.fakes.fakerpc import FakeRpc
    rpc = FakeRpc()
    _claims(rpc, {"node1": _rival(65539, "node3"), "node2": {},
                  "node3": _rival(65539, "node3")})
    with pytest.raises(takeover.TakeoverRefused, match="another takeover got ahead"):
        takeover.claim_majority(rpc, ["node1", "node2", "node3"], "node2", 65538, 0,
                                lambda line: None, sleep=lambda s: None)
    # one round only, then the release
    assert [args for _, args in rpc.calls_to("master_claim")] == [["node2", 65538, 0],
                                                                  ["node2", 0, 0]]


def test_split_claims_highest_taker_asks_again_the_others_give_up():
    from test.fakes.fakerpc import FakeRpc
    rpc = FakeRpc()
    # three takers, each node promised to a different one; node3's epoch is the highest:
    # the others give up and release, so its second round gets them
    rounds = {"node1": 0, "node2": 0}

    def held(node, epoch):
        def answer(args):
            rounds[node] += 1
            return _rival(epoch, node) if rounds[node] == 1 else {}
        return answer
    _claims(rpc, {"node1": held("node1", 65537), "node2": held("node2", 65538),
                  "node3": {}})
    lines = []
    assert takeover.claim_majority(rpc, ["node1", "node2", "node3"], "node3", 65539, 0,
                                   lines.append, sleep=lambda s: None) == 65539
    assert "asking again" in lines[0]
    # a lower taker gives up at once and releases what it got
    rpc2 = FakeRpc()
    _claims(rpc2, {"node1": _rival(65537, "node1"), "node2": {},
                   "node3": _rival(65539, "node3")})
    with pytest.raises(takeover.TakeoverRefused, match="another takeover got ahead"):
        takeover.claim_majority(rpc2, ["node1", "node2", "node3"], "node2", 65538, 0,
                                lambda line: None, sleep=lambda s: None)
    assert rpc2.calls_to("master_claim")[-1][1] == ["node2", 0, 0]


def test_claim_asks_again_when_nodes_did_not_answer():
    from test.fakes.fakerpc import FakeRpc
    rpc = FakeRpc()
    calls = {"n": 0}

    def slow(args):
        calls["n"] += 1
        return "Error contacting node node3: timed out" if calls["n"] == 1 else {}
    _claims(rpc, {"node1": "Error contacting node node1: timed out", "node2": {},
                  "node3": slow})
    assert takeover.claim_majority(rpc, ["node1", "node2", "node3"], "node2", 65538, 0,
                                   lambda line: None, sleep=lambda s: None) == 65538


def _before_takeover(paths) -> takeover.Marker:
    """node2 wrote its takeover configuration (epoch 65538) after keeping the old one."""
    configfile.write_config_file(paths.config_file, serializer.dumps_bytes(_data()))
    with open(paths.config_file, "rb") as src, \
            open(paths.config_file + ".pre-takeover", "wb") as dst:
        dst.write(src.read())
    marker = takeover.Marker("node2", 65538, "node1", queue_serial=99, config_serial=12)
    takeover.write_marker(paths, marker)
    decision = vote.Decision(True, "ok", "ok", config_serial=12, epoch=65538)
    takeover.write_takeover_config(paths, _data(), "node2", decision)
    return marker


def test_lost_takeover_restores_the_previous_configuration(paths):
    marker = _before_takeover(paths)
    lines = []
    takeover._restore(paths, marker, lines.append)
    data = configfile.load_config_data(paths.config_file)
    assert data.cluster.master_node == "u1" and data.serial_no == 7
    assert ssconf.SimpleStore(paths).get_master_node() == "node1"
    assert takeover.read_marker(paths) is None
    assert not os.path.exists(paths.config_file + ".pre-takeover")
    assert lines == ["this node's previous configuration and ssconf restored"]


def test_lost_takeover_keeps_the_winners_configuration(paths):
    marker = _before_takeover(paths)
    winner = vote.Decision(True, "ok", "ok", config_serial=20, epoch=65539)
    takeover.write_takeover_config(paths, _data(), "node1", winner)   # its push arrived
    lines = []
    takeover._restore(paths, marker, lines.append)
    assert configfile.load_config_data(paths.config_file).cluster.master_epoch == 65539
    assert takeover.read_marker(paths) is None
    assert lines == ["this node's configuration was replaced by the new master's already"]


def test_lost_takeover_puts_back_the_queue_serial_it_raised(paths):
    marker = _before_takeover(paths)
    takeover.raise_queue_serial(paths, 40)
    with open(paths.queue_serial_file + ".pre-takeover", "w") as fh:
        fh.write("40\n")
    takeover.raise_queue_serial(paths, 99)                 # marker.queue_serial
    takeover._restore(paths, marker, lambda line: None)
    assert open(paths.queue_serial_file).read() == "40\n"  # not newer than the others now
    assert not os.path.exists(paths.queue_serial_file + ".pre-takeover")
    # a serial that moved on since (a new master's replication) stays
    marker = _before_takeover(paths)
    with open(paths.queue_serial_file + ".pre-takeover", "w") as fh:
        fh.write("40\n")
    takeover.raise_queue_serial(paths, 120)
    takeover._restore(paths, marker, lambda line: None)
    assert open(paths.queue_serial_file).read() == "120\n"


def test_a_taker_whose_claim_or_old_master_changed_writes_nothing(paths):
    from test.fakes.fakerpc import FakeRpc
    names = ["node1", "node2", "node3"]
    configfile.write_config_file(paths.config_file, serializer.dumps_bytes(_data()))
    rpc = FakeRpc()
    _claims(rpc, {"node1": {}, "node2": {}, "node3": {}})
    takeover._check_still_ours(rpc, paths, names, "node2", 65538, 0, "node1")   # goes ahead
    # the claim expired meanwhile and another taker holds node1 and node3
    _claims(rpc, {"node1": _rival(65539, "node3"), "node2": {}, "node3": _rival(65539, "node3")})
    takeover.write_marker(paths, takeover.Marker("node2", 65538, "node1"))
    with pytest.raises(takeover.TakeoverRefused, match="only 1 of 3 nodes still hold"):
        takeover._check_still_ours(rpc, paths, names, "node2", 65538, 0, "node1")
    assert takeover.read_marker(paths) is None
    # another taker won and pushed its configuration here during the final vote
    _claims(rpc, {"node1": {}, "node2": {}, "node3": {}})
    winner = vote.Decision(True, "ok", "ok", config_serial=20, epoch=65539)
    takeover.write_takeover_config(paths, _data(), "node3", winner)
    with pytest.raises(takeover.TakeoverRefused, match="names node3 now, not node1"):
        takeover._check_still_ours(rpc, paths, names, "node2", 65538, 0, "node1")


def _timing_runner(seen: dict[str, float], scale: float):
    """A real runner whose transport records each procedure's timeout (and fails it:
    a hung node)."""
    from ganeti.rpc.client import RpcRunner, StaticResolver
    from ganeti.rpc.transport import FunctionTransport

    def post(address, port, procedure, body, timeout):
        seen[procedure.split("?", 1)[0]] = timeout
        raise errors.RpcTransportError("timed out")

    table = {f"node{i}": f"10.0.0.{i}" for i in (1, 2, 3)}
    return RpcRunner(StaticResolver(table, default_port=1811), FunctionTransport(post),
                     timeout_scale=scale)


@pytest.mark.parametrize("scale,expected", [(1.0, takeover.STEP_TIMEOUT),
                                            (0.05, takeover.MIN_STEP_TIMEOUT),
                                            (0.5, 10.0)])
def test_takeover_steps_wait_for_a_node_as_long_as_the_timeout_scale_says(scale, expected):
    # --rpc-timeout-scale: a hung old master costs each step the scaled timeout
    seen: dict[str, float] = {}
    rpc = _timing_runner(seen, scale)
    lines: list[str] = []
    assert not takeover.drain_old_master(rpc, "node1", takeover.DRAIN_SECONDS, lines.append)
    assert not takeover.stop_old_master(rpc, _data(), lines.append)
    assert takeover.push_config(rpc, Paths(root="/nonexistent"), _data(), "node2",
                                lines.append) == ["node1", "node3"]
    assert seen == {name: pytest.approx(expected) for name in
                    ("master_drain", "node_stop_master", "replicate_state",
                     "write_ssconf_files")}
    # the runner's own timeout classes follow the same scale
    assert rpc.timeout_for("version") == pytest.approx(60.0 * scale)


def test_a_taker_whose_claim_came_after_another_takeover_finished_stops_nothing(
        paths, monkeypatch):
    # node3 took over (and released its claims) after node2 read its configuration
    # naming node1 but before node2's claim reached the nodes: node2's claim wins
    # on free nodes, yet it must not stop node1 with its newer epoch (node3's
    # master daemon would then refuse to start: a cluster with no master)
    from test.fakes.fakerpc import FakeRpc
    configfile.write_config_file(paths.config_file, serializer.dumps_bytes(_data()))
    rpc = FakeRpc()
    rpc.fence = takeover._Fence(0, "node2")
    monkeypatch.setattr(takeover, "node_rpc", lambda *a, **k: rpc)
    monkeypatch.setattr(takeover.catchup, "catch_up_jobs", lambda *a, **k: None)
    monkeypatch.setattr(takeover.quorum, "run_vote", lambda *a, **k: vote.Decision(
        True, "ok", "confirmed", queue_serial=6, config_serial=8, epoch=65540))
    rpc.set_handler("master_drain", lambda node, args: {"last_job_id": 6, "flushed": True})

    pushed: list[bool] = []

    def claim(node, args):
        if args[1] and not pushed:
            # the winner's push reaches this node as the claim goes out
            winner = vote.Decision(True, "ok", "ok", config_serial=1006, epoch=65539)
            takeover.write_takeover_config(paths, _data(), "node3", winner)
            pushed.append(True)
        return {}
    rpc.set_handler("master_claim", claim)
    lines: list[str] = []
    with pytest.raises(takeover.TakeoverRefused,
                       match="node3 took over meanwhile .*Nothing was stopped"):
        takeover.take_over(paths, "node2", out=lines.append, sleep=lambda s: None)
    assert rpc.calls_to("node_stop_master") == []
    assert takeover.read_marker(paths) is None
    # the claims were released and the old master's drain ended
    assert [args[1] for _, args in rpc.calls_to("master_claim")] == [131074, 0]
    assert [args[0] for _, args in rpc.calls_to("master_drain")] == [takeover.DRAIN_SECONDS, 0]
    assert takeover.load_local_config(paths).cluster.master_epoch == 65539
