"""The kvm hypervisor class without qemu: files, states, parameters, refusals."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fakes.fakeqmp import FakeQmp
from ganeti import constants, errors, hypervisor, parameters, pathutils, serializer
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import consoles
from ganeti.hypervisor.kvm import hypervisor as kvmhv
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor


@pytest.fixture
def hv(tmp_path) -> KvmHypervisor:
    return KvmHypervisor(pathutils.Paths(root=str(tmp_path)), clock=lambda: 1000.0,
                         kvm_device=str(tmp_path / "no-kvm"), accel="auto")


def _record(hv: KvmHypervisor, name: str, pid: int | None, start: float = 990.0,
            accel: str = "tcg") -> None:
    idir = hv.instance_dir(name)
    os.makedirs(idir)
    spec = base.InstanceSpec(name=name, memory=64, vcpus=2)
    with open(os.path.join(idir, kvmhv.RUNTIME_FILE), "w") as fh:
        fh.write(serializer.dumps({"name": name, "spec": serializer.to_data(spec),
                                   "disks": [], "argv": [], "accel": accel,
                                   "start_time": start}))
    if pid is not None:
        with open(os.path.join(idir, "pid"), "w") as fh:
            fh.write(f"{pid}\n")


def test_registered(tmp_path):
    made = hypervisor.get_hypervisor(constants.HT_KVM, pathutils.Paths(root=str(tmp_path)))
    assert isinstance(made, KvmHypervisor)
    assert made.run_dir == os.path.join(str(tmp_path), "var/run/ganeti/kvm-hypervisor")


def test_parameter_table_is_the_master_table():
    assert set(KvmHypervisor.PARAMETERS) == set(parameters.HV_PARAMETERS[constants.HT_KVM])
    KvmHypervisor.check_parameter_syntax(parameters.defaults("hv", constants.HT_KVM))
    with pytest.raises(errors.ParameterError, match="cpu_mask"):
        KvmHypervisor.check_parameter_syntax({"cpu_mask": "1-"})
    with pytest.raises(errors.ParameterError, match="Unknown"):
        KvmHypervisor.check_parameter_syntax({"xen_thing": 1})


def test_node_validation_checks_files_and_unsupported_modes(hv, tmp_path):
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(b"k")
    hv.validate_parameters({"kernel_path": str(kernel), "kvm_path": sys.executable})
    with pytest.raises(errors.HypervisorError, match="initrd_path"):
        hv.validate_parameters({"initrd_path": str(tmp_path / "missing"),
                                "kvm_path": sys.executable})
    with pytest.raises(errors.HypervisorError, match="use_chroot"):
        hv.validate_parameters({"use_chroot": True, "kvm_path": sys.executable})
    with pytest.raises(errors.HypervisorError, match="pool"):
        hv.validate_parameters({"security_model": "pool", "kvm_path": sys.executable})


def test_node_validation_needs_ovmf_for_uefi(hv, tmp_path, monkeypatch):
    from ganeti.hypervisor.kvm import firmware
    monkeypatch.setattr(firmware, "OVMF_DIR", str(tmp_path / "no-ovmf"))
    hv.validate_parameters({"firmware": "bios", "kvm_path": sys.executable})
    with pytest.raises(errors.HypervisorError, match="firmware=uefi: no OVMF"):
        hv.validate_parameters({"firmware": "uefi", "kvm_path": sys.executable})
    ovmf = tmp_path / "ovmf"
    ovmf.mkdir()
    for name in ("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"):
        (ovmf / name).write_bytes(b"fw")
    monkeypatch.setattr(firmware, "OVMF_DIR", str(ovmf))
    hv.validate_parameters({"firmware": "uefi", "kvm_path": sys.executable})


def test_acceleration_follows_the_device(hv, tmp_path):
    assert hv.acceleration() == "tcg"
    dev = tmp_path / "fake-kvm"
    dev.write_bytes(b"")
    assert KvmHypervisor(hv.paths, kvm_device=str(dev), accel="auto").acceleration() == "kvm"


def test_acceleration_forced_by_the_environment(hv, tmp_path, monkeypatch):
    dev = tmp_path / "fake-kvm"
    dev.write_bytes(b"")
    monkeypatch.setenv(constants.ENV_KVM_ACCEL, "tcg")
    assert KvmHypervisor(hv.paths, kvm_device=str(dev)).acceleration() == "tcg"
    assert KvmHypervisor(hv.paths, kvm_device=str(dev), accel="auto").acceleration() == "kvm"
    monkeypatch.setenv(constants.ENV_KVM_ACCEL, "kvm")
    assert KvmHypervisor(hv.paths).acceleration() == "kvm"


@pytest.mark.parametrize("status,state", [
    ("running", base.HV_STATE_RUNNING), ("paused", base.HV_STATE_PAUSED),
    ("prelaunch", base.HV_STATE_PAUSED), ("shutdown", base.HV_STATE_SHUTDOWN),
    ("inmigrate", base.HV_STATE_INCOMING), ("postmigrate", base.HV_STATE_MIGRATING),
    ("guest-panicked", base.HV_STATE_CRASHED), ("something-new", base.HV_STATE_CRASHED),
])
def test_qmp_states(status, state):
    assert kvmhv.qmp_state(status) == state


def test_nothing_known_on_an_empty_node(hv):
    assert hv.list_instances() == []
    assert hv.get_instance_info("i1") is None
    with pytest.raises(errors.HypervisorError, match="not running"):
        hv.stop_instance("i1")
    with pytest.raises(errors.HypervisorError, match="not running"):
        hv.reboot_instance("i1")


def test_record_without_process_is_crashed_and_stop_cleans_it(hv):
    _record(hv, "i1", pid=None)
    info = hv.get_instance_info("i1")
    assert info is not None
    assert (info["state"], info["memory"], info["vcpus"], info["time"]) == (
        base.HV_STATE_CRASHED, 64, 2, 10.0)
    assert hv.list_instances() == ["i1"]
    hv.stop_instance("i1", timeout=0)
    assert hv.list_instances() == []
    assert not os.path.exists(hv.instance_dir("i1"))


def test_a_reused_pid_is_not_taken_for_the_instance(hv):
    # a live process whose command line is not "-name i1": a recycled pid
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "-name", "i2"])
    try:
        _record(hv, "i1", pid=proc.pid)
        assert hv.get_instance_info("i1")["state"] == base.HV_STATE_CRASHED
        hv.stop_instance("i1", timeout=0)
        assert proc.poll() is None, "a foreign process must not be killed"
    finally:
        proc.kill()
        proc.wait()


def test_start_refuses_missing_disks(hv, tmp_path):
    spec = base.InstanceSpec(name="i1", hvparams={"kvm_path": sys.executable})
    with pytest.raises(errors.HypervisorError, match="does not exist"):
        hv.start_instance(spec, [str(tmp_path / "nodisk")])
    assert hv.list_instances() == []


@pytest.mark.parametrize("nic,message", [
    (dict(mode=constants.NIC_MODE_ROUTED, vlan=".5"), "NIC 0: A routed NIC takes no VLAN"),
    (dict(mode=constants.NIC_MODE_OVS), "NIC 0: An openvswitch NIC needs a link"),
    (dict(mode="macvtap", link="x"), "NIC 0: Unknown NIC mode"),
    (dict(link="br0", vlan=".99999"), "NIC 0: Invalid NIC VLAN"),
], ids=["routed-vlan", "ovs-no-link", "unknown-mode", "bad-vlan"])
def test_start_refuses_bad_nics_before_qemu(hv, nic, message):
    spec = base.InstanceSpec(name="i1", hvparams={"kvm_path": sys.executable},
                             nics=(base.NicSpec(mac="aa:00:00:00:00:01", **nic),))
    with pytest.raises(errors.HypervisorError, match=message):
        hv.start_instance(spec, [])
    assert hv.list_instances() == []


def test_console_is_the_serial_socket_or_vnc(hv):
    cons = hv.get_console(base.InstanceSpec(name="i1", hvparams={"serial_console": True}), "n1")
    assert cons["kind"] == base.CONS_SSH and cons["host"] == "n1"
    assert cons["command"] == consoles.serial_command(hv.serial_socket("i1"))
    cons = hv.get_console(base.InstanceSpec(
        name="i1", hvparams={"serial_console": False, "vnc_bind_address": "0.0.0.0"}), "n1")
    assert cons["kind"] == base.CONS_VNC
    cons = hv.get_console(base.InstanceSpec(name="i1", hvparams={"serial_console": False}), "n1")
    assert cons["kind"] == base.CONS_MESSAGE


def test_balloon_of_a_dead_instance_is_refused(hv):
    with pytest.raises(errors.HypervisorError, match="change the memory of instance i1: it is"
                                                      " not running"):
        hv.balloon_instance_memory("i1", 128)


def test_migration_of_a_dead_instance_is_refused(hv):
    with pytest.raises(errors.HypervisorError, match="i1: it is not running"):
        hv.migration_info("i1")
    _record(hv, "i2", pid=None)
    with pytest.raises(errors.HypervisorError, match="i2: it is not running"):
        hv.migrate_instance("i2", "node2", "127.0.0.1", True, {"port": 8102})
    status = hv.get_migration_status("i2")
    assert status["status"] == base.MIGRATION_STATUS_FAILED
    assert "not running" in status["info"]


@pytest.mark.parametrize("accel,live,stop", [("tcg", True, True), ("kvm", True, False),
                                             ("kvm", False, True), ("tcg", False, True)])
def test_a_live_migration_under_tcg_is_copied_paused(hv, monkeypatch, qmp_peer, accel, live,
                                                      stop):
    # qemu's TCG loses guest writes during a live copy (doc/kvm.md, "Migration")
    _record(hv, "i3", pid=None, accel=accel)
    fake = qmp_peer({"query-status": {"status": "running"}})   # a running source
    monkeypatch.setattr(hv, "_pid", lambda name: 4242)
    monkeypatch.setattr(hv, "_qmp", fake.session)
    hv.migrate_instance("i3", "node2", "127.0.0.1", live, {"port": 8102})
    assert fake.names()[1:] == ["migrate-set-capabilities", "migrate-set-parameters",
                                *(["stop"] if stop else []), "migrate"]
    record = hv.migration_state("i3")
    assert record["live"] is live and record["run"] is True   # a failure resumes it


def test_node_info_from_proc(hv):
    info = hv.get_node_info()
    assert info["memory_total"] > 0 and 0 <= info["memory_free"] <= info["memory_total"]
    assert info["cpu_total"] >= 1 and info["accel"] == "tcg"


def _power_button(qmp_peer, presses: int) -> FakeQmp:
    """A QMP peer whose guest powers off on the ``presses``-th ACPI power-button press."""
    def status() -> dict:
        done = fake.names().count("system_powerdown") >= presses
        return {"status": "shutdown" if done else "running"}
    fake = qmp_peer({"query-status": status})
    return fake


def test_powerdown_presses_the_button_again_while_waiting(tmp_path, monkeypatch, qmp_peer):
    now = [0.0]
    hv = KvmHypervisor(pathutils.Paths(root=str(tmp_path)), monotonic=lambda: now[0],
                       sleep=lambda s: now.__setitem__(0, now[0] + s), accel="auto")
    fake = _power_button(qmp_peer, presses=3)
    monkeypatch.setattr(hv, "_qmp", fake.session)
    assert hv._powerdown("inst1", timeout=60.0)
    # pressed at 0 s, then on the schedule (0.5 s, then 1 s later) until the guest obeyed
    assert fake.names().count("system_powerdown") == 3
    assert now[0] == pytest.approx(1.5, abs=0.5)


def test_powerdown_presses_until_the_timeout(tmp_path, monkeypatch, qmp_peer):
    now = [0.0]
    hv = KvmHypervisor(pathutils.Paths(root=str(tmp_path)), monotonic=lambda: now[0],
                       sleep=lambda s: now.__setitem__(0, now[0] + s), accel="auto")
    fake = _power_button(qmp_peer, presses=1000)
    monkeypatch.setattr(hv, "_qmp", fake.session)
    hv._powerdown("inst1", timeout=10.5)
    # at 0, 0.5, 1.5, 2.5, 4, 6 and 9 s (each at the 0.2 s poll after it)
    assert fake.names().count("system_powerdown") == 7
    assert now[0] == pytest.approx(10.5, abs=0.5)


def test_every_console_serial_first(hv):
    spec = base.InstanceSpec(name="i1", hvparams={"serial_console": True,
                                                   "vnc_bind_address": "0.0.0.0"})
    assert [c["kind"] for c in hv.get_consoles(spec, "n1")] == [base.CONS_SSH, base.CONS_VNC]
    assert hv.get_console(spec, "n1")["kind"] == base.CONS_SSH
    none = base.InstanceSpec(name="i1", hvparams={"serial_console": False})
    assert [c["kind"] for c in hv.get_consoles(none, "n1")] == [base.CONS_MESSAGE]


def _vnc_record(hv: KvmHypervisor, name: str, bind: str, port: int | None) -> None:
    os.makedirs(hv.instance_dir(name))
    spec = base.InstanceSpec(name=name, hvparams={"vnc_bind_address": bind})
    record = {"name": name, "spec": serializer.to_data(spec), "disks": [], "argv": [],
              "accel": "tcg", "start_time": 990.0}
    if port is not None:
        record["vnc_port"] = port
    with open(os.path.join(hv.instance_dir(name), kvmhv.RUNTIME_FILE), "w") as fh:
        fh.write(serializer.dumps(record))


def test_the_vnc_console_address_comes_from_the_runtime_record(hv):
    _vnc_record(hv, "i1", "0.0.0.0", 5903)
    _vnc_record(hv, "i2", "", None)
    assert hv.vnc_console_address("i1") == ("127.0.0.1", 5903)
    assert hv.vnc_console_address("i2") is None
    assert hv.vnc_console_address("nosuch") is None
    vnc = hv.get_consoles(base.InstanceSpec(name="i1", hvparams={
        "vnc_bind_address": "0.0.0.0"}), "node1")[-1]
    assert (vnc["kind"], vnc["host"], vnc["port"], vnc["display"]) == (
        base.CONS_VNC, "node1", 5903, 3)


def test_a_vnc_port_is_one_no_instance_of_the_node_has(hv):
    first = kvmhv.cmdline.VNC_PORTS.start
    _vnc_record(hv, "i1", "127.0.0.1", first)
    runtimes = map(hv.read_runtime, hv.list_instances())
    port = kvmhv.consoles.start_port({"vnc_bind_address": "127.0.0.1"}, runtimes)
    assert port != first and port in kvmhv.cmdline.VNC_PORTS
    assert kvmhv.consoles.start_port({"vnc_bind_address": ""}, []) is None
    with pytest.raises(errors.HypervisorError, match="interface name"):
        kvmhv.consoles.start_port({"vnc_bind_address": "eth0"}, [])


def test_a_migration_target_listens_for_vnc_on_its_own_port():
    source = ["kvm", "-name", "i1", "-vnc", "127.0.0.1:1,password=on", "-m", "64"]
    built = ["kvm", "-vnc", "127.0.0.1:7,password=on"]
    assert kvmhv.consoles.with_vnc_of(source, built) == [
        "kvm", "-name", "i1", "-vnc", "127.0.0.1:7,password=on", "-m", "64"]
    assert kvmhv.consoles.with_vnc_of(source, ["kvm"]) == source
