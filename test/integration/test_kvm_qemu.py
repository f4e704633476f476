"""The kvm hypervisor running real qemu processes (TCG when /dev/kvm is not usable).

The guest is a 512-byte boot sector (test/fakes/bootsector.py) that prints a
line on the serial console and then halts or powers the machine off.  A few
short boots only: start, info from QMP, a second hypervisor object taking
over (a node-daemon restart), reset, stop past an ignored ACPI powerdown;
a guest powering itself off -> shutdown (USER_down); a killed qemu ->
crashed (ERROR_down); a bad command line refused with qemu's message.

The first test uses the node's real choice (/dev/kvm when usable); the others
force TCG, which boots this guest far faster where KVM is nested (measured
here: 3.7 s to the guest's power-off under nested KVM, 0.08 s under TCG).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess

import guest_helpers
import pytest

from ganeti import constants, errors, parameters, pathutils
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import hotplug
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from fakes import bootsector
from test.integration import host_helpers

pytestmark = pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                reason=host_helpers.qemu_reason() or "qemu runs")


def _wait(predicate, what: str, timeout: float = 60.0):
    return guest_helpers.wait_for(predicate, what, timeout, poll=0.1)


def _spec(name: str, **hvp) -> base.InstanceSpec:
    params = parameters.defaults("hv", constants.HT_KVM)
    params.update(hvp)
    return base.InstanceSpec(name=name, uuid="0b0e4f5c-2f0e-4d36-9a30-5d7b0c1d2e3f",
                             memory=64, vcpus=1, hvparams=params,
                             nics=(base.NicSpec(mac="aa:00:00:00:00:01", link="no-such-br"),))


def _serial(hv: KvmHypervisor, name: str) -> bytes:
    try:
        with open(hv.serial_log(name), "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return b""


@pytest.fixture
def node(tmp_path):
    # a long root, as on the virtual cluster: socket paths beyond sun_path's 108 bytes
    root = tmp_path / ("node-root-" + "x" * 80)
    paths = pathutils.Paths(root=str(root))
    hv = KvmHypervisor(paths)
    yield hv, tmp_path
    guest_helpers.stop_all([hv])


def test_start_info_restart_reset_and_stop(node):
    hv, tmp = node
    disk = bootsector.disk_image(str(tmp / "disk0"))
    hv.start_instance(_spec("inst1.example.com"), [disk])
    assert len(hv.qmp_socket("inst1.example.com")) > 108
    _wait(lambda: bootsector.MESSAGE in _serial(hv, "inst1.example.com"), "the console line")
    info = hv.get_instance_info("inst1.example.com")
    assert info["state"] == base.HV_STATE_RUNNING
    assert (info["memory"], info["vcpus"]) == (64, 1)
    assert info["accel"] == hv.acceleration()
    assert hv.qmp_command("inst1.example.com", "query-status")["status"] == "running"
    # the user-mode fallback NIC is there, with our MAC
    assert "aa:00:00:00:00:01" in hv.qmp_command(
        "inst1.example.com", "human-monitor-command", **{"command-line": "info network"})

    with pytest.raises(errors.HypervisorError, match="already running"):
        hv.start_instance(_spec("inst1.example.com"), [disk])

    # a node-daemon restart: a new object finds the instance from its files
    again = KvmHypervisor(hv.paths)
    assert again.list_instances() == ["inst1.example.com"]
    assert again.get_instance_info("inst1.example.com")["state"] == base.HV_STATE_RUNNING

    again.reboot_instance("inst1.example.com")
    _wait(lambda: _serial(hv, "inst1.example.com").count(bootsector.MESSAGE) >= 2,
          "the console line after the reset")
    pid = info["pid"]

    # the guest has no ACPI handler: the soft part times out, then quit
    again.stop_instance("inst1.example.com", timeout=0.5)
    assert again.list_instances() == []
    assert not os.path.exists(f"/proc/{pid}/cmdline") or \
        b"inst1.example.com" not in open(f"/proc/{pid}/cmdline", "rb").read()


def _tcg(hv: KvmHypervisor, tmp) -> KvmHypervisor:
    return KvmHypervisor(hv.paths, kvm_device=str(tmp / "no-kvm-device"))


def test_guest_poweroff_is_user_down(node):
    hv, tmp = node
    hv = _tcg(hv, tmp)
    disk = bootsector.disk_image(str(tmp / "disk0"), poweroff=True)
    hv.start_instance(_spec("inst2"), [disk])
    assert hv.get_instance_info("inst2")["accel"] == "tcg"
    info = _wait(lambda: (i := hv.get_instance_info("inst2"))["state"] != base.HV_STATE_RUNNING
                 and i, "the guest powering off")
    assert info["state"] == base.HV_STATE_SHUTDOWN
    assert info["qmp_status"] == "shutdown"
    hv.stop_instance("inst2", timeout=0)
    assert hv.get_instance_info("inst2") is None


def test_killed_qemu_is_crashed(node):
    hv, tmp = node
    hv = _tcg(hv, tmp)
    disk = bootsector.disk_image(str(tmp / "disk0"))
    hv.start_instance(_spec("inst3", cpu_mask="0"), [disk])
    pid = hv.get_instance_info("inst3")["pid"]
    threads = [c["thread-id"] for c in hv.qmp_command("inst3", "query-cpus-fast")]
    assert [os.sched_getaffinity(t) for t in threads] == [{0}]   # cpu_mask=0
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: hv.get_instance_info("inst3")["state"] == base.HV_STATE_CRASHED,
          "the crashed state")
    assert hv.list_instances() == ["inst3"]
    hv.stop_instance("inst3", timeout=0)
    assert hv.list_instances() == []


def test_bad_command_line_is_refused_with_qemus_words(node):
    hv, tmp = node
    with pytest.raises(errors.HypervisorError, match="no-such-option"):
        hv.start_instance(_spec("inst4", kvm_extra="-no-such-option"), [])
    assert hv.list_instances() == []


def test_a_block_job_shows_in_the_runtime_jobs(node):
    """A speed-limited drive-mirror: a ``block`` runtime job with its limit, a rate
    once two samples exist, gone when the job ends (doc/progress.md, "Runtime jobs")."""
    hv, tmp = node
    hv = _tcg(hv, tmp)
    disk = bootsector.disk_image(str(tmp / "disk0"))
    with open(disk, "r+b") as fh:     # data the mirror must really copy
        fh.seek(1 << 20)
        fh.write(os.urandom(16 << 20))
    hv.start_instance(_spec("inst3"), [disk])
    assert "jobs" not in hv.get_instance_info("inst3")
    # 1 MiB/s in bursts of at most 256 KiB (buf-size): copying the 16 MiB takes
    # 15 s or more however fast the machine is (without a small buffer qemu
    # copies a whole 16 MiB buffer at once before the limit holds it)
    hv.qmp_command("inst3", "drive-mirror", device="disk0", target=str(tmp / "copy.img"),
                   format="raw", sync="full", speed=1 << 20, mode="absolute-paths",
                   granularity=64 << 10, **{"buf-size": 256 << 10})

    def copying() -> dict:
        """The mirror's runtime job; it must still be copying (neither gone nor done)."""
        jobs = hv.get_instance_info("inst3").get("jobs") or []
        assert len(jobs) == 1, f"expected the mirror alone, got {jobs}"
        assert jobs[0]["info"]["cur"] < jobs[0]["info"]["end"], "the mirror copied everything"
        return jobs[0]

    first = copying()
    assert first["state"] == "normal"
    info = first["info"]
    assert (info["jobType"], info["opType"], info["device"], info["job"], info["bandwidth"]) \
        == ("block", "mirror", "disk/0", "disk0", 1)
    assert info["end"] >= 17 << 20 and info["rate"] == 0.0
    # a second sample once the copy moved on (the rate is measured, not asserted in time)
    later = _wait(lambda: (i := copying()["info"])["cur"] > info["cur"] and i,
                  "the mirror to copy more")
    assert later["rate"] > 0 and later["eta"] is not None
    assert os.path.exists(os.path.join(hv.instance_dir("inst3"), "job-samples.json"))
    hv.qmp_command("inst3", "block-job-cancel", device="disk0")
    _wait(lambda: "jobs" not in hv.get_instance_info("inst3"), "the block job to end")
    assert not os.path.exists(os.path.join(hv.instance_dir("inst3"), "job-samples.json"))
    hv.stop_instance("inst3", timeout=0)


def _make_bridge(name: str) -> str:
    """Create bridge ``name`` (root only); '' on success, else why not."""
    if os.geteuid() != 0:
        return "creating a bridge needs root"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun for tap devices"
    res = subprocess.run(["ip", "link", "add", name, "type", "bridge"], capture_output=True,
                         text=True, check=False)
    return "" if res.returncode == 0 else f"cannot create a bridge: {res.stderr.strip()}"


def test_a_bridged_nic_is_a_tap_on_its_bridge(node):
    hv, tmp = node
    hv = _tcg(hv, tmp)
    bridge = f"gtbr{os.getpid() % 100000}"
    why = _make_bridge(bridge)
    if why:
        pytest.skip(why)
    try:
        disk = bootsector.disk_image(str(tmp / "disk0"))
        spec = _spec("inst5")
        spec = dataclasses.replace(spec, nics=(base.NicSpec(mac="aa:00:00:00:00:05",
                                                            link=bridge),))
        hv.start_instance(spec, [disk])
        taps = os.listdir(f"/sys/class/net/{bridge}/brif")
        assert len(taps) == 1, taps
        tap = taps[0]
        # the tap qemu opened is up, enslaved to the bridge, and named after the NIC
        assert os.path.realpath(f"/sys/class/net/{tap}/master").endswith("/" + bridge)
        with open(f"/sys/class/net/{tap}/flags") as fh:
            assert int(fh.read(), 16) & 0x1            # IFF_UP
        argv = hv.read_runtime("inst5")["argv"]
        assert any(f"ifname={tap}" in word for word in argv), argv
        # a NIC hotplugged on the bridge: a second tap, up and enslaved to it too
        hv.hot_add_nic("inst5", base.NicSpec(mac="aa:00:00:00:00:06", link=bridge,
                                             uuid="5ab1c0de-0000-4000-8000-000000000006"), 1)
        (hot,) = set(os.listdir(f"/sys/class/net/{bridge}/brif")) - {tap}
        assert hot == hotplug.tap_name("inst5", "h0")
        assert os.path.realpath(f"/sys/class/net/{hot}/master").endswith("/" + bridge)
        with open(f"/sys/class/net/{hot}/flags") as fh:
            assert int(fh.read(), 16) & 0x1
        hv.stop_instance("inst5", timeout=0)
        # qemu closed the taps: they are gone from the bridge and from the system
        _wait(lambda: not os.path.exists(f"/sys/class/net/{tap}")
              and not os.path.exists(f"/sys/class/net/{hot}"), "the taps to go away")
    finally:
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
