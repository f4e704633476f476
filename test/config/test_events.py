"""ganeti.config.events: instance and node events from configuration writes."""

from __future__ import annotations

import os
from typing import Any

from ganeti import constants, events
from ganeti.config import events as configevents
from ganeti.config import ConfigWriter
from ganeti.config.events import ConfigEventTracker
from ganeti.objects import Instance
from ganeti.pathutils import Paths
from fakes.fakeconfig import make_config, node_name


def _tracked(tmp_path: Any) -> tuple[ConfigWriter, events.EventBus]:
    make_config(tmp_path, nodes=3, candidates=2)
    path = Paths(root=os.path.join(str(tmp_path), "root")).config_file
    hooks: list[Any] = []
    cfg = ConfigWriter(path, on_change=lambda raw, serial: hooks[0](raw, serial))
    bus = events.EventBus(100)
    tracker = ConfigEventTracker(bus, cfg.committed().get_config_data())
    hooks.append(lambda raw, serial: tracker.on_change(cfg.committed().get_config_data()))
    return cfg, bus


def _seen(bus: events.EventBus) -> list[tuple[str, str | None, str | None, dict[str, Any]]]:
    return [(e.type, e.instance, e.node, dict(e.data)) for e in bus.since(0)[1]]


def _add_instance(cfg: ConfigWriter) -> Instance:
    inst = Instance(name="inst1.example.com", primary_node="uuid-node2")
    cfg.add_instance(inst, [])
    return inst


def test_nothing_is_published_for_the_loaded_config_or_unrelated_changes(tmp_path: Any) -> None:
    cfg, bus = _tracked(tmp_path)
    cluster = cfg.get_cluster_info()
    cluster.tags.append("x")
    cfg.update(cluster)
    assert _seen(bus) == []


def test_instance_added_started_stopped_removed(tmp_path: Any) -> None:
    cfg, bus = _tracked(tmp_path)
    inst = _add_instance(cfg)
    cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP)
    cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP)   # no change: no event
    cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_DOWN)
    cfg.remove_instance(inst.uuid)
    seen = _seen(bus)
    assert [(t, i, n) for t, i, n, _ in seen] == [
        (events.EV_INSTANCE_ADDED, "inst1.example.com", node_name(2)),
        (events.EV_INSTANCE_STATE, "inst1.example.com", node_name(2)),
        (events.EV_INSTANCE_STATE, "inst1.example.com", node_name(2)),
        (events.EV_INSTANCE_REMOVED, "inst1.example.com", node_name(2)),
    ]
    assert seen[0][3]["status"] == constants.ADMINST_DOWN
    assert (seen[1][3]["status"], seen[1][3]["previous_status"]) == ("up", "down")
    assert (seen[2][3]["status"], seen[2][3]["previous_status"]) == ("down", "up")


def test_failover_is_an_instance_state_event_with_the_new_primary(tmp_path: Any) -> None:
    cfg, bus = _tracked(tmp_path)
    inst = _add_instance(cfg)
    inst.primary_node = "uuid-node3"
    cfg.update(inst)
    last = _seen(bus)[-1]
    assert last[0] == events.EV_INSTANCE_STATE and last[2] == node_name(3)
    assert last[3]["previous_primary_node"] == node_name(2)


def test_node_role_changes(tmp_path: Any) -> None:
    cfg, bus = _tracked(tmp_path)
    node = cfg.get_node_info("uuid-node3")
    assert node is not None
    node.drained = True
    cfg.update(node)
    node.drained, node.offline = False, True
    cfg.update(node)
    node.offline, node.master_candidate = False, True
    cfg.update(node)
    roles = [(t, n, d["role"], d["previous_role"]) for t, _, n, d in _seen(bus)]
    assert roles == [
        (events.EV_NODE_ROLE, node_name(3), "drained", "regular"),
        (events.EV_NODE_ROLE, node_name(3), "offline", "drained"),
        (events.EV_NODE_ROLE, node_name(3), "master-candidate", "offline"),
    ]


def test_a_batch_reports_the_net_change_once(tmp_path: Any) -> None:
    cfg, bus = _tracked(tmp_path)
    node = cfg.get_node_info("uuid-node3")
    assert node is not None
    with cfg.batch():
        node.drained = True
        cfg.update(node)
        node.drained = False
        node.offline = True
        cfg.update(node)
    assert [(t, d["role"]) for t, _, _, d in _seen(bus)] == [(events.EV_NODE_ROLE, "offline")]


def test_node_removed(tmp_path: Any) -> None:
    cfg, bus = _tracked(tmp_path)
    cfg.remove_node("uuid-node3")
    assert [(t, n) for t, _, n, _ in _seen(bus)] == [(events.EV_NODE_REMOVED, node_name(3))]


def test_only_the_changed_instance_gets_a_new_digest(tmp_path: Any, monkeypatch: Any) -> None:
    cfg, bus = _tracked(tmp_path)
    for i in range(20):
        cfg.add_instance(Instance(name=f"inst{i}.example.com", primary_node="uuid-node2"), [])
    target = cfg.get_instance_info_by_name("inst5.example.com")
    assert target is not None
    made: list[str] = []
    real = configevents._instance_digest

    def counting(inst: Instance, nodes: Any) -> Any:
        made.append(inst.name)
        return real(inst, nodes)
    monkeypatch.setattr(configevents, "_instance_digest", counting)
    cfg.set_instance_admin_state(target.uuid, constants.ADMINST_UP)
    assert made == [target.name]
    last = _seen(bus)[-1]
    assert (last[0], last[1], last[3]["status"]) == (events.EV_INSTANCE_STATE, target.name, "up")


def test_a_renamed_node_redoes_every_digest(tmp_path: Any) -> None:
    cfg, bus = _tracked(tmp_path)
    _add_instance(cfg)
    node = cfg.get_node_info("uuid-node2")
    assert node is not None
    node.name = "renamed.example.com"
    cfg.update(node)
    last = _seen(bus)[-1]
    assert (last[0], last[2], last[3]["previous_primary_node"]) == (
        events.EV_INSTANCE_STATE, "renamed.example.com", node_name(2))
