"""The kvm command-line builder, checked on the argv it produces."""

from __future__ import annotations

import pytest

from ganeti import constants, errors, parameters
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import cmdline, consoles

FILES = cmdline.RuntimeFiles(pidfile="/run/kvm/i1.pid", qmp_socket="/run/kvm/i1.qmp",
                             serial_socket="/run/kvm/i1.serial")


def _spec(**hvp) -> base.InstanceSpec:
    params = parameters.defaults("hv", constants.HT_KVM)
    params.update(hvp)
    return base.InstanceSpec(name="i1.example.com", uuid="0b0e4f5c-2f0e-4d36-9a30-5d7b0c1d2e3f",
                             memory=256, vcpus=2, hvparams=params)


def _build(spec=None, disks=(), **kwargs) -> list[str]:
    return cmdline.build_command(spec or _spec(), list(disks), FILES,
                                 binary="/usr/bin/qemu-system-x86_64",
                                 accel=kwargs.pop("accel", cmdline.ACCEL_TCG), **kwargs)


def _after(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def test_defaults_give_a_daemonized_qemu_with_qmp_and_serial_sockets():
    argv = _build()
    assert argv[0] == "/usr/bin/qemu-system-x86_64"
    assert _after(argv, "-name") == ["i1.example.com"]
    assert _after(argv, "-uuid") == ["0b0e4f5c-2f0e-4d36-9a30-5d7b0c1d2e3f"]
    for flag in ("-daemonize", "-nodefaults", "-no-shutdown"):
        assert flag in argv
    assert _after(argv, "-pidfile") == ["/run/kvm/i1.pid"]
    assert _after(argv, "-accel") == ["tcg"]
    assert _after(argv, "-m") == ["256"]
    assert _after(argv, "-smp") == ["2"]
    assert _after(argv, "-chardev") == [
        "socket,id=qmp,path=/run/kvm/i1.qmp,server=on,wait=off",
        "socket,id=serial0,path=/run/kvm/i1.serial,server=on,wait=off"]
    assert _after(argv, "-mon") == ["chardev=qmp,mode=control"]
    assert _after(argv, "-serial") == ["chardev:serial0"]
    assert _after(argv, "-display") == ["none"]
    assert _after(argv, "-boot") == ["order=c"]      # boot_order=disk
    for flag in ("-S", "-incoming", "-kernel", "-machine", "-cpu", "-vnc", "-no-reboot"):
        assert flag not in argv


def test_accel_kvm_and_refuses_unknown():
    assert _after(_build(accel=cmdline.ACCEL_KVM), "-accel") == ["kvm"]
    with pytest.raises(errors.ProgrammerError):
        _build(accel="hax")


def test_direct_kernel_boot_with_serial_console_args():
    argv = _build(_spec(kernel_path="/boot/vmlinuz", initrd_path="/boot/initrd",
                        root_path="/dev/vda1", kernel_args="ro quiet", serial_speed=115200))
    assert _after(argv, "-kernel") == ["/boot/vmlinuz"]
    assert _after(argv, "-initrd") == ["/boot/initrd"]
    assert _after(argv, "-append") == ["root=/dev/vda1 ro quiet console=ttyS0,115200"]
    assert "-boot" not in argv


def test_serial_log_is_kept_when_asked():
    files = cmdline.RuntimeFiles("/r/p", "/r/q", "/r/s", serial_log="/r/serial,log")
    argv = cmdline.build_command(_spec(), [], files, binary="qemu", accel="tcg")
    assert _after(argv, "-chardev")[1] == ("socket,id=serial0,path=/r/s,server=on,wait=off,"
                                           "logfile=/r/serial,,log,logappend=on")


def test_no_serial_console():
    argv = _build(_spec(serial_console=False, kernel_path="/k", root_path="", kernel_args=""))
    assert "-serial" not in argv
    assert len(_after(argv, "-chardev")) == 1
    assert "-append" not in argv


@pytest.mark.parametrize("order,letter", [("cdrom", "d"), ("network", "n"), ("floppy", "a")])
def test_boot_order(order, letter):
    assert _after(_build(_spec(boot_order=order)), "-boot") == [f"order={letter}"]


def test_disks_follow_disk_type_and_cache_and_escape_commas():
    argv = _build(_spec(disk_type="scsi", disk_cache="none"),
                  disks=["/srv/ganeti/file-storage/i1/disk0", "/srv/a,b/disk1"])
    assert _after(argv, "-drive") == [
        "file=/srv/ganeti/file-storage/i1/disk0,format=raw,if=scsi,id=disk0,cache=none",
        "file=/srv/a,,b/disk1,format=raw,if=scsi,id=disk1,cache=none"]
    argv = _build(disks=["/d0"])
    assert _after(argv, "-drive") == ["file=/d0,format=raw,if=virtio,id=disk0"]


@pytest.mark.parametrize("cache,mode", [("default", ",cache=none"), ("writeback", ",cache=writeback"),
                                        ("writethrough", ",cache=writethrough")])
def test_a_drbd_device_is_opened_without_the_page_cache_unless_told_otherwise(cache, mode):
    # doc/kvm.md, "Disk cache": the mirror's two page caches are not coherent
    argv = _build(_spec(disk_cache=cache), disks=["/dev/drbd3", "/srv/file/disk1",
                                                   "/dev/drbd3p1"])
    other = "" if cache == "default" else mode
    assert _after(argv, "-drive") == [
        f"file=/dev/drbd3,format=raw,if=virtio,id=disk0{mode}",
        f"file=/srv/file/disk1,format=raw,if=virtio,id=disk1{other}",
        f"file=/dev/drbd3p1,format=raw,if=virtio,id=disk2{other}"]


def test_cdrom_image():
    argv = _build(_spec(cdrom_image_path="/iso/x.iso", boot_order="cdrom"))
    assert _after(argv, "-drive") == [
        "file=/iso/x.iso,format=raw,media=cdrom,if=ide,readonly=on,id=cdrom0"]


def test_nics_tap_and_user_with_model():
    spec = base.InstanceSpec(name="i1", memory=128, vcpus=1,
                             hvparams={**_spec().hvparams, "nic_type": "e1000", "vhost_net": True},
                             nics=(base.NicSpec(mac="aa:00:00:00:00:01", link="br0"),
                                   base.NicSpec(mac="aa:00:00:00:00:02")))
    argv = _build(spec, nic_backends=[cmdline.NicBackend(cmdline.NETDEV_TAP, "gnt1.0"),
                                      cmdline.NicBackend(cmdline.NETDEV_USER)])
    assert _after(argv, "-netdev") == [
        "tap,id=net0,ifname=gnt1.0,script=no,downscript=no,vhost=on", "user,id=net1"]
    assert _after(argv, "-device") == ["e1000,netdev=net0,mac=aa:00:00:00:00:01,id=nic0",
                                       "e1000,netdev=net1,mac=aa:00:00:00:00:02,id=nic1",
                                       "virtio-balloon-pci,id=balloon0"]
    with pytest.raises(errors.ProgrammerError):
        _build(spec, nic_backends=[])


def test_default_nic_model_is_virtio():
    spec = base.InstanceSpec(name="i1", hvparams=_spec().hvparams,
                             nics=(base.NicSpec(mac="aa:00:00:00:00:01"),))
    argv = _build(spec, nic_backends=[cmdline.NicBackend(cmdline.NETDEV_USER)])
    assert _after(argv, "-device") == ["virtio-net-pci,netdev=net0,mac=aa:00:00:00:00:01,id=nic0",
                                       "virtio-balloon-pci,id=balloon0"]


def test_machine_cpu_mem_path_and_acpi():
    argv = _build(_spec(machine_version="pc-i440fx-7.2", cpu_type="qemu64,+ssse3",
                        mem_path="/hugepages"))
    assert _after(argv, "-machine") == ["pc-i440fx-7.2"]
    assert _after(argv, "-cpu") == ["qemu64,+ssse3"]
    assert _after(argv, "-mem-path") == ["/hugepages"]
    assert _after(_build(_spec(acpi=False)), "-machine") == ["pc,acpi=off"]
    assert _after(_build(_spec(acpi=False, machine_version="q35")), "-machine") == ["q35,acpi=off"]


def test_vnc_needs_a_port_and_maps_it_to_a_display():
    argv = _build(_spec(vnc_bind_address="0.0.0.0", keymap="de"), vnc_port=5903)
    assert _after(argv, "-vnc") == ["0.0.0.0:3"]
    assert _after(argv, "-k") == ["de"]
    assert "-display" not in argv
    assert _after(_build(_spec(vnc_bind_address="::1"), vnc_port=5900), "-vnc") == ["[::1]:0"]
    with pytest.raises(errors.HypervisorError, match="network port"):
        _build(_spec(vnc_bind_address="0.0.0.0"))


def test_a_vnc_password_file_asks_qemu_for_a_password():
    argv = _build(_spec(vnc_bind_address="127.0.0.1", vnc_password_file="/etc/vncpw"),
                  vnc_port=5901)
    assert _after(argv, "-vnc") == ["127.0.0.1:1,password=on"]
    assert "/etc/vncpw" not in " ".join(argv)
    assert "-vnc" not in _build(_spec(vnc_password_file="/etc/vncpw"))


def test_vnc_tls_with_x509_certificates_and_the_password():
    argv = _build(_spec(vnc_bind_address="127.0.0.1", vnc_password_file="/etc/vncpw",
                        vnc_tls=True, vnc_x509_path="/etc/vnc,tls", vnc_x509_verify=True),
                  vnc_port=5902)
    assert _after(argv, "-object") == [
        "tls-creds-x509,id=vnctls0,dir=/etc/vnc,,tls,endpoint=server,verify-peer=on"]
    assert _after(argv, "-vnc") == ["127.0.0.1:2,tls-creds=vnctls0,password=on"]
    assert argv.index("-object") < argv.index("-vnc")       # qemu wants the object first


def test_vnc_tls_without_client_checks_or_without_certificates():
    x509 = _build(_spec(vnc_bind_address="::1", vnc_tls=True, vnc_x509_path="/etc/vnc"),
                  vnc_port=5901)
    assert _after(x509, "-object") == [
        "tls-creds-x509,id=vnctls0,dir=/etc/vnc,endpoint=server,verify-peer=off"]
    assert _after(x509, "-vnc") == ["[::1]:1,tls-creds=vnctls0"]
    anon = _build(_spec(vnc_bind_address="127.0.0.1", vnc_tls=True), vnc_port=5901)
    assert _after(anon, "-object") == ["tls-creds-anon,id=vnctls0,endpoint=server"]
    assert _after(anon, "-vnc") == ["127.0.0.1:1,tls-creds=vnctls0"]


def test_vnc_tls_settings_without_vnc_tls_or_vnc_change_nothing():
    plain = _build(_spec(vnc_bind_address="127.0.0.1", vnc_x509_path="/etc/vnc",
                         vnc_x509_verify=True), vnc_port=5901)
    assert "-object" not in plain and _after(plain, "-vnc") == ["127.0.0.1:1"]
    assert "-object" not in _build(_spec(vnc_tls=True, vnc_x509_path="/etc/vnc"))


def test_the_vnc_tls_hvparams_are_upstreams():
    kvm = parameters.HV_PARAMETERS[constants.HT_KVM]
    assert (kvm["vnc_tls"].default, kvm["vnc_x509_path"].default,
            kvm["vnc_x509_verify"].default) == (False, "", False)
    with pytest.raises(errors.ParameterError):
        kvm["vnc_tls"].convert("sometimes", "kvm")


@pytest.mark.parametrize("bind,address", [
    ("0.0.0.0", "127.0.0.1"), ("::", "::1"), ("192.0.2.7", "192.0.2.7"), ("::1", "::1"),
], ids=["any4", "any6", "one4", "one6"])
def test_the_node_reaches_its_vnc_server_on_loopback_for_a_wildcard(bind, address):
    assert consoles.connect_address(bind) == address


def test_paused_incoming_reboot_exit_runas_and_extra_words_last():
    argv = _build(_spec(reboot_behavior="exit", security_model="user", security_domain="kvm1",
                        kvm_extra="-device 'virtio-rng-pci,id=rng0'"),
                  incoming="tcp:0.0.0.0:8102")
    assert "-S" in argv and "-no-reboot" in argv
    assert _after(argv, "-incoming") == ["tcp:0.0.0.0:8102"]
    assert _after(argv, "-runas") == ["kvm1"]
    assert argv[-2:] == ["-device", "virtio-rng-pci,id=rng0"]
    assert "-S" in _build(startup_paused=True)
    with pytest.raises(errors.HypervisorError, match="security_domain"):
        _build(_spec(security_model="user"))


def test_cpu_affinity():
    assert cmdline.cpu_affinity("all", 2) == [None, None]
    assert cmdline.cpu_affinity("0-1", 3) == [[0, 1]] * 3
    assert cmdline.cpu_affinity("0:1,3", 2) == [[0], [1, 3]]
    with pytest.raises(errors.HypervisorError, match="2 entries for 3"):
        cmdline.cpu_affinity("0:1", 3)
    with pytest.raises(errors.HypervisorError):
        cmdline.cpu_affinity("x", 1)


def test_migration_parameters_use_upstream_units():
    assert cmdline.migration_parameters(_spec().hvparams) == {
        "max-bandwidth": 32 * 1024 * 1024, "downtime-limit": 30}
    assert cmdline.migration_parameters({"migration_bandwidth": 100,
                                         "migration_downtime": 500}) == {
        "max-bandwidth": 100 * 1024 * 1024, "downtime-limit": 500}


def test_cloud_init_seed_is_a_readonly_cdrom_after_the_disks():
    argv = _build(disks=["/srv/d0"], seed="/var/lib/ganeti/cloud-init/i1.example.com.iso")
    assert _after(argv, "-drive") == [
        "file=/srv/d0,format=raw,if=virtio,id=disk0",
        "file=/var/lib/ganeti/cloud-init/i1.example.com.iso,format=raw,media=cdrom,"
        "if=ide,readonly=on,id=cidata"]
    assert "id=cidata" not in " ".join(_build(disks=["/srv/d0"]))
    assert "-smbios" not in argv


SEED = "/var/lib/ganeti/cloud-init/i1.example.com.iso"


def test_cloud_init_source_metad_names_the_service_in_the_smbios_serial_instead_of_a_cdrom():
    argv = _build(_spec(cloud_init_source="metad"), disks=["/srv/d0"], seed=SEED)
    assert _after(argv, "-smbios") == [
        "type=1,serial=ds=nocloud-net;s=http://169.254.169.254/"]
    assert _after(argv, "-drive") == ["file=/srv/d0,format=raw,if=virtio,id=disk0"]
    assert SEED not in " ".join(argv)


def test_cloud_init_source_metad_without_a_seed_adds_nothing():
    # an instance without cloud-init data (no os-image): its guest is not told of the service
    argv = _build(_spec(cloud_init_source="metad"), disks=["/srv/d0"])
    assert "-smbios" not in argv and "cidata" not in " ".join(argv)


def test_cloud_init_source_is_checked():
    assert parameters.HV_PARAMETERS[constants.HT_KVM]["cloud_init_source"].default == "seed"
    assert parameters.HV_PARAMETERS[constants.HT_KVM]["cloud_init_source"].choices == (
        "metad", "seed")
    assert parameters.check_params("hv", {"cloud_init_source": "metad"}, constants.HT_KVM) \
        == {"cloud_init_source": "metad"}
    with pytest.raises(errors.ParameterError, match="cloud_init_source"):
        parameters.check_params("hv", {"cloud_init_source": "cdrom"}, constants.HT_KVM)
    with pytest.raises(errors.HypervisorError, match="cloud_init_source"):
        _build(_spec(cloud_init_source="cdrom"), disks=["/srv/d0"], seed=SEED)


# --- firmware, machine, TPM (doc/kvm.md, "UEFI and TPM") -------------------------------

PFLASH = ("/usr/share/OVMF/OVMF_CODE_4M.fd", "/var/lib/ganeti/kvm-firmware/u1/OVMF_VARS.fd")


def test_bios_and_no_tpm_by_default_add_nothing():
    argv = _build(pflash=PFLASH)
    assert not [w for w in _after(argv, "-drive") if "pflash" in w]
    assert "-tpmdev" not in argv and not [w for w in _after(argv, "-device") if "tpm" in w]


def test_uefi_gives_ovmf_code_read_only_and_the_nvram_writable():
    argv = _build(_spec(firmware="uefi"), pflash=PFLASH)
    assert [w for w in _after(argv, "-drive") if "pflash" in w] == [
        f"if=pflash,format=raw,unit=0,readonly=on,file={PFLASH[0]}",
        f"if=pflash,format=raw,unit=1,file={PFLASH[1]}"]
    # the firmware comes before the boot words (a direct kernel boots through OVMF)
    kernel = _build(_spec(firmware="uefi", kernel_path="/boot/vmlinuz"), pflash=PFLASH)
    assert kernel.index("-drive") < kernel.index("-kernel")


def test_uefi_without_ovmf_or_with_pflash_disks_is_refused():
    with pytest.raises(errors.HypervisorError, match="OVMF"):
        _build(_spec(firmware="uefi"))
    with pytest.raises(errors.HypervisorError, match="disk_type=pflash"):
        _build(_spec(firmware="uefi", disk_type="pflash"), pflash=PFLASH)
    with pytest.raises(errors.HypervisorError, match="firmware"):
        _build(_spec(firmware="coreboot"), pflash=PFLASH)


def test_q35_machine_with_the_acceleration_as_usual():
    argv = _build(_spec(machine_version="q35", firmware="uefi"), pflash=PFLASH,
                  accel=cmdline.ACCEL_KVM)
    assert _after(argv, "-machine") == ["q35"] and _after(argv, "-accel") == ["kvm"]


def test_tpm2_is_a_tis_device_on_swtpms_socket():
    argv = _build(_spec(tpm="tpm2"))
    assert "socket,id=chrtpm,path=swtpm.sock" in _after(argv, "-chardev")
    assert _after(argv, "-tpmdev") == ["emulator,id=tpm0,chardev=chrtpm"]
    assert "tpm-tis,tpmdev=tpm0" in _after(argv, "-device")
    with pytest.raises(errors.HypervisorError, match="tpm"):
        _build(_spec(tpm="tpm1.2"))


def test_firmware_and_tpm_are_kvm_parameters_with_their_choices():
    table = parameters.HV_PARAMETERS[constants.HT_KVM]
    assert table["firmware"].default == "bios" and table["firmware"].choices == ("bios", "uefi")
    assert table["tpm"].default == "none" and table["tpm"].choices == ("none", "tpm2")
    with pytest.raises(errors.ParameterError):
        table["firmware"].convert("efi", "kvm")
