"""The instance query fields ha_state, ha_policy and ha_last_repair (doc/ha.md)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config  # noqa: E402

from ganeti import constants  # noqa: E402
from ganeti.cmdlib import query as cq  # noqa: E402
from ganeti.objects import Instance  # noqa: E402

P = "ganeti:watcher:autorepair:"


def _add(cfg, name: str, tags: list[str]) -> None:  # type: ignore[no-untyped-def]
    cfg.add_instance(Instance(name=name, primary_node="uuid-node2", os="tinyos",
                              disk_template=constants.DT_DISKLESS, tags=tags), [])


def test_policy_from_instance_group_and_cluster_tags(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = make_config(tmp_path)
    ctx = make_cluster_context(tmp_path, cfg, FakeRpc(cfg))
    _add(cfg, "plain.example.com", [])
    _add(cfg, "own.example.com", [P + "failover", P + "result:failover:u1:1700000000:success:5"])
    _add(cfg, "held.example.com", [P + "suspend:"])
    fields = ["name", "ha_state", "ha_policy", "ha_last_repair"]
    rows = {r[0][1]: [c[1] for c in r[1:]]
            for r in cq.run_query(ctx, "instance", fields, None)["data"]}
    assert rows["plain.example.com"] == ["disabled", "disabled", None]
    assert rows["own.example.com"] == [
        "failover (instance); last: failover success at 1700000000, jobs 5",
        "failover (instance)", "failover success at 1700000000, jobs 5"]
    assert rows["held.example.com"][1] == "suspended (instance)"

    group = cfg.get_nodegroup(cfg.get_node_info("uuid-node2").group)
    group.tags = [P + "migrate"]
    cfg.update(group)
    cluster = cfg.get_cluster_info()
    cluster.tags = [P + "reinstall"]
    cfg.update(cluster)
    rows = {r[0][1]: r[1][1]
            for r in cq.run_query(ctx, "instance", ["name", "ha_policy"], None)["data"]}
    assert rows == {"plain.example.com": "migrate (group)", "own.example.com": "failover (instance)",
                    "held.example.com": "suspended (instance)"}


def test_fields_are_ours_answered_when_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    names = ["ha_state", "ha_policy", "ha_last_repair"]
    fields = cq.run_query_fields("instance", names)["fields"]
    assert [(f["name"], f["kind"]) for f in fields] == [(n, "text") for n in names]
    listed = {f["name"] for f in cq.run_query_fields("instance", None)["fields"]}
    assert not listed & set(names)


def test_ha_state_shows_the_recovery_counts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What the query (so gnt-instance list and RAPI's /2/query/instance) answers."""
    cfg = make_config(tmp_path)
    ctx = make_cluster_context(tmp_path, cfg, FakeRpc(cfg))
    _add(cfg, "moved.example.com", [P + "failover", "ganeti:ha:relocations:1"])
    _add(cfg, "failing.example.com", [P + "failover", "ganeti:ha:failures:2"])
    _add(cfg, "fresh.example.com", [P + "failover"])
    rows = {r[0][1]: r[1][1]
            for r in cq.run_query(ctx, "instance", ["name", "ha_state"], None)["data"]}
    assert rows == {
        "moved.example.com": "failover (instance); relocated 1 time(s) by recovery,"
                             " 0 failed job(s)",
        "failing.example.com": "failover (instance); relocated 0 time(s) by recovery,"
                               " 2 failed job(s)",
        "fresh.example.com": "failover (instance)"}
