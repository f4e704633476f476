"""Tests for ganeti.ssconf: computing, writing and reading ssconf files."""

from __future__ import annotations

import os

import pytest

from ganeti import constants, errors, ssconf
from ganeti.objects import NIC, Cluster, ConfigData, Instance, Node, NodeGroup
from ganeti.pathutils import Paths


def _config() -> ConfigData:
    cluster = Cluster(cluster_name="cluster.example.com", uuid="cu", master_node="n1",
                      master_ip="127.0.0.254", master_netdev="lo",
                      enabled_hypervisors=[constants.HT_FAKE, constants.HT_KVM],
                      hvparams={constants.HT_KVM: {"kernel_args": "console=ttyS0"}},
                      ndparams={"ssh_port": 2022}, tags=["b", "a"],
                      file_storage_dir="/srv/ganeti/file-storage", uid_pool=[[1000, 1010], [2000, 2000]])
    groups = {"g1": NodeGroup(name="default", uuid="g1", ndparams={"ssh_port": 22}),
              "g2": NodeGroup(name="other", uuid="g2")}
    nodes = {
        "n1": Node(name="node1.example.com", uuid="n1", primary_ip="127.0.1.1",
                   secondary_ip="10.0.0.1", group="g1", master_candidate=True),
        "n2": Node(name="node2.example.com", uuid="n2", primary_ip="127.0.1.2", group="g2",
                   offline=True, vm_capable=False),
        "n3": Node(name="node3.example.com", uuid="n3", primary_ip="127.0.1.3", group="g2",
                   master_candidate=True, ndparams={"ssh_port": 2222}),
    }
    insts = {"i2": Instance(name="zeta.example.com", uuid="i2", primary_node="n1",
                            nics=[NIC(mac="aa:00:00:00:00:01")]),
             "i1": Instance(name="alpha.example.com", uuid="i1", primary_node="n3")}
    return ConfigData(cluster=cluster, nodes=nodes, nodegroups=groups, instances=insts)


def test_compute_values() -> None:
    values = ssconf.compute_ssconf_values(_config())
    assert values["cluster_name"] == "cluster.example.com"
    assert values["master_node"] == "node1.example.com"
    assert values["master_ip"] == "127.0.0.254"
    assert values["node_list"] == "node1.example.com\nnode2.example.com\nnode3.example.com"
    assert values["online_nodes"] == "node1.example.com\nnode3.example.com"
    assert values["offline_nodes"] == "node2.example.com"
    assert values["master_candidates"] == "node1.example.com\nnode3.example.com"
    assert values["master_candidates_ips"] == "127.0.1.1\n127.0.1.3"
    assert values["node_primary_ips"].splitlines()[0] == "node1.example.com 127.0.1.1"
    assert values["node_secondary_ips"].splitlines()[1] == "node2.example.com 127.0.1.2"
    assert values["instance_list"] == "alpha.example.com\nzeta.example.com"
    assert values["nodegroups"] == "g1 default\ng2 other"
    assert values["hypervisor_list"] == "fake\nkvm"
    assert values["cluster_tags"] == "a\nb"
    assert values["release_version"] == constants.RELEASE_VERSION
    assert values["primary_ip_family"] == "2"
    assert values["uid_pool"] == "1000-1010\n2000"
    assert values["node_vm_capable"].splitlines()[1] == "node2.example.com=False"
    assert "kernel_args=console=ttyS0" in values["hvparams_kvm"].splitlines()
    assert values["hvparams_fake"] == "migration_bandwidth=0\nmigration_mode=live"
    assert values["ssh_ports"] == ("node1.example.com=22\nnode2.example.com=2022\n"
                                   "node3.example.com=2222")


def test_ssconf_values_equal_the_plain_computation_as_instances_change() -> None:
    values = ssconf.SsconfValues()
    data = _config()
    assert values(data) == ssconf.compute_ssconf_values(data)
    data.instances["i1"].admin_state = constants.ADMINST_UP      # same names
    assert values(data)["instance_list"] == "alpha.example.com\nzeta.example.com"
    data.instances["i1"].name = "omega.example.com"              # renamed
    assert values(data)["instance_list"] == "omega.example.com\nzeta.example.com"
    data.instances["i3"] = Instance(name="beta.example.com", uuid="i3", primary_node="n1")
    assert values(data)["instance_list"] == (
        "beta.example.com\nomega.example.com\nzeta.example.com")
    del data.instances["i2"]
    assert values(data) == ssconf.compute_ssconf_values(data)
    data.instances = {}
    assert values(data)["instance_list"] == ""


def test_write_and_read_round_trip(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    values = ssconf.compute_ssconf_values(_config())
    ssconf.write_ssconf_files(paths, values)
    for key, value in values.items():
        assert open(paths.ssconf_file(key)).read() == value
    store = ssconf.SimpleStore(paths)
    assert store.get_cluster_name() == "cluster.example.com"
    assert store.get_master_node() == "node1.example.com"
    assert store.get_node_list() == ["node1.example.com", "node2.example.com", "node3.example.com"]
    assert store.get_online_nodes() == ["node1.example.com", "node3.example.com"]
    assert store.get_offline_nodes() == ["node2.example.com"]
    assert store.get_master_candidates() == ["node1.example.com", "node3.example.com"]
    assert store.get_node_primary_ips() == {"node1.example.com": "127.0.1.1",
                                            "node2.example.com": "127.0.1.2",
                                            "node3.example.com": "127.0.1.3"}
    assert store.get_node_secondary_ips()["node1.example.com"] == "10.0.0.1"
    assert store.get_nodegroups() == {"g1": "default", "g2": "other"}
    assert store.get_node_vm_capable() == {"node1.example.com": True, "node2.example.com": False,
                                           "node3.example.com": True}
    assert store.get_ssh_ports()["node3.example.com"] == 2222
    assert store.get_instance_list() == ["alpha.example.com", "zeta.example.com"]
    assert store.get_hypervisor_list() == ["fake", "kvm"]
    assert store.get_hvparams("kvm")["kernel_args"] == "console=ttyS0"
    assert store.get_cluster_tags() == ["a", "b"]
    assert store.get_primary_ip_family() == 2
    assert store.get_maintain_node_health() is False
    assert store.get_enabled_user_shutdown() is False
    assert store.get_file_storage_dir() == "/srv/ganeti/file-storage"
    assert store.get_release_version() == constants.RELEASE_VERSION


def test_empty_lists_read_as_empty(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    data = _config()
    data.instances.clear()
    ssconf.write_ssconf_files(paths, ssconf.compute_ssconf_values(data))
    assert ssconf.SimpleStore(paths).get_instance_list() == []


def test_stale_files_are_removed(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    ssconf.write_ssconf_files(paths, {"cluster_name": "a", "old_key": "x"})
    ssconf.write_ssconf_files(paths, {"cluster_name": "b"})
    assert not os.path.exists(paths.ssconf_file("old_key"))
    assert ssconf.SimpleStore(paths).get_cluster_name() == "b"
    assert sorted(os.listdir(paths.data_dir)) == ["ssconf_cluster_name"]


def test_missing_file_is_a_configuration_error(tmp_path) -> None:
    store = ssconf.SimpleStore(Paths(root=str(tmp_path)))
    with pytest.raises(errors.ConfigurationError, match="ssconf_master_node"):
        store.get_master_node()


def test_bad_key_refused(tmp_path) -> None:
    with pytest.raises(errors.ProgrammerError):
        ssconf.write_ssconf_files(Paths(root=str(tmp_path)), {"../evil": "x"})
