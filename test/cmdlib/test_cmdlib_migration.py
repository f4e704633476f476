"""LUInstanceMigrate: the accept answer reaching the source, and ``--cleanup``."""
# ruff: noqa: F811  (the test functions take the imported fixture env)

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors
from ganeti.cmdlib import instance_migration as im
from ganeti.cmdlib import migration_plan as mp
from test.cmdlib.test_cmdlib_instance import _create, _query, env  # noqa: F401  (env: a fixture)


@pytest.mark.parametrize("src,dst,plan", [
    ("running", None, im.CLEANUP_NOTHING),
    ("running", "incoming", im.CLEANUP_SOURCE),        # target killed or left over
    ("running", "crashed", im.CLEANUP_SOURCE),
    ("paused", None, im.CLEANUP_SOURCE),               # non-live, stopped before the copy
    ("paused", "incoming", im.CLEANUP_SOURCE),
    ("migrating", "incoming", im.CLEANUP_SOURCE),      # sent, target never finished loading
    ("migrating", "crashed", im.CLEANUP_SOURCE),
    ("migrating", "paused", im.CLEANUP_TARGET),        # arrived, only the cont missing
    (None, "paused", im.CLEANUP_TARGET),
    (None, "running", im.CLEANUP_TARGET),              # config not switched yet
    ("crashed", "running", im.CLEANUP_TARGET),
    ("paused", "running", im.CLEANUP_TARGET),
    ("running", "running", im.CLEANUP_CONFLICT),
    (None, "incoming", im.CLEANUP_LEFTOVER),
    ("crashed", "incoming", im.CLEANUP_LEFTOVER),
    (None, None, im.CLEANUP_NOTHING),
    ("shutdown", None, im.CLEANUP_NOTHING),
], ids=lambda v: str(v))
def test_cleanup_plan(src, dst, plan):
    assert im.cleanup_plan(src, dst) == plan


def _state(env: Any, node: str, hv_state: str | None) -> None:
    if hv_state is None:
        env.rpc.running[node].pop("shared", None)
    else:
        env.rpc.running[node]["shared"] = {"memory": 128, "vcpus": 1, "state": 0, "time": 1,
                                           "hv_state": hv_state}


def _finalize_calls(env: Any) -> list[tuple[str, str]]:
    return [c for c in env.rpc.calls if c[0].startswith("instance_finalize_migration")]


def test_accept_answer_goes_to_the_source(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    seen: list[dict] = []
    env.rpc.do_accept_instance = lambda node, inst, info, target: {"port": 8105}
    real = env.rpc.do_instance_migrate

    def migrate(node, inst, tnode, taddr, live, target_info):
        seen.append(target_info)
        return real(node, inst, tnode, taddr, live, target_info)
    env.rpc.do_instance_migrate = migrate
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2")
    assert seen == [{"port": 8105}]
    assert _query(env, ["pnode", "status"]) == [["node2", "running"]]


def test_cleanup_resumes_a_paused_source_and_kills_the_incoming(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    _state(env, "node1", "paused")
    _state(env, "node2", "incoming")
    env.rpc.calls.clear()
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2", cleanup=True)
    assert _finalize_calls(env) == [("instance_finalize_migration_dst", "node2"),
                                    ("instance_finalize_migration_src", "node1")]
    assert _query(env, ["pnode"]) == [["node1"]]


def test_cleanup_finishes_a_migration_that_arrived(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    _state(env, "node1", "migrating")
    _state(env, "node2", "paused")
    got: list[tuple[str, bool]] = []
    env.rpc.do_instance_finalize_migration_dst = \
        lambda node, inst, info, success: got.append((node, success))
    env.rpc.do_instance_finalize_migration_src = \
        lambda node, inst, success, live: got.append((node, success))
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2", cleanup=True)
    assert got == [("node2", True), ("node1", True)]
    assert _query(env, ["pnode"]) == [["node2"]]


def test_cleanup_of_a_running_source_without_leftover_does_nothing(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    env.rpc.calls.clear()
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2", cleanup=True)
    assert _finalize_calls(env) == []
    assert _query(env, ["pnode"]) == [["node1"]]


def test_cleanup_refuses_an_instance_running_twice(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    _state(env, "node2", "running")
    with pytest.raises(errors.OpExecError, match="runs on both node1 and node2"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2",
                cleanup=True)
    assert _query(env, ["pnode"]) == [["node1"]]


def test_cleanup_survives_a_leftover_that_vanished(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    _state(env, "node2", "incoming")
    env.rpc.fail["instance_finalize_migration_dst"] = "no such instance"
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2", cleanup=True)
    assert _query(env, ["pnode", "status"]) == [["node1", "running"]]


@pytest.mark.parametrize("states,unanswered,local,target", [
    ({"node2": None, "node3": "incoming"}, [], False, "node3"),
    ({"node2": None, "node3": "running"}, [], False, "node3"),
    ({"node2": "crashed", "node3": None}, [], False, "node2"),
    ({"node2": None, "node3": "paused"}, ["node4"], False, "node3"),    # found: no doubt
    ({"node2": None, "node3": None}, [], False, None),                # only the primary
    ({}, [], False, None),                                            # one-node cluster
    ({"node2": None, "node3": "running"}, [], True, "node3"),
], ids=lambda v: str(v))
def test_cleanup_target(states, unanswered, local, target):
    assert mp.cleanup_target("i1", states, unanswered, local) == target


@pytest.mark.parametrize("states,unanswered,local,match", [
    ({"node2": "incoming", "node3": "running"}, [], False,
     r"several nodes besides its primary: node2 \(incoming\), node3 \(running\); give"
     r" the node its migration was going to with -n"),
    ({"node2": None}, ["node3"], False, "node3 did not answer and may run it; give the node"),
    ({"node2": None, "node3": None}, [], True, "disks are local.*give that node with -n"),
], ids=["several", "unanswered", "local-disks"])
def test_cleanup_target_refuses_what_it_cannot_tell(states, unanswered, local, match):
    with pytest.raises(errors.OpPrereqError, match=match):
        mp.cleanup_target("i1", states, unanswered, local)


def _info_calls(env: Any) -> list[str]:
    return sorted(node for proc, node in env.rpc.calls if proc == "instance_info")


def test_cleanup_without_a_target_finds_where_the_migration_went(env: Any) -> None:
    """The migration went to node3 (the guest runs there, the config not switched): the
    cleanup without -n asks every node and finishes it there, not on node2 (the first
    other node, where nothing is)."""
    _create(env, name="shared", template="sharedfile")
    _state(env, "node1", "migrating")
    _state(env, "node3", "running")
    env.rpc.calls.clear()
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", cleanup=True)
    assert _finalize_calls(env) == [("instance_finalize_migration_src", "node1")]
    assert _query(env, ["pnode"]) == [["node3"]]
    assert "node2" in _info_calls(env)


def test_cleanup_without_a_target_removes_the_leftover_where_it_is(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    _state(env, "node1", "paused")
    _state(env, "node3", "incoming")
    env.rpc.calls.clear()
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", cleanup=True)
    assert _finalize_calls(env) == [("instance_finalize_migration_dst", "node3"),
                                    ("instance_finalize_migration_src", "node1")]
    assert _query(env, ["pnode"]) == [["node1"]]


@pytest.mark.parametrize("src,finalized", [
    ("running", []),                                            # nothing to do
    ("paused", [("instance_finalize_migration_src", "node1")]),  # resumed
    ("migrating", [("instance_finalize_migration_src", "node1")]),
])
def test_cleanup_without_a_target_and_nothing_elsewhere(env: Any, src: str,
                                                        finalized: list) -> None:
    _create(env, name="shared", template="sharedfile")
    _state(env, "node1", src)
    env.rpc.calls.clear()
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", cleanup=True)
    assert _finalize_calls(env) == finalized
    assert _info_calls(env) == ["node1", "node2", "node3"]
    assert _query(env, ["pnode"]) == [["node1"]]


def _unreachable(env: Any, node: str) -> None:
    real = env.rpc.do_instance_info

    def info(n: str, *args: Any) -> Any:
        if n == node:
            raise errors.OpExecError(f"Error 7: could not connect to {n}")
        return real(n, *args)
    env.rpc.do_instance_info = info


def test_cleanup_without_a_target_refuses_when_a_node_does_not_answer(env: Any) -> None:
    """node2 may run the guest: resuming the paused source would run it twice."""
    _create(env, name="shared", template="sharedfile")
    _state(env, "node1", "paused")
    _unreachable(env, "node2")
    env.rpc.calls.clear()
    with pytest.raises(errors.OpPrereqError, match="node2 did not answer"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="shared", cleanup=True)
    assert _finalize_calls(env) == []
    assert env.rpc.running["node1"]["shared"]["hv_state"] == "paused"


def test_cleanup_without_a_target_uses_the_node_found_despite_a_silent_one(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    _state(env, "node1", "migrating")
    _state(env, "node3", "paused")
    _unreachable(env, "node2")
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", cleanup=True)
    assert _query(env, ["pnode"]) == [["node3"]]


def test_cleanup_without_a_target_refuses_two_candidates(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    _state(env, "node1", "migrating")
    _state(env, "node2", "incoming")
    _state(env, "node3", "paused")
    env.rpc.calls.clear()
    with pytest.raises(errors.OpPrereqError, match="node2 \\(incoming\\), node3 \\(paused\\)"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="shared", cleanup=True)
    assert _finalize_calls(env) == []
    assert _query(env, ["pnode"]) == [["node1"]]
    # with -n the operator settles it
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node3", cleanup=True)
    assert _query(env, ["pnode"]) == [["node3"]]


def test_cleanup_without_a_target_skips_offline_nodes(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    node = env.cfg.get_node_info("uuid-node2")
    node.offline = True
    env.cfg.update(node)
    env.rpc.calls.clear()
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", cleanup=True)
    assert _info_calls(env) == ["node1", "node3"]


def test_cleanup_of_local_disks_without_a_target_asks_for_it(env: Any) -> None:
    """A ``file`` instance: an interrupted --with-disks copy's files are found only on
    the node it was going to, so with no guest elsewhere the cleanup wants -n."""
    _create(env, name="local", template="file")
    env.rpc.calls.clear()
    with pytest.raises(errors.OpPrereqError, match="give that node with -n"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="local", cleanup=True)
    assert _finalize_calls(env) == []


def test_cleanup_refuses_the_primary_as_target(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    env.rpc.calls.clear()
    with pytest.raises(errors.OpPrereqError, match="node1 is the primary node of instance"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node1",
                cleanup=True)
    assert _finalize_calls(env) == []


@pytest.mark.parametrize("status,line", [
    ({"status": "completed", "ram": {"transferred": 262144000}, "total_time_ms": 3120,
      "downtime_ms": 4}, "250.0 MiB in 3.12 s, downtime 4 ms"),
    ({"status": "completed", "ram": {"transferred": 262144000}, "total_time_ms": 3120,
      "downtime_ms": 4, "paused_copy": True},
     "250.0 MiB in 3.12 s, the guest was paused for the whole copy (TCG: no live copy,"
     " doc/kvm.md)"),
    ({"status": "completed", "total_time_ms": 500}, "in 0.50 s"),
    ({"status": "completed", "transferred_ram": 128, "total_ram": 128}, ""),   # the fake's
], ids=["kvm", "tcg-live", "time-only", "fake"])
def test_migration_summary(status, line):
    assert im.migration_summary(status) == line


@pytest.mark.parametrize("hvp,params,live", [
    ({}, {}, True),
    ({"migration_mode": "non-live"}, {}, False),
    ({"migration_mode": "non-live"}, {"mode": "live"}, True),
    ({}, {"live": False}, False),
], ids=["default", "hvparam", "mode-overrides", "live-flag"])
def test_migration_mode(env: Any, hvp: dict, params: dict, live: bool) -> None:
    _create(env, name="shared", template="sharedfile", hvparams=hvp)
    seen: list[bool] = []
    real = env.rpc.do_instance_migrate

    def migrate(node, inst, tnode, taddr, is_live, target_info):
        seen.append(is_live)
        return real(node, inst, tnode, taddr, is_live, target_info)
    env.rpc.do_instance_migrate = migrate
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2", **params)
    assert seen == [live]


def test_failed_migration_finalizes_both_sides_and_releases_the_target_disks(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    env.rpc.do_instance_migrate = lambda *a: None
    env.rpc.do_instance_get_migration_status = \
        lambda node, inst: {"status": "failed", "info": "Connection reset by peer"}
    env.rpc.calls.clear()
    with pytest.raises(errors.OpExecError, match="failed: Connection reset by peer"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2")
    assert _finalize_calls(env) == [("instance_finalize_migration_dst", "node2"),
                                    ("instance_finalize_migration_src", "node1")]
    assert ("blockdev_shutdown", "node2") in env.rpc.calls
    assert _query(env, ["pnode", "status"]) == [["node1", "running"]]
