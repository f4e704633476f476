"""ConfigWriter on a full disk (issue 19, item 1): memory never moves past the file.

A write that fails (ENOSPC from :class:`fakes.flakydisk.FlakyDisk`) undoes
the change in memory, fails the caller with an error naming the cause
(logged at CRITICAL), leaves the old ``config.data`` as it was, pushes
nothing to the candidates, and the next change works once there is room.
"""

from __future__ import annotations

import logging
import os
import random
import time
from functools import partial

import pytest

from fakes import FakeRpc, make_config
from fakes.clock import FakeClock
from fakes.fakeconfig import node_name
from fakes.flakydisk import FlakyDisk

from ganeti.utils.payload import decode_payload
from ganeti import constants, errors, serializer
from ganeti.config import ConfigWriter
from ganeti.objects import NIC, Cluster, ConfigData, Disk, Instance, Node, NodeGroup
from ganeti.pathutils import Paths
from ganeti.replication import Replicator

pytestmark = pytest.mark.timeout(60)

Clock = partial(FakeClock, 1000.0, tick=1.0)


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
def disk() -> FlakyDisk:
    return FlakyDisk()


@pytest.fixture
def cfg(tmp_path, disk) -> ConfigWriter:
    return disk.writer(str(tmp_path / "config.data"), _initial(), clock=Clock(),
                       rng=random.Random(3))


def _file(cfg: ConfigWriter) -> bytes:
    with open(cfg._path, "rb") as fh:
        return fh.read()


def _instance(cfg: ConfigWriter, name: str) -> tuple[Instance, list[Disk]]:
    inst = Instance(name=name, primary_node="n1", os="debootstrap",
                    disk_template=constants.DT_PLAIN, nics=[NIC(mac=cfg.generate_mac())])
    return inst, [Disk(dev_type=constants.DT_PLAIN, size=1024, nodes=["n1"], iv_name="disk/0")]


def test_failed_update_is_undone_in_place_and_the_next_change_works(cfg, disk, caplog) -> None:
    before, serial = _file(cfg), cfg.get_serial_no()
    cluster = cfg.get_cluster_info()
    disk.full = True
    cluster.candidate_pool_size = 3
    with caplog.at_level(logging.CRITICAL, logger="ganeti.config"):
        with pytest.raises(errors.ConfigurationError, match="No space left on device") as err:
            cfg.update(cluster)
    assert "not saved" in str(err.value) and cfg._path in str(err.value)
    assert [r for r in caplog.records if r.levelno == logging.CRITICAL
            and "No space left" in r.getMessage()]
    # memory is back at the disk, in the same (live) object; the file is untouched
    assert cfg.get_cluster_info() is cluster and cluster.candidate_pool_size == 10
    assert cfg.get_serial_no() == serial
    assert _file(cfg) == before and cfg.dump() == before
    assert os.listdir(os.path.dirname(cfg._path)) == ["config.data"]   # no temporary left
    # room again: the same change simply works, no restart
    disk.full = False
    cluster.candidate_pool_size = 3
    cfg.update(cluster)
    assert cfg.get_serial_no() == serial + 1 == cfg.last_saved_serial()
    assert ConfigWriter(cfg._path).get_cluster_info().candidate_pool_size == 3
    assert cfg.dump() == _file(cfg)


def test_failed_add_instance_leaves_no_trace(cfg, disk) -> None:
    before = _file(cfg)
    disk.full = True
    inst, disks = _instance(cfg, "inst1.example.com")
    with pytest.raises(errors.ConfigurationError, match="No space left"):
        cfg.add_instance(inst, disks)
    assert cfg.get_instance_info_by_name("inst1.example.com") is None
    assert cfg.get_config_data().instances == {} and cfg.get_config_data().disks == {}
    assert inst.nics[0].mac not in cfg._all_macs()
    assert cfg.verify_config() == []
    assert cfg.dump() == _file(cfg) == before
    disk.full = False
    inst, disks = _instance(cfg, "inst1.example.com")   # a new job builds new objects
    cfg.add_instance(inst, disks)
    again = ConfigWriter(cfg._path)
    assert again.get_instance_info_by_name("inst1.example.com").uuid == inst.uuid
    assert again.dump() == cfg.dump()


def test_failed_removal_brings_the_object_back(cfg, disk) -> None:
    inst, disks = _instance(cfg, "inst1.example.com")
    cfg.add_instance(inst, disks)
    before = _file(cfg)
    disk.full = True
    with pytest.raises(errors.ConfigurationError):
        cfg.remove_instance(inst.uuid)
    with pytest.raises(errors.ConfigurationError):
        cfg.remove_node("n2")
    with pytest.raises(errors.ConfigurationError):
        cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP)
    back = cfg.get_instance_info(inst.uuid)     # a removed object comes back from the file
    assert back == inst and back.admin_state != constants.ADMINST_UP
    assert cfg.get_instance_disks(inst.uuid) == disks
    assert cfg.get_node_info_by_name("node2.example.com") is not None
    assert cfg.get_nodegroup("g1").members == ["n1", "n2"]
    assert cfg.dump() == _file(cfg) == before
    disk.full = False
    cfg.remove_node("n2")
    assert ConfigWriter(cfg._path).get_node_info("n2") is None


def test_unsaved_edits_of_other_objects_survive_a_rollback(cfg, disk) -> None:
    """Only objects the failed change touched go back; another LU's pending edit stays."""
    n2 = cfg.get_node_info("n2")
    n2.tags.append("pending")           # edited by another LU, update() not called yet
    cluster = cfg.get_cluster_info()
    disk.full = True
    cluster.tags.append("failed")
    with pytest.raises(errors.ConfigurationError):
        cfg.update(cluster)
    assert cluster.tags == [] and n2.tags == ["pending"]
    disk.full = False
    cfg.update(n2)
    assert ConfigWriter(cfg._path).get_node_info("n2").tags == ["pending"]


def test_a_batch_that_fails_is_undone_as_a_whole(cfg, disk) -> None:
    before = _file(cfg)
    disk.full = True
    with pytest.raises(errors.ConfigurationError):
        with cfg.batch():
            cfg.add_node(Node(name="node3.example.com", primary_ip="127.0.1.3"))
            cfg.get_cluster_info().tags.append("x")
            cfg.update(cfg.get_cluster_info())
    assert cfg.get_node_info_by_name("node3.example.com") is None
    assert cfg.get_cluster_info().tags == []
    assert cfg.dump() == before


def test_a_change_that_cannot_be_serialised_is_undone(cfg) -> None:
    before = _file(cfg)
    cluster = cfg.get_cluster_info()
    cluster.beparams.setdefault("default", {})["maxmem"] = float("nan")
    with pytest.raises(errors.ConfigurationError, match="undone"):
        cfg.update(cluster)
    assert cfg.dump() == before
    cluster.tags.append("fine")          # the writer is not poisoned
    cfg.update(cluster)
    assert ConfigWriter(cfg._path).get_cluster_info().tags == ["fine"]


def test_replicator_gets_no_push_for_a_failed_save(tmp_path, disk) -> None:
    cfg = make_config(tmp_path, nodes=3)
    cfg._write_fn = disk.config_write_fn()
    paths = Paths(root=str(tmp_path / "root"))
    rpc = FakeRpc(cfg)
    rep = Replicator(paths, rpc, timeout=5.0, clock=time.monotonic)
    rep.refresh_targets(cfg)
    cfg._on_change = lambda data, serial: rep.on_config_change(cfg, data, serial)  # as masterd
    try:
        durable = cfg.get_serial_no()
        node = cfg.get_node_info_by_name(node_name(2))
        disk.full = True
        node.tags.append("lost")
        with pytest.raises(errors.ConfigurationError):
            cfg.update(node)
        assert rep.wait_replicated(durable + 1, timeout=0) is False
        assert rpc.calls_to("replicate_state") == []
        # room again: the next change is pushed, and it does not carry the failed one
        disk.full = False
        node.tags.append("kept")
        cfg.update(node)
        serial = cfg.get_serial_no()
        assert serial == durable + 1
        assert rep.wait_replicated(serial, timeout=10)
        pushed = [args for _, args in rpc.calls_to("replicate_state")]
        assert len(pushed) == 1
        sent = serializer.loads(decode_payload(pushed[0][0][1]))
        assert sent["serial_no"] == serial
        assert sent["nodes"][node.uuid]["tags"] == ["kept"]
        assert decode_payload(pushed[0][0][1]) == _file(cfg)
    finally:
        rep.stop(timeout=10)
