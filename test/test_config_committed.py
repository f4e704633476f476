"""Readers only ever see committed config (issue 19, item 1): copy on write.

A write of ``config.data`` is held in a ``GatedWriter`` while the test
reads through the public query paths (the master daemon's LUXI dispatcher:
``QueryClusterInfo``, ``QueryConfigValues``, ``QueryTags``, ``Query``):
the change being written is invisible until the file holds it, and a
change whose write fails never appears at all.  An LU's in-place edit of
a working object shows nowhere (not in queries, not in another change's
write) until the LU saves it.
"""

from __future__ import annotations

import random
import threading
import time
from functools import partial
from typing import Any

import pytest

from fakes.clock import FakeClock
from fakes.flakydisk import GatedWriter

from ganeti import constants, errors, luxi, serializer
from ganeti.config import ConfigWriter
from ganeti.config.commit import clone, replaced_keys
from ganeti.context import MasterContext
from ganeti.objects import NIC, Cluster, ConfigData, Disk, Instance, Node, NodeGroup
from ganeti.pathutils import Paths
from ganeti.server.masterd import LuxiDispatcher

pytestmark = pytest.mark.timeout(60)

Clock = partial(FakeClock, 1000.0, tick=1.0)
WAIT = 20.0          # real seconds a gate may stay closed before the test fails


class _Queue:
    """Just enough of a job queue for the LUXI dispatcher's config queries."""

    def is_drained(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _initial() -> ConfigData:
    cluster = Cluster(cluster_name="cluster.example.com", uuid="cluster-uuid",
                      master_node="n1", master_ip="127.0.0.254", master_netdev="lo",
                      enabled_hypervisors=[constants.HT_FAKE], candidate_pool_size=10)
    group = NodeGroup(name="default", uuid="g1")
    n1 = Node(name="node1.example.com", uuid="n1", primary_ip="127.0.1.1", group="g1",
              master_candidate=True)
    n2 = Node(name="node2.example.com", uuid="n2", primary_ip="127.0.1.2", group="g1")
    return ConfigData(cluster=cluster, nodes={"n1": n1, "n2": n2}, nodegroups={"g1": group})


@pytest.fixture
def disk() -> GatedWriter:
    return GatedWriter(timeout=WAIT)


@pytest.fixture
def cfg(tmp_path, disk) -> ConfigWriter:
    return ConfigWriter.initialize(str(tmp_path / "config.data"), _initial(), clock=Clock(),
                                   rng=random.Random(5), write_fn=disk)


@pytest.fixture
def luxi_call(tmp_path, cfg):
    context = MasterContext(paths=Paths(root=str(tmp_path / "root")), cfg=cfg)
    context.jqueue = _Queue()   # type: ignore[assignment]
    dispatcher = LuxiDispatcher(context)

    def call(method: str, *args: Any) -> Any:
        reply = dispatcher.handle(luxi.encode_request(method, list(args))[:-1])
        return luxi.parse_response(reply[:-1])      # without the ETX
    return call


def _cluster_tags_seen(call) -> dict[str, list[str]]:
    """The cluster's tags through every public read path."""
    (row,) = call("Query", constants.QR_CLUSTER, ["tags"], None)["data"]
    return {"QueryClusterInfo": call("QueryClusterInfo")["tags"],
            "QueryConfigValues": call("QueryConfigValues", ["cluster_tags"])[0],
            "QueryTags": call("QueryTags", constants.TAG_CLUSTER, ""),
            "Query": row[0][1]}


def _node_tags_seen(call, name: str) -> dict[str, list[str]]:
    (row,) = call("Query", constants.QR_NODE, ["tags"], ["=", "name", name])["data"]
    return {"QueryTags": call("QueryTags", constants.TAG_NODE, name), "Query": row[0][1]}


def _everywhere(tags: list[str], seen: dict[str, list[str]]) -> bool:
    return all(value == tags for value in seen.values())


def _in_thread(fn) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # reported to the test
            failures.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, failures


def _file(cfg: ConfigWriter) -> bytes:
    with open(cfg._path, "rb") as fh:
        return fh.read()


def test_a_change_is_invisible_while_its_write_is_in_progress(cfg, disk, luxi_call) -> None:
    serial = cfg.get_serial_no()
    disk.arm()
    cluster = cfg.get_cluster_info()
    cluster.tags.append("pending")
    thread, failures = _in_thread(lambda: cfg.update(cluster))
    disk.wait_held(1)
    # the writer's working tree has the change; no reader sees it
    assert cfg.get_serial_no() == serial + 1
    assert _everywhere([], _cluster_tags_seen(luxi_call))
    assert cfg.committed().get_serial_no() == serial
    disk.open()
    thread.join(WAIT)
    assert not failures
    assert _everywhere(["pending"], _cluster_tags_seen(luxi_call))
    assert cfg.committed().get_serial_no() == serial + 1


def test_a_change_whose_write_fails_never_appears(cfg, disk, luxi_call) -> None:
    before, serial = _file(cfg), cfg.get_serial_no()
    disk.arm(fail=True)
    node = cfg.get_node_info("n2")
    node.tags.append("doomed")
    thread, failures = _in_thread(lambda: cfg.update(node))
    disk.wait_held(1)
    assert _everywhere([], _node_tags_seen(luxi_call, "node2.example.com"))
    disk.open()
    thread.join(WAIT)
    assert len(failures) == 1 and isinstance(failures[0], errors.ConfigurationError)
    assert "No space left on device" in str(failures[0])
    assert _everywhere([], _node_tags_seen(luxi_call, "node2.example.com"))
    assert node.tags == [] and cfg.committed().get_serial_no() == serial
    assert _file(cfg) == before


def test_readers_keep_one_serial_for_a_whole_answer_while_changes_land(cfg, disk) -> None:
    """A reader taken before a write keeps answering from its tree."""
    view = cfg.committed()
    cfg.add_node(Node(name="node3.example.com", primary_ip="127.0.1.3"))
    assert [n.name for n in view.get_all_nodes_info().values()] == [
        "node1.example.com", "node2.example.com"]
    assert view.get_nodegroup("g1").members == ["n1", "n2"]
    now = cfg.committed()
    assert now.get_node_info_by_name("node3.example.com") is not None
    assert len(now.get_nodegroup("g1").members) == 3


def test_an_unsaved_in_place_edit_is_invisible_and_not_written_by_others(
        cfg, luxi_call) -> None:
    n2 = cfg.get_node_info("n2")
    n2.tags.append("unsaved")        # an LU's edit, update() not called (yet)
    assert _everywhere([], _node_tags_seen(luxi_call, "node2.example.com"))
    cluster = cfg.get_cluster_info()
    cluster.tags.append("saved")     # another LU's change, saved
    cfg.update(cluster)
    assert _everywhere(["saved"], _cluster_tags_seen(luxi_call))
    assert _everywhere([], _node_tags_seen(luxi_call, "node2.example.com"))
    assert ConfigWriter(cfg._path).get_node_info("n2").tags == []
    cfg.update(n2)                   # now its owner saves it
    assert _everywhere(["unsaved"], _node_tags_seen(luxi_call, "node2.example.com"))


def test_the_committed_tree_is_the_file_and_shares_only_unchanged_objects(cfg, disk) -> None:
    inst = Instance(name="inst1.example.com", primary_node="n1", os="debootstrap",
                    disk_template=constants.DT_PLAIN, nics=[NIC(mac=cfg.generate_mac())])
    cfg.add_instance(inst, [Disk(dev_type=constants.DT_PLAIN, size=1024, nodes=["n1"],
                                 iv_name="disk/0")])
    first = cfg.committed().get_config_data()
    cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP)
    with cfg.batch():
        cfg.add_nodegroup(NodeGroup(name="other"))
        cfg.remove_node("n2")
    disk.arm(fail=True)
    disk.open()
    with pytest.raises(errors.ConfigurationError):
        cfg.rename_instance(inst.uuid, "renamed.example.com")
    second = cfg.committed().get_config_data()
    assert serializer.dumps_bytes(second) == _file(cfg)
    assert second.instances[inst.uuid].name == "inst1.example.com"
    assert second.instances[inst.uuid].admin_state == constants.ADMINST_UP
    assert "n2" not in second.nodes and second.nodegroups["g1"].members == ["n1"]
    # copy on write: unchanged objects are shared between committed trees,
    # changed ones are new; none is the writer's working object
    assert second.nodes["n1"] is first.nodes["n1"]
    assert second.disks == first.disks and second.disks is first.disks
    assert second.instances[inst.uuid] is not first.instances[inst.uuid]
    working = cfg.get_config_data()
    assert all(second.nodes[u] is not working.nodes[u] for u in second.nodes)
    assert second.cluster is not working.cluster


def test_grouped_writes_publish_each_serial_only_once_durable(cfg, disk) -> None:
    """Two changes in one group commit: readers jump from before both to after both."""
    serial = cfg.get_serial_no()
    disk.arm()
    cluster = cfg.get_cluster_info()
    cluster.tags.append("first")
    first, failures = _in_thread(lambda: cfg.update(cluster))
    disk.wait_held(1)
    n2 = cfg.get_node_info("n2")
    n2.tags.append("second")
    second, more = _in_thread(lambda: cfg.update(n2))
    deadline = time.monotonic() + WAIT
    while cfg.get_serial_no() < serial + 2:        # the second change is queued
        assert time.monotonic() < deadline
        time.sleep(0.01)
    view = cfg.committed()
    assert view.get_serial_no() == serial and view.get_cluster_info().tags == []
    assert view.get_node_info("n2").tags == []
    disk.open()
    first.join(WAIT)
    second.join(WAIT)
    assert not failures and not more
    view = cfg.committed()
    assert view.get_serial_no() == serial + 2
    assert view.get_cluster_info().tags == ["first"] and view.get_node_info("n2").tags == ["second"]


def test_clone_copies_every_container_and_shares_only_immutable_values() -> None:
    inst = Instance(name="inst1.example.com", uuid="i1", primary_node="n1", os="debootstrap",
                    nics=[NIC(uuid="nic1", mac="aa:00:00:00:00:01", nicparams={"mode": "bridged"})],
                    disks=["d1"], beparams={"maxmem": 128}, tags=["web"])
    copied = clone(inst)
    assert copied == inst and copied is not inst
    assert serializer.dumps_bytes(copied) == serializer.dumps_bytes(inst)
    for field in ("nics", "disks", "beparams", "tags", "hvparams"):
        assert getattr(copied, field) is not getattr(inst, field)
    assert copied.nics[0] is not inst.nics[0]
    assert copied.nics[0].nicparams is not inst.nics[0].nicparams
    assert copied.name is inst.name                      # strings are shared, not copied
    copied.nics[0].nicparams["mode"] = "routed"
    copied.tags.append("changed")
    assert inst.nics[0].nicparams == {"mode": "bridged"} and inst.tags == ["web"]


def test_replaced_keys_names_the_entries_that_are_other_objects() -> None:
    a, b, c = Instance(name="a"), Instance(name="b"), Instance(name="c")
    old = {"a": a, "b": b, "c": c}
    assert replaced_keys(old, old) == []
    assert replaced_keys(old, dict(old)) == []
    assert replaced_keys(old, {"a": a, "b": clone(b), "c": clone(c)}) == ["b", "c"]


@pytest.mark.parametrize("new", [
    pytest.param(lambda a, b: {"a": a}, id="removed"),
    pytest.param(lambda a, b: {"a": a, "b": b, "x": Instance(name="x")}, id="added"),
    pytest.param(lambda a, b: {"b": b, "a": a}, id="reordered"),
])
def test_replaced_keys_gives_up_when_the_keys_differ(new: Any) -> None:
    a, b = Instance(name="a"), Instance(name="b")
    assert replaced_keys({"a": a, "b": b}, new(a, b)) is None
