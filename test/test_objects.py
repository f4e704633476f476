"""Tests for ganeti.objects: field names and JSON round trips."""

from __future__ import annotations

import dataclasses

from ganeti import constants, serializer
from ganeti.objects import (
    NIC, Cluster, ConfigData, Disk, Instance, Node, NodeGroup, instance_all_nodes,
    instance_secondary_nodes,
)


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_field_names_follow_ganeti_config_data() -> None:
    # key lists observed in a Ganeti 3.0 config.data (doc/protocols/config.md, "Objects")
    assert {"cluster", "ctime", "disks", "filters", "instances", "mtime", "networks",
            "nodegroups", "nodes", "serial_no", "version"} == _fields(ConfigData)
    assert {"ctime", "drained", "group", "master_candidate", "master_capable", "mtime",
            "name", "ndparams", "offline", "powered", "primary_ip", "secondary_ip",
            "serial_no", "tags", "uuid", "vm_capable"} <= _fields(Node)
    assert {"alloc_policy", "ctime", "diskparams", "ipolicy", "members", "mtime", "name",
            "ndparams", "networks", "serial_no", "tags", "uuid"} <= _fields(NodeGroup)
    assert {"admin_state", "admin_state_source", "beparams", "ctime", "disks",
            "disks_active", "hvparams", "hypervisor", "mtime", "name", "nics", "os",
            "osparams", "osparams_private", "primary_node", "serial_no", "tags",
            "uuid"} <= _fields(Instance)
    assert {"mac", "nicparams", "uuid", "ip", "name", "network"} <= _fields(NIC)
    assert {"uuid", "dev_type", "size", "mode", "name", "logical_id", "iv_name", "nodes",
            "params", "spindles"} <= _fields(Disk)
    assert {"beparams", "candidate_pool_size", "cluster_name", "enabled_disk_templates",
            "enabled_hypervisors", "file_storage_dir", "hvparams", "mac_prefix",
            "master_ip", "master_netdev", "master_node", "ndparams", "nicparams",
            "os_hvp", "osparams", "primary_ip_family", "uid_pool", "ipolicy",
            "diskparams", "tags", "uuid", "serial_no", "ctime", "mtime"} <= _fields(Cluster)


def _sample() -> ConfigData:
    cluster = Cluster(cluster_name="c.example.com", uuid="cu", master_node="n1",
                      hvparams={"kvm": {"acpi": False}}, beparams={"default": {"maxmem": 256}})
    group = NodeGroup(name="default", uuid="g1", members=["n1", "n2"])
    n1 = Node(name="node1", uuid="n1", primary_ip="127.0.1.1", group="g1", master_candidate=True)
    n2 = Node(name="node2", uuid="n2", primary_ip="127.0.1.2", group="g1")
    disk = Disk(uuid="d1", dev_type=constants.DT_DRBD8, size=1024, nodes=["n1", "n2"],
                logical_id=["n1", "n2", 11000, 0, 1, "secret"], iv_name="disk/0")
    inst = Instance(name="i1", uuid="i1u", primary_node="n1", os="debootstrap",
                    disk_template=constants.DT_DRBD8, disks=["d1"],
                    nics=[NIC(uuid="nic1", mac="aa:00:00:11:22:33",
                              nicparams={"mode": "routed", "link": "100"})],
                    beparams={"minmem": 128, "maxmem": 128}, tags=["a"])
    return ConfigData(cluster=cluster, nodes={"n1": n1, "n2": n2}, nodegroups={"g1": group},
                      instances={"i1u": inst}, disks={"d1": disk}, serial_no=5)


def test_config_data_round_trip() -> None:
    data = _sample()
    text = serializer.dumps(data)
    plain = serializer.loads(text)
    assert plain["instances"]["i1u"]["disks"] == ["d1"]
    assert plain["instances"]["i1u"]["nics"][0]["mac"] == "aa:00:00:11:22:33"
    back = serializer.from_data(ConfigData, plain)
    assert back == data
    assert isinstance(back.nodes["n1"], Node)
    assert isinstance(back.instances["i1u"].nics[0], NIC)
    assert isinstance(back.disks["d1"], Disk)


def test_a_config_from_before_a_cluster_field_reads_its_default() -> None:
    plain = serializer.loads(serializer.dumps(_sample()))
    del plain["cluster"]["ssh_retired_keys"]     # written before SSH key renewals kept it
    assert serializer.from_data(ConfigData, plain).cluster.ssh_retired_keys == []


def test_instance_nodes_from_disks() -> None:
    data = _sample()
    inst = data.instances["i1u"]
    disks = [data.disks[d] for d in inst.disks]
    assert instance_all_nodes(inst, disks) == ["n1", "n2"]
    assert instance_secondary_nodes(inst, disks) == ["n2"]
    assert instance_all_nodes(inst, []) == ["n1"]


def test_objects_are_mutable_and_defaults_not_shared() -> None:
    a, b = Instance(), Instance()
    a.tags.append("x")
    assert b.tags == []
    a.name = "renamed"
    assert a.name == "renamed"
    assert Cluster().primary_hypervisor == constants.HT_FAKE
