"""LUInstanceMigrate: the accept answer reaching the source, and ``--cleanup``."""
# ruff: noqa: F811  (the test functions take the imported fixture env)

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors
from ganeti.cmdlib import instance_migration as im
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
