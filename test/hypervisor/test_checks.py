"""Syntax checks of hypervisor parameters, alone and through check_params (master side)."""

from __future__ import annotations

import pytest

from ganeti import constants, errors, parameters
from ganeti.hypervisor import checks as hvchecks


@pytest.mark.parametrize("text,expected", [
    ("all", [None]),
    ("0", [[0]]),
    ("0-2,5", [[0, 1, 2, 5]]),
    ("3,1,1", [[1, 3]]),
    ("0:1-2:all", [[0], [1, 2], None]),
])
def test_parse_cpu_mask(text, expected):
    assert hvchecks.parse_cpu_mask(text) == expected


@pytest.mark.parametrize("text", ["", "x", "1-", "-1", "2-1", "0,,1", "0::1", "99999"])
def test_parse_cpu_mask_refuses(text):
    with pytest.raises(ValueError):
        hvchecks.parse_cpu_mask(text)
    assert hvchecks.check_cpu_mask(text) is not None


def test_small_checks():
    assert hvchecks.check_abs_path("/boot/vmlinuz") is None
    assert hvchecks.check_abs_path("") is not None
    assert hvchecks.check_abs_path("boot/vmlinuz") is not None
    assert hvchecks.check_optional_abs_path("") is None
    assert hvchecks.check_optional_abs_path("rel") is not None
    assert hvchecks.check_shell_words("-device 'virtio-rng-pci,id=rng0'") is None
    assert hvchecks.check_shell_words("-name 'unbalanced") is not None
    for ok in ("", "0.0.0.0", "::1", "192.0.2.7", "eth0", "br-vnc"):
        assert hvchecks.check_bind_address(ok) is None, ok
    for bad in ("1.2.3", "has space", "-eth0", "a" * 16):
        assert hvchecks.check_bind_address(bad) is not None, bad
    assert hvchecks.check_no_space("host,+vmx") is None
    assert hvchecks.check_no_space("pc q35") is not None


def test_kvm_defaults_use_upstream_names():
    defaults = parameters.defaults("hv", constants.HT_KVM)
    for name in ("kernel_path", "initrd_path", "kernel_args", "root_path", "boot_order",
                 "serial_console", "serial_speed", "vnc_bind_address", "machine_version",
                 "cpu_type", "cpu_mask", "disk_type", "nic_type", "disk_cache", "mem_path",
                 "use_chroot", "security_model", "migration_bandwidth",
                 "migration_downtime", "kvm_extra"):
        assert name in defaults, name
    assert defaults["cpu_mask"] == "all"
    assert defaults["kvm_extra"] == ""
    assert defaults["serial_speed"] == 38400
    assert defaults["disk_type"] == "paravirtual"


@pytest.mark.parametrize("key,value", [
    ("cpu_mask", "0-"), ("kernel_path", "vmlinuz"), ("initrd_path", "initrd"),
    ("mem_path", "hugepages"), ("vnc_bind_address", "1.2.3"), ("kvm_extra", "-a 'b"),
    ("machine_version", "pc q35"), ("kvm_path", ""),
])
def test_master_refuses_bad_kvm_values(key, value):
    with pytest.raises(errors.ParameterError, match=key):
        parameters.check_params("hv", {key: value}, constants.HT_KVM)


def test_master_accepts_good_kvm_values():
    good = {"cpu_mask": "0:1", "kernel_path": "/boot/vmlinuz", "vnc_bind_address": "0.0.0.0",
            "kvm_extra": "-device virtio-rng-pci", "machine_version": "pc-i440fx-7.2"}
    assert parameters.check_params("hv", good, constants.HT_KVM) == good
