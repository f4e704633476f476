"""changed_keys, and the config event tracker's cost per create (issue 33, point 5)."""

from __future__ import annotations

import os
from typing import Any

from ganeti import events
from ganeti.config import ConfigWriter
from ganeti.config import events as configevents
from ganeti.config.commit import changed_keys
from ganeti.config.events import ConfigEventTracker
from ganeti.objects import Instance
from ganeti.pathutils import Paths
from fakes.fakeconfig import make_config


class Obj:
    """A stand-in for a published config object (compared by identity)."""


def test_changed_keys_of_the_same_or_an_equal_store() -> None:
    a, b = Obj(), Obj()
    old = {"a": a, "b": b}
    assert changed_keys(old, old) == ([], [])
    assert changed_keys(old, dict(old)) == ([], [])
    assert changed_keys(old, {"a": a, "b": Obj()}) == (["b"], [])


def test_changed_keys_of_a_grown_store_names_the_new_and_the_replaced_entries() -> None:
    a, b = Obj(), Obj()
    old = {"a": a, "b": b}
    assert changed_keys(old, {"a": a, "b": b, "c": Obj(), "d": Obj()}) == (["c", "d"], [])
    assert changed_keys(old, {"a": Obj(), "b": b, "c": Obj()}) == (["a", "c"], [])
    assert changed_keys({}, {"a": a}) == (["a"], [])


def test_changed_keys_with_removed_or_reordered_entries() -> None:
    a, b, c = Obj(), Obj(), Obj()
    old = {"a": a, "b": b, "c": c}
    assert changed_keys(old, {"a": a, "c": c}) == ([], ["b"])
    assert changed_keys(old, {"c": Obj(), "a": a}) == (["c"], ["b"])
    assert changed_keys(old, {"b": b, "a": a, "d": Obj()}) == (["d"], ["c"])
    assert changed_keys(old, {}) == ([], ["a", "b", "c"])


def test_a_create_digests_the_new_instance_only(tmp_path: Any, monkeypatch) -> None:
    make_config(tmp_path, nodes=3, candidates=2)
    path = Paths(root=os.path.join(str(tmp_path), "root")).config_file
    hooks: list[Any] = []
    cfg = ConfigWriter(path, on_change=lambda raw, serial: hooks[0]())
    hooks.append(lambda: None)
    for i in range(20):
        cfg.add_instance(Instance(name=f"inst{i}.example.com", primary_node="uuid-node2"), [])
    bus = events.EventBus(100)
    tracker = ConfigEventTracker(bus, cfg.committed().get_config_data())
    hooks[0] = lambda: tracker.on_change(cfg.committed().get_config_data())
    digested: list[str] = []
    real = configevents._instance_digest

    def counting(inst: Instance, nodes: Any) -> Any:
        digested.append(inst.name)
        return real(inst, nodes)

    monkeypatch.setattr(configevents, "_instance_digest", counting)
    new = Instance(name="new.example.com", primary_node="uuid-node3")
    cfg.add_instance(new, [])
    cfg.remove_instance(cfg.get_instance_info_by_name("inst3.example.com").uuid)
    assert digested == ["new.example.com"]
    assert [(e.type, e.instance) for e in bus.since(0)[1]] == [
        (events.EV_INSTANCE_ADDED, "new.example.com"),
        (events.EV_INSTANCE_REMOVED, "inst3.example.com")]


def test_is_mac_in_use_follows_adds_and_removals(tmp_path: Any) -> None:
    from ganeti.objects import NIC
    cfg = make_config(tmp_path, nodes=2)
    assert not cfg.is_mac_in_use("aa:00:00:00:00:01")
    inst = Instance(name="inst.example.com", primary_node="uuid-node2",
                    nics=[NIC(mac="aa:00:00:00:00:01")])
    cfg.add_instance(inst, [])
    assert cfg.is_mac_in_use("AA:00:00:00:00:01")
    assert not cfg.committed().is_mac_in_use("aa:00:00:00:00:02")
    assert cfg.committed().is_mac_in_use("aa:00:00:00:00:01")
    cfg.remove_instance(inst.uuid)
    assert not cfg.is_mac_in_use("aa:00:00:00:00:01")
