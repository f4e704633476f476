"""Node LUs (add/readd/remove/modify) and the node query resource, with FakeRpc."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import constants, errors, locking  # noqa: E402
from ganeti.opcodes import group as ogroup  # noqa: E402
from ganeti.opcodes import node as onode  # noqa: E402
from ganeti.cmdlib import query as cq  # noqa: E402
from ganeti.cmdlib.hooksrunner import HooksRunner  # noqa: E402


def _setup(tmp_path, **kw):
    cfg = make_config(tmp_path, **kw)
    rpc = FakeRpc(cfg)
    return cfg, rpc, make_cluster_context(tmp_path, cfg, rpc)


def _file_bytes(cfg) -> bytes:
    return cfg.dump()


def test_node_add_checks_version_adds_locks_and_promotes(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    new = node_name(3)
    run_opcode(ctx, onode.OpNodeAdd(node_name=new, primary_ip="127.0.1.3"))
    node = cfg.get_node_info_by_name(new)
    assert node is not None and node.master_candidate
    assert node.primary_ip == "127.0.1.3" and node.secondary_ip == "127.0.1.3"
    assert rpc.nodes_called("version") == {new}
    assert node.uuid in ctx.glm.names(locking.LEVEL_NODE)
    assert node.uuid in ctx.glm.names(locking.LEVEL_NODE_RES)
    # redistribution went to the new node only: config (candidate), ssconf
    uploads = rpc.calls_to("upload_file")
    assert any(nodes == [new] and args[0] == "/var/lib/ganeti/config.data"
               for nodes, args in uploads)
    assert rpc.nodes_called("write_ssconf_files") == {new}


def test_node_add_respects_pool_size(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2, pool_size=2)
    run_opcode(ctx, onode.OpNodeAdd(node_name=node_name(3), primary_ip="127.0.1.3"))
    node = cfg.get_node_info_by_name(node_name(3))
    assert not node.master_candidate
    assert "/var/lib/ganeti/config.data" not in [a[0] for _, a in rpc.calls_to("upload_file")]


def test_node_add_refuses_wrong_protocol_version_and_changes_nothing(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    before = _file_bytes(cfg)
    rpc.set_result("version", node_name(3), 1234)
    with pytest.raises(errors.OpPrereqError, match="protocol version"):
        run_opcode(ctx, onode.OpNodeAdd(node_name=node_name(3), primary_ip="127.0.1.3"))
    assert _file_bytes(cfg) == before


@pytest.mark.parametrize("kwargs,match", [
    ({"node_name": node_name(2), "primary_ip": "127.0.1.9"}, "already in the configuration"),
    ({"node_name": node_name(3), "primary_ip": "127.0.1.2"}, "already used"),
    ({"node_name": node_name(3), "primary_ip": "127.0.1.3", "readd": True}, "not in the"),
], ids=["exists", "ip-clash", "readd-unknown"])
def test_node_add_prereq_errors(tmp_path, kwargs, match) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    with pytest.raises(errors.OpPrereqError, match=match):
        run_opcode(ctx, onode.OpNodeAdd(**kwargs))


def test_node_readd_keeps_uuid_and_clears_offline(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, offline=(3,), candidates=2)
    uuid = cfg.get_node_info_by_name(node_name(3)).uuid
    run_opcode(ctx, onode.OpNodeAdd(node_name=node_name(3), readd=True))
    node = cfg.get_node_info_by_name(node_name(3))
    assert node.uuid == uuid and not node.offline and node.master_candidate
    assert len(cfg.get_all_nodes_info()) == 3


def test_node_remove_refuses_master(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    with pytest.raises(errors.OpPrereqError, match="master"):
        run_opcode(ctx, onode.OpNodeRemove(node_name=node_name(1)))


def test_node_remove_leaves_cluster_and_refills_pool(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, pool_size=2)
    assert [n.name for n in cfg.get_master_candidates()] == [node_name(1), node_name(2)]
    # the node is told to leave only once it is out of the configuration (and so
    # out of every later replication), with the candidate pool already refilled
    seen = []
    rpc.set_handler("node_leave_cluster", lambda node, args: seen.append(
        (node, cfg.get_node_info_by_name(node), [n.name for n in cfg.get_master_candidates()])))
    run_opcode(ctx, onode.OpNodeRemove(node_name=node_name(2)))
    assert seen == [(node_name(2), None, [node_name(1), node_name(3)])]
    assert cfg.get_node_info_by_name(node_name(2)) is None
    assert rpc.nodes_called("node_leave_cluster") == {node_name(2)}
    assert "uuid-node2" not in ctx.glm.names(locking.LEVEL_NODE)
    assert [n.name for n in cfg.get_master_candidates()] == [node_name(1), node_name(3)]


def test_demoting_candidate_needs_auto_promote(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, pool_size=2)
    before = _file_bytes(cfg)
    with pytest.raises(errors.OpPrereqError, match="auto-promote"):
        run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(2), master_candidate=False))
    assert _file_bytes(cfg) == before
    result, _, _ = run_opcode(ctx, onode.OpNodeSetParams(
        node_name=node_name(2), master_candidate=False, auto_promote=True))
    assert result == [["master_candidate", "False"]]
    assert [n.name for n in cfg.get_master_candidates()] == [node_name(1), node_name(3)]


def test_offline_demotes_and_master_is_protected(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3)
    result, _, _ = run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(3),
                                                           offline=True))
    assert ["offline", "True"] in result
    assert ["master_candidate", "auto-demotion due to offline"] in result
    node = cfg.get_node_info_by_name(node_name(3))
    assert node.offline and not node.master_candidate
    with pytest.raises(errors.OpPrereqError, match="master"):
        run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(1), offline=True))
    with pytest.raises(errors.OpPrereqError, match="more than one state"):
        run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(2), offline=True,
                                                drained=True))


def test_onlining_checks_node_and_promotes(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3, offline=(3,), candidates=2)
    result, _, _ = run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(3),
                                                           offline=False))
    assert ["offline", "False"] in result and ["master_candidate", "auto-promotion"] in result
    assert node_name(3) in rpc.nodes_called("version")


def test_node_query_fields_roles_and_offline_live_data(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=4, candidates=2, offline=(4,))
    node3 = cfg.get_node_info_by_name(node_name(3))
    node3.drained = True
    cfg.update(node3)
    res = cq.run_query(ctx, "node", ["name", "role", "pip", "mtotal", "dfree", "pinst_cnt"],
                       None)
    rows = {row[0][1]: row for row in res["data"]}
    assert [r[1][1] for r in res["data"]] == ["M", "C", "D", "O"]
    assert rows[node_name(1)][3] == [constants.RS_NORMAL, 4096]
    assert rows[node_name(1)][4] == [constants.RS_NORMAL, 8192]
    assert rows[node_name(4)][3] == [constants.RS_OFFLINE, None]
    assert rows[node_name(2)][5] == [constants.RS_NORMAL, 0]
    # one node_info call, never to the offline node
    calls = rpc.calls_to("node_info")
    assert len(calls) == 1 and node_name(4) not in calls[0][0]


def test_node_query_unavailable_and_no_rpc_without_live_fields(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    res = cq.run_query(ctx, "node", ["name", "master_candidate"], None)
    assert res["data"][1] == [[0, node_name(2)], [0, True]]
    assert rpc.calls_to("node_info") == []
    rpc.set_failure("node_info", node_name(2), "connection refused")
    res = cq.run_query(ctx, "node", ["name", "mfree"], ["==", "name", node_name(2)])
    assert res["data"] == [[[0, node_name(2)], [constants.RS_UNAVAIL, None]]]


def test_node_query_unknown_name_is_noent(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    with pytest.raises(errors.OpPrereqError) as info:
        cq.run_query(ctx, "node", ["name"], ["|", ["==", "name", "nosuch.example.com"]])
    assert info.value.ecode == errors.ECODE_NOENT


def test_group_query_and_group_ops(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    run_opcode(ctx, ogroup.OpGroupAdd(group_name="rack2"))
    run_opcode(ctx, ogroup.OpGroupAssignNodes(group_name="rack2", nodes=[node_name(2)]))
    res = cq.run_query(ctx, "group", ["name", "node_cnt", "node_list"], None)
    assert res["data"] == [[[0, "default"], [0, 1], [0, [node_name(1)]]],
                           [[0, "rack2"], [0, 1], [0, [node_name(2)]]]]
    with pytest.raises(errors.OpPrereqError, match="not empty"):
        run_opcode(ctx, ogroup.OpGroupRemove(group_name="rack2"))


def test_pre_hook_failure_aborts_node_modify(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3)
    ctx.hooks_runner = HooksRunner(cfg, rpc)

    def hooks(node, args):
        hpath, phase, env = args
        assert env["GANETI_NODE_NAME"] == node_name(3)
        if phase == "pre" and node == node_name(1):
            return [["10-deny", constants.HKR_FAIL, "not today"]]
        return [["10-deny", constants.HKR_SUCCESS, ""]]

    rpc.set_handler("hooks_runner", hooks)
    before = _file_bytes(cfg)
    with pytest.raises(errors.HooksAbort, match="not today"):
        run_opcode(ctx, onode.OpNodeSetParams(node_name=node_name(3), drained=True))
    assert _file_bytes(cfg) == before
    assert {args[0] for _, args in rpc.calls_to("hooks_runner")} == {"node-modify"}


def test_node_query_ndparams_are_effective_and_custom_separate(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    node2 = cfg.get_node_info_by_name(node_name(2))
    node2.ndparams = {"ssh_port": 2222}
    cfg.update(node2)
    res = cq.run_query(ctx, "node", ["name", "ndparams", "custom_ndparams"], None)
    rows = {row[0][1]: row for row in res["data"]}
    merged1, merged2 = rows[node_name(1)][1][1], rows[node_name(2)][1][1]
    assert merged2["ssh_port"] == 2222 and merged1["ssh_port"] != 2222
    assert set(merged1) == set(merged2) and "spindle_count" in merged1
    assert rows[node_name(2)][2] == [constants.RS_NORMAL, {"ssh_port": 2222}]
    assert rows[node_name(1)][2] == [constants.RS_NORMAL, {}]


def test_node_remove_runs_post_hooks_on_the_node_before_it_leaves(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3)
    ctx.hooks_runner = HooksRunner(cfg, rpc)
    events = []

    def hooks(node, args):
        hpath, phase, env = args
        events.append((phase, node, cfg.get_node_info_by_name(node_name(3)) is not None))
        return [["10-log", constants.HKR_FAIL if node == node_name(3) else
                 constants.HKR_SUCCESS, "oops"]]

    rpc.set_handler("hooks_runner", hooks)
    rpc.set_handler("node_leave_cluster", lambda node, args: events.append(("leave", node)))
    _, warnings, _ = run_opcode(ctx, onode.OpNodeRemove(node_name=node_name(3)))
    assert events == [("pre", node_name(1), True),
                      ("post", node_name(3), True),        # its own, while still a member
                      ("leave", node_name(3)),
                      ("post", node_name(1), False), ("post", node_name(2), False)]
    assert any("10-log failed on node " + node_name(3) in str(w) for w in warnings)


# --- power cycle ------------------------------------------------------------------

def test_powercycle_sends_one_rpc_with_the_default_hypervisor(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=3)
    cluster = cfg.get_cluster_info()
    cluster.hvparams = {constants.HT_FAKE: {"migration_mode": "live"}}
    cfg.update(cluster)
    rpc.set_result("node_powercycle", node_name(2), "Power cycle of node2 scheduled")
    result, _, _ = run_opcode(ctx, onode.OpNodePowercycle(node_name=node_name(2)))
    assert result == "Power cycle of node2 scheduled"
    assert rpc.calls_to("node_powercycle") == [
        ([node_name(2)], [constants.HT_FAKE, {"migration_mode": "live"}])]


def test_powercycle_of_the_master_needs_force(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    with pytest.raises(errors.OpPrereqError, match="is the master and the force"):
        run_opcode(ctx, onode.OpNodePowercycle(node_name=node_name(1)))
    assert rpc.calls_to("node_powercycle") == []
    run_opcode(ctx, onode.OpNodePowercycle(node_name=node_name(1), force=True))
    assert rpc.nodes_called("node_powercycle") == {node_name(1)}


def test_powercycle_reports_a_failing_node(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    rpc.set_failure("node_powercycle", node_name(2), "connection refused")
    with pytest.raises(errors.OpExecError, match="power cycle of .*connection refused"):
        run_opcode(ctx, onode.OpNodePowercycle(node_name=node_name(2)))


def test_powercycle_of_an_unknown_node_is_refused(tmp_path) -> None:
    cfg, rpc, ctx = _setup(tmp_path, nodes=2)
    with pytest.raises(errors.OpPrereqError):
        run_opcode(ctx, onode.OpNodePowercycle(node_name="nosuch.example.com"))
    assert rpc.calls_to("node_powercycle") == []
