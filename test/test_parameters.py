"""Tests for ganeti.parameters: typed checks, storage rule and layering."""

from __future__ import annotations

import pytest

from ganeti import constants, errors, parameters
from ganeti.objects import Cluster, Instance, Node, NodeGroup


def test_cli_strings_are_converted_to_their_types() -> None:
    checked = parameters.check_params(
        "be", {"maxmem": "1G", "minmem": "512M", "vcpus": "3", "auto_balance": "false"})
    assert checked == {"maxmem": 1024, "minmem": 512, "vcpus": 3, "auto_balance": False}
    hv = parameters.check_params("hv", {"acpi": "True", "migration_port": "9000",
                                        "boot_order": "cdrom"}, constants.HT_KVM)
    assert hv == {"acpi": True, "migration_port": 9000, "boot_order": "cdrom"}
    nd = parameters.check_params("nd", {"cpu_speed": "1.5", "ssh_port": 2222})
    assert nd == {"cpu_speed": 1.5, "ssh_port": 2222}


def test_legacy_memory_sets_maxmem_and_minmem() -> None:
    assert parameters.check_params("be", {"memory": "128M"}) == {"maxmem": 128, "minmem": 128}
    assert parameters.check_params("be", {"memory": 256, "minmem": 128}) == \
        {"maxmem": 256, "minmem": 128}


@pytest.mark.parametrize("namespace,values,hv,needle", [
    ("be", {"vcpu": 1}, None, "'vcpu'"),
    ("be", {"vcpus": "many"}, None, "'vcpus'"),
    ("be", {"vcpus": 0}, None, "'vcpus'"),
    ("be", {"vcpus": True}, None, "'vcpus'"),
    ("be", {"maxmem": "lots"}, None, "'maxmem'"),
    ("be", {"minmem": 512, "maxmem": 256}, None, "'minmem'"),
    ("be", {"auto_balance": "maybe"}, None, "'auto_balance'"),
    ("be", {"auto_balance": "1"}, None, "'auto_balance'"),     # Ganeti: booleans only
    ("be", {"auto_balance": "yes"}, None, "'auto_balance'"),
    ("be", {"auto_balance": "off"}, None, "'auto_balance'"),
    ("be", {"auto_balance": 2}, None, "'auto_balance'"),
    ("hv", {"boot_order": "usb"}, constants.HT_KVM, "'boot_order'"),
    ("hv", {"migration_port": 70000}, constants.HT_KVM, "'migration_port'"),
    ("hv", {"kernel_path": 5}, constants.HT_KVM, "'kernel_path'"),
    ("hv", {"kernel_path": "/boot/vmlinuz"}, constants.HT_FAKE, "'kernel_path'"),
    ("nic", {"mode": "bridge"}, None, "'mode'"),
    ("nic", {"link": "br0\n"}, None, "'link'"),
    ("nd", {"ssh_port": "ssh"}, None, "'ssh_port'"),
    ("nd", {"cpu_speed": "nan"}, None, "'cpu_speed'"),
    ("nd", {"cpu_speed": "inf"}, None, "'cpu_speed'"),
    ("nd", {"cpu_speed": float("inf")}, None, "'cpu_speed'"),
    ("os", {"k": ["list"]}, None, "'k'"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_parameters_are_refused_naming_the_parameter(namespace, values, hv, needle) -> None:
    with pytest.raises(errors.ParameterError) as info:
        parameters.check_params(namespace, values, hv)
    assert needle in str(info.value)
    assert info.value.ecode == errors.ECODE_INVAL


def test_unknown_namespace_hypervisor_and_template() -> None:
    with pytest.raises(errors.ParameterError, match="namespace"):
        parameters.check_params("xx", {})
    with pytest.raises(errors.ParameterError, match="hypervisor"):
        parameters.check_params("hv", {"a": 1}, "vmware")
    with pytest.raises(errors.ParameterError, match="template"):
        parameters.check_params("disk", {"a": 1}, template="tape")
    with pytest.raises(errors.ParameterError):
        parameters.check_params("be", ["vcpus"])  # type: ignore[arg-type]


def test_hypervisors_we_do_not_run_are_checked_by_name_and_type() -> None:
    # Ganeti's QA TestOsModifyValid: -H xen-pvm:root_path=...,xen-hvm:acpi=False,pae=True
    assert parameters.check_params("hv", {"root_path": "/dev/sda5"},
                                   constants.HT_XEN_PVM) == {"root_path": "/dev/sda5"}
    assert parameters.check_params("hv", {"acpi": "False", "pae": "True"},
                                   constants.HT_XEN_HVM) == {"acpi": False, "pae": True}
    assert parameters.check_params("hv", {"num_ttys": "3", "devices": "default"},
                                   constants.HT_LXC, allow_default=True) == {
        "num_ttys": 3, "devices": "default"}
    with pytest.raises(errors.ParameterError, match="'pae'"):
        parameters.check_params("hv", {"pae": "true"}, constants.HT_XEN_PVM)
    with pytest.raises(errors.ParameterError, match="'pae'"):
        parameters.check_params("hv", {"pae": "maybe"}, constants.HT_XEN_HVM)
    # checked only: no defaults, never filled
    with pytest.raises(errors.ParameterError, match="hypervisor"):
        parameters.defaults("hv", constants.HT_XEN_PVM)
    assert set(parameters.FOREIGN_HV_PARAMETERS) | set(parameters.HV_PARAMETERS) == \
        constants.HYPER_TYPES


def test_disk_and_os_params() -> None:
    assert parameters.check_params("disk", {"resync-rate": "1000"},
                                   template=constants.DT_DRBD8) == {"resync-rate": 1000}
    # the names spelt with "_" before are read as Ganeti's
    assert parameters.check_params("disk", {"resync_rate": "1000", "dynamic-resync": "true"},
                                   template=constants.DT_DRBD8) == \
        {"resync-rate": 1000, "dynamic-resync": True}
    assert parameters.check_params("os", {"dhcp": "yes", "size": 3}) == {"dhcp": "yes", "size": "3"}


def test_default_value_removes_a_key_only_when_allowed() -> None:
    with pytest.raises(errors.ParameterError):
        parameters.check_params("be", {"vcpus": "default"})
    changes = parameters.check_params("be", {"vcpus": "default", "maxmem": "256"},
                                      allow_default=True)
    stored = parameters.update_params({"vcpus": 4, "auto_balance": True}, changes)
    assert stored == {"auto_balance": True, "maxmem": 256}
    with pytest.raises(errors.ParameterError, match="'nosuch'"):
        parameters.check_params("be", {"nosuch": "default"}, allow_default=True)


def test_update_keeps_customised_values_equal_to_default() -> None:
    # Ganeti's rule: once customised, kept until reset
    assert parameters.update_params({}, {"vcpus": 1}) == {"vcpus": 1}


def test_strip_defaults() -> None:
    base = parameters.defaults("be")
    assert parameters.strip_defaults({"vcpus": 1, "maxmem": 512}, base) == {"maxmem": 512}


def test_defaults_cover_every_table_entry() -> None:
    for hv, table in parameters.HV_PARAMETERS.items():
        for pdef in table.values():
            assert pdef.convert(pdef.default, hv) == pdef.default
    kvm = parameters.defaults("hv", constants.HT_KVM)
    for key in ("kernel_path", "initrd_path", "root_path", "kernel_args", "boot_order",
                "cdrom_image_path", "nic_type", "disk_type", "vnc_bind_address",
                "serial_console", "migration_port", "migration_bandwidth", "migration_downtime"):
        assert key in kvm
    assert set(parameters.defaults("be")) == {"vcpus", "maxmem", "minmem", "auto_balance",
                                              "always_failover", "spindle_use"}
    assert set(parameters.defaults("nic")) == {"mode", "link", "vlan"}
    assert {"oob_program", "spindle_count", "exclusive_storage", "ovs", "ssh_port",
            "cpu_speed"} <= set(parameters.defaults("nd"))


def _cluster() -> Cluster:
    return Cluster(
        enabled_hypervisors=[constants.HT_KVM, constants.HT_FAKE],
        hvparams={constants.HT_KVM: {"kernel_args": "console=ttyS0", "acpi": False}},
        os_hvp={"debian": {constants.HT_KVM: {"kernel_args": "debian-args"}},
                "debian+sid": {constants.HT_KVM: {"root_path": "/dev/vdb"}}},
        beparams={"default": {"maxmem": 512, "minmem": 256}},
        nicparams={"default": {"link": "br-cluster"}},
        ndparams={"ssh_port": 2222, "spindle_count": 2},
        diskparams={constants.DT_DRBD8: {"resync-rate": 1000, "metavg": "meta"}},
        osparams={"debian": {"mirror": "a", "suite": "stable"}, "debian+sid": {"suite": "sid"}},
    )


def test_hvparams_layering_cluster_os_instance() -> None:
    cluster = _cluster()
    filled = parameters.fill_hvparams(cluster, constants.HT_KVM)
    assert filled["kernel_args"] == "console=ttyS0" and filled["acpi"] is False
    assert filled["boot_order"] == "disk"     # built-in default
    inst = Instance(name="i1", hypervisor=constants.HT_KVM, os="debian+sid",
                    hvparams={"acpi": True})
    filled = parameters.fill_instance_hvparams(cluster, inst)
    assert filled["kernel_args"] == "debian-args"      # OS override beats cluster
    assert filled["root_path"] == "/dev/vdb"           # variant override
    assert filled["acpi"] is True                      # instance beats all
    assert inst.hvparams == {"acpi": True}             # object untouched
    assert parameters.fill_hvparams(cluster, constants.HT_FAKE) == \
        {"migration_mode": "live", "migration_bandwidth": 0}


def test_beparams_nicparams_layering() -> None:
    cluster = _cluster()
    inst = Instance(name="i1", beparams={"maxmem": 1024})
    be = parameters.fill_instance_beparams(cluster, inst)
    assert be["maxmem"] == 1024 and be["minmem"] == 256 and be["vcpus"] == 1
    nic = parameters.fill_nicparams(cluster, {"mode": "routed"})
    assert nic == {"mode": "routed", "link": "br-cluster", "vlan": ""}


def test_ndparams_layering_cluster_group_node() -> None:
    cluster = _cluster()
    group = NodeGroup(name="g", ndparams={"spindle_count": 4, "exclusive_storage": True})
    node = Node(name="n", ndparams={"spindle_count": 8})
    nd = parameters.fill_ndparams(cluster, group, node)
    assert nd["ssh_port"] == 2222 and nd["exclusive_storage"] is True
    assert nd["spindle_count"] == 8
    assert parameters.fill_ndparams(cluster, group)["spindle_count"] == 4
    assert parameters.fill_ndparams(cluster)["spindle_count"] == 2


def test_diskparams_and_osparams_layering() -> None:
    cluster = _cluster()
    # a group stored with the old spelling still overrides the cluster
    group = NodeGroup(name="g", diskparams={constants.DT_DRBD8: {"resync_rate": 5}})
    dp = parameters.fill_diskparams(cluster, constants.DT_DRBD8, group)
    assert dp["resync-rate"] == 5 and dp["metavg"] == "meta" and dp["data-stripes"] == 1
    assert "resync_rate" not in dp and dp["c-plan-ahead"] == 20
    osp = parameters.fill_osparams(cluster, "debian+sid", {"mirror": "b"})
    assert osp == {"mirror": "b", "suite": "sid"}


def test_fill_dict() -> None:
    base = {"a": 1, "b": 2}
    assert parameters.fill_dict(base, {"b": 3, "c": 4}, skip_keys=("a",)) == {"b": 3, "c": 4}
    assert base == {"a": 1, "b": 2}


def test_drbd_resync_controller_ranges_are_drbdsetups() -> None:
    for key, bad in (("c-delay-target", 0), ("c-max-rate", 100), ("c-plan-ahead", 301),
                     ("resync-rate", 0)):
        with pytest.raises(errors.ParameterError, match=key):
            parameters.check_params("disk", {key: bad}, template=constants.DT_DRBD8)
