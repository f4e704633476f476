"""The takeover steps that work on local files (ganeti.failover.takeover)."""

from __future__ import annotations

import os

import pytest

from ganeti import configfile, errors, serializer, ssconf
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
